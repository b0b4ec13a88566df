import Testing

@Test func placeholder_DevRelayTests() { #expect(1 + 1 == 2) }
