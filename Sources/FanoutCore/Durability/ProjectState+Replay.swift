extension ProjectState {
    /// Applies one logged change, as the engine applied it when it was acknowledged.
    /// - Throws: `INTERNAL` when the record cannot apply (the log disagrees with itself).
    mutating func replay(_ record: WALRecord) throws(FanoutError) {
        switch record {
        case .createProject, .deleteProject:
            break  // handled by the engine's project map
        case .register(_, let r):
            let result = try self.register(
                RegistrationRequest(
                    offeredFID: r.fid.string,
                    token: r.token,
                    platform: r.platform,
                    appID: r.appID,
                    device: r.device,
                    apnsToken: r.apnsToken
                ),
                now: r.at
            )
            guard !result.fidWasAssigned else {
                throw FanoutError(.internal, "replay: the logged FID \(r.fid) was not free")
            }
        case .refreshToken(_, let fid, let token, let at):
            _ = try self.refreshToken(.fid(fid), to: token, now: at)
        case .touch(_, let fid, let at):
            _ = try self.touch(.fid(fid), now: at)
        case .deleteInstallation(_, let fid):
            _ = try self.delete(fid)
        case .bindDevice(_, let fid, let user, let anonymous, let at):
            _ = try self.bind(.fid(fid), to: user, anonymous: anonymous, now: at)
        case .signOut(_, let user, let fid):
            _ = try self.signOut(user, on: .fid(fid))
        case .linkUser(_, let anonymous, let permanent, let at):
            _ = try self.link(anonymous: anonymous, to: permanent, now: at)
        case .cleanUpAnonymousUsers(_, let at):
            _ = self.cleanUpAnonymousUsers(now: at)
        case .pruneExpiredInstallations(_, let at):
            _ = self.pruneExpired(now: at)
        case .subscribe(_, let topic, let fids):
            _ = try self.subscribe(fids.map(\.string), to: topic)
        case .unsubscribe(_, let topic, let fids):
            _ = try self.unsubscribe(fids.map(\.string), from: topic)
        }
    }
}

extension WALRecord {
    /// The project the record belongs to.
    var project: ProjectID {
        switch self {
        case .createProject(let p), .deleteProject(let p), .register(let p, _), .refreshToken(let p, _, _, _),
            .touch(let p, _, _), .deleteInstallation(let p, _), .bindDevice(let p, _, _, _, _), .signOut(let p, _, _),
            .linkUser(let p, _, _, _), .cleanUpAnonymousUsers(let p, _), .pruneExpiredInstallations(let p, _),
            .subscribe(let p, _, _), .unsubscribe(let p, _, _):
            return p
        }
    }
}
