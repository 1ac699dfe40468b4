"""What the scripts that check `vlrt serve` against a client share: a loopback port, waiting
for readiness, and one printed line per check that stops the script on the first failure."""
import socket
import sys
import time
import urllib.request


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url, server, seconds=120):
    """Polls URL/v2/health/ready until it answers; exits when `server` (a Popen) ends first."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if server.poll() is not None:
            sys.exit(f"vlrt serve exited with {server.returncode}")
        try:
            urllib.request.urlopen(url + "/v2/health/ready", timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    sys.exit("vlrt serve did not become ready")
