import Testing

@Test func placeholder_WebSocketTests() { #expect(1 + 1 == 2) }
