import CZeroMQ

/// A CurveZMQ key pair (X25519, 32 bytes each), as libzmq's CURVE mechanism uses it.
///
/// ```swift
/// let server = try CurveKeyPair.generate()
/// var options = SocketOptions()
/// options.curve = .server(secretKey: server.secretKey)
/// print(Z85.encode(server.publicKey)!)   // what clients pin
/// ```
public struct CurveKeyPair: Sendable, Hashable {
    /// The public key, 32 bytes.
    public let publicKey: [UInt8]
    /// The secret key, 32 bytes. Keep it out of logs.
    public let secretKey: [UInt8]

    /// A new random key pair (`zmq_curve_keypair`, libsodium's generator).
    /// - Throws: ``ZMQError`` `ENOTSUP` when libzmq was built without CURVE.
    public static func generate() throws(ZMQError) -> CurveKeyPair {
        var publicText = [CChar](repeating: 0, count: 41)
        var secretText = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&publicText, &secretText) == 0 else { throw ZMQError.last("zmq_curve_keypair") }
        guard let publicKey = Z85.decode(String(cString: publicText)), let secretKey = Z85.decode(String(cString: secretText)) else {
            throw ZMQError(errno: EINVAL, operation: "zmq_curve_keypair (unreadable Z85 output)")
        }
        return CurveKeyPair(publicKey: publicKey, secretKey: secretKey)
    }

    /// The pair of a stored secret key (the public key is derived with `zmq_curve_public`).
    /// - Throws: ``ZMQError`` `EINVAL` when `secretKey` is not 32 bytes.
    public init(secretKey: [UInt8]) throws(ZMQError) {
        guard secretKey.count == 32, let secretText = Z85.encode(secretKey) else {
            throw ZMQError(errno: EINVAL, operation: "CurveKeyPair(secretKey:) needs 32 bytes, got \(secretKey.count)")
        }
        var publicText = [CChar](repeating: 0, count: 41)
        guard zmq_curve_public(&publicText, secretText) == 0, let publicKey = Z85.decode(String(cString: publicText)) else {
            throw ZMQError.last("zmq_curve_public")
        }
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    private init(publicKey: [UInt8], secretKey: [UInt8]) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }
}

/// Which side of a CURVE handshake a socket takes.
public enum CurveSecurity: Sendable, Hashable {
    /// `ZMQ_CURVE_SERVER` with the server's long-term secret key.
    case server(secretKey: [UInt8])
    /// A client that pins `serverKey` and proves it holds `keys`.
    case client(serverKey: [UInt8], keys: CurveKeyPair)
}

/// Z85 (ZeroMQ RFC 32), the text form of CURVE keys: 5 characters per 4 bytes.
public enum Z85 {
    /// The text of `bytes`, or nil when their count is not a multiple of 4.
    public static func encode(_ bytes: [UInt8]) -> String? {
        guard bytes.count % 4 == 0 else { return nil }
        var text = [CChar](repeating: 0, count: bytes.count / 4 * 5 + 1)
        guard zmq_z85_encode(&text, bytes, bytes.count) != nil else { return nil }
        return String(cString: text)
    }

    /// The bytes of `text`, or nil when it is not Z85 (wrong length or a character outside the alphabet).
    public static func decode(_ text: String) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard !characters.isEmpty, characters.count % 5 == 0, characters.allSatisfy({ alphabet.contains($0) }) else { return nil }
        var bytes = [UInt8](repeating: 0, count: characters.count / 5 * 4)
        guard zmq_z85_decode(&bytes, text) != nil else { return nil }
        return bytes
    }

    /// libzmq's decoder reads past the table for bytes outside the alphabet: check first.
    private static let alphabet = Set(
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8)
}
