#!/usr/bin/env bash
# Replicas benchmark: turns per second of two teamsbot replicas on one
# PostgreSQL database against one teamsbot on its bbolt file, and the store's
# view write and read on both backends. Starts a PostgreSQL cluster of its own
# in a temporary folder, with the server's default durability (fsync on), on
# loopback TCP; stops and deletes it at the end. Every process listens on
# 127.0.0.1 and every load is bounded; the whole run takes about two minutes.
#
#   bench/replicas.sh                     results in bench/replicas.md
#   ROUNDS=5 SECONDS_PER=4 bench/replicas.sh
#   BENCHTIME=1x ROUNDS=1 SECONDS_PER=1 OUT=/tmp/r.md bench/replicas.sh   once, briefly (./test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pgbin" ]; then
	echo "bench/replicas.sh: PostgreSQL is not installed (./test.sh installs Debian's postgresql)" >&2
	exit 1
fi
work=$(mktemp -d /tmp/teamsbot-replicas-XXXXXX)
as_pg() { "$@"; }
if [ "$(id -u)" -eq 0 ]; then
	chown postgres "$work"
	as_pg() { runuser -u postgres -- "$@"; }
fi
trap 'as_pg "$pgbin/pg_ctl" -D "$work/pg" -m fast stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_pg "$pgbin/initdb" -D "$work/pg" -A trust -U teamsbot -E UTF8 >/dev/null
as_pg "$pgbin/pg_ctl" -D "$work/pg" -l "$work/pg.log" -w \
	-o "-k $work -c listen_addresses=127.0.0.1 -c port=$port -c max_connections=200" start >/dev/null
url="postgres://teamsbot@127.0.0.1:$port/postgres?sslmode=disable"

bin=$(mktemp -d)
trap 'as_pg "$pgbin/pg_ctl" -D "$work/pg" -m fast stop >/dev/null 2>&1 || true; rm -rf "$work" "$bin"' EXIT
go build -o "$bin/teamsbot" ./cmd/teamsbot
go build -o "$bin/load" ./bench/load

out=${OUT:-bench/replicas.md}
TEAMSBOT_TEST_DATABASE_URL=$url go test -run '^$' -bench 'SaveRun|ViewRead' -benchtime="${BENCHTIME:-2s}" ./store | grep -E '^Benchmark'
timeout 900 "$bin/load" replicas -teamsbot "$bin/teamsbot" -database "$url" \
	-rounds "${ROUNDS:-3}" -seconds "${SECONDS_PER:-3}s" -out "$out"
echo "results written to $out" >&2
