/// A proxy in Toxiproxy's JSON shape, as `POST /proxies` and `POST /populate` take it and
/// every read answers it:
///
/// ```json
/// {"name": "coordinator", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:5555",
///  "enabled": true, "toxics": []}
/// ```
///
/// `name` and `upstream` are required; `listen` defaults to `127.0.0.1:0` (a free port; reads
/// show the real one) and `enabled` to true. `toxics` on input is a SignFleet extension (Toxiproxy
/// ignores it): the toxics are added when the proxy is created.
public struct ProxyDefinition: Sendable, Hashable, Codable {
    public var name: String
    public var listen: String
    public var upstream: String
    public var enabled: Bool
    public var toxics: [Toxic]

    public init(name: String, listen: String = "127.0.0.1:0", upstream: String, enabled: Bool = true, toxics: [Toxic] = []) {
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = enabled
        self.toxics = toxics
    }

    enum CodingKeys: String, CodingKey { case name, listen, upstream, enabled, toxics }

    public init(from decoder: any Decoder) throws {
        let container: KeyedDecodingContainer<CodingKeys>
        do {
            container = try decoder.container(keyedBy: CodingKeys.self)
        } catch {
            throw FaultProxyError.badRequestBody("a proxy must be a JSON object")
        }
        func text(_ key: CodingKeys) throws -> String? {
            do {
                return try container.decodeIfPresent(String.self, forKey: key)
            } catch {
                throw FaultProxyError.badRequestBody("field \"\(key.stringValue)\" must be a string")
            }
        }
        guard let name = try text(.name), !name.isEmpty else { throw FaultProxyError.missingField("name") }
        guard let upstream = try text(.upstream), !upstream.isEmpty else { throw FaultProxyError.missingField("upstream") }
        let listen = try text(.listen).flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1:0"
        let enabled: Bool
        do {
            enabled = try container.decodeIfPresent(Bool.self, forKey: .enabled) ?? true
        } catch {
            throw FaultProxyError.badRequestBody("field \"enabled\" must be true or false")
        }
        let toxics: [Toxic]
        do {
            toxics = try container.decodeIfPresent([Toxic].self, forKey: .toxics) ?? []
        } catch let error as FaultProxyError {
            throw error
        } catch {
            throw FaultProxyError.badRequestBody("field \"toxics\" must be an array of toxics")
        }
        _ = try HostPort(parsing: listen, field: "listen")
        _ = try HostPort(parsing: upstream, field: "upstream")
        self.init(name: name, listen: listen, upstream: upstream, enabled: enabled, toxics: toxics)
    }
}

/// A change to a proxy (`POST`/`PATCH /proxies/{name}`): fields given replace the proxy's.
public struct ProxyUpdate: Sendable, Hashable, Codable {
    public var listen: String?
    public var upstream: String?
    public var enabled: Bool?

    public init(listen: String? = nil, upstream: String? = nil, enabled: Bool? = nil) {
        self.listen = listen
        self.upstream = upstream
        self.enabled = enabled
    }

    enum CodingKeys: String, CodingKey { case listen, upstream, enabled }

    public init(from decoder: any Decoder) throws {
        let container: KeyedDecodingContainer<CodingKeys>
        do {
            container = try decoder.container(keyedBy: CodingKeys.self)
        } catch {
            throw FaultProxyError.badRequestBody("a proxy update must be a JSON object")
        }
        do {
            listen = try container.decodeIfPresent(String.self, forKey: .listen)
            upstream = try container.decodeIfPresent(String.self, forKey: .upstream)
        } catch {
            throw FaultProxyError.badRequestBody("fields \"listen\" and \"upstream\" must be strings (host:port)")
        }
        do {
            enabled = try container.decodeIfPresent(Bool.self, forKey: .enabled)
        } catch {
            throw FaultProxyError.badRequestBody("field \"enabled\" must be true or false")
        }
        if let listen { _ = try HostPort(parsing: listen, field: "listen") }
        if let upstream { _ = try HostPort(parsing: upstream, field: "upstream") }
    }
}

/// A `host:port` address (`[v6]:port` for IPv6; an empty host listens on every interface).
struct HostPort: Sendable, Hashable, CustomStringConvertible {
    var host: String
    var port: Int

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// - Throws: ``FaultProxyError`` (400) naming `field` when `text` is not `host:port`.
    init(parsing text: String, field: String) throws {
        let invalid = FaultProxyError.badRequestBody(
            "field \"\(field)\" must be host:port (for example 127.0.0.1:8474), got \"\(text)\"")
        guard let colon = text.lastIndex(of: ":") else { throw invalid }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else { throw invalid }
        self.host = host.isEmpty ? "0.0.0.0" : host
        self.port = port
    }

    var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
