import Envelopes
import Foundation
import SyncContract

/// What an envelope's tabs hold now, wherever it was given: the signed payload's tabs with the
/// values and signatures of the signers who signed on a device (in the payload), overlaid with
/// what captive signers entered on the coordinator's page (`captiveTab`). One view for every
/// reader — REST tabs, completed documents, certificates — so they never disagree.
struct EnvelopeFill: Sendable {
    /// Where a tab's value or signature was given.
    enum Source: Sendable, Equatable {
        /// On the device that composed the envelope, inside its signed payload.
        case device(String)
        /// On the coordinator's captive signing page, at this time.
        case captive(Date)
        /// Not given yet.
        case none
    }

    struct Entry: Sendable {
        /// The tab with its current `value` and `selected`.
        var tab: Tab
        /// The ISO/IEC 19794-7 record of a signed `signHere` / `initialHere`.
        var signature: [UInt8]?
        var source: Source
        /// A `signHere` / `initialHere` signed on the captive page by typing a name (the tab's `value`).
        var typed = false

        /// Signed, drawn or typed.
        var isSigned: Bool { signature != nil || typed }
    }

    /// In the payload's tab order.
    var entries: [Entry]

    init(payload: SyncPayload, deviceID: String, captive: [CaptiveTabRecord]) {
        let signatures = Dictionary(payload.signatures.map { ($0.tabIndex, $0.isoRecord) }, uniquingKeysWith: { first, _ in first })
        let entered = Dictionary(captive.map { ($0.tabIndex, $0) }, uniquingKeysWith: { _, last in last })
        entries = payload.tabs.enumerated().map { index, tab in
            var entry = Entry(tab: tab, signature: signatures[index], source: .none)
            let signing = tab.type == .signHere || tab.type == .initialHere
            if entry.signature != nil || (!signing && (tab.value?.isEmpty == false || tab.selected)) {
                entry.source = .device(deviceID)
            }
            if let record = entered[index], record.recipientID == tab.recipientId {
                // What the captive page stored wins over the payload, a signature included.
                if let value = record.value { entry.tab.value = value }
                if let selected = record.selected { entry.tab.selected = selected }
                if signing {
                    entry.signature = record.isoRecord.map { [UInt8]($0) }
                    entry.typed = record.isoRecord == nil && record.pointerType == "typed" && record.value?.isEmpty == false
                }
                entry.source = .captive(record.capturedAt)
            }
            return entry
        }
    }

    /// These entries (no tabs: a draft's documents, which nothing is drawn on).
    init(entries: [Entry] = []) { self.entries = entries }

    /// The tabs with their current values.
    var tabs: [Tab] { entries.map(\.tab) }
}
