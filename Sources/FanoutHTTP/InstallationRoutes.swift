internal import FanoutCore
internal import FanoutKeys
internal import FanoutWire
internal import Hummingbird
internal import NIOCore

/// Firebase Installations' REST calls as the Firebase SDKs make them (docs/http-api.md): create
/// (authorised by the app's API key, `x-goog-api-key`), and, authorised by the installation's refresh
/// token (`Authorization: FIS_v2 <refresh token>`), a new auth token or the installation's deletion.
extension HTTPFront {
    static func addInstallationRoutes(
        to router: Router<BasicRequestContext>,
        credentials: (any InstallationCredentialsBackend)?,
        keys: @escaping @Sendable () -> APIKeyStore
    ) {
        router.post("/v1/projects/:project/installations") { request, context in
            do throws(FanoutError) {
                let project = try Self.project(context.parameters.get("project"))
                let key = try Self.apiKey(of: request.headers, keys: keys(), roles: [.admin, .app])
                guard key.projects.contains(project.value) else {
                    throw FanoutError(.permissionDenied, "the key does not cover project \(project.value)", field: "project")
                }
                let credentials = try Self.issuing(credentials)
                let registration = try Self.installationRequest(try await Self.body(request))
                let now = credentials.now()
                // An app's key creates only; an admin's re-issues an existing installation's credentials.
                let (result, issued) = try await credentials.createInstallation(registration, in: project, creatingOnly: key.role != .admin, now: now)
                let fid = result.installation.fid.description
                return Self.json(200, JSONWriter.encode(.object(JSONObject([
                    .init(key: "name", value: .string("projects/\(project.value)/installations/\(fid)")),
                    .init(key: "fid", value: .string(fid)),
                    .init(key: "refreshToken", value: .string(issued.refreshToken)),
                    .init(key: "authToken", value: Self.authToken(issued.authToken, now: now)),
                ]))))
            } catch {
                return Self.error(error)
            }
        }
        router.post("/v1/projects/:project/installations/:fid/authTokens:generate") { request, context in
            do throws(FanoutError) {
                let (project, fid, refresh) = try Self.installationCredential(request, context)
                let credentials = try Self.issuing(credentials)
                let now = credentials.now()
                let token = try await credentials.generateAuthToken(for: fid, in: project, presented: refresh, now: now)
                return Self.json(200, JSONWriter.encode(Self.authToken(token, now: now)))
            } catch {
                return Self.error(error)
            }
        }
        router.delete("/v1/projects/:project/installations/:fid") { request, context in
            do throws(FanoutError) {
                let (project, fid, refresh) = try Self.installationCredential(request, context)
                try await Self.issuing(credentials).deleteInstallation(fid, in: project, presented: refresh)
                return Self.json(200, "{}")
            } catch {
                return Self.error(error)
            }
        }
    }

    // MARK: - Pieces

    /// What issues the credentials the installation calls need; `FAILED_PRECONDITION` when the
    /// server issues none.
    static func issuing(_ credentials: (any InstallationCredentialsBackend)?) throws(FanoutError) -> any InstallationCredentialsBackend {
        guard let credentials else { throw FanoutError(.failedPrecondition, "this server issues no installation credentials") }
        return credentials
    }

    /// `{"token": ..., "expiresIn": "604800s"}`, as Firebase Installations answers an auth token.
    static func authToken(_ token: AuthToken, now: Int64) -> JSONValue {
        .object(JSONObject([
            .init(key: "token", value: .string(token.token)),
            .init(key: "expiresIn", value: .string("\(max(0, token.expiresAt.secondsSinceEpoch - now))s")),
        ]))
    }

    /// The path's project and FID, and the refresh token of `Authorization: FIS_v2`, which must be
    /// that installation's: a token of another installation or project proves nothing here.
    static func installationCredential(_ request: Request, _ context: BasicRequestContext) throws(FanoutError) -> (ProjectID, FID, RefreshToken) {
        let project = try Self.project(context.parameters.get("project"))
        guard let text = context.parameters.get("fid"), let fid = FID(text, allowingLegacy: true) else {
            throw FanoutError(.invalidArgument, "the FID in the path is not valid", field: "fid")
        }
        guard let header = request.headers[.authorization], header.hasPrefix("FIS_v2 ") else {
            throw FanoutError(.unauthenticated, "Request is missing required authentication credential: Authorization: FIS_v2 <refresh token>")
        }
        let refresh: RefreshToken
        do {
            refresh = try RefreshToken(parsing: Array(header.utf8.dropFirst("FIS_v2 ".utf8.count)))
        } catch {
            throw FanoutError(.unauthenticated, "Request had invalid authentication credentials: \(error.description)")
        }
        guard refresh.project == project.value, refresh.fid == fid.description else {
            throw FanoutError(.unauthenticated, "the refresh token is another installation's")
        }
        return (project, fid, refresh)
    }

    /// Create's body, `{"fid", "appId", "authVersion", "sdkVersion"}`: the platform comes from the
    /// app id (`1:NUMBER:android|ios|web:HASH`), an absent or unusable FID is replaced by the
    /// server's, as Firebase Installations does.
    static func installationRequest(_ body: [UInt8]) throws(FanoutError) -> RegistrationRequest {
        guard case .object(let object)? = try? JSONParser.parse(body) else {
            throw FanoutError(.invalidArgument, "the body is not a JSON object", field: "body")
        }
        var fid: String?
        var appID: String?
        for member in object.members {
            switch (member.key, member.value) {
            case ("fid", .string(let value)): fid = value
            case ("appId", .string(let value)): appID = value
            case ("authVersion", .string(let value)):
                guard value == "FIS_v2" else {
                    throw FanoutError(.invalidArgument, "authVersion must be FIS_v2", field: "authVersion")
                }
            case ("sdkVersion", .string): break
            default:
                throw FanoutError(.invalidArgument, "unknown or mistyped field \(member.key)", field: member.key)
            }
        }
        guard let appID, let id = AppID(appID) else {
            throw FanoutError(.invalidArgument, "appId is required: the Firebase app id", field: "appId")
        }
        let parts = appID.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 4, let platform = Platform(rawValue: String(parts[2])) else {
            throw FanoutError(.invalidArgument, "appId must be 1:NUMBER:android|ios|web:HASH: its platform decides the payloads", field: "appId")
        }
        return RegistrationRequest(offeredFID: fid, token: nil, platform: platform, appID: id, device: DeviceDetails(), apnsToken: nil)
    }
}
