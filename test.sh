#!/usr/bin/env bash
# Runs the whole test suite. Installs what the tests need, only when it is
# missing: Debian's chromium (and Node.js with npm) after one apt-get update,
# and the npm test peers from package-lock.json. Extra arguments go to the
# first `go test` (for example -count=1 or -run).
set -euo pipefail
cd "$(dirname "$0")"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
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

go vet ./...
go test "$@" ./...
# Every benchmark once, so none of them rots between measurements.
go test -run '^$' -bench . -benchtime=1x ./...
# The Bot Framework endpoint runs many turns at once: prove it race-free.
go test -race ./bot/...
# Every fuzzer for a short bounded time, one at a time, from its committed
# corpus (testdata/fuzz/...): the activity decoder, the token validator,
# the frame-token parser, the bridge's server side, the CSP builder, the
# resource and tool checks, and the configuration parser. FUZZTIME=0 skips
# them; docs/security.md says what each proves.
fuzztime=${FUZZTIME:-8s}
if [ "$fuzztime" != 0 ]; then
	while read -r pkg name; do
		go test -run '^$' -fuzz "^${name}\$" -fuzztime="$fuzztime" "$pkg"
	done <<'LIST'
./bot FuzzActivity
./bot FuzzToken
./viewpage FuzzFrameTokenVerify
./viewpage FuzzCallBody
./mcpapps FuzzBuildCSP
./mcpapps FuzzCheckResource
./mcpapps FuzzReadToolUI
./cmd/teamsbot FuzzConfig
LIST
fi
