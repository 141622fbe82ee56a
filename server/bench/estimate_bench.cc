// estimate_bench: what one Estimate pass costs beside the passes it saves,
// and how close sampling comes (docs/estimate.md, "Speed").
//
// Speed, on --size_mib of versioned data in memory (estimate/versioned_data.h),
// one thread, each version one file: (a) one Estimator with four FastCDC
// sets (avg 4, 8, 16 and 64 KiB, min avg / 4, max avg * 4), the same with
// each set cut by its own chunker (no FastCdcGroup), four Estimators
// of one set each run one after the other, four StreamChunker passes with
// XXH3-128 of every chunk (what Chunk with xxh128 costs), and a loop that
// reads the memory once; all fed in pieces of --piece_kib; (b) the same with four mixed algorithms. The runs
// alternate, --runs rounds; each figure is the best round's CPU time of the
// calling thread (the machine's load does not count), and the ratios are to
// the four chunk passes.
//
// --accuracy: --accuracy_gib of versioned data generated one version at a
// time, an exact and a 1-in-64 estimate of FastCDC 16 KiB fed side by side;
// prints both ratios, the error in % and whether the interval covers.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "estimate/estimator.h"
#include "estimate/versioned_data.h"
#include "fingerprint/fingerprint.h"
#include "workload/harness.h"

ABSL_FLAG(uint64_t, size_mib, 256, "MiB of versioned data for the speed runs");
ABSL_FLAG(uint32_t, runs, 3, "rounds of every variant, alternating");
ABSL_FLAG(uint64_t, piece_kib, 4096,
          "KiB per Append, as a stream's messages (the server's default "
          "max_message_bytes)");
ABSL_FLAG(bool, accuracy, false,
          "run the accuracy comparison instead of the speed runs");
ABSL_FLAG(uint64_t, accuracy_gib, 1, "GiB of versioned data for --accuracy");
ABSL_FLAG(uint32_t, sample, 64, "the sample rate of --accuracy");
ABSL_FLAG(uint32_t, accuracy_versions, 16,
          "versions of --accuracy's data (the base included)");
ABSL_FLAG(uint32_t, accuracy_edits, 256, "edits per version of --accuracy");
ABSL_FLAG(uint64_t, accuracy_seed, 2, "the seed of --accuracy's data");

namespace {

using chunkd::chunking::Algorithm;
using chunkd::chunking::ChunkerOptions;
using chunkd::estimate::Estimator;
using chunkd::estimate::EstimatorOptions;
using chunkd::estimate::SetResult;
using chunkd::estimate::VersionedData;
using chunkd::estimate::VersionedDataOptions;

double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Versions of 32 MiB (fewer when the data is smaller), each with 256 edits.
VersionedDataOptions DataOptions(uint64_t total_bytes, uint64_t seed) {
  VersionedDataOptions options;
  options.base_size = static_cast<size_t>(
      std::min<uint64_t>(total_bytes, uint64_t{32} << 20));
  options.versions = static_cast<size_t>(
      std::max<uint64_t>(1, total_bytes / options.base_size));
  options.edits = 256;
  options.edit_size = 64;
  options.seed = seed;
  return options;
}

ChunkerOptions FastCdc(uint32_t avg) {
  ChunkerOptions options =
      chunkd::chunking::DefaultOptions(Algorithm::kFastCdc);
  options.min_size = avg / 4;
  options.avg_size = avg;
  options.max_size = avg * 4;
  return options;
}

std::vector<ChunkerOptions> FastCdcSets() {
  return {FastCdc(4096), FastCdc(8192), FastCdc(16384), FastCdc(65536)};
}

std::vector<ChunkerOptions> MixedSets() {
  ChunkerOptions rabin = chunkd::chunking::DefaultOptions(Algorithm::kRabin);
  rabin.min_size = 16 << 10;
  rabin.avg_size = 64 << 10;
  rabin.max_size = 256 << 10;
  return {FastCdc(16384),
          chunkd::chunking::DefaultOptions(Algorithm::kSeqCdc),
          chunkd::chunking::DefaultOptions(Algorithm::kCrc32), rabin};
}

EstimatorOptions EstimateOf(const std::vector<ChunkerOptions>& sets,
                            uint32_t rate = 1, bool group = true) {
  EstimatorOptions options;
  options.group_fastcdc = group;
  for (const ChunkerOptions& set : sets) {
    options.sets.push_back(
        {std::string(chunkd::chunking::AlgorithmName(set.algorithm)), set});
  }
  options.sample_rate = rate;
  return options;
}

// Calls fn with each piece of `file`, as a stream's messages bring it.
void ForEachPiece(const std::string& file,
                  const std::function<void(absl::string_view)>& fn) {
  const size_t piece = absl::GetFlag(FLAGS_piece_kib) << 10;
  for (size_t at = 0; at < file.size(); at += piece) {
    fn(absl::string_view(file).substr(at, piece));
  }
}

// Every file through one Estimator; returns the first set's ratio.
double RunEstimator(const EstimatorOptions& options,
                    const std::vector<std::string>& files) {
  std::unique_ptr<Estimator> estimator = Estimator::Create(options).value();
  bool ok = true;
  for (const std::string& file : files) {
    ForEachPiece(file, [&](absl::string_view piece) {
      ok = ok && estimator->Append(piece).ok();
    });
    ok = ok && estimator->EndFile().ok();
  }
  if (!ok) {
    std::fprintf(stderr, "estimate failed\n");
    std::exit(1);
  }
  return estimator->Finish().value()[0].dedup_ratio;
}

// Every file through a StreamChunker, each chunk hashed with XXH3-128.
uint64_t RunChunkPass(const ChunkerOptions& options,
                      const std::vector<std::string>& files) {
  uint64_t checksum = 0;
  std::vector<chunkd::chunking::Chunk> chunks;
  unsigned char digest[16];
  for (const std::string& file : files) {
    auto chunker = chunkd::chunking::StreamChunker::Create(options).value();
    auto hash = [&] {
      for (const auto& c : chunks) {
        chunkd::fingerprint::DigestTo(chunkd::fingerprint::Kind::kXxh128,
                                      chunker->ChunkData(c), digest);
        checksum += digest[0];
      }
      chunks.clear();
    };
    ForEachPiece(file, [&](absl::string_view piece) {
      chunker->Append(piece, &chunks);
      hash();
    });
    chunker->Finish(&chunks);
    hash();
  }
  return checksum;
}

struct Variant {
  std::string name;
  std::function<void()> run;
  double best = 0;
};

void Speed(const char* title, const std::vector<ChunkerOptions>& sets,
           const std::vector<std::string>& files, uint64_t bytes) {
  uint64_t sink = 0;
  std::vector<Variant> variants = {
      {"one estimate, 4 sets", [&] { RunEstimator(EstimateOf(sets), files); }},
      {"the same, no FastCDC group",
       [&] { RunEstimator(EstimateOf(sets, 1, false), files); }},
      {"4 estimates of 1 set",
       [&] {
         for (const ChunkerOptions& set : sets) {
           RunEstimator(EstimateOf({set}), files);
         }
       }},
      {"4 chunk passes + xxh128",
       [&] {
         for (const ChunkerOptions& set : sets) sink += RunChunkPass(set, files);
       }},
      {"memory read",
       [&] {
         for (const std::string& file : files) {
           sink += chunkd::workload::SumWords(
               reinterpret_cast<const uint8_t*>(file.data()), file.size());
         }
       }},
  };
  for (uint32_t r = 0; r < absl::GetFlag(FLAGS_runs); ++r) {
    for (Variant& v : variants) {
      const double start = ThreadSeconds();
      v.run();
      const double seconds = ThreadSeconds() - start;
      if (r == 0 || seconds < v.best) v.best = seconds;
    }
  }
  const double base = variants[3].best;
  std::printf("%s (%.0f MiB, one thread, best of %u, thread CPU time)\n",
              title, static_cast<double>(bytes) / (1 << 20),
              absl::GetFlag(FLAGS_runs));
  for (const Variant& v : variants) {
    std::printf("  %-26s %8.3f s  %8.1f MiB/s  %5.2fx of 4 chunk passes\n",
                v.name.c_str(), v.best,
                static_cast<double>(bytes) / (1 << 20) / v.best,
                v.best / base);
  }
  std::printf("  (checksum %llu)\n", static_cast<unsigned long long>(sink % 10));
}

int Accuracy() {
  const uint64_t bytes = absl::GetFlag(FLAGS_accuracy_gib) << 30;
  const uint32_t rate = absl::GetFlag(FLAGS_sample);
  auto exact = Estimator::Create(EstimateOf({FastCdc(16384)})).value();
  auto sampled = Estimator::Create(EstimateOf({FastCdc(16384)}, rate)).value();
  VersionedDataOptions options =
      DataOptions(bytes, absl::GetFlag(FLAGS_accuracy_seed));
  options.versions = std::max<uint32_t>(1, absl::GetFlag(FLAGS_accuracy_versions));
  options.base_size = static_cast<size_t>(bytes / options.versions);
  options.edits = absl::GetFlag(FLAGS_accuracy_edits);
  VersionedData data(options);
  for (absl::string_view v = data.Next(); !v.empty(); v = data.Next()) {
    if (!exact->Append(v).ok() || !exact->EndFile().ok() ||
        !sampled->Append(v).ok() || !sampled->EndFile().ok()) {
      std::fprintf(stderr, "estimate failed\n");
      return 1;
    }
  }
  const SetResult e = exact->Finish().value()[0];
  const SetResult s = sampled->Finish().value()[0];
  const double error = 100 * (s.dedup_ratio - e.dedup_ratio) / e.dedup_ratio;
  std::printf(
      "accuracy: %.2f GiB in %zu versions of %zu MiB (%zu edits each), "
      "fastcdc 16 KiB\n  exact ratio %.4f (%llu unique chunks)\n"
      "  1 in %u: ratio %.4f, error %+.2f %%, interval %.4f-%.4f %s the exact "
      "ratio (%llu chunks in the sample)\n"
      "  unique chunks %llu exact, %llu estimated; mean unique chunk %.0f "
      "exact, %.0f in the sample\n",
      static_cast<double>(exact->bytes_in()) / (1 << 30), options.versions,
      options.base_size >> 20, options.edits, e.dedup_ratio,
      static_cast<unsigned long long>(e.unique_chunks), rate, s.dedup_ratio,
      error, s.ratio_low, s.ratio_high,
      s.ratio_low <= e.dedup_ratio && e.dedup_ratio <= s.ratio_high
          ? "covers"
          : "misses",
      static_cast<unsigned long long>(s.sampled_unique_chunks),
      static_cast<unsigned long long>(e.unique_chunks),
      static_cast<unsigned long long>(s.unique_chunks),
      static_cast<double>(e.unique_bytes) / static_cast<double>(e.unique_chunks),
      static_cast<double>(s.unique_bytes) / static_cast<double>(s.unique_chunks));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_accuracy)) return Accuracy();
  const uint64_t bytes = absl::GetFlag(FLAGS_size_mib) << 20;
  std::vector<std::string> files;
  uint64_t total = 0;
  VersionedData data(DataOptions(bytes, 1));
  for (absl::string_view v = data.Next(); !v.empty(); v = data.Next()) {
    files.emplace_back(v);
    total += v.size();
  }
  Speed("(a) 4 FastCDC sets, avg 4, 8, 16, 64 KiB", FastCdcSets(), files,
        total);
  Speed("(b) 4 algorithms: fastcdc 16 KiB, seqcdc, crc32, rabin 64 KiB",
        MixedSets(), files, total);
  return 0;
}
