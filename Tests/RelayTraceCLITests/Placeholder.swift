import Testing

@Test func placeholder_RelayTraceCLITests() { #expect(1 + 1 == 2) }
