// sha256_bench: SHA-256 of chunks, OpenSSL one message at a time against the
// multi-buffer backends (fingerprint/sha256_mb.h), side by side in one run on
// one thread, with the memory-read loop as the ceiling.
//
// Registrations, each reporting bytes of chunk data per CPU second of the
// benchmark thread (CPU time, so that a machine shared with other work
// disturbs the ratios less):
//
//   sha256/BACKEND/DATASET   every chunk of the buffer hashed with BACKEND
//                            (openssl, shani-x1 .. shani-x4) in
//                            groups of about --group_bytes, as the stream
//                            pipeline hashes them. A backend this CPU
//                            cannot run is skipped with the reason.
//   ceiling/sum64/DATASET    SumWords over the same buffer.
//
// DATASET: `16k` (the buffer cut into 16 KiB chunks) or `mixed` (chunk sizes
// drawn uniformly from 4..64 KiB, seeded). Every run compares its digests
// with OpenSSL's, computed once before any timing, and fails with
// SkipWithError on a difference, so a fast but wrong backend reports no
// number. At the end a table gives each row's best repetition and its ratio
// to openssl and to the ceiling.
//
// Flags besides Google Benchmark's:
//   --size=BYTES         bytes per dataset (default 33554432)
//   --group_bytes=BYTES  bytes per Sha256Many call (default 262144)
// `make bench-sha256` runs this.
#include <benchmark/benchmark.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "bench/best_rate_reporter.h"
#include "fingerprint/sha256_mb.h"
#include "workload/datagen.h"
#include "workload/harness.h"

namespace chunkd::bench {
namespace {

using fingerprint::Sha256Impl;

constexpr size_t kDigest = 32;

struct Flags {
  size_t size = size_t{32} << 20;
  size_t group_bytes = size_t{256} << 10;
};

Flags& GetFlags() {
  static Flags flags;
  return flags;
}

// A buffer, its chunks in groups, and OpenSSL's digests of them.
struct Data {
  std::vector<uint8_t> bytes;
  std::vector<std::vector<absl::string_view>> groups;
  std::vector<unsigned char> want;  // kDigest per chunk, in order
  size_t chunks = 0;
};

const Data& GetData(const std::string& name) {
  static std::map<std::string, Data> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Data& d = cache[name];
  d.bytes = workload::RandomBytes(GetFlags().size, workload::kBenchSeed);
  std::mt19937_64 rng(workload::kBenchSeed);
  std::vector<absl::string_view> group;
  size_t group_bytes = 0;
  for (size_t at = 0; at < d.bytes.size();) {
    size_t n = name == "16k" ? 16384 : 4096 + rng() % (60 * 1024 + 1);
    n = std::min(n, d.bytes.size() - at);
    group.emplace_back(reinterpret_cast<const char*>(d.bytes.data()) + at, n);
    at += n;
    group_bytes += n;
    if (group_bytes >= GetFlags().group_bytes || at == d.bytes.size()) {
      d.groups.push_back(std::move(group));
      group.clear();
      group_bytes = 0;
    }
  }
  for (const auto& g : d.groups) d.chunks += g.size();
  d.want.resize(kDigest * d.chunks);
  unsigned char* out = d.want.data();
  for (const auto& g : d.groups) {
    for (absl::string_view m : g) {
      SHA256(reinterpret_cast<const unsigned char*>(m.data()), m.size(), out);
      out += kDigest;
    }
  }
  return d;
}

void BM_Sha256(benchmark::State& state, const Sha256Impl* backend,
               std::string dataset) {
  const std::vector<std::string> missing =
      fingerprint::Sha256ImplMissing(*backend);
  if (!missing.empty()) {
    state.SkipWithError(
        absl::StrCat("this CPU lacks ", absl::StrJoin(missing, ", ")).c_str());
    return;
  }
  const Data& d = GetData(dataset);
  std::vector<unsigned char> got(d.want.size());
  for (auto _ : state) {
    unsigned char* out = got.data();
    for (const auto& g : d.groups) {
      fingerprint::Sha256Many(*backend, g, out);
      out += kDigest * g.size();
    }
    benchmark::DoNotOptimize(got.data());
    benchmark::ClobberMemory();
  }
  if (got != d.want) {
    state.SkipWithError("digests differ from OpenSSL's");
    return;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(d.bytes.size()));
  state.SetLabel(absl::StrCat(d.chunks, " chunks, ", d.groups.size(),
                              " groups"));
}

void BM_SumWords(benchmark::State& state, std::string dataset) {
  const Data& d = GetData(dataset);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        workload::SumWords(d.bytes.data(), d.bytes.size()));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(d.bytes.size()));
}

const char* const kDatasets[] = {"16k", "mixed"};

void RegisterAll() {
  for (const char* ds : kDatasets) {
    benchmark::RegisterBenchmark(absl::StrCat("ceiling/sum64/", ds).c_str(),
                                 BM_SumWords, std::string(ds))
        ->Unit(benchmark::kMillisecond);
    for (const Sha256Impl* backend : fingerprint::AllSha256Impls()) {
      benchmark::RegisterBenchmark(
          absl::StrCat("sha256/", backend->name, "/", ds).c_str(), BM_Sha256,
          backend, std::string(ds))
          ->Unit(benchmark::kMillisecond);
    }
  }
}

// The console output, and then each row's best repetition as ratios.
class RatioReporter : public BestRateReporter {
 public:
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::string table =
        "\n| dataset | row | GB/s | vs openssl | vs ceiling |\n"
        "|---|---|---|---|---|\n";
    for (const char* ds : kDatasets) {
      const double openssl = Best(absl::StrCat("sha256/openssl/", ds));
      const double ceiling = Best(absl::StrCat("ceiling/sum64/", ds));
      std::vector<std::string> rows = {absl::StrCat("ceiling/sum64/", ds)};
      for (const Sha256Impl* backend : fingerprint::AllSha256Impls()) {
        rows.push_back(absl::StrCat("sha256/", backend->name, "/", ds));
      }
      for (const std::string& row : rows) {
        const double v = Best(row);
        if (v <= 0) continue;
        absl::StrAppend(&table, "| ", ds, " | ", row, " | ",
                        absl::StrFormat("%.2f", v / 1e9), " | ",
                        openssl > 0 ? absl::StrFormat("%.2fx", v / openssl)
                                    : std::string("-"),
                        " | ",
                        ceiling > 0
                            ? absl::StrFormat("%.0f %%", 100 * v / ceiling)
                            : std::string("-"),
                        " |\n");
      }
    }
    std::fputs(table.c_str(), stdout);
    std::fflush(stdout);
  }

};

bool ParseSize(absl::string_view arg, absl::string_view prefix, size_t* out) {
  if (!absl::ConsumePrefix(&arg, prefix)) return false;
  if (!absl::SimpleAtoi(arg, out) || *out == 0) {
    std::fprintf(stderr, "sha256_bench: %.*s wants a positive number\n",
                 static_cast<int>(prefix.size() - 1), prefix.data());
    std::exit(2);
  }
  return true;
}

void ParseOwnFlags(int* argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    if (ParseSize(argv[i], "--size=", &GetFlags().size) ||
        ParseSize(argv[i], "--group_bytes=", &GetFlags().group_bytes)) {
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
      "chunkd_sha256_best", chunkd::fingerprint::BestSha256Impl().name);
  benchmark::AddCustomContext("chunkd_bytes_per_dataset",
                              absl::StrCat(chunkd::bench::GetFlags().size));
  chunkd::bench::RegisterAll();
  chunkd::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
