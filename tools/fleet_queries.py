#!/usr/bin/env python3
"""The three fleet queries over one `relaytrace export --format jsonl` of many traces, in DuckDB and in
Spark local mode, read with the explicit schemas of docs/schema/ (docs/COLUMNS.md).

    fleet_queries.py FLEET.jsonl [--engine duckdb|spark|both] [--out RESULTS.json]
                     [--expect-loops FILE] [--expect-gaps FILE]

1. rpc:   RPC latency per method across all traces: responses, p50 and p99 in ms (linear interpolation
          between the closest ranks: DuckDB quantile_cont, Spark percentile).
2. loops: traces with an invalidResume loop: three or more inbound `error` frames with code
          invalidResume within 30 s (SPEC A7: the third inside a rolling 30 s ends the loop).
3. gaps:  heartbeat gaps over 5.5 s: consecutive outbound heartbeats of one trace further apart (the
          client sends one every 5 s while registered), with the generations on both sides.

Prints one JSON object: per engine its results and the seconds it took (load + three queries; Spark's
session start is timed apart). With --engine both, exits 1 when the engines' results differ.
--expect-loops FILE (one trace per line): exit 1 unless exactly these traces have a loop, in every
engine. --expect-gaps FILE: exit 1 unless each of these traces has a heartbeat gap.
"""

import argparse
import json
import os
import sys
import time

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "schema")

# The queries once, with the two dialects' differences as placeholders: JSON member access, the exact
# linear-interpolation quantile. Results are sorted so the engines can be compared row by row.
QUERIES = {
    "rpc": """
        select method, count(*) as responses,
               round({quantile}(latencyMs, 0.5), 6) as p50Ms, round({quantile}(latencyMs, 0.99), 6) as p99Ms
        from fleet
        where kind = 'frameText' and type = 'rpc.response' and latencyMs is not null
        group by method
        order by method
    """,
    "loops": """
        with refusals as (
            select trace, t from fleet
            where kind = 'frameText' and dir = 'in' and type = 'error'
              and {json_string}(payload, '$.code') = 'invalidResume'
        ), windowed as (
            select trace, t, count(*) over (partition by trace order by t range between 30 preceding and current row) as inWindow
            from refusals
        )
        select trace, round(min(t), 6) as loopAt, max(inWindow) as refusals
        from windowed where inWindow >= 3
        group by trace
        order by trace
    """,
    "gaps": """
        with beats as (
            select trace, t, gen,
                   lag(t) over (partition by trace order by t, index) as previousT,
                   lag(gen) over (partition by trace order by t, index) as previousGen
            from fleet
            where kind = 'frameText' and dir = 'out' and type = 'heartbeat'
        )
        select trace, round(t, 6) as t, round(t - previousT, 6) as gapS, previousGen as fromGen, gen as toGen
        from beats
        where previousT is not null and t - previousT > 5.5
        order by trace, t
    """,
}


def duckdb_run(path):
    import duckdb

    started = time.monotonic()
    con = duckdb.connect()
    with open(os.path.join(SCHEMA_DIR, "export.duckdb.sql")) as f:
        con.execute(f.read())
    con.execute("create table fleet as select * from relaytrace_export(?)", [path])
    results = {}
    for name, sql in QUERIES.items():
        results[name] = [list(r) for r in con.execute(sql.format(quantile="quantile_cont", json_string="json_extract_string")).fetchall()]
    rows = con.execute("select count(*), count(distinct trace) from fleet").fetchone()
    return {"seconds": round(time.monotonic() - started, 3), "rows": rows[0], "traces": rows[1], "results": results}


def spark_run(path):
    session_started = time.monotonic()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]").appName("relaytrace-fleet")
        .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4").getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    session_seconds = time.monotonic() - session_started
    started = time.monotonic()
    with open(os.path.join(SCHEMA_DIR, "export.spark.ddl")) as f:
        ddl = f.read().strip()
    # FAILFAST: a row that does not fit the schema is an error, not a row of NULLs.
    df = spark.read.schema(ddl).option("mode", "FAILFAST").json(path).cache()
    df.createOrReplaceTempView("fleet")
    results = {}
    for name, sql in QUERIES.items():
        results[name] = [list(r) for r in spark.sql(sql.format(quantile="percentile", json_string="get_json_object")).collect()]
    rows = spark.sql("select count(*), count(distinct trace) from fleet").collect()[0]
    seconds = time.monotonic() - started
    spark.stop()
    return {"seconds": round(seconds, 3), "sessionSeconds": round(session_seconds, 3), "rows": rows[0], "traces": rows[1], "results": results}


def normalised(results):
    """Results with every number as a float rounded to 6 digits (DuckDB and Spark type counts and
    rounded doubles differently: BIGINT vs int, DOUBLE vs Decimal)."""
    def cell(v):
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        return round(float(v), 6)
    return {name: [[cell(v) for v in row] for row in rows] for name, rows in results.items()}


def lines(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("jsonl")
    p.add_argument("--engine", choices=["duckdb", "spark", "both"], default="duckdb")
    p.add_argument("--out", help="also write the JSON report to this file")
    p.add_argument("--expect-loops", help="the traces that must be exactly the loops' result (one per line)")
    p.add_argument("--expect-gaps", help="traces that must each have a heartbeat gap (one per line)")
    a = p.parse_args()
    report = {}
    if a.engine in ("duckdb", "both"):
        report["duckdb"] = duckdb_run(a.jsonl)
    if a.engine in ("spark", "both"):
        report["spark"] = spark_run(a.jsonl)
    status = 0
    if a.engine == "both":
        same = normalised(report["duckdb"]["results"]) == normalised(report["spark"]["results"])
        report["agree"] = same
        if not same:
            status = 1
    for engine in ("duckdb", "spark"):
        if engine not in report:
            continue
        results = report[engine]["results"] = normalised(report[engine]["results"])
        if a.expect_loops:
            loops = sorted(r[0] for r in results["loops"])
            if loops != sorted(lines(a.expect_loops)):
                print(f"fleet_queries: {engine}: the traces with a loop are not the expected ones", file=sys.stderr)
                status = 1
        if a.expect_gaps:
            missing = set(lines(a.expect_gaps)) - {r[0] for r in results["gaps"]}
            if missing:
                print(f"fleet_queries: {engine}: no heartbeat gap in {sorted(missing)[:5]}", file=sys.stderr)
                status = 1
    text = json.dumps(report, indent=1)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)
    if report.get("agree") is False:
        print("fleet_queries: DuckDB and Spark disagree", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
