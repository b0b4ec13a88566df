#!/usr/bin/env python3
"""Drives the `relaytrace view` page (or a page saved by `timeline --html`) in headless Chromium with
selenium, and prints one JSON line per check: {"check": NAME, "ok": bool, "detail": ...}. The last line
is {"check": "timing", ...}: page load and redraw times measured in the browser (reported, not judged).

Usage: browser_checks.py CASE.json [--screenshot OUT.png]

CASE.json (written by Tests/RelayTraceCLITests/ViewerBrowserTests.swift):
  url          the page (http://127.0.0.1:PORT/ or file:///...html)
  first        [{"i": n, "ty": type}, ...]  the first rows the list must show, in order
  filter       {"q": query, "first": [n, ...], "count": n or null}  matches the filter must give
  click        {"i": n, "contains": [text, ...], "redacted": n}  a row to click and what its detail shows
  kind         "machine" | "wire" | "watch"  what the status line must name
  rows         {"max": n, "contains": [name, ...]}  timeline rows (packed lanes)
  divergence   n or null  the record a strict replay diverges at (the page is opened with it asked)
  markKinds    [kind, ...] mark kinds the timeline must draw in the whole-trace view
  measure      true to measure zoom, pan and list-scroll redraws
"""
import json
import statistics
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.common.exceptions import StaleElementReferenceException

results = []


def report(check, ok, detail="", **extra):
    line = {"check": check, "ok": bool(ok), "detail": detail}
    line.update(extra)
    results.append(line)
    print(json.dumps(line), flush=True)


def wait(driver, js, timeout=30.0, interval=0.05):
    """Polls a JS expression until it is truthy; returns its value or None at the deadline."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = driver.execute_script("return " + js)
        if v:
            return v
        time.sleep(interval)
    return None


def rows(driver):
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#rows .row[data-i]')).map(function(r){"
        "return {i: +r.getAttribute('data-i'), ty: r.querySelector('.ty').textContent, cls: r.className};});")


def main():
    case = json.load(open(sys.argv[1]))
    shot = sys.argv[sys.argv.index("--screenshot") + 1] if "--screenshot" in sys.argv else None
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,900",
                 "--hide-scrollbars", "--no-first-run", "--disable-extensions", "--disable-background-networking"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    driver.set_script_timeout(30)
    try:
        run(driver, case, shot)
    finally:
        driver.quit()


def run(driver, case, shot):
    url = case["url"]
    if case.get("divergence") is not None and url.startswith("http"):
        url += "?replay=1"
    t0 = time.time()
    driver.get(url)
    ready = wait(driver, "window.__viewer && window.__viewer.ready", timeout=240)
    wall = (time.time() - t0) * 1000
    load = driver.execute_script("return window.__viewer ? window.__viewer.loadMs : null")
    report("loaded", ready, "loadMs %s (list %s, timeline %s), wall %.0f ms" % (
        load, driver.execute_script("return __viewer.listMs"), driver.execute_script("return __viewer.timelineMs"), wall))
    if not ready:
        report("console", False, str(driver.get_log("browser")))
        return

    # The first rows.
    got = rows(driver)
    want = case["first"]
    ok = [(r["i"], r["ty"]) for r in got[:len(want)]] == [(w["i"], w["ty"]) for w in want]
    report("first-rows", ok, "got %s, want %s" % ([(r["i"], r["ty"]) for r in got[:len(want)]], [(w["i"], w["ty"]) for w in want]))

    status = driver.find_element(By.ID, "status").text
    report("kind", case["kind"] + " trace" in status, status)

    # Packed timeline rows.
    names = driver.execute_script("return __viewer.rowNames || []")
    r = case.get("rows", {})
    ok = len(names) <= r.get("max", 10**9) and all(any(x == n or x.startswith(n + " ") for x in names) for n in r.get("contains", []))
    report("timeline-rows", ok, "%d rows: %s" % (len(names), names[:12]))
    kinds = driver.execute_script("return __viewer.kindsDrawn()")
    missing = [k for k in case.get("markKinds", []) if k not in kinds]
    report("mark-kinds", not missing, "drawn %s; missing %s" % (sorted(kinds), missing))

    # Filter: / focuses the box; Enter applies it.
    f = case["filter"]
    body = driver.find_element(By.TAG_NAME, "body")
    body.send_keys("/")
    focused = driver.execute_script("return document.activeElement.id")
    box = driver.find_element(By.ID, "filter")
    box.send_keys(f["q"] + Keys.ENTER)
    need = len(f["first"])
    wait(driver, "document.querySelectorAll('#rows .row[data-i]').length >= %d || (window.__viewer && __viewer.filterDone())" % max(1, need), timeout=30)
    if f.get("count") is not None:
        wait(driver, "__viewer.filterDone()", timeout=120)
    got = [x["i"] for x in rows(driver)]
    count = driver.execute_script("return __viewer.matchCount()")
    ok = focused == "filter" and got[:need] == f["first"] and (f.get("count") is None or count == f["count"]) and len(got) > 0
    report("filter", ok, "focus %s, first %s (want %s), %s matches (want %s)" % (focused, got[:need], f["first"], count, f.get("count")))

    # Keyboard in the filtered list: j moves to the next match.
    body.send_keys("j")
    wait(driver, "__viewer.selected === %d" % got[0], timeout=5)
    body.send_keys("j")
    moved = wait(driver, "__viewer.selected === %d" % (got[1] if len(got) > 1 else got[0]), timeout=5)
    body.send_keys("k")
    back = wait(driver, "__viewer.selected === %d" % got[0], timeout=5)
    report("keys-j-k", moved and back, "selected %s" % driver.execute_script("return __viewer.selected"))

    # Esc clears the filter; n then finds the next match in the whole list.
    box.click()
    box.send_keys(Keys.ESCAPE)
    wait(driver, "__viewer.matchCount() === null", timeout=5)
    if len(got) > 1:
        body.send_keys("n")
        nxt = wait(driver, "__viewer.selected === %d" % got[1], timeout=10)
        report("key-n", nxt, "selected %s, want %s" % (driver.execute_script("return __viewer.selected"), got[1]))

    # Click a frame: its JSON in the detail pane.
    c = case["click"]
    driver.execute_script("__viewer.scrollTo(%d)" % c["i"])
    # The list re-renders its rows as pages arrive: find the row again when it is replaced under the click.
    clicked = False
    for _ in range(100):
        els = driver.find_elements(By.CSS_SELECTOR, '#rows .row[data-i="%d"]' % c["i"])
        if els and not driver.find_elements(By.CSS_SELECTOR, "#rows .row.loading"):
            try:
                els[0].click()
                clicked = True
                break
            except StaleElementReferenceException:
                pass
        time.sleep(0.05)
    if not clicked:
        report("click-frame", False, "row %d not shown" % c["i"])
    else:
        shown = wait(driver, "document.getElementById('detail-head').textContent.indexOf('record #%d ') === 0 && document.getElementById('detail-json').textContent.length > 2" % c["i"], timeout=10)
        text = driver.find_element(By.ID, "detail-json").text
        marks = len(driver.find_elements(By.CSS_SELECTOR, "#detail-json mark.redacted"))
        ok = shown and all(s in text for s in c["contains"]) and marks >= c.get("redacted", 0)
        report("click-frame", ok, "record %d (%s): %d chars, %d redaction marks (want >= %d), has %s of %s" % (
            c["i"], driver.find_element(By.ID, "detail-head").text, len(text), marks, c.get("redacted", 0),
            [s for s in c["contains"] if s in text], c["contains"]))

    # Click a mark on the timeline: its frame is selected.
    spot = driver.execute_script("return __viewer.locateMark()")
    if spot:
        canvas = driver.find_element(By.ID, "timeline")
        w = canvas.size["width"]
        h = canvas.size["height"]
        ActionChains(driver).move_to_element_with_offset(canvas, spot["x"] - w / 2, spot["y"] - h / 2).click().perform()
        sel = wait(driver, "__viewer.selected === %d" % spot["record"], timeout=10)
        report("click-mark", sel, "mark of record %d (%s) at %.0f,%.0f; selected %s" % (
            spot["record"], spot["kind"], spot["x"], spot["y"], driver.execute_script("return __viewer.selected")))
    else:
        report("click-mark", False, "no mark to click")

    # Zoom: the tick labels change and get finer, down to milliseconds.
    before = driver.execute_script("return __viewer.ticks.slice()")
    step0 = driver.execute_script("return __viewer.tickStep")
    driver.find_element(By.ID, "zoom-in").click()
    driver.find_element(By.ID, "zoom-in").click()
    wait(driver, "__viewer.tickStep < %r" % step0, timeout=5)
    after = driver.execute_script("return __viewer.ticks.slice()")
    for _ in range(40):
        if driver.execute_script("return __viewer.tickStep") <= 1e7:
            break
        body.send_keys("+")
    fine = driver.execute_script("return __viewer.ticks.slice()")
    step1 = driver.execute_script("return __viewer.tickStep")
    ms_labels = [t for t in fine if not t.endswith(".000")]
    ok = before != after and step1 <= 1e7 and len(ms_labels) > 0 and all(":" in t and "." in t for t in fine)
    report("zoom-ticks", ok, "step %s ns -> %s ns; labels %s -> %s -> %s" % (step0, step1, before[:3], after[:3], fine[:4]))
    body.send_keys("0")
    wait(driver, "__viewer.tickStep === %r" % step0, timeout=5)

    # The divergence of a strict replay.
    if case.get("divergence") is not None:
        d = case["divergence"]
        marked = wait(driver, "__viewer.divergence && __viewer.divergence.record === %d && __viewer.divergenceDrawnAt !== undefined" % d, timeout=90)
        banner = driver.find_element(By.ID, "banner").text
        link = driver.find_elements(By.ID, "goto-divergence")
        if link:
            link[0].click()
        row = wait(driver, "document.querySelector('#rows .row.diverged[data-i=\"%d\"]') !== null" % d, timeout=10)
        report("divergence", marked and row and ("record #%d" % d) in banner, banner[:200])

    if case.get("measure"):
        measure(driver, body)

    if shot:
        driver.execute_script("__viewer.scrollTo(0)")
        time.sleep(0.3)
        driver.save_screenshot(shot)

    severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    errors = driver.execute_script("return __viewer.errors")
    report("console", not severe and not errors, "severe: %s; page errors: %s" % (severe[:3], errors[:3]))


def measure(driver, body):
    """Zooms, pans and scrolls, and reads the draw and refresh times the page measured."""
    driver.execute_script("__viewer.redraws.length = 0; __viewer.refreshes.length = 0;")
    canvas = driver.find_element(By.ID, "timeline")
    for i in range(12):
        driver.execute_script(
            "var c=document.getElementById('timeline');c.dispatchEvent(new WheelEvent('wheel',{deltaY:%d,clientX:c.getBoundingClientRect().left+300+%d,clientY:c.getBoundingClientRect().top+40,bubbles:true,cancelable:true}));" % (-100, i * 20))
        wait(driver, "__viewer.pendingRefresh() === false", timeout=10, interval=0.01)
    for i in range(8):
        ActionChains(driver).move_to_element(canvas).click_and_hold().move_by_offset(-60, 0).release().perform()
        wait(driver, "__viewer.pendingRefresh() === false", timeout=10, interval=0.01)
    body.send_keys("0")
    wait(driver, "__viewer.pendingRefresh() === false", timeout=10, interval=0.01)
    draws = driver.execute_script("return __viewer.redraws.slice()")
    refreshes = driver.execute_script("return __viewer.refreshes.slice()")
    scrolls = []
    total = driver.execute_script("return __viewer.listLength()")
    for k in range(10):
        target = int(total * (k + 1) / 11)
        ms = driver.execute_async_script(
            "var done=arguments[arguments.length-1], t0=performance.now(); __viewer.scrollTo(%d);"
            "(function poll(){ if(document.querySelectorAll('#rows .row.loading').length===0 && document.querySelectorAll('#rows .row[data-i]').length>0) done(performance.now()-t0); else requestAnimationFrame(poll); })();" % target)
        scrolls.append(ms)

    def summary(xs):
        if not xs:
            return None
        xs = sorted(xs)
        return {"n": len(xs), "p50": round(statistics.median(xs), 2), "p90": round(xs[int(len(xs) * 0.9) - 1 if len(xs) > 1 else 0], 2), "max": round(xs[-1], 2)}

    report("timing", True, "", loadMs=driver.execute_script("return __viewer.loadMs"), draw=summary(draws),
           zoomOrPanToFreshData=summary(refreshes), listScroll=summary(scrolls))


if __name__ == "__main__":
    main()
