import Testing

@Test func placeholder_RelayProtocolTests() { #expect(1 + 1 == 2) }
