#!/bin/sh
# Regenerates chunkdpb/ from ../../proto with protoc and the pinned plugins
# (protoc-gen-go, protoc-gen-go-grpc on $PATH; `make go-tools` installs them
# into build/tools/bin). With an argument, writes into that directory instead
# (the up-to-date check of `make test` compares the two).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
protoc -I "$here/../../proto" \
  --go_out="$out" --go_opt=module=github.com/chunkd/chunkd/clients/go \
  --go-grpc_out="$out" --go-grpc_opt=module=github.com/chunkd/chunkd/clients/go \
  chunkd/v1/chunkd.proto
