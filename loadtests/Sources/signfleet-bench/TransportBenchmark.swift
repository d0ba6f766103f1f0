// Placeholder until the transport benchmark lands.
func transportBenchmark(_ arguments: [String]) async throws {
    print("transport benchmark: not written yet")
}
