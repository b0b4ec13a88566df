public import RelayProtocol

/// The viewer's one page: HTML, CSS and JavaScript compiled into the binary (no CDN, no library,
/// nothing fetched from outside; a Content-Security-Policy lets the page talk to its own server only).
/// Served live by `relaytrace view`, or saved with its data by `relaytrace timeline --html` (the same
/// page reading the data it embeds instead of the API).
public enum ViewerPage {
    /// The page; `embedded` is the saved page's data (``SavedPage``) or nil for the live page.
    public static func html(title: String, embedded: JSONValue?) -> String {
        var data = ""
        if let embedded {
            // "<" only occurs inside JSON strings: written as \u003c (the same JSON), no "</script" or "<!--"
            // can end or change the element early.
            data = "<script type=\"application/json\" id=\"embedded\">" + embedded.jsonText.escapingLessThan() + "</script>\n"
        }
        let connect = embedded == nil ? "'self'" : "'none'"
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src \(connect)">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <link rel="icon" href="data:,">
            <title>\(escapeHTML(title)) - relaytrace view</title>
            <style>\(style)</style></head><body>
            <header><b id="title">\(escapeHTML(title))</b>
            <input id="filter" type="search" spellcheck="false" placeholder="/ filter: type:rpc.request dir:in gen:2 method:session.list event:device-status since:1m until:2m channel:watch, or text" title="Enter applies, Esc clears; the terms of relaytrace frames (gen: dir: type: event: method: id: since: until: channel:) and words searched in payloads">
            <span id="status"></span><span class="spacer"></span>
            <button id="replay" title="Run the strict replay and mark the divergence, if any">replay</button>
            <span class="keys">j/k move, / filter, n next match, +/- zoom, 0 fit</span></header>
            <div id="banner" class="hidden"></div>
            <section id="tl"><div class="bar"><button id="zoom-out" title="zoom out (-)">&minus;</button><button id="zoom-in" title="zoom in (+)">+</button><button id="zoom-fit" title="whole trace (0)">fit</button>
            <span id="zoom-label"></span>
            <span class="legend"><i style="background:#4f7fe8"></i>RPC <i style="background:#e03c3c"></i>error <i style="background:#f08c00"></i>unanswered <i style="background:#7ab8d8"></i>heartbeat/ping <i style="background:#1a9a1a"></i>registered <i style="background:#222"></i>close <i style="background:#d00"></i>fail <i style="background:#a55bd6"></i>lease <i style="background:#f2c230"></i>recovery epoch <i style="background:#9a9a9a"></i>timer <i style="background:#e8732f"></i>watch</span></div>
            <canvas id="timeline"></canvas></section>
            <main><div id="list"><div id="spacer"></div><div id="rows"></div></div>
            <aside id="detail"><div id="detail-head">no record selected</div><pre id="detail-json"></pre>
            <details id="checks-box"><summary>checks (<span id="checks-count">0</span>)</summary><ul id="checks"></ul></details>
            <details id="stats-box"><summary>stats</summary><pre id="stats">loading...</pre></details></aside></main>
            \(data)<script>\(script)</script>
            </body></html>

            """
    }

    static let style = """
        *{box-sizing:border-box}html,body{height:100%;margin:0}body{font:13px system-ui,sans-serif;color:#1d2330;background:#fff;display:flex;flex-direction:column}
        header{display:flex;align-items:center;gap:10px;padding:6px 10px;background:#23293a;color:#eef}header b{white-space:nowrap;max-width:30%;overflow:hidden;text-overflow:ellipsis}
        #filter{flex:0 1 34em;font:12px ui-monospace,monospace;padding:4px 6px;border:1px solid #556;border-radius:3px;background:#fff;color:#111}#filter.bad{outline:2px solid #e44}
        #status{font-size:12px;color:#cfd6ea;white-space:nowrap}#status.bad{color:#ff9c9c}.spacer{flex:1}.keys{font-size:11px;color:#9aa3bb;white-space:nowrap}
        button{font:12px system-ui,sans-serif;padding:2px 8px;border:1px solid #99a;border-radius:3px;background:#f4f5f8;cursor:pointer}button:disabled{opacity:.5}
        #banner{padding:6px 10px;font-size:12px}#banner.hidden{display:none}#banner.bad{background:#fde4e4;color:#811;border-bottom:1px solid #e99}#banner.ok{background:#e4f6e4;color:#164}#banner.info{background:#eef2fb;color:#335}
        #banner code{font:11px ui-monospace,monospace}
        #tl{border-bottom:1px solid #ccd;max-height:42vh;overflow-y:auto;flex:none}#tl .bar{display:flex;align-items:center;gap:6px;padding:4px 10px;font-size:12px;color:#445}
        #zoom-label{font:11px ui-monospace,monospace;color:#556}.legend{margin-left:auto;font-size:11px;color:#556}.legend i{display:inline-block;width:9px;height:9px;margin:0 3px 0 8px;border-radius:2px;vertical-align:-1px}
        #timeline{display:block;width:100%;height:60px;cursor:crosshair}
        main{flex:1;display:flex;min-height:0}#list{flex:3;overflow-y:auto;position:relative;font:12px ui-monospace,monospace;border-right:1px solid #ccd}
        #rows{position:absolute;left:0;right:0}.row{height:20px;line-height:20px;white-space:nowrap;overflow:hidden;padding-left:6px;border-left:3px solid transparent;cursor:pointer}
        .row:hover{background:#f1f4fa}.row.sel{background:#d8e6fc}.row.diverged{background:#fbd3d3;outline:1px solid #d00}.row.loading{color:#99a}
        .row span{display:inline-block;overflow:hidden;vertical-align:top}.row .n{width:6.5em;color:#889;text-align:right;padding-right:1em}.row .t{width:8.5em}.row .g{width:4em;color:#667}.row .d{width:1.6em}
        .row .ty{width:11em;font-weight:600}.row .s{color:#333}
        .row.dir-in{border-left-color:#3a8dde}.row.dir-out{border-left-color:#2aa05a}.row.dir-in .d{color:#3a8dde}.row.dir-out .d{color:#2aa05a}
        .cat-rpc .ty{color:#2f5fc8}.cat-event .ty{color:#8a3fc0}.cat-heartbeat{color:#8a96a8}.cat-heartbeat .ty{color:#8a96a8}.cat-transport .ty{color:#16803a}.cat-error .ty,.cat-error .s{color:#c81e1e}
        .cat-binary .ty{color:#0d7f7f}.cat-input .ty,.cat-action .ty,.cat-timer .ty{color:#6b7280}.cat-watch .ty{color:#c0560a}
        #detail{flex:2;overflow:auto;padding:8px 10px;min-width:0}#detail-head{font-weight:600;margin-bottom:6px}.muted{color:#667;font-weight:400}
        #detail-json{font:12px ui-monospace,monospace;white-space:pre-wrap;word-break:break-all;margin:0}.jk{color:#7a3e9d}.js{color:#1f6f43}.jd{color:#1c5fb0}.jb,.jn{color:#b0451c}
        mark.redacted{background:#ffe08a;color:#6a3d00;border-radius:2px;padding:0 2px}.redacted-note{background:#ffe08a;color:#6a3d00;font-size:11px;padding:1px 5px;border-radius:8px}
        #detail details{margin-top:10px}#detail summary{cursor:pointer;color:#445}#checks{padding-left:18px;font-size:12px}#checks li{cursor:pointer;margin:2px 0}#checks li.ok{color:#164;cursor:default}#stats{font:11px ui-monospace,monospace;white-space:pre-wrap}
        """
}

/// `text` escaped for HTML text and attributes.
func escapeHTML(_ text: String) -> String {
    var out = ""
    for c in text.unicodeScalars {
        switch c {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&#39;"
        default: out.unicodeScalars.append(c)
        }
    }
    return out
}

extension String {
    /// Every `<` written as the JSON escape `\u003c`.
    func escapingLessThan() -> String {
        guard contains("<") else { return self }
        var out = ""
        out.reserveCapacity(utf8.count + 64)
        for c in unicodeScalars {
            if c == "<" { out += "\\u003c" } else { out.unicodeScalars.append(c) }
        }
        return out
    }
}
