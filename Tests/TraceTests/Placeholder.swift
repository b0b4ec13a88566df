import Testing

@Test func placeholder_TraceTests() { #expect(1 + 1 == 2) }
