/// Which way a toxic acts: `upstream` is client → server (device → coordinator),
/// `downstream` is server → client. The names are Toxiproxy's.
public enum ToxicStream: String, Sendable, Hashable, Codable, CaseIterable {
    case upstream
    case downstream
}

/// One fault applied to a proxy's connections, in Toxiproxy's JSON shape:
///
/// ```json
/// {"name": "latency_downstream", "type": "latency", "stream": "downstream",
///  "toxicity": 1.0, "attributes": {"latency": 300, "jitter": 50}}
/// ```
///
/// Decoding applies Toxiproxy's defaults (stream `downstream`, toxicity 1, name
/// `<type>_<stream>`, attributes 0) and refuses bad input with a ``FaultProxyError`` naming the
/// field: unknown type, unknown attribute, a negative or fractional value, toxicity outside 0…1.
public struct Toxic: Sendable, Hashable, Codable {
    public var name: String
    public var stream: ToxicStream
    /// The probability (0…1) that the toxic applies to a given connection, drawn once per
    /// connection (and again when the toxic is updated).
    public var toxicity: Double
    public var kind: ToxicKind

    /// Toxiproxy's `type` field.
    public var type: String { kind.typeName }

    public init(name: String? = nil, stream: ToxicStream = .downstream, toxicity: Double = 1, kind: ToxicKind) {
        self.name = name ?? "\(kind.typeName)_\(stream.rawValue)"
        self.stream = stream
        self.toxicity = toxicity
        self.kind = kind
    }

    enum CodingKeys: String, CodingKey {
        case name, type, stream, toxicity, attributes
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let streamText = try Self.field(String.self, .stream, in: container) ?? ToxicStream.downstream.rawValue
        guard let stream = ToxicStream(rawValue: streamText) else { throw FaultProxyError.invalidStream(streamText) }
        guard let type = try Self.field(String.self, .type, in: container), !type.isEmpty else {
            throw FaultProxyError.missingField("type")
        }
        guard ToxicKind.typeNames.contains(type) else { throw FaultProxyError.invalidToxicType(type) }
        let toxicity = try Self.field(Double.self, .toxicity, in: container) ?? 1
        try Self.validate(toxicity: toxicity)
        let attributes = try ToxicAttributes.decode(from: container, forKey: .attributes, type: type)
        let name = try Self.field(String.self, .name, in: container)
        self.init(
            name: (name?.isEmpty ?? true) ? nil : name, stream: stream, toxicity: toxicity,
            kind: try ToxicKind(type: type, attributes: attributes))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(type, forKey: .type)
        try container.encode(stream, forKey: .stream)
        try container.encode(toxicity, forKey: .toxicity)
        try container.encode(kind.attributes, forKey: .attributes)
    }

    static func validate(toxicity: Double) throws {
        guard toxicity.isFinite, (0...1).contains(toxicity) else {
            throw FaultProxyError.badRequestBody("toxicity must be a number between 0 and 1, got \(toxicity)")
        }
    }

    /// An optional field of the right JSON type, or a ``FaultProxyError`` naming it.
    static func field<T: Decodable>(
        _ type: T.Type, _ key: CodingKeys, in container: KeyedDecodingContainer<CodingKeys>
    ) throws -> T? {
        do {
            return try container.decodeIfPresent(T.self, forKey: key)
        } catch {
            throw FaultProxyError.badRequestBody("field \"\(key.stringValue)\" must be a \(T.self == String.self ? "string" : "number")")
        }
    }
}

/// A change to an existing toxic (`POST /proxies/{proxy}/toxics/{toxic}`): attributes given
/// replace the toxic's, the others stay; toxicity likewise.
public struct ToxicUpdate: Sendable, Hashable, Encodable {
    public var toxicity: Double?
    public var attributes: [String: Int]

    public init(toxicity: Double? = nil, attributes: [String: Int] = [:]) {
        self.toxicity = toxicity
        self.attributes = attributes
    }

    enum CodingKeys: String, CodingKey { case toxicity, attributes }

    /// Decodes an update for a toxic of `type` (attributes are checked against that type).
    static func decode(_ decoder: any Decoder, type: String) throws -> ToxicUpdate {
        let container = try decoder.container(keyedBy: Toxic.CodingKeys.self)
        let toxicity = try Toxic.field(Double.self, .toxicity, in: container)
        if let toxicity { try Toxic.validate(toxicity: toxicity) }
        let attributes = try ToxicAttributes.decode(from: container, forKey: .attributes, type: type)
        return ToxicUpdate(toxicity: toxicity, attributes: attributes)
    }

    /// `toxic` with this update applied, validated.
    func applied(to toxic: Toxic) throws -> Toxic {
        var updated = toxic
        if let toxicity { updated.toxicity = toxicity }
        let merged = toxic.kind.attributes.merging(attributes) { $1 }
        updated.kind = try ToxicKind(type: toxic.type, attributes: merged)
        return updated
    }
}

/// Reads an `attributes` object: every key must belong to the toxic type and every value must
/// be a whole number ≥ 0.
enum ToxicAttributes {
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The largest accepted attribute value (milliseconds, bytes, KB/s, …).
    static let maximum = Int(Int32.max)

    static func decode(
        from container: KeyedDecodingContainer<Toxic.CodingKeys>, forKey key: Toxic.CodingKeys, type: String
    ) throws -> [String: Int] {
        guard container.contains(key), !((try? container.decodeNil(forKey: key)) ?? false) else { return [:] }
        let object: KeyedDecodingContainer<Key>
        do {
            object = try container.nestedContainer(keyedBy: Key.self, forKey: key)
        } catch {
            throw FaultProxyError.badRequestBody("field \"attributes\" must be an object")
        }
        let known = ToxicKind.attributeNames(of: type)
        var result: [String: Int] = [:]
        for attribute in object.allKeys {
            guard known.contains(attribute.stringValue) else {
                throw FaultProxyError.badRequestBody(
                    "unknown attribute \"\(attribute.stringValue)\" for a \(type) toxic; it takes \(known.joined(separator: ", "))")
            }
            let value: Double
            do {
                value = try object.decode(Double.self, forKey: attribute)
            } catch {
                throw FaultProxyError.badRequestBody("attribute \"\(attribute.stringValue)\" must be a number")
            }
            guard value.isFinite, value >= 0, value <= Double(maximum), value.rounded() == value else {
                throw FaultProxyError.badRequestBody(
                    "attribute \"\(attribute.stringValue)\" must be a whole number from 0 to \(maximum), got \(value)")
            }
            result[attribute.stringValue] = Int(value)
        }
        return result
    }
}
