import Foundation
import SignatureCapture

/// What a device does with its `n`th envelope: every choice, drawn from the device's seed and `n`.
///
/// Each envelope's decisions come from their own stream (`seed`, `n`), so envelope `n` gets the
/// same decisions whether or not the node restarted before it: a restarted device only needs
/// to know how many envelopes it had (see ``SimulatedDevice``).
public struct EnvelopeDecision: Hashable, Sendable, Codable {
    public enum Outcome: Hashable, Sendable, Codable {
        /// Every in-person signer signs.
        case sign
        /// The first in-person signer chooses "finish later"; the envelope stays cached, unsigned.
        case cancel
        /// An in-person signer declines; `signerDraw` in [0, 1) picks which (scaled by their count).
        case decline(signerDraw: Double)
    }

    /// 1, 2, 3, … per device; the transaction id is `<device>-<n>`.
    public var number: Int
    /// Seconds between the previous arrival and this one (exponential, mean 60 / envelopesPerMinute).
    public var gap: Double
    /// Compose from a cached template (else from builders).
    public var fromTemplate: Bool
    /// Picks among the cached templates (sorted by id): `templateDraw % count`.
    public var templateDraw: UInt64
    /// Builder envelopes: in-person and remote signers.
    public var inPersonSigners: Int
    public var remoteSigners: Int
    /// How long each in-person signer takes, in routing order (enough for any template).
    public var signingDurations: [Double]
    public var outcome: Outcome
    /// The pen (a `PenKind` identifier) all signers of this envelope use.
    public var pen: String
    /// Seeds the synthetic signers' handwriting.
    public var signerSeed: UInt64
    /// Per remote signer (`remoteSigners` of them): embedded (signs by captive signing on this
    /// device once the envelope has synced) or not. Drawn after every other choice, so adding it
    /// changed none of them.
    public var embeddedRemoteSigners: [Bool] = []

    /// How many remote signers are embedded.
    public var embeddedCount: Int { embeddedRemoteSigners.filter { $0 }.count }

    /// Seconds the signers take together, for `signers` in-person signers (who all sign).
    public func signingTime(signers: Int) -> Double {
        signingDurations.prefix(signers).reduce(0, +)
    }
}

/// A device's behaviour as a pure, seeded function: ``decision(for:)`` gives envelope `n`'s decisions.
public struct BehaviourModel: Sendable {
    public let behaviour: Behaviour
    /// Pen identifiers with cumulative weights.
    private let pens: [(name: String, cumulative: Double)]
    public let seed: UInt64
    /// Signing durations drawn per envelope: enough for builders and for templates with more roles.
    public static let maxDrawnSigners = 16

    public init(behaviour: Behaviour, pens: [String: Double], seed: UInt64) {
        self.behaviour = behaviour
        self.seed = seed
        var total = 0.0
        var cumulative: [(String, Double)] = []
        // Sorted by name: a dictionary's order differs between processes.
        for (name, weight) in pens.sorted(by: { $0.key < $1.key }) where weight > 0 {
            total += weight
            cumulative.append((name, total))
        }
        self.pens = cumulative.isEmpty ? [(PenKind.applePencil.identifier, 1)] : cumulative.map { ($0.0, $0.1 / total) }
    }

    /// Mean seconds between two arrivals (`.infinity` when the rate is 0).
    public var meanGap: Double {
        behaviour.envelopesPerMinute > 0 ? 60 / behaviour.envelopesPerMinute : .infinity
    }

    public func decision(for number: Int) -> EnvelopeDecision {
        var random = SeededRandom(mixing: seed, 0xE17E_10BE, UInt64(max(0, number)))
        let gap = meanGap.isFinite ? random.exponential(mean: meanGap) : .infinity
        let fromTemplate = random.nextDouble() < behaviour.templateFraction
        let templateDraw = random.next()
        let inPerson = random.int(in: Self.ordered(behaviour.inPersonSigners))
        let remote = random.int(in: Self.ordered(behaviour.remoteSigners))
        // An envelope needs a recipient: with none drawn, one person signs in person.
        let signers = inPerson + remote == 0 ? 1 : inPerson
        let span = behaviour.signingDuration
        let durations = (0..<Self.maxDrawnSigners).map { _ in
            random.uniform(min(span.lower, span.upper)...max(span.lower, span.upper))
        }
        let draw = random.nextDouble()
        let signerDraw = random.nextDouble()
        let outcome: EnvelopeDecision.Outcome
        if draw < behaviour.cancelRate {
            outcome = .cancel
        } else if draw < behaviour.cancelRate + (1 - behaviour.cancelRate) * behaviour.declineRate {
            outcome = .decline(signerDraw: signerDraw)
        } else {
            outcome = .sign
        }
        let penDraw = random.nextDouble()
        let pen = pens.first { penDraw < $0.cumulative }?.name ?? pens[pens.count - 1].name
        let signerSeed = random.next()
        let embedded = (0..<remote).map { _ in random.nextDouble() < behaviour.embeddedFraction }
        return EnvelopeDecision(
            number: number, gap: gap, fromTemplate: fromTemplate, templateDraw: templateDraw, inPersonSigners: signers,
            remoteSigners: remote, signingDurations: durations, outcome: outcome, pen: pen, signerSeed: signerSeed,
            embeddedRemoteSigners: embedded)
    }

    private static func ordered(_ range: IntRange) -> ClosedRange<Int> {
        let lower = max(0, min(range.lower, range.upper))
        return lower...max(lower, range.upper)
    }
}
