import Foundation
import Hummingbird
import HummingbirdCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// How many HTTP connections the coordinator holds open (docs/coordinator.md, "HTTP limits"): the
/// HTTP listener must never take the file descriptors that sync needs (its ZeroMQ sockets, its
/// SQLite files). Up to `limit` connections are served; beyond it requests get a `503` and the
/// connection is closed; beyond `limit + headroom` no connection is accepted at all (they wait in
/// the kernel's accept queue, costing this process no descriptor) until others close.
public final class HTTPConnectionBudget: Sendable {
    public let limit: Int
    /// Connections accepted past `limit` only to be told `503`.
    public let headroom: Int
    private let open = Atomic<Int>(0)

    public init(limit: Int, headroom: Int = 32) {
        self.limit = max(1, limit)
        self.headroom = max(0, headroom)
    }

    /// A quarter of the process's open-file limit, between 16 and 1,024: what is left is sync's.
    public static func defaultLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 256 }
        let files = Int(clamping: limit.rlim_cur)  // RLIM_INFINITY clamps to Int.max
        return min(1_024, max(16, files / 4))
    }

    public var openConnections: Int { open.load(ordering: .relaxed) }
    var isOverLimit: Bool { openConnections > limit }

    func opened() { open.add(1, ordering: .relaxed) }
    func closed() { open.subtract(1, ordering: .relaxed) }
    var accepting: Bool { openConnections < limit + headroom }

    /// hummingbird's hook on accepting connections.
    struct Delegate: AvailableConnectionsDelegate {
        let budget: HTTPConnectionBudget
        mutating func connectionOpened() { budget.opened() }
        mutating func connectionClosed() { budget.closed() }
        func isAcceptingNewConnections() -> Bool { budget.accepting }
    }

    /// Answers `503` (and closes) while more connections are open than the limit; `/health` and
    /// `/metrics` are still answered, so probes and monitoring see the state.
    struct Middleware<Context: RequestContext>: RouterMiddleware {
        let budget: HTTPConnectionBudget
        let refusals: HTTPRefusals
        /// Paths answered even over the limit (on the probe listener, nothing is: its budget is its own).
        var exempt: Set<String> = ["/health", "/metrics"]

        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            guard budget.isOverLimit, !exempt.contains(request.uri.path) else {
                return try await next(request, context)
            }
            refusals.note(.overConnectionLimit)
            let body = #"{"error":"unavailable","message":"the coordinator has as many HTTP connections open as it serves (\#(budget.limit)); retry after a second"}"#
            var buffer = ByteBuffer()
            buffer.writeString(body)
            return Response(
                status: .serviceUnavailable,
                headers: [.contentType: "application/json; charset=utf-8", .retryAfter: "1", .connection: "close"],
                body: ResponseBody(byteBuffer: buffer))
        }
    }
}
