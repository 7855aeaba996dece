#!/usr/bin/env bash
# Prints the path of the OpenTofu binary that the provider's acceptance
# test drives, building it first when this machine has none: from the Go
# module proxy (no download site needed), at the version pinned here, into
# the user's cache directory beside the Kubernetes API server of the
# tests. `go install` refuses OpenTofu's module (its go.mod replaces hcl
# with OpenTofu's fork), so the module's source is downloaded and built
# inside itself. Several callers at once build it once (flock).
#   scripts/tofu.sh            # prints the binary's path
set -euo pipefail

version=v1.12.6
cache="${XDG_CACHE_HOME:-$HOME/.cache}/better-compute"
bin="$cache/tofu-$version"

if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
mkdir -p "$cache"
exec 9>"$bin.lock"
flock 9
# Another caller may have built it while this one waited.
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi

start=$SECONDS
echo "building OpenTofu $version from the Go module proxy (once per machine; a few minutes)" >&2
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
# The module cache is read-only: build a writable copy, outside any
# module of ours, so that no go.mod of this repository is consulted.
src=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/opentofu/opentofu@$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "OpenTofu $version: no module source from the proxy" >&2; exit 1; }
cp -R "$src" "$work/src"
chmod -R u+w "$work/src"
# dev=no makes it a release build (no "-dev" in its version), as the
# project's release builds set it.
(cd "$work/src" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-X github.com/opentofu/opentofu/version.dev=no" -o "$bin.tmp" ./cmd/tofu)
mv "$bin.tmp" "$bin"
echo "built $bin in $((SECONDS - start)) s" >&2
echo "$bin"
