import Crypto
import Envelopes
import Foundation
import GRDB
import MessagePack
import SignatureCapture
import SyncContract

extension DeviceStore {
    /// Checks the store's invariants (see ``StoreAudit``) in one read transaction.
    func audit() async throws -> StoreAudit {
        let publicKey = privateKey.publicKey
        return try await pool.read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM outbox ORDER BY sequence")
            let items = rows.map(Self.outboxItem)
            let sequences = items.map(\.sequence)
            // Items and recorded gaps (numbers the server took that this store has no item for) cover 1…last.
            var covered = sequences.map { $0...$0 }
            for gap in try Row.fetchAll(db, sql: "SELECT fromSequence, toSequence FROM outboxGap") {
                let from: Int64 = gap["fromSequence"], to: Int64 = gap["toSequence"]
                if from >= 1 && to >= from { covered.append(UInt64(from)...UInt64(to)) }
            }
            covered.sort { $0.lowerBound < $1.lowerBound }
            var nextExpected: UInt64 = 1
            var isGapless = true
            for range in covered {
                if range.lowerBound != nextExpected { isGapless = false; break }
                nextExpected = range.upperBound + 1
            }

            var invalidSignatures: [UInt64] = []
            var outboxWithoutEnvelope: [UInt64] = []
            var outboxWithoutSignatures: [UInt64] = []
            for item in items where item.status != .synced {
                guard let payload = item.payload, StrictEd25519.isValid(item.signature, for: payload, key: publicKey),
                      Array(SHA256.hash(data: payload)) == item.payloadSHA256 else {
                    invalidSignatures.append(item.sequence)
                    continue
                }
                guard item.status == .pending else { continue }
                guard let stored = try Self.loadEnvelope(db, id: item.envelope.localId), stored.envelope.localState.isAwaitingSync,
                      stored.envelope.transactionId == item.envelope.transactionId else {
                    outboxWithoutEnvelope.append(item.sequence)
                    continue
                }
                let decoded = try? SyncPayload(canonicalBytes: payload)
                let held = try Self.loadSignatures(db, envelopeId: item.envelope.localId)
                let named = decoded?.signatures.map { "\($0.tabIndex):\($0.binding)" } ?? ["undecodable"]
                if decoded?.sequence != item.sequence || Set(named) != Set(held.map { "\($0.tabIndex):\($0.binding)" }) {
                    outboxWithoutSignatures.append(item.sequence)
                }
            }

            let queuedWithoutOutbox = try String.fetchAll(db, sql: """
                SELECT envelopeId FROM envelopes e
                WHERE localState IN ('pendingSync', 'syncing', 'syncFailed')
                  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.envelopeId = e.envelopeId AND o.status = 'pending')
                ORDER BY envelopeId
                """)

            var unbound: [String] = []
            for row in try Row.fetchAll(db, sql: """
                SELECT s.envelopeId, s.tabIndex, s.isoRecord, s.binding, s.deviceSignature, d.bytes
                FROM signatures s LEFT JOIN documents d ON d.envelopeId = s.envelopeId AND d.documentId = s.documentId
                """) {
                let iso: Data = row["isoRecord"]
                let bindingBytes: Data = row["binding"]
                let deviceSignature: Data = row["deviceSignature"]
                let document: Data? = row["bytes"]
                let ok: Bool
                if let document, let binding = try? SignatureBinding(canonicalBytes: Array(bindingBytes)) {
                    ok = binding.matches(document: Array(document), iso: Array(iso))
                        && StrictEd25519.isValid(deviceSignature, for: bindingBytes, key: publicKey)
                } else {
                    ok = false
                }
                if !ok { unbound.append("\(row["envelopeId"] as String)#\(row["tabIndex"] as Int)") }
            }

            let journalMismatches = try String.fetchAll(db, sql: """
                SELECT e.envelopeId FROM envelopes e
                WHERE e.localState IS NOT (SELECT j.state FROM journal j WHERE j.envelopeId = e.envelopeId ORDER BY j.id DESC LIMIT 1)
                ORDER BY e.envelopeId
                """)
            let outboxWithoutJournal = try Int64.fetchAll(db, sql: """
                SELECT o.sequence FROM outbox o
                WHERE NOT EXISTS (SELECT 1 FROM journal j WHERE j.kind = 'queued' AND j.sequence = o.sequence AND j.envelopeId = o.envelopeId)
                ORDER BY o.sequence
                """).map { UInt64(clamping: $0) }

            var user: SigningUser?
            if let body = try Data.fetchOne(db, sql: "SELECT userInfo FROM account WHERE id = 1"),
               let info = try? MessagePackDecoder().decode(UserInfo.self, from: body) {
                user = SigningUser(email: info.email, name: info.userName)
            }
            var readyButNotQueued: [String] = []
            for id in try String.fetchAll(db, sql: "SELECT envelopeId FROM envelopes WHERE localState = 'cached' ORDER BY envelopeId") {
                if let stored = try Self.loadEnvelope(db, id: id), stored.envelope.syncEligibility(user: user).isReadyForSync {
                    readyButNotQueued.append(id)
                }
            }

            return StoreAudit(
                sequences: sequences, isGapless: isGapless, invalidSignatures: invalidSignatures,
                queuedWithoutOutbox: queuedWithoutOutbox, outboxWithoutEnvelope: outboxWithoutEnvelope,
                outboxWithoutSignatures: outboxWithoutSignatures, unboundSignatures: unbound,
                journalMismatches: journalMismatches, outboxWithoutJournal: outboxWithoutJournal,
                readyButNotQueued: readyButNotQueued)
        }
    }
}
