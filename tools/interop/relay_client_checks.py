#!/usr/bin/env python3
"""Python `websockets` (17.x, asyncio client API) checks against `relaytrace relay`.

Usage: relay_client_checks.py URL [--ca-file PEM] [--only NAME ...] [--list] [--timeout SECONDS]

URL is the relay's device-link URL as `relaytrace relay` prints it (ws://127.0.0.1:PORT/ws/device-link,
or wss://... with --ca-file naming the PEM certificate to trust). Runs every check (or the --only ones)
one after another and prints one JSON line per check:

    {"check": "register", "ok": true, "detail": "...", "ms": 12}

then exits 0 when every check passed, 1 when any failed, 2 on bad arguments. Each check has its own
deadline (--timeout, default 10 s) so nothing hangs: a check that times out fails with detail "timeout".

The relay is the development relay (PROTOCOL.md): the bearer is an unsigned JWT whose payload claims
`sub` (the user), `device_id` (== X-Device-ID lower-cased) and `tbh` (base64url SHA-256 of
X-Token-Binding). The relay simulates whatever desktop a phone names for whatever account it has, so
every check uses its own random account, phone and desktop IDs (checks do not replace each other's
sockets, except `replaced-by-same-device`, which does so on purpose). With --offline-desktop ID (the
relay runs with `--offline ID`), the `offline-desktop` check expects -32010 from that desktop only.
"""

import argparse
import asyncio
import base64
import hashlib
import json
import re
import ssl
import sys
import time
import uuid

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

USER_ID = "user-dev"
MAX_SIZE = 32 * 1024 * 1024
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
ALNUM = re.compile(r"^[A-Za-z0-9]+$")


class CheckFailed(Exception):
    """A check's expectation did not hold; the message says what was expected and what came."""


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jwt_for(device_id, binding, user=USER_ID):
    """An unsigned development JWT with the claims the relay checks."""
    header = b64url(json.dumps({"alg": "none", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"sub": user, "device_id": device_id, "tbh": b64url(hashlib.sha256(binding.encode()).digest())}
    payload = b64url(json.dumps(claims, separators=(",", ":")).encode())
    return f"{header}.{payload}.dev"


class Phone:
    """One phone identity: a fresh device ID and token binding, of a random account, targeting a random
    desktop (or the ones given)."""

    def __init__(self, user=None, desktop=None):
        self.device_id = str(uuid.uuid4())
        self.binding = f"binding-{self.device_id}"
        self.user = user or f"auth0|{uuid.uuid4().hex[:12]}"
        self.desktop = desktop or str(uuid.uuid4())
        self.overrides = {}  # headers sent instead of the right ones (refusal checks)

    def headers(self, bearer=True):
        h = {
            "X-Device-ID": self.device_id,
            "X-Token-Binding": self.binding,
            "X-Client-Type": "mobile",
            "X-Target-Desktop-Device-ID": self.desktop,
        }
        if bearer:
            h["Authorization"] = f"Bearer {jwt_for(self.device_id, self.binding, self.user)}"
        h.update(self.overrides)
        return h

    def register(self, session_id=None, token=None):
        payload = {
            "deviceId": self.device_id,
            "deviceName": "python websockets interop",
            "relayProtocolVersion": "1.6",
            "targetDesktopDeviceId": self.desktop,
        }
        if session_id is not None:
            payload["relaySessionId"] = session_id
        if token is not None:
            payload["resumeToken"] = token
        return json.dumps({"type": "register", "payload": payload}, separators=(",", ":"))


class Context:
    def __init__(self, url, ssl_context, timeout, offline_desktop=None):
        self.url = url
        self.ssl = ssl_context
        self.timeout = timeout
        self.offline_desktop = offline_desktop

    def connect(self, phone, bearer=True, url=None, ssl_context=None):
        kwargs = dict(
            additional_headers=phone.headers(bearer),
            max_size=MAX_SIZE,
            compression=None,
            ping_interval=None,
            open_timeout=self.timeout,
            close_timeout=self.timeout,
        )
        if (url or self.url).startswith("wss:"):
            kwargs["ssl"] = ssl_context or self.ssl
        return connect(url or self.url, **kwargs)


async def recv_json(ws, timeout):
    """The next text message as JSON (binary frames are refused)."""
    message = await asyncio.wait_for(ws.recv(), timeout)
    expect(isinstance(message, str), f"expected a text frame, got binary of {len(message)} bytes")
    try:
        return json.loads(message)
    except ValueError as e:
        raise CheckFailed(f"the relay sent invalid JSON: {e}: {message[:200]!r}")


async def recv_type(ws, wanted, timeout, skip=("event",)):
    """The next message whose type is in `wanted`, skipping relay/desktop `event`s (they may come any time)."""
    while True:
        m = await recv_json(ws, timeout)
        t = m.get("type")
        if t in wanted:
            return m
        expect(t in skip, f"expected {'/'.join(wanted)}, got {json.dumps(m)[:300]}")


async def register(ws, phone, session_id=None, token=None, timeout=10):
    await ws.send(phone.register(session_id, token))
    return await recv_type(ws, ("registered", "resumed", "error"), timeout)


def check_registered(m):
    expect(m.get("type") == "registered", f"expected registered, got {json.dumps(m)[:300]}")
    sid, token = m.get("sessionId"), m.get("resumeToken")
    expect(isinstance(sid, str) and len(sid) == 32 and ALNUM.match(sid), f"sessionId {sid!r} is not 32 [A-Za-z0-9]")
    expect(isinstance(token, str) and len(token) == 48 and ALNUM.match(token), f"resumeToken is not 48 [A-Za-z0-9] (length {len(token or '')})")
    expect(m.get("relaySessionId") == sid, f"1.6 relaySessionId {m.get('relaySessionId')!r} != sessionId {sid!r}")
    expect(isinstance(m.get("expiresAt"), str), "registered has no expiresAt")
    return sid, token


async def expect_error(ws, code, timeout):
    m = await recv_type(ws, ("error",), timeout)
    expect(m.get("code") == code, f"expected error {code}, got {m.get('code')!r}: {m.get('message')!r}")
    expect(isinstance(m.get("message"), str) and m["message"], "error without a message")
    expect(isinstance(m.get("timestamp"), str), "error without a timestamp")
    return m


async def expect_still_open(ws, timeout):
    """The socket still answers: heartbeat -> pong."""
    await ws.send('{"type":"heartbeat","payload":{}}')
    await recv_type(ws, ("pong",), timeout)


async def expect_closed(ws, timeout):
    """Waits for the relay to close `ws`; returns the close frame received (None when none came)."""
    try:
        while True:
            await asyncio.wait_for(ws.recv(), timeout)
    except ConnectionClosed as e:
        return e.rcvd


def rpc(method, request_id, params=None, traceparent=TRACEPARENT):
    payload = {"id": request_id, "method": method, "params": params or {}}
    if traceparent:
        payload["traceparent"] = traceparent
    return json.dumps({"type": "rpc.request", "payload": payload}, separators=(",", ":"))


async def expect_rpc_response(ws, request_id, timeout):
    m = await recv_type(ws, ("rpc.response",), timeout)
    p = m.get("payload") or {}
    expect(p.get("id") == request_id, f"response id {p.get('id')!r} != {request_id!r}")
    expect(p.get("error") is None, f"RPC error {p.get('error')!r}")
    expect(p.get("isFinal") is True, "response is not isFinal")
    expect("clientId" not in p, "the relay left the desktop's clientId in the response")
    tp = p.get("traceparent")
    expect(isinstance(tp, str) and tp.split("-")[1:2] == [TRACE_ID], f"response traceparent {tp!r} does not carry trace ID {TRACE_ID}")
    return p


# ---------------------------------------------------------------------------------------------------------
# The checks: each is async (ctx) -> detail string, raising CheckFailed (or anything) on failure.

async def c_register(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        sid, _ = check_registered(await register(ws, phone))
    return f"registered {sid}"


async def c_resume(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        sid, token = check_registered(await register(ws, phone))
        await ws.close()
    async with ctx.connect(phone) as ws:
        m = await register(ws, phone, sid, token)
        expect(m.get("type") == "resumed", f"expected resumed, got {json.dumps(m)[:300]}")
        expect(m.get("sessionId") == sid, f"resumed sessionId {m.get('sessionId')!r} != {sid!r}")
        expect("resumeToken" not in m, "resumed carries a resumeToken: the token must not rotate on resume")
        expect(isinstance(m.get("expiresAt"), str), "resumed has no expiresAt")
    return f"resumed {sid} without a new token"


async def c_invalid_resume(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        sid, token = check_registered(await register(ws, phone))
        await ws.close()
    async with ctx.connect(phone) as ws:
        wrong = ("X" if token[0] != "X" else "Y") + token[1:]
        await ws.send(phone.register(sid, wrong))
        await expect_error(ws, "invalidResume", ctx.timeout)
        await expect_still_open(ws, ctx.timeout)
        sid2, _ = check_registered(await register(ws, phone))
        expect(sid2 != sid, "the fresh register reused the old session")
    return f"invalidResume, socket open, then registered {sid2}"


async def c_heartbeat(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        check_registered(await register(ws, phone))
        await ws.send('{"type":"heartbeat","payload":{"activeSessionId":"sess-1"}}')
        m = await recv_type(ws, ("pong",), ctx.timeout)
        expect(m == {"type": "pong"}, f"pong has extra fields: {m}")
    return "pong"


async def c_text_ping(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        check_registered(await register(ws, phone))
        await ws.send('{"type":"ping"}')
        await recv_type(ws, ("pong",), ctx.timeout)
    return "pong"


async def c_snake_case(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        check_registered(await register(ws, phone))
        await ws.send('{"type":"heartbeat","payload":{"active_session_id":"sess-1"}}')
        m = await expect_error(ws, "invalidPayload", ctx.timeout)
        await expect_still_open(ws, ctx.timeout)
    return m["message"]


async def c_unknown_type(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        check_registered(await register(ws, phone))
        await ws.send('{"type":"noSuchType","payload":{}}')
        m = await expect_error(ws, "unknownMessageType", ctx.timeout)
        await expect_still_open(ws, ctx.timeout)
    return m["message"]


async def c_invalid_json(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        check_registered(await register(ws, phone))
        await ws.send('{"type":"heartbeat",')
        m = await expect_error(ws, "invalidJson", ctx.timeout)
        await expect_still_open(ws, ctx.timeout)
    return m["message"]


async def c_rpc(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        check_registered(await register(ws, phone))
        details = []
        for method in ("system.ping", "session.list"):
            request_id = str(uuid.uuid4()).upper()
            await ws.send(rpc(method, request_id, {"projectDirectory": "/tmp/p"} if method == "session.list" else {}))
            p = await expect_rpc_response(ws, request_id, ctx.timeout)
            expect("result" in p, f"{method} response has no result")
            details.append(f"{method} -> {type(p['result']).__name__}")
    return ", ".join(details) + f", trace ID {TRACE_ID} echoed"


async def c_rpc_fragmented(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        check_registered(await register(ws, phone))
        request_id = str(uuid.uuid4()).upper()
        text = rpc("system.ping", request_id)
        pieces = [text[i:i + 7] for i in range(0, len(text), 7)]
        # An iterable of str: websockets sends one text frame followed by continuation frames.
        await ws.send(pieces)
        await expect_rpc_response(ws, request_id, ctx.timeout)
    return f"system.ping in {len(pieces)} fragments answered"


async def c_rpc_before_register(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        await ws.send(rpc("system.ping", "R-early"))
        m = await expect_error(ws, "authRequired", ctx.timeout)
        check_registered(await register(ws, phone))
    return m["message"]


async def c_binary_ignored(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        check_registered(await register(ws, phone))
        # PTC1 goes desktop -> phone only: the relay drops a phone's binary frame and keeps the socket.
        await ws.send(b"PTC1\x00\x02t1hello")
        await expect_still_open(ws, ctx.timeout)
    return "dropped, socket open"


async def c_event_replay(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        payload = json.loads(phone.register())
        payload["payload"]["lastEventId"] = 0
        await ws.send(json.dumps(payload))
        check_registered(await recv_type(ws, ("registered",), ctx.timeout, skip=()))
        # The relay brings the phone's desktop up (simulated) and announces it: device-status online.
        while True:
            m = await recv_type(ws, ("event",), ctx.timeout, skip=())
            p = m.get("payload") or {}
            if p.get("eventType") == "device-status" and (p.get("payload") or {}).get("deviceId") == phone.desktop:
                break
        expect(isinstance(m.get("eventId"), int) and m["eventId"] >= 1, f"event has no eventId: {m}")
        expect(m.get("sourceDeviceId") == phone.desktop, f"sourceDeviceId {m.get('sourceDeviceId')!r} is not the desktop")
        expect(isinstance(m.get("timestamp"), str), "event without a timestamp")
        first = m["eventId"]
        await ws.close()
    # A second socket registering with lastEventId 0 gets the buffered event replayed.
    async with ctx.connect(phone) as ws:
        payload = json.loads(phone.register())
        payload["payload"]["lastEventId"] = 0
        await ws.send(json.dumps(payload))
        check_registered(await recv_type(ws, ("registered",), ctx.timeout, skip=()))
        m = await recv_type(ws, ("event",), ctx.timeout, skip=())
        expect(m.get("eventId") == first, f"replayed eventId {m.get('eventId')!r}, expected {first}")
    return f"device-status {p['payload'].get('status')} as eventId {first}, replayed above 0"


async def c_offline_desktop(ctx):
    if not ctx.offline_desktop:
        return "skipped: no --offline-desktop"
    offline, online = Phone(desktop=ctx.offline_desktop), Phone()
    async with ctx.connect(offline) as ws:
        check_registered(await register(ws, offline))
        await ws.send(rpc("system.ping", "R-offline"))
        m = await recv_type(ws, ("rpc.response",), ctx.timeout)
        err = (m.get("payload") or {}).get("error") or {}
        expect(err.get("code") == -32010, f"expected -32010 from {ctx.offline_desktop}, got {json.dumps(m)[:300]}")
        expect(err.get("message") == "Desktop is offline", f"message {err.get('message')!r}")
    async with ctx.connect(online) as ws:
        check_registered(await register(ws, online))
        await ws.send(rpc("system.ping", "R-online"))
        await expect_rpc_response(ws, "R-online", ctx.timeout)
    return f"{ctx.offline_desktop}: -32010 Desktop is offline; another desktop answered"


async def c_too_big(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        check_registered(await register(ws, phone))
        try:
            await ws.send(" " * (MAX_SIZE + 1))
        except ConnectionClosed:
            pass  # the relay may close before python has written all of it
        rcvd = await expect_closed(ws, ctx.timeout)
        expect(rcvd is not None, "the socket ended without a close frame")
        expect(rcvd.code == 1009, f"expected close 1009 (message too big), got {rcvd.code} {rcvd.reason!r}")
    return f"closed {rcvd.code} {rcvd.reason!r}"


async def c_ws_ping(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        check_registered(await register(ws, phone))
        pong = await ws.ping(b"python-ping")
        latency = await asyncio.wait_for(pong, ctx.timeout)
    return f"pong after {latency * 1000:.1f} ms"


async def close_with(ctx, code, rounds=12):
    # Several sockets, each closed right after the relay wrote `registered`: the relay must echo the close
    # frame even when it arrives while the relay's send still holds the socket's write lock (it lost the
    # echo about one time in four before that was fixed).
    for _ in range(rounds):
        phone = Phone()
        async with ctx.connect(phone) as ws:
            check_registered(await register(ws, phone))
            await ws.close(code=code, reason="python bye")
            await asyncio.wait_for(ws.wait_closed(), ctx.timeout)
            rcvd = ws.protocol.close_rcvd
            expect(rcvd is not None, f"the relay did not answer our close frame ({code}) on device {phone.device_id}")
            expect(rcvd.code == code, f"the relay answered close {code} with {rcvd.code}")
    return f"{rounds} sockets closed {code}, each echoed"


async def c_close_1000(ctx):
    return await close_with(ctx, 1000)


async def c_close_4001(ctx):
    return await close_with(ctx, 4001)


async def c_replaced_by_same_device(ctx):
    phone = Phone()
    async with ctx.connect(phone) as first:
        check_registered(await register(first, phone))
        async with ctx.connect(phone) as second:
            rcvd = await expect_closed(first, ctx.timeout)
            expect(rcvd is not None, "the first socket ended without a close frame")
            # An empty close frame is reported as 1005 (no status received).
            expect(rcvd.code == 1005 and rcvd.reason == "", f"expected an empty close frame, got {rcvd.code} {rcvd.reason!r}")
            check_registered(await register(second, phone))
    return "the first socket got an empty close frame; the second registered"


async def c_double_register(ctx):
    phone = Phone()
    async with ctx.connect(phone) as ws:
        check_registered(await register(ws, phone))
        await ws.send(phone.register())
        rcvd = await expect_closed(ws, ctx.timeout)
        expect(rcvd is not None, "the socket ended without a close frame")
        expect(rcvd.code == 1008, f"expected close 1008 (policy violation), got {rcvd.code} {rcvd.reason!r}")
    return f"closed {rcvd.code} {rcvd.reason!r}"


async def refused(ctx, phone, bearer=True, url=None):
    try:
        async with ctx.connect(phone, bearer=bearer, url=url):
            pass
    except InvalidStatus as e:
        return e.response.status_code, e.response.body.decode("utf-8", "replace") if e.response.body else ""
    raise CheckFailed("the upgrade was accepted")


async def c_missing_bearer(ctx):
    status, body = await refused(ctx, Phone(), bearer=False)
    expect(status == 401, f"expected HTTP 401, got {status}: {body}")
    return f"HTTP 401: {body.strip()}"


async def c_wrong_binding(ctx):
    phone = Phone()
    phone.overrides["X-Token-Binding"] = "another-binding"  # the JWT's tbh is SHA-256 of the right one
    status, body = await refused(ctx, phone)
    expect(status == 401, f"expected HTTP 401, got {status}: {body}")
    return f"HTTP 401: {body.strip()}"


async def c_wrong_path(ctx):
    url = ctx.url.rsplit("/ws/", 1)[0] + "/nowhere"
    status, body = await refused(ctx, Phone(), url=url)
    expect(status == 404, f"expected HTTP 404, got {status}: {body}")
    return f"HTTP 404: {body.strip()}"


async def c_tls_untrusted(ctx):
    if not ctx.url.startswith("wss:"):
        return "skipped: plain ws"
    untrusted = ssl.create_default_context()  # the system store does not know the test certificate
    try:
        async with ctx.connect(Phone(), ssl_context=untrusted):
            pass
    except ssl.SSLCertVerificationError as e:
        return f"refused: {e.verify_message}"
    raise CheckFailed("the handshake succeeded without trusting the test certificate")


CHECKS = [
    ("register", c_register),
    ("resume", c_resume),
    ("invalid-resume", c_invalid_resume),
    ("heartbeat", c_heartbeat),
    ("text-ping", c_text_ping),
    ("snake-case", c_snake_case),
    ("unknown-type", c_unknown_type),
    ("invalid-json", c_invalid_json),
    ("rpc", c_rpc),
    ("rpc-fragmented", c_rpc_fragmented),
    ("rpc-before-register", c_rpc_before_register),
    ("binary-ignored", c_binary_ignored),
    ("event-replay", c_event_replay),
    ("offline-desktop", c_offline_desktop),
    ("ws-ping", c_ws_ping),
    ("too-big", c_too_big),
    ("close-1000", c_close_1000),
    ("close-4001", c_close_4001),
    ("replaced-by-same-device", c_replaced_by_same_device),
    ("double-register", c_double_register),
    ("missing-bearer", c_missing_bearer),
    ("wrong-binding", c_wrong_binding),
    ("wrong-path", c_wrong_path),
    ("tls-untrusted", c_tls_untrusted),
]


async def run(args):
    ssl_context = None
    if args.url.startswith("wss:"):
        ssl_context = ssl.create_default_context(cafile=args.ca_file) if args.ca_file else ssl.create_default_context()
    ctx = Context(args.url, ssl_context, args.timeout, args.offline_desktop)
    selected = [c for c in CHECKS if not args.only or c[0] in args.only]
    failures = 0
    for name, check in selected:
        started = time.monotonic()
        try:
            # The check's own deadline, plus slack for the closes inside it.
            detail = await asyncio.wait_for(check(ctx), args.timeout * 3)
            ok = True
        except asyncio.TimeoutError:
            ok, detail = False, "timeout"
        except Exception as e:  # any failure is reported, never raised: the next checks still run
            ok, detail = False, f"{type(e).__name__}: {e}"
        failures += 0 if ok else 1
        line = {"check": name, "ok": ok, "detail": detail, "ms": round((time.monotonic() - started) * 1000)}
        print(json.dumps(line), flush=True)
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", help="ws://HOST:PORT/ws/device-link or wss://...")
    parser.add_argument("--ca-file", help="PEM certificate(s) to trust for wss")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these checks")
    parser.add_argument("--list", action="store_true", help="print the check names and exit")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per wait (default 10)")
    parser.add_argument("--offline-desktop", metavar="ID", help="a desktop the relay runs --offline with (-32010 expected)")
    args = parser.parse_args()
    names = [n for n, _ in CHECKS]
    if args.list:
        print("\n".join(names))
        return 0
    if not args.url or not re.match(r"^wss?://", args.url):
        parser.error("give the relay URL (ws://... or wss://...)")
    unknown = [n for n in args.only or [] if n not in names]
    if unknown:
        parser.error(f"unknown check(s) {', '.join(unknown)}; --list shows them")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
