#!/usr/bin/env bash
# Runs the whole test suite. Installs what the tests need, only when it is
# missing: Debian's chromium, postgresql, podman (which builds and runs the
# container image, deploy/image_test.go), ca-certificates (which the image
# holds) and Node.js with npm, after one apt-get update; and the npm test
# peers from package-lock.json. Starts a throwaway PostgreSQL cluster in a
# temporary folder, on a Unix socket there, for the tests of the
# PostgreSQL store, and stops it at the end.
# Extra arguments go to the first `go test` (for example -count=1 or -run).
set -euo pipefail
cd "$(dirname "$0")"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
[ -n "$(pg_bin)" ] && [ -x "$(pg_bin)/initdb" ] || missing+=(postgresql)
command -v podman >/dev/null 2>&1 || missing+=(podman)
[ -s /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
if [ ${#missing[@]} -gt 0 ]; then
	echo "test.sh: installing ${missing[*]}"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm ci only when node_modules does not match the committed lock file.
stamp=node_modules/.teamsbot-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
	echo "test.sh: installing the npm test peers"
	npm ci --no-audit --no-fund --loglevel=error
	echo "$want" >"$stamp"
fi

# A throwaway PostgreSQL: initdb and pg_ctl refuse to run as root, so as
# root the cluster belongs to the postgres user (made by Debian's
# package), otherwise to whoever runs the tests. fsync is off: the cluster
# is deleted at the end. Each test makes a database of its own in it
# (internal/pgtest).
pgbin=$(pg_bin)
# /tmp, not TMPDIR: as root, the postgres user must reach the folder.
pgdir=$(mktemp -d /tmp/teamsbot-pg.XXXXXX)
as_pg() { "$@"; }
if [ "$(id -u)" -eq 0 ]; then
	chown postgres "$pgdir"
	as_pg() { runuser -u postgres -- "$@"; }
fi
stop_pg() {
	as_pg "$pgbin/pg_ctl" -D "$pgdir/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$pgdir"
}
trap stop_pg EXIT
as_pg "$pgbin/initdb" -D "$pgdir/data" -A trust -U teamsbot -E UTF8 --no-sync >/dev/null
as_pg "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w \
	-o "-k $pgdir -c listen_addresses='' -c fsync=off -c max_connections=300" start >/dev/null
export TEAMSBOT_TEST_DATABASE_URL="postgres:///postgres?host=$pgdir&user=teamsbot"

go vet ./...
# deploy's TestImage compiles the static binary (CGO_ENABLED=0), which
# shares no compiled package with the rest: minutes on two cores from a
# cold cache, beside the other packages' tests, so past go test's default
# of 10 minutes a package.
go test -timeout=20m "$@" ./...
# Every benchmark once, so none of them rots between measurements: the
# packages' Go benchmarks, then the three load benchmarks briefly (one round
# of a second, a small store, 200 slow streamed turns, results to a
# temporary folder), so that
# every script under bench/ runs as docs/performance.md shows it. The
# load benchmarks' tables of such short runs mean nothing: their output is
# shown only when one fails.
BENCHTIME=1x bench/run.sh
benchout=$(mktemp -d)
quiet() {
	local log=$1
	shift
	if ! "$@" >"$log" 2>&1; then
		cat "$log"
		echo "test.sh: $* failed" >&2
		return 1
	fi
}
ROUNDS=1 SECONDS_PER=1 VIEWS=2000 PROFILE=1 OUT="$benchout/side-by-side.md" \
	quiet "$benchout/side-by-side.log" bench/side-by-side.sh
BENCHTIME=1x ROUNDS=1 SECONDS_PER=1 OUT="$benchout/replicas.md" \
	quiet "$benchout/replicas.log" bench/replicas.sh
TURNS=200 CHATS=20 TENANTS=2 OUT="$benchout/streams.md" \
	quiet "$benchout/streams.log" bench/streams.sh
echo "test.sh: bench/side-by-side.sh, bench/replicas.sh and bench/streams.sh ran once, briefly"
rm -rf "$benchout"
# The Bot Framework endpoint runs many turns at once: prove it race-free.
go test -race ./bot/...
# Every fuzzer for a short bounded time, one at a time, from its committed
# corpus (testdata/fuzz/...): the activity decoder, the token validator,
# the frame-token parser, the bridge's server side, the view CSP builder,
# the resource and tool checks, a view's connection allowlist, the stored
# policy parser, the configuration parser, the Cedar policy
# parser within its limits, and the reading of a server's question and
# the person's answer. FUZZTIME=0 skips
# them; docs/security.md says what each proves.
fuzztime=${FUZZTIME:-8s}
if [ "$fuzztime" != 0 ]; then
	# Go 1.26's fuzzing coordinator can report "context deadline exceeded"
	# when -fuzztime ends while a worker is mid-input, with no failing
	# input found (go.dev/issue/75804, fixed in Go 1.27). Such a run is
	# tried once more; a failure that wrote a failing input under
	# testdata/fuzz/ fails at once.
	fuzz_one() {
		local pkg=$1 name=$2 out
		local dir="$pkg/testdata/fuzz/$name"
		local before
		before=$(ls "$dir" 2>/dev/null || true)
		if out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime="$fuzztime" "$pkg" 2>&1); then
			echo "$out" | tail -n 1
			return 0
		fi
		echo "$out"
		if [ "$(ls "$dir" 2>/dev/null || true)" = "$before" ] && grep -q 'context deadline exceeded' <<<"$out"; then
			echo "test.sh: $name stopped on Go's fuzzing deadline race with no failing input; running it once more"
			go test -run '^$' -fuzz "^${name}\$" -fuzztime="$fuzztime" "$pkg"
			return
		fi
		return 1
	}
	while read -r pkg name; do
		fuzz_one "$pkg" "$name"
	done <<'LIST'
./bot FuzzActivity
./bot FuzzToken
./viewpage FuzzFrameTokenVerify
./viewpage FuzzCallBody
./mcpapps FuzzBuildCSP
./mcpapps FuzzCheckResource
./mcpapps FuzzReadToolUI
./mcpapps FuzzConnectionAllowlist
./internal/web/csp FuzzParse
./cmd/teamsbot FuzzConfig
./access FuzzParsePolicies
./elicit FuzzParseAndCheck
LIST
fi
