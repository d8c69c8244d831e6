#!/usr/bin/env bash
# Makes the whole file system of the teamsbot container image as one tar
# archive, and nothing else goes into the image:
#
#   /teamsbot                            the static binary (CGO_ENABLED=0), version stamped
#   /etc/ssl/certs/ca-certificates.crt   this machine's CA certificates (Debian's ca-certificates)
#   /etc/passwd, /etc/group              one user, IMAGE_USER, not root (deploy/image.env)
#   /data/                               the volume's folder, the user's own, mode 0700
#
# Everything belongs to root and is read-only but the data folder. Names are
# sorted and every time is SOURCE_DATE_EPOCH (0 unless set), so that the
# same sources and Go make the same archive.
#
# deploy/image.sh runs it on the build machine; the Containerfile's first
# stage runs it inside Go's official image, for Docker. It needs go, GNU tar
# and /etc/ssl/certs/ca-certificates.crt.
#
# Usage:
#   deploy/rootfs.sh OUT.tar     VERSION (unset: --version's) is stamped into the binary
#   deploy/rootfs.sh --version   prints the version: git describe, or dev outside a checkout
set -euo pipefail

say() { printf 'rootfs.sh: %s\n' "$*" >&2; }

if [ $# -ne 1 ]; then
	say "usage: deploy/rootfs.sh OUT.tar | --version"
	exit 2
fi
# The output is named from where the script was called, before cd.
[ "$1" = --version ] || out=$(realpath -m -- "$1")
cd "$(dirname "$0")/.."

# The version: the nearest tag (or the commit) and -dirty for changes not
# committed; safe.directory, since a build container's checkout belongs to
# someone else.
version() {
	git -c safe.directory="$PWD" describe --tags --always --dirty 2>/dev/null || echo dev
}
if [ "$1" = --version ]; then
	version
	exit 0
fi

# shellcheck source=image.env
. deploy/image.env
version=${VERSION:-$(version)}
certs=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$certs" ]; then
	say "$certs is missing: install Debian's ca-certificates (apt-get install ca-certificates)"
	exit 1
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
data=${IMAGE_DATA#/}
mkdir -p "$dir/etc/ssl/certs" "$dir/$data"

# -s -w leave out the symbol table and DWARF, a third of the file: stack
# traces and Go's profiler read the runtime's own tables, which stay.
# -trimpath and no VCS stamp: the same sources build the same binary here
# and in a build container.
CGO_ENABLED=0 go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X main.version=$version" \
	-o "$dir/${IMAGE_ENTRYPOINT#/}" ./cmd/teamsbot
install -m 0444 "$certs" "$dir/etc/ssl/certs/ca-certificates.crt"
printf '%s:x:%d:%d::%s:/sbin/nologin\n' "$IMAGE_USER" "$IMAGE_UID" "$IMAGE_GID" "$IMAGE_DATA" >"$dir/etc/passwd"
printf '%s:x:%d:\n' "$IMAGE_USER" "$IMAGE_GID" >"$dir/etc/group"
chmod 0444 "$dir/etc/passwd" "$dir/etc/group"
chmod 0555 "$dir/${IMAGE_ENTRYPOINT#/}"
chmod 0755 "$dir/etc" "$dir/etc/ssl" "$dir/etc/ssl/certs"
chmod 0700 "$dir/$data"

# Two passes: root's files, then the data folder as the user's, whoever
# runs this (tar records the owners it is told).
tarflags=(--format=gnu --sort=name --mtime="@${SOURCE_DATE_EPOCH:-0}" --numeric-owner -C "$dir")
tar --create --file="$out" "${tarflags[@]}" --owner=0 --group=0 "${IMAGE_ENTRYPOINT#/}" etc
tar --append --file="$out" "${tarflags[@]}" --owner="$IMAGE_UID" --group="$IMAGE_GID" --no-recursion "$data"
