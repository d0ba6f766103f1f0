import FleetProtocol
import FleetTesting
import Foundation
import Testing

/// docs/testing.md shows `FleetClock`'s declaration. A declaration cannot be compiled twice, so
/// the test checks the doc's lines against the source's, and uses them: both clocks are
/// `FleetClock`s whose instants are `ContinuousClock.Instant`s.
@Suite("docs/testing.md: FleetClock")
struct FleetClockDocTests {
    /// The lines of `Sources/FleetProtocol/FleetClock.swift` that are code (no comments, no blank lines).
    static func sourceLines() throws -> [String] {
        let source = try String(
            contentsOf: DocExample.packageRoot.appendingPathComponent("Sources/FleetProtocol/FleetClock.swift"), encoding: .utf8)
        return source.split(separator: "\n").map(String.init).filter { line in
            let text = line.trimmingCharacters(in: .whitespaces)
            return !text.isEmpty && !text.hasPrefix("//")
        }
    }

    @Test("the declaration docs/testing.md shows is the source's, line for line")
    func docMatchesDeclaration() throws {
        let shown = try #require(try DocExample.shown("fleet-clock", in: "docs/testing.md"))
        let lines = shown.split(separator: "\n").map(String.init).filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        let source = try Self.sourceLines()
        #expect(!lines.isEmpty)
        let found = (0...max(0, source.count - lines.count)).contains { start in Array(source.dropFirst(start).prefix(lines.count)) == lines }
        #expect(found, "docs/testing.md shows\n\(shown)\nwhich Sources/FleetProtocol/FleetClock.swift does not declare")
    }

    /// Time passed on any `FleetClock`, measured in `ContinuousClock.Instant`s.
    static func measure<C: FleetClock>(on clock: C, _ body: () async -> Void) async -> Duration {
        let start: ContinuousClock.Instant = clock.now
        await body()
        return start.duration(to: clock.now)
    }

    @Test("ContinuousClock and ManualClock are FleetClocks with ContinuousClock's instants")
    func theDeclarationHolds() async {
        let manual = ManualClock()
        #expect(await Self.measure(on: manual) { await manual.advance(by: .seconds(3)) } == .seconds(3))
        #expect(await Self.measure(on: ContinuousClock()) {} >= .zero)
    }
}
