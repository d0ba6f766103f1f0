import Synchronization

/// Types known not to conform to a fast-path protocol.
///
/// A failing `as? any MessagePackWritable` costs ~130 ns on Linux (measured with
/// swiftc -O, Swift 6.3.1): more than Codable spends on a small struct. The
/// encoder and decoder ask once per value, so the answer "no" is remembered per
/// type; a hit costs a lock and a set lookup (~40 ns in total). The set only
/// grows with the number of distinct types the program encodes.
final class NonConformingTypes: Sendable {
    private let types = Mutex<Set<ObjectIdentifier>>([])

    func contains(_ type: Any.Type) -> Bool {
        let id = ObjectIdentifier(type)
        return types.withLock { $0.contains(id) }
    }

    func insert(_ type: Any.Type) {
        let id = ObjectIdentifier(type)
        _ = types.withLock { $0.insert(id) }
    }
}

let notWritable = NonConformingTypes()
let notReadable = NonConformingTypes()

/// `value` as a writable existential, or nil (remembered per type).
@inline(__always)
func asWritable<T>(_ value: T) -> (any MessagePackWritable)? {
    if notWritable.contains(T.self) { return nil }
    if let writable = value as? any MessagePackWritable { return writable }
    notWritable.insert(T.self)
    return nil
}

/// `type` as a readable metatype, or nil (remembered per type).
@inline(__always)
func asReadable<T>(_ type: T.Type) -> (any MessagePackReadable.Type)? {
    if notReadable.contains(T.self) { return nil }
    if let readable = type as? any MessagePackReadable.Type { return readable }
    notReadable.insert(T.self)
    return nil
}
