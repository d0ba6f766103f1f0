import Envelopes
import Foundation

/// One thing that happened to an envelope, as Connect reports it (docs/webhooks.md, "Events").
///
/// Events are derived, never written by hand: ``EnvelopeEvent/between(_:_:at:)`` compares an
/// envelope before and after one change, so every path that changes an envelope (sync ingest,
/// REST, captive signing, void) reports it the same way, and the store writes the events in the
/// change's own transaction (the Connect outbox).
package struct EnvelopeEvent: Sendable, Hashable {
    /// DocuSign Connect's event names (the ones SignFleet's lifecycle can produce).
    package enum Kind: String, Sendable, Hashable, CaseIterable, Codable {
        case envelopeSent = "envelope-sent"
        case envelopeDelivered = "envelope-delivered"
        case envelopeCompleted = "envelope-completed"
        case envelopeDeclined = "envelope-declined"
        case envelopeVoided = "envelope-voided"
        case recipientSent = "recipient-sent"
        case recipientDelivered = "recipient-delivered"
        case recipientCompleted = "recipient-completed"
        case recipientDeclined = "recipient-declined"
        /// A template changed (its document replaced, a tab edited): about a template, not an
        /// envelope, so ``EnvelopeEvent/between(_:_:at:)`` never yields it.
        case templateModified = "template-modified"

        package var isRecipientEvent: Bool { rawValue.hasPrefix("recipient-") }
        package var isTemplateEvent: Bool { rawValue.hasPrefix("template-") }
    }

    package var kind: Kind
    /// The recipient a `recipient-*` event is about.
    package var recipientID: String?
    /// When it happened: for a recipient who acted on a device while offline, the device's time.
    package var occurredAt: Date
    /// When the coordinator learnt it (the change's commit time as the service saw it).
    package var recordedAt: Date

    /// The outbox's subject for a template's events (its `envelopeID` column): the template's id
    /// behind a prefix no envelope id has, so a template's events never queue with an envelope's,
    /// nor reach an envelope's own `eventNotification`, whatever id the template was given.
    package static func templateSubject(_ templateID: String) -> String { templatePrefix + templateID }

    /// The template's id in a template event's subject (``templateSubject(_:)``).
    package static func templateID(inSubject subject: String) -> String {
        subject.hasPrefix(templatePrefix) ? String(subject.dropFirst(templatePrefix.count)) : subject
    }

    private static let templatePrefix = "template:"

    /// A template's change: at its new `lastModified` (which an edit moves past the previous one,
    /// so it may run a little ahead of the clock), recorded at `recordedAt` (the clock's now, from
    /// which the outbox delivers it).
    package static func templateModified(_ occurredAt: Date, recordedAt: Date) -> EnvelopeEvent {
        EnvelopeEvent(kind: .templateModified, occurredAt: occurredAt, recordedAt: recordedAt)
    }

    package init(kind: Kind, recipientID: String? = nil, occurredAt: Date, recordedAt: Date) {
        self.kind = kind
        self.recipientID = recipientID
        self.occurredAt = occurredAt
        self.recordedAt = recordedAt
    }

    /// The events one change made, in the order a listener should see them: the envelope's
    /// `sent`, then each recipient's steps by routing order (sent, delivered, then completed or
    /// declined), then the envelope's `delivered`, then its end (completed, declined or voided).
    /// `before` is nil for an envelope that did not exist (a sync creates it already routed, and
    /// perhaps already signed on the device: every step it skipped is reported).
    package static func between(_ before: EnvelopeAggregate?, _ after: EnvelopeAggregate, at: Date) -> [EnvelopeEvent] {
        let oldStatus = before.flatMap { EnvelopeStatus(rawValue: $0.envelope.status) } ?? .created
        let newStatus = EnvelopeStatus(rawValue: after.envelope.status) ?? oldStatus
        let oldRecipients = Dictionary(
            (before?.recipients ?? []).map { ($0.recipientID, $0) }, uniquingKeysWith: { first, _ in first })
        var events: [EnvelopeEvent] = []
        if Self.rank(oldStatus) < Self.rank(.sent), Self.rank(newStatus) >= Self.rank(.sent), newStatus != .voided {
            events.append(EnvelopeEvent(kind: .envelopeSent, occurredAt: at, recordedAt: at))
        }
        // By routing order, then id: a synced envelope's rows come in its payload's order.
        let recipients = after.recipients.sorted { ($0.routingOrder, $0.recipientID) < ($1.routingOrder, $1.recipientID) }
        for recipient in recipients {
            let old = oldRecipients[recipient.recipientID].flatMap { RecipientStatus(rawValue: $0.status) } ?? .created
            guard let new = RecipientStatus(rawValue: recipient.status), new != old else { continue }
            let when = min(recipient.statusChangedAt ?? at, at)
            func add(_ kind: Kind) {
                events.append(EnvelopeEvent(kind: kind, recipientID: recipient.recipientID, occurredAt: when, recordedAt: at))
            }
            if Self.step(old) < 1, Self.step(new) >= 1 { add(.recipientSent) }
            if Self.step(old) < 2, Self.step(new) >= 2, new != .declined, recipient.type != "carbonCopy" { add(.recipientDelivered) }
            if new.isDone, !old.isDone { add(.recipientCompleted) }
            if new == .declined { add(.recipientDeclined) }
        }
        if oldStatus != newStatus {
            switch newStatus {
            case .delivered: events.append(EnvelopeEvent(kind: .envelopeDelivered, occurredAt: at, recordedAt: at))
            case .completed: events.append(EnvelopeEvent(kind: .envelopeCompleted, occurredAt: at, recordedAt: at))
            case .declined: events.append(EnvelopeEvent(kind: .envelopeDeclined, occurredAt: at, recordedAt: at))
            case .voided: events.append(EnvelopeEvent(kind: .envelopeVoided, occurredAt: at, recordedAt: at))
            case .created, .sent, .signed: break
            }
        }
        return events
    }

    /// How far an envelope has gone (terminal statuses are past `sent`).
    private static func rank(_ status: EnvelopeStatus) -> Int {
        switch status {
        case .created: 0
        case .sent: 1
        case .delivered: 2
        case .signed, .completed, .declined, .voided: 3
        }
    }

    /// How far a recipient has gone: 0 not reached, 1 sent, 2 opened, 3 done or declined.
    /// A recipient who declined was sent first, but never reported as delivered by this alone.
    private static func step(_ status: RecipientStatus) -> Int {
        switch status {
        case .created: 0
        case .sent, .autoResponded: 1
        case .delivered: 2
        case .signed, .completed, .declined: 3
        }
    }
}
