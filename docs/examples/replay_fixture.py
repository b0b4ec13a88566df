#!/usr/bin/env python3
"""Replay a recorded session to a client under test, from python (any test framework).

`replaying_relay(trace)` starts `relaytrace relay --replay TRACE --format json` on a free loopback port,
yields the URL to point the client at, and when the block ends waits for the replay to finish (it ends by
itself once the recording's last socket is done) and checks its JSON result:

    from replay_fixture import replaying_relay

    def test_resume_flow():                       # pytest, unittest, plain asserts: all the same
        with replaying_relay("traces/app-resume.rtrace") as relay:
            run_my_client(relay.url)              # the client you test, pointed at relay.url
        assert relay.result["result"] == "matched", relay.report()

As a pytest fixture:

    @pytest.fixture
    def relay(request):
        with replaying_relay(request.param) as r:
            yield r

Run as a script, it replays TRACE to a command and exits with the replay's code (0 matched, 1 diverged):

    replay_fixture.py TRACE [--strict] [--speed X] -- COMMAND ARGS...   ({url} in ARGS becomes the URL)

`relaytrace` is looked up as $RELAYTRACE, then on PATH.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys


class ReplayingRelay:
    def __init__(self, process, url):
        self.process = process
        self.url = url
        self.result = None
        self.returncode = None

    def report(self):
        """The findings, one per line, for an assertion message."""
        lines = [f"{self.result.get('result')}: {len(self.result.get('findings', []))} finding(s)"]
        for f in self.result.get("findings", []):
            lines.append(f"  g{f.get('generation', '?')} record #{f.get('record', '?')}: {f['kind']}: {f['message']}")
            lines += [f"    {d}" for d in f.get("differences", [])]
        return "\n".join(lines)


@contextlib.contextmanager
def replaying_relay(trace, strict=False, speed=1.0, timeout=60):
    binary = os.environ.get("RELAYTRACE") or shutil.which("relaytrace") or "relaytrace"
    args = [binary, "relay", "--replay", trace, "--listen", "127.0.0.1:0", "--format", "json", "--for", f"{timeout}s",
            "--speed", str(speed)]
    if strict:
        args.append("--strict")
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # With --format json the first line (the URL) is on stderr; stdout holds only the result.
        first = process.stderr.readline()
        if not first.startswith("listening on "):
            raise RuntimeError(f"relaytrace relay --replay did not start: {first}{process.stderr.read()}")
        relay = ReplayingRelay(process, first[len("listening on "):].split(" ")[0])
        yield relay
        out, _ = process.communicate(timeout=timeout + 10)
        relay.returncode = process.returncode
        relay.result = json.loads(out)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def main():
    if "--" not in sys.argv:
        print(__doc__.split("\n\n")[-2], file=sys.stderr)
        sys.exit(2)
    split = sys.argv.index("--")
    options, command = sys.argv[1:split], sys.argv[split + 1:]
    trace, strict, speed = options[0], "--strict" in options, 1.0
    if "--speed" in options:
        speed = float(options[options.index("--speed") + 1])
    with replaying_relay(trace, strict=strict, speed=speed) as relay:
        subprocess.run([a.replace("{url}", relay.url) for a in command], check=False)
    print(relay.report())
    sys.exit(relay.returncode)


if __name__ == "__main__":
    main()
