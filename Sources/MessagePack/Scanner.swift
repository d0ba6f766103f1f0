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
    /// - Parameter allowTrailing: when false, bytes after the value are an error.
    static func scan(_ input: UnsafeRawBufferPointer, limits: MessagePackLimits, allowTrailing: Bool) throws(MessagePackError) -> Result {
        let n = input.count
        if n > limits.maxInputSize {
            throw MessagePackError(code: .sizeLimitExceeded, offset: 0, message: "input is \(n) bytes, limit is \(limits.maxInputSize)")
        }
        guard let base = input.baseAddress?.assumingMemoryBound(to: UInt8.self), n > 0 else {
            throw MessagePackError(code: .truncated, offset: 0, message: "input is empty")
        }
        let maxDepth = min(limits.maxDepth, MessagePackLimits.depthCeiling)
        var stack: [Frame] = []
        var pending = 0  // sum of `remaining` over the stack
        var deepest = 0
        var pos = 0

        func fail(_ code: MessagePackError.Code, _ at: Int, _ message: String) -> MessagePackError {
            MessagePackError(code: code, codingPath: path(stack, base), offset: at, message: message)
        }
        func be(_ at: Int, _ size: Int) -> Int {
            var value = 0
            for i in 0..<size { value = value << 8 | Int(base[at + i]) }
            return value
        }

        while true {
            guard pos < n else { throw fail(.truncated, pos, "input ends where a value should start") }
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
            case 0xc1: throw fail(.invalidInput, pos, "byte 0xc1 is never used in MessagePack")
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
            default: throw fail(.invalidInput, pos, "unknown marker byte")
            }
            header += lengthSize
            guard n - pos >= header else { throw fail(.truncated, pos, "input ends inside a header") }
            // Bytes the other unfinished elements need at least (one each).
            let othersNeed = pending - stack.count
            let available = n - pos - header - othersNeed
            if lengthSize > 0 {
                let length = be(pos + 1, lengthSize)
                if elements >= 0 { elements = length } else { payload = length }
            }
            if elements >= 0 {
                let needed = isMap ? elements * 2 : elements
                // A stream waits for more bytes on lengthExceedsInput, so it checks limits first.
                if needed > available && !allowTrailing {
                    throw fail(.lengthExceedsInput, start, "\(isMap ? "map" : "array") declares \(elements) \(isMap ? "entries" : "elements") but only \(max(available, 0)) bytes remain")
                }
                if elements > limits.maxCollectionCount {
                    throw fail(.collectionLimitExceeded, start, "\(isMap ? "map" : "array") has \(elements) elements, limit is \(limits.maxCollectionCount)")
                }
                if needed > available {
                    throw fail(.lengthExceedsInput, start, "\(isMap ? "map" : "array") declares \(elements) \(isMap ? "entries" : "elements") but only \(max(available, 0)) bytes remain")
                }
                if stack.count + 1 > maxDepth {
                    throw fail(.depthLimitExceeded, start, "nesting deeper than \(maxDepth)")
                }
                pos += header
                if needed > 0 {
                    stack.append(Frame(total: needed, remaining: needed, isMap: isMap))
                    pending += needed
                    deepest = max(deepest, stack.count)
                    continue
                }
                deepest = max(deepest, stack.count + 1)
            } else {
                if kind != 0 {
                    let name = kind == 1 ? "str" : kind == 2 ? "bin" : "ext"
                    if payload > available && !allowTrailing {
                        throw fail(.lengthExceedsInput, start, "\(name) declares \(payload) bytes but only \(max(available, 0)) remain")
                    }
                    let limit = kind == 1 ? limits.maxStringLength : limits.maxBinaryLength
                    if payload > limit {
                        throw fail(.sizeLimitExceeded, start, "\(name) of \(payload) bytes, limit is \(limit)")
                    }
                    if payload > available {
                        throw fail(.lengthExceedsInput, start, "\(name) declares \(payload) bytes but only \(max(available, 0)) remain")
                    }
                } else if payload > n - pos - header {
                    throw fail(.truncated, start, "input ends inside a number")
                }
                pos += header + payload
                // Remember string map keys so errors can name them.
                if let top = stack.last, top.isMap, (top.total - top.remaining) % 2 == 0 {
                    stack[stack.count - 1].keyStart = kind == 1 ? pos - payload : -1
                    stack[stack.count - 1].keyLength = payload
                }
            }
            // A value is complete: close every container it completes.
            while let top = stack.last {
                pending -= 1
                if top.remaining > 1 {
                    stack[stack.count - 1].remaining -= 1
                    break
                }
                stack.removeLast()
            }
            if stack.isEmpty {
                if !allowTrailing && pos != n {
                    throw fail(.trailingBytes, pos, "\(n - pos) bytes after the end of the value")
                }
                return Result(end: pos, depth: deepest)
            }
        }
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
