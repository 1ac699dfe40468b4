#!/usr/bin/env python3
"""Runs schemathesis (pip install schemathesis) against a loopback `vlrt serve` of the demo model,
driven by the server's own GET /openapi.json: every operation gets --max-examples generated
requests (valid and invalid); the run fails on a 5xx answer, an undocumented status code, a response that does not
match its schema or a wrong content type. Afterwards it prints how many requests each operation
got, over all phases (an operation with no parameters or body has one distinct request, which
schemathesis sends once per phase).

    python3 tools/check_openapi.py [--vlrt build/vlrt] [--max-examples 1000]
"""
import argparse
import collections
import glob
import json
import pathlib
import subprocess
import sys
import tempfile

from serve_check import serving

ROOT = pathlib.Path(__file__).resolve().parent.parent


def print_requests_per_operation(reports):
    """Requests per operation and phase, from schemathesis's event stream (each finished
    scenario records its test cases; a stateful scenario's cases span several
    operations, named in each case; other phases' cases belong to the scenario's operation, even
    those sent with another method)."""
    counts = collections.defaultdict(collections.Counter)
    for path in glob.glob(reports + "/*.ndjson"):
        with open(path) as f:
            for line in f:
                event = json.loads(line).get("ScenarioFinished")
                for case in (event or {}).get("recorder", {}).get("cases", {}).values():
                    value = case["value"]
                    operation = value["method"] + " " + value["path"] if event["phase"] == "stateful" \
                        else event["recorder"]["label"]
                    counts[operation][event["phase"]] += 1
    phases = sorted({phase for c in counts.values() for phase in c})
    print(f"requests per operation ({', '.join(phases)}, total):")
    for label in sorted(counts, key=lambda k: -sum(counts[k].values())):
        print(f"  {label:55s} " + " ".join(f"{counts[label][p]:6d}" for p in phases) + f" {sum(counts[label].values()):7d}")
    totals = [sum(c.values()) for c in counts.values()]
    if totals:
        print(f"{len(totals)} operations, {sum(totals)} requests, fewest for one operation {min(totals)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vlrt", default=str(ROOT / "build" / "vlrt"))
    ap.add_argument("--max-examples", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=4)
    a = ap.parse_args()
    with serving(a.vlrt, str(ROOT / "models/demo/model.onnx")) as server:
        url = server.url
        reports = tempfile.mkdtemp(prefix="vlrt-openapi-")
        run = subprocess.run([sys.executable, "-m", "schemathesis.cli", "run", url + "/openapi.json",
                              "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance", "--max-examples", str(a.max_examples),
                              "--workers", str(a.workers), "--url", url, "--report", "ndjson", "--report-dir", reports])
        print_requests_per_operation(reports)
    sys.exit(run.returncode)


if __name__ == "__main__":
    main()
