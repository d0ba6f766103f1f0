import Foundation
import Logging
import Synchronization

/// One ZAP request (ZeroMQ RFC 27): what libzmq asks when a peer completes a handshake on a
/// socket with a ``SocketOptions/zapDomain``.
public struct ZAPRequest: Sendable, Hashable {
    /// The domain of the socket the peer connected to.
    public var domain: String
    /// The peer's IP address (libzmq sends no port).
    public var address: String
    /// `NULL`, `PLAIN` or `CURVE`.
    public var mechanism: String
    /// For CURVE, one frame: the client's 32-byte public key, proven by the handshake.
    public var credentials: [[UInt8]]
}

/// The answer to a ``ZAPRequest``.
public enum ZAPDecision: Sendable, Hashable {
    /// Admit the peer; `userID` becomes the `User-Id` property of every message it sends.
    case allow(userID: String)
    /// Refuse the handshake (status 400): the peer gets `HANDSHAKE_FAILED_AUTH` and is dropped.
    case deny(reason: String)
}

/// The ZAP handler of one ``ZMQContext``: a ROUTER at `inproc://zeromq.zap.01` that answers each
/// request with the authenticator registered for the request's domain (unknown domains are
/// denied). libzmq allows one handler per context, so sockets with different policies use
/// different domains (``SocketOptions/zapDomain``) and share this handler.
///
/// libzmq admits every peer when no handler is bound; a socket that must fail closed also sets
/// ``SocketOptions/zapEnforceDomain``.
public final class ZAPHandler: Sendable {
    public typealias Authenticator = @Sendable (ZAPRequest) -> ZAPDecision

    /// The endpoint RFC 27 fixes.
    public static let endpoint = "inproc://zeromq.zap.01"

    private struct State {
        var authenticators: [String: Authenticator] = [:]
        var startup: Task<Void, Error>?
    }

    private let state = Mutex(State())
    private let logger: Logger

    init(logger: Logger = Logger(label: "signfleet.zap")) {
        self.logger = logger
    }

    /// Answers the handshakes of sockets with `domain` by `authenticator`, starting the handler
    /// on `loop` if it is not running. Returns once the handler is bound.
    /// - Throws: ``ZMQError`` when the handler endpoint cannot be bound (e.g. another handler
    ///   outside this type holds it).
    public func register(domain: String, on loop: ZMQIOLoop, authenticator: @escaping Authenticator) async throws {
        let startup = state.withLock { state -> Task<Void, Error> in
            state.authenticators[domain] = authenticator
            if let startup = state.startup { return startup }
            let startup = Task { try await self.start(on: loop) }
            state.startup = startup
            return startup
        }
        do {
            try await startup.value
        } catch {
            state.withLock { state in
                state.authenticators[domain] = nil
                state.startup = nil
            }
            throw error
        }
    }

    /// Stops answering for `domain`: its handshakes are denied from now on.
    public func unregister(domain: String) {
        _ = state.withLock { $0.authenticators.removeValue(forKey: domain) }
    }

    /// The decision for one request (denied when nothing is registered for its domain).
    public func decide(_ request: ZAPRequest) -> ZAPDecision {
        guard let authenticator = state.withLock({ $0.authenticators[request.domain] }) else {
            return .deny(reason: "no authenticator for ZAP domain \"\(request.domain)\"")
        }
        return authenticator(request)
    }

    private func start(on loop: ZMQIOLoop) async throws {
        var options = SocketOptions()
        options.linger = 0
        let socket = try await loop.makeSocket(.router, options: options)
        do {
            _ = try await socket.bind(Self.endpoint)
        } catch {
            await socket.close()
            throw error
        }
        Task { await self.serve(socket) }
    }

    private func serve(_ socket: AsyncSocket) async {
        do {
            for try await frames in socket.messages {
                guard let reply = Self.reply(to: frames, deciding: decide) else {
                    logger.warning("malformed ZAP request dropped", metadata: ["frames": "\(frames.count)"])
                    continue
                }
                try await socket.send(reply)
            }
        } catch {
            logger.debug("ZAP handler stopped", metadata: ["error": "\(error)"])
        }
        // The loop closed: a later registration starts a handler again.
        state.withLock { $0.startup = nil }
    }

    /// The reply frames to one request as a ROUTER reads it: `[routing id, "", "1.0", request id,
    /// domain, address, identity, mechanism, credentials...]` → `[routing id, "", "1.0",
    /// request id, status code, status text, user id, metadata]`. Nil for a malformed request.
    static func reply(to frames: [[UInt8]], deciding decide: (ZAPRequest) -> ZAPDecision) -> [[UInt8]]? {
        guard frames.count >= 8, frames[1].isEmpty, frames[2] == Array("1.0".utf8) else { return nil }
        let text = { (index: Int) in String(decoding: frames[index], as: UTF8.self) }
        let request = ZAPRequest(domain: text(4), address: text(5), mechanism: text(7), credentials: Array(frames[8...]))
        let status: String
        let statusText: String
        let userID: String
        switch decide(request) {
        case .allow(let id):
            (status, statusText, userID) = ("200", "OK", id)
        case .deny(let reason):
            (status, statusText, userID) = ("400", reason, "")
        }
        return [frames[0], [], Array("1.0".utf8), frames[3], Array(status.utf8), Array(statusText.utf8), Array(userID.utf8), []]
    }
}
