#!/usr/bin/env python3
"""Slow clients against a loopback `vlrt serve` of the demo model: N connections that send half
their request headers (then, separately, N uploads that stop mid-body) and hang. While they hang,
/v2/health/ready and a /v1/detect of assets/demo.png must answer within 1 s; after the read
timeout every hanging connection must have been closed by the server.

    python3 tools/check_slow_clients.py [--vlrt build/vlrt] [--connections 2000] [--read-timeout-s 5]
"""
import argparse
import pathlib
import resource
import socket
import time
import urllib.request
import uuid

from serve_check import check, serving

ROOT = pathlib.Path(__file__).resolve().parent.parent


def detect_request(url):
    boundary = uuid.uuid4().hex
    image = (ROOT / "assets" / "demo.png").read_bytes()
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nperson .\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"demo.png\"\r\n"
            f"Content-Type: image/png\r\n\r\n").encode() + image + f"\r\n--{boundary}--\r\n".encode()
    return urllib.request.Request(url + "/v1/detect", data=body,
                                  headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})


def timed(request):
    t0 = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as r:
        r.read()
        status = r.status
    return status, (time.perf_counter() - t0) * 1000


def hang(port, n, text):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(text)
        socks.append(s)
    return socks


def open_count(socks):
    """How many of SOCKS the server has not closed (recv would block rather than see EOF/reset)."""
    still = 0
    for s in socks:
        s.setblocking(False)
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    break
        except BlockingIOError:
            still += 1
        except OSError:
            pass
    return still


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vlrt", default=str(ROOT / "build" / "vlrt"))
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--read-timeout-s", type=float, default=5)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    check(hard >= a.connections + 100, f"open-files limit {hard} >= {a.connections} connections + 100")
    with serving(a.vlrt, str(ROOT / "models/demo/model.onnx"), "--read-timeout-s", str(a.read_timeout_s),
                 output=None) as server:
        url, port = server.url, server.port
        detect = detect_request(url)
        status, ms = timed(detect)
        check(status == 200, f"/v1/detect with no slow clients: {ms:.0f} ms")
        stalls = {
            "incomplete headers": b"POST /v1/detect HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n",
            "stalled uploads": (b"POST /v1/detect HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                b"Content-Length: 100000\r\n\r\n{\"prompt\": \"person .\", \"image\": \"iVBOR"),
        }
        for what, text in stalls.items():
            t0 = time.perf_counter()
            socks = hang(port, a.connections, text)
            time.sleep(0.5)
            n = open_count(socks)
            check(n == a.connections, f"{a.connections} connections with {what} open ({n} still open, "
                  f"{time.perf_counter() - t0:.1f} s to open)")
            status, ms = timed(url + "/v2/health/ready")
            check(status == 200 and ms < 1000, f"/v2/health/ready beside them: {status} in {ms:.1f} ms")
            status, ms = timed(detect)
            check(status == 200 and ms < 1000, f"/v1/detect of assets/demo.png beside them: {status} in {ms:.1f} ms")
            time.sleep(max(0.0, a.read_timeout_s + 1.0 - (time.perf_counter() - t0)))
            n = open_count(socks)
            check(n == 0, f"after the read timeout ({a.read_timeout_s} s) + 1 s: {n} of them still open")
            for s in socks:
                s.close()
            time.sleep(0.5)


if __name__ == "__main__":
    main()
