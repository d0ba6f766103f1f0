import Crypto
import Envelopes
import FleetProtocol
import Foundation
import SyncContract

/// Creates envelopes for the REST API (`POST …/envelopes`, docs/rest-api.md) the way a device
/// does: as a signed sync item of the account's **REST sender**, a device the coordinator enrolls
/// in each account (id ``deviceID``) with an Ed25519 key derived from its own long-term secret, so
/// every coordinator on the store (and every restart) signs as the same device. The item goes
/// through ``SyncIngest`` like any device's: one envelope model, one ingest path, one routing.
actor RESTEnvelopeSender {
    /// The REST sender's device id in every account.
    static let deviceID = "rest-api"

    let devices: DeviceRegistry
    let ingest: SyncIngest
    let store: any CoordinatorStorage
    private var keys: [String: Curve25519.Signing.PrivateKey] = [:]
    /// Per account: whether a send is in progress, and the sends waiting for it (first come,
    /// first served). An actor alone does not serialize `send`: it is re-entered at every `await`.
    private var sending: Set<String> = []
    private var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]

    init(devices: DeviceRegistry, ingest: SyncIngest, store: any CoordinatorStorage) {
        self.devices = devices
        self.ingest = ingest
        self.store = store
    }

    /// The account's sender key: HKDF-SHA256 of the coordinator's CURVE secret, per account.
    func key(account: String) async throws -> Curve25519.Signing.PrivateKey {
        if let key = keys[account] { return key }
        let secret = try await store.curveKeyPair().secretKey
        let seed = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: secret), salt: Data("signfleet-rest-sender".utf8), info: Data(account.utf8), outputByteCount: 32)
        let key = try seed.withUnsafeBytes { try Curve25519.Signing.PrivateKey(rawRepresentation: Data($0)) }
        keys[account] = key
        return key
    }

    /// Signs and ingests `envelope` (recipients not yet acted on) as the account's next REST item;
    /// returns the server's envelope id. Serialized per account in this process: two creates never
    /// take one number; a number another coordinator took first is retried with the next (three tries).
    func send(_ envelope: Envelope, accessToken: String, account: String, at now: Date) async throws -> String {
        await acquire(account)
        defer { release(account) }
        return try await sendAlone(envelope, accessToken: accessToken, account: account, at: now)
    }

    private func acquire(_ account: String) async {
        guard sending.contains(account) else {
            sending.insert(account)
            return
        }
        await withCheckedContinuation { waiting[account, default: []].append($0) }
    }

    private func release(_ account: String) {
        if var queue = waiting[account], !queue.isEmpty {
            // The turn passes straight to the next waiter; the account stays busy.
            let next = queue.removeFirst()
            waiting[account] = queue.isEmpty ? nil : queue
            next.resume()
        } else {
            sending.remove(account)
        }
    }

    private func sendAlone(_ envelope: Envelope, accessToken: String, account: String, at now: Date) async throws -> String {
        let key = try await key(account: account)
        var lastError: (any Error)?
        for _ in 0..<3 {
            let enrolled = try await devices.enroll(
                EnrollDevice(accessToken: accessToken, deviceID: Self.deviceID, publicKey: Array(key.publicKey.rawRepresentation)),
                routingID: Self.deviceID)
            let sequence = enrolled.lastAppliedSequence + 1
            let payload = try Self.payload(envelope, sequence: sequence, at: now).canonicalBytes()
            let item = SyncItem(
                sequence: sequence, transactionID: envelope.transactionId, payload: payload,
                signature: Array(try key.signature(for: payload)))
            let ack = try await ingest.apply(SyncPush(deviceID: Self.deviceID, items: [item]), routingID: Self.deviceID)
            guard let result = ack.results.first else {
                lastError = FleetError(.internal, "the ingest answered \(ack.status) without a result")
                continue
            }
            switch result.outcome {
            case .applied, .duplicate:
                guard let id = result.envelopeID else { throw FleetError(.internal, "the ingest applied the envelope without an id") }
                return id
            case .rejected:
                throw FleetError(.invalidRequest, result.reason ?? "the envelope was refused")
            default:
                // `conflict` or a gap: another coordinator took the number; enroll again for the next.
                lastError = FleetError(.internal, "the REST sender's item \(sequence) was answered \(result.outcome)")
            }
        }
        throw lastError ?? FleetError(.internal, "the envelope could not be ingested")
    }

    /// The sync payload of an envelope the REST sender sends: no signatures yet, mode `online`.
    static func payload(_ envelope: Envelope, sequence: UInt64, at now: Date) -> SyncPayload {
        SyncPayload(
            format: SyncPayload.currentFormat, deviceId: deviceID, sequence: sequence, envelopeId: envelope.envelopeId,
            transactionId: envelope.transactionId, templateId: envelope.templateId, signingMode: "online", name: envelope.name,
            emailSubject: envelope.emailSubject, emailMessage: envelope.emailMessage,
            createdAtNanos: envelope.createdAt.nanosecondsSinceEpoch, completedLocallyAtNanos: nil,
            documents: envelope.documents.map {
                PayloadDocument(documentId: $0.documentId, name: $0.name, pageCount: $0.pageCount, sha256: Array(SHA256.hash(data: $0.pdfBytes)), pdf: $0.pdfBytes)
            },
            recipients: envelope.recipients.map {
                PayloadRecipient(
                    recipientId: $0.recipientId, type: $0.type.rawValue, name: $0.name, email: $0.email, routingOrder: $0.routingOrder,
                    clientUserId: $0.clientUserId, hostName: $0.hostName, hostEmail: $0.hostEmail, status: $0.status.rawValue,
                    statusChangedAtNanos: nil, declineReason: nil)
            },
            tabs: envelope.tabs, customFields: envelope.customFields, signatures: [])
    }
}
