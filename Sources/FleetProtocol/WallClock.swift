import Foundation

/// The one source of wall-clock time (`Date`): what a person reads (a report's times, a run
/// directory's name) and what a store keeps as a timestamp (a receipt's `recordedAt`, a token's
/// expiry, a history line's `time`).
///
/// Waits never read it: they are on a ``FleetClock``. A component that stamps takes a
/// `WallClock` (``system`` by default); a test gives it a fixed one, or `ManualClock.wall`
/// (FleetTesting), which moves with the manual clock, so a token lifetime and the reply timeout
/// beside it advance together.
///
/// This file holds the only `Date()` in Sources, apart from the Envelopes value library's builder
/// defaults (it depends on no SignFleet module; SignFleet's components pass their own time).
public struct WallClock: Sendable {
    /// The current wall-clock time.
    public let now: @Sendable () -> Date

    public init(_ now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    /// The machine's clock.
    public static let system = WallClock { Date() }

    /// A clock that always reads `date`.
    public static func fixed(_ date: Date) -> WallClock { WallClock { date } }

    /// The current time as seconds since the Unix epoch (the unit of history lines, node plans
    /// and the fleet's schedule, which several processes share).
    public var secondsSince1970: Double { now().timeIntervalSince1970 }
}
