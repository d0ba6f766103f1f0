/// A refused fault-proxy operation, shaped like Toxiproxy's API errors: a message and the HTTP
/// status the control API answers with (`{"error": message, "status": status}`).
///
/// The message starts with Toxiproxy's own text ("proxy not found", "bad request body", …) so
/// clients that match on it keep working, followed by what exactly was wrong.
public struct FaultProxyError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    /// The HTTP status: 400, 404, 409 or 500.
    public var status: Int

    public init(_ message: String, status: Int) {
        self.message = message
        self.status = status
    }

    public var description: String { "\(message) (\(status))" }

    public static func badRequestBody(_ detail: String) -> FaultProxyError {
        FaultProxyError("bad request body: \(detail)", status: 400)
    }

    public static func missingField(_ field: String) -> FaultProxyError {
        FaultProxyError("missing required field: \(field)", status: 400)
    }

    public static func proxyNotFound(_ name: String) -> FaultProxyError {
        FaultProxyError("proxy not found: \(name)", status: 404)
    }

    public static func proxyAlreadyExists(_ name: String) -> FaultProxyError {
        FaultProxyError("proxy already exists: \(name)", status: 409)
    }

    public static func invalidStream(_ stream: String) -> FaultProxyError {
        FaultProxyError("stream was invalid, can be either upstream or downstream: got \"\(stream)\"", status: 400)
    }

    public static func invalidToxicType(_ type: String) -> FaultProxyError {
        FaultProxyError(
            "invalid toxic type: \"\(type)\"; use one of \(ToxicKind.typeNames.joined(separator: ", "))", status: 400)
    }

    public static func toxicAlreadyExists(_ name: String) -> FaultProxyError {
        FaultProxyError("toxic already exists: \(name)", status: 409)
    }

    public static func toxicNotFound(_ name: String) -> FaultProxyError {
        FaultProxyError("toxic not found: \(name)", status: 404)
    }

    /// The listener could not be bound (Toxiproxy answers 500 for this too).
    public static func cannotListen(_ address: String, _ error: any Error) -> FaultProxyError {
        FaultProxyError("cannot listen on \(address): \(error)", status: 500)
    }
}
