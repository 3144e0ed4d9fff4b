@main struct FanoutCommand { static func main() {} }
