#!/usr/bin/env python3
"""A scripted device-link client (python `websockets` 17.x) that prints a transcript of its own traffic.

Usage: wire_client.py URL [--ca-file PEM] [--device-id ID] [--desktop-id ID] [--user ID] [--timeout S]

It is a client RelayTrace did not write, for the wire-trace tests: `relaytrace relay --record` and
`relaytrace proxy -o` must record exactly what it sent and received. It opens three sockets one after
another (so the relay or proxy accepts them in this order: generations 1, 2, 3):

  1. register (new session), heartbeat, system.ping and session.list RPCs with a traceparent, a text
     ping, a WebSocket ping with data "wire-1", a binary frame (the relay ignores a phone's binary), then
     it closes with 1000 "bye";
  2. resume with the session and token of socket 1, one RPC, then it closes with 4001 "second";
  3. register, then a second register on the same socket: the relay closes it (1008).

With --variant the script departs from itself on purpose (for `relaytrace relay --replay` tests):
`different-method` calls session.get instead of session.list on socket 1; `stale-token` resumes socket 2
with a token one character off.

Every message it sends or receives is printed as one JSON line, in order:

  {"socket": 1, "dir": "out", "kind": "text", "text": "{...}"}
  {"socket": 1, "dir": "in", "kind": "text", "text": "{...}"}
  {"socket": 1, "dir": "out", "kind": "binary", "hex": "0001..."}
  {"socket": 1, "dir": "out", "kind": "ping", "hex": "..."}      (a pong came back)
  {"socket": 1, "dir": "out", "kind": "close", "code": 1000, "reason": "bye"}
  {"socket": 3, "dir": "in", "kind": "close", "code": 1008, "reason": "..."}

`dir` is the client's: out = client to relay, in = relay to client (RelayTrace's convention). Messages
the relay sent that the script never read (an event racing the close) are not in the transcript. Exits 0
when the conversation went as expected, 1 (with the reason on stderr) otherwise, 2 on bad arguments.
"""

import argparse
import asyncio
import base64
import hashlib
import json
import ssl
import sys
import uuid

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

MAX_SIZE = 32 * 1024 * 1024


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jwt_for(user, device_id, binding):
    """An unsigned development JWT with the claims the development relay checks."""
    header = b64url(json.dumps({"alg": "none", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"sub": user, "device_id": device_id, "tbh": b64url(hashlib.sha256(binding.encode()).digest())}
    return f"{header}.{b64url(json.dumps(claims, separators=(',', ':')).encode())}.dev"


class Transcript:
    def __init__(self):
        self.lines = []

    def add(self, socket, direction, kind, **fields):
        line = {"socket": socket, "dir": direction, "kind": kind, **fields}
        self.lines.append(line)
        print(json.dumps(line, separators=(",", ":")), flush=True)


class Script:
    def __init__(self, args):
        self.url = args.url
        self.timeout = args.timeout
        self.device_id = (args.device_id or str(uuid.uuid4())).lower()
        self.desktop_id = args.desktop_id
        self.user = args.user
        self.binding = self.device_id  # SPEC A4: X-Token-Binding is the device ID
        self.ssl = None
        if self.url.startswith("wss:"):
            self.ssl = ssl.create_default_context(cafile=args.ca_file) if args.ca_file else ssl.create_default_context()
        self.t = Transcript()
        self.variant = args.variant
        self.trace_id = uuid.uuid4().hex

    def connect(self):
        headers = {
            "Authorization": f"Bearer {jwt_for(self.user, self.device_id, self.binding)}",
            "X-Device-ID": self.device_id,
            "X-Token-Binding": self.binding,
            "X-Client-Type": "mobile",
            "X-Target-Desktop-Device-ID": self.desktop_id,
        }
        kwargs = dict(additional_headers=headers, max_size=MAX_SIZE, compression=None, ping_interval=None,
                      open_timeout=self.timeout, close_timeout=self.timeout)
        if self.ssl:
            kwargs["ssl"] = self.ssl
        return connect(self.url, **kwargs)

    async def send(self, ws, n, message):
        if isinstance(message, str):
            self.t.add(n, "out", "text", text=message)
        else:
            self.t.add(n, "out", "binary", hex=message.hex())
        await ws.send(message)

    async def recv_until(self, ws, n, wanted):
        """Reads (and transcribes) messages until one of type `wanted` arrives; returns it as JSON."""
        while True:
            m = await asyncio.wait_for(ws.recv(), self.timeout)
            if isinstance(m, str):
                self.t.add(n, "in", "text", text=m)
                j = json.loads(m)
                if j.get("type") in wanted:
                    return j
            else:
                self.t.add(n, "in", "binary", hex=m.hex())

    def register(self, session_id=None, token=None):
        payload = {"deviceId": self.device_id, "deviceName": "python wire client", "relayProtocolVersion": "1.6",
                   "targetDesktopDeviceId": self.desktop_id}
        if session_id:
            payload["relaySessionId"] = session_id
            payload["resumeToken"] = token
        return json.dumps({"type": "register", "payload": payload}, separators=(",", ":"))

    def rpc(self, method, params=None):
        span = uuid.uuid4().hex[:16]
        payload = {"id": str(uuid.uuid4()).upper(), "method": method, "params": params or {},
                   "traceparent": f"00-{self.trace_id}-{span}-01"}
        return payload["id"], json.dumps({"type": "rpc.request", "payload": payload}, separators=(",", ":"))

    async def call(self, ws, n, method, params=None):
        request_id, text = self.rpc(method, params)
        await self.send(ws, n, text)
        while True:
            m = await self.recv_until(ws, n, ("rpc.response",))
            if (m.get("payload") or {}).get("id") == request_id:
                return m

    async def close(self, ws, n, code, reason):
        self.t.add(n, "out", "close", code=code, reason=reason)
        await ws.close(code, reason)

    async def run(self):
        # Socket 1: a session, its traffic, a clean close.
        async with self.connect() as ws:
            await self.send(ws, 1, self.register())
            reg = await self.recv_until(ws, 1, ("registered",))
            session_id, token = reg["sessionId"], reg["resumeToken"]
            await self.send(ws, 1, '{"type":"heartbeat","payload":{}}')
            await self.recv_until(ws, 1, ("pong",))
            await self.call(ws, 1, "system.ping")
            if self.variant == "different-method":
                await self.call(ws, 1, "session.get", {"sessionId": "sess-sim-1"})
            else:
                await self.call(ws, 1, "session.list", {"projectDirectory": "/tmp/wire"})
            await self.send(ws, 1, '{"type":"ping"}')
            await self.recv_until(ws, 1, ("pong",))
            self.t.add(1, "out", "ping", hex=b"wire-1".hex())
            pong = await ws.ping(b"wire-1")
            await asyncio.wait_for(pong, self.timeout)
            await self.send(ws, 1, bytes([0, 1, 2, 3]) + b"binary from a phone")
            await self.close(ws, 1, 1000, "bye")
        # Socket 2: resume, one call, a close with an application code.
        if self.variant == "stale-token":
            token = token[:-1] + ("A" if token[-1] != "A" else "B")
        async with self.connect() as ws:
            await self.send(ws, 2, self.register(session_id, token))
            answer = await self.recv_until(ws, 2, ("resumed", "error"))
            if answer.get("type") == "error":
                await self.close(ws, 2, 1000, "refused")
                return
            await self.call(ws, 2, "system.ping")
            await self.close(ws, 2, 4001, "second")
        # Socket 3: a second register on one socket makes the relay close it.
        async with self.connect() as ws:
            await self.send(ws, 3, self.register())
            await self.recv_until(ws, 3, ("registered",))
            await self.send(ws, 3, self.register())
            try:
                while True:
                    m = await asyncio.wait_for(ws.recv(), self.timeout)
                    self.t.add(3, "in", "text" if isinstance(m, str) else "binary",
                               **({"text": m} if isinstance(m, str) else {"hex": m.hex()}))
            except ConnectionClosed as e:
                rcvd = e.rcvd
                if rcvd is None:
                    raise RuntimeError("socket 3 ended without a close frame from the relay")
                self.t.add(3, "in", "close", code=rcvd.code, reason=rcvd.reason)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url")
    p.add_argument("--ca-file")
    p.add_argument("--device-id")
    p.add_argument("--desktop-id", default="9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4")
    p.add_argument("--user", default="user-dev")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--variant", choices=["different-method", "stale-token"])
    args = p.parse_args()
    try:
        asyncio.run(asyncio.wait_for(Script(args).run(), 60))
    except Exception as e:  # noqa: BLE001 - report whatever stopped the script
        print(f"wire_client: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
