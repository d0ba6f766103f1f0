// Placeholder until the capture benchmark lands.
func captureBenchmark(_ arguments: [String]) async throws {
    print("capture benchmark: not written yet")
}
