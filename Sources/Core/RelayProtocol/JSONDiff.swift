/// Differences between two JSON values, by JSONPath.
public enum JSONDiff {
    /// Every path where `a` and `b` differ (canonically: `1` equals `1.0`), in a stable order.
    public static func differences(_ a: JSONValue, _ b: JSONValue, path: String = "$") -> [String] {
        switch (a, b) {
        case (.object(let x), .object(let y)):
            var out: [String] = []
            for key in Set(x.keys).union(y.keys).sorted() {
                let p = path + "." + key
                switch (x[key], y[key]) {
                case (let u?, let v?): out += differences(u, v, path: p)
                case (let u?, nil): out.append("\(p): expected \(u.jsonText), missing")
                case (nil, let v?): out.append("\(p): not expected, got \(v.jsonText)")
                case (nil, nil): break
                }
            }
            return out
        case (.array(let x), .array(let y)):
            var out: [String] = []
            for i in 0..<max(x.count, y.count) {
                let p = "\(path)[\(i)]"
                if i >= x.count { out.append("\(p): not expected, got \(y[i].jsonText)") }
                else if i >= y.count { out.append("\(p): expected \(x[i].jsonText), missing") }
                else { out += differences(x[i], y[i], path: p) }
            }
            return out
        default:
            return a.canonicallyEquals(b) ? [] : ["\(path): expected \(a.jsonText), got \(b.jsonText)"]
        }
    }
}
