import Coordinator
import FleetProtocol
import Foundation
import Logging
import Metrics
import PostgresNIO
import SyncContract

/// The coordinator store on PostgreSQL, through postgres-nio (docs/storage.md): the same
/// `CoordinatorStorage` (Coordinator) rules as the SQLite store, for coordinators that share one
/// database. Each store lives in one schema of the database (`public` unless given), so one
/// server can hold several independent stores.
///
/// Serialisation between coordinators: an ingest locks the rows of the devices it applies for
/// (`SELECT … FOR UPDATE`, in one order), so two coordinators applying the same device's pushes
/// run one after the other and exactly-once holds; everything else is one transaction that relies
/// on keys and unique indexes.
public final class PostgresCoordinatorStore: Sendable {
    /// Where the store is: the URL without its password, and the schema.
    public let location: String
    /// The schema that holds the store's tables.
    public let schema: String
    public let faults: StoreFaultMonitor
    public let regressions: StoreRegressionMonitor
    let client: PostgresClient
    let logger: Logger
    private let running: Task<Void, Never>

    /// Whether `text` names a PostgreSQL store (`postgres://` or `postgresql://`) rather than a file.
    public static func isURL(_ text: String) -> Bool { text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") }

    /// Checks that `url` reads `postgres://user[:password]@host[:port]/database[?schema=name]`.
    /// - Returns: the schema it names, if any.
    /// - Throws: `FleetError` `invalid_request` saying what is wrong (the password masked).
    public static func checkURL(_ url: String) throws -> String? {
        try PostgresURL(url).schema
    }

    /// `url` as ``location`` shows it (no password; with the schema when it names one), or the
    /// text with any password masked when it does not parse.
    public static func redacted(url: String) -> String {
        guard let target = try? PostgresURL(url) else { return PostgresURL.redact(url) }
        return target.schema.map { "\(target.redacted) schema \($0)" } ?? target.redacted
    }

    /// Connects to `url` (`postgres://user[:password]@host[:port]/database[?schema=name]`), creates
    /// the schema if needed and applies the migrations it lacks. `schema` wins over the URL's;
    /// `public` when neither names one.
    /// With `readOnly` (the fleet checker) nothing is created or migrated: the schema must hold a
    /// store already, and the caller only reads.
    /// - Throws: `FleetError` `invalid_request` for a malformed URL or schema name; the driver's
    ///   error when the server cannot be reached or the migration fails; `not_found` with
    ///   `readOnly` when the schema holds no coordinator store.
    public init(
        url: String, schema: String? = nil, readOnly: Bool = false, logger: Logger = Logger(label: "signfleet.coordinator.store"),
        metricsFactory: any MetricsFactory = MetricsSystem.factory
    ) async throws {
        let target = try PostgresURL(url)
        let schema = schema ?? target.schema ?? "public"
        guard (1...63).contains(schema.utf8.count),
            schema.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }),
            let first = schema.utf8.first, !(0x30...0x39).contains(first)
        else {
            throw FleetError(.invalidRequest, "a PostgreSQL schema name is 1 to 63 lowercase letters, digits or _, not starting with a digit; got \"\(schema)\"")
        }
        var configuration = PostgresClient.Configuration(
            host: target.host, port: target.port, username: target.user, password: target.password, database: target.database, tls: .disable)
        // Every connection resolves the store's tables in its schema.
        configuration.options.additionalStartupParameters = [("search_path", schema)]
        configuration.options.maximumConnections = 16
        configuration.options.connectTimeout = .seconds(5)
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let client = self.client
        running = Task { await client.run() }
        self.logger = logger
        self.schema = schema
        location = "\(target.redacted) schema \(schema)"
        faults = StoreFaultMonitor(path: location, logger: logger, metricsFactory: metricsFactory)
        regressions = StoreRegressionMonitor(path: location, logger: logger, metricsFactory: metricsFactory)
        do {
            if readOnly {
                // A reader asks once: say at once that the server is not there (the pool would keep
                // trying for about a minute before its circuit breaker gives up).
                try await Self.probe(target, logger: logger)
                try await PostgresSchema.requireStore(client, schema: schema, logger: logger)
            } else {
                _ = try await PostgresSchema.migrate(client, schema: schema, logger: logger)
            }
        } catch {
            running.cancel()
            throw Self.translated(error)
        }
    }

    deinit {
        running.cancel()
    }

    /// Connects once to the server `url` names (5 s at most) and disconnects: a command that
    /// asks once (`signfleet admin`) says at once that the server is not there, where opening a
    /// store keeps trying for about a minute, as a coordinator waiting for its database should.
    /// - Throws: `invalid_request` for a malformed URL; the driver's error, translated, otherwise.
    public static func probe(url: String, logger: Logger = Logger(label: "signfleet.coordinator.store")) async throws {
        do {
            try await probe(try PostgresURL(url), logger: logger)
        } catch {
            throw translated(error)
        }
    }

    private static func probe(_ target: PostgresURL, logger: Logger) async throws {
        var probe = PostgresConnection.Configuration(
            host: target.host, port: target.port, username: target.user, password: target.password, database: target.database, tls: .disable)
        probe.options.connectTimeout = .seconds(5)
        let connection = try await PostgresConnection.connect(configuration: probe, id: 0, logger: logger)
        try await connection.close()
    }

    /// Closes the connections.
    public func close() {
        running.cancel()
    }

    // MARK: Running statements

    /// A read in its own transaction.
    func read<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        do {
            return try await client.withTransaction(logger: logger) { connection in try await body(connection) }
        } catch {
            throw Self.translated(error)
        }
    }

    /// A write transaction reported to ``faults``: a disk fault is recorded (and rethrown as
    /// ``Coordinator/StoreDiskFault``); a committed write ends an episode.
    func write<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await faults.observe(changed: { _ in true }) {
            do {
                return try await client.withTransaction(logger: logger) { connection in try await body(connection) }
            } catch {
                throw Self.translated(error)
            }
        }
    }

    /// The driver's error as the coordinator knows it: SQLSTATE `53100` (disk full) and class `58`
    /// (I/O error) become ``Coordinator/StoreDiskFault``; typed refusals pass through.
    static func translated(_ error: any Error) -> any Error {
        if let failed = error as? PostgresTransactionError {
            // The closure's own error (a typed refusal) first; else what failed around it.
            if let inner = failed.closureError ?? failed.beginError ?? failed.commitError { return translated(inner) }
        }
        // The pool gives up on a server it cannot connect to (its circuit breaker trips). Its error
        // type lives in postgres-nio's underscored pool module, so it is known by name.
        if String(describing: type(of: error)) == "ConnectionPoolError" {
            return StoreDiskFault(kind: .unreachable, message: "PostgreSQL cannot be reached: \(error)")
        }
        guard let error = error as? PSQLError else { return error }
        // No server to talk to: the connection failed, was closed, or the server is shutting down.
        if [.connectionError, .serverClosedConnection, .uncleanShutdown].contains(error.code) {
            return StoreDiskFault(kind: .unreachable, message: "PostgreSQL connection failed (\(error.code))")
        }
        guard let state = error.serverInfo?[.sqlState] else { return error }
        if state.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(state) {
            return StoreDiskFault(kind: .unreachable, message: "SQLSTATE \(state): \(error.serverInfo?[.message] ?? "no message")")
        }
        let message = "SQLSTATE \(state): \(error.serverInfo?[.message] ?? "no message")"
        if state == "53100" { return StoreDiskFault(kind: .diskFull, message: message) }
        if state.hasPrefix("58") { return StoreDiskFault(kind: .ioError, message: message) }
        return error
    }

    /// SQLSTATE of a unique-key violation.
    static func isUniqueViolation(_ error: any Error) -> Bool {
        (translated(error) as? PSQLError)?.serverInfo?[.sqlState] == "23505"
    }
}

/// A `postgres://` URL's parts.
struct PostgresURL {
    var user: String
    var password: String?
    var host: String
    var port: Int
    var database: String
    /// The `schema` query item, if any.
    var schema: String?

    init(_ text: String) throws {
        guard let components = URLComponents(string: text), ["postgres", "postgresql"].contains(components.scheme ?? ""),
            let host = components.host, !host.isEmpty, let user = components.user, !user.isEmpty
        else {
            throw FleetError(.invalidRequest, "a PostgreSQL URL reads postgres://user[:password]@host[:port]/database; got \"\(Self.redact(text))\"")
        }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else {
            throw FleetError(.invalidRequest, "the PostgreSQL URL names no database (postgres://user@host:port/database)")
        }
        self.user = user
        self.password = components.password
        self.host = host
        self.port = components.port ?? 5432
        self.database = database
        self.schema = components.queryItems?.first { $0.name == "schema" }?.value
    }

    /// The URL without the password.
    var redacted: String { "postgres://\(user)@\(host):\(port)/\(database)" }

    /// `text` with anything between `://` and `@` past a `:` replaced, for error messages.
    static func redact(_ text: String) -> String {
        guard let scheme = text.range(of: "://"), let at = text.range(of: "@", range: scheme.upperBound..<text.endIndex),
            let colon = text.range(of: ":", range: scheme.upperBound..<at.lowerBound)
        else { return text }
        return text.replacingCharacters(in: colon.upperBound..<at.lowerBound, with: "***")
    }
}
