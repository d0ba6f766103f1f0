import CMsgPack
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The output of one encode call: a msgpack-c `sbuffer` behind a msgpack-c packer.
///
/// `msgpack_pack_*` format each value and hand the bytes to
/// `msgpack_sbuffer_write`, so the whole byte path runs in C without calling
/// back into Swift. Container headers are patched in the buffer once their
/// element count is known.
final class ByteSink {
    let buffer: UnsafeMutablePointer<msgpack_sbuffer>
    let packer: UnsafeMutablePointer<msgpack_packer>

    init(capacity: Int = 1024) {
        buffer = UnsafeMutablePointer<msgpack_sbuffer>.allocate(capacity: 1)
        buffer.initialize(to: msgpack_sbuffer())
        msgpack_sbuffer_init(buffer)
        // Start at the expected size; the sbuffer reallocs (doubling) past it.
        let initial = max(capacity, 256)
        if let memory = malloc(initial) {
            buffer.pointee.data = memory.assumingMemoryBound(to: CChar.self)
            buffer.pointee.alloc = initial
        }
        packer = UnsafeMutablePointer<msgpack_packer>.allocate(capacity: 1)
        packer.initialize(to: msgpack_packer())
        msgpack_packer_init(packer, UnsafeMutableRawPointer(buffer), msgpack_sbuffer_write)
    }

    deinit {
        msgpack_sbuffer_destroy(buffer)
        buffer.deinitialize(count: 1)
        buffer.deallocate()
        packer.deinitialize(count: 1)
        packer.deallocate()
    }

    var count: Int { buffer.pointee.size }

    /// The bytes written so far (valid until the next write).
    var storage: UnsafeMutableRawPointer? { UnsafeMutableRawPointer(buffer.pointee.data) }

    func appendByte(_ byte: UInt8) {
        var byte = byte
        _ = withUnsafePointer(to: &byte) { pointer in
            pointer.withMemoryRebound(to: CChar.self, capacity: 1) { msgpack_sbuffer_write(buffer, $0, 1) }
        }
    }

    func setByte(_ byte: UInt8, at offset: Int) {
        guard let storage, offset < count else { return }
        storage.storeBytes(of: byte, toByteOffset: offset, as: UInt8.self)
    }

    /// Replaces the one-byte placeholder at `offset` with the header that
    /// msgpack-c writes for `elements` (fixmap/map16/map32 or the array forms).
    func patchHeader(at offset: Int, elements: Int, isMap: Bool) {
        let end = count
        if isMap { _ = msgpack_pack_map(packer, elements) } else { _ = msgpack_pack_array(packer, elements) }
        let headerSize = count - end
        guard let storage, headerSize >= 1, offset < end else { return }
        // Stash the header (at most 5 bytes) that msgpack-c appended at the end.
        var header: UInt64 = 0
        withUnsafeMutableBytes(of: &header) { raw in
            for i in 0..<headerSize { raw[i] = storage.load(fromByteOffset: end + i, as: UInt8.self) }
        }
        // Move everything after the placeholder right by the extra header bytes
        // (the sbuffer already has room: the header was just appended).
        let tail = offset + 1
        if headerSize > 1 {
            memmove(storage + tail + headerSize - 1, storage + tail, end - tail)
        }
        buffer.pointee.size = end + headerSize - 1
        withUnsafeBytes(of: &header) { raw in
            for i in 0..<headerSize { storage.storeBytes(of: raw[i], toByteOffset: offset + i, as: UInt8.self) }
        }
    }

    /// Makes room for `extra` more bytes (the fast-path writer stores into the
    /// free space directly).
    func reserve(_ extra: Int) {
        let needed = count + extra
        guard needed > buffer.pointee.alloc else { return }
        let size = max(needed, buffer.pointee.alloc * 2)
        guard let memory = realloc(buffer.pointee.data, size) else { return }
        buffer.pointee.data = memory.assumingMemoryBound(to: CChar.self)
        buffer.pointee.alloc = size
    }

    /// Free space after the bytes written so far.
    var freeSpace: (base: UnsafeMutablePointer<UInt8>?, count: Int) {
        guard let storage else { return (nil, 0) }
        return ((storage + count).assumingMemoryBound(to: UInt8.self), buffer.pointee.alloc - count)
    }

    /// Marks `n` more bytes of the free space as written.
    func commit(_ n: Int) {
        buffer.pointee.size += n
    }

    var bytes: [UInt8] {
        DecoderState.copy(UnsafeRawBufferPointer(start: storage, count: count))
    }
}
