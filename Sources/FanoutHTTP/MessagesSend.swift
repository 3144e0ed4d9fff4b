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

    /// FCM's answer: 200 with the message's name, or Google's error. A send to one recipient (a
    /// token or an FID) answers that recipient's refusal, as FCM does.
    static func answer(_ result: Result<SendResult, FanoutError>) -> (status: Int, body: [UInt8], retryAfter: Bool) {
        var failure: FanoutError
        switch result {
        case .success(let sent):
            guard sent.recipients.count == 1, case .failed(let error) = sent.recipients[0] else {
                let name = JSONWriter.encode(.object(JSONObject([.init(key: "name", value: .string(sent.messageID))])))
                return (200, name, false)
            }
            failure = error
        case .failure(let error):
            failure = error
        }
        let (status, body) = GoogleError.body(failure)
        return (status, body, failure.code == .resourceExhausted)
    }
}
