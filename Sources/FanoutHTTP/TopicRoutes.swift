internal import FanoutCore
internal import FanoutKeys
internal import FanoutWire
internal import Hummingbird
internal import NIOCore

/// Topic management as firebase-admin does it (docs/http-api.md): FCM v1's
/// `registrations/{registration}/topicSubscriptions` (a FID or a token), and the Instance ID
/// service's `iid/v1:batchAdd`, `iid/v1:batchRemove` and `iid/info/{token}`.
extension HTTPFront {
    static func addTopicRoutes(to router: Router<BasicRequestContext>, backend: any HTTPFrontBackend, keys: @escaping @Sendable () -> APIKeyStore) {
        router.post("/v1/projects/:project/registrations/:registration/topicSubscriptions") { request, context in
            do throws(FanoutError) {
                let project = try Self.project(context.parameters.get("project"))
                try Self.authorize(request.headers, keys: keys(), project: project, roles: [.admin])
                let topic = try Self.topic(request.uri.queryParameters.get("topic_name"))
                let address = try Self.address(context.parameters.get("registration"))
                try Self.single(try await backend.subscribe([address], to: topic, in: project))
                return Self.json(200, "{}")
            } catch {
                return Self.error(error)
            }
        }
        router.delete("/v1/projects/:project/registrations/:registration/topicSubscriptions/:topic") { request, context in
            do throws(FanoutError) {
                let project = try Self.project(context.parameters.get("project"))
                try Self.authorize(request.headers, keys: keys(), project: project, roles: [.admin])
                let topic = try Self.topic(context.parameters.get("topic"))
                let address = try Self.address(context.parameters.get("registration"))
                try Self.single(try await backend.unsubscribe([address], from: topic, in: project))
                return Self.json(200, "{}")
            } catch {
                return Self.error(error)
            }
        }
        for (path, subscribing) in [("/iid/v1:batchAdd", true), ("/iid/v1:batchRemove", false)] {
            router.post(RouterPath(stringLiteral: path)) { request, _ in
                do throws(FanoutError) {
                    let key = try Self.apiKey(of: request.headers, keys: keys(), roles: [.admin])
                    let project = try Self.iidProject(of: key)
                    let (topic, tokens) = try Self.batch(try await Self.body(request))
                    let results = subscribing
                        ? try await backend.subscribe(tokens, to: topic, in: project)
                        : try await backend.unsubscribe(tokens, from: topic, in: project)
                    let items: [JSONValue] = results.map { result in
                        switch result {
                        case .ok: return .object(JSONObject())
                        case .failed(let code): return .object(JSONObject([.init(key: "error", value: .string(Self.iidReason(code)))]))
                        }
                    }
                    return Self.json(200, JSONWriter.encode(.object(JSONObject([.init(key: "results", value: .array(items))]))))
                } catch {
                    return Self.iidError(error)
                }
            }
        }
        router.get("/iid/info/:token") { request, context in
            do throws(FanoutError) {
                let key = try Self.apiKey(of: request.headers, keys: keys(), roles: [.admin, .sender])
                let project = try Self.iidProject(of: key)
                let address = try Self.address(context.parameters.get("token"))
                let installation = try await backend.installation(address, in: project)
                var members: [JSONObject.Member] = [
                    .init(key: "application", value: .string(installation.appID.value)),
                    .init(key: "authorizedEntity", value: .string(project.value)),
                    .init(key: "platform", value: .string(Self.iidPlatform(installation.platform))),
                ]
                if request.uri.queryParameters.get("details") == "true" {
                    // fanout does not keep when a subscription was made: each topic's object is empty.
                    let topics = try await backend.topics(of: address, in: project).map { JSONObject.Member(key: $0.value, value: .object(JSONObject())) }
                    members.append(.init(key: "rel", value: .object(JSONObject([.init(key: "topics", value: .object(JSONObject(topics)))]))))
                }
                return Self.json(200, JSONWriter.encode(.object(JSONObject(members))))
            } catch {
                return Self.iidError(error)
            }
        }
    }

    // MARK: - Pieces

    static func topic(_ value: String?) throws(FanoutError) -> TopicName {
        guard let value, let topic = TopicName(value) else {
            throw FanoutError(.invalidArgument, "the topic name is not valid (1 to 900 of A-Z a-z 0-9 - _ . ~ %)", field: "topic_name")
        }
        return topic
    }

    static func address(_ value: String?) throws(FanoutError) -> RegistrationAddress {
        guard let value, let address = RegistrationAddress(parsing: value) else {
            throw FanoutError(.invalidArgument, "the registration is neither a FID nor a registration token", field: "registration")
        }
        return address
    }

    /// One registration's result, thrown when it failed.
    static func single(_ results: [BatchItemResult]) throws(FanoutError) {
        if case .failed(let code)? = results.first {
            throw FanoutError(code, code == .notFound || code == .unregistered ? "Requested entity was not found." : "the subscription was refused", field: "registration")
        }
    }

    /// `{"to": "/topics/NAME", "registration_tokens": [...]}` (1 to 1000 tokens).
    static func batch(_ body: [UInt8]) throws(FanoutError) -> (TopicName, [RegistrationAddress]) {
        guard case .object(let object)? = try? JSONParser.parse(body) else {
            throw FanoutError(.invalidArgument, "the body is not a JSON object", field: "body")
        }
        var to: String?
        var tokens: [RegistrationAddress] = []
        var sawTokens = false
        for member in object.members {
            switch (member.key, member.value) {
            case ("to", .string(let value)): to = value
            case ("registration_tokens", .array(let values)):
                sawTokens = true
                for value in values {
                    guard case .string(let text) = value, let token = RegistrationToken(text) else {
                        throw FanoutError(.invalidArgument, "registration_tokens holds something that is not a registration token", field: "registration_tokens")
                    }
                    tokens.append(.token(token))
                }
            default:
                throw FanoutError(.invalidArgument, "unknown or mistyped field \(member.key)", field: member.key)
            }
        }
        guard let to else { throw FanoutError(.invalidArgument, "to is required", field: "to") }
        guard sawTokens, (1...1000).contains(tokens.count) else {
            throw FanoutError(.invalidArgument, "registration_tokens holds 1 to 1000 tokens", field: "registration_tokens")
        }
        return (try Self.topic(to), tokens)
    }

    /// The Instance ID API names no project: the key's only one, or `default` for a key of every project.
    static func iidProject(of key: APIKey) throws(FanoutError) -> ProjectID {
        switch key.projects {
        case .all: return .default
        case .only(let projects):
            guard projects.count == 1, let project = projects.first.flatMap(ProjectID.init) else {
                throw FanoutError(.invalidArgument, "the Instance ID API needs a key for exactly one project (or for every project, meaning default)")
            }
            return project
        }
    }

    static func iidReason(_ code: FanoutError.Code) -> String {
        switch code {
        case .notFound, .unregistered: return "NOT_FOUND"
        case .tooManyTopics: return "TOO_MANY_TOPICS"
        case .invalidArgument: return "INVALID_ARGUMENT"
        case .resourceExhausted: return "RESOURCE_EXHAUSTED"
        default: return "INTERNAL"
        }
    }

    static func iidPlatform(_ platform: Platform) -> String {
        switch platform {
        case .android: return "ANDROID"
        case .ios: return "IOS"
        case .web: return "CHROME"
        }
    }

    /// The Instance ID service's whole-request error: `{"error":"REASON"}` with the HTTP status.
    static func iidError(_ error: FanoutError) -> Response {
        let reason: String
        switch error.code {
        case .notFound, .unregistered: reason = "NOT_FOUND"
        case .unauthenticated: reason = "Unauthorized"
        case .permissionDenied: reason = "PERMISSION_DENIED"
        default: reason = "\(Self.iidReason(error.code)): \(error.message)"
        }
        return Self.json(error.code.httpStatus, JSONWriter.encode(.object(JSONObject([.init(key: "error", value: .string(reason))]))))
    }
}
