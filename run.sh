#!/usr/bin/env bash
# Builds teamsbot into .cache/ and runs it with its embedded defaults.
#
# The listen address defaults to loopback so that local mode, the playground
# and the local development sign-in are on; set TICKETIQ_ADDR to listen
# elsewhere. Arguments go to teamsbot: ./run.sh help, ./run.sh config.
#
# The first build downloads the modules and compiles everything (minutes on
# a small machine); later ones compile only what changed. While it builds,
# a line says what go is doing, so that it is plain nothing hangs.
set -euo pipefail
cd "$(dirname "$0")"
export TICKETIQ_ADDR="${TICKETIQ_ADDR:-127.0.0.1:3978}"

bin=.cache/teamsbot

say() { printf 'run.sh: %s\n' "$*" >&2; }

if ! command -v go >/dev/null 2>&1; then
	say "Go is not installed: install Go 1.26 or newer, then run ./run.sh again"
	exit 1
fi

# progress reads go build -v's output: a package's import path as each is
# compiled, "go: downloading ..." as each module is fetched, anything else
# (a compile error) as it is. On a terminal one status line is rewritten;
# elsewhere (a log, CI) a status line is printed every 15 seconds. A package
# that compiles for minutes prints nothing, so the time moves the line too.
progress() {
	local tty=0 compiled=0 current="" line shown=0 rc
	[ -t 2 ] && tty=1
	status() {
		local elapsed=$((SECONDS - start))
		if [ "$tty" = 1 ]; then
			printf '\r\033[K  %dm%02ds  %d packages  %.60s' $((elapsed / 60)) $((elapsed % 60)) "$compiled" "$current" >&2
		elif [ $((SECONDS - shown)) -ge 15 ]; then
			shown=$SECONDS
			printf '  still building: %dm%02ds, %d packages so far\n' $((elapsed / 60)) $((elapsed % 60)) "$compiled" >&2
		fi
	}
	shown=$SECONDS
	while :; do
		rc=0
		IFS= read -r -t 2 line || rc=$?
		if [ "$rc" -gt 128 ]; then
			status # no line for a while: the time still moves
			continue
		fi
		if [ "$rc" != 0 ] && [ -z "$line" ]; then
			break # the end
		fi
		case "$line" in
		"go: downloading "*)
			current="downloading ${line#go: downloading }"
			[ "$tty" = 1 ] || printf '  %s\n' "$current" >&2
			;;
		*" "* | *:* | "#"*)
			[ "$tty" = 1 ] && printf '\r\033[K' >&2
			printf '%s\n' "$line" >&2
			;;
		*)
			compiled=$((compiled + 1))
			current="$line"
			;;
		esac
		status
		[ "$rc" != 0 ] && break
	done
	[ "$tty" = 1 ] && printf '\r\033[K' >&2
	return 0
}

if [ -x "$bin" ]; then
	say "building teamsbot (only what changed since the last build)…"
else
	say "building teamsbot (the first build downloads modules and takes a few minutes)…"
fi
start=$SECONDS
mkdir -p .cache
# Built beside the old binary, then moved over it: a teamsbot still
# running from it keeps its file.
if ! go build -v -o "$bin.new" ./cmd/teamsbot 2>&1 | progress; then
	rm -f "$bin.new"
	say "the build failed (the lines above say why)"
	exit 1
fi
mv -f "$bin.new" "$bin"
elapsed=$((SECONDS - start))
say "built in ${elapsed}s; starting teamsbot on http://$TICKETIQ_ADDR (it says where the playground is once it listens)"
exec "$bin" "$@"
