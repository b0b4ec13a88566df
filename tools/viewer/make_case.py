#!/usr/bin/env python3
"""Writes a browser_checks.py case for a running `relaytrace view` from its own API (for
tools/bench-viewer.sh; the tests compute their expectations from the trace instead).
Usage: make_case.py URL FILTER > case.json"""
import json
import sys
import urllib.parse
import urllib.request

url, query = sys.argv[1], sys.argv[2]


def get(path):
    return json.load(urllib.request.urlopen(url + path))


info = get("api/info")
first = get("api/records?from=0&count=5")["rows"]
found = []
at = 0
while len(found) < 3:
    j = get("api/search?q=%s&from=%d&limit=50" % (urllib.parse.quote(query), at))
    found += j["rows"]
    at = j["next"]
    if j["done"]:
        break
print(json.dumps({
    "url": url, "first": [{"i": r["i"], "ty": r["ty"]} for r in first],
    "filter": {"q": query, "first": [r["i"] for r in found[:3]], "count": None},
    "click": {"i": min(3, info["records"] - 1), "contains": ['"kind": "' + first[min(3, len(first) - 1)]["k"] + '"'], "redacted": 0},
    "divergence": None, "kind": info["kind"], "rows": {}, "markKinds": [], "measure": True,
}))
