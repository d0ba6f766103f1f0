#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether a host name reaches this machine: what Connect asks before posting to a port one of the
/// coordinator's own listeners uses (docs/webhooks.md). Text comparison is not enough — `localhost.`,
/// `2130706433`, `0x7f.0.0.1`, `[::ffff:127.0.0.1]` and the machine's LAN address all reach the
/// same socket — so the name is resolved and each address compared with the loopback and
/// unspecified ranges and with the addresses of this machine's interfaces.
enum LocalAddresses {
    /// True when any address `host` resolves to is this machine's; false when it resolves to none
    /// (nothing to post to) or only to other machines'. Blocking: it may ask DNS.
    static func reachThisMachine(_ host: String) -> Bool {
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &result) == 0, let first = result else { return false }
        defer { freeaddrinfo(first) }
        let own = interfaceAddresses()
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let bytes = addressBytes(entry.pointee.ai_addr), isLoopbackOrUnspecified(bytes) || own.contains(bytes) { return true }
            cursor = entry.pointee.ai_next
        }
        return false
    }

    /// The IPv4 (4 bytes) or IPv6 (16 bytes) address of a socket address; an IPv4-mapped IPv6
    /// address as its IPv4 bytes.
    static func addressBytes(_ address: UnsafeMutablePointer<sockaddr>?) -> [UInt8]? {
        guard let address else { return nil }
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                withUnsafeBytes(of: v4.pointee.sin_addr) { Array($0) }
            }
        case AF_INET6:
            let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                withUnsafeBytes(of: v6.pointee.sin6_addr) { Array($0) }
            }
            if bytes.prefix(10).allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF { return Array(bytes.suffix(4)) }
            return bytes
        default:
            return nil
        }
    }

    static func isLoopbackOrUnspecified(_ bytes: [UInt8]) -> Bool {
        if bytes.count == 4 { return bytes[0] == 127 || bytes.allSatisfy { $0 == 0 } }
        return bytes.dropLast().allSatisfy { $0 == 0 } && (bytes.last == 1 || bytes.last == 0)
    }

    /// The addresses of this machine's interfaces.
    static func interfaceAddresses() -> Set<[UInt8]> {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(first) }
        var out = Set<[UInt8]>()
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            if let bytes = addressBytes(entry.pointee.ifa_addr) { out.insert(bytes) }
            cursor = entry.pointee.ifa_next
        }
        return out
    }
}
