/// A parsed FCM topic condition, such as `'TopicA' in topics && ('TopicB' in topics || 'TopicC' in topics)`.
///
/// Grammar (fcm-rules.md sections 2 and 9): parentheses first, then strictly left to right, with no
/// precedence between `&&` and `||` (`A || B && C` is `(A || B) && C`); `!` applies to the next atom
/// or parenthesised group; topic names are single- or double-quoted; spaces between tokens are
/// optional; at most 5 topic atoms, every atom counted. Parse with `init(parsing:)`.
public indirect enum Condition: Hashable, Sendable, CustomStringConvertible {
    /// `'name' in topics`: installations subscribed to the topic.
    case topic(TopicName)
    /// `!x`: installations of the project not matched by `x`.
    case not(Condition)
    case and(Condition, Condition)
    case or(Condition, Condition)

    /// The most topic atoms a condition may hold.
    public static let maximumAtoms = 5
    /// The deepest nesting of parentheses and `!` accepted (a bound against hostile input).
    public static let maximumDepth = 32
    /// The longest condition string accepted, in bytes: five 900-byte names plus generous syntax.
    public static let maximumLength = 8192

    /// Parses `expression`.
    /// - Throws: `INVALID_ARGUMENT` on field `condition` with FCM's text
    ///   `Invalid condition expression provided.` followed by what is wrong and where.
    public init(parsing expression: String) throws(FanoutError) {
        var parser = ConditionParser(expression)
        self = try parser.parse()
    }

    /// The topic atoms, left to right, repeats included.
    public var topics: [TopicName] {
        switch self {
        case .topic(let name): return [name]
        case .not(let operand): return operand.topics
        case .and(let lhs, let rhs), .or(let lhs, let rhs): return lhs.topics + rhs.topics
        }
    }

    /// The canonical, fully parenthesised form: every binary operation in parentheses, `!` applied
    /// to an atom or a parenthesised group, single quotes. Parsing it gives the same condition.
    public var description: String {
        switch self {
        case .topic(let name): return "'\(name.value)' in topics"
        case .not(let operand):
            if case .topic = operand { return "!(\(operand))" }
            return "!\(operand)"
        case .and(let lhs, let rhs): return "(\(lhs) && \(rhs))"
        case .or(let lhs, let rhs): return "(\(lhs) || \(rhs))"
        }
    }

    /// Whether an installation subscribed to exactly `topics` matches; the reference semantics
    /// that set evaluation must agree with.
    public func matches(subscribedTo topics: (TopicName) -> Bool) -> Bool {
        switch self {
        case .topic(let name): return topics(name)
        case .not(let operand): return !operand.matches(subscribedTo: topics)
        case .and(let lhs, let rhs): return lhs.matches(subscribedTo: topics) && rhs.matches(subscribedTo: topics)
        case .or(let lhs, let rhs): return lhs.matches(subscribedTo: topics) || rhs.matches(subscribedTo: topics)
        }
    }

    /// The audience as set algebra: `topic` gives a topic's subscribers, `all` every installation of
    /// the project (the universe of `!`). `x && !y` is computed as a difference, without the complement.
    @_spi(Storage)
    public func evaluate(topic subscribers: (TopicName) -> SlotSet, all: () -> SlotSet) -> SlotSet {
        switch self {
        case .topic(let name):
            return subscribers(name)
        case .not(let operand):
            return all().subtracting(operand.evaluate(topic: subscribers, all: all))
        case .and(let lhs, .not(let negated)):
            return lhs.evaluate(topic: subscribers, all: all)
                .subtracting(negated.evaluate(topic: subscribers, all: all))
        case .and(.not(let negated), let rhs):
            return rhs.evaluate(topic: subscribers, all: all)
                .subtracting(negated.evaluate(topic: subscribers, all: all))
        case .and(let lhs, let rhs):
            let left = lhs.evaluate(topic: subscribers, all: all)
            if left.isEmpty { return left }
            return left.intersection(rhs.evaluate(topic: subscribers, all: all))
        case .or(let lhs, let rhs):
            return lhs.evaluate(topic: subscribers, all: all).union(rhs.evaluate(topic: subscribers, all: all))
        }
    }
}
