#!/usr/bin/env python3
"""A python `websockets` (17.x) server for the Swift client interop tests (Tests/NetTests/InteropTests.swift).

Binds 127.0.0.1 on an ephemeral port, prints the port on the first line of stdout, and exits by itself
after --timeout seconds, or as soon as its standard input reaches end of file (the test closed it or died). TLS when --cert and --key are given. Paths (query parameters in brackets):

  /echo[?id=ID]                   echoes every message with its type; remembers the client's close as ID
  /fragments?count=N&size=S       sends text "f0000..." in N fragments of S characters each, then binary
                                  bytes(i % 256) in N fragments of S bytes, then echoes
  /ping[?id=ID]                   pings with b"interop-ping", waits for the pong (5 s), sends text
                                  "pong received", then echoes
  /close?code=C&reason=R          closes with code C and reason R
  /big?size=N[&id=ID]             sends one binary message of N bytes (over max_size: the client fails
                                  with 1009), then echoes; remembers the client's close as ID
  /last-close?of=ID               sends "CODE REASON" of the close the client with ID sent (waits up to
                                  5 s for it), then closes 1000

max_size is 32 MiB, as for the relay; compression and keepalive pings are off so bytes are predictable.
"""

import argparse
import asyncio
import signal
import ssl
import sys
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

MAX_SIZE = 32 * 1024 * 1024

closes = {}  # id -> (code, reason) of the close frame the client sent
close_events = {}  # id -> asyncio.Event set when closes[id] is known


def event_for(ident):
    if ident not in close_events:
        close_events[ident] = asyncio.Event()
    return close_events[ident]


def remember_close(ws, ident):
    if ident is None:
        return
    rcvd = ws.protocol.close_rcvd
    closes[ident] = (rcvd.code, rcvd.reason) if rcvd is not None else (1006, "")
    event_for(ident).set()


async def echo(ws):
    async for message in ws:
        await ws.send(message)


async def handler(ws):
    url = urlsplit(ws.request.path)
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    ident = query.get("id")
    try:
        if url.path == "/echo":
            await echo(ws)
        elif url.path == "/fragments":
            count, size = int(query["count"]), int(query["size"])
            await ws.send([f"f{i:04d}".ljust(size, "x")[:size] for i in range(count)])
            await ws.send([bytes([i % 256]) * size for i in range(count)])
            await echo(ws)
        elif url.path == "/ping":
            pong = await ws.ping(b"interop-ping")
            await asyncio.wait_for(pong, 5)
            await ws.send("pong received")
            await echo(ws)
        elif url.path == "/close":
            await ws.close(int(query["code"]), query.get("reason", ""))
        elif url.path == "/big":
            await ws.send(b"\x5a" * int(query["size"]))
            await echo(ws)
        elif url.path == "/last-close":
            await asyncio.wait_for(event_for(query["of"]).wait(), 5)
            code, reason = closes[query["of"]]
            await ws.send(f"{code} {reason}")
            await ws.close(1000)
        else:
            await ws.close(4404, "unknown path")
    except ConnectionClosed:
        pass
    finally:
        await ws.wait_closed()
        remember_close(ws, ident)


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cert", help="PEM certificate chain (enables TLS)")
    parser.add_argument("--key", help="PEM private key")
    parser.add_argument("--timeout", type=float, default=120, help="exit after this many seconds")
    args = parser.parse_args()
    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
    async with serve(handler, "127.0.0.1", 0, ssl=context, max_size=MAX_SIZE, compression=None,
                     ping_interval=None, close_timeout=5) as server:
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        # Standard input at EOF ends the server: read it in a thread so the event loop keeps serving.
        stdin_closed = asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
        try:
            await asyncio.wait_for(stdin_closed, args.timeout)
        except asyncio.TimeoutError:
            pass


if __name__ == "__main__":
    # A parent may spawn us with signals blocked (Foundation's Process does): let SIGTERM/SIGINT work.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
