internal import FanoutCore
internal import FanoutKeys
internal import FanoutWire
internal import HTTPTypes

/// FCM's HTTP v1 send, `POST /v1/projects/{project}/messages:send`, in the steps both of its
/// servers take: fanoutd's `MessagesSendHandler` on the event loop, and the router's route for an
/// app that serves `HTTPFront.router` alone.
enum MessagesSend {
    /// The operation label of the send's request metrics (the route as Hummingbird names it).
    static let operation = "POST /v1/projects/{project}/messages:send"

    /// The project of the path, when the request's key may send to it.
    static func authorize(project: String?, headers: HTTPFields, keys: APIKeyStore) throws(FanoutError) -> ProjectID {
        let project = try HTTPFront.project(project)
        try HTTPFront.authorize(headers, keys: keys, project: project, roles: [.admin, .sender])
        return project
    }

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
