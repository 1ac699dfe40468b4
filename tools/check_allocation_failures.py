#!/usr/bin/env python3
"""Out-of-memory walk: makes each host allocation of a demo-model `vlrt detect`, and then each one
of a served /v1/detect request, fail in turn (VLRT_FAIL_ALLOCATION=n), and checks that every one
gives a clean error: for the command, exit status 1 with one "error: ... out of host memory ..."
line and nothing else on stderr (no crash, sanitizer report or leak); for the server, a 503
naming the out-of-memory, after which the next request is answered 200 with the reference
detections and the server reports ready. The walk goes on past the last allocation until runs
succeed with the reference output, which is how the last allocation is found; runs that succeed
before it would be failures absorbed silently, and are reported.

Run it with a LeakSanitizer build (`make sanitize` builds one into build-asan) to check leaks too.

    python3 tools/check_allocation_failures.py --vlrt build/vlrt
    python3 tools/check_allocation_failures.py --vlrt build-asan/vlrt --skip-server
    python3 tools/check_allocation_failures.py --vlrt build-asan/vlrt --skip-command
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MARGIN = 20  # successful runs past the last failing allocation before the walk stops


def detect_cmd(vlrt, image, prompt, out):
    return [vlrt, "detect", image, "-p", prompt, "--json", out, "--threads", "1"]


def run_detect(a, n, out):
    env = dict(os.environ)
    if n:
        env["VLRT_FAIL_ALLOCATION"] = str(n)
    p = subprocess.run(detect_cmd(a.vlrt, a.image, a.prompt, out), capture_output=True, text=True, env=env)
    result = None
    if p.returncode == 0:
        with open(out) as f:
            result = json.load(f)["detections"]
    return p.returncode, p.stderr, result


def walk_command(a):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        rc, err, want = run_detect(a, 0, out)
        if rc != 0:
            sys.exit(f"the reference run failed: {err}")
        bad, absorbed, n, last_failing, successes = [], [], 0, 0, 0
        t0 = time.time()
        while successes < MARGIN:
            n += 1
            rc, err, got = run_detect(a, n, out)
            lines = [l for l in err.strip().splitlines() if l]
            if rc == 0:
                successes += 1
                if got != want:
                    bad.append((n, "exit 0 but detections differ from the reference"))
                continue
            if successes:  # a failure after runs that succeeded: those absorbed their failures
                absorbed.extend(range(n - successes, n))
                successes = 0
            last_failing = n
            clean = rc == 1 and len(lines) == 1 and lines[0].startswith("error: ") and "out of host memory" in lines[0] \
                and "internal error" not in lines[0]
            if not clean:
                bad.append((n, f"exit {rc}: {' | '.join(lines)[:400]}"))
            if n % 50 == 0:
                print(f"  detect: allocation {n} ({time.time() - t0:.0f} s)", flush=True)
        print(f"detect: {last_failing} host allocations; each made to fail in turn: "
              f"{last_failing - len(bad) - len(absorbed)} clean errors, {len(bad)} not clean, "
              f"{len(absorbed)} absorbed; then {MARGIN} runs past the last gave the reference detections "
              f"({time.time() - t0:.0f} s)")
        for n, why in bad[:20]:
            print(f"  allocation {n}: {why}")
        if absorbed:
            print(f"  absorbed (exit 0): allocations {absorbed[:20]}")
        return not bad and not absorbed


# ------------------------------------------------------------------------------ served request

def multipart(image_bytes, prompt):
    boundary = uuid.uuid4().hex
    parts = [(f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="image"\r\n'
              "Content-Type: application/octet-stream\r\n\r\n").encode() + image_bytes + b"\r\n",
             f'--{boundary}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\n{prompt}\r\n'.encode(),
             f"--{boundary}--\r\n".encode()]
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def http(url, body=None, content_type=None):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": content_type} if content_type else {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Server:
    def __init__(self, vlrt, fail_at):
        env = dict(os.environ)
        if fail_at:
            env["VLRT_FAIL_ALLOCATION"] = str(fail_at)
        self.p = subprocess.Popen([vlrt, "serve", "--port", "0", "--threads", "1"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env)
        self.log = []
        for line in self.p.stdout:
            self.log.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.url = f"http://127.0.0.1:{m.group(1)}"
                break
        else:
            raise RuntimeError("the server did not start:\n" + "".join(self.log))
        for _ in range(600):
            if http(self.url + "/v2/health/ready")[0] == 200:
                return
            time.sleep(0.05)
        raise RuntimeError("the server never became ready")

    def allocations(self):
        _, text = http(self.url + "/metrics")
        m = re.search(r"^vlrt_host_allocations_total (\S+)$", text, re.M)
        return int(float(m.group(1)))

    def detect(self, body, ctype):
        return http(self.url + "/v1/detect", body, ctype)

    def stop(self):
        self.p.terminate()
        try:
            out, _ = self.p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, _ = self.p.communicate()
        self.log.append(out or "")
        return self.p.returncode


def walk_server(a):
    with open(a.image, "rb") as f:
        body, ctype = multipart(f.read(), a.prompt)
    s = Server(a.vlrt, 0)
    first = s.allocations()
    status, text = s.detect(body, ctype)
    after = s.allocations()
    s.stop()
    if status != 200:
        sys.exit(f"the reference request failed: {status} {text}")
    want = json.loads(text)["detections"]
    per_request = after - first
    print(f"serve: ready after {first} host allocations; one /v1/detect makes {per_request}", flush=True)
    bad, t0 = [], time.time()
    for k in range(1, per_request + 1):
        s = Server(a.vlrt, first + k)
        problems = []
        if s.allocations() != first:
            problems.append(f"ready after {s.allocations()} allocations, not {first}")
        status, text = s.detect(body, ctype)
        if status != 503 or "out of memory" not in text:
            problems.append(f"the failing request got {status}: {text[:200]}")
        status, text = s.detect(body, ctype)
        if status != 200 or json.loads(text).get("detections") != want:
            problems.append(f"the next request got {status}: {text[:200]}")
        if http(s.url + "/v2/health/ready")[0] != 200:
            problems.append("not ready afterwards")
        rc = s.stop()
        log = "".join(s.log)
        if rc != 0 or "Sanitizer" in log:
            problems.append(f"exit {rc} on SIGTERM: {log[-400:]}")
        if problems:
            bad.append((k, "; ".join(problems)))
    print(f"serve: each of the request's {per_request} allocations made to fail in turn: "
          f"{per_request - len(bad)} answered 503 naming the out-of-memory, with the next request 200 and the "
          f"server ready; {len(bad)} not ({time.time() - t0:.0f} s)")
    for k, why in bad[:20]:
        print(f"  allocation {first + k}: {why}")
    return not bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    ap.add_argument("--image", default=os.path.join(ROOT, "assets", "demo.png"))
    ap.add_argument("--prompt", default="yellow heart . black ring .")
    ap.add_argument("--skip-server", action="store_true", help="walk only the `vlrt detect` command")
    ap.add_argument("--skip-command", action="store_true", help="walk only the served request")
    a = ap.parse_args()
    ok = a.skip_command or walk_command(a)
    if not a.skip_server:
        ok = walk_server(a) and ok
    print("all clean" if ok else "NOT CLEAN")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
