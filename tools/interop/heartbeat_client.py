#!/usr/bin/env python3
"""A device-link phone client (python `websockets` 17.x) that follows SPEC Part A except where told not to.

Usage: heartbeat_client.py URL [--heartbeat S] [--duration S] [--ca-file PEM] [--device-id ID]
                           [--desktop-id ID] [--user ID] [--call METHOD@S ...]

It is a client RelayTrace did not write, for `relaytrace replay` on wire traces: recorded through
`relaytrace relay --record` (or `relaytrace proxy`), its trace replays into RelayTrace's client model.
One socket, as a phone of SPEC A4-A9 does it:

  - the A4 upgrade headers (a development JWT whose tbh claim binds X-Token-Binding = the device ID);
  - `register` in the 1.6 form right after the upgrade (A6);
  - once registered, a `heartbeat` every --heartbeat seconds (the SPEC says 5; default 5), each one that
    long after the previous one (A6);
  - a `system.ping` at once when the relay reports the target desktop online (A9);
  - the --call requests (default system.ping at 1 s and session.list at 2 s after registration), each
    with an upper-case UUID and a W3C traceparent (A8);
  - a close with 1001 after --duration seconds (PROTOCOL.md §1).

It prints one JSON line per message it sends, `{"t": seconds since connect, "sent": type}`, and exits 0;
1 (with the reason on stderr) when the relay does not answer as expected, 2 on bad arguments.
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

MAX_SIZE = 32 * 1024 * 1024


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def jwt_for(user, device_id):
    """An unsigned development JWT with the claims the development relay checks (tbh binds the device ID)."""
    header = b64url(json.dumps({"alg": "none", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"sub": user, "device_id": device_id, "tbh": b64url(hashlib.sha256(device_id.encode()).digest())}
    return f"{header}.{b64url(json.dumps(claims, separators=(',', ':')).encode())}.dev"


class Phone:
    def __init__(self, args):
        self.args = args
        self.device_id = (args.device_id or str(uuid.uuid4())).lower()
        self.trace_id = uuid.uuid4().hex
        self.start = time.monotonic()
        self.ws = None

    async def send(self, message):
        print(json.dumps({"t": round(time.monotonic() - self.start, 3), "sent": message["type"]}), flush=True)
        await self.ws.send(json.dumps(message, separators=(",", ":")))

    def request(self, method, params=None):
        return {"type": "rpc.request", "payload": {
            "id": str(uuid.uuid4()).upper(), "method": method, "params": params if params is not None else {},
            "traceparent": f"00-{self.trace_id}-{uuid.uuid4().hex[:16]}-01"}}

    async def heartbeats(self):
        while True:
            await asyncio.sleep(self.args.heartbeat)
            await self.send({"type": "heartbeat", "payload": {}})

    async def calls(self):
        begun = time.monotonic()
        for method, at in self.args.call:
            await asyncio.sleep(max(0.0, begun + at - time.monotonic()))
            await self.send(self.request(method))

    async def run(self):
        headers = {
            "Authorization": f"Bearer {jwt_for(self.args.user, self.device_id)}",
            "X-Device-ID": self.device_id,
            "X-Token-Binding": self.device_id,
            "X-Client-Type": "mobile",
            "X-Target-Desktop-Device-ID": self.args.desktop_id,
        }
        kwargs = dict(additional_headers=headers, max_size=MAX_SIZE, compression=None, ping_interval=None, open_timeout=10)
        if self.args.url.startswith("wss:"):
            kwargs["ssl"] = ssl.create_default_context(cafile=self.args.ca_file) if self.args.ca_file else ssl.create_default_context()
        async with connect(self.args.url, **kwargs) as ws:
            self.ws = ws
            self.start = time.monotonic()
            await self.send({"type": "register", "payload": {
                "deviceId": self.device_id, "deviceName": "python heartbeat client", "relayProtocolVersion": "1.6",
                "targetDesktopDeviceId": self.args.desktop_id}})
            tasks = []
            deadline = time.monotonic() + self.args.duration
            registered = False
            desktop_online = False
            while time.monotonic() < deadline:
                try:
                    text = await asyncio.wait_for(ws.recv(), max(0.01, deadline - time.monotonic()))
                except asyncio.TimeoutError:
                    break
                if not isinstance(text, str):
                    continue
                m = json.loads(text)
                kind = m.get("type")
                if kind in ("registered", "resumed") and not registered:
                    registered = True
                    tasks = [asyncio.create_task(self.heartbeats()), asyncio.create_task(self.calls())]
                elif kind == "error" and not registered:
                    raise RuntimeError(f"the relay refused the registration: {text}")
                elif kind == "event":
                    payload = m.get("payload") or {}
                    inner = payload.get("payload") or {}
                    if (payload.get("eventType") == "device-status" and inner.get("deviceId") == self.args.desktop_id
                            and inner.get("status") == "online" and not desktop_online):
                        desktop_online = True
                        await self.send(self.request("system.ping"))
                elif kind == "ping":
                    await self.send({"type": "pong"})
            for t in tasks:
                t.cancel()
            if not registered:
                raise RuntimeError("never registered")
            await ws.close(1001, "bye")


def call(text):
    method, _, at = text.partition("@")
    return method, float(at or 0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url")
    p.add_argument("--heartbeat", type=float, default=5.0)
    p.add_argument("--duration", type=float, default=14.0)
    p.add_argument("--ca-file")
    p.add_argument("--device-id")
    p.add_argument("--desktop-id", default="9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4")
    p.add_argument("--user", default="user-dev")
    p.add_argument("--call", type=call, action="append")
    args = p.parse_args()
    if args.call is None:
        args.call = [("system.ping", 1.0), ("session.list", 2.0)]
    try:
        asyncio.run(asyncio.wait_for(Phone(args).run(), args.duration + 30))
    except Exception as e:  # noqa: BLE001 - report whatever stopped the script
        print(f"heartbeat_client: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
