// rapid_bench: RapidCDC hints in Dedup. Dedups versioned
// datasets (RapidCDC's synthetic recipe: a random base, then versions with N
// modifications of ~100 bytes) through StreamPipeline with the memory index
// and sha256, each version one stream, on a fresh index and hint cache (a
// server that has not seen the data), with hints off and with each test;
// and one stream of unique random data. Reports, side by side in one run:
// the process's CPU time per GB (getrusage: every thread, the executor's
// included) and its ratio to hints off, the chunking-stage time (boundary
// finding alone) per GB and its ratio, wall-clock throughput, and how many
// boundaries the inexact tests moved. The configurations run interleaved,
// --repetitions rounds of each; every figure is the median of its rounds.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "chunking/executor.h"
#include "index/fingerprint_index.h"
#include "pipeline/stream_pipeline.h"
#include "workload/datagen.h"
#include "workload/harness.h"

ABSL_FLAG(std::string, tests, "all",
          "which runs beside hints off (always run, the baseline): all, or a "
          "list of ff_rwt_fpt_nocache, ff_rwt_fpt, ff_rwt, ff_mt, ff");
ABSL_FLAG(uint64_t, base_bytes, uint64_t{32} << 20, "bytes of the base file");
ABSL_FLAG(uint32_t, versions, 20, "versions after the base");
ABSL_FLAG(uint32_t, edits, 40,
          "modifications per version of the high-duplication dataset (the "
          "low-duplication one has one per 2 KiB)");
ABSL_FLAG(uint32_t, repetitions, 5,
          "rounds of every configuration, interleaved (medians are kept)");
ABSL_FLAG(uint32_t, threads, 0, "executor threads (0: one per core)");
ABSL_FLAG(std::string, markdown, "", "also write the table to this file");
ABSL_FLAG(std::string, datasets, "high,low,unique",
          "which datasets to run: high (few edits per version), low (one "
          "edit per 2 KiB), unique (random data)");

namespace {

using chunkd::pipeline::HintTest;

struct Result {
  double seconds = 0;        // wall clock
  double cpu_seconds = 0;    // the process's user + system time
  double chunk_seconds = 0;  // the chunking stage (StreamTotals)
  uint64_t bytes = 0;
  uint64_t unique = 0;
  uint64_t skipped = 0;
  uint64_t accepted = 0;
  uint64_t cache_hits = 0;
  uint64_t in_runs = 0;
  std::set<uint64_t> ends;  // boundaries, offsets in the concatenation
};

struct Config {
  HintTest test;
  bool cache;  // with the server's hint cache (chunkd's default)
};

// User + system CPU seconds of the whole process so far.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) +
           1e-6 * static_cast<double>(t.tv_usec);
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

Result Run(const std::vector<std::vector<uint8_t>>& streams, Config config,
           chunkd::chunking::Executor* executor) {
  // Like chunkd: one cache for all streams, as large as its default.
  chunkd::pipeline::HintCache cache(config.cache ? size_t{1} << 19 : 0);
  auto index = chunkd::index::CreateIndex("memory");
  if (!index.ok()) std::abort();
  chunkd::pipeline::PipelineOptions o;
  o.chunking = chunkd::chunking::DefaultOptions(chunkd::chunking::Algorithm::kFastCdc);
  o.chunking.min_size = 4096;
  o.chunking.avg_size = 16384;
  o.chunking.max_size = 65536;
  o.chunking.normalization_level = 2;
  o.index = index->get();
  o.ns = "bench";
  o.hints = config.test;
  o.hint_cache = config.cache ? &cache : nullptr;
  o.engine.executor = executor;
  Result r;
  std::vector<chunkd::pipeline::ChunkRecord> out;
  uint64_t base = 0;
  const double cpu_start = ProcessCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  for (const auto& data : streams) {
    auto p = chunkd::pipeline::StreamPipeline::Create(o);
    if (!p.ok()) std::abort();
    const absl::string_view all(reinterpret_cast<const char*>(data.data()), data.size());
    for (size_t at = 0; at < all.size(); at += size_t{1} << 20) {
      out.clear();
      if (!(*p)->Process(all.substr(at, size_t{1} << 20), &out).ok()) std::abort();
      for (const auto& c : out) r.ends.insert(base + c.offset + c.length);
    }
    out.clear();
    if (!(*p)->Finish(&out).ok()) std::abort();
    for (const auto& c : out) r.ends.insert(base + c.offset + c.length);
    const auto& t = (*p)->totals();
    r.chunk_seconds += t.chunk_seconds;
    r.bytes += t.bytes;
    r.unique += t.unique_bytes;
    r.skipped += t.hint_skipped_bytes;
    r.accepted += t.hints_accepted;
    r.cache_hits += t.cache_hits;
    r.in_runs += t.hints_in_runs;
    base += data.size();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.cpu_seconds = ProcessCpuSeconds() - cpu_start;
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

// One configuration's rounds: the medians of each figure, and the rest of
// the first round (the counts are the same in every round).
struct Rounds {
  std::vector<double> seconds, cpu, chunk;
  Result first;
  bool ran = false;
  void Add(Result r) {
    seconds.push_back(r.seconds);
    cpu.push_back(r.cpu_seconds);
    chunk.push_back(r.chunk_seconds);
    if (!ran) first = std::move(r);
    ran = true;
  }
};

bool Wanted(const Config& config) {
  const std::string list = absl::GetFlag(FLAGS_tests);
  if (list == "all") return true;
  const std::set<std::string> wanted = absl::StrSplit(list, ',');
  const std::string name =
      absl::StrCat(chunkd::pipeline::HintTestName(config.test),
                   config.cache ? "" : "_nocache");
  return wanted.count(name) != 0;
}

struct Dataset {
  std::string name;
  std::vector<std::vector<uint8_t>> streams;
};

std::vector<Dataset> MakeDatasets() {
  const size_t base = absl::GetFlag(FLAGS_base_bytes);
  std::vector<Dataset> datasets;
  const std::set<std::string> wanted =
      absl::StrSplit(absl::GetFlag(FLAGS_datasets), ',');
  for (size_t modifications :
       {size_t{absl::GetFlag(FLAGS_edits)}, size_t{base / 2048}}) {
    if (wanted.count(modifications == base / 2048 ? "low" : "high") == 0)
      continue;
    chunkd::workload::VersionedOptions v;
    v.base_size = base;
    v.versions = absl::GetFlag(FLAGS_versions);
    v.modifications = modifications;
    v.seed = 2026;
    datasets.push_back(
        {absl::StrFormat("versioned, %d edits/version", modifications),
         chunkd::workload::GenerateVersioned(v).versions});
  }
  if (wanted.count("unique") != 0) {
    datasets.push_back(
        {"unique random", {chunkd::workload::RandomBytes(base * 2, 99)}});
  }
  return datasets;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  uint32_t threads = absl::GetFlag(FLAGS_threads);
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  chunkd::chunking::ThreadPoolExecutor pool(threads);
  const std::vector<Dataset> datasets = MakeDatasets();

  const Config tests[] = {
      {HintTest::kOff, false},      {HintTest::kFFRWTFPT, true},
      {HintTest::kFFRWTFPT, false}, {HintTest::kFFRWT, true},
      {HintTest::kFFMT, true},      {HintTest::kFF, true}};
  const uint32_t repetitions = std::max(1u, absl::GetFlag(FLAGS_repetitions));
  std::string table = absl::StrFormat(
      "RapidCDC in Dedup on a fresh index and cache (fastcdc 4/16/64 KiB "
      "level 2, sha256, memory index, %d threads; medians of %d interleaved "
      "rounds)\n\n"
      "| dataset | dedup ratio | hints | cache | CPU s/GB | CPU vs off | "
      "chunking s/GB | chunking vs off | Dedup GB/s | skipped | "
      "from the cache | in runs | boundaries moved |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      threads, repetitions);
  for (const Dataset& d : datasets) {
    std::vector<Rounds> rounds(std::size(tests));
    for (uint32_t rep = 0; rep < repetitions; ++rep) {
      for (size_t t = 0; t < std::size(tests); ++t) {
        if (d.name == "unique random" && t > 2) continue;
        if (t > 0 && !Wanted(tests[t])) continue;
        rounds[t].Add(Run(d.streams, tests[t], &pool));
      }
    }
    const Rounds& off = rounds[0];
    const double off_cpu = Median(off.cpu), off_chunk = Median(off.chunk);
    for (size_t t = 0; t < std::size(tests); ++t) {
      if (!rounds[t].ran) continue;
      const Result& r = rounds[t].first;
      const double gb = static_cast<double>(r.bytes) / 1e9;
      const double cpu = Median(rounds[t].cpu);
      const double chunk = Median(rounds[t].chunk);
      size_t moved = 0;
      for (uint64_t e : r.ends) moved += off.first.ends.count(e) == 0;
      table += absl::StrFormat(
          "| %s | %.1f | %s | %s | %.3f | %.2f× | %.4f | %.2f | %.2f | "
          "%.0f%% | %.0f%% | %.0f%% | %d |\n",
          d.name,
          static_cast<double>(r.bytes) /
              static_cast<double>(std::max<uint64_t>(1, r.unique)),
          chunkd::pipeline::HintTestName(tests[t].test),
          tests[t].cache ? "yes" : "no", cpu / gb, cpu / off_cpu, chunk / gb,
          chunk / off_chunk, gb / Median(rounds[t].seconds),
          100.0 * r.skipped / r.bytes,
          100.0 * r.cache_hits / std::max<uint64_t>(1, r.accepted),
          100.0 * r.in_runs / std::max<uint64_t>(1, r.accepted), moved);
    }
  }
  std::fputs(table.c_str(), stdout);
  const std::string markdown = absl::GetFlag(FLAGS_markdown);
  if (!markdown.empty() && !chunkd::workload::WriteTextFile(markdown, table)) {
    std::fprintf(stderr, "cannot write %s\n", markdown.c_str());
    return 1;
  }
  return 0;
}
