public import FanoutWire
public import NIOSSL

/// How a `FanoutServer` listens and the limits it announces in WELCOME.
public struct ServerConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port (`FanoutServer.localPort` tells which).
    public var port: Int
    /// The largest frame payload either side may send.
    public var maximumPayloadSize: Int
    /// A connection that sends nothing for this long gets GOAWAY and is closed.
    public var idleTimeout: Duration
    /// The largest total credit a consumer may hold (the engine allows at most 65536).
    public var maximumCredit: Int
    /// Requests worked on at once per connection; past it the connection is not read.
    public var maximumInFlight: Int
    /// Buffered output above this many bytes makes a connection unwritable ...
    public var writeBufferHighWaterMark: Int
    /// ... and a connection that stays unwritable this long is closed (a consumer that stopped reading).
    public var stallTimeout: Duration
    /// A connection must finish HELLO (and the TLS handshake) within this, or it is closed.
    public var handshakeTimeout: Duration = .seconds(10)
    /// Connections that have not finished HELLO; past it, new ones are closed at once.
    public var maximumPendingHandshakes: Int = 256
    /// A refused HELLO from an address that failed within the last minute is answered this much
    /// later, doubling with each further failure ...
    public var authenticationFailureDelay: Duration = .milliseconds(100)
    /// ... up to this.
    public var maximumAuthenticationFailureDelay: Duration = .seconds(5)
    /// TLS for every connection (nil: plain TCP). `ServerConfiguration.tls(certificate:privateKey:clientCA:)`
    /// builds the usual one from PEM files.
    public var tls: TLSConfiguration?

    public init(
        host: String = "127.0.0.1",
        port: Int = 7400,
        maximumPayloadSize: Int = FrameHeader.defaultMaximumPayloadSize,
        idleTimeout: Duration = .seconds(60),
        maximumCredit: Int = 65_536,
        maximumInFlight: Int = 1024,
        writeBufferHighWaterMark: Int = 1024 * 1024,
        stallTimeout: Duration = .seconds(10)
    ) {
        self.host = host
        self.port = port
        self.maximumPayloadSize = maximumPayloadSize
        self.idleTimeout = idleTimeout
        self.maximumCredit = maximumCredit
        self.maximumInFlight = maximumInFlight
        self.writeBufferHighWaterMark = writeBufferHighWaterMark
        self.stallTimeout = stallTimeout
    }
}

extension ServerConfiguration {
    /// A server TLS configuration from PEM files: the certificate chain (leaf first) and its private
    /// key, TLS 1.2 or 1.3; with `clientCA`, clients must present a certificate that CA signed (mTLS).
    public static func tls(certificate: String, privateKey: String, clientCA: String? = nil) throws -> TLSConfiguration {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: privateKey, format: .pem))
        )
        configuration.minimumTLSVersion = .tlsv12
        if let clientCA {
            configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(clientCA))
            configuration.certificateVerification = .noHostnameVerification
        }
        return configuration
    }
}
