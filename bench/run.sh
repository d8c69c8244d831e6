#!/usr/bin/env bash
# Runs every benchmark whose figures README states, on this machine, and
# prints them. Run it on a quiet machine: the targets are for 2 cores with
# nothing else running. Extra arguments go to each `go test` (for example
# -count=5 for benchstat).
#
#   bench/run.sh               all of them
#   BENCH_PKGS=./store bench/run.sh
#
# The store's PostgreSQL benchmarks need TEAMSBOT_TEST_DATABASE_URL (a
# server where they may create databases); bench/replicas.sh starts one and
# runs them. Without it they are skipped here.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=${BENCH_PKGS:-"./mcpapps ./store ./agent ./bot ./viewpage ./cards ./signin"}
short=()
[ -n "${TEAMSBOT_TEST_DATABASE_URL:-}" ] || short=(-short)
for p in $pkgs; do
	echo "== $p"
	go test -run '^$' -bench . -benchmem -benchtime=${BENCHTIME:-1s} "${short[@]}" "$@" "$p" | grep -E '^(Benchmark|ok|FAIL|---)'
done
