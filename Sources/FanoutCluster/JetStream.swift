import CNATS
package import FanoutCore

#if canImport(Glibc)
import Glibc
#endif

/// One connection to a NATS server (or cluster) and its JetStream context, through libnats, the C
/// client. The calls block the calling thread on a request to the server: call them from a thread
/// of the replication's own, never from an event loop. libnats connections are thread-safe.
package final class JetStream: @unchecked Sendable {
    let connection: OpaquePointer
    /// The JetStream context (the ownership bucket opens its key-value store on it).
    let context: OpaquePointer

    /// Connects to `urls` (`nats://127.0.0.1:4222`, comma-separated for a cluster).
    /// - Throws: `UNAVAILABLE` naming the URLs when no server answers.
    package init(urls: String) throws(FanoutError) {
        var connection: OpaquePointer?
        let status = natsConnection_ConnectTo(&connection, urls)
        guard status == NATS_OK, let connection else {
            throw Self.error("cannot connect to NATS at \(urls)", status)
        }
        let context: OpaquePointer
        do throws(FanoutError) {
            context = try Self.context(on: connection, wait: nil, "NATS at \(urls) gives no JetStream context")
        } catch {
            natsConnection_Destroy(connection)
            throw error
        }
        self.connection = connection
        self.context = context
    }

    deinit {
        jsCtx_Destroy(self.context)
        natsConnection_Destroy(self.connection)
    }

    /// Another JetStream context on this connection, whose requests wait at most `wait` for their
    /// answer where this one's wait JetStream's default 5 s. The caller destroys it
    /// (`jsCtx_Destroy`) while this connection is open.
    func makeContext(wait: Duration) throws(FanoutError) -> OpaquePointer {
        try Self.context(on: self.connection, wait: wait, "NATS gives no JetStream context")
    }

    /// A JetStream context on `connection`; its requests wait `wait` at most, or JetStream's 5 s.
    /// - Throws: `failure` with libnats's status, when it gives none.
    private static func context(on connection: OpaquePointer, wait: Duration?, _ failure: @autoclosure () -> String) throws(FanoutError) -> OpaquePointer {
        var options = jsOptions()
        jsOptions_Init(&options)
        if let wait { options.Wait = max(1, wait.wholeMilliseconds) }
        var context: OpaquePointer?
        let status = natsConnection_JetStream(&context, connection, &options)
        guard status == NATS_OK, let context else { throw Self.error(failure(), status) }
        return context
    }

    /// Creates a file-stored stream over `subjects` with `replicas` copies (1 on one server, 3 on
    /// a three-server cluster); an existing stream of that name with the same configuration is kept.
    package func addStream(_ name: String, subjects: [String], replicas: Int) throws(FanoutError) {
        var configuration = jsStreamConfig()
        jsStreamConfig_Init(&configuration)
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(rawValue: 0)
        let status = name.withCString { name in
            withCStrings(subjects) { pointers in
                configuration.Name = name
                configuration.Subjects = pointers
                configuration.SubjectsLen = Int32(subjects.count)
                configuration.Storage = js_FileStorage
                configuration.Replicas = Int64(replicas)
                return js_AddStream(&info, self.context, &configuration, nil, &code)
            }
        }
        jsStreamInfo_Destroy(info)
        guard status == NATS_OK else { throw Self.error("cannot add stream \(name)", status, code) }
    }

    /// Deletes a stream and everything in it.
    package func deleteStream(_ name: String) throws(FanoutError) {
        var code = jsErrCode(rawValue: 0)
        let status = js_DeleteStream(self.context, name, nil, &code)
        guard status == NATS_OK else { throw Self.error("cannot delete stream \(name)", status, code) }
    }

    /// What JetStream answered a publish: the message's sequence in its stream, and whether it
    /// was a duplicate of one stored with the same message id (then nothing was stored).
    package struct Acknowledgement: Hashable, Sendable {
        package var sequence: UInt64
        package var isDuplicate: Bool
    }

    /// Publishes `data` to `subject` and waits for JetStream to store it.
    /// - Parameters:
    ///   - messageID: JetStream drops a second message with this id within its duplicate window.
    ///   - expectedLastSequence: the stream's last sequence the publisher knows; JetStream refuses
    ///     the message if another one was appended since (0: no expectation; libnats cannot
    ///     express "the stream is empty").
    /// - Throws: `FAILED_PRECONDITION` when the stream's last sequence is not the expected one
    ///   (another publisher appended: this one is deposed), `UNAVAILABLE` otherwise.
    package func publish(_ data: [UInt8], to subject: String, messageID: String, expectedLastSequence: UInt64) throws(FanoutError) -> Acknowledgement {
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        var acknowledgement: UnsafeMutablePointer<jsPubAck>?
        var code = jsErrCode(rawValue: 0)
        let status = messageID.withCString { messageID in
            options.MsgId = messageID
            options.ExpectLastSeq = expectedLastSequence
            return data.withUnsafeBytes { bytes in
                js_Publish(&acknowledgement, self.context, subject, bytes.baseAddress, Int32(bytes.count), &options, &code)
            }
        }
        defer { jsPubAck_Destroy(acknowledgement) }
        if code == JSStreamWrongLastSequenceErr {
            throw FanoutError(.failedPrecondition, "the stream for \(subject) moved past sequence \(expectedLastSequence): another publisher appended")
        }
        guard status == NATS_OK, let acknowledgement else { throw Self.error("cannot publish to \(subject)", status, code) }
        return Acknowledgement(sequence: acknowledgement.pointee.Sequence, isDuplicate: acknowledgement.pointee.Duplicate)
    }

    /// The stream's first sequence it still holds (past the last one once everything was
    /// purged; 0 or 1 while it never held a message), its last sequence (0 while it is empty) and
    /// its message count.
    package typealias StreamState = (firstSequence: UInt64, lastSequence: UInt64, messages: UInt64)

    package func state(of stream: String) throws(FanoutError) -> StreamState {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(rawValue: 0)
        let status = js_GetStreamInfo(&info, self.context, stream, nil, &code)
        defer { jsStreamInfo_Destroy(info) }
        guard status == NATS_OK, let info else { throw Self.error("cannot read stream \(stream)", status, code) }
        return (info.pointee.State.FirstSeq, info.pointee.State.LastSeq, info.pointee.State.Msgs)
    }

    /// Removes the messages of `stream` before sequence `sequence` (only those on `subject`, when
    /// given; wildcards allowed). The sequences of the messages kept do not change.
    package func purge(_ stream: String, subject: String? = nil, before sequence: UInt64) throws(FanoutError) {
        // Nothing comes before 1 (and JetStream takes a purge before sequence 1 on a subject as
        // a purge of all of it).
        guard sequence > 1 else { return }
        var options = jsOptions()
        jsOptions_Init(&options)
        options.Stream.Purge.Sequence = sequence
        var code = jsErrCode(rawValue: 0)
        let status = withOptionalCString(subject) { subject in
            options.Stream.Purge.Subject = subject
            return js_PurgeStream(self.context, stream, &options, &code)
        }
        guard status == NATS_OK else { throw Self.error("cannot purge stream \(stream) before \(sequence)", status, code) }
    }

    /// A message as its stream stores it: its data and the message id it was published with.
    package struct StoredMessage: Sendable {
        package var data: [UInt8]
        /// The publisher's `Nats-Msg-Id`, when it gave one.
        package var messageID: String?
    }

    /// The data of message `sequence` of `stream`, or nil when the stream has no such message.
    package func message(_ sequence: UInt64, of stream: String) throws(FanoutError) -> [UInt8]? {
        try self.storedMessage(sequence, of: stream)?.data
    }

    /// Message `sequence` of `stream`, or nil when the stream has no such message.
    package func storedMessage(_ sequence: UInt64, of stream: String) throws(FanoutError) -> StoredMessage? {
        var message: OpaquePointer?
        var code = jsErrCode(rawValue: 0)
        let status = js_GetMsg(&message, self.context, stream, sequence, nil, &code)
        defer { natsMsg_Destroy(message) }
        if status == NATS_NOT_FOUND || code == JSNoMessageFoundErr { return nil }
        guard status == NATS_OK, let message else { throw Self.error("cannot read message \(sequence) of \(stream)", status, code) }
        let id = Self.messageID(of: message)
        let count = Int(natsMsg_GetDataLength(message))
        guard count > 0, let data = natsMsg_GetData(message) else { return StoredMessage(data: [], messageID: id) }
        let bytes = data.withMemoryRebound(to: UInt8.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) }
        return StoredMessage(data: bytes, messageID: id)
    }

    /// A message's `Nats-Msg-Id` header (the id its publisher gave it), if it has one.
    static func messageID(of message: OpaquePointer) -> String? {
        var value: UnsafePointer<CChar>?
        guard natsMsgHeader_Get(message, "Nats-Msg-Id", &value) == NATS_OK, let value else { return nil }
        return String(cString: value)
    }

    /// Runs `body` again every 100 ms while it throws `UNAVAILABLE`, for `patience` at most: a
    /// replicated stream or bucket answers only once its replicas have elected a leader, moments
    /// after it is created or after a server restarts.
    package static func retrying<Result>(for patience: Duration, _ body: () throws(FanoutError) -> Result) throws(FanoutError) -> Result {
        let deadline = ContinuousClock.now + patience
        while true {
            do throws(FanoutError) {
                return try body()
            } catch where error.code == .unavailable && ContinuousClock.now < deadline {
                usleep(100_000)
            }
        }
    }

    static func error(_ what: String, _ status: natsStatus, _ code: jsErrCode = jsErrCode(rawValue: 0)) -> FanoutError {
        let text = natsStatus_GetText(status).map { String(cString: $0) } ?? "status \(status.rawValue)"
        let detail = code.rawValue == 0 ? text : "\(text), JetStream error \(code.rawValue)"
        return FanoutError(.unavailable, "\(what): \(detail)")
    }
}

extension Duration {
    /// Whole milliseconds, as libnats takes its timeouts.
    var wholeMilliseconds: Int64 { self.nanoseconds / 1_000_000 }
}

/// Runs `body` with `string` as a C string (nil as NULL), valid only during the call.
private func withOptionalCString<Result>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> Result) -> Result {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}

/// Runs `body` with `strings` as a C array of C strings, valid only during the call.
private func withCStrings<Result>(_ strings: [String], _ body: (UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Result) -> Result {
    var pointers: [UnsafePointer<CChar>?] = strings.map { UnsafePointer(strdup($0)) }
    defer { pointers.forEach { free(UnsafeMutablePointer(mutating: $0)) } }
    return pointers.withUnsafeMutableBufferPointer { body($0.baseAddress) }
}
