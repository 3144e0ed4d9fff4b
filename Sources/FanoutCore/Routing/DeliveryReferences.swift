/// What the deliveries made together (one hand-out, one listing) keep alive: the rendered messages
/// they carry and the arena chunks their tokens' bytes are in, each held once here instead of by
/// every delivery (and their project's id, the same for all of them). A delivery holds only this
/// object, which no other batch shares: the counts of a message (shared by every delivery of a
/// send) and of a chunk (by every token stored near another) were retained and released for every
/// delivery, by every thread handing out or writing one.
///
/// Filled while its batch is made, under the project lock; only read once a delivery of it can be
/// seen elsewhere (the engine takes hand-outs after the change that made them).
@usableFromInline
final class DeliveryReferences: @unchecked Sendable {
    /// The project the deliveries are of.
    let project: ProjectID
    @usableFromInline
    private(set) var messages: [RenderedMessage] = []
    private var tokenChunks: [TokenChunk] = []
    /// Tells this batch apart from every other one of its project (`DeliveryState`'s marks).
    let serial: UInt64

    init(project: ProjectID, serial: UInt64 = 0) {
        self.project = project
        self.serial = serial
    }

    /// Holds `message`; returns its index, which the delivery carrying it keeps.
    func add(_ message: RenderedMessage) -> UInt32 {
        self.messages.append(message)
        return UInt32(self.messages.count - 1)
    }

    /// Holds `chunk`, so the tokens read from it stay valid while a delivery of this batch lives.
    func keep(_ chunk: TokenChunk) {
        self.tokenChunks.append(chunk)
    }
}
