import Foundation
import Testing

@testable import Fleet

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
}
