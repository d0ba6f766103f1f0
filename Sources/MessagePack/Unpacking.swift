import CMsgPack

/// Turns scanned input into a `msgpack_object` tree.
enum Unpacking {
    /// msgpack-c's C unpacker keeps a fixed stack of 32 containers
    /// (`MSGPACK_EMBED_STACK_SIZE`) and fails on deeper input.
    static let msgpackCDepth = 32

    /// Validates `input` with the pre-scan, unpacks it and calls `body` with
    /// the root object. Object pointers are valid only inside `body`; `str`,
    /// `bin` and `ext` payloads point into `input` (zero copy).
    static func withRoot<R>(
        _ input: UnsafeRawBufferPointer,
        limits: MessagePackLimits,
        _ body: (UnsafePointer<msgpack_object>) throws -> R
    ) throws -> R {
        let scan = try Scanner.scan(input, limits: limits, allowTrailing: false)
        guard let base = input.baseAddress else {
            throw MessagePackError(code: .truncated, offset: 0, message: "input is empty")
        }
        var unpacked = msgpack_unpacked()
        msgpack_unpacked_init(&unpacked)
        defer { msgpack_unpacked_destroy(&unpacked) }
        if scan.depth < msgpackCDepth {
            var offset = 0
            let rc = msgpack_unpack_next(&unpacked, base.assumingMemoryBound(to: CChar.self), input.count, &offset)
            guard rc == MSGPACK_UNPACK_SUCCESS, offset == input.count else {
                throw MessagePackError(code: .invalidInput, offset: offset, message: "msgpack-c rejected the input (code \(rc.rawValue))")
            }
            return try withUnsafePointer(to: &unpacked.data) { try body($0) }
        }
        // Deeper than msgpack-c allows but within our limit: build the same
        // tree in Swift, in a msgpack-c zone, from the already validated bytes.
        guard let zone = msgpack_zone_new(8192) else {
            throw MessagePackError(code: .invalidInput, message: "msgpack-c could not allocate a zone")
        }
        unpacked.zone = zone
        var builder = TreeBuilder(base: base.assumingMemoryBound(to: UInt8.self), count: input.count, zone: zone)
        var root = msgpack_object()
        try builder.build(into: &root)
        return try withUnsafePointer(to: &root) { try body($0) }
    }
}

/// Builds a `msgpack_object` tree from bytes the `Scanner` accepted. It still
/// checks bounds so that a mistake here cannot read out of the input.
private struct TreeBuilder {
    let base: UnsafePointer<UInt8>
    let count: Int
    let zone: UnsafeMutablePointer<msgpack_zone>
    var pos = 0

    private func failure() -> MessagePackError {
        MessagePackError(code: .invalidInput, offset: pos, message: "input changed between scan and build")
    }

    private mutating func take(_ size: Int) throws -> UnsafePointer<UInt8> {
        guard size >= 0, count - pos >= size else { throw failure() }
        defer { pos += size }
        return base + pos
    }

    private mutating func be(_ size: Int) throws -> UInt64 {
        let p = try take(size)
        var value: UInt64 = 0
        for i in 0..<size { value = value << 8 | UInt64(p[i]) }
        return value
    }

    private func raw(_ p: UnsafePointer<UInt8>) -> UnsafePointer<CChar> {
        UnsafeRawPointer(p).assumingMemoryBound(to: CChar.self)
    }

    private func allocate<T>(_ type: T.Type, _ n: Int) throws -> UnsafeMutablePointer<T>? {
        if n == 0 { return nil }
        guard let memory = msgpack_zone_malloc(zone, MemoryLayout<T>.stride * n) else { throw failure() }
        return memory.bindMemory(to: T.self, capacity: n)
    }

    mutating func build(into object: inout msgpack_object) throws {
        let marker = try take(1).pointee
        switch marker {
        case 0x00...0x7f: setUInt(&object, UInt64(marker))
        case 0xe0...0xff: setInt(&object, Int64(Int8(bitPattern: marker)))
        case 0x80...0x8f: try buildMap(&object, Int(marker & 0x0f))
        case 0x90...0x9f: try buildArray(&object, Int(marker & 0x0f))
        case 0xa0...0xbf: try buildString(&object, Int(marker & 0x1f))
        case 0xc0: object.type = MSGPACK_OBJECT_NIL
        case 0xc2, 0xc3:
            object.type = MSGPACK_OBJECT_BOOLEAN
            object.via.boolean = marker == 0xc3
        case 0xc4, 0xc5, 0xc6:
            let n = Int(try be(1 << Int(marker - 0xc4)))
            object.type = MSGPACK_OBJECT_BIN
            object.via.bin = msgpack_object_bin(size: UInt32(n), ptr: raw(try take(n)))
        case 0xc7, 0xc8, 0xc9:
            let n = Int(try be(1 << Int(marker - 0xc7)))
            try buildExt(&object, n)
        case 0xca:
            object.type = MSGPACK_OBJECT_FLOAT32
            object.via.f64 = Double(Float(bitPattern: UInt32(try be(4))))
        case 0xcb:
            object.type = MSGPACK_OBJECT_FLOAT64
            object.via.f64 = Double(bitPattern: try be(8))
        case 0xcc...0xcf: setUInt(&object, try be(1 << Int(marker - 0xcc)))
        case 0xd0...0xd3:
            let size = 1 << Int(marker - 0xd0)
            let bits = try be(size)
            let shift = UInt64(64 - 8 * size)
            setInt(&object, Int64(bitPattern: bits << shift) >> shift)
        case 0xd4...0xd8: try buildExt(&object, 1 << Int(marker - 0xd4))
        case 0xd9, 0xda, 0xdb: try buildString(&object, Int(try be(1 << Int(marker - 0xd9))))
        case 0xdc, 0xdd: try buildArray(&object, Int(try be(marker == 0xdc ? 2 : 4)))
        case 0xde, 0xdf: try buildMap(&object, Int(try be(marker == 0xde ? 2 : 4)))
        default: throw failure()
        }
    }

    private func setUInt(_ object: inout msgpack_object, _ value: UInt64) {
        object.type = MSGPACK_OBJECT_POSITIVE_INTEGER
        object.via.u64 = value
    }

    /// msgpack-c reports non-negative values of signed formats as positive integers.
    private func setInt(_ object: inout msgpack_object, _ value: Int64) {
        if value >= 0 { return setUInt(&object, UInt64(value)) }
        object.type = MSGPACK_OBJECT_NEGATIVE_INTEGER
        object.via.i64 = value
    }

    private mutating func buildString(_ object: inout msgpack_object, _ n: Int) throws {
        object.type = MSGPACK_OBJECT_STR
        object.via.str = msgpack_object_str(size: UInt32(n), ptr: raw(try take(n)))
    }

    private mutating func buildExt(_ object: inout msgpack_object, _ n: Int) throws {
        let type = Int8(bitPattern: try take(1).pointee)
        object.type = MSGPACK_OBJECT_EXT
        object.via.ext = msgpack_object_ext(type: type, size: UInt32(n), ptr: raw(try take(n)))
    }

    private mutating func buildArray(_ object: inout msgpack_object, _ n: Int) throws {
        guard n <= count - pos else { throw failure() }
        let elements = try allocate(msgpack_object.self, n)
        for i in 0..<n {
            guard let elements else { break }
            (elements + i).initialize(to: msgpack_object())
            try build(into: &elements[i])
        }
        object.type = MSGPACK_OBJECT_ARRAY
        object.via.array = msgpack_object_array(size: UInt32(n), ptr: elements)
    }

    private mutating func buildMap(_ object: inout msgpack_object, _ n: Int) throws {
        guard n <= count - pos else { throw failure() }
        let entries = try allocate(msgpack_object_kv.self, n)
        for i in 0..<n {
            guard let entries else { break }
            (entries + i).initialize(to: msgpack_object_kv())
            try build(into: &entries[i].key)
            try build(into: &entries[i].val)
        }
        object.type = MSGPACK_OBJECT_MAP
        object.via.map = msgpack_object_map(size: UInt32(n), ptr: entries)
    }
}
