#!/usr/bin/env bash
# Builds the teamsbot container image with Debian's podman (or buildah when
# podman is missing), offline: no base image is downloaded. deploy/rootfs.sh
# makes the image's whole file system here (the static binary, the CA
# certificates, one non-root user, the data folder), and the image is the
# final stage of the repository's Containerfile (FROM scratch) over it,
# the very text Docker builds, with the files that the Containerfile's first
# stage would have made in Go's official image. docs/container.md says more.
#
#   IMAGE    the image's name (default localhost/teamsbot:<version>)
#   VERSION  the version stamped into the binary and the image's label
#            (default: git describe, as deploy/rootfs.sh --version prints it)
#
# The image's name is the last line printed. podman's (or buildah's)
# storage is the usual one, or what CONTAINERS_STORAGE_CONF names.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'image.sh: %s\n' "$*" >&2; }

if command -v podman >/dev/null 2>&1; then
	build=(podman build)
elif command -v buildah >/dev/null 2>&1; then
	build=(buildah build)
else
	say "neither podman nor buildah is installed: apt-get install podman (or buildah)"
	exit 1
fi

version=${VERSION:-$(deploy/rootfs.sh --version)}
image=${IMAGE:-localhost/teamsbot:$version}

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

say "building the static binary and the file system (the first build compiles everything: minutes)…"
VERSION=$version deploy/rootfs.sh "$ctx/rootfs.tar"

# The Containerfile's first stage, named rootfs as there, is the archive
# unpacked (ADD keeps its owners); its final stage follows as written.
final=$(sed -n '/^FROM scratch$/,$p' Containerfile)
if [ -z "$final" ]; then
	say "the Containerfile has no final stage starting with a line FROM scratch"
	exit 1
fi
printf 'FROM scratch AS rootfs\nADD rootfs.tar /rootfs/\n\n%s\n' "$final" >"$ctx/Containerfile"

say "building $image with ${build[*]}…"
"${build[@]}" --pull=never --layers=false --build-arg VERSION="$version" \
	--file "$ctx/Containerfile" --tag "$image" "$ctx" >&2
echo "$image"
