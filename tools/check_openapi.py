#!/usr/bin/env python3
"""Runs schemathesis (pip install schemathesis) against a loopback `vlrt serve` of the demo model,
driven by the server's own GET /openapi.json: every operation gets --max-examples generated
requests (valid and invalid); the run fails on a 5xx answer, an undocumented status code, a response that does not
match its schema or a wrong content type.

    python3 tools/check_openapi.py [--vlrt build/vlrt] [--max-examples 1000]
"""
import argparse
import pathlib
import subprocess
import sys

from serve_check import free_port, wait_ready

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vlrt", default=str(ROOT / "build" / "vlrt"))
    ap.add_argument("--max-examples", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=4)
    a = ap.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([a.vlrt, "serve", str(ROOT / "models/demo/model.onnx"), "--port", str(port)],
                              stdout=subprocess.DEVNULL)
    try:
        wait_ready(url, server)
        run = subprocess.run([sys.executable, "-m", "schemathesis.cli", "run", url + "/openapi.json",
                              "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance", "--max-examples", str(a.max_examples),
                              "--workers", str(a.workers), "--url", url])
        sys.exit(run.returncode)
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
