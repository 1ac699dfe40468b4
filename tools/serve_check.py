"""What the scripts that check `vlrt serve` against a client share: a server on a loopback port
for the length of a block, and one printed line per check that stops the script on the first
failure."""
import contextlib
import socket
import subprocess
import sys
import time
import types
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


@contextlib.contextmanager
def serving(vlrt, *args, output=subprocess.DEVNULL):
    """Runs `VLRT serve ARGS --port P` on a free loopback port P, waits until it is ready and
    stops it when the block ends. Yields the server as .url, .port and .process; with
    output=subprocess.PIPE its log is in .log afterwards (None is the terminal)."""
    port = free_port()
    server = types.SimpleNamespace(url=f"http://127.0.0.1:{port}", port=port, log=None)
    server.process = subprocess.Popen([vlrt, "serve", *args, "--port", str(port)], stdout=output, text=True,
                                      stderr=subprocess.STDOUT if output == subprocess.PIPE else None)
    try:
        wait_ready(server.url, server.process)
        yield server
    finally:
        server.process.terminate()
        server.log, _ = server.process.communicate(timeout=60)
