#!/bin/sh
# Prints the path of a Go toolchain new enough for this module (go.mod's
# `go` line), installing one when there is none:
#   1. `go` on $PATH, then /usr/local/go/bin/go, when new enough;
#   2. otherwise Debian's golang-go (bookworm: 1.19, too old to build this
#      module, but able to fetch modules) downloads the toolchain module
#      golang.org/toolchain@v0.0.1-go$GO_TOOLCHAIN.linux-$arch from the Go
#      module proxy into $1 (default build/tools/go) and that `go` is used.
# Usage: ensure-go.sh [DIR]   (make calls it once; the result is cached in DIR)
set -eu
GO_TOOLCHAIN=1.24.13
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/../../build/tools/go}
need=$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$here/go.mod")

new_enough() {  # new_enough GO: its version >= $need
  v=$("$1" env GOVERSION 2>/dev/null | sed 's/^go//; s/[^0-9.].*//') || return 1
  [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$need" "$v" | sort -V | head -1)" = "$need" ]
}

for candidate in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go \
                 "$dir/bin/go"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && new_enough "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done

bootstrap=$(command -v go 2>/dev/null || true)
if [ -z "$bootstrap" ]; then
  echo "ensure-go: installing Debian's golang-go to fetch Go $GO_TOOLCHAIN" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    golang-go ca-certificates >&2
  bootstrap=/usr/bin/go
fi
arch=$(uname -m); case $arch in x86_64) arch=amd64;; aarch64) arch=arm64;; esac
module="golang.org/toolchain@v0.0.1-go$GO_TOOLCHAIN.linux-$arch"
echo "ensure-go: fetching $module from the Go module proxy" >&2
modcache=$(mktemp -d)
GOFLAGS=-modcacherw GOMODCACHE=$modcache GOTOOLCHAIN=local GO111MODULE=on \
  "$bootstrap" mod download "$module" >&2
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
cp -r "$modcache/golang.org/toolchain@v0.0.1-go$GO_TOOLCHAIN.linux-$arch" "$dir"
rm -rf "$modcache"
chmod +x "$dir/bin/"* "$dir/pkg/tool/"*/* 2>/dev/null || true
new_enough "$dir/bin/go" || { echo "ensure-go: $dir/bin/go does not run" >&2; exit 1; }
echo "$dir/bin/go"
