internal import FanoutCore
internal import FanoutKeys
internal import FanoutWire

/// FCM's HTTP v1 send, `POST /v1/projects/{project}/messages:send`, in the steps both of its
/// servers take: fanoutd's `MessagesSendHandler` on the event loop, and the router's route for an
/// app that serves `HTTPFront.router` alone.
enum MessagesSend {
    /// The operation label of the send's request metrics (the route as Hummingbird names it).
    static let operation = "POST /v1/projects/{project}/messages:send"

    /// The project of the path, when the key the request presents (its `Authorization` and
    /// `x-goog-api-key` headers' values) may send to it.
    static func authorize(project: String?, authorization: String?, googleAPIKey: String?, keys: APIKeyStore) throws(FanoutError) -> ProjectID {
        let project = try HTTPFront.project(project)
        let key = try HTTPFront.apiKey(authorization: authorization, googleAPIKey: googleAPIKey, keys: keys, roles: Self.senders)
        try HTTPFront.authorize(key, project: project)
        return project
    }

    /// The roles whose keys may send.
    private static let senders: Set<Hello.Role> = [.admin, .sender]

    /// Applies the send; the caller answers once it is durable.
    static func apply(_ body: [UInt8], in project: ProjectID, engine: Engine) -> Engine.Applied<SendResult> {
        engine.apply { (changes: inout Engine.Changes) throws(FanoutError) in try changes.send(body, in: project) }
    }

    /// FCM's answer: the body of a 200 (the message's name), or the error to answer in Google's
    /// shape.
    static func answer(_ result: Result<SendResult, FanoutError>) -> Result<[UInt8], FanoutError> {
        result.flatMap { sent in
            do throws(FanoutError) {
                return .success(Self.body(name: try Self.name(sent.messageID, recipients: sent.recipients)))
            } catch {
                return .failure(error)
            }
        }
    }

    /// The name of a message sent to `recipients` (empty for a topic, a condition or a user); a send
    /// to one recipient (a token or an FID) throws that recipient's refusal, as FCM answers it.
    static func name(_ messageID: String, recipients: [RecipientResult]) throws(FanoutError) -> String {
        if recipients.count == 1, case .failed(let error) = recipients[0] { throw error }
        return messageID
    }

    /// `{"name": ...}`, the body of a send's 200.
    static func body(name: String) -> [UInt8] {
        JSONWriter.encode(.object(JSONObject([.init(key: "name", value: .string(name))])))
    }
}
