import Envelopes
import Foundation
import SignatureCapture

/// What a signer is asked to do: one local signer's turn in a signing session.
public struct SigningSession: Sendable {
    /// The envelope's ids.
    public var envelope: EnvelopeIDs
    /// The envelope as it stands (documents, other recipients' progress).
    public var snapshot: Envelope
    /// The recipient whose turn it is.
    public var recipient: Recipient
    /// The recipient's tabs, in envelope order; answer each with one ``TabInput`` in the same order.
    public var tabs: [Tab]
    /// When the signer's turn started (the capture's start instant).
    public var startedAt: Date
}

/// What the signer did.
public enum SignerAction: Sendable {
    /// Signed: one input per tab of ``SigningSession/tabs``, in the same order.
    case sign([TabInput])
    /// "Finish later": stop; the envelope stays cached with earlier signers' progress.
    case finishLater
    /// Declined; routing stops and the envelope goes to the server so it records the decline.
    case decline(reason: String)
    /// The signer's session expired before they finished; treated like finish later.
    case sessionExpired
}

/// A signer's input for one tab.
public enum TabInput: Sendable {
    /// A handwritten signature, for sign-here and initial-here tabs.
    case signature(CapturedSignature)
    /// A value for text-like tabs (text, company, title, full name, date signed, formula).
    case text(String)
    /// Checkbox or radio: selected or not.
    case selected(Bool)
    /// Leave the tab as it is (allowed for optional and locked tabs, and tabs that have a value).
    case keep
}

/// A (simulated) person who signs on the device: the driver of a signing session.
///
/// The device node calls ``act(in:)`` once for each local signer, in routing order, and checks
/// the answer against the tabs before saving it.
///
/// ```swift
/// struct KioskSigner: SignerDriver {
///     func act(in session: SigningSession) async throws -> SignerAction {
///         // show session.snapshot's documents; collect one TabInput per tab of session.tabs, in order
///         .sign(try session.tabs.map { tab in
///             switch tab.type {
///             case .signHere, .initialHere: .signature(try capture(tab))   // your signature UI
///             case .fullName, .text: .text(session.recipient.name)
///             default: .keep
///             }
///         })
///     }
/// }
/// let outcome = try await node.resumeSigning(envelopeId: id, driver: KioskSigner())
/// ```
public protocol SignerDriver: Sendable {
    /// What the signer does on their turn.
    /// - Throws: any error to abort the session (reported as a signing error; progress so far is kept).
    func act(in session: SigningSession) async throws -> SignerAction
}

/// The default driver: a synthetic person per recipient who signs each tab with SignatureCapture.
///
/// Each recipient gets a `SignerProfile` seeded from `seed` and their recipient id, so the same
/// seed gives the same signatures. Text tabs get the recipient's name (or the tab's existing value);
/// checkboxes keep their state. ``Behaviour`` scripts cancels and declines.
///
/// ```swift
/// let signer = SyntheticSigner(seed: 7)                                   // everyone signs
/// let shy = SyntheticSigner(seed: 7, behaviour: ["2": .finishLater])      // recipient 2 stops
/// ```
public struct SyntheticSigner: SignerDriver {
    /// What a synthetic recipient does.
    public enum Behaviour: Hashable, Sendable {
        /// Sign every tab.
        case sign
        /// Finish later.
        case finishLater
        /// Decline with a reason.
        case decline(reason: String)
        /// Let the session expire.
        case sessionExpired
    }

    /// The seed all profiles derive from.
    public var seed: UInt64
    /// The pen used.
    public var pen: PenKind
    /// Per recipient id; missing recipients sign.
    public var behaviour: [String: Behaviour]

    /// Creates a synthetic signer.
    public init(seed: UInt64, pen: PenKind = .applePencil, behaviour: [String: Behaviour] = [:]) {
        self.seed = seed
        self.pen = pen
        self.behaviour = behaviour
    }

    /// The signer profile used for a recipient.
    public func profile(for recipient: Recipient) -> SignerProfile {
        // FNV-1a of the recipient id mixed with the seed: stable across runs and platforms.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in recipient.recipientId.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return SignerProfile(seed: seed ^ hash, identifier: recipient.name)
    }

    public func act(in session: SigningSession) async throws -> SignerAction {
        switch behaviour[session.recipient.recipientId] ?? .sign {
        case .finishLater: return .finishLater
        case .decline(let reason): return .decline(reason: reason)
        case .sessionExpired: return .sessionExpired
        case .sign: break
        }
        let capturer = SignatureCapturer(pen: pen)
        let profile = profile(for: session.recipient)
        let start = CaptureTimestamp(nanosecondsSinceEpoch: Int64((session.startedAt.timeIntervalSince1970 * 1e9).rounded()))
        var inputs: [TabInput] = []
        for (index, tab) in session.tabs.enumerated() {
            switch tab.type {
            case .signHere, .initialHere:
                let signature = try capturer.capture(
                    signer: profile, signing: index + 1, fieldID: tab.tabId ?? "\(session.recipient.recipientId)-\(index)",
                    startedAt: start.adding(seconds: Double(index) * 5))
                inputs.append(.signature(signature))
            case .checkbox, .radio:
                inputs.append(.keep)
            case .dateSigned:
                inputs.append(.text(ISO8601DateFormatter().string(from: session.startedAt)))
            case .fullName:
                inputs.append(.text(session.recipient.name))
            case .text, .company, .title, .formula:
                inputs.append(tab.value.map { _ in .keep } ?? .text(session.recipient.name))
            }
        }
        return .sign(inputs)
    }
}

/// How a call to ``DeviceNode/resumeSigning(envelopeId:driver:)`` ended.
#if hasAttribute(nonexhaustive)
@nonexhaustive
#endif
public enum SigningOutcome: Hashable, Sendable {
    /// Every local signer who could sign did; `sequence` is set when the envelope is now queued for sync.
    case completed(signed: [String], sequence: UInt64?)
    /// A signer chose "finish later" (or their session expired); earlier signers' work is kept.
    case cancelled(recipientId: String, reason: SigningExitReason, signed: [String])
    /// A signer declined; the envelope is queued for sync so the server records it.
    case declined(recipientId: String, sequence: UInt64, signed: [String])
    /// Nobody signs on this device now: the envelope is ready for sync (queued at `sequence`).
    /// This is the answer to resuming an envelope without a local signer, or resuming again after
    /// signing finished — safe to retry.
    case readyForSync(sequence: UInt64, message: String)
}

/// The result of one local signer's turn, checked against their tabs.
struct SignerResult: Sendable {
    var recipientId: String
    var tabs: [(index: Int, tab: Tab)]
    var signatures: [StoredSignature]
}
