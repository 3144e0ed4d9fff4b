import NIOPosix
