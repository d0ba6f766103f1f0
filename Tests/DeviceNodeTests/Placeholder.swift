import Testing

@Test func placeholderDeviceNode() { #expect(Bool(true)) }
