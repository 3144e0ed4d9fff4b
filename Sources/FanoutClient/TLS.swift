internal import NIOCore
public import NIOSSL
internal import NIOTLS

extension FanoutClient {
    /// How a client speaks TLS to fanoutd: whom it trusts, the name it expects, and its own
    /// certificate when the server asks for one (mTLS).
    public struct TLS: Sendable {
        public var configuration: TLSConfiguration
        /// The name the server's certificate must carry; nil: the host connected to.
        public var serverHostname: String?

        public init(configuration: TLSConfiguration, serverHostname: String? = nil) {
            self.configuration = configuration
            self.serverHostname = serverHostname
        }

        /// TLS 1.2 or 1.3, trusting the CA certificates of the PEM file `trustRootsFile` (nil: the
        /// system's), with a client certificate and key (PEM files) when given.
        public static func make(
            trustRootsFile: String? = nil,
            serverHostname: String? = nil,
            clientCertificateFile: String? = nil,
            clientKeyFile: String? = nil
        ) throws -> TLS {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.minimumTLSVersion = .tlsv12
            if let trustRootsFile {
                configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(trustRootsFile))
            }
            if let clientCertificateFile, let clientKeyFile {
                configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(clientCertificateFile).map { .certificate($0) }
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: clientKeyFile, format: .pem))
            }
            return TLS(configuration: configuration, serverHostname: serverHostname)
        }

        static func isIPAddress(_ host: String) -> Bool {
            host.contains(":") || host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." }
        }
    }
}

/// Completes its promise when the TLS handshake does, or fails it with the handshake's error (a
/// certificate the client does not trust, a server that wants a client certificate), so that
/// `connect` says why instead of failing its HELLO on a closed channel.
final class TLSHandshakeWaiter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private var promise: EventLoopPromise<Void>?

    init(promise: EventLoopPromise<Void>) {
        self.promise = promise
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            self.promise?.succeed()
            self.promise = nil
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.promise?.fail(error)
        self.promise = nil
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.promise?.fail(ChannelError.ioOnClosedChannel)
        self.promise = nil
        context.fireChannelInactive()
    }
}

@available(*, unavailable)
extension TLSHandshakeWaiter: Sendable {}
