/// A client's retry budget: resends are allowed while most recent requests are answered, and
/// withheld once failures dominate, so a client in an overloaded system does not multiply its
/// load by its attempt count (the retry amplification that keeps an overload going after its
/// trigger has passed: Bronson et al., "Metastable Failures in Distributed Systems").
///
/// The policy is gRPC's retry throttling: a bucket of `maxTokens` tokens, full at the start;
/// each request that goes unanswered takes one, each answered request gives back `tokenRatio`;
/// a resend is allowed only while more than half the bucket is left. With the defaults (10, 0.1)
/// a client keeps retrying while fewer than about one request in eleven fails, and after five
/// failures in a row it stops resending until answers have refilled the bucket. A withheld resend
/// does not end the work: the request fails with a retryable `timeout` at once, and the caller
/// (the sync engine, a device's state machine) waits out its own jittered back-off.
///
/// Any answer counts as answered — a reply or the server's error — except `busy`, which counts as
/// neither: its resends are bounded separately (at most 50, each after the server's retry-after),
/// and a server that sheds must not buy its clients more resends.
public struct RetryBudget: Sendable, Hashable {
    public let maxTokens: Double
    public let tokenRatio: Double
    /// Tokens left, in `0...maxTokens`.
    public private(set) var tokens: Double

    /// - Parameters:
    ///   - maxTokens: The bucket's size (1...1000; default 10).
    ///   - tokenRatio: Tokens an answered request gives back (0.001...1; default 0.1).
    public init(maxTokens: Double = 10, tokenRatio: Double = 0.1) {
        self.maxTokens = maxTokens.isFinite ? min(max(maxTokens, 1), 1_000) : 10
        self.tokenRatio = tokenRatio.isFinite ? min(max(tokenRatio, 0.001), 1) : 0.1
        self.tokens = self.maxTokens
    }

    /// Whether a request that went unanswered may be sent again now.
    public var allowsRetry: Bool { tokens > maxTokens / 2 }

    /// A request went unanswered (it timed out).
    public mutating func recordFailure() {
        tokens = max(0, tokens - 1)
    }

    /// A request was answered (with a reply or with the server's error).
    public mutating func recordSuccess() {
        tokens = min(maxTokens, tokens + tokenRatio)
    }
}
