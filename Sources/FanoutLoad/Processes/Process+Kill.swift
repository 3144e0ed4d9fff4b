import Foundation

extension Process {
    /// SIGKILL (which cannot be blocked or handled) unless it has exited, then waits until it is gone.
    func killAndWait() {
        if self.isRunning {
            kill(self.processIdentifier, SIGKILL)
        }
        self.waitUntilExit()
    }
}
