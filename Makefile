# chunkd: `make run` and `make test` do all the set-up on a fresh Debian
# bookworm machine: missing Debian packages, the CMake build (Release, in
# build/) and the Python virtualenv (.venv/) for the client and the tests.
# Every step is skipped when nothing it depends on changed.

BUILD_DIR ?= build
VENV      ?= .venv
PYTHON    ?= python3
LISTEN    ?= 127.0.0.1:50051
METRICS   ?= 127.0.0.1:9464
INDEX     ?= memory

APT_PACKAGES := build-essential cmake ninja-build pkg-config git \
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev \
  libabsl-dev libssl-dev libxxhash-dev libhiredis-dev prometheus-cpp-dev \
  libgtest-dev libgmock-dev libbenchmark-dev redis-server \
  python3 python3-venv python3-pip openssl

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEPS_STAMP := $(BUILD_DIR)/.deps-installed
VENV_STAMP := $(VENV)/.installed
PY_SOURCES := $(shell find clients/python -name '*.py' -not -path '*/_proto/*' \
  -not -path '*/build/*' 2>/dev/null) clients/python/pyproject.toml \
  proto/chunkd/v1/chunkd.proto

.PHONY: all deps build run test test-cpp test-python test-go go-tools \
  go-generate go-stubs-check clean

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
	touch $@

run: build
	exec $(BUILD_DIR)/server/chunkd --listen $(LISTEN) \
	  --metrics_listen $(METRICS) --index $(INDEX)

test-cpp: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j 2

# Go: the client module (clients/go), its example command, and grpcurl. The
# tools are installed once, at pinned versions, into $(TOOLS_BIN) (a stamp
# per version set); clients/go/ensure-go.sh finds or fetches a Go toolchain.
TOOLS_BIN      := $(abspath $(BUILD_DIR)/tools/bin)
PROTOC_GEN_GO_VERSION      := v1.36.11
PROTOC_GEN_GO_GRPC_VERSION := v1.6.1
GRPCURL_VERSION            := v1.9.3
GO_TOOLS_STAMP := $(BUILD_DIR)/tools/.installed-$(PROTOC_GEN_GO_VERSION)-$(PROTOC_GEN_GO_GRPC_VERSION)-$(GRPCURL_VERSION)
GO_STAMP       := $(BUILD_DIR)/tools/.go
GO_SOURCES     := $(shell find clients/go -name '*.go' 2>/dev/null) clients/go/go.mod clients/go/go.sum
CHUNKD_GO_BIN  := $(TOOLS_BIN)/chunkd-go
GO              = $(shell cat $(GO_STAMP))

$(GO_STAMP): clients/go/ensure-go.sh clients/go/go.mod
	@mkdir -p $(dir $@)
	clients/go/ensure-go.sh $(abspath $(BUILD_DIR)/tools/go) > $@.tmp && mv $@.tmp $@

$(GO_TOOLS_STAMP): $(GO_STAMP)
	@mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(TOOLS_BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	GOBIN=$(TOOLS_BIN) $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)
	touch $@

go-tools: $(GO_TOOLS_STAMP)

$(CHUNKD_GO_BIN): $(GO_STAMP) $(GO_SOURCES)
	cd clients/go && $(GO) build -o $(CHUNKD_GO_BIN) ./cmd/chunkd-go

# Regenerates clients/go/chunkdpb after a proto change (commit the result).
go-generate: $(GO_TOOLS_STAMP) $(DEPS_STAMP)
	PATH=$(TOOLS_BIN):$$PATH clients/go/generate.sh

# The committed stubs must be what protoc and the pinned plugins make now.
go-stubs-check: $(GO_TOOLS_STAMP) $(DEPS_STAMP)
	@tmp=$$(mktemp -d) && PATH=$(TOOLS_BIN):$$PATH clients/go/generate.sh $$tmp && \
	  diff -r $$tmp/chunkdpb clients/go/chunkdpb; rc=$$?; rm -rf $$tmp; \
	  if [ $$rc != 0 ]; then echo "clients/go/chunkdpb is stale: run make go-generate" >&2; exit 1; fi

test-go: build go-stubs-check
	cd clients/go && CHUNKD_BIN=$(abspath $(BUILD_DIR)/server/chunkd) $(GO) vet ./... && \
	  CHUNKD_BIN=$(abspath $(BUILD_DIR)/server/chunkd) $(GO) test -count=1 ./...

test-python: build $(VENV_STAMP) $(CHUNKD_GO_BIN) $(GO_TOOLS_STAMP)
	CHUNKD_GO_BIN=$(CHUNKD_GO_BIN) GRPCURL_BIN=$(TOOLS_BIN)/grpcurl \
	  $(VENV)/bin/python -m pytest -q clients/python/tests tests/e2e tests/integration

test: test-cpp test-python test-go

# `make bench`: the chunking benchmarks (server/bench/), then a table and a
# chart under $(BENCH_DIR). matplotlib goes into the venv through its own
# stamp, so the test venv does not need it. BENCH_ARGS go to chunking_bench
# (Google Benchmark flags, or e.g. --threads=1,2,4 --size=BYTES); the best of
# the repetitions is reported, in random order so that load from other work
# on the machine spreads over all of them.
BENCH_DIR   ?= $(BUILD_DIR)/bench
BENCH_ARGS  ?= --benchmark_repetitions=5 --benchmark_min_time=0.2 \
  --benchmark_enable_random_interleaving=true
BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: bench

$(BENCH_STAMP): $(VENV_STAMP)
	$(VENV)/bin/pip install -q matplotlib
	touch $@

bench: build $(BENCH_STAMP)
	@mkdir -p $(BENCH_DIR)
	$(BUILD_DIR)/server/bench/chunking_bench \
	  --benchmark_out=$(BENCH_DIR)/results.json --benchmark_out_format=json \
	  $(BENCH_ARGS)
	$(VENV)/bin/python server/bench/report.py $(BENCH_DIR)/results.json \
	  --markdown $(BENCH_DIR)/results.md --png $(BENCH_DIR)/throughput.png
	@cat $(BENCH_DIR)/results.md
	$(BUILD_DIR)/server/bench/service_bench --markdown $(BENCH_DIR)/service.md
	@echo "Wrote $(BENCH_DIR)/results.md, $(BENCH_DIR)/throughput.png and $(BENCH_DIR)/service.md"

clean:
	rm -rf $(BUILD_DIR)
