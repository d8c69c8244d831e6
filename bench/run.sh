#!/usr/bin/env bash
# Runs every Go benchmark of the packages (those whose figures
# docs/performance.md states among them), on this machine, and prints
# them. Run it on a quiet machine: the targets are for 2 cores with
# nothing else running. Extra arguments go to each `go test` (for example
# -count=5 for benchstat). ./test.sh runs it with BENCHTIME=1x, so that no
# benchmark rots between measurements.
#
#   bench/run.sh               every package that has benchmarks
#   BENCH_PKGS=./store bench/run.sh
#   BENCHTIME=1x bench/run.sh  each benchmark once (bot.BenchmarkSlowStreams
#                              then holds 100 slow turns, about 25 s)
#
# The store's PostgreSQL benchmarks need TEAMSBOT_TEST_DATABASE_URL (a
# server where they may create databases); bench/replicas.sh starts one and
# runs them. Without it they are skipped here.
set -euo pipefail
cd "$(dirname "$0")/.."
# The packages whose tests declare a benchmark, found rather than listed,
# so that a new one is never left out.
pkgs=${BENCH_PKGS:-$(grep -rl --include='*_test.go' '^func Benchmark' --exclude-dir=node_modules --exclude-dir=.cache . | xargs -n 1 dirname | sort -u)}
short=()
[ -n "${TEAMSBOT_TEST_DATABASE_URL:-}" ] || short=(-short)
for p in $pkgs; do
	echo "== $p"
	go test -run '^$' -bench . -benchmem -benchtime=${BENCHTIME:-1s} "${short[@]}" "$@" "$p" | grep -E '^(Benchmark|ok|FAIL|---)'
done
