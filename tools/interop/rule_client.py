#!/usr/bin/env python3
"""A python `websockets` (17.x) device-link client that keeps or breaks the SPEC's wire rules on purpose.

Usage: rule_client.py URL --mode well|broken [--ca-file PEM] [--heartbeat SECONDS] [--timeout SECONDS]

It is a client RelayTrace did not write, for the `relaytrace check` tests: recorded through
`relaytrace relay --record`, its trace must pass `check` in mode `well` and be caught on each broken rule
in mode `broken`. Every session uses its own phone (a fresh device ID of user-dev, targeting the
development relay's simulated desktop), so the sessions are independent pairs.

mode well (one after another):
  steady    register, a keyed session.update with traceparent, heartbeat 5 s after `registered`, close 1001
  resume    a new socket resuming with the session and token that `steady` was issued, close 1001
  refused   register with a stale session and token: on invalidResume, register again 0.2 s later without
            them; a system.ping; close 1001

mode broken (at the same time), one mistake each:
  heartbeat      the first heartbeat --heartbeat seconds (default 7) after `registered`    (A6.heartbeat)
  traceparent    a system.ping without traceparent                                         (A8.traceparent)
  snake          a session.get whose params hold the key session_id                       (A8.camelCase)
  key            a session.update without idempotencyKey                                  (A8.idempotencyKey)
  token          after invalidResume, the re-register keeps the refused session and token  (A7.reRegister)
  method         an rpc.request for system.pong, a method the catalogue does not have      (A8.method)

Prints one JSON line per session ({"session": NAME, "ok": true|false, "detail": ...}) and exits 0 when
every session ran as scripted, 1 otherwise, 2 on bad arguments.
"""

import argparse
import asyncio
import base64
import hashlib
import json
import ssl
import sys
import time
import uuid

from websockets.asyncio.client import connect

USER_ID = "user-dev"
DESKTOP_ID = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"
STALE_SESSION = "STALEsession0123456789abcdefABCD"
STALE_TOKEN = "STALEtokenSTALEtokenSTALEtokenSTALEtokenSTALEtok"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class Phone:
    """One phone of user-dev: its X-Token-Binding is its device ID (SPEC A4)."""

    def __init__(self):
        self.device_id = str(uuid.uuid4())
        header = b64url(json.dumps({"alg": "none", "typ": "JWT"}, separators=(",", ":")).encode())
        claims = {"sub": USER_ID, "device_id": self.device_id,
                  "tbh": b64url(hashlib.sha256(self.device_id.encode()).digest())}
        self.jwt = f"{header}.{b64url(json.dumps(claims, separators=(',', ':')).encode())}.dev"

    def headers(self):
        return [("Authorization", f"Bearer {self.jwt}"), ("X-Device-ID", self.device_id),
                ("X-Token-Binding", self.device_id), ("X-Client-Type", "mobile"),
                ("X-Target-Desktop-Device-ID", DESKTOP_ID)]

    def register(self, session=None, token=None):
        payload = {"deviceId": self.device_id, "deviceName": "python phone", "relayProtocolVersion": "1.6",
                   "targetDesktopDeviceId": DESKTOP_ID}
        if session and token:
            payload["relaySessionId"] = session
            payload["resumeToken"] = token
        return json.dumps({"type": "register", "payload": payload}, separators=(",", ":"))


def traceparent():
    return f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"


def request(method, params, key=True, trace=True):
    rid = str(uuid.uuid4()).upper()
    payload = {"id": rid, "method": method, "params": params}
    if key:
        payload["idempotencyKey"] = rid
    if trace:
        payload["traceparent"] = traceparent()
    return rid, json.dumps({"type": "rpc.request", "payload": payload}, separators=(",", ":"))


class Client:
    def __init__(self, args):
        self.url = args.url
        self.timeout = args.timeout
        self.heartbeat = args.heartbeat
        self.ssl = None
        if self.url.startswith("wss:"):
            self.ssl = ssl.create_default_context(cafile=args.ca_file) if args.ca_file else ssl.create_default_context()
        self.issued = None

    def open(self, phone):
        return connect(self.url, additional_headers=phone.headers(), compression=None, ssl=self.ssl,
                       max_size=32 * 1024 * 1024, open_timeout=self.timeout)

    async def until(self, ws, predicate):
        """Reads messages until one satisfies `predicate` (JSON objects); returns it."""
        while True:
            raw = await asyncio.wait_for(ws.recv(), self.timeout)
            if isinstance(raw, bytes):
                continue
            msg = json.loads(raw)
            if predicate(msg):
                return msg

    async def registered(self, ws):
        return await self.until(ws, lambda m: m.get("type") in ("registered", "resumed", "error"))

    async def answer(self, ws, rid):
        def is_answer(m):
            p = m.get("payload") if isinstance(m.get("payload"), dict) else m
            return (m.get("type") == "rpc.response" and p.get("id") == rid) or m.get("type") == "error"
        return await self.until(ws, is_answer)

    async def call(self, ws, method, params, key=True, trace=True):
        rid, text = request(method, params, key, trace)
        await ws.send(text)
        return await self.answer(ws, rid)

    async def invalid_resume_then(self, ws, phone, keep):
        """Registers with stale credentials; after invalidResume re-registers 0.2 s later (keeping them if
        `keep`, then once more without them); returns the registration."""
        await ws.send(phone.register(STALE_SESSION, STALE_TOKEN))
        reply = await self.registered(ws)
        if reply.get("type") != "error" or reply.get("code") != "invalidResume":
            raise RuntimeError(f"expected invalidResume, got {reply}")
        if keep:
            await asyncio.sleep(0.2)
            await ws.send(phone.register(STALE_SESSION, STALE_TOKEN))
            reply = await self.registered(ws)
            if reply.get("code") != "invalidResume":
                raise RuntimeError(f"expected a second invalidResume, got {reply}")
        await asyncio.sleep(0.2)
        await ws.send(phone.register())
        reply = await self.registered(ws)
        if reply.get("type") != "registered":
            raise RuntimeError(f"expected registered, got {reply}")
        return reply

    async def registered_socket(self, phone, body):
        async with self.open(phone) as ws:
            await ws.send(phone.register())
            reply = await self.registered(ws)
            if reply.get("type") != "registered":
                raise RuntimeError(f"expected registered, got {reply}")
            await body(ws, reply, time.monotonic())
            await ws.close(1001, "bye")

    # mode well

    async def steady(self, phone):
        async def body(ws, reply, t0):
            self.issued = (reply.get("relaySessionId") or reply.get("sessionId"), reply.get("resumeToken"))
            await self.call(ws, "session.update", {"sessionId": "sess-1", "updateData": {"name": "Refactor"}})
            await asyncio.sleep(max(0, t0 + 5.0 - time.monotonic()))
            await ws.send(json.dumps({"type": "heartbeat", "payload": {}}))
            await self.until(ws, lambda m: m.get("type") == "pong")
        await self.registered_socket(phone, body)

    async def resume(self, phone):
        session, token = self.issued
        async with self.open(phone) as ws:
            await ws.send(phone.register(session, token))
            reply = await self.registered(ws)
            if reply.get("type") != "resumed":
                raise RuntimeError(f"expected resumed, got {reply}")
            await ws.close(1001, "bye")

    async def refused(self, phone):
        async with self.open(phone) as ws:
            await self.invalid_resume_then(ws, phone, keep=False)
            await self.call(ws, "system.ping", {}, key=False)
            await ws.close(1001, "bye")

    # mode broken

    async def late_heartbeat(self, phone):
        async def body(ws, reply, t0):
            await asyncio.sleep(max(0, t0 + self.heartbeat - time.monotonic()))
            await ws.send(json.dumps({"type": "heartbeat", "payload": {}}))
            await self.until(ws, lambda m: m.get("type") == "pong")
        await self.registered_socket(phone, body)

    async def no_traceparent(self, phone):
        async def body(ws, reply, t0):
            await self.call(ws, "system.ping", {}, key=False, trace=False)
        await self.registered_socket(phone, body)

    async def snake(self, phone):
        async def body(ws, reply, t0):
            await self.call(ws, "session.get", {"session_id": "sess-1"}, key=False)
        await self.registered_socket(phone, body)

    async def no_key(self, phone):
        async def body(ws, reply, t0):
            await self.call(ws, "session.update", {"sessionId": "sess-1", "updateData": {"name": "x"}}, key=False)
        await self.registered_socket(phone, body)

    async def token_kept(self, phone):
        async with self.open(phone) as ws:
            await self.invalid_resume_then(ws, phone, keep=True)
            await ws.close(1001, "bye")

    async def unknown_method(self, phone):
        async def body(ws, reply, t0):
            await self.call(ws, "system.pong", {}, key=False)
        await self.registered_socket(phone, body)


async def run(name, coro):
    try:
        await coro
        return {"session": name, "ok": True, "detail": ""}
    except Exception as e:  # noqa: BLE001 - every failure is reported as a line
        return {"session": name, "ok": False, "detail": f"{type(e).__name__}: {e}"}


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--mode", choices=["well", "broken"], required=True)
    parser.add_argument("--ca-file")
    parser.add_argument("--heartbeat", type=float, default=7.0)
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()
    c = Client(args)
    results = []
    if args.mode == "well":
        steady = Phone()  # `resume` is the same phone: its socket opens after steady's closed (SPEC A5)
        for name, fn, phone in [("steady", c.steady, steady), ("resume", c.resume, steady), ("refused", c.refused, Phone())]:
            results.append(await run(name, fn(phone)))
            if not results[-1]["ok"]:
                break
    else:
        sessions = [("heartbeat", c.late_heartbeat), ("traceparent", c.no_traceparent), ("snake", c.snake),
                    ("key", c.no_key), ("token", c.token_kept), ("method", c.unknown_method)]
        results = await asyncio.gather(*(run(name, fn(Phone())) for name, fn in sessions))
    for r in results:
        print(json.dumps(r, separators=(",", ":")), flush=True)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
