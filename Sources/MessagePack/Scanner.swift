/// The structural pre-scan that runs before msgpack-c sees any bytes.
///
/// msgpack-c allocates `count * sizeof(msgpack_object)` as soon as it reads an
/// array or map header, so a 5-byte input claiming 2³²−1 elements would make it
/// allocate ~100 GB. This scan walks the whole value iteratively (no recursion,
/// no allocation sized by the input's claims) and checks every declared length
/// against the bytes left, where every pending element needs at least one byte.
/// Only input that passes reaches msgpack-c, so its allocations are bounded by
/// a small multiple of the input size.
struct Scanner {
    struct Result {
        /// Offset just past the first complete value.
        var end: Int
        /// Deepest container nesting seen (0 for a scalar).
        var depth: Int
    }

    private struct Frame {
        var total: Int
        var remaining: Int
        var isMap: Bool
        var keyStart: Int = -1
        var keyLength: Int = 0
    }

    /// Scans one value at the start of `input`.
    /// - Parameters:
    ///   - input: the encoded bytes.
    ///   - limits: the size and depth limits the value must keep.
    ///   - allowTrailing: when false, bytes after the value are an error.
    static func scan(_ input: UnsafeRawBufferPointer, limits: MessagePackLimits, allowTrailing: Bool) throws(MessagePackError) -> Result {
        let n = input.count
        if n > limits.maxInputSize {
            throw MessagePackError(code: .sizeLimitExceeded, offset: 0, message: "input is \(n) bytes, limit is \(limits.maxInputSize)")
        }
        guard let base = input.baseAddress?.assumingMemoryBound(to: UInt8.self), n > 0 else {
            throw MessagePackError(code: .truncated, offset: 0, message: "input is empty")
        }
        let maxDepth = min(limits.maxDepth, MessagePackLimits.depthCeiling)
        // The innermost container lives in `top` (registers); only its parents go
        // on `stack`. The root is a virtual one-element container at depth 0.
        var stack: [Frame] = []
        var top = Frame(total: 1, remaining: 1, isMap: false)
        var depth = 0
        var pending = 1  // sum of `remaining` over `stack` and `top`
        var deepest = 0
        var pos = 0

        func be(_ at: Int, _ size: Int) -> Int {
            var value = 0
            for i in 0..<size { value = value << 8 | Int(base[at + i]) }
            return value
        }

        while true {
            guard pos < n else { throw Self.failure(stack, top, depth, base, .truncated, pos, "input ends where a value should start") }
            let start = pos
            let marker = base[pos]
            var header = 1
            var payload = 0
            var elements = -1  // >= 0 for containers
            var isMap = false
            var lengthSize = 0
            var kind = 0  // 1 str, 2 bin, 3 ext

            switch marker {
            case 0x00...0x7f, 0xe0...0xff, 0xc0, 0xc2, 0xc3: break
            case 0x80...0x8f: elements = Int(marker & 0x0f); isMap = true
            case 0x90...0x9f: elements = Int(marker & 0x0f)
            case 0xa0...0xbf: payload = Int(marker & 0x1f); kind = 1
            case 0xc1: throw Self.failure(stack, top, depth, base, .invalidInput, pos, "byte 0xc1 is never used in MessagePack")
            case 0xc4, 0xc5, 0xc6: lengthSize = 1 << Int(marker - 0xc4); kind = 2
            case 0xc7, 0xc8, 0xc9: lengthSize = 1 << Int(marker - 0xc7); kind = 3; header = 2
            case 0xca: payload = 4
            case 0xcb: payload = 8
            case 0xcc...0xcf: payload = 1 << Int(marker - 0xcc)
            case 0xd0...0xd3: payload = 1 << Int(marker - 0xd0)
            case 0xd4...0xd8: payload = 1 + (1 << Int(marker - 0xd4)); kind = 3
            case 0xd9, 0xda, 0xdb: lengthSize = 1 << Int(marker - 0xd9); kind = 1
            case 0xdc, 0xdd: lengthSize = marker == 0xdc ? 2 : 4; elements = 0
            case 0xde, 0xdf: lengthSize = marker == 0xde ? 2 : 4; elements = 0; isMap = true
            default: throw Self.failure(stack, top, depth, base, .invalidInput, pos, "unknown marker byte")
            }
            header += lengthSize
            guard n - pos >= header else { throw Self.failure(stack, top, depth, base, .truncated, pos, "input ends inside a header") }
            // Bytes the other unfinished elements need at least (one each).
            let othersNeed = pending - (depth + 1)
            let available = n - pos - header - othersNeed
            if lengthSize > 0 {
                let length = be(pos + 1, lengthSize)
                if elements >= 0 { elements = length } else { payload = length }
            }
            if elements >= 0 {
                let needed = isMap ? elements * 2 : elements
                // A stream waits for more bytes on lengthExceedsInput, so it checks limits first.
                if needed > available && !allowTrailing {
                    throw Self.failure(stack, top, depth, base, .lengthExceedsInput, start, "\(isMap ? "map" : "array") declares \(elements) \(isMap ? "entries" : "elements") but only \(max(available, 0)) bytes remain")
                }
                if elements > limits.maxCollectionCount {
                    throw Self.failure(stack, top, depth, base, .collectionLimitExceeded, start, "\(isMap ? "map" : "array") has \(elements) elements, limit is \(limits.maxCollectionCount)")
                }
                if needed > available {
                    throw Self.failure(stack, top, depth, base, .lengthExceedsInput, start, "\(isMap ? "map" : "array") declares \(elements) \(isMap ? "entries" : "elements") but only \(max(available, 0)) bytes remain")
                }
                if depth + 1 > maxDepth {
                    throw Self.failure(stack, top, depth, base, .depthLimitExceeded, start, "nesting deeper than \(maxDepth)")
                }
                pos += header
                if needed > 0 {
                    stack.append(top)
                    top = Frame(total: needed, remaining: needed, isMap: isMap)
                    depth += 1
                    pending += needed
                    deepest = max(deepest, depth)
                    continue
                }
                deepest = max(deepest, depth + 1)
            } else {
                if kind != 0 {
                    let name = kind == 1 ? "str" : kind == 2 ? "bin" : "ext"
                    if payload > available && !allowTrailing {
                        throw Self.failure(stack, top, depth, base, .lengthExceedsInput, start, "\(name) declares \(payload) bytes but only \(max(available, 0)) remain")
                    }
                    let limit = kind == 1 ? limits.maxStringLength : limits.maxBinaryLength
                    if payload > limit {
                        throw Self.failure(stack, top, depth, base, .sizeLimitExceeded, start, "\(name) of \(payload) bytes, limit is \(limit)")
                    }
                    if payload > available {
                        throw Self.failure(stack, top, depth, base, .lengthExceedsInput, start, "\(name) declares \(payload) bytes but only \(max(available, 0)) remain")
                    }
                } else if payload > n - pos - header {
                    throw Self.failure(stack, top, depth, base, .truncated, start, "input ends inside a number")
                }
                pos += header + payload
                // Remember string map keys so errors can name them.
                if top.isMap, (top.total - top.remaining) % 2 == 0 {
                    top.keyStart = kind == 1 ? pos - payload : -1
                    top.keyLength = payload
                }
            }
            // A value is complete: close every container it completes.
            var finished = false
            while true {
                pending -= 1
                top.remaining -= 1
                if top.remaining > 0 { break }
                guard depth > 0, let parent = stack.popLast() else {
                    finished = true
                    break
                }
                top = parent
                depth -= 1
            }
            if finished {
                if !allowTrailing && pos != n {
                    throw Self.failure(stack, top, depth, base, .trailingBytes, pos, "\(n - pos) bytes after the end of the value")
                }
                return Result(end: pos, depth: deepest)
            }
        }
    }

    /// Builds an error naming where the scan was; a static function so the
    /// scan's state stays in registers instead of being captured.
    private static func failure(
        _ stack: [Frame], _ top: Frame, _ depth: Int, _ base: UnsafePointer<UInt8>,
        _ code: MessagePackError.Code, _ at: Int, _ message: String
    ) -> MessagePackError {
        let open = depth == 0 ? [] : Array(stack.dropFirst()) + [top]
        return MessagePackError(code: code, codingPath: path(open, base), offset: at, message: message)
    }

    private static func path(_ stack: [Frame], _ base: UnsafePointer<UInt8>) -> [String] {
        stack.map { frame in
            let index = frame.total - frame.remaining
            if !frame.isMap { return "[\(index)]" }
            if index % 2 == 1, frame.keyStart >= 0 {
                let bytes = UnsafeBufferPointer(start: base + frame.keyStart, count: frame.keyLength)
                return String(validating: bytes, as: UTF8.self) ?? "<invalid key>"
            }
            return "<key \(index / 2)>"
        }
    }
}
