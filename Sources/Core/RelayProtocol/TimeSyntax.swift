/// The one time syntax of RelayTrace: fault scripts (`at 1m30s`), and the command line's time options
/// (`--since 90`, `--until 1m30s`, `--duration 24h`, `--set heartbeatInterval=6s`).
public enum TimeSyntax {
    /// A duration written with units, `30s`, `1m30s`, `2h`, `500ms`, `1.5s` (parts in any order and
    /// combination), in nanoseconds; with `bareSeconds`, a plain number (`90`, `1.5`) is seconds too. Nil
    /// when the text is neither, or is negative, or does not fit.
    public static func nanoseconds(_ text: String, bareSeconds: Bool = false) -> Int64? {
        let t = text.trimmingCharactersSpaces()
        if bareSeconds, let s = Double(t), s.isFinite, s >= 0, s < 9e9 { return Int64((s * 1e9).rounded()) }
        var total: Double = 0
        var number = ""
        var unit = ""
        var parts = 0
        func flush() -> Bool {
            guard !number.isEmpty, let v = Double(number) else { return false }
            let scale: Double
            switch unit {
            case "ms": scale = 1e6
            case "s": scale = 1e9
            case "m": scale = 60e9
            case "h": scale = 3600e9
            default: return false
            }
            total += v * scale
            parts += 1
            number = ""
            unit = ""
            return true
        }
        for ch in t {
            if ch.isASCII, ch.isNumber || ch == "." {
                if !unit.isEmpty { guard flush() else { return nil } }
                number.append(ch)
            } else if ch == "m" || ch == "s" || ch == "h" {
                guard !number.isEmpty else { return nil }
                unit.append(ch)
            } else {
                return nil
            }
        }
        guard flush(), parts > 0, total.isFinite, total < 9e18 else { return nil }
        return Int64(total.rounded())
    }
}

extension String {
    fileprivate func trimmingCharactersSpaces() -> String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}
