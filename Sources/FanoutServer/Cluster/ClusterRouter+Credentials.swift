internal import FanoutCluster
internal import FanoutCore
internal import FanoutKeys
internal import FanoutWire
internal import NIOPosix

/// Installation credentials on a cluster (docs/scale-out.md, "Installation credentials and
/// devices"): the owner of an installation's shard issues them with its node's signing key
/// (REGISTER with credentials and ISSUE_CREDENTIALS are routed as any request about one
/// installation); every node serves every node's public keys; a rotation is the node's own.
extension ClusterRouter {
    /// GENERATE_AUTH_TOKEN, issued by the owner of the installation's shard. A device that
    /// presented its refresh token was checked against this node's copy of its shard, which may be
    /// a moment behind: the owner signed the token under the installation's current credentials,
    /// which must be the ones presented.
    func generateAuthToken(_ request: ClientRequest, fid: String, principal: Principal) async -> ServerMessage {
        let reply = await self.shards.perform(request, onShard: FID(fid, allowingLegacy: true).map(self.map.shard(of:)) ?? 0)
        if case .refresh(let presented) = principal, case .authToken(let token) = reply {
            guard let claims = try? self.shards.tokens?.verify(Array(token.token.utf8), now: self.now), claims.credentialID == presented.credentialID else {
                return .error(FanoutError(.unauthenticated, "the refresh token was replaced"))
            }
        }
        return reply
    }

    /// JWKS: every node's public keys.
    func jwks() -> ServerMessage {
        guard let signingKeys = self.signingKeys else { return .error(RequestExecutor.issuesNoCredentials) }
        do throws(FanoutError) {
            return .names(.jwks, [try signingKeys.jwks()])
        } catch {
            return .error(error)
        }
    }

    /// ROTATE_SIGNING_KEY: a new key for this node, published to the others; answers its `kid`.
    func rotateSigningKey() async -> ServerMessage {
        guard let signingKeys = self.signingKeys, let tokens = self.shards.tokens else { return .error(RequestExecutor.issuesNoCredentials) }
        let now = self.now
        // Files and NATS: off the concurrency pool.
        let rotated = try? await NIOThreadPool.singleton.runIfActive { () -> Result<String, FanoutError> in
            do throws(FanoutError) {
                return .success(try signingKeys.rotate(now: now, tokenLifetime: tokens.lifetime))
            } catch {
                return .failure(error)
            }
        }
        switch rotated {
        case .success(let id): return .names(.rotateSigningKey, [id])
        case .failure(let error): return .error(error)
        case nil: return .error(FanoutError(.unavailable, "the node is shutting down"))
        }
    }

    /// Now, in UNIX seconds, by the node's clock.
    private var now: Int64 { self.node.served(0).engine.clock.now().secondsSinceEpoch }
}
