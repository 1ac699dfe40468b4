#!/usr/bin/env bash
# Runs every fuzz harness for SECONDS (default 30) over its seed corpus, one after the other;
# fails when one reports a crash, a sanitizer error, a leak, a timeout or running out of memory.
# The committed seeds are read only: new inputs go to a scratch corpus, and an input that made a
# harness fail is kept as out/fuzz/<parser>-crash-... (turn it into a regression test).
# Usage: fuzz/run_smoke.sh [HARNESS_DIR (build-fuzz/fuzz)] [SECONDS (30)] [PARSER...]
# With RUNS=N in the environment each harness runs N executions instead of SECONDS (a long
# campaign: RUNS=1000000 fuzz/run_smoke.sh build-fuzz/fuzz 0).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-fuzz/fuzz}
seconds=${2:-30}
shift 2 2>/dev/null || shift $#
parsers=("$@")
if [ ${#parsers[@]} -eq 0 ]; then
  for corpus in fuzz/corpus/*/; do parsers+=("$(basename "$corpus")"); done
fi
mkdir -p out/fuzz
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=()
for parser in "${parsers[@]}"; do
  harness=$dir/${parser}_fuzzer
  if [ ! -x "$harness" ]; then
    echo "$harness: not built (run \`make fuzz\`)"; failed+=("$parser"); continue
  fi
  mkdir -p "$scratch/$parser"
  log=out/fuzz/$parser.log
  if [ -n "${RUNS:-}" ]; then limit=(-runs="$RUNS"); else limit=(-max_total_time="$seconds"); fi
  start=$(date +%s)
  "$harness" "$scratch/$parser" "fuzz/corpus/$parser" "${limit[@]}" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 -artifact_prefix="out/fuzz/$parser-" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  if [ $rc -eq 0 ]; then
    echo "ok      $parser: ${runs:-?} executions in ${took} s"
  else
    echo "FAILED  $parser (exit $rc): see $log"; grep -m3 -E 'ERROR|SUMMARY|Test unit written' "$log"
    failed+=("$parser")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then echo "fuzzing failed: ${failed[*]}"; exit 1; fi
echo "fuzzing: ${#parsers[@]} harnesses, no crashes"
