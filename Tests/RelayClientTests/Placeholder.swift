import Testing

@Test func placeholder_RelayClientTests() { #expect(1 + 1 == 2) }
