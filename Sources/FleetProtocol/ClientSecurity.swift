import ZeroMQ

/// How a client secures its connection (docs/protocol.md, "Security model").
public enum ClientSecurity: Sendable, Hashable {
    /// Plain TCP; the DEALER's routing id is the device id, which is all the server knows of it.
    case plaintext
    /// CURVE: the connection is encrypted to the pinned `serverKey` (a wrong one never
    /// completes the handshake), and the device proves `keys`, which its enrollment binds to it.
    /// The DEALER sets no routing id.
    case curve(serverKey: [UInt8], keys: CurveKeyPair)
}

/// A change in the client's connection to the server.
public enum ConnectionEvent: Sendable, Hashable {
    /// The server answered `hello`.
    case connected(serverInstance: String)
    /// Nothing heard from the server for the liveness timeout.
    case lost
    /// The socket was closed; a new one opens after this delay.
    case reconnecting(after: Duration)
    /// CURVE: the handshake failed (the server's key is not the pinned one, it does not serve
    /// CURVE, or its ZAP handler refused this key); the reason is for people.
    case handshakeFailed(String)
}
