#!/usr/bin/env python3
"""Load on `relaytrace relay` from many python `websockets` (17.x) clients on loopback, bounded in time.

Usage:
  relay_load.py rpc  URL [--clients N] [--duration S] [--rpc-interval S] [--heartbeat S] [--grace S]
                         [--connect-concurrency N] [--processes P] [--relay-pid PID]
  relay_load.py idle URL [--clients N] [--hold S] [--connect-concurrency N] [--processes P] [--relay-pid PID]

`rpc`: N phones (each its own device ID, user `user-dev`, targeting the simulated desktop) connect and
register; then, all together for S seconds, each sends `heartbeat` every --heartbeat seconds and one
`system.ping` RPC every --rpc-interval seconds (each client at its own random phase). After the sending
window it waits --grace seconds for answers. Every RPC ends as exactly one of: answered (an rpc.response
without error), refused (rpc.response error -32011, the relay's rate limit, or any other error response,
counted apart), or lost (no response by the end). Latency is send to response, per RPC.

`idle`: N phones connect and register, then stay idle (a heartbeat every 30 s keeps them under the
relay's 60 s idle limit) for --hold seconds; with --relay-pid the relay's RSS (VmRSS, VmHWM) and thread
count are read from /proc once all are registered and at the end of the hold.

The clients are spread over --processes python processes (default: 1 per 500 clients, at most 4), so
that the clients' own event loops add little to the latencies they measure.
Prints one JSON object on stdout; exits 0 when the run completed (whatever the figures), 1 when
clients could not connect or register, 2 on bad arguments. Raises its own RLIMIT_NOFILE to the hard
limit (each process holds its clients' sockets).
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from relay_client_checks import MAX_SIZE, Phone  # noqa: E402

from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

RATE_LIMITED_RPC = -32011
TRACE_FMT = "00-{:032x}-{:016x}-01"


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def relay_status(pid):
    """VmRSS/VmHWM (KiB), Threads and CPU seconds (user + system) of the relay, from /proc."""
    if not pid:
        return None
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key + "KiB"] = int(value.split()[0])
                elif key == "Threads":
                    out["threads"] = int(value)
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        out["cpuSeconds"] = round((int(fields[11]) + int(fields[12])) / ticks, 2)
    except OSError as e:
        out["error"] = str(e)
    return out


class Stats:
    def __init__(self):
        self.connected = 0
        self.registered = 0
        self.connect_failures = []
        self.rpc_sent = 0
        self.rpc_answered = 0
        self.rpc_refused = 0
        self.rpc_errors = 0
        self.hb_sent = 0
        self.hb_answered = 0
        self.hb_refused = 0
        self.hb_lost = 0
        self.other_errors = []
        self.closed_early = 0
        self.latencies = []
        self.lost_ids = 0


async def open_phone(url, stats, semaphore, timeout):
    # One account for every phone (the docstring's `user-dev`): one simulated desktop serves them all,
    # as in the measurement; a random account per phone would add a desktop per phone.
    phone = Phone(user="user-dev")
    async with semaphore:
        try:
            ws = await connect(url, additional_headers=phone.headers(), max_size=MAX_SIZE, compression=None,
                               ping_interval=None, open_timeout=timeout, close_timeout=5)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            stats.connect_failures.append(f"connect: {type(e).__name__}: {e}"[:200])
            return None, None
        stats.connected += 1
        try:
            await ws.send(phone.register())
            while True:
                m = json.loads(await asyncio.wait_for(ws.recv(), timeout))
                if m.get("type") == "registered":
                    stats.registered += 1
                    return ws, phone
                if m.get("type") == "error":
                    stats.connect_failures.append(f"register: {m.get('code')}: {m.get('message')}"[:200])
                    await ws.close()
                    return None, None
        except Exception as e:  # noqa: BLE001
            stats.connect_failures.append(f"register: {type(e).__name__}: {e}"[:200])
            await ws.close()
            return None, None


async def reader(ws, stats, pending, hb_pending):
    try:
        async for message in ws:
            now = time.perf_counter()
            if not isinstance(message, str):
                continue
            m = json.loads(message)
            t = m.get("type")
            if t == "rpc.response":
                p = m.get("payload") or {}
                sent = pending.pop(p.get("id"), None)
                if sent is None:
                    continue
                error = p.get("error")
                if error is None:
                    stats.rpc_answered += 1
                    stats.latencies.append(now - sent)
                elif error.get("code") == RATE_LIMITED_RPC:
                    stats.rpc_refused += 1
                else:
                    stats.rpc_errors += 1
                    stats.other_errors.append(f"rpc error {error.get('code')}: {error.get('message')}"[:200])
            elif t == "pong":
                if hb_pending[0] > 0:
                    hb_pending[0] -= 1
                    stats.hb_answered += 1
            elif t == "error":
                if m.get("code") == "rateLimited" and hb_pending[0] > 0:
                    hb_pending[0] -= 1
                    stats.hb_refused += 1
                else:
                    stats.other_errors.append(f"error {m.get('code')}: {m.get('message')}"[:200])
    except ConnectionClosed:
        pass


async def rpc_client(index, ws, stats, start, end, args):
    pending = {}
    hb_pending = [0]
    read_task = asyncio.create_task(reader(ws, stats, pending, hb_pending))
    rng = random.Random(index)
    next_rpc = start + rng.uniform(0, args.rpc_interval)
    next_hb = start + rng.uniform(0, args.heartbeat)
    n = 0
    trace_base = rng.getrandbits(64)
    try:
        while True:
            at = min(next_rpc, next_hb)
            if at >= end:
                break
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if read_task.done():
                stats.closed_early += 1
                break
            if next_rpc <= next_hb:
                n += 1
                request_id = f"{index}-{n}"
                tp = TRACE_FMT.format((trace_base << 32) | n, n)
                text = ('{"type":"rpc.request","payload":{"id":"%s","method":"system.ping","params":{},"traceparent":"%s"}}'
                        % (request_id, tp))
                pending[request_id] = time.perf_counter()
                stats.rpc_sent += 1
                await ws.send(text)
                next_rpc += args.rpc_interval
            else:
                hb_pending[0] += 1
                stats.hb_sent += 1
                await ws.send('{"type":"heartbeat","payload":{}}')
                next_hb += args.heartbeat
    except ConnectionClosed:
        stats.closed_early += 1
    # Answers still in flight get the grace period.
    deadline = end + args.grace
    while (pending or hb_pending[0] > 0) and not read_task.done() and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    stats.lost_ids += len(pending)
    stats.hb_lost += hb_pending[0]
    read_task.cancel()
    try:
        await ws.close()
    except Exception:  # noqa: BLE001
        pass


async def idle_client(ws, stats, end):
    hb_pending = [0]
    read_task = asyncio.create_task(reader(ws, stats, {}, hb_pending))
    try:
        while time.perf_counter() < end:
            await asyncio.sleep(min(30, max(0, end - time.perf_counter())))
            if read_task.done():
                stats.closed_early += 1
                break
            if time.perf_counter() < end:
                hb_pending[0] += 1
                stats.hb_sent += 1
                await ws.send('{"type":"heartbeat","payload":{}}')
    except ConnectionClosed:
        stats.closed_early += 1
    read_task.cancel()


async def run_process(args, count, offset, ready_queue, go_queue):
    stats = Stats()
    semaphore = asyncio.Semaphore(args.connect_concurrency)
    opened = await asyncio.gather(*(open_phone(args.url, stats, semaphore, args.timeout) for _ in range(count)))
    sockets = [ws for ws, _ in opened if ws is not None]
    ready_queue.put((stats.connected, stats.registered))
    # Wait for the common start (every process registered its clients).
    start = await asyncio.get_running_loop().run_in_executor(None, go_queue.get)
    # perf_counter is per-process: convert the shared wall-clock start.
    start_perf = time.perf_counter() + (start - time.time())
    if args.mode == "rpc":
        end_perf = start_perf + args.duration
        await asyncio.gather(*(rpc_client(offset + i, ws, stats, start_perf, end_perf, args) for i, ws in enumerate(sockets)))
    else:
        end_perf = start_perf + args.hold
        await asyncio.gather(*(idle_client(ws, stats, end_perf) for ws in sockets))
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    return stats


def process_main(args, count, offset, ready_queue, go_queue, result_queue):
    raise_fd_limit()
    stats = asyncio.run(run_process(args, count, offset, ready_queue, go_queue))
    result_queue.put(stats.__dict__)


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[k]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["rpc", "idle"])
    p.add_argument("url")
    p.add_argument("--clients", type=int, default=1000)
    p.add_argument("--duration", type=float, default=60.0, help="rpc: seconds of sending")
    p.add_argument("--rpc-interval", type=float, default=1.0)
    p.add_argument("--heartbeat", type=float, default=5.0)
    p.add_argument("--grace", type=float, default=5.0, help="rpc: seconds to wait for answers after sending stops")
    p.add_argument("--hold", type=float, default=10.0, help="idle: seconds to hold the registered connections")
    p.add_argument("--connect-concurrency", type=int, default=200, help="connects in flight per process")
    p.add_argument("--timeout", type=float, default=30.0, help="bound on each connect and register")
    p.add_argument("--processes", type=int, default=0)
    p.add_argument("--relay-pid", type=int, default=0)
    args = p.parse_args()
    if not args.url.startswith("ws://127.0.0.1:") and not args.url.startswith("ws://[::1]:"):
        print("relay_load.py: loopback ws:// URLs only", file=sys.stderr)
        sys.exit(2)
    if args.clients < 1 or args.duration <= 0 or args.rpc_interval <= 0 or args.heartbeat <= 0:
        print("relay_load.py: --clients, --duration, --rpc-interval and --heartbeat must be positive", file=sys.stderr)
        sys.exit(2)
    fd_limit = raise_fd_limit()
    processes = args.processes or min(4, max(1, (args.clients + 499) // 500))
    counts = [args.clients // processes + (1 if i < args.clients % processes else 0) for i in range(processes)]
    ctx = multiprocessing.get_context("fork")
    ready, results = ctx.Queue(), ctx.Queue()
    go = [ctx.Queue() for _ in range(processes)]
    t0 = time.time()
    workers = []
    offset = 0
    for i, count in enumerate(counts):
        w = ctx.Process(target=process_main, args=(args, count, offset, ready, go[i], results))
        w.start()
        workers.append(w)
        offset += count
    connected = registered = 0
    for _ in workers:
        c, r = ready.get(timeout=args.timeout * (1 + args.clients / 100))
        connected += c
        registered += r
    setup_seconds = time.time() - t0
    at_registered = relay_status(args.relay_pid)
    start = time.time() + 0.5
    for q in go:
        q.put(start)
    at_end = None
    if args.mode == "idle":
        time.sleep(max(0.0, start + args.hold * 0.9 - time.time()))
        at_end = relay_status(args.relay_pid)
    merged = Stats()
    for _ in workers:
        d = results.get(timeout=args.duration + args.hold + args.grace + 120)
        for k, v in d.items():
            if isinstance(v, list):
                getattr(merged, k).extend(v)
            else:
                setattr(merged, k, getattr(merged, k) + v)
    for w in workers:
        w.join(10)
    if args.mode == "rpc":
        at_end = relay_status(args.relay_pid)
    lat = sorted(merged.latencies)
    ms = lambda v: None if v is None else round(v * 1000, 2)  # noqa: E731
    report = {
        "mode": args.mode,
        "clients": args.clients,
        "processes": processes,
        "fdLimit": fd_limit,
        "connected": connected,
        "registered": registered,
        "setupSeconds": round(setup_seconds, 1),
        "connectFailures": len(merged.connect_failures),
        "connectFailureSamples": merged.connect_failures[:5],
        "closedEarly": merged.closed_early,
        "relayAtRegistered": at_registered,
        "relayAtEnd": at_end,
    }
    if args.mode == "rpc":
        report.update({
            "durationSeconds": args.duration,
            "rpcSent": merged.rpc_sent,
            "rpcAnswered": merged.rpc_answered,
            "rpcRefused": merged.rpc_refused,
            "rpcOtherErrors": merged.rpc_errors,
            "rpcLost": merged.lost_ids,
            "latencyMs": {"p50": ms(percentile(lat, 0.50)), "p90": ms(percentile(lat, 0.90)),
                          "p99": ms(percentile(lat, 0.99)), "max": ms(lat[-1] if lat else None)},
            "heartbeatsSent": merged.hb_sent,
            "heartbeatsAnswered": merged.hb_answered,
            "heartbeatsRefused": merged.hb_refused,
            "heartbeatsLost": merged.hb_lost,
            "otherErrorSamples": merged.other_errors[:5],
        })
    else:
        report.update({"holdSeconds": args.hold, "heartbeatsSent": merged.hb_sent, "heartbeatsAnswered": merged.hb_answered})
    print(json.dumps(report))
    sys.exit(0 if registered == args.clients else 1)


if __name__ == "__main__":
    main()
