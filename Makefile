# chunkd: `make run` and `make test` do all the set-up on a fresh Debian
# bookworm machine: missing Debian packages, the CMake build (Release, in
# build/) and the Python virtualenv (.venv/) for the client and the tests.
# Every step is skipped when nothing it depends on changed.

BUILD_DIR ?= build
VENV      ?= .venv
PYTHON    ?= python3
LISTEN    ?= 127.0.0.1:50051
METRICS   ?= 127.0.0.1:9464
# make run keeps its index in the build tree, so a restart loses nothing;
# INDEX=memory for a throwaway one.
INDEX     ?= rocksdb://$(abspath $(BUILD_DIR))/index

APT_PACKAGES := build-essential cmake ninja-build pkg-config git \
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev \
  libabsl-dev libssl-dev libxxhash-dev libhiredis-dev librocksdb-dev \
  prometheus-cpp-dev \
  libgtest-dev libgmock-dev libbenchmark-dev redis-server prometheus \
  python3 python3-venv python3-pip openssl

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEPS_STAMP := $(BUILD_DIR)/.deps-installed
VENV_STAMP := $(VENV)/.installed
# The abuse tests' raw HTTP/2 client (tests/integration/h2raw.py) encodes
# headers with h2's hpack. tests/e2e/test_cli_contract.py validates the
# CLIs' JSON against docs/cli-output.schema.json with jsonschema. The
# soak (tests/soak) and bench-chunking draw their pictures with matplotlib.
H2_VERSION := 4.4.1
JSONSCHEMA_VERSION := 4.26.0
MATPLOTLIB_VERSION := 3.11.2
PY_SOURCES := $(shell find clients/python -name '*.py' -not -path '*/_proto/*' \
  -not -path '*/build/*' 2>/dev/null) clients/python/pyproject.toml \
  proto/chunkd/v1/chunkd.proto

.PHONY: all deps build run test test-cpp test-python test-chart test-deploy \
  test-go test-lizard go-tools go-generate go-stubs-check tables tables-check clean

all: build

$(DEPS_STAMP): Makefile
	@missing=$$(for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@mkdir -p $(BUILD_DIR) && touch $@

deps: $(DEPS_STAMP)

$(BUILD_DIR)/build.ninja: $(DEPS_STAMP)
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR)

$(VENV_STAMP): $(DEPS_STAMP) $(PY_SOURCES)
	[ -x $(VENV)/bin/python ] || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e 'clients/python[test]'
	$(VENV)/bin/pip install -q h2==$(H2_VERSION) jsonschema==$(JSONSCHEMA_VERSION) \
	  matplotlib==$(MATPLOTLIB_VERSION)
	touch $@

run: build
	exec $(BUILD_DIR)/server/chunkd --listen $(LISTEN) \
	  --metrics_listen $(METRICS) --index $(INDEX)

test-cpp: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j 2

# (More prerequisites of test-python in the Go clients section below.)
test-python: build $(VENV_STAMP) tables-check
	CHUNKD_GO_BIN=$(CHUNKD_GO_BIN) GRPCURL_BIN=$(TOOLS_BIN)/grpcurl \
	  UPSTREAM_CHUNK_BIN=$(UPSTREAM_CHUNK_BIN) \
	  BUF_BIN=$(TOOLS_BIN)/buf RELEASED_PROTO=$(RELEASED_PROTO) \
	  UPSTREAM_FASTCDC_BIN=$(if $(HAVE_CARGO),$(UPSTREAM_FASTCDC_BIN)) \
	  $(VENV)/bin/python -m pytest -q clients/python/tests tests/e2e tests/integration tests/build

test: test-cpp test-python test-chart test-deploy test-go test-lizard test-soak

# `make soak`: the fleet soak (tests/soak/soak.py): 3 chunkd replicas on a
# 3 + 3 Redis Cluster, clients of every language, faults on a schedule, for
# SOAK_MINUTES minutes; the report (JSON and a picture) goes to
# $(BUILD_DIR)/soak and into docs/operations.md. `make test-soak` (part of `make test`) runs a 3-minute
# slice of it (tests/soak/test_soak.py) into $(BUILD_DIR)/soak-slice.
SOAK_MINUTES ?= 30
.PHONY: soak test-soak

soak: build $(VENV_STAMP) $(CHUNKD_GO_BIN)
	$(VENV)/bin/python tests/soak/soak.py --minutes $(SOAK_MINUTES) \
	  --out $(BUILD_DIR)/soak --chunkd-go $(CHUNKD_GO_BIN) --docs

test-soak: build $(VENV_STAMP) $(CHUNKD_GO_BIN)
	CHUNKD_GO_BIN=$(CHUNKD_GO_BIN) $(VENV)/bin/python -m pytest -q tests/soak

# `make crash-test`: the crash test of the RocksDB index
# (tests/integration/test_rocksdb_crash.py) with KILLS SIGKILLs per sync
# mode (always, batch, none: 3 x KILLS in all) instead of the 20 of
# `make test`; it prints what it did and found per mode. CRASH_SEED picks
# the data, the operations and the kill points.
KILLS      ?= 70
CRASH_SEED ?= 29
.PHONY: crash-test

crash-test: build $(VENV_STAMP)
	CHUNKD_CRASH_KILLS=$(KILLS) CHUNKD_CRASH_SEED=$(CRASH_SEED) \
	  $(VENV)/bin/python -m pytest -q -s tests/integration/test_rocksdb_crash.py

# `make test-lizard`: no function in server/ or clients/ longer than 100
# lines or of cyclomatic complexity over 25, by lizard (pinned, installed
# into the venv through its own stamp). Generated code is not checked: the
# Go stubs, the Python stubs and build directories.
LIZARD_VERSION := 1.24.3
LIZARD_STAMP   := $(VENV)/.lizard-$(LIZARD_VERSION)
LIZARD_ARGS    := --CCN 25 --length 100 --warnings_only \
  -x 'clients/go/chunkdpb/*' -x 'clients/python/src/chunkd_client/_proto/*' \
  -x '*/build/*'

$(LIZARD_STAMP): $(VENV_STAMP)
	$(VENV)/bin/pip install -q lizard==$(LIZARD_VERSION)
	rm -f $(VENV)/.lizard-* && touch $@

test-lizard: $(LIZARD_STAMP)
	$(VENV)/bin/lizard $(LIZARD_ARGS) server clients

# `make bench` runs the nine below, then bench-docs. bench-chunking: the
# chunking benchmarks (server/bench/), then a table and a chart under
# $(BENCH_DIR). BENCH_ARGS go to chunking_bench
# (Google Benchmark flags, or e.g. --threads=1,2,4 --size=BYTES); the best of
# the repetitions is reported, in random order so that load from other work
# on the machine spreads over all of them.
BENCH_DIR   ?= $(BUILD_DIR)/bench
BENCH_ARGS  ?= --benchmark_repetitions=5 --benchmark_min_time=0.2 \
  --benchmark_enable_random_interleaving=true

# bench-index: the Redis index's bucket layout and chunkd 0.3's key-per-entry
# layout on the same private redis-server, same run: used_memory per entry
# after fills of 1M and 10M entries (without and with hints), and Redis CPU
# per operation at each fill vs redis-benchmark -P 64's SET; and
# the memory index's bytes per entry at 1M and 10M entries and operations
# per second, each vs the map design it replaced, same run; the rocksdb
# index's disk bytes per entry, open time and operations per second with a
# cache that fits vs a tenth of the index, at 10M entries.
# bench-dedup: Dedup end to end (chunkctl over loopback gRPC) with the
# memory, rocksdb and redis indexes, same run: MB/s and server CPU per GB
# (DEDUP_BENCH_ARGS="--baseline-chunkd PATH": another chunkd binary on Redis
# beside this one). Both print ratios and write them
# under $(BENCH_DIR).
INDEX_BENCH_ARGS ?=
ROCKSDB_BENCH_ARGS ?=
DEDUP_BENCH_ARGS ?= --size 268435456 --repetitions 5

# bench-service: the server's CPU seconds per GB for Chunk and Dedup (memory
# and, with redis-server on PATH, Redis index) over loopback gRPC vs a raw
# gRPC byte sink, 1 and 8 streams, the client in a separate process. bench-rapid: Dedup with RapidCDC hints vs without.
# bench-sha256: SHA-256 of chunks, OpenSSL one at a time vs the multi-buffer
# backends, one thread, with the memory-read ceiling; a table of ratios.
# bench-content-key: the keyed content hash (AES-GMAC, both backends) beside
# XXH3-128 and SHA-256 on 4, 16 and 64 KiB inputs, one thread.
# bench-docs: rebuilds docs/benchmarks.md from the pieces under $(BENCH_DIR)
# (docs/assemble_benchmarks.py): each section whose piece is newer than its
# table gets the new one, stamped with when and where it ran; the others keep
# theirs. `make bench` runs it last.
.PHONY: bench bench-chunking bench-index bench-dedup bench-service bench-rapid \
  bench-sha256 bench-content-key bench-upstream bench-crate bench-docs

bench: bench-chunking bench-index bench-dedup bench-service bench-rapid \
  bench-sha256 bench-content-key bench-upstream bench-crate
	$(PYTHON) docs/assemble_benchmarks.py --bench-dir $(BENCH_DIR) \
	  --doc docs/benchmarks.md

bench-docs:
	$(PYTHON) docs/assemble_benchmarks.py --bench-dir $(BENCH_DIR) \
	  --doc docs/benchmarks.md

SHA256_BENCH_ARGS ?= --benchmark_repetitions=5 --benchmark_min_time=0.2 \
  --benchmark_enable_random_interleaving=true

bench-sha256: build
	@mkdir -p $(BENCH_DIR)
	$(BUILD_DIR)/server/bench/sha256_bench $(SHA256_BENCH_ARGS) \
	  | tee $(BENCH_DIR)/sha256.txt

CONTENT_KEY_BENCH_ARGS ?= --benchmark_repetitions=5 \
  --benchmark_min_time=0.2 --benchmark_enable_random_interleaving=true

bench-content-key: build
	@mkdir -p $(BENCH_DIR)
	$(BUILD_DIR)/server/bench/content_key_bench $(CONTENT_KEY_BENCH_ARGS) \
	  | tee $(BENCH_DIR)/content_key.txt

bench-service: build
	@mkdir -p $(BENCH_DIR)
	$(BUILD_DIR)/server/bench/service_bench --markdown $(BENCH_DIR)/service.md

bench-rapid: build
	@mkdir -p $(BENCH_DIR)
	$(BUILD_DIR)/server/bench/rapid_bench --markdown $(BENCH_DIR)/rapid.md

bench-index: build
	@mkdir -p $(BENCH_DIR)
	$(BUILD_DIR)/server/bench/index_bench $(INDEX_BENCH_ARGS) \
	  | tee $(BENCH_DIR)/index.txt
	$(BUILD_DIR)/server/bench/memory_index_footprint \
	  | tee $(BENCH_DIR)/index_memory.txt
	$(BUILD_DIR)/server/bench/rocksdb_index_bench $(ROCKSDB_BENCH_ARGS) \
	  | tee $(BENCH_DIR)/index_rocksdb.md

bench-dedup: build $(VENV_STAMP)
	@mkdir -p $(BENCH_DIR)
	$(VENV)/bin/python server/bench/dedup_bench.py \
	  --chunkd $(BUILD_DIR)/server/chunkd \
	  --chunkctl $(BUILD_DIR)/clients/cli/chunkctl \
	  --markdown $(BENCH_DIR)/dedup.md $(DEDUP_BENCH_ARGS)

bench-chunking: build $(VENV_STAMP)
	@mkdir -p $(BENCH_DIR)
	$(BUILD_DIR)/server/bench/chunking_bench \
	  --benchmark_out=$(BENCH_DIR)/results.json --benchmark_out_format=json \
	  $(BENCH_ARGS)
	$(VENV)/bin/python server/bench/report.py $(BENCH_DIR)/results.json \
	  --markdown $(BENCH_DIR)/results.md --png $(BENCH_DIR)/throughput.png
	@cat $(BENCH_DIR)/results.md
	@echo "Wrote $(BENCH_DIR)/results.md and $(BENCH_DIR)/throughput.png"

# `make test-chart`: helm lint and helm template of helm/chunkd for the default
# values and every helm/chunkd/ci/*.yaml, each manifest validated strictly and
# offline by kubeconform against the Kubernetes $(KUBE_VERSION) schemas of the
# kubernetes-validate PyPI package plus the ServiceMonitor, PodMonitor and
# PrometheusRule CRDs of the prometheus-operator Go module; values that break values.schema.json must
# fail. `make test-deploy`: the Dockerfile (packages, CMake configuration,
# runtime libraries, HEALTHCHECK against a real chunkd), the compose stack
# (promtool) and the chart's flagfile and health probes against a real chunkd.
# The tools are built once with `go install` at pinned versions into
# $(TOOLS_BIN) (a stamp per version) with the Go chosen below.
GO                          ?= $(shell command -v go || echo /usr/local/go/bin/go)
# The Go make uses (see "A Go for fresh machines" at the end): $(GO) when it
# is at least the newest `go` line of the repository's Go modules, else Go
# $(GO_FETCH_VERSION), installed from the Go module proxy. GOTOOLCHAIN=local:
# no Go step downloads another toolchain unannounced.
export GOTOOLCHAIN          := local
GO_MODULES                  := clients/go/go.mod deploy/probe/go.mod tests/upstream/go.mod
GO_FETCH_VERSION            := 1.26.8
GO_FETCH_DIR                ?= .tools/go
GO_NEEDED                   := $(shell sed -n 's/^go \([0-9][0-9.]*\).*/\1/p' $(GO_MODULES) | sort -V | tail -n 1)
GO_FOUND_VERSION            := $(shell $(GO) version 2>/dev/null | sed -n 's/^go version go\([0-9][0-9.]*\).*/\1/p')
GO_NEW_ENOUGH               := $(shell [ -n '$(GO_FOUND_VERSION)' ] && printf '%s\n%s\n' '$(GO_NEEDED)' \
  '$(GO_FOUND_VERSION)' | sort -V | head -n 1 | grep -qx '$(GO_NEEDED)' && echo yes)
GO_FETCH_STAMP              := $(GO_FETCH_DIR)/.fetched-$(GO_FETCH_VERSION)
ifneq ($(GO_NEW_ENOUGH),yes)
GO_FETCH_WHY := $(if $(GO_FOUND_VERSION),Go $(GO_FOUND_VERSION) is too old for the Go modules \
  (needs $(GO_NEEDED)),no Go at $(GO) for the Go modules (needs $(GO_NEEDED)))
override GO := $(abspath $(GO_FETCH_DIR))/bin/go
GO_WILL_FETCH := yes
endif
TOOLS_BIN                   := $(abspath $(BUILD_DIR))/tools/bin
HELM_VERSION                := v3.19.5
KUBECONFORM_VERSION         := v0.7.0
PROMETHEUS_OPERATOR_VERSION := v0.85.0
KUBERNETES_VALIDATE_VERSION := 1.37.0
KUBE_VERSION                := 1.30.0
HELM_STAMP        := $(TOOLS_BIN)/.helm-$(HELM_VERSION)
KUBECONFORM_STAMP := $(TOOLS_BIN)/.kubeconform-$(KUBECONFORM_VERSION)
HEALTH_PROBE      := $(TOOLS_BIN)/grpc_health_probe
SCHEMA_DIR        := $(abspath $(BUILD_DIR))/kubeconform-schemas
SCHEMA_STAMP      := $(SCHEMA_DIR)/.v$(KUBE_VERSION)-$(PROMETHEUS_OPERATOR_VERSION)-monitors-rules
DEPLOY_VENV_STAMP := $(VENV)/.deploy-installed
DEPLOY_TEST_ENV   := HELM=$(TOOLS_BIN)/helm KUBECONFORM=$(TOOLS_BIN)/kubeconform \
  KUBECONFORM_SCHEMAS=$(SCHEMA_DIR) KUBE_VERSION=$(KUBE_VERSION) \
  GRPC_HEALTH_PROBE=$(HEALTH_PROBE)

$(HELM_STAMP):
	@mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) GOFLAGS=-buildvcs=false $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	rm -f $(TOOLS_BIN)/.helm-* && touch $@

$(KUBECONFORM_STAMP):
	@mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) GOFLAGS=-buildvcs=false $(GO) install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)
	rm -f $(TOOLS_BIN)/.kubeconform-* && touch $@

# The same pinned build (go.mod, go.sum) as the image's.
$(HEALTH_PROBE): deploy/probe/go.mod deploy/probe/go.sum
	@mkdir -p $(TOOLS_BIN)
	cd deploy/probe && CGO_ENABLED=0 GOFLAGS=-buildvcs=false $(GO) build -trimpath \
	  -ldflags=-s -o $@ github.com/grpc-ecosystem/grpc-health-probe

$(DEPLOY_VENV_STAMP): $(VENV_STAMP)
	$(VENV)/bin/pip install -q kubernetes-validate==$(KUBERNETES_VALIDATE_VERSION) PyYAML
	touch $@

$(SCHEMA_STAMP): $(DEPLOY_VENV_STAMP) tests/deploy/kubeconform_schemas.py
	rm -rf $(SCHEMA_DIR)
	operator=$$($(GO) mod download -json \
	  github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION) \
	  | $(VENV)/bin/python -c 'import json, sys; print(json.load(sys.stdin)["Dir"])') && \
	$(VENV)/bin/python tests/deploy/kubeconform_schemas.py \
	  --kubernetes-version $(KUBE_VERSION) --out $(SCHEMA_DIR) \
	  --crd $$operator/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml \
	  --crd $$operator/example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml \
	  --crd $$operator/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml
	touch $@

test-chart: $(HELM_STAMP) $(KUBECONFORM_STAMP) $(SCHEMA_STAMP) $(DEPLOY_VENV_STAMP)
	$(DEPLOY_TEST_ENV) $(VENV)/bin/python -m pytest -q tests/deploy/test_chart.py

test-deploy: build $(HELM_STAMP) $(HEALTH_PROBE) $(DEPLOY_VENV_STAMP)
	$(DEPLOY_TEST_ENV) $(VENV)/bin/python -m pytest -q tests/deploy \
	  --ignore tests/deploy/test_chart.py

# Go clients: the module clients/go, its example command chunkd-go, and
# grpcurl for the interop tests, built with `go install` at pinned versions
# into $(TOOLS_BIN) (a stamp per version). `make test-go` runs the module's
# tests against build/server/chunkd and fails when the committed stubs
# (clients/go/chunkdpb) differ from what protoc and the pinned plugins make.
PROTOC_GEN_GO_VERSION      := v1.36.11
PROTOC_GEN_GO_GRPC_VERSION := v1.6.1
GRPCURL_VERSION            := v1.9.3
PROTOC_GEN_GO_STAMP := $(TOOLS_BIN)/.protoc-gen-go-$(PROTOC_GEN_GO_VERSION)-$(PROTOC_GEN_GO_GRPC_VERSION)
GRPCURL_STAMP       := $(TOOLS_BIN)/.grpcurl-$(GRPCURL_VERSION)
CHUNKD_GO_BIN       := $(TOOLS_BIN)/chunkd-go
GO_CLIENT_SOURCES   := $(shell find clients/go -name '*.go' 2>/dev/null) \
  clients/go/go.mod clients/go/go.sum

$(PROTOC_GEN_GO_STAMP):
	@mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) GOFLAGS=-buildvcs=false $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(TOOLS_BIN) GOFLAGS=-buildvcs=false $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	rm -f $(TOOLS_BIN)/.protoc-gen-go-* && touch $@

$(GRPCURL_STAMP):
	@mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) GOFLAGS=-buildvcs=false $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)
	rm -f $(TOOLS_BIN)/.grpcurl-* && touch $@

go-tools: $(PROTOC_GEN_GO_STAMP) $(GRPCURL_STAMP)

# The proto as an API: `buf lint` (proto/buf.yaml: the STANDARD rules and
# COMMENTS, every element documented) and `buf breaking` against the proto
# of the last release, a copy kept in tests/build/released-proto/<version>
# (a release replaces it with its own). tests/build/test_proto.py runs both
# within `make test-python`; `make test-proto` runs that file alone.
BUF_VERSION      := v1.75.0
BUF_STAMP        := $(TOOLS_BIN)/.buf-$(BUF_VERSION)
RELEASED_PROTO   := tests/build/released-proto/0.4.0

$(BUF_STAMP):
	@mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) GOFLAGS=-buildvcs=false $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	rm -f $(TOOLS_BIN)/.buf-* && touch $@

.PHONY: test-proto
test-proto: $(BUF_STAMP) $(VENV_STAMP)
	BUF_BIN=$(TOOLS_BIN)/buf RELEASED_PROTO=$(RELEASED_PROTO) \
	  $(VENV)/bin/python -m pytest -q tests/build/test_proto.py

$(CHUNKD_GO_BIN): $(GO_CLIENT_SOURCES)
	@mkdir -p $(TOOLS_BIN)
	cd clients/go && GOFLAGS=-buildvcs=false $(GO) build -o $@ ./cmd/chunkd-go

# Regenerates clients/go/chunkdpb after a proto change (commit the result).
go-generate: $(PROTOC_GEN_GO_STAMP) $(DEPS_STAMP)
	PATH=$(TOOLS_BIN):$$PATH clients/go/generate.sh

# chunkd's tables (proto/chunkd/v1/tables.json: algorithms, parameter
# ranges, defaults, presets, the name rule, the clients' service config):
# CMake writes the C++ header at build time; the Python module and the Go
# package are committed, so that pip install and go build need no generator.
# `make tables` rewrites them; tables-check (run by test-python and test-go)
# fails when they differ from the table (docs/contributing.md).
tables:
	$(PYTHON) tools/gen_tables.py --python --go

tables-check:
	$(PYTHON) tools/gen_tables.py --check

go-stubs-check: $(PROTOC_GEN_GO_STAMP) $(DEPS_STAMP)
	@tmp=$$(mktemp -d) && PATH=$(TOOLS_BIN):$$PATH clients/go/generate.sh $$tmp && \
	  diff -r $$tmp/chunkdpb clients/go/chunkdpb; rc=$$?; rm -rf $$tmp; \
	  if [ $$rc != 0 ]; then echo "clients/go/chunkdpb is stale: run make go-generate" >&2; exit 1; fi

test-go: build go-stubs-check tables-check
	cd clients/go && $(GO) vet ./... && \
	  CHUNKD_BIN=$(abspath $(BUILD_DIR))/server/chunkd $(GO) test -count=1 ./...
	cd tests/upstream && GOFLAGS=-buildvcs=false $(GO) vet ./... && \
	  GOFLAGS=-buildvcs=false $(GO) test -count=1 ./...

test-python: $(CHUNKD_GO_BIN) $(GRPCURL_STAMP) $(BUF_STAMP)

# upstream-chunk: the upstream Go modules chunkd's algorithms match byte
# for byte (the "upstream" of their rows in proto/chunkd/v1/tables.json) (tests/upstream, its own go.mod and go.sum
# pinning go-cdc, restic/chunker and desync), cutting a file as `chunkctl
# chunk --fingerprint none` prints it. test-python compares every boundary
# with it (tests/integration/test_upstream_chunkers.py); bench-upstream
# times it beside chunkctl bench on the same bytes
# (server/bench/upstream_bench.py) and writes upstream.md; without Go it
# says so and skips.
UPSTREAM_CHUNK_BIN     := $(TOOLS_BIN)/upstream-chunk
UPSTREAM_CHUNK_SOURCES := $(shell find tests/upstream -name '*.go' 2>/dev/null) \
  tests/upstream/go.mod tests/upstream/go.sum
UPSTREAM_BENCH_ARGS    ?= --size 268435456

$(UPSTREAM_CHUNK_BIN): $(UPSTREAM_CHUNK_SOURCES)
	@mkdir -p $(TOOLS_BIN)
	cd tests/upstream && GOFLAGS=-buildvcs=false $(GO) build -o $@ ./cmd/upstream-chunk

test-python: $(UPSTREAM_CHUNK_BIN)

HAVE_GO := $(or $(GO_WILL_FETCH),$(shell command -v $(GO) >/dev/null 2>&1 && echo yes))
ifeq ($(HAVE_GO),)
bench-upstream:
	@echo "bench-upstream: skipped: no Go toolchain ($(GO)) to build upstream-chunk"
else
bench-upstream: build $(UPSTREAM_CHUNK_BIN)
	@mkdir -p $(BENCH_DIR)
	$(PYTHON) server/bench/upstream_bench.py --upstream-chunk $(UPSTREAM_CHUNK_BIN) \
	  --chunkctl $(BUILD_DIR)/clients/cli/chunkctl --dir $(BENCH_DIR) \
	  --markdown $(BENCH_DIR)/upstream.md $(UPSTREAM_BENCH_ARGS)
endif

# upstream-fastcdc: the Rust crate fastcdc 5.0.0, whose v2020 cut points
# chunkd's fastcdc reproduces byte for byte (tests/upstream-rust, its own
# Cargo.toml and Cargo.lock pinning it), cutting a file as `chunkctl chunk
# --fingerprint none` prints it; cargo builds it into $(CARGO_TARGET), and
# after the first fetch builds it offline. test-python compares every
# boundary with it (tests/integration/test_upstream_fastcdc.py, which skips
# saying why when there is no cargo); bench-crate times it beside chunkctl
# bench on the same bytes, checks the cut points of both in the same run
# (server/bench/crate_bench.py) and writes crate.md; without cargo it says so
# and skips.
CARGO                    ?= $(shell command -v cargo || echo $(HOME)/.cargo/bin/cargo)
CARGO_TARGET             := $(abspath $(BUILD_DIR))/tools/cargo
UPSTREAM_FASTCDC_BIN     := $(CARGO_TARGET)/release/upstream-fastcdc
UPSTREAM_FASTCDC_SOURCES := $(shell find tests/upstream-rust/src -name '*.rs' 2>/dev/null) \
  tests/upstream-rust/Cargo.toml tests/upstream-rust/Cargo.lock
CRATE_BENCH_ARGS         ?= --size 268435456
HAVE_CARGO := $(shell command -v $(CARGO) >/dev/null 2>&1 && echo yes)

# cargo leaves the binary alone when it is up to date: touch it, so that
# make does not ask again.
$(UPSTREAM_FASTCDC_BIN): $(UPSTREAM_FASTCDC_SOURCES)
	$(CARGO) build --release --locked --quiet \
	  --manifest-path tests/upstream-rust/Cargo.toml --target-dir $(CARGO_TARGET)
	touch $@

ifeq ($(HAVE_CARGO),)
bench-crate:
	@echo "bench-crate: skipped: no cargo ($(CARGO)) to build upstream-fastcdc"
else
test-python: $(UPSTREAM_FASTCDC_BIN)

bench-crate: build $(UPSTREAM_FASTCDC_BIN)
	@mkdir -p $(BENCH_DIR)
	$(PYTHON) server/bench/crate_bench.py --upstream-fastcdc $(UPSTREAM_FASTCDC_BIN) \
	  --chunkctl $(BUILD_DIR)/clients/cli/chunkctl --dir $(BENCH_DIR) \
	  --markdown $(BENCH_DIR)/crate.md $(CRATE_BENCH_ARGS)
endif

clean:
	rm -rf $(BUILD_DIR)

# A Go for fresh machines: when $(GO) is missing or older than the newest
# `go` line of $(GO_MODULES) (Debian bookworm's golang is 1.19, which cannot
# fetch a newer one by itself), make installs Go $(GO_FETCH_VERSION) into
# $(GO_FETCH_DIR) and uses it for every Go step above, saying so in one line:
# the golang.org/toolchain module from the Go module proxy, its hash checked
# against the checksum database's line for it as the proxy serves it
# (tools/fetch_go.py; the database's signature is not verified). A Go new enough is used as
# it is, and costs one `go version`. `make go-toolchain` says which Go make
# uses.

.PHONY: go-toolchain

ifeq ($(GO_NEW_ENOUGH),yes)
go-toolchain:
	@echo "make: using Go $(GO_FOUND_VERSION) ($(GO)); the Go modules need $(GO_NEEDED)"
else
# python3 comes with the Debian packages.
$(GO_FETCH_STAMP): | $(DEPS_STAMP)
	@echo "make: $(GO_FETCH_WHY); installing Go $(GO_FETCH_VERSION) from the Go module proxy into $(GO_FETCH_DIR)"
	@$(PYTHON) tools/fetch_go.py --version $(GO_FETCH_VERSION) --needs $(GO_NEEDED) \
	  --dest $(GO_FETCH_DIR) >/dev/null
	@touch $@

$(HELM_STAMP) $(KUBECONFORM_STAMP) $(HEALTH_PROBE) $(SCHEMA_STAMP) $(PROTOC_GEN_GO_STAMP) \
  $(GRPCURL_STAMP) $(BUF_STAMP) $(CHUNKD_GO_BIN) $(UPSTREAM_CHUNK_BIN) test-go bench-upstream \
  go-toolchain: | $(GO_FETCH_STAMP)

go-toolchain:
	@echo "make: using Go $(GO_FETCH_VERSION) ($(GO)); the Go modules need $(GO_NEEDED)"
endif
