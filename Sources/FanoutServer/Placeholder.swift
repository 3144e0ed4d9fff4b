import NIOPosix
import ServiceLifecycle
import Logging
