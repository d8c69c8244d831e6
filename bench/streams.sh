#!/usr/bin/env bash
# Many slow streamed turns at once: teamsbot in its own process, a fake
# OpenAI-compatible model that streams each answer over 10 s (its first
# words after 400 ms, then a piece every 2 s), and the fake Bot Framework,
# both in the load process. 10,000 turns from 1,000 personal chats in 100
# tenants, all in flight at once; the fake Bot Connector counts every call
# against Teams' documented limits and each turn's final message. Reports
# the service's own peak memory apart from the load's. Every process
# listens on 127.0.0.1; the whole run takes about a minute.
#
#   bench/streams.sh                         results in bench/streams.md
#   PROFILE=1 KEEP=1 bench/streams.sh        also CPU, heap and goroutine profiles of the service as its memory grows
#   GOMEMLIMIT_SERVICE=600MiB bench/streams.sh   the service with Go's soft memory limit
#   NICE=0 bench/streams.sh                  load and service at the same priority (as a non-root user)
#   TURNS=200 CHATS=20 TENANTS=2 OUT=/tmp/s.md bench/streams.sh   briefly (./test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d -t teamsbot-streams-XXXXXX)
# The folder holds the service's log (and the profiles); it is kept when
# the run fails or KEEP=1.
trap 'status=$?; if [ "$status" -ne 0 ] || [ -n "${KEEP:-}" ]; then echo "working folder kept: $work" >&2; else rm -rf "$work"; fi' EXIT
go build -o "$work/teamsbot" ./cmd/teamsbot
go build -o "$work/load" ./bench/load

out=${OUT:-bench/streams.md}
# As root the load runs at niceness -15 and the service at +5: the fakes
# then stamp each call as it arrives rather than when two busy cores let
# them, and the pace the service keeps is measured, not the load's
# delays. NICE=0 runs both as this shell does.
prio=() servicenice=0
if [ "$(id -u)" -eq 0 ] && [ "${NICE:-1}" != 0 ]; then
	prio=(nice -n -15) servicenice=20
fi
timeout 900 "${prio[@]}" "$work/load" streams \
	-service-nice "$servicenice" \
	-teamsbot "$work/teamsbot" \
	-turns "${TURNS:-10000}" \
	-chats "${CHATS:-1000}" \
	-tenants "${TENANTS:-100}" \
	-dir "$work" \
	-out "$out" ${PROFILE:+-profile} ${GOMEMLIMIT_SERVICE:+-gomemlimit "$GOMEMLIMIT_SERVICE"}
echo "results written to $out" >&2
