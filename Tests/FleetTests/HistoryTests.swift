import Foundation
import Testing

@testable import Fleet
import SignatureCapture

@Suite struct HistoryTests {
    @Test func writtenEventsReadBackAndATruncatedTailIsSkipped() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("history-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/node-a-1.jsonl"
        let writer = try HistoryWriter(path: path)
        let first = HistoryEvent(time: 10, process: "node-a-1", type: .invoke, op: .sign, device: "a-1", sequence: 1)
        let second = HistoryEvent(
            time: 11, process: "node-a-1", type: .ok, op: .sync, device: "a-1", transaction: "t-1", sequence: 1,
            serverEnvelope: "env-1")
        try writer.append(first)
        try writer.append(second)
        writer.close()
        // A writer killed mid-line leaves a partial last line.
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data("{\"time\":12,\"proc".utf8))
        try handle.close()

        let contents = try HistoryReader.read(path: path)
        #expect(contents.events == [first, second])
        #expect(contents.truncatedTail)
    }

    @Test func aBadLineInTheMiddleIsAnErrorNamingTheLine() {
        let data = Data("{\"time\":1,\"process\":\"p\",\"type\":\"ok\",\"op\":\"sign\"}\nnot json\n".utf8)
        #expect(throws: HistoryError.self) { try HistoryReader.parse(data, path: "h.jsonl") }
        do {
            _ = try HistoryReader.parse(data, path: "h.jsonl")
        } catch let error as HistoryError {
            #expect(error.description.hasPrefix("h.jsonl:2:"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func filesMergeByTime() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("history-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let a = try HistoryWriter(path: directory + "/a.jsonl")
        let b = try HistoryWriter(path: directory + "/b.jsonl")
        try a.append(HistoryEvent(time: 3, process: "a", type: .ok, op: .sign))
        try b.append(HistoryEvent(time: 1, process: "b", type: .ok, op: .sign))
        try a.append(HistoryEvent(time: 5, process: "a", type: .ok, op: .sync))
        try b.append(HistoryEvent(time: 4, process: "b", type: .info, op: .sync))
        a.close()
        b.close()
        let merged = try HistoryReader.readMerged(directory: directory)
        #expect(merged.events.map(\.time) == [1, 3, 4, 5])
        #expect(merged.truncatedFiles.isEmpty)
    }

    @Test func runDirectoryCreatesItsLayoutAndLatestLink() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("runs-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let first = try RunDirectory.create(root: root, now: now)
        let second = try RunDirectory.create(root: root, now: now)
        #expect(first.path != second.path)
        #expect(second.path.hasSuffix("-2"))
        #expect(FileManager.default.fileExists(atPath: second.historyDirectory))
        let latest = try FileManager.default.destinationOfSymbolicLink(atPath: root + "/latest")
        #expect(second.path.hasSuffix(latest))
    }

    /// The hand-written line (`HistoryLine`) must be byte for byte what `JSONEncoder` with sorted
    /// keys writes, for every field present or absent, every ASCII character in a string, non-ASCII
    /// text, and times of every size.
    @Test func theHandWrittenLineIsWhatJSONEncoderWrites() throws {
        let seed = UInt64(20261126)
        print("HistoryLine seed \(seed)")
        var random = SeededRandom(seed: seed)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let alphabet = (0..<128).map { Character(Unicode.Scalar(UInt8($0))) } + ["é", "\u{2028}", "✓", "𝄞", "\u{7F}"]
        func text() -> String {
            String((0..<Int(random.next() % 12)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
        }
        func maybe<T>(_ make: () -> T) -> T? { random.next() % 3 == 0 ? nil : make() }
        let times: [Double] = [0, -0.0, 5, 0.1, 1e16, 1e-7, 1_764_168_000, 1_764_168_000.123456, 123_456_789_012.5, .greatestFiniteMagnitude]
        for round in 0..<2_000 {
            let event = HistoryEvent(
                time: round < times.count ? times[round] : Double(random.next() % 2_000_000_000_000) / 1000,
                process: text(), type: [.invoke, .ok, .fail, .info][Int(random.next() % 4)],
                op: HistoryEvent.Operation.allCases[Int(random.next() % UInt64(HistoryEvent.Operation.allCases.count))],
                device: maybe(text), envelope: maybe(text), transaction: maybe(text), sequence: maybe { random.next() },
                serverEnvelope: maybe(text), error: maybe(text),
                details: maybe { Dictionary((0..<Int(random.next() % 4)).map { _ in (text(), text()) }, uniquingKeysWith: { a, _ in a }) })
            let fast = try #require(HistoryLine.encode(event))
            let reference = Array(try encoder.encode(event))
            #expect(fast == reference, "round \(round): \(String(decoding: fast, as: UTF8.self)) != \(String(decoding: reference, as: UTF8.self))")
            if fast != reference { return }
        }
        #expect(HistoryLine.encode(HistoryEvent(time: .nan, process: "p", type: .ok, op: .sign)) == nil)
    }

    /// A time `JSONEncoder` refuses (not finite) is refused by the writer too, not written.
    @Test func aTimeThatIsNotFiniteIsAnErrorNotALine() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("history-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let writer = try HistoryWriter(path: directory + "/p.jsonl")
        #expect(throws: EncodingError.self) { try writer.append(HistoryEvent(time: .infinity, process: "p", type: .ok, op: .sign)) }
        try writer.append(HistoryEvent(time: 1, process: "p", type: .ok, op: .sign))
        writer.close()
        #expect(try HistoryReader.read(path: directory + "/p.jsonl").events.count == 1)
    }
}
