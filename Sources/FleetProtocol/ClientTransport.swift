/// The device side of the wire as a seam: something that keeps a session with a coordinator and
/// carries typed requests to it, whatever moves the bytes.
///
/// The real implementation is `FleetClient` (module `FleetZeroMQTransport`: a DEALER socket,
/// CURVE, heartbeats, Lazy Pirate retries, failover between endpoints); FleetTesting's
/// `InProcessClientTransport` hands requests to a coordinator's ``RequestRouter`` in the same
/// process, through the same ``WireCodec``, with no socket. Everything above the wire (the sync
/// engine, the remote services, a device's connection) takes this protocol, so it runs over either.
///
/// The protocol does no I/O itself. Its contract, which both implementations keep:
/// - ``run()`` keeps the session until the calling task is cancelled or ``stop()`` is called;
///   requests sent before the session is up wait for it.
/// - ``request(_:timeout:attempts:)`` returns the reply or throws the server's ``FleetError``;
///   a request is sent again with the same request id when its reply does not come (requests are
///   idempotent), and gives up with a retryable `timeout` error.
/// - ``serverInstance`` names the server run that answered the latest `hello`: when it changes,
///   the session is with another server (a restarted coordinator, or another endpoint after a
///   failover), and whatever a session established (enrollment) is established again.
///
/// ```swift
/// func serverInstance(over transport: some ClientTransport) async throws -> String {
///     let session = Task { await transport.run() }   // ends when cancelled
///     defer { session.cancel() }
///     return try await transport.request(Heartbeat()).serverInstance
/// }
/// ```
public protocol ClientTransport: Sendable {
    /// Connection changes (connected, lost, reconnecting, handshake failed), for one consumer.
    var connectionEvents: AsyncStream<ConnectionEvent> { get }

    /// Keeps the session up until the calling task is cancelled or ``stop()`` is called.
    func run() async

    /// Ends the session: requests waiting for a reply or for a connection throw `CancellationError`,
    /// and ``connectionEvents`` finishes. A stopped transport stays stopped; make a new one.
    func stop() async

    /// Sends a request and returns its reply.
    ///
    /// - Parameters:
    ///   - request: The typed request.
    ///   - timeout: How long to wait for each attempt's reply (`nil`: the transport's default).
    ///   - attempts: How many times to send it (`nil`: the transport's default).
    /// - Throws: The server's ``FleetError``; `timeout` (retryable) when no reply came;
    ///   `CancellationError` when the task or the transport stopped.
    func request<Request: FleetRequest>(_ request: Request, timeout: Duration?, attempts: Int?) async throws -> Request.Reply

    /// The server run that answered the latest `hello`; `nil` before the first.
    var serverInstance: String? { get async }

    /// Where the session now up is connected (an endpoint, or a name for an in-process server);
    /// `nil` while there is none.
    var connectedEndpoint: String? { get async }

    /// The account rate-limit status from the latest reply that carried one (header `rl`).
    var lastRateLimit: RateLimitStatus? { get async }
}

extension ClientTransport {
    /// Sends a request with the transport's default timeout and attempts.
    public func request<Request: FleetRequest>(_ request: Request) async throws -> Request.Reply {
        try await self.request(request, timeout: nil, attempts: nil)
    }
}
