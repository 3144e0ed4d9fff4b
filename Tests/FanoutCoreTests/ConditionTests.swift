@_spi(Storage) import FanoutCore
import FanoutTestSupport
import Testing

@Suite("Conditions")
struct ConditionTests {
    @Test(arguments: [
        ("'TopicA' in topics", "'TopicA' in topics"),
        (
            "'TopicA' in topics && ('TopicB' in topics || 'TopicC' in topics)",
            "('TopicA' in topics && ('TopicB' in topics || 'TopicC' in topics))"
        ),
        // Strictly left to right: no precedence of && over ||.
        ("'A' in topics || 'B' in topics && 'C' in topics", "(('A' in topics || 'B' in topics) && 'C' in topics)"),
        ("'A' in topics && 'B' in topics || 'C' in topics", "(('A' in topics && 'B' in topics) || 'C' in topics)"),
        ("!('TopicA' in topics)", "!('TopicA' in topics)"),
        ("!'A' in topics && 'B' in topics", "(!('A' in topics) && 'B' in topics)"),
        ("!!('A' in topics)", "!!('A' in topics)"),
        ("!('A' in topics || 'B' in topics)", "!('A' in topics || 'B' in topics)"),
        ("\"A\" in topics", "'A' in topics"),
        ("'A'in topics&&'B'in topics", "('A' in topics && 'B' in topics)"),
        ("  ( ( 'A' in topics ) )  ", "'A' in topics"),
        (
            "'a' in topics && 'a' in topics && 'b' in topics && 'c' in topics && 'd' in topics",
            "(((('a' in topics && 'a' in topics) && 'b' in topics) && 'c' in topics) && 'd' in topics)"
        ),
        ("'%~._-' in topics", "'%~._-' in topics"),
    ])
    func parsesToCanonicalForm(_ expression: String, _ canonical: String) throws {
        let condition = try Condition(parsing: expression)
        #expect(condition.description == canonical)
        #expect(try Condition(parsing: canonical) == condition, "the canonical form parses back to the same condition")
    }

    @Test(arguments: [
        "",  // empty
        "   ",
        "TopicA in topics",  // unquoted
        "'TopicA' in topic",
        "'TopicA' intopics",
        "'TopicA'",
        "'TopicA' in topics &&",
        "'TopicA' in topics & 'B' in topics",
        "'TopicA' in topics 'B' in topics",
        "('TopicA' in topics",
        "'TopicA' in topics)",
        "'TopicA\" in topics",  // mismatched quotes
        "'Topic A' in topics",
        "'/topics/A' in topics",
        "'' in topics",
        "'né' in topics",
        "'A' in topics || 'B' in topics || 'C' in topics || 'D' in topics || 'E' in topics || 'F' in topics",
        "'a' in topics && 'a' in topics && 'a' in topics && 'a' in topics && 'a' in topics && 'a' in topics",
        "'" + String(repeating: "a", count: 901) + "' in topics",
        String(repeating: "(", count: 33) + "'A' in topics" + String(repeating: ")", count: 33),
        String(repeating: "!", count: 40) + "'A' in topics",
        String(repeating: " ", count: 9000) + "'A' in topics",
        "'A' in topics && !",
        "!",
        "()",
    ])
    func rejectsInvalidExpressions(_ expression: String) {
        #expect(throws: FanoutError(.invalidArgument, "", field: "condition")) {
            try Condition(parsing: expression)
        }
    }

    @Test func errorsUseFCMsTextAndNeverEchoTheInput() {
        do {
            _ = try Condition(parsing: "'secret' in topics && nonsense")
            Issue.record("expected an error")
        } catch {
            #expect(error.message.hasPrefix("Invalid condition expression provided."))
            #expect(!error.message.contains("secret"))
        }
    }

    @Test func nestingUpToTheBoundIsAccepted() throws {
        let depth = Condition.maximumDepth
        let expression = String(repeating: "(", count: depth) + "'A' in topics" + String(repeating: ")", count: depth)
        #expect(try Condition(parsing: expression) == .topic(TopicName("A")!))
    }

    /// Set evaluation against the per-installation reference semantics, over random conditions and
    /// random memberships.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func setEvaluationMatchesReferenceSemantics(seed: UInt64) throws {
        var random = SeededRandomNumberGenerator(seed: seed)
        let names = ["a", "b", "c", "d", "e"].map { TopicName($0)! }
        let universe: [UInt32] = (0..<3000).map { _ in UInt32.random(in: 0..<300_000, using: &random) }
        var membership: [TopicName: Set<UInt32>] = [:]
        for name in names {
            let density = Double.random(in: 0...1, using: &random)
            membership[name] = Set(universe.filter { _ in Double.random(in: 0...1, using: &random) < density })
        }
        let sets = membership.mapValues { SlotSet($0) }
        let all = SlotSet(universe)
        for _ in 0..<300 {
            let condition = Self.randomCondition(atoms: Int.random(in: 1...5, using: &random), names: names, using: &random)
            let evaluated = condition.evaluate(topic: { sets[$0] ?? SlotSet() }, all: { all })
            let expected = Set(universe.filter { slot in condition.matches { membership[$0]!.contains(slot) } })
            #expect(Set(evaluated.slots) == expected, "condition \(condition)")
            #expect(evaluated.isValid)
            #expect(try Condition(parsing: condition.description) == condition)
        }
    }

    static func randomCondition(atoms: Int, names: [TopicName], using random: inout SeededRandomNumberGenerator) -> Condition {
        var condition: Condition
        if atoms == 1 {
            condition = .topic(names.randomElement(using: &random)!)
        } else {
            let left = Int.random(in: 1..<atoms, using: &random)
            let lhs = Self.randomCondition(atoms: left, names: names, using: &random)
            let rhs = Self.randomCondition(atoms: atoms - left, names: names, using: &random)
            condition = Bool.random(using: &random) ? .and(lhs, rhs) : .or(lhs, rhs)
        }
        if Int.random(in: 0..<4, using: &random) == 0 {
            condition = .not(condition)
        }
        return condition
    }
}
