import CMsgPack
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Growable output buffer behind a msgpack-c packer.
///
/// msgpack-c's `msgpack_pack_*` functions format every value and hand the bytes
/// to our write callback, which appends them here. The buffer is ours (not an
/// sbuffer) so container headers can be patched in place once their element
/// count is known.
final class ByteSink {
    private(set) var storage: UnsafeMutableRawPointer
    private(set) var count = 0
    private var capacity: Int
    /// The packer, allocated once so calls don't pay exclusivity checks.
    let packer: UnsafeMutablePointer<msgpack_packer>

    init(capacity: Int = 1024) {
        self.capacity = max(capacity, 16)
        storage = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 8)
        packer = UnsafeMutablePointer<msgpack_packer>.allocate(capacity: 1)
        packer.initialize(to: msgpack_packer())
        packer.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        packer.pointee.callback = { data, bytes, length in
            guard let data else { return -1 }
            let sink = Unmanaged<ByteSink>.fromOpaque(data).takeUnretainedValue()
            if length > 0, let bytes { sink.append(UnsafeRawPointer(bytes), length) }
            return 0
        }
    }

    deinit {
        storage.deallocate()
        packer.deinitialize(count: 1)
        packer.deallocate()
    }

    @inline(__always)
    func reserve(_ extra: Int) {
        if count + extra > capacity { grow(count + extra) }
    }

    private func grow(_ needed: Int) {
        // Doubling, or twice what is needed now when one write is large (a blob).
        let newCapacity = max(capacity * 2, needed * 2)
        let newStorage = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 8)
        newStorage.copyMemory(from: storage, byteCount: count)
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
    }

    @inline(__always)
    func append(_ bytes: UnsafeRawPointer, _ length: Int) {
        reserve(length)
        (storage + count).copyMemory(from: bytes, byteCount: length)
        count += length
    }

    @inline(__always)
    func appendByte(_ byte: UInt8) {
        reserve(1)
        storage.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    /// Replaces the one-byte placeholder at `offset` with the header that
    /// msgpack-c writes for `elements` (fixmap/map16/map32 or the array forms).
    func patchHeader(at offset: Int, elements: Int, isMap: Bool) {
        let end = count
        let n = UInt32(truncatingIfNeeded: elements)
        if isMap { _ = msgpack_pack_map(packer, Int(n)) } else { _ = msgpack_pack_array(packer, Int(n)) }
        let headerSize = count - end
        // Stash the header (at most 5 bytes), then drop it from the end.
        var header: UInt64 = 0
        withUnsafeMutableBytes(of: &header) { $0.baseAddress?.copyMemory(from: storage + end, byteCount: headerSize) }
        count = end
        if headerSize > 1 {
            reserve(headerSize - 1)
            let tail = offset + 1
            memmove(storage + tail + headerSize - 1, storage + tail, end - tail)
            count = end + headerSize - 1
        }
        withUnsafeBytes(of: &header) { raw in
            for i in 0..<headerSize { storage.storeBytes(of: raw[i], toByteOffset: offset + i, as: UInt8.self) }
        }
    }

    var bytes: [UInt8] {
        [UInt8](UnsafeRawBufferPointer(start: storage, count: count))
    }
}
