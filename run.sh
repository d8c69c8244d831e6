#!/usr/bin/env bash
# Runs the service with its embedded defaults. The listen address defaults to
# loopback so that the local development sign-in (offered only on loopback) is
# on; set TICKETIQ_ADDR to listen elsewhere.
set -euo pipefail
cd "$(dirname "$0")"
export TICKETIQ_ADDR="${TICKETIQ_ADDR:-127.0.0.1:3978}"
exec go run ./cmd/teamsbot "$@"
