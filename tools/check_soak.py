#!/usr/bin/env python3
"""Soak and overload check of `vlrt serve` on the demo model, with `vlrt loadtest` as the client:

1. soak: --clients clients for --minutes, each sending /v1/detect of the demo image as soon as it is
   answered; a report per --window. Passes with 0 failed requests (every answer 200), the server's
   RSS growing less than 5% from the end of the first window (the warm-up) to the end of the last,
   and the p99 latency of the last window within 20% of the first's.
2. overload: 4x the soak's sustained rate (requests/s) from 4x the clients for --overload-seconds,
   against a server whose queue holds --clients requests. Passes when the excess gets 503 with
   Retry-After, no request goes unanswered and the accepted requests' p99 stays below
   3x the soak's p99.
3. recovery: half the sustained rate for --recovery-seconds: every answer 200 again, p99 within 20%
   of the soak's.

    python3 tools/check_soak.py --vlrt build/vlrt [--minutes 30] [--clients 32]
"""
import argparse
import json
import pathlib
import subprocess
import sys

from serve_check import serving

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROMPT = "yellow heart . black ring . green heart . yellow triangle ."


def loadtest(a, url, *extra):
    cmd = [a.vlrt, "loadtest", "--url", url, "--image", str(ROOT / "assets/demo.png"), "-p", PROMPT, "--json", *extra]
    print("$", " ".join(cmd[1:]), flush=True)
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"loadtest failed ({run.returncode}): {run.stderr}")
    return json.loads(run.stdout)


def verdict(name, ok, detail):
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vlrt", default=str(ROOT / "build" / "vlrt"))
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--window", type=float, default=300, help="seconds per soak report window")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--overload-seconds", type=float, default=120)
    ap.add_argument("--recovery-seconds", type=float, default=60)
    ap.add_argument("--json", help="also write every report here")
    a = ap.parse_args()
    # The queue holds as many requests as the soak has clients: the soak never fills it, and under
    # overload the excess is turned away at once instead of waiting behind --max-queue's default.
    reports, ok = {}, True
    with serving(a.vlrt, str(ROOT / "models/demo/model.onnx"), "--max-queue", str(a.clients)) as server:
        url = server.url
        soak = reports["soak"] = loadtest(a, url, "--clients", str(a.clients), "--duration", str(a.minutes * 60),
                                          "--window", str(a.window))
        windows = soak["windows"]
        for w in windows:
            print(f"  {w['start_s']:6.0f}-{w['end_s']:<6.0f} s  responses {w['responses']:6d}  p50 {w['p50_ms']:7.1f} ms  "
                  f"p99 {w['p99_ms']:7.1f} ms  server RSS {w['server_rss'] / 1048576:6.1f} MiB")
        bad = soak["sent"] - soak["statuses"].get("200", 0)
        ok &= verdict("soak answers", bad == 0, f"{soak['sent']} sent, {bad} not answered 200 ({soak['statuses']}, "
                                                f"{soak['no_response']} without a response)")
        drift = soak["drift"]
        ok &= verdict("soak memory", drift["rss_growth"] < 0.05,
                      f"server RSS {windows[0]['server_rss'] / 1048576:.1f} -> {windows[-1]['server_rss'] / 1048576:.1f} "
                      f"MiB after warm-up ({drift['rss_growth'] * 100:+.2f}%)")
        ok &= verdict("soak latency", abs(drift["p99_change"]) <= 0.2,
                      f"p99 {windows[0]['p99_ms']:.1f} ms in the first window, {windows[-1]['p99_ms']:.1f} ms in the last "
                      f"({drift['p99_change'] * 100:+.1f}%)")
        rate = soak["ok_per_s"]
        print(f"sustained: {rate:.2f} requests/s at p99 {soak['p99_ms']:.1f} ms", flush=True)

        over = reports["overload"] = loadtest(a, url, "--clients", str(4 * a.clients), "--rate", str(4 * rate),
                                              "--duration", str(a.overload_seconds))
        n503 = over["statuses"].get("503", 0)
        ok &= verdict("overload sheds", n503 > 0 and over["retry_after_503s"] == n503 and over["no_response"] == 0,
                      f"{over['sent']} sent at {4 * rate:.1f}/s: {over['statuses']}, {over['retry_after_503s']} 503s "
                      f"with Retry-After, {over['no_response']} without a response")
        ok &= verdict("overload latency", over["p99_ok_ms"] < 3 * soak["p99_ms"],
                      f"accepted requests' p99 {over['p99_ok_ms']:.1f} ms (soak p99 {soak['p99_ms']:.1f} ms), "
                      f"{over['ok_per_s']:.2f} accepted/s")

        rec = reports["recovery"] = loadtest(a, url, "--clients", str(a.clients), "--rate", str(rate / 2),
                                             "--duration", str(a.recovery_seconds))
        bad = rec["sent"] - rec["statuses"].get("200", 0)
        ok &= verdict("recovery", bad == 0 and rec["p99_ms"] <= 1.2 * soak["p99_ms"],
                      f"{rec['sent']} sent at {rate / 2:.1f}/s: {rec['statuses']}, p99 {rec['p99_ms']:.1f} ms")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(reports, indent=1) + "\n")
    print("all checks passed" if ok else "some checks failed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
