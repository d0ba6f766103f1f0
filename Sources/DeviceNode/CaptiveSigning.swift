import Envelopes
import FleetProtocol
import Foundation
import SignatureCapture

/// The seam to the server's recipient views (`recipient.view`): a logged-in sender asks for a
/// captive signing URL for an embedded recipient.
public protocol RecipientViewService: Sendable {
    /// Asks the server for a signing URL.
    /// - Throws: the server's `FleetError` (no unique recipient, not their turn, …) or a transport error.
    func recipientView(_ request: RecipientViewRequest) async throws -> RecipientViewReply
}

/// The ``RecipientViewService`` of a device talking to a real coordinator (over any `ClientTransport` (FleetProtocol)).
public struct RemoteRecipientViewService: RecipientViewService {
    private let client: any ClientTransport

    public init(client: any ClientTransport) {
        self.client = client
    }

    public func recipientView(_ request: RecipientViewRequest) async throws -> RecipientViewReply {
        try await client.request(request)
    }
}

/// A simulated person in front of a captive signing page: what they do, and how they sign.
///
/// The headless presenter drives the same HTTP endpoints a browser does: it opens the URL,
/// reads the page's tabs, draws a synthetic signature (SignatureCapture, seeded) for each
/// signature tab as pointer-event points, fills text tabs, and posts Finish, Finish Later or
/// Decline with the page's CSRF token and session cookie.
///
/// ```swift
/// let signer = CaptiveSigner(seed: 7)                                 // signs
/// let shy = CaptiveSigner(seed: 7, behaviour: .decline(reason: "wrong amount"))
/// ```
public struct CaptiveSigner: Sendable, Hashable {
    /// What the person does on the page.
    public enum Behaviour: Sendable, Hashable {
        /// Sign every signature tab, fill the text tabs, Finish.
        case sign
        /// Finish Later (`event=cancel`).
        case finishLater
        /// Decline with a reason (`event=decline`).
        case decline(reason: String)
        /// Open the page and leave it open (the app dismissed the view without an answer).
        case leaveOpen
    }

    /// Seeds the synthetic handwriting.
    public var seed: UInt64
    /// The pen: a stylus posts `pointerType` `pen` with pressure, the finger `touch`, others `mouse`.
    public var pen: PenKind
    public var behaviour: Behaviour
    /// What to type into empty text tabs; the recipient's name when `nil`.
    public var text: String?
    /// Whether to tick unticked checkboxes.
    public var tickCheckboxes: Bool

    public init(seed: UInt64, pen: PenKind = .applePencil, behaviour: Behaviour = .sign, text: String? = nil, tickCheckboxes: Bool = true) {
        self.seed = seed
        self.pen = pen
        self.behaviour = behaviour
        self.text = text
        self.tickCheckboxes = tickCheckboxes
    }

    /// The pointer-event points of a synthetic signature on a canvas of `width`×`height` CSS px:
    /// the pen-down samples of a SignatureCapture capture, scaled from the signing area into the
    /// canvas, with event times in milliseconds and a new stroke after every lift.
    public func pointerSignature(signerName: String, fieldID: String, signing: Int, width: Double, height: Double) throws
        -> PointerSignature
    {
        let capturer = SignatureCapturer(pen: pen)
        let profile = SignerProfile(seed: seed ^ 0x5167_4E49_4E47, identifier: signerName)
        let captured = try capturer.capture(signer: profile, signing: signing, fieldID: fieldID)
        let area = captured.configuration.area
        let scale = min(width / area.width, height / area.height) * 0.9
        let offsetX = (width - area.width * scale) / 2, offsetY = (height - area.height * scale) / 2
        let rate = Double(captured.characteristics.sampleRate)
        let pointerType = pen == .finger ? "touch" : (pen == .browserMouse ? "mouse" : "pen")
        var points: [PointerPoint] = []
        var stroke = -1
        var previous: PenSample?
        for sample in captured.samples where sample.isDown {
            if previous == nil || sample.tick != (previous?.tick ?? 0) + 1 { stroke += 1 }
            previous = sample
            let x = min(max((sample.x - area.x) * scale + offsetX, 0), width)
            let y = min(max((sample.y - area.y) * scale + offsetY, 0), height)
            let pressure = pointerType == "pen" ? max(sample.pressure, 0.01) : (pointerType == "mouse" ? 0.5 : 0)
            points.append(PointerPoint(x: x, y: y, pressure: pressure, time: 1000 + Double(sample.tick) / rate * 1000, stroke: stroke))
        }
        return PointerSignature(pointerType: pointerType, canvasWidth: width, canvasHeight: height, points: points)
    }
}

/// How a captive signing presentation ended.
public struct CaptiveSigningResult: Sendable, Hashable {
    /// The `event` the coordinator redirected with; `nil` when the page was left open
    /// (``CaptiveSigner/Behaviour/leaveOpen``).
    public var event: SigningViewEvent?
    /// The return URL with `event=`, as the coordinator redirected.
    public var redirectURL: String?
    /// The envelope: ``EnvelopeIDs/serverId`` is the server's id; ``EnvelopeIDs/localId`` and
    /// ``EnvelopeIDs/transactionId`` are this device's when it composed and synced the envelope.
    /// For an envelope that was never on this device the local id is empty and the transaction id
    /// is the one the signing page named.
    public var envelope: EnvelopeIDs
    /// The recipient who signed (or not).
    public var recipientId: String
    /// Why it failed, with `SigningViewEvent.exception` or a refused URL.
    public var details: String?
}

extension DeviceNodeError.Code {
    /// Captive signing could not run: no unique recipient, not their turn, an unusable or used
    /// URL, or the page refused the input (the message says which).
    public static let captiveSigningFailed = DeviceNodeError.Code("captive.failed")
}
