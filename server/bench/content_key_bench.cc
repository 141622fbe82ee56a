// content_key_bench: the keyed content hash (fingerprint/content_key.h) on
// one thread, both backends beside XXH3-128 and SHA-256, side by side in one
// run, with the memory-read loop as the ceiling.
//
// Registrations, each reporting bytes of input per CPU second of the
// benchmark thread (CPU time, so that a machine shared with other work
// disturbs the ratios less):
//
//   gmac/vpclmulqdq/SIZE  ContentKeyer::Of with the VPCLMULQDQ GHASH (skipped
//                         with the reason on a CPU without it)
//   gmac/openssl/SIZE     ContentKeyer::Of with OpenSSL's AES-128-GCM
//   xxh3_128/SIZE         XXH3_128bits
//   sha256/SIZE           OpenSSL's SHA256, one message at a time
//   ceiling/sum64/SIZE    SumWords over the same buffer
//
// SIZE: 4k, 16k or 64k, the buffer cut into inputs of that many bytes. The
// buffer (--size, default 2 MiB) stays in the core's caches, so the rows
// compare computation, not memory. Before any timing, every gmac/vpclmulqdq
// tag is compared with the openssl backend's; a difference fails the row
// with SkipWithError, so a fast but wrong backend reports no number. At the
// end a table gives each row's best repetition and its ratio to
// gmac/openssl.
//
// Flags besides Google Benchmark's:
//   --size=BYTES   bytes of the buffer (default 2097152)
// `make bench-content-key` runs this.
#include <benchmark/benchmark.h>
#include <openssl/sha.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "bench/best_rate_reporter.h"
#include "fingerprint/content_key.h"
#include "workload/datagen.h"
#include "workload/harness.h"

namespace chunkd::bench {
namespace {

using fingerprint::ContentKey;
using fingerprint::ContentKeyImpl;
using fingerprint::ContentKeyer;

size_t& BufferSize() {
  static size_t size = size_t{2} << 20;
  return size;
}

const std::vector<uint8_t>& Buffer() {
  static const std::vector<uint8_t> bytes =
      workload::RandomBytes(BufferSize(), workload::kBenchSeed);
  return bytes;
}

std::vector<absl::string_view> Inputs(size_t input_size) {
  const std::vector<uint8_t>& b = Buffer();
  std::vector<absl::string_view> out;
  for (size_t at = 0; at < b.size(); at += input_size) {
    out.emplace_back(reinterpret_cast<const char*>(b.data()) + at,
                     std::min(input_size, b.size() - at));
  }
  return out;
}

// A fixed key: the speed does not depend on it.
constexpr std::array<uint8_t, 16> kKey = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55,
                                          0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb,
                                          0xcc, 0xdd, 0xee, 0xff};

void SetBytes(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(Buffer().size()));
}

void BM_Gmac(benchmark::State& state, ContentKeyImpl backend,
             size_t input_size) {
  const absl::StatusOr<ContentKeyImpl> ok =
      fingerprint::FindContentKeyImpl(
          fingerprint::ContentKeyImplName(backend));
  if (!ok.ok()) {
    state.SkipWithError(std::string(ok.status().message()).c_str());
    return;
  }
  const ContentKeyer keyer(kKey, backend);
  const ContentKeyer reference(kKey, ContentKeyImpl::kOpenSsl);
  const std::vector<absl::string_view> inputs = Inputs(input_size);
  for (absl::string_view in : inputs) {
    if (keyer.Of(in) != reference.Of(in)) {
      state.SkipWithError("tags differ from the openssl backend's");
      return;
    }
  }
  for (auto _ : state) {
    for (absl::string_view in : inputs) {
      ContentKey k = keyer.Of(in);
      benchmark::DoNotOptimize(k);
    }
  }
  SetBytes(state);
}

void BM_Xxh3(benchmark::State& state, size_t input_size) {
  const std::vector<absl::string_view> inputs = Inputs(input_size);
  for (auto _ : state) {
    for (absl::string_view in : inputs) {
      XXH128_hash_t h = XXH3_128bits(in.data(), in.size());
      benchmark::DoNotOptimize(h);
    }
  }
  SetBytes(state);
}

void BM_Sha256(benchmark::State& state, size_t input_size) {
  const std::vector<absl::string_view> inputs = Inputs(input_size);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  for (auto _ : state) {
    for (absl::string_view in : inputs) {
      SHA256(reinterpret_cast<const unsigned char*>(in.data()), in.size(),
             digest);
      benchmark::DoNotOptimize(digest);
    }
  }
  SetBytes(state);
}

void BM_SumWords(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        workload::SumWords(Buffer().data(), Buffer().size()));
  }
  SetBytes(state);
}

struct Size {
  const char* name;
  size_t bytes;
};
constexpr Size kSizes[] = {{"4k", 4096}, {"16k", 16384}, {"64k", 65536}};

std::vector<std::string> RowNames(const char* size) {
  return {absl::StrCat("gmac/vpclmulqdq/", size),
          absl::StrCat("gmac/openssl/", size),
          absl::StrCat("xxh3_128/", size), absl::StrCat("sha256/", size),
          absl::StrCat("ceiling/sum64/", size)};
}

void RegisterAll() {
  for (const Size& s : kSizes) {
    const std::vector<std::string> rows = RowNames(s.name);
    benchmark::RegisterBenchmark(rows[0].c_str(), BM_Gmac,
                                 ContentKeyImpl::kVpclmulqdq, s.bytes);
    benchmark::RegisterBenchmark(rows[1].c_str(), BM_Gmac,
                                 ContentKeyImpl::kOpenSsl, s.bytes);
    benchmark::RegisterBenchmark(rows[2].c_str(), BM_Xxh3, s.bytes);
    benchmark::RegisterBenchmark(rows[3].c_str(), BM_Sha256, s.bytes);
    benchmark::RegisterBenchmark(rows[4].c_str(), BM_SumWords);
  }
}

// The console output, and then each row's best repetition as ratios.
class RatioReporter : public BestRateReporter {
 public:
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::string table =
        "\n| input | row | GB/s | vs gmac/openssl |\n|---|---|---|---|\n";
    for (const Size& s : kSizes) {
      const double openssl = Best(absl::StrCat("gmac/openssl/", s.name));
      for (const std::string& row : RowNames(s.name)) {
        const double v = Best(row);
        if (v <= 0) continue;
        absl::StrAppend(&table, "| ", s.name, " | ", row, " | ",
                        absl::StrFormat("%.2f", v / 1e9), " | ",
                        openssl > 0 ? absl::StrFormat("%.2fx", v / openssl)
                                    : std::string("-"),
                        " |\n");
      }
    }
    std::fputs(table.c_str(), stdout);
    std::fflush(stdout);
  }

};

void ParseOwnFlags(int* argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--size=")) {
      if (!absl::SimpleAtoi(arg, &BufferSize()) || BufferSize() == 0) {
        std::fprintf(stderr, "content_key_bench: --size wants a positive "
                             "number of bytes\n");
        std::exit(2);
      }
      continue;
    }
    argv[kept++] = argv[i];
  }
  *argc = kept;
  argv[kept] = nullptr;
}

}  // namespace
}  // namespace chunkd::bench

int main(int argc, char** argv) {
  chunkd::bench::ParseOwnFlags(&argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::AddCustomContext(
      "chunkd_content_key_best",
      chunkd::fingerprint::ContentKeyImplName(
          chunkd::fingerprint::BestContentKeyImpl()));
  benchmark::AddCustomContext("chunkd_buffer_bytes",
                              absl::StrCat(chunkd::bench::BufferSize()));
  chunkd::bench::RegisterAll();
  chunkd::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
