#!/usr/bin/env python3
"""A python "desktop" and a python "phone" (websockets 17.x) link by code through `relaytrace relay`.

Usage: device_link_peers.py URL [--ca-file PEM] [--relay-code CODE] [--timeout SECONDS]

The desktop connects with `X-Client-Type: desktop`, registers and asks for a link code (`link.create`);
a phone of another account is refused (`linkAccountMismatch`); a phone of the desktop's account links
with the code as a person would type it (`link.redeem` -> `link.accepted`, which the desktop hears too);
the code does not link a second phone (`linkCodeUsed`); then the linked phone registers for the desktop
and they exchange an RPC (phone -> desktop -> phone, `clientId` added and stripped by the relay) and an
event each way. With --relay-code (the code `relaytrace relay` printed for its own link desktop), a
phone of a random account links with it and the desktop the relay simulates answers its RPC.

The link messages are this project's design (docs/DEVICE_LINK.md), not PlanToCode's.
Prints one JSON line per step ({"check": ..., "ok": ..., "detail": ..., "ms": ...}); exits 0 when
every step passed, 1 otherwise (the steps after a failure are not run), 2 on bad arguments.
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

CODE = re.compile(r"^[ABCDEFGHJKMNPQRSTUVWXYZ23456789]{4}-[ABCDEFGHJKMNPQRSTUVWXYZ23456789]{4}$")
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
RELAY_DESKTOP = "9a7e2c1d-3b4f-4e5a-8c6d-7f8091a2b3c4"


class StepFailed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise StepFailed(message)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class Peer:
    """One device (phone or desktop) of an account."""

    def __init__(self, kind, user, target=None):
        self.kind = kind
        self.user = user
        self.device_id = str(uuid.uuid4())
        self.target = target

    def jwt(self):
        header = b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode())
        claims = {"sub": self.user, "device_id": self.device_id, "tbh": b64url(hashlib.sha256(self.device_id.encode()).digest())}
        return f"{header}.{b64url(json.dumps(claims).encode())}.dev"

    def headers(self):
        h = {"Authorization": f"Bearer {self.jwt()}", "X-Device-ID": self.device_id, "X-Token-Binding": self.device_id,
             "X-Client-Type": self.kind}
        if self.target:
            h["X-Target-Desktop-Device-ID"] = self.target
        return h

    def register(self):
        p = {"deviceId": self.device_id, "deviceName": f"python {self.kind}", "relayProtocolVersion": "1.6"}
        if self.target:
            p["targetDesktopDeviceId"] = self.target
        return json.dumps({"type": "register", "payload": p})


class Session:
    def __init__(self, args):
        self.url = args.url
        self.timeout = args.timeout
        self.ssl = None
        if self.url.startswith("wss:"):
            self.ssl = ssl.create_default_context(cafile=args.ca_file) if args.ca_file else ssl.create_default_context()

    def connect(self, peer):
        kwargs = dict(additional_headers=peer.headers(), compression=None, ping_interval=None, open_timeout=self.timeout)
        if self.ssl:
            kwargs["ssl"] = self.ssl
        return connect(self.url, **kwargs)

    async def recv(self, ws, wanted, skip=("event",)):
        """The next message whose type is in `wanted` (events of the relay are skipped unless wanted)."""
        while True:
            raw = await asyncio.wait_for(ws.recv(), self.timeout)
            m = json.loads(raw)
            t = m.get("type")
            if t in wanted:
                return m
            expect(t in skip or t == "pong", f"expected {'/'.join(wanted)}, got {raw[:300]}")

    async def register(self, ws, peer):
        await ws.send(peer.register())
        m = await self.recv(ws, ("registered", "error"))
        expect(m.get("type") == "registered", f"register refused: {json.dumps(m)[:300]}")

    async def redeem(self, peer, code):
        """Opens a socket without a target, sends link.redeem, returns (socket, answer)."""
        ws = await self.connect(peer)
        await ws.send(json.dumps({"type": "link.redeem", "payload": {"code": code, "deviceId": peer.device_id,
                                                                      "deviceName": f"python phone of {peer.user}"}}))
        return ws, await self.recv(ws, ("link.accepted", "error"))


async def run(args, report):
    s = Session(args)
    account = f"auth0|{uuid.uuid4().hex[:12]}"
    desktop = Peer("desktop", account)

    async with s.connect(desktop) as dws:
        await s.register(dws, desktop)
        await dws.send(json.dumps({"type": "link.create", "payload": {"deviceName": "python desktop"}}))
        created = (await s.recv(dws, ("link.created",)))["payload"]
        code = created.get("code", "")
        expect(CODE.match(code), f"code {code!r} is not XXXX-XXXX of the link alphabet")
        expect(created.get("uri") == f"relaytrace://link?code={code}", f"uri {created.get('uri')!r}")
        expect(isinstance(created.get("expiresAt"), str), "no expiresAt")
        report("desktop-makes-code", f"{code}, expires {created['expiresAt']}")

        stranger = Peer("mobile", f"auth0|{uuid.uuid4().hex[:12]}")
        ws, m = await s.redeem(stranger, code)
        await ws.close()
        expect(m.get("type") == "error" and m.get("code") == "linkAccountMismatch", f"expected linkAccountMismatch, got {json.dumps(m)[:300]}")
        report("wrong-account", m["message"])

        phone = Peer("mobile", account)
        typed = code.lower().replace("-", " ")
        ws, m = await s.redeem(phone, typed)
        await ws.close()
        expect(m.get("type") == "link.accepted", f"expected link.accepted, got {json.dumps(m)[:300]}")
        p = m["payload"]
        expect(p.get("desktopDeviceId") == desktop.device_id, f"desktopDeviceId {p.get('desktopDeviceId')!r}")
        expect(p.get("mobileDeviceId") == phone.device_id, f"mobileDeviceId {p.get('mobileDeviceId')!r}")
        heard = (await s.recv(dws, ("link.accepted",)))["payload"]
        expect(heard.get("mobileDeviceId") == phone.device_id, f"the desktop heard of {heard.get('mobileDeviceId')!r}")
        report("phone-links", f"typed {typed!r}: linked to {p['desktopDeviceId']} ({p.get('desktopName')}), the desktop heard it")

        again = Peer("mobile", account)
        ws, m = await s.redeem(again, code)
        await ws.close()
        expect(m.get("type") == "error" and m.get("code") == "linkCodeUsed", f"expected linkCodeUsed, got {json.dumps(m)[:300]}")
        report("code-used-once", m["message"])

        # The linked phone talks to its desktop through the relay.
        phone.target = p["desktopDeviceId"]
        async with s.connect(phone) as pws:
            await s.register(pws, phone)
            await pws.send(json.dumps({"type": "rpc.request", "payload": {"id": "RPC-1", "method": "session.list",
                                                                           "params": {}, "traceparent": TRACEPARENT}}))
            req = (await s.recv(dws, ("rpc.request",)))["payload"]
            expect(req.get("method") == "session.list" and req.get("id") == "RPC-1", f"the desktop got {req}")
            expect(req.get("clientId") == phone.device_id, f"clientId {req.get('clientId')!r} is not the phone")
            await dws.send(json.dumps({"type": "rpc.response", "payload": {"id": "RPC-1", "result": {"sessions": ["s-py"]},
                                                                            "isFinal": True, "clientId": req["clientId"],
                                                                            "traceparent": TRACEPARENT}}))
            resp = (await s.recv(pws, ("rpc.response",)))["payload"]
            expect(resp.get("result") == {"sessions": ["s-py"]}, f"the phone got {resp}")
            expect("clientId" not in resp, "the relay left clientId in the response")
            report("rpc-through-relay", "session.list answered by the python desktop")

            await dws.send(json.dumps({"type": "event", "payload": {"eventType": "job:status-changed",
                                                                     "payload": {"jobId": "j-py", "sessionId": "s-py", "status": "running"}}}))
            while True:
                ev = await s.recv(pws, ("event",), skip=())
                if (ev.get("payload") or {}).get("eventType") == "job:status-changed":
                    break
            expect(ev.get("sourceDeviceId") == desktop.device_id, f"sourceDeviceId {ev.get('sourceDeviceId')!r}")
            expect(isinstance(ev.get("eventId"), int), "no eventId")
            await pws.send(json.dumps({"type": "event", "payload": {"eventType": "chat:timeline-interest",
                                                                     "payload": {"appSessionId": "A", "sessionId": "s-py", "active": True}}}))
            back = await s.recv(dws, ("event",), skip=())
            expect((back.get("payload") or {}).get("eventType") == "chat:timeline-interest", f"the desktop got {back}")
            expect(back.get("sourceDeviceId") == phone.device_id, f"sourceDeviceId {back.get('sourceDeviceId')!r}")
            report("events-both-ways", f"job:status-changed as eventId {ev['eventId']} to the phone; chat:timeline-interest to the desktop")

    if args.relay_code:
        anyone = Peer("mobile", f"auth0|{uuid.uuid4().hex[:12]}")
        ws, m = await s.redeem(anyone, args.relay_code)
        expect(m.get("type") == "link.accepted", f"the relay's code: expected link.accepted, got {json.dumps(m)[:300]}")
        linked = m["payload"]["desktopDeviceId"]
        expect(linked == RELAY_DESKTOP, f"linked {linked!r}, expected the relay's link desktop")
        # Register on the same socket without naming a target: the link decides; its desktop answers.
        await ws.send(anyone.register())
        await s.recv(ws, ("registered",))
        await ws.send(json.dumps({"type": "rpc.request", "payload": {"id": "RPC-2", "method": "system.ping", "params": {},
                                                                      "traceparent": TRACEPARENT}}))
        resp = (await s.recv(ws, ("rpc.response",)))["payload"]
        await ws.close()
        expect(resp.get("result") == {"pong": True}, f"system.ping got {resp}")
        report("relay-code", f"{args.relay_code} linked account {anyone.user} to {linked}; system.ping answered")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="ws://HOST:PORT/ws/device-link or wss://...")
    parser.add_argument("--ca-file", help="PEM certificate(s) to trust for wss")
    parser.add_argument("--relay-code", help="the link code relaytrace relay printed for its own link desktop")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per wait (default 10)")
    args = parser.parse_args()
    if not re.match(r"^wss?://", args.url):
        parser.error("give the relay URL (ws://... or wss://...)")
    started = [time.monotonic()]

    def report(name, detail):
        print(json.dumps({"check": name, "ok": True, "detail": detail, "ms": round((time.monotonic() - started[0]) * 1000)}), flush=True)
        started[0] = time.monotonic()

    try:
        asyncio.run(asyncio.wait_for(run(args, report), args.timeout * 6))
    except Exception as e:  # reported, not raised
        detail = "timeout" if isinstance(e, asyncio.TimeoutError) else f"{type(e).__name__}: {e}"
        print(json.dumps({"check": "failed", "ok": False, "detail": detail, "ms": 0}), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
