import Envelopes

/// An error from a device node: an opaque code carrying the SDK's meaning, the ids involved and a
/// message that says what happened and what to do.
///
/// Compare ``code`` with the static members of ``Code`` (`error.code == .accountNotLoggedIn`);
/// new codes may be added, so do not switch over them exhaustively.
///
/// ```swift
/// do { try await node.resumeSigning(envelopeId: id, driver: signer) }
/// catch let error as DeviceNodeError where error.code == .envelopeNotCached { ... }
/// ```
public struct DeviceNodeError: Error, Hashable, Sendable, CustomStringConvertible {
    /// An error code. Its raw value is stable and safe to log or send over the wire.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable name, e.g. `"account.notLoggedIn"`.
        public let rawValue: String
        init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Nobody is logged in: log in (online with an access token, or offline with the persisted account).
        public static let accountNotLoggedIn = Code("account.notLoggedIn")
        /// Offline login found no persisted account: log in online once first.
        public static let noPersistedAccount = Code("account.noPersistedAccount")
        /// The account service rejected the token or could not be reached.
        public static let loginFailed = Code("account.loginFailed")
        /// Logout refused: signed envelopes have not reached the server yet (pass `force: true` to drop them).
        public static let unsyncedEnvelopes = Code("account.unsyncedEnvelopes")
        /// The envelope is not in the device's cache (never composed here, removed, or synced).
        public static let envelopeNotCached = Code("envelope.notCached")
        /// The envelope's local signers are all done, or none is current: nothing to sign on this device.
        public static let noIncompleteLocalSigner = Code("envelope.noIncompleteLocalSigner")
        /// A signer who must fill tabs has none.
        public static let signerWithoutTabs = Code("envelope.signerWithoutTabs")
        /// The envelope is queued for sync; it can no longer change on this device.
        public static let envelopeReadyForSync = Code("envelope.readyForSync")
        /// A signing session for this envelope is running now.
        public static let signingInProgress = Code("envelope.signingInProgress")
        /// The envelope definition breaks a validation rule (see ``DeviceNodeError/validationErrors``).
        public static let invalidEnvelope = Code("envelope.invalid")
        /// Another envelope already uses this transaction id with different content.
        public static let transactionIdConflict = Code("envelope.transactionIdConflict")
        /// The signer driver returned input that does not fit the tabs (wrong count, missing signature, …).
        public static let invalidSignerInput = Code("signing.invalidInput")
        /// The signer driver failed (threw) while signing.
        public static let signerFailed = Code("signing.signerFailed")
        /// A draft already exists: resume or discard it first (there is one draft at a time).
        public static let draftExists = Code("draft.exists")
        /// There is no draft to resume or discard.
        public static let noDraft = Code("draft.none")
        /// The template is not cached on this device.
        public static let templateNotCached = Code("template.notCached")
        /// The template service failed.
        public static let templateServiceFailed = Code("template.serviceFailed")
        /// A configuration value is out of range or unreadable.
        public static let invalidConfiguration = Code("configuration.invalid")
        /// The local store failed (disk, corruption, schema); nothing was half-written.
        public static let storeFailure = Code("store.failure")
        /// An outbox sequence number is unknown or out of order.
        public static let unknownSequence = Code("outbox.unknownSequence")
        /// The device's connection is offline or shut down (``DeviceConnection``); go online first.
        public static let notConnected = Code("connection.notConnected")
        /// The CURVE handshake with the coordinator failed: the pinned `serverKey` is not the
        /// coordinator's, or the coordinator refused this device's transport key. Not a credentials problem.
        public static let handshakeFailed = Code("connection.handshakeFailed")
    }

    /// What went wrong.
    public var code: Code
    /// What happened and what to do, for people.
    public var message: String
    /// The envelope's ids, when the error concerns one envelope.
    public var envelope: EnvelopeIDs?
    /// The validation errors, with ``Code/invalidEnvelope``.
    public var validationErrors: [EnvelopeValidationError]
    /// The underlying error's description, when there is one.
    public var underlying: String?

    /// Creates an error.
    public init(
        _ code: Code, _ message: String, envelope: EnvelopeIDs? = nil,
        validationErrors: [EnvelopeValidationError] = [], underlying: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.envelope = envelope
        self.validationErrors = validationErrors
        self.underlying = underlying.map { String(describing: $0) }
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let envelope { text += " [\(envelope)]" }
        if let underlying { text += " (cause: \(underlying))" }
        return text
    }
}

/// The ids one envelope has, each named so that no event or error is ambiguous about which it carries.
///
/// - ``localId``: the device's envelope id, returned by compose (the SDK's cached `envelopeId`).
/// - ``transactionId``: the client-chosen id that survives retries and identifies the envelope to
///   the server before it has a server id.
/// - ``serverId``: the server's envelope id, known only after sync.
///
/// Each field holds its own id, never another's. Captive signing names envelopes by their server
/// id: its events carry this device's local id and transaction id when the device composed and
/// synced the envelope, and an empty ``localId`` for an envelope that was never on this device
/// (``hasLocalCopy`` is `false`).
public struct EnvelopeIDs: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The device-local envelope id; empty when the envelope was never on this device.
    public var localId: String
    /// The transaction id.
    public var transactionId: String
    /// The server's envelope id, once synced.
    public var serverId: String?

    /// Whether the envelope has (or had) a local id on this device; `false` for a captive envelope
    /// that was only ever on the server.
    public var hasLocalCopy: Bool { !localId.isEmpty }

    /// Creates a set of ids.
    public init(localId: String, transactionId: String, serverId: String? = nil) {
        self.localId = localId
        self.transactionId = transactionId
        self.serverId = serverId
    }

    /// The ids of an envelope.
    public init(_ envelope: Envelope) {
        self.init(localId: envelope.envelopeId, transactionId: envelope.transactionId, serverId: envelope.serverEnvelopeId)
    }

    public var description: String {
        "localId=\(localId) transactionId=\(transactionId) serverId=\(serverId ?? "-")"
    }
}
