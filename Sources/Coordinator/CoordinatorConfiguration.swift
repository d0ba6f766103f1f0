import Foundation
import Logging

/// Everything `signfleet coordinator` can be told, from flags and an optional JSON file.
///
/// A file uses the flags' names as keys (without the dashes) and JSON types:
///
/// ```json
/// {"bind": "tcp://0.0.0.0:5555", "http": "0.0.0.0:8080", "store": "/var/lib/signfleet/coordinator.sqlite",
///  "heartbeat-ms": 1000, "heartbeat-budget": 1000, "io-threads": 2, "liveness": 3, "token-lifetime": 3600, "max-message-size": 16777216,
///  "seed-demo": false, "demo-hourly-limit": 3600, "demo-burst-limit": 100, "log-level": "info", "admin-token": "…",
///  "http-max-connections": 256, "signing-url-lifetime": 300, "signing-session-timeout": 1200}
/// ```
///
/// Flags override the file, which overrides the defaults below. Unknown keys and values of
/// the wrong type are refused with an error naming the key.
public struct CoordinatorConfiguration: Sendable, Hashable {
    /// ZeroMQ endpoint of the ROUTER devices connect to.
    public var bind = "tcp://127.0.0.1:5555"
    /// `host:port` of the HTTP listener (port 0 picks a free one); `nil` turns it off.
    public var http: String? = "127.0.0.1:0"
    /// `host:port` of a second listener serving only `GET /health` and `/metrics` with connections
    /// of its own, answered however many connections the main one holds (``CoordinatorProbeListener``);
    /// `nil` or `off`: none. Needs `http`.
    public var probeHTTP: String?
    /// `host:port` of the HTTPS listener (the same routes over TLS: the official SDKs' OAuth calls
    /// need it; ``CoordinatorHTTPSListener``); `nil` or `off`: none. Needs `http`.
    public var https: String?
    /// Where the HTTPS listener's local CA and certificate are kept (``LocalTLSIdentity``);
    /// `nil`: `<store>.tls` beside a SQLite store (a PostgreSQL store needs it given).
    public var tlsDir: String?
    /// Devices send a heartbeat after this many idle milliseconds.
    public var heartbeatMs = 1000
    /// A device silent for this many heartbeat intervals is lost.
    public var liveness = 3
    /// Heartbeats a second the coordinator plans for across the fleet: the interval it announces
    /// grows with the devices alive to stay within it (`FleetServerConfiguration.heartbeatBudget` (FleetProtocol)).
    public var heartbeatBudget = 1000
    /// libzmq I/O threads of the coordinator's context: they run every connection's CURVE
    /// handshake and encryption. Two spread a crowd of handshakes over two cores, so the devices
    /// whose connections live on the other thread are not kept waiting (docs/coordinator.md).
    public var ioThreads = 2
    /// Path of the SQLite store.
    public var store = "signfleet-coordinator.sqlite"
    /// Create the demo account and user if missing.
    public var seedDemo = false
    /// Requests per hour of the demo account `seed-demo` creates; `nil`: ``DemoData/rateLimits``
    /// (far above what a demo sends). `signfleet fleet run` sets it from a scenario's
    /// `coordinator.rate_limit_hourly`.
    public var demoHourlyLimit: Int?
    /// Requests per burst window (30 s) of that account; `nil` with an hourly limit: the
    /// hourly limit (no separate burst).
    public var demoBurstLimit: Int?
    /// Access-token lifetime in seconds.
    public var tokenLifetime = 3600
    /// Largest accepted frame in bytes.
    public var maxMessageSize = 16 << 20
    /// swift-log level name.
    public var logLevel = "info"
    /// Bearer token of the HTTP admin endpoints; `nil` disables them.
    public var adminToken: String?
    /// Serve plain TCP instead of CURVE: no transport authentication, any peer can claim any
    /// device id. For comparison runs and old clients only; announced loudly.
    public var plaintext = false
    /// Where to write the coordinator's CURVE public key (Z85, one line) once it is bound, for
    /// devices to pin; `nil`: only printed.
    public var publicKeyFile: String?
    /// HTTP connections served at once (beyond: `503`); `nil`: a quarter of the open-file limit,
    /// between 16 and 1,024 (``HTTPConnectionBudget/defaultLimit()``).
    public var httpMaxConnections: Int?
    /// Seconds a signing URL may wait to be opened (DocuSign: 5 minutes).
    public var signingURLLifetime = 300
    /// Seconds a signing page may sit without a request before its session ends (DocuSign: 20 minutes).
    public var signingSessionTimeout = 1200
    /// Attempts per Connect event before it becomes a failure record (docs/webhooks.md).
    public var connectAttempts = 8
    /// Seconds a Connect listener has to answer a delivery.
    public var connectTimeout = 10
    /// Seeds the Connect back-off's jitter; `nil`: drawn at start and printed.
    public var connectSeed: Int?
    /// Days ended Connect rows (delivered, failure records) are kept; 0 keeps them for ever.
    public var connectRetentionDays = 7

    /// The keys a configuration file may hold (the long flag names without `--`).
    public static let keys = [
        "bind", "http", "probe-http", "https", "tls-dir", "heartbeat-ms", "heartbeat-budget", "io-threads", "liveness", "store", "seed-demo", "demo-hourly-limit", "demo-burst-limit", "token-lifetime",
        "max-message-size", "log-level", "admin-token", "plaintext", "public-key-file", "http-max-connections",
        "signing-url-lifetime", "signing-session-timeout", "connect-attempts", "connect-timeout", "connect-seed",
        "connect-retention-days",
    ]

    /// The limits the demo account is created with.
    public var demoRateLimits: RateLimits {
        guard let demoHourlyLimit else { return DemoData.rateLimits }
        return RateLimits(hourly: demoHourlyLimit, burst: demoBurstLimit ?? demoHourlyLimit, burstWindowSeconds: RateLimits().burstWindowSeconds)
    }

    public init() {}

    /// Applies the JSON configuration file at `path` over the current values.
    /// - Throws: ``CoordinatorConfigurationError`` when the file cannot be read, is not a
    ///   JSON object, or holds an unknown key or a value of the wrong type.
    public mutating func apply(fileAt path: String) throws {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CoordinatorConfigurationError(key: nil, "cannot read the configuration file \(path): \(error.localizedDescription)")
        }
        try apply(json: data, source: path)
    }

    /// Applies a JSON configuration object over the current values.
    /// - Parameters:
    ///   - data: the JSON object of settings.
    ///   - source: names the file in errors.
    /// - Throws: ``CoordinatorConfigurationError`` naming the offending key.
    public mutating func apply(json data: Data, source: String = "the configuration") throws {
        let file: ConfigurationFile
        do {
            file = try JSONDecoder().decode(ConfigurationFile.self, from: data)
        } catch let error as CoordinatorConfigurationError {
            throw CoordinatorConfigurationError(key: error.key, "\(source): \(error.message)")
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.isEmpty {
            throw CoordinatorConfigurationError(key: nil, "\(source): expected a JSON object of settings")
        } catch let DecodingError.typeMismatch(type, context), let DecodingError.valueNotFound(type, context) {
            let key = context.codingPath.first?.stringValue
            throw CoordinatorConfigurationError(
                key: key, "\(source): \"\(key ?? "?")\" must be \(Self.describe(type)); fix or remove it")
        } catch DecodingError.dataCorrupted(let context) where !context.codingPath.isEmpty {
            let key = context.codingPath[0].stringValue
            throw CoordinatorConfigurationError(
                key: key, "\(source): \"\(key)\" has an unusable value (\(context.debugDescription)); fix or remove it")
        } catch {
            throw CoordinatorConfigurationError(key: nil, "\(source) is not valid JSON: \(error)")
        }
        for (key, value) in file.values {
            switch value {
            case .string(let text):
                switch key {
                case "bind": bind = text
                case "http": http = text
                case "probe-http": probeHTTP = text
                case "https": https = text
                case "tls-dir": tlsDir = text
                case "store": store = text
                case "admin-token": adminToken = text
                case "public-key-file": publicKeyFile = text
                default: logLevel = text
                }
            case .integer(let number):
                switch key {
                case "heartbeat-ms": heartbeatMs = number
                case "heartbeat-budget": heartbeatBudget = number
                case "io-threads": ioThreads = number
                case "liveness": liveness = number
                case "token-lifetime": tokenLifetime = number
                case "demo-hourly-limit": demoHourlyLimit = number
                case "demo-burst-limit": demoBurstLimit = number
                case "http-max-connections": httpMaxConnections = number
                case "signing-url-lifetime": signingURLLifetime = number
                case "signing-session-timeout": signingSessionTimeout = number
                case "connect-attempts": connectAttempts = number
                case "connect-timeout": connectTimeout = number
                case "connect-seed": connectSeed = number
                case "connect-retention-days": connectRetentionDays = number
                default: maxMessageSize = number
                }
            case .bool(let flag):
                if key == "plaintext" { plaintext = flag } else { seedDemo = flag }
            }
        }
    }

    /// Checks the values' ranges.
    /// - Throws: ``CoordinatorConfigurationError`` naming the flag / key that is out of range.
    public func validate() throws {
        func check(_ ok: Bool, _ key: String, _ rule: String) throws {
            if !ok {
                throw CoordinatorConfigurationError(key: key, "--\(key) (file key \"\(key)\") \(rule)")
            }
        }
        try check(heartbeatMs >= 10, "heartbeat-ms", "must be at least 10")
        try check(liveness >= 1, "liveness", "must be at least 1")
        try check((1...1_000_000).contains(heartbeatBudget), "heartbeat-budget", "must be 1 to 1000000 heartbeats a second")
        try check((1...64).contains(ioThreads), "io-threads", "must be 1 to 64")
        try check(maxMessageSize >= 1024, "max-message-size", "must be at least 1024")
        try check(tokenLifetime >= 1, "token-lifetime", "must be at least 1")
        try check(!bind.isEmpty, "bind", "must be a ZeroMQ endpoint such as tcp://127.0.0.1:5555")
        try check(!store.isEmpty, "store", "must be a file path")
        if let demoHourlyLimit { try check(demoHourlyLimit >= 1, "demo-hourly-limit", "must be at least 1") }
        if let httpMaxConnections { try check((1...1_000_000).contains(httpMaxConnections), "http-max-connections", "must be 1 to 1000000") }
        try check((1...86_400).contains(signingURLLifetime), "signing-url-lifetime", "must be 1 to 86400 seconds")
        try check((1...86_400).contains(signingSessionTimeout), "signing-session-timeout", "must be 1 to 86400 seconds")
        try check((1...100).contains(connectAttempts), "connect-attempts", "must be 1 to 100")
        try check((1...300).contains(connectTimeout), "connect-timeout", "must be 1 to 300 seconds")
        try check((0...3_650).contains(connectRetentionDays), "connect-retention-days", "must be 0 (keep for ever) to 3650 days")
        if let connectSeed { try check(connectSeed >= 0, "connect-seed", "must be 0 or more") }
        if let demoBurstLimit {
            try check(demoBurstLimit >= 1, "demo-burst-limit", "must be at least 1")
            try check(demoHourlyLimit != nil, "demo-burst-limit", "needs demo-hourly-limit (the burst is of that budget)")
        }
        try check(
            Logger.Level(rawValue: logLevel) != nil, "log-level",
            "must be one of trace, debug, info, notice, warning, error, critical; got \"\(logLevel)\"")
        if http != nil {
            _ = try httpAddress()
        }
        if try probeHTTPAddress() != nil {
            try check(try httpAddress() != nil, "probe-http", "needs the HTTP listener (--http is off)")
        }
        if try httpsAddress() != nil {
            try check(try httpAddress() != nil, "https", "needs the HTTP listener (--http is off)")
            try check(tlsDirectory() != nil, "tls-dir", "must be given with a PostgreSQL store (where the local CA is kept)")
        }
        if let adminToken {
            try check(
                adminToken.utf8.count >= 16 && !adminToken.contains(where: \.isWhitespace), "admin-token",
                "must be at least 16 characters without spaces")
        }
    }

    /// The HTTP listener's host and port, or `nil` when it is off (`http` is `off`).
    /// - Throws: ``CoordinatorConfigurationError`` when `http` is not `host:port`.
    public func httpAddress() throws -> (host: String, port: Int)? {
        try Self.address(http, key: "http")
    }

    /// The HTTPS listener's host and port, or `nil` when there is none.
    public func httpsAddress() throws -> (host: String, port: Int)? {
        try Self.address(https, key: "https")
    }

    /// Where the local CA and certificate live: `tls-dir`, else `<store>.tls` for a SQLite store.
    public func tlsDirectory() -> String? {
        if let tlsDir { return tlsDir }
        return store.hasPrefix("postgres://") || store.hasPrefix("postgresql://") ? nil : store + ".tls"
    }

    /// The probe listener's host and port, or `nil` when there is none.
    /// - Throws: ``CoordinatorConfigurationError`` when `probe-http` is not `host:port`.
    public func probeHTTPAddress() throws -> (host: String, port: Int)? {
        try Self.address(probeHTTP, key: "probe-http")
    }

    static func address(_ value: String?, key: String) throws -> (host: String, port: Int)? {
        guard let value, value != "off" else { return nil }
        guard let colon = value.lastIndex(of: ":"), let port = Int(value[value.index(after: colon)...]), (0...65535).contains(port)
        else {
            throw CoordinatorConfigurationError(
                key: key,
                "--\(key) (file key \"\(key)\") must be host:port such as 127.0.0.1:8080 (port 0 picks a free port) or off; got \"\(value)\"")
        }
        var host = String(value[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else {
            throw CoordinatorConfigurationError(key: key, "--\(key) (file key \"\(key)\") needs a host, such as 127.0.0.1:\(port)")
        }
        return (host, port)
    }

    static func describe(_ type: Any.Type) -> String {
        switch type {
        case is Int.Type, is Double.Type: "an integer"
        case is Bool.Type: "true or false"
        default: "a string"
        }
    }
}

/// A configuration value that is refused; `key` names the setting when there is one.
public struct CoordinatorConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The offending key (file key / flag name without `--`), when the error is about one.
    public var key: String?
    public var message: String

    public init(key: String?, _ message: String) {
        self.key = key
        self.message = message
    }

    public var description: String { message }
}

/// The decoded file: only known keys, each with its type checked.
private struct ConfigurationFile: Decodable {
    enum Value {
        case string(String)
        case integer(Int)
        case bool(Bool)
    }

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    var values: [(String, Value)] = []

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        for key in container.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
            switch key.stringValue {
            case "bind", "http", "probe-http", "https", "tls-dir", "store", "log-level", "admin-token", "public-key-file":
                values.append((key.stringValue, .string(try container.decode(String.self, forKey: key))))
            case "heartbeat-ms", "heartbeat-budget", "io-threads", "liveness", "token-lifetime", "max-message-size", "demo-hourly-limit", "demo-burst-limit", "http-max-connections",
                "signing-url-lifetime", "signing-session-timeout":
                // Decoded as a number first, so 1.5 is named as not an integer rather than bad JSON.
                let number = try container.decode(Double.self, forKey: key)
                guard number.rounded() == number, let integer = Int(exactly: number) else {
                    throw CoordinatorConfigurationError(
                        key: key.stringValue, "\"\(key.stringValue)\" must be an integer; got \(number)")
                }
                values.append((key.stringValue, .integer(integer)))
            case "seed-demo", "plaintext":
                values.append((key.stringValue, .bool(try container.decode(Bool.self, forKey: key))))
            default:
                throw CoordinatorConfigurationError(
                    key: key.stringValue,
                    "unknown key \"\(key.stringValue)\"; known keys are \(CoordinatorConfiguration.keys.joined(separator: ", "))")
            }
        }
    }
}
