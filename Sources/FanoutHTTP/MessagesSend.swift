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
    /// shape. A send to one recipient (a token or an FID) answers that recipient's refusal, as FCM
    /// does.
    static func answer(_ result: Result<SendResult, FanoutError>) -> Result<[UInt8], FanoutError> {
        result.flatMap { sent in
            if sent.recipients.count == 1, case .failed(let error) = sent.recipients[0] { return .failure(error) }
            return .success(JSONWriter.encode(.object(JSONObject([.init(key: "name", value: .string(sent.messageID))]))))
        }
    }
}
