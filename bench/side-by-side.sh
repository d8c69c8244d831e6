#!/usr/bin/env bash
# Side-by-side load benchmark: teamsbot, the botbuilder reference
# bot and a floor bot on one fake Bot Connector over https; the view path
# against a no-op floor; the store with 1,000,000 views. Every process
# listens on 127.0.0.1 and every load is bounded in count and time; the whole
# run takes three to four minutes. docs/performance.md explains the figures.
#
#   bench/side-by-side.sh                      results in bench/results.md
#   ROUNDS=5 SECONDS_PER=4 bench/side-by-side.sh
#   VIEWS=0 bench/side-by-side.sh              skip the store measurement
#   KEEP=1 bench/side-by-side.sh               keep the working folder: the bots' logs, and 2.5 GB of store
#   ROUNDS=1 SECONDS_PER=1 VIEWS=2000 PROFILE=1 OUT=/tmp/s.md bench/side-by-side.sh   once, briefly (./test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

# The botbuilder reference comes from package-lock.json.
stamp=node_modules/.teamsbot-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -d node_modules/botbuilder ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
	npm ci --no-audit --no-fund --loglevel=error
	echo "$want" >"$stamp"
fi

work=$(mktemp -d -t teamsbot-bench-XXXXXX)
# The folder holds the bots' logs; it is kept when the run fails or KEEP=1.
trap 'status=$?; if [ "$status" -ne 0 ] || [ -n "${KEEP:-}" ]; then echo "working folder kept: $work" >&2; else rm -rf "$work"; fi' EXIT
go build -o "$work/teamsbot" ./cmd/teamsbot
go build -o "$work/load" ./bench/load

out=${OUT:-bench/results.md}
timeout 900 "$work/load" side-by-side \
	-teamsbot "$work/teamsbot" \
	-botbuilder bench/reference/botbuilder/bot.js \
	-rounds "${ROUNDS:-3}" \
	-seconds "${SECONDS_PER:-3}s" \
	-views "${VIEWS:-1000000}" \
	-dir "$work" \
	-out "$out" ${PROFILE:+-profile}
echo "results written to $out" >&2
