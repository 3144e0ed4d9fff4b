import Dispatch
package import FanoutCluster
package import FanoutCore
package import FanoutKeys

/// The installation-token keys of a cluster (docs/scale-out.md, "Installation credentials"):
/// each node signs with its own keys, kept in its data directory (`SigningKeys`); their public
/// halves are published in the key-value bucket `fanout-signing-keys`, one entry per node, so that
/// any node accepts the tokens of any other and serves the whole cluster's JWK Set. Private keys
/// never leave their node.
package final class ClusterSigningKeys: Sendable {
    static let bucketName = "fanout-signing-keys"

    /// This node's own keys.
    package let own: SigningKeys
    private let bucket: KeyValueBucket
    private let nodeName: String
    /// Every node's public keys as last read from the bucket (this node's included): by `kid`, and
    /// in the order read (by node name, each node's current first), for the JWK Set.
    private let known = Locked<(byID: [String: ES256Key], listed: [(id: String, key: ES256Key)])>(([:], []))
    /// When the bucket was last read for a key id not known here.
    private let lastLookup = Locked<ContinuousClock.Instant?>(nil)
    /// Where those reads run, so that the caller waits for one at most `lookupWait`.
    private static let lookups = DispatchQueue(label: "fanout.cluster-signing-keys")
    package static let lookupInterval = Duration.seconds(1)
    static let lookupWait = DispatchTimeInterval.milliseconds(250)
    /// How long listing the nodes' entries waits for NATS's answer.
    static let listWait = Duration.seconds(1)

    /// Publishes this node's public keys and reads every node's.
    package init(own: SigningKeys, node: ClusterNode) throws(FanoutError) {
        self.own = own
        self.nodeName = node.node
        self.bucket = try JetStream.retrying(for: .seconds(30)) { () throws(FanoutError) in
            try KeyValueBucket(node.jetStream, name: Self.bucketName, replicas: node.replicas)
        }
        try self.publish()
        try self.refresh()
    }

    /// Tokens signed with this node's keys, accepted when signed by any node's.
    package func tokens(lifetime: Int64) -> InstallationTokens {
        InstallationTokens(keys: self.own, lifetime: lifetime) { [weak self] kid in self?.key(kid) }
    }

    /// Another node's public key `kid`. One not known here may be a key made a moment ago (a node
    /// that just joined, or rotated its key) that the periodic `refresh()` has not read yet: the
    /// bucket is read again then, at most once per `lookupInterval` (a token naming a key nobody
    /// has costs no more), waiting for the read at most `lookupWait`.
    private func key(_ kid: String) -> ES256Key? {
        if let key = self.known.withLock({ $0.byID[kid] }) { return key }
        let now = ContinuousClock.now
        let isDue = self.lastLookup.withLock { last in
            guard last.map({ now - $0 >= Self.lookupInterval }) ?? true else { return false }
            last = now
            return true
        }
        guard isDue else { return nil }
        let read = DispatchSemaphore(value: 0)
        Self.lookups.async {
            try? self.refresh()
            read.signal()
        }
        _ = read.wait(timeout: .now() + Self.lookupWait)
        return self.known.withLock { $0.byID[kid] }
    }

    /// Writes this node's public keys to its entry.
    package func publish() throws(FanoutError) {
        let text: String
        do {
            text = try self.own.publicKeysText()
        } catch {
            throw FanoutError(.internal, "the signing keys' public halves could not be written")
        }
        _ = try self.bucket.put(Self.key(self.nodeName), Array(text.utf8))
    }

    /// Reads every node's public keys again (after each of the node's turns: a key another node
    /// made is accepted here from then on). An entry that does not parse is skipped. The nodes'
    /// entries are only ever written, so they are listed in one request to the bucket's stream
    /// (`writtenKeys`) rather than through a consumer made for each read.
    package func refresh() throws(FanoutError) {
        var known: [String: ES256Key] = [:]
        var listed: [(id: String, key: ES256Key)] = []
        for key in try self.bucket.writtenKeys(timeout: Self.listWait).sorted() {
            guard let entry = try self.bucket.entry(key), let keys = SigningKeys.publicKeys(parsing: String(decoding: entry.value, as: UTF8.self)) else { continue }
            for (id, key) in keys where known[id] == nil {
                known[id] = key
                listed.append((id, key))
            }
        }
        self.known.withLock { $0 = (known, listed) }
    }

    /// Makes a new current key for this node, prunes the retired keys no token needs, and publishes
    /// the node's keys; returns the new key's id.
    package func rotate(now: Int64, tokenLifetime: Int64) throws(FanoutError) -> String {
        let id: String
        do {
            id = try self.own.rotate(now: now)
            try self.own.prune(now: now, tokenLifetime: tokenLifetime)
        } catch {
            throw FanoutError(.unavailable, "the new signing key could not be written")
        }
        try self.publish()
        try self.refresh()
        return id
    }

    /// Every node's public keys as one JWK Set.
    package func jwks() throws(FanoutError) -> String {
        do {
            return try SigningKeys.jwks(of: self.known.withLock { $0.listed })
        } catch {
            throw FanoutError(.internal, "the JWK Set could not be written")
        }
    }

    private static func key(_ node: String) -> String { "node-\(node)" }
}
