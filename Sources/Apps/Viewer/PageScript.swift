extension ViewerPage {
    /// The page's script: the data source (the live API, or the data a saved page embeds), the virtualised
    /// frame list, the filter, the detail pane, the canvas timeline and the keyboard. No library, nothing
    /// fetched from outside. `window.__viewer` exposes what the browser tests read (ticks drawn, the
    /// selection, load and redraw times, errors).
    static let script = #"""
(function () {
'use strict';
var $ = function (id) { return document.getElementById(id); };
var dataTag = $('embedded');
var EMB = dataTag ? JSON.parse(dataTag.textContent) : null;
var V = window.__viewer = { loadMs: null, listMs: null, redraws: [], refreshes: [], ticks: [], selected: null,
  divergence: null, errors: [], ready: false, mode: EMB ? 'static' : 'live', rowsDrawn: 0, replay: null };
var RH = 20, MAXH = 8000000, PAGE = 200;

function fail(where, e) {
  var msg = where + ': ' + (e && e.message ? e.message : e);
  V.errors.push(msg);
  $('status').textContent = msg;
  $('status').className = 'bad';
  console.error('relaytrace view: ' + msg);
}
function esc(s) {
  return String(s).replace(/[&<>"']/g, function (c) { return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]; });
}
function pad(n, w) { n = String(n); while (n.length < w) n = '0' + n; return n; }
// h:mm:ss.mmm of a time in nanoseconds.
function fmt(ns) {
  var neg = ns < 0; if (neg) ns = -ns;
  var ms = Math.floor(ns / 1e6), h = Math.floor(ms / 3600000), m = Math.floor(ms / 60000) % 60, s = Math.floor(ms / 1000) % 60;
  return (neg ? '-' : '') + h + ':' + pad(m, 2) + ':' + pad(s, 2) + '.' + pad(ms % 1000, 3);
}
// Durations as the filter language writes them: 90, 1.5, 1m30s, 2h, 250ms.
function parseTime(text) {
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(parseFloat(text) * 1e9);
  var re = /(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)/g, total = 0, used = 0, m;
  while ((m = re.exec(text)) !== null) {
    if (m.index !== used) return null;
    used = re.lastIndex;
    total += parseFloat(m[1]) * { h: 3600e9, m: 60e9, s: 1e9, ms: 1e6, us: 1e3, ns: 1 }[m[2]];
  }
  return used === text.length && used > 0 ? Math.round(total) : null;
}

// ---- the filter language (the same as ViewerQuery in Swift; used by a saved page) ----
var KEYS = ['gen', 'dir', 'type', 'event', 'method', 'id', 'since', 'until', 'channel'];
function terms(text) {
  var out = [], cur = '', q = false;
  for (var i = 0; i < text.length; i++) {
    var c = text[i];
    if (c === '"') { if (q) { out.push({ t: cur, q: true }); cur = ''; } else if (cur) { out.push({ t: cur, q: false }); cur = ''; } q = !q; }
    else if (c === ' ' && !q) { if (cur) { out.push({ t: cur, q: false }); cur = ''; } }
    else cur += c;
  }
  if (cur) out.push({ t: cur, q: q });
  return out;
}
function list(v) { var s = {}; v.split(',').forEach(function (x) { x = x.trim(); if (x) s[x] = true; }); return s; }
function parseQuery(text) {
  var f = {}, words = [];
  terms(text).forEach(function (term) {
    var i = term.t.indexOf(':'), key = i > 0 ? term.t.slice(0, i) : '';
    if (term.q || KEYS.indexOf(key) < 0) { words.push(term.t); return; }
    var v = term.t.slice(i + 1);
    if (!v) throw new Error("'" + key + ":' needs a value");
    if (key === 'gen') { f.gen = {}; v.split(',').forEach(function (g) { g = g.trim(); if (!g) return; if (!/^\d+$/.test(g)) throw new Error("gen: '" + g + "' is not a generation number"); f.gen[g] = true; }); }
    else if (key === 'dir') { if (v !== 'in' && v !== 'out') throw new Error("dir: is in or out"); f.dir = v; }
    else if (key === 'type') f.type = list(v);
    else if (key === 'event') f.event = list(v);
    else if (key === 'method') f.method = list(v);
    else if (key === 'id') f.id = list(v);
    else if (key === 'since' || key === 'until') { var t = parseTime(v); if (t === null) throw new Error(key + ": cannot read '" + v + "'"); f[key] = t; }
    else { if (v !== 'relay' && v !== 'watch') throw new Error('channel: is relay or watch'); f.channel = v; }
  });
  if (words.length) f.grep = words.join(' ');
  return f;
}
function matches(f, r) {
  if (f.since !== undefined && r.t < f.since) return false;
  if (f.until !== undefined && r.t > f.until) return false;
  if (f.channel && r.c !== f.channel) return false;
  if (f.gen && (r.g === null || !f.gen[String(r.g)])) return false;
  if (f.dir && r.d !== f.dir) return false;
  if (f.type && !(f.type[r.k] || (r.ty !== 'PTC1' && r.ty !== r.k && f.type[r.ty]))) return false;
  if (f.event && !(r.ev && f.event[r.ev])) return false;
  if (f.method && !(r.m && f.method[r.m])) return false;
  if (f.id && !(r.id && f.id[r.id])) return false;
  if (f.grep && (r.x || '').indexOf(f.grep) < 0) return false;
  return true;
}

// ---- data sources ----
function get(path) {
  return fetch(path).then(function (r) {
    return r.json().then(function (j) { if (!r.ok) throw new Error(j.error || r.statusText); return j; });
  });
}
var live = {
  info: function () { return get('/api/info'); },
  rows: function (from, count) { return get('/api/records?from=' + from + '&count=' + count); },
  seek: function (t) { return get('/api/records?t=' + Math.max(0, Math.floor(t))).then(function (j) { return j.index; }); },
  search: function (q, from, limit) { return get('/api/search?q=' + encodeURIComponent(q) + '&from=' + from + '&limit=' + limit); },
  record: function (n) { return get('/api/record?n=' + n); },
  timeline: function (a, b, w) { return get('/api/timeline?from=' + Math.floor(a) + '&to=' + Math.ceil(b) + '&width=' + w); },
  stats: function () { return get('/api/stats'); },
  replay: function () { return get('/api/replay'); }
};
var saved = EMB && {
  info: function () { return Promise.resolve(EMB.info); },
  rows: function (from, count) { return Promise.resolve({ from: from, total: EMB.rows.length, rows: EMB.rows.slice(from, from + count) }); },
  seek: function (t) {
    var lo = 0, hi = EMB.rows.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (EMB.rows[mid].t < t) lo = mid + 1; else hi = mid; }
    return Promise.resolve(lo);
  },
  search: function (q, from, limit) {
    try {
      var f = parseQuery(q), out = [], i = from;
      for (; i < EMB.rows.length && out.length < limit; i++) if (matches(f, EMB.rows[i])) out.push(EMB.rows[i]);
      return Promise.resolve({ from: from, next: i, done: i >= EMB.rows.length, rows: out });
    } catch (e) { return Promise.reject(e); }
  },
  record: function (n) {
    var d = EMB.details && EMB.details[n];
    return d ? Promise.resolve(d) : Promise.reject(new Error('record ' + n + ' is not saved in this page; open the trace with relaytrace view'));
  },
  timeline: function (a, b) {
    var t = EMB.timeline, rows = t.rows.map(function (r) {
      return { name: r.name, aggregated: r.aggregated, total: r.total,
        lanes: r.lanes.filter(function (l) { return l[1] <= b && l[2] >= a; }),
        marks: r.marks.filter(function (m) { return m[1] <= b && (m[2] === null ? m[1] : m[2]) >= a; }) };
    });
    return Promise.resolve({ state: 'ready', from: a, to: b, rows: rows, checks: t.checks, rowNames: t.rowNames, start: t.start, end: t.end });
  },
  stats: function () { return Promise.resolve(EMB.stats); },
  replay: function () { return Promise.resolve({ state: 'done', result: { result: 'unavailable', reason: 'a saved page holds no replay: run relaytrace view FILE --replay' } }); }
};
var api = EMB ? saved : live;

// ---- state ----
var info = null, start = 0, end = 1;
var L = { filter: '', lastQuery: '', f: null, total: 0, pages: {}, pending: {}, matches: [], next: 0, done: true, searching: false, gen: 0, pos: -1 };
var T = { a: 0, b: 1, data: null, rowNames: [], checks: [], fetchTimer: null, want: 0, building: false, pendingSince: null };
var rowTimes = {};

// ---- the frame list ----
var listEl = $('list'), spacer = $('spacer'), rowsEl = $('rows');
function listLength() { return L.f ? L.matches.length : L.total; }
function visibleCount() { return Math.ceil(listEl.clientHeight / RH) + 1; }
function firstVisible() {
  var n = listLength(), vis = visibleCount(), h = spacer.offsetHeight - listEl.clientHeight;
  if (n * RH <= MAXH) return Math.floor(listEl.scrollTop / RH);
  return h <= 0 ? 0 : Math.round(listEl.scrollTop / h * Math.max(0, n - vis + 1));
}
function scrollToPos(p) {
  var n = listLength(), vis = visibleCount(), first = firstVisible();
  if (p >= first && p < first + vis - 1) return;
  var target = Math.max(0, p - Math.floor(vis / 3));
  if (n * RH <= MAXH) listEl.scrollTop = target * RH;
  else listEl.scrollTop = target / Math.max(1, n - vis + 1) * (spacer.offsetHeight - listEl.clientHeight);
}
function rowAt(p) {
  if (L.f) return L.matches[p];
  var page = L.pages[Math.floor(p / PAGE)];
  return page ? page[p % PAGE] : undefined;
}
function loadPage(k) {
  if (L.pages[k] || L.pending[k]) return;
  L.pending[k] = true;
  api.rows(k * PAGE, PAGE).then(function (j) {
    delete L.pending[k];
    L.pages[k] = j.rows;
    var keys = Object.keys(L.pages);
    if (keys.length > 60) keys.slice(0, keys.length - 60).forEach(function (x) { if (Math.abs(x - k) > 5) delete L.pages[x]; });
    renderList();
  }).catch(function (e) { delete L.pending[k]; fail('records', e); });
}
function searchMore() {
  if (L.done || L.searching || !L.f) return;
  L.searching = true;
  var gen = L.gen;
  api.search(L.filter, L.next, 200).then(function (j) {
    if (gen !== L.gen) return;
    L.searching = false;
    L.matches = L.matches.concat(j.rows);
    L.next = j.next;
    L.done = j.done;
    status();
    renderList();
    if (L.matches.length < firstVisible() + visibleCount() + 50 && !L.done) searchMore();
  }).catch(function (e) { L.searching = false; L.done = true; fail('filter', e); });
}
function renderList() {
  var n = listLength();
  spacer.style.height = Math.min(n * RH, MAXH) + 'px';
  var first = firstVisible(), vis = visibleCount(), html = '', missing = false;
  rowsEl.style.top = listEl.scrollTop + 'px';
  for (var p = first; p < Math.min(n, first + vis); p++) {
    var r = rowAt(p);
    if (!r) { missing = true; if (!L.f) loadPage(Math.floor(p / PAGE)); html += '<div class="row loading">...</div>'; continue; }
    rowTimes[r.i] = r.t;
    var cls = 'row cat-' + r.cat + (r.d ? ' dir-' + r.d : '') + (r.i === V.selected ? ' sel' : '') + (V.divergence && V.divergence.record === r.i ? ' diverged' : '');
    html += '<div class="' + cls + '" data-i="' + r.i + '" data-p="' + p + '"><span class="n">' + r.i + '</span><span class="t">' + fmt(r.t) +
      '</span><span class="g">' + (r.g === null ? '-' : 'g' + r.g) + '</span><span class="d">' + (r.d === 'in' ? '&larr;' : r.d === 'out' ? '&rarr;' : '') +
      '</span><span class="ty">' + esc(r.ty) + '</span><span class="s">' + (r.c !== 'relay' ? '[' + esc(r.c) + '] ' : '') + esc(r.s) + '</span></div>';
  }
  if (L.f && first + vis >= n && !L.done) { html += '<div class="row loading">scanning...</div>'; searchMore(); }
  rowsEl.innerHTML = html;
  V.rowsDrawn = rowsEl.querySelectorAll('.row[data-i]').length;
  if (V.listMs === null && !missing && V.rowsDrawn > 0) { V.listMs = performance.now(); maybeLoaded(); }
}
listEl.addEventListener('scroll', function () { renderList(); });
window.addEventListener('resize', function () { renderList(); layoutCanvas(); draw(); });
rowsEl.addEventListener('click', function (e) {
  var el = e.target.closest('.row[data-i]');
  if (el) select(+el.getAttribute('data-i'), +el.getAttribute('data-p'));
});
function applyFilter(text) {
  text = text.trim();
  L.gen++;
  L.filter = text;
  L.matches = []; L.next = 0; L.done = !text; L.searching = false; L.pos = -1;
  $('filter').classList.remove('bad');
  if (!text) { L.f = null; status(); listEl.scrollTop = 0; renderList(); return; }
  try { L.f = parseQuery(text); } catch (e) { L.f = null; $('filter').classList.add('bad'); fail('filter', e); return; }
  L.lastQuery = text;
  $('status').className = '';
  listEl.scrollTop = 0;
  status();
  renderList();
}
function status() {
  var s = info ? info.records + ' records, ' + fmt(end - start) + ' (' + info.kind + ' trace)' : '';
  if (L.f) s = L.matches.length + (L.done ? '' : '+') + ' match' + (L.matches.length === 1 && L.done ? '' : 'es') + ' of ' + (info ? info.records : '?') + (L.done ? '' : ' (scanning)');
  $('status').textContent = s;
}

// ---- selection and the detail pane ----
function select(n, p) {
  V.selected = n;
  if (p === undefined) p = L.f ? indexInMatches(n) : n;
  L.pos = p;
  if (p >= 0) scrollToPos(p);
  renderList();
  $('detail-head').textContent = 'record #' + n;
  api.record(n).then(function (d) {
    if (V.selected !== n) return;
    rowTimes[n] = Math.round(d.t * 1e9);
    $('detail-head').innerHTML = 'record #' + n + ' <span class="muted">' + esc(d.kind) + (d.gen !== null ? ' g' + d.gen : '') + (d.dir ? ' ' + d.dir : '') + ' at ' + fmt(Math.round(d.t * 1e9)) + '</span>' +
      (d.redacted.length ? ' <span class="redacted-note">' + d.redacted.length + ' redacted</span>' : '');
    $('detail-json').innerHTML = pretty(d, 0);
    draw();
  }).catch(function (e) { fail('record', e); });
  draw();
}
function indexInMatches(n) { for (var i = 0; i < L.matches.length; i++) if (L.matches[i].i === n) return i; return -1; }
function step(delta) {
  var p = L.pos < 0 ? (L.f ? -1 : (V.selected === null ? -1 : V.selected)) : L.pos;
  var q = p + delta;
  if (q < 0) return;
  if (L.f && q >= L.matches.length) { if (!L.done) searchMore(); return; }
  if (!L.f && q >= L.total) return;
  var r = rowAt(q);
  if (r) { select(r.i, q); return; }
  if (!L.f) select(q, q);
}
function nextMatch(delta) {
  if (L.f || !L.lastQuery || delta < 0) { step(delta); return; }
  api.search(L.lastQuery, (V.selected === null ? -1 : V.selected) + 1, 1).then(function (j) {
    if (j.rows.length) select(j.rows[0].i, j.rows[0].i);
    else if (!j.done) { V.selected = j.next - 1; nextMatch(1); }
  }).catch(function (e) { fail('search', e); });
}
function pretty(v, depth) {
  var ind = '  '.repeat(depth + 1), end = '  '.repeat(depth);
  if (v === null) return '<span class="jn">null</span>';
  if (typeof v === 'string') {
    var s = esc(JSON.stringify(v));
    if (v.indexOf('rt:redacted:') >= 0) s = s.replace(/rt:redacted:[0-9a-f]*/g, function (m) { return '<mark class="redacted" title="redacted by the recorder">' + m + '</mark>'; });
    return '<span class="js">' + s + '</span>';
  }
  if (typeof v === 'number') return '<span class="jd">' + v + '</span>';
  if (typeof v === 'boolean') return '<span class="jb">' + v + '</span>';
  if (Array.isArray(v)) {
    if (!v.length) return '[]';
    return '[\n' + v.map(function (x) { return ind + pretty(x, depth + 1); }).join(',\n') + '\n' + end + ']';
  }
  var keys = Object.keys(v).sort();
  if (!keys.length) return '{}';
  return '{\n' + keys.map(function (k) { return ind + '<span class="jk">' + esc(JSON.stringify(k)) + '</span>: ' + pretty(v[k], depth + 1); }).join(',\n') + '\n' + end + '}';
}

// ---- the timeline ----
var canvas = $('timeline'), ctx = canvas.getContext('2d'), AXIS = 30, ROWH = 22, GUT = 96;
var COLORS = { open: '#2a2', opened: '#2a2', register: '#e9a21c', registered: '#1a9a1a', heartbeat: '#7ab8d8', rpc: '#4f7fe8', rpcError: '#e03c3c',
  rpcUnanswered: '#f08c00', frame: '#8a9a9a', close: '#222', fail: '#d00', leaseRenew: '#a55bd6', leaseRelease: '#a55bd6', epoch: '#f2c230',
  timer: '#9a9a9a', watchFrame: '#e8732f', watchEvent: '#b85a00' };
var BANDS = { epoch: 1, leaseRenew: 1, timer: 1 };
var BIG = { open: 1, opened: 1, register: 1, registered: 1, close: 1, fail: 1, leaseRelease: 1, watchEvent: 1 };
var STEPS = [1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 2e8, 5e8, 1e9, 2e9, 5e9, 1e10, 15e9, 3e10, 6e10, 12e10, 3e11, 6e11, 9e11, 18e11, 36e11, 72e11, 108e11, 216e11, 432e11];
function plotW() { return Math.max(10, canvas.clientWidth - GUT - 10); }
function xOf(t) { return GUT + (t - T.a) / (T.b - T.a) * plotW(); }
function tOf(x) { return T.a + (x - GUT) / plotW() * (T.b - T.a); }
function layoutCanvas() {
  var rows = Math.max(1, T.rowNames.length), dpr = window.devicePixelRatio || 1;
  var h = AXIS + rows * ROWH + 6;
  canvas.style.height = h + 'px';
  canvas.width = Math.floor(canvas.clientWidth * dpr);
  canvas.height = Math.floor(h * dpr);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
}
function ticks() {
  var span = T.b - T.a, w = plotW(), stepNs = STEPS[STEPS.length - 1];
  for (var i = 0; i < STEPS.length; i++) if (STEPS[i] / span * w >= 90) { stepNs = STEPS[i]; break; }
  var out = [], t = Math.ceil(T.a / stepNs) * stepNs;
  for (; t <= T.b && out.length < 200; t += stepNs) out.push(t);
  return { step: stepNs, at: out };
}
function draw() {
  var t0 = performance.now();
  var W = canvas.clientWidth, H = canvas.clientHeight;
  ctx.clearRect(0, 0, W, H);
  ctx.font = '11px system-ui, sans-serif';
  ctx.textBaseline = 'middle';
  // rows
  for (var r = 0; r < T.rowNames.length; r++) {
    var y = AXIS + r * ROWH;
    ctx.fillStyle = r % 2 ? '#f7f8fa' : '#eef1f5';
    ctx.fillRect(0, y, W, ROWH - 1);
    ctx.fillStyle = '#333';
    ctx.fillText(T.rowNames[r], 6, y + ROWH / 2);
  }
  // ticks
  var tk = ticks(), labels = [];
  ctx.strokeStyle = '#d5d9df'; ctx.fillStyle = '#555'; ctx.textAlign = 'center';
  tk.at.forEach(function (t) {
    var x = xOf(t), label = fmt(t);
    ctx.beginPath(); ctx.moveTo(x + 0.5, AXIS - 6); ctx.lineTo(x + 0.5, H); ctx.stroke();
    ctx.fillText(label, x, 10);
    labels.push(label);
  });
  V.ticks = labels; V.tickStep = tk.step; V.rowNames = T.rowNames;
  ctx.textAlign = 'left';
  ctx.save();
  ctx.beginPath(); ctx.rect(GUT, 0, W - GUT, H); ctx.clip();
  var d = T.data;
  if (d) {
    d.rows.forEach(function (row, ri) {
      var y = AXIS + ri * ROWH;
      row.lanes.forEach(function (l, li) {
        var x1 = xOf(l[1]), x2 = Math.max(x1 + 1, xOf(l[2]));
        ctx.fillStyle = li % 2 ? 'rgba(80,120,200,0.10)' : 'rgba(80,120,200,0.18)';
        ctx.fillRect(x1, y + 2, x2 - x1, ROWH - 5);
        if (x2 - x1 > 34) { ctx.fillStyle = '#446'; ctx.fillText(l[0], Math.max(x1, GUT) + 2, y + 6); }
      });
      row.marks.forEach(function (m) {
        var k = m[0], x = xOf(m[1]), c = COLORS[k] || '#888';
        if (m[2] !== null) {
          var x2 = Math.max(x + 1.5, xOf(m[2]));
          if (BANDS[k]) { ctx.globalAlpha = k === 'timer' ? 0.35 : 0.45; ctx.fillStyle = c; ctx.fillRect(x, y + 3, x2 - x, ROWH - 7); ctx.globalAlpha = 1; ctx.fillStyle = c; ctx.fillRect(x, y + 2, 1.5, ROWH - 5); }
          else { ctx.fillStyle = c; ctx.fillRect(x, y + 7, x2 - x, ROWH - 14); }
        } else if (BIG[k]) {
          ctx.fillStyle = c; ctx.beginPath(); ctx.arc(x, y + ROWH / 2, 4, 0, 6.283); ctx.fill();
        } else {
          var h = m[4] > 1 ? Math.min(ROWH - 6, 6 + Math.log(m[4]) * 2) : 8;
          ctx.fillStyle = c; ctx.fillRect(x - 0.75, y + (ROWH - h) / 2, 1.5, h);
        }
      });
    });
  }
  // checks on the axis
  T.checks.forEach(function (c) {
    var x = xOf(c.t);
    ctx.fillStyle = '#e07000'; ctx.beginPath(); ctx.moveTo(x - 4, AXIS - 8); ctx.lineTo(x + 4, AXIS - 8); ctx.lineTo(x, AXIS - 1); ctx.fill();
  });
  // selection and divergence
  if (V.selected !== null && rowTimes[V.selected] !== undefined) {
    var sx = xOf(rowTimes[V.selected]);
    ctx.strokeStyle = '#1565c0'; ctx.lineWidth = 1.5; ctx.beginPath(); ctx.moveTo(sx, AXIS - 4); ctx.lineTo(sx, H); ctx.stroke(); ctx.lineWidth = 1;
  }
  if (V.divergence) {
    var dx = xOf(V.divergence.timeNs);
    ctx.strokeStyle = '#d00'; ctx.lineWidth = 2; ctx.setLineDash([5, 3]); ctx.beginPath(); ctx.moveTo(dx, AXIS - 10); ctx.lineTo(dx, H); ctx.stroke();
    ctx.setLineDash([]); ctx.lineWidth = 1;
    ctx.fillStyle = '#d00'; ctx.font = 'bold 11px system-ui, sans-serif'; ctx.fillText('divergence #' + V.divergence.record, dx + 4, AXIS + 4);
    V.divergenceDrawnAt = dx;
  }
  ctx.restore();
  if (!d && T.building) { ctx.fillStyle = '#555'; ctx.fillText('laying out the timeline... ' + Math.round(T.progress * 100) + '%', GUT + 10, AXIS + ROWH / 2); }
  var ms = performance.now() - t0;
  V.redraws.push(ms);
  if (V.redraws.length > 500) V.redraws.shift();
  $('zoom-label').textContent = fmt(T.a) + ' - ' + fmt(T.b) + ' (' + fmt(T.b - T.a) + ')';
}
function fetchTimeline() {
  clearTimeout(T.fetchTimer);
  T.fetchTimer = setTimeout(function () {
    var want = ++T.want, a = T.a, b = T.b, since = T.pendingSince;
    api.timeline(a, b, Math.round(plotW())).then(function (j) {
      if (want !== T.want) return;
      if (j.state === 'building') { T.building = true; T.progress = j.progress; draw(); setTimeout(fetchTimeline, 250); return; }
      if (j.state !== 'ready') { fail('timeline', new Error(j.error || j.state)); return; }
      T.building = false;
      var first = !T.data;
      T.data = j;
      T.checks = j.checks;
      if (first || T.rowNames.length !== j.rowNames.length) { T.rowNames = j.rowNames; layoutCanvas(); renderChecks(j); }
      draw();
      if (since !== null) { V.refreshes.push(performance.now() - since); T.pendingSince = null; }
      if (first) { V.timelineMs = performance.now(); maybeLoaded(); }
    }).catch(function (e) { fail('timeline', e); });
  }, T.data ? 40 : 0);
}
function setView(a, b) {
  var minSpan = 5e6, full = end - start;
  if (b - a < minSpan) { var c = (a + b) / 2; a = c - minSpan / 2; b = c + minSpan / 2; }
  if (b - a > full) { a = start; b = end; }
  if (a < start) { b += start - a; a = start; }
  if (b > end) { a -= b - end; b = end; }
  T.a = Math.max(start, a); T.b = Math.min(end, Math.max(T.a + 1, b));
  if (T.pendingSince === null) T.pendingSince = performance.now();
  draw();
  fetchTimeline();
}
function zoom(f, cx) {
  var c = cx === undefined ? (T.a + T.b) / 2 : tOf(cx);
  setView(c - (c - T.a) * f, c + (T.b - c) * f);
}
canvas.addEventListener('wheel', function (e) { e.preventDefault(); zoom(e.deltaY < 0 ? 0.8 : 1.25, e.offsetX); }, { passive: false });
var drag = null;
canvas.addEventListener('mousedown', function (e) { drag = { x: e.clientX, a: T.a, b: T.b, moved: false }; });
window.addEventListener('mouseup', function () { setTimeout(function () { drag = null; }, 0); });
window.addEventListener('mousemove', function (e) {
  if (!drag) return;
  var dx = e.clientX - drag.x;
  if (Math.abs(dx) < 3 && !drag.moved) return;
  drag.moved = true;
  var dt = dx / plotW() * (drag.b - drag.a);
  setView(drag.a - dt, drag.b - dt);
});
// The mark under (x, y): the nearest within 6 px on that row (inside a span counts as on it; a band
// yields to a mark on top of it), or null.
function hit(x, y) {
  var ri = Math.floor((y - AXIS) / ROWH), best = null, bestD = 6;
  if (!T.data || ri < 0 || ri >= T.data.rows.length || x < GUT) return null;
  T.data.rows[ri].marks.forEach(function (m) {
    var x1 = xOf(m[1]), x2 = m[2] === null ? x1 : xOf(m[2]);
    var d = x >= x1 && x <= x2 ? (BANDS[m[0]] ? 3 : 0.5) : Math.min(Math.abs(x - x1), Math.abs(x - x2));
    if (d <= bestD) { bestD = d; best = m; }
  });
  return best;
}
canvas.addEventListener('click', function (e) {
  if (drag && drag.moved) return;
  var x = e.offsetX, y = e.offsetY;
  if (x < GUT) return;
  if (y < AXIS) {
    var bestC = null, bestCD = 6;
    T.checks.forEach(function (c) { var d = Math.abs(xOf(c.t) - x); if (c.record !== null && d < bestCD) { bestCD = d; bestC = c.record; } });
    if (bestC !== null) { select(bestC); return; }
  }
  var best = hit(x, y);
  if (best) { rowTimes[best[3]] = best[1]; select(best[3]); return; }
  var t = tOf(x);
  api.seek(t).then(function (n) { if (n < info.records) { if (L.f) applyFilter(''); $('filter').value = ''; select(n, n); } }).catch(function (e) { fail('seek', e); });
});
canvas.addEventListener('mousemove', function (e) {
  var t = tOf(e.offsetX);
  canvas.title = e.offsetX >= GUT ? fmt(t) + ' (click a mark to select its frame, empty space to jump there; wheel zooms, drag pans)' : '';
});
$('zoom-in').onclick = function () { zoom(0.5); };
$('zoom-out').onclick = function () { zoom(2); };
$('zoom-fit').onclick = function () { setView(start, end); };

function renderChecks(j) {
  var el = $('checks');
  if (!j.checks.length) { el.innerHTML = '<li class="ok">no check failed</li>'; }
  else el.innerHTML = j.checks.map(function (c) {
    return '<li data-i="' + (c.record === null ? '' : c.record) + '"><b>' + esc(c.rule) + '</b> ' + fmt(c.t) + (c.record === null ? '' : ' #' + c.record) + ': ' + esc(c.message) + '</li>';
  }).join('');
  $('checks-count').textContent = j.checks.length;
  if (j.problem) fail('timeline', new Error(j.problem));
}
$('checks').addEventListener('click', function (e) { var li = e.target.closest('li[data-i]'); if (li && li.getAttribute('data-i') !== '') select(+li.getAttribute('data-i')); });
$('stats-box').addEventListener('toggle', function () {
  if (!$('stats-box').open || $('stats').dataset.loaded) return;
  api.stats().then(function (j) { $('stats').textContent = j.text || ('stats: ' + j.state); if (j.state === 'ready') $('stats').dataset.loaded = '1'; }).catch(function (e) { fail('stats', e); });
});

// ---- strict replay ----
function runReplay() {
  $('replay').disabled = true;
  $('banner').className = 'info'; $('banner').textContent = 'strict replay running...';
  api.replay().then(function (j) {
    if (j.state !== 'done') { setTimeout(runReplay, 300); return; }
    var r = j.result; V.replay = r;
    $('replay').disabled = false;
    if (r.result === 'diverged' && r.divergence) {
      var d = r.divergence;
      V.divergence = d;
      $('banner').className = 'bad';
      $('banner').innerHTML = '<b>strict replay diverged at record #' + d.record + '</b> (' + fmt(d.timeNs) + ', ' + esc(d.kind) + ')' +
        (d.rule ? ' SPEC ' + esc(d.rule.section) + ': ' + esc(d.rule.summary) : '') +
        (d.differences && d.differences.length ? '<br><code>' + d.differences.map(esc).join('</code><br><code>') + '</code>' : '') +
        ' <a href="#" id="goto-divergence">show it</a>';
      $('goto-divergence').onclick = function (e) { e.preventDefault(); rowTimes[d.record] = d.timeNs; select(d.record); };
      rowTimes[d.record] = d.timeNs;
      renderList(); draw();
    } else if (r.result === 'finished') {
      $('banner').className = 'ok'; $('banner').textContent = 'strict replay: no divergence (' + r.records + ' records)';
    } else {
      $('banner').className = 'info'; $('banner').textContent = 'strict replay: ' + (r.reason || r.result) + (r.damage ? ': ' + r.damage.message : '');
    }
  }).catch(function (e) { $('replay').disabled = false; fail('replay', e); });
}
$('replay').onclick = runReplay;

// ---- keyboard ----
document.addEventListener('keydown', function (e) {
  var inFilter = e.target === $('filter');
  if (inFilter) {
    if (e.key === 'Enter') { e.preventDefault(); applyFilter($('filter').value); $('filter').blur(); }
    else if (e.key === 'Escape') { $('filter').value = ''; applyFilter(''); $('filter').blur(); if (V.selected !== null) select(V.selected, V.selected); }
    return;
  }
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === 'j' || e.key === 'ArrowDown') { e.preventDefault(); step(1); }
  else if (e.key === 'k' || e.key === 'ArrowUp') { e.preventDefault(); step(-1); }
  else if (e.key === '/') { e.preventDefault(); $('filter').focus(); $('filter').select(); }
  else if (e.key === 'n') { e.preventDefault(); nextMatch(1); }
  else if (e.key === 'N') { e.preventDefault(); nextMatch(-1); }
  else if (e.key === '+' || e.key === '=') zoom(0.5);
  else if (e.key === '-') zoom(2);
  else if (e.key === '0') setView(start, end);
});

// ---- what the browser tests read ----
V.filterDone = function () { return !L.f || L.done; };
V.matchCount = function () { return L.f ? L.matches.length : null; };
V.listLength = function () { return listLength(); };
V.scrollTo = function (p) { scrollToPos(p); renderList(); };
V.pendingRefresh = function () { return T.pendingSince !== null; };
V.select = function (n) { select(n); };
V.kindsDrawn = function () {
  var k = {};
  if (T.data) T.data.rows.forEach(function (r) { r.marks.forEach(function (m) { k[m[0]] = true; }); });
  return Object.keys(k);
};
// A point mark with no other mark within 8 px on its row, for a test to click: {x, y, record, kind}.
V.locateMark = function () {
  if (!T.data) return null;
  var best = null, W = Math.ceil(GUT + plotW() + 20);
  T.data.rows.forEach(function (row, ri) {
    // How many marks (each widened by 8 px) cover each pixel column: a point covered by itself alone
    // is one a click can only mean (linear in the marks: a 24 h view holds thousands).
    var cover = new Int32Array(W + 2), xs = row.marks.map(function (m) { return xOf(m[1]); });
    row.marks.forEach(function (m, i) {
      var lo = Math.max(0, Math.floor(xs[i] - 8)), hi = Math.min(W, Math.ceil((m[2] === null ? xs[i] : xOf(m[2])) + 8));
      if (hi < 0 || lo > W) return;
      cover[lo] += 1; cover[hi + 1] -= 1;
    });
    for (var c = 1; c <= W; c++) cover[c] += cover[c - 1];
    row.marks.forEach(function (m, i) {
      if (m[2] !== null || best && !BIG[m[0]]) return;
      var x = xs[i];
      if (x < GUT + 10 || x > GUT + plotW() - 10) return;
      var a = Math.max(0, Math.floor(x - 8)), b = Math.min(W, Math.ceil(x + 8)), lonely = true;
      for (var k = a; k <= b && lonely; k++) if (cover[k] > 1) lonely = false;
      if (lonely && (!best || (BIG[m[0]] && !BIG[best.kind]))) best = { x: x, y: AXIS + ri * ROWH + ROWH / 2, record: m[3], kind: m[0] };
    });
  });
  if (best || !T.data.rows.length) return best;
  // Nothing alone (a dense view): the first row's middle, and the mark a click there selects.
  var x = GUT + plotW() / 2, y = AXIS + ROWH / 2, m = hit(x, y);
  return m ? { x: x, y: y, record: m[3], kind: m[0] } : null;
};

function maybeLoaded() {
  if (V.loadMs === null && V.listMs !== null && V.timelineMs !== undefined) {
    V.loadMs = Math.max(V.listMs, V.timelineMs);
    V.ready = true;
  }
}

// ---- start ----
api.info().then(function (i) {
  info = i; start = i.start; end = Math.max(i.end, i.start + 1e6);
  document.title = i.title + ' - relaytrace view';
  $('title').textContent = i.title;
  if (i.truncated) { $('banner').className = 'info'; $('banner').textContent = i.truncated; }
  if (!i.replay) $('replay').style.display = 'none';
  L.total = i.records;
  T.a = start; T.b = end;
  status();
  layoutCanvas();
  renderList();
  fetchTimeline();
  if (i.records > 0 && V.selected === null) select(0, 0);
  if (i.replay && (i.autoReplay || /[?&]replay=1/.test(location.search))) runReplay();
}).catch(function (e) { fail('info', e); });
})();
"""#
}
