// Placeholder until the codec benchmark lands.
func codecBenchmark(_ arguments: [String]) async throws {
    print("codec benchmark: not written yet")
}
