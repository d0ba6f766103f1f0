import Testing

@testable import Fleet

@Suite struct ProcessNamesTests {
    @Test func numberedProcessesAreWrittenAsRanges() {
        let rural = (1...16).map { "node-rural-\($0)" }
        #expect(ProcessNames.compact(rural) == "node-rural-1…16")
        #expect(ProcessNames.compact(["node-rural-3", "node-rural-1", "node-rural-2", "node-rural-7", "node-depot-1"]) == "node-rural-{1…3,7}, node-depot-1")
        #expect(ProcessNames.compact(["node-a-1"]) == "node-a-1")
        #expect(ProcessNames.compact(["node-a-2", "node-a-2"]) == "node-a-2", "a name listed twice counts once")
    }

    @Test func namesWithoutANumberAreKeptAsTheyAre() {
        #expect(ProcessNames.compact(["coordinator", "coordinator-2", "proxy"]) == "coordinator, coordinator-2, proxy")
        #expect(ProcessNames.compact(["node-a-01", "node-a-+1", "-5", "node-a-"]) == "node-a-01, node-a-+1, -5, node-a-")
        #expect(ProcessNames.compact(["node-a-99999999999999999999"]) == "node-a-99999999999999999999", "no overflow")
        #expect(ProcessNames.compact([]) == "")
    }

    @Test func aFaultOnFortyProcessesStaysOneShortLabel() {
        let fault = AppliedFault(kind: "offline", targets: (1...32).map { "node-rural-\($0)" } + (1...8).map { "node-depot-\($0)" }, start: 30)
        #expect(fault.label == "offline node-rural-1…32, node-depot-1…8")
    }
}
