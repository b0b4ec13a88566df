import RelayProtocol
import Testing

@Suite struct CamelCaseGuardTests {
    @Test func cleanValuesPass() throws {
        try CamelCaseGuard.check(["type": "event", "payload": ["eventType": "job_status", "items": [["a": 1], ["bC": [1, 2]]]]])
        try CamelCaseGuard.check("snake_case_string_value")
        try CamelCaseGuard.check(.array([.null, .int(1)]))
        #expect(CamelCaseGuard.violations(in: ["ok": ["fine": true]]).isEmpty)
    }

    @Test func deepKeyPath() {
        let v: JSONValue = ["payload": ["params": ["updateData": ["file_path": "/a", "name": "n"]]]]
        #expect(throws: CamelCaseViolation(key: "file_path", path: "$.payload.params.updateData.file_path")) {
            try CamelCaseGuard.check(v)
        }
    }

    @Test func insideArrays() {
        let v: JSONValue = ["payload": ["params": ["items": [["ok": 1], ["fine": 2], ["snake_key": 3]]]]]
        #expect(throws: CamelCaseViolation(key: "snake_key", path: "$.payload.params.items[2].snake_key")) {
            try CamelCaseGuard.check(v)
        }
        #expect(throws: CamelCaseViolation(key: "a_b", path: "$[1][0].a_b")) {
            try CamelCaseGuard.check([[], [["a_b": 1]]])
        }
    }

    @Test func firstIsSortedKeysDepthFirst() {
        // "a" sorts before "b": the violation under "a" (deeper) comes before the one at "b_top".
        let v: JSONValue = ["b_top": 1, "a": ["z_deep": 1, "c": ["x_y": 2]]]
        #expect(throws: CamelCaseViolation(key: "x_y", path: "$.a.c.x_y")) { try CamelCaseGuard.check(v) }
        #expect(CamelCaseGuard.violations(in: v) == [
            CamelCaseViolation(key: "x_y", path: "$.a.c.x_y"),
            CamelCaseViolation(key: "z_deep", path: "$.a.z_deep"),
            CamelCaseViolation(key: "b_top", path: "$.b_top"),
        ])
        // A violating key is reported before anything inside its value.
        let nested: JSONValue = ["outer_key": ["inner_key": 1]]
        #expect(CamelCaseGuard.violations(in: nested).map(\.path) == ["$.outer_key", "$.outer_key.inner_key"])
    }

    @Test func sameAnswerEveryTime() {
        var o = [String: JSONValue]()
        for i in 0..<50 { o["k\(i)_x"] = .int(Int64(i)) }
        let v = JSONValue.object(o)
        for _ in 0..<5 {
            #expect(throws: CamelCaseViolation(key: "k0_x", path: "$.k0_x")) { try CamelCaseGuard.check(v) }
        }
    }

    @Test func unusualKeysUseBracketPaths() {
        #expect(throws: CamelCaseViolation(key: "job:x_y", path: "$.payload['job:x_y']")) {
            try CamelCaseGuard.check(["payload": ["job:x_y": 1]])
        }
        #expect(throws: CamelCaseViolation(key: "_", path: "$.a['it\\'s'][0]._")) {
            try CamelCaseGuard.check(["a": ["it's": [["_": 1]]]])
        }
    }

    @Test func customBasePath() {
        #expect(throws: CamelCaseViolation(key: "a_b", path: "$.payload.payload.a_b")) {
            try CamelCaseGuard.check(["a_b": 1], path: "$.payload.payload")
        }
    }

    @Test func descriptionSaysWhatToDo() {
        let v = CamelCaseViolation(key: "file_path", path: "$.x.file_path")
        #expect(v.description == #"snake_case key "file_path" at $.x.file_path: the relay drops messages with '_' in any key; rename it to camelCase ("filePath")"#)
    }
}
