import FleetTesting
import Foundation
import MessagePack
import Testing

// Interop with Python's msgpack (an independent C implementation), run as a
// real child process. Both sides build the same cases independently; each side
// checks what the other encoded, and the bytes must be identical where the
// spec leaves no choice of form.

/// The Python side: `emit DIR` writes CASE.msgpack files, `check DIR` checks them.
private let interopScript = #"""
import sys
try:
    import msgpack
    from msgpack import Timestamp, ExtType
except ImportError as e:
    print("NO_MSGPACK", e)
    sys.exit(3)
import os

def envelope(i, blob):
    return {
        "id": "env-%d" % i, "seq": i + 1, "createdAt": Timestamp(1700000000 + i, 0),
        "documentHash": bytes(((n + i) & 0xff) for n in range(32)),
        "signature": bytes(((n * 7 + i) & 0xff) for n in range(blob)),
        "priority": 1 if i % 2 == 0 else 200, "tags": {"k": "v%d" % i},
        "score": 0.5 * i, "delta": -i * 1000,
    }

cases = {
    "scalars": [None, True, False, 0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1,
                -1, -32, -33, -128, -129, -32768, -32769, -2**31, -2**31 - 1, -2**63,
                1.5, -0.25, float("inf"), float("-inf"), "", "é" * 20, "x" * 31, "x" * 32, "x" * 256,
                b"", b"\x01\x02", bytes(300)],
    "timestamps": [Timestamp(0, 0), Timestamp(1, 1), Timestamp(2**32 - 1, 0), Timestamp(2**32, 0),
                   Timestamp(-1, 500000000), Timestamp(2**34, 0), Timestamp(2**34 - 1, 999999999)],
    "ext": [ExtType(5, b"\x01"), ExtType(5, bytes(2)), ExtType(5, bytes(4)), ExtType(5, bytes(8)),
            ExtType(5, bytes(16)), ExtType(7, b""), ExtType(7, bytes(3)), ExtType(9, bytes(300)),
            ExtType(7, bytes(65536))],
    "nested": {"a": [[1, [2, [3]]], {"b": None}], 7: "int key", "m": {}},
    "big": {"arr": [True] * 65537, "str": "y" * 65537, "bin": bytes(65536)},
    "heartbeat": {"type": "heartbeat", "requestId": 77, "sentAt": Timestamp(1700000000, 250000000)},
    "push": {"type": "push", "deviceId": "device-0042", "items": [envelope(i, 6000) for i in range(10)]},
}

mode, folder = sys.argv[1], sys.argv[2]
if mode == "emit":
    for name, value in cases.items():
        with open(os.path.join(folder, name + ".msgpack"), "wb") as f:
            f.write(msgpack.packb(value, use_bin_type=True))
    with open(os.path.join(folder, "float32.msgpack"), "wb") as f:
        f.write(msgpack.packb([0.25, -1.5], use_single_float=True))
    print("EMITTED")
else:
    for name, value in cases.items():
        path = os.path.join(folder, name + ".msgpack")
        with open(path, "rb") as f:
            data = f.read()
        try:
            got = msgpack.unpackb(data, raw=False, strict_map_key=False)
        except Exception as e:
            print("FAIL", name, "unpack:", repr(e))
            continue
        if got != value:
            print("FAIL", name, "differs:", repr(got)[:300])
        elif msgpack.packb(value, use_bin_type=True) != data:
            print("FAIL", name, "bytes differ from Python's packb")
        else:
            print("OK", name)
"""#

/// The same cases, built in Swift.
private func swiftCases() -> [String: MessagePackValue] {
    func ts(_ s: Int64, _ n: UInt32) -> MessagePackValue { .timestamp(seconds: s, nanoseconds: n) }
    let scalars: [MessagePackValue] = [
        .nil, true, false, 0, 127, 128, 255, 256, 65535, 65536, .uint(1 << 32 - 1), .uint(1 << 32), .uint(UInt64.max),
        -1, -32, -33, -128, -129, -32768, -32769, .int(Int64(Int32.min)), .int(Int64(Int32.min) - 1), .int(Int64.min),
        1.5, -0.25, .double(.infinity), .double(-.infinity), "", .string(String(repeating: "é", count: 20)),
        .string(String(repeating: "x", count: 31)), .string(String(repeating: "x", count: 32)), .string(String(repeating: "x", count: 256)),
        .binary([]), .binary([1, 2]), .binary([UInt8](repeating: 0, count: 300)),
    ]
    let timestamps: [MessagePackValue] = [ts(0, 0), ts(1, 1), ts(1 << 32 - 1, 0), ts(1 << 32, 0), ts(-1, 500_000_000), ts(1 << 34, 0), ts(1 << 34 - 1, 999_999_999)]
    let ext: [MessagePackValue] = [
        .extended(type: 5, data: [1]), .extended(type: 5, data: [0, 0]), .extended(type: 5, data: [UInt8](repeating: 0, count: 4)),
        .extended(type: 5, data: [UInt8](repeating: 0, count: 8)), .extended(type: 5, data: [UInt8](repeating: 0, count: 16)),
        .extended(type: 7, data: []), .extended(type: 7, data: [0, 0, 0]), .extended(type: 9, data: [UInt8](repeating: 0, count: 300)),
        .extended(type: 7, data: [UInt8](repeating: 0, count: 65536)),
    ]
    let inner: MessagePackValue = [[1, [2, [3]]], ["b": nil]]
    let nested: MessagePackValue = ["a": inner, 7: "int key", "m": .map([])]
    let big: MessagePackValue = [
        "arr": .array(Array(repeating: true, count: 65537)),
        "str": .string(String(repeating: "y", count: 65537)),
        "bin": .binary([UInt8](repeating: 0, count: 65536)),
    ]
    return ["scalars": .array(scalars), "timestamps": .array(timestamps), "ext": .array(ext), "nested": nested, "big": big]
}

private let pythonHeartbeat = Heartbeat(type: "heartbeat", requestId: 77, sentAt: Date(timeIntervalSince1970: 1_700_000_000.25))

struct PythonResult {
    var status: Int32
    var output: String
    var errors: String
}

/// Runs the interop script with a hard timeout (its output is read as it comes, so no pipe fills up).
func runPython(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> PythonResult {
    let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
    let child = try ChildProcess.launch("/usr/bin/env", [python, "-c", interopScript] + arguments, name: "python")
    let status: Int32
    do {
        status = try await child.waitForExit(timeout: timeout)
    } catch {
        child.signal(SIGKILL)
        throw MessagePackError(code: .invalidInput, message: "python timed out after \(timeout)")
    }
    func text(_ stream: ChildProcess.Stream) -> String {
        let lines = child.lines(stream)
        return lines.isEmpty ? "" : lines.joined(separator: "\n") + "\n"
    }
    return PythonResult(status: status, output: text(.standardOutput), errors: text(.standardError))
}

private func requirePythonOK(_ result: PythonResult, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
    if result.status == 0 { return true }
    let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
    if result.status == 3 || result.status == 127 || result.status == -1 {
        Issue.record("""
            Interop tests need \(python) with the msgpack module; run scripts/install-deps.sh \
            (or `\(python) -m pip install msgpack`). Status \(result.status): \(result.output) \(result.errors)
            """, sourceLocation: sourceLocation)
    } else {
        Issue.record("python failed with status \(result.status): \(result.output)\n\(result.errors)", sourceLocation: sourceLocation)
    }
    return false
}

@Suite("Python interop")
struct InteropTests {
    @Test func swiftEncodesPythonDecodes() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("mp-swift-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let encoder = MessagePackEncoder()
        var files: [String: [UInt8]] = [:]
        for (name, value) in swiftCases() { files[name] = try value.encoded() }
        files["heartbeat"] = try encoder.encode(pythonHeartbeat)
        files["push"] = try encoder.encode(samplePush(items: 10, blob: 6000))
        for (name, bytes) in files {
            try Data(bytes).write(to: folder.appendingPathComponent(name + ".msgpack"))
        }
        let result = try await runPython(["check", folder.path])
        guard requirePythonOK(result) else { return }
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.count == files.count, "\(result.output)")
        for line in lines { #expect(line.hasPrefix("OK "), "\(line)") }
    }

    @Test func pythonEncodesSwiftDecodes() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("mp-python-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let result = try await runPython(["emit", folder.path])
        guard requirePythonOK(result) else { return }
        func read(_ name: String) throws -> [UInt8] {
            [UInt8](try Data(contentsOf: folder.appendingPathComponent(name + ".msgpack")))
        }
        for (name, expected) in swiftCases() {
            let bytes = try read(name)
            #expect(try MessagePackValue.decode(bytes) == expected, "\(name)")
            #expect(try expected.encoded() == bytes, "\(name): Swift's bytes differ from Python's")
        }
        let decoder = MessagePackDecoder()
        #expect(try decoder.decode(Heartbeat.self, from: try read("heartbeat")) == pythonHeartbeat)
        let push = try decoder.decode(Push.self, from: try read("push"))
        #expect(push == samplePush(items: 10, blob: 6000))
        #expect(try MessagePackEncoder().encode(push) == (try read("push")))
        #expect(try decoder.decode([Float].self, from: try read("float32")) == [0.25, -1.5])
        #expect(try MessagePackValue.decode(try read("float32")) == [.float(0.25), .float(-1.5)])
    }
}
