import FleetProtocol
import Foundation
import Synchronization

/// One fixed window: at most `limit` requests from the moment the window opens
/// until `length` later.
///
/// A window opens with the first counted request after the previous one ended
/// (not on a global grid), so accounts do not all reset, and retry, at the same
/// instant. Fixed windows were chosen over a sliding log or a token bucket
/// because "remaining" and "reset" then have one exact meaning a device can act
/// on, the state is two numbers, and the hourly window bounds what the boundary
/// effect of a fixed burst window (up to twice the burst in a short span) lets through.
public struct RateWindow: Sendable, Hashable {
    public var limit: Int
    public var length: TimeInterval
    /// When the current window opened; `nil` before the first request.
    public var openedAt: Date?
    /// Requests counted in the current window.
    public var count: Int

    public init(limit: Int, length: TimeInterval) {
        self.limit = limit
        self.length = length
        self.openedAt = nil
        self.count = 0
    }

    /// Closes the window if it has ended (or the clock went back before it opened).
    mutating func roll(to now: Date) {
        guard let openedAt else { return }
        if now >= openedAt.addingTimeInterval(length) || now < openedAt {
            self.openedAt = nil
            count = 0
        }
    }

    /// Requests still allowed in the current window.
    var remaining: Int { max(0, limit - count) }

    /// When the current window ends; a window not yet open would end `length` after `now`.
    func resetAt(now: Date) -> Date { (openedAt ?? now).addingTimeInterval(length) }

    mutating func record(at now: Date) {
        if openedAt == nil { openedAt = now }
        count += 1
    }
}

/// What the limiter decided for one request.
public struct RateLimitDecision: Sendable, Hashable {
    /// The two windows of an account.
    public enum Window: String, Sendable, Hashable {
        case burst, hourly
    }

    /// The request may proceed; it has been counted.
    public var allowed: Bool
    /// For the reply header: requests left in the tightest window and when that changes.
    public var status: RateLimitStatus
    /// When denied: how long until the request would be allowed.
    public var retryAfterMs: UInt64?
    /// When denied: the windows that are full.
    public var exceeded: [Window]
    /// When denied: a message naming the full window and its limit.
    public var message: String?

    /// The `rate_limited` error to answer a denied request with; `nil` when allowed.
    public var error: FleetError? {
        guard !allowed else { return nil }
        return FleetError(.rateLimited, message ?? "rate limit exceeded", retryable: true, retryAfterMs: retryAfterMs)
    }
}

/// The rate-limit state of one account: a burst window and an hourly window.
///
/// A pure state machine: `admit(at:limits:)` takes the time and the account's
/// current limits, so a changed limit applies from the next request. Denied
/// requests are not counted, so a device that keeps retrying does not push its
/// own reset further away.
public struct AccountRateState: Sendable, Hashable {
    public static let hourLength: TimeInterval = 3600
    /// The longest burst window in effect (about 31 years): an admin may store any positive
    /// number of seconds, but a window's end must stay a date the reply header's `rl.resetAt`
    /// (a MessagePack timestamp) can carry, or every reply to the account would be dropped.
    public static let maxBurstWindow: TimeInterval = 1_000_000_000

    static func burstLength(_ limits: RateLimits) -> TimeInterval {
        min(TimeInterval(max(1, limits.burstWindowSeconds)), maxBurstWindow)
    }

    public var burst: RateWindow
    public var hourly: RateWindow

    public init(limits: RateLimits) {
        burst = RateWindow(limit: limits.burst, length: Self.burstLength(limits))
        hourly = RateWindow(limit: limits.hourly, length: Self.hourLength)
    }

    /// Counts a request at `now` if both windows have room; otherwise counts nothing.
    public mutating func admit(at now: Date, limits: RateLimits, accountID: String = "") -> RateLimitDecision {
        burst.limit = limits.burst
        burst.length = Self.burstLength(limits)
        hourly.limit = limits.hourly
        burst.roll(to: now)
        hourly.roll(to: now)

        let full = [(RateLimitDecision.Window.burst, burst), (.hourly, hourly)].filter { $0.1.remaining == 0 }
        if !full.isEmpty {
            // Allowed again once every full window has reset.
            let retryAt = full.map { $0.1.resetAt(now: now) }.max() ?? now
            // An admin may set a burst window of any positive whole number of seconds (up to
            // Int.max): the wait is clamped to what UInt64 milliseconds hold instead of trapping.
            let retryAfterMs = max(1, UInt64(clampingFinite: (retryAt.timeIntervalSince(now) * 1000).rounded(.up)))
            let named = full.map { window, state in
                "\(state.limit) request\(state.limit == 1 ? "" : "s") per \(Self.describe(state.length)) (\(window.rawValue))"
            }.joined(separator: " and ")
            let account = accountID.isEmpty ? "" : " of account \"\(accountID)\""
            return RateLimitDecision(
                allowed: false, status: RateLimitStatus(remaining: 0, resetAt: retryAt), retryAfterMs: retryAfterMs,
                exceeded: full.map(\.0),
                message: "rate limit\(account) exceeded: \(named); retry after \(retryAfterMs) ms")
        }

        burst.record(at: now)
        hourly.record(at: now)
        return RateLimitDecision(allowed: true, status: status(now: now), retryAfterMs: nil, exceeded: [], message: nil)
    }

    /// The tightest window's remaining count, and when that number next rises: the
    /// tighter window's reset, or with a tie the later reset (the earlier one
    /// alone would not raise the minimum).
    func status(now: Date) -> RateLimitStatus {
        let burstReset = burst.resetAt(now: now)
        let hourlyReset = hourly.resetAt(now: now)
        let remaining: Int
        let resetAt: Date
        if burst.remaining < hourly.remaining {
            (remaining, resetAt) = (burst.remaining, burstReset)
        } else if hourly.remaining < burst.remaining {
            (remaining, resetAt) = (hourly.remaining, hourlyReset)
        } else {
            (remaining, resetAt) = (burst.remaining, max(burstReset, hourlyReset))
        }
        return RateLimitStatus(remaining: UInt32(clamping: remaining), resetAt: resetAt)
    }

    static func describe(_ length: TimeInterval) -> String {
        length == hourLength ? "hour" : "\(Int64(clampingFinite: length)) s"
    }
}

/// Per-account rate limits for the coordinator: one ``AccountRateState`` per
/// account behind a mutex, with an injected clock.
///
/// State lives in memory only: a coordinator restart starts every window afresh,
/// which errs towards serving devices (limits protect the server; they are not billing).
public final class RateLimiter: Sendable {
    private let states = Mutex<[String: AccountRateState]>([:])
    private let now: @Sendable () -> Date

    public init(now: @escaping @Sendable () -> Date = WallClock.system.now) {
        self.now = now
    }

    /// Counts one request of `accountID` under `limits`, or denies it.
    public func admit(accountID: String, limits: RateLimits) -> RateLimitDecision {
        let now = now()
        return states.withLock { states in
            var state = states[accountID] ?? AccountRateState(limits: limits)
            let decision = state.admit(at: now, limits: limits, accountID: accountID)
            states[accountID] = state
            return decision
        }
    }

    /// The account's current state, for tests and diagnostics.
    public func state(accountID: String) -> AccountRateState? {
        states.withLock { $0[accountID] }
    }
}

extension FixedWidthInteger {
    /// `value` rounded towards zero and clamped to this type's range; NaN becomes 0. For
    /// durations and counts computed from stored or admin-given values, where a conversion
    /// that traps would take the coordinator down.
    init(clampingFinite value: Double) {
        if value.isNaN {
            self = 0
        } else if value <= Double(Self.min) {
            self = .min
        } else if value >= Double(Self.max) {
            self = .max
        } else {
            self = Self(value)
        }
    }
}
