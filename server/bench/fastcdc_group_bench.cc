// FastCdcGroup (chunking/fastcdc_group.h) against separate passes: the
// Estimator's four FastCDC sets (avg 4, 8, 16 and 64 KiB, min avg / 4,
// max avg * 4, levels 1 and 2) cut from seeded random data in memory, one
// thread, by one group and by four StreamChunkers one after the other
// (automatic kernel), beside a loop that only reads the data. Runs
// alternate; the best of each is kept; the figures are ratios of those
// times. Both ways must give the same chunks, or the program fails.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/fastcdc.h"
#include "chunking/fastcdc_group.h"
#include "chunking/kernels/kernels.h"

ABSL_FLAG(size_t, size_mib, 256, "MiB of seeded random data");
ABSL_FLAG(size_t, piece_kib, 1024, "KiB per Append");
ABSL_FLAG(int, runs, 5, "alternating runs of each; the best counts");
ABSL_FLAG(std::string, kernel, "",
          "the group's kernel set (scalar, avx2, avx512); empty: automatic");
ABSL_FLAG(bool, group_only, false,
          "run the group alone (for a profiler); prints no ratios");

namespace {

using chunkd::chunking::Algorithm;
using chunkd::chunking::Chunk;
using chunkd::chunking::ChunkerOptions;
using chunkd::chunking::EngineOptions;
using chunkd::chunking::FastCdcGroup;
using chunkd::chunking::StreamChunker;
using Clock = std::chrono::steady_clock;

std::vector<ChunkerOptions> Sets() {
  std::vector<ChunkerOptions> sets;
  const uint32_t levels[] = {1, 2, 1, 2};
  const uint32_t avgs[] = {4096, 8192, 16384, 65536};
  for (int i = 0; i < 4; ++i) {
    ChunkerOptions o;
    o.algorithm = Algorithm::kFastCdc;
    o.avg_size = avgs[i];
    o.min_size = avgs[i] / 4;
    o.max_size = avgs[i] * 4;
    o.normalization_level = levels[i];
    sets.push_back(o);
  }
  return sets;
}

// A digest of a chunk list, to compare the two ways.
struct Digest {
  uint64_t chunks = 0;
  uint64_t sum = 0;
  void Add(const Chunk& c) {
    ++chunks;
    sum = sum * 1000003 + c.offset * 31 + c.length + c.hash;
  }
  bool operator==(const Digest& o) const {
    return chunks == o.chunks && sum == o.sum;
  }
};

absl::string_view Piece(const std::vector<uint8_t>& data, size_t pos,
                        size_t piece) {
  return absl::string_view(reinterpret_cast<const char*>(data.data()) + pos,
                           std::min(piece, data.size() - pos));
}

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double RunGroup(const std::vector<uint8_t>& data, size_t piece,
                std::vector<Digest>* digests) {
  const Clock::time_point t0 = Clock::now();
  EngineOptions engine;
  if (!absl::GetFlag(FLAGS_kernel).empty()) {
    absl::StatusOr<const chunkd::chunking::kernels::KernelSet*> kernel =
        chunkd::chunking::kernels::FindKernelSet(absl::GetFlag(FLAGS_kernel));
    if (!kernel.ok()) {
      std::fprintf(stderr, "%s\n", kernel.status().ToString().c_str());
      std::exit(2);
    }
    engine.kernel = *kernel;
  }
  absl::StatusOr<std::unique_ptr<FastCdcGroup>> group =
      FastCdcGroup::Create(Sets(), engine);
  if (!group.ok()) {
    std::fprintf(stderr, "%s\n", group.status().ToString().c_str());
    std::exit(1);
  }
  digests->assign(Sets().size(), Digest());
  std::vector<std::vector<Chunk>> out;
  auto take = [&] {
    for (size_t i = 0; i < out.size(); ++i) {
      for (const Chunk& c : out[i]) (*digests)[i].Add(c);
      out[i].clear();
    }
  };
  for (size_t pos = 0; pos < data.size(); pos += piece) {
    (*group)->Append(Piece(data, pos, piece), &out);
    take();
  }
  (*group)->Finish(&out);
  take();
  return Seconds(t0);
}

double RunSeparate(const std::vector<uint8_t>& data, size_t piece,
                   std::vector<Digest>* digests) {
  const Clock::time_point t0 = Clock::now();
  digests->clear();
  for (const ChunkerOptions& set : Sets()) {
    absl::StatusOr<std::unique_ptr<StreamChunker>> chunker =
        StreamChunker::Create(set, EngineOptions());
    if (!chunker.ok()) {
      std::fprintf(stderr, "%s\n", chunker.status().ToString().c_str());
      std::exit(1);
    }
    Digest d;
    std::vector<Chunk> out;
    for (size_t pos = 0; pos < data.size(); pos += piece) {
      (*chunker)->Append(Piece(data, pos, piece), &out);
      for (const Chunk& c : out) d.Add(c);
      out.clear();
    }
    (*chunker)->Finish(&out);
    for (const Chunk& c : out) d.Add(c);
    digests->push_back(d);
  }
  return Seconds(t0);
}

// The group's floor: its filter alone — the fastcdc stage-1 kernel over every
// block with the bits the four sets' masks share — without the candidates
// and the selectors.
double RunFilter(const std::vector<uint8_t>& data, uint64_t* sink) {
  const chunkd::chunking::kernels::KernelSet& kernel =
      chunkd::chunking::kernels::BestKernelSet();
  const ChunkerOptions o = Sets()[0];
  const chunkd::chunking::FastCdcCutter cutter(
      o.min_size, o.avg_size, o.max_size, o.normalization_level, o.seed);
  uint64_t common = ~uint64_t{0};
  for (const ChunkerOptions& set : Sets()) {
    const chunkd::chunking::FastCdcCutter c(set.min_size, set.avg_size,
                                            set.max_size,
                                            set.normalization_level, set.seed);
    common &= c.mask_s() & c.mask_l();
  }
  const chunkd::chunking::kernels::GearParams params{cutter.gear().data(),
                                                     common, common};
  const size_t block = FastCdcGroup::kScanBlock;
  std::vector<uint64_t> a(block / 64), b(block / 64);
  const Clock::time_point t0 = Clock::now();
  for (size_t pos = 0; pos < data.size(); pos += block) {
    kernel.fastcdc(data.data(), pos, std::min(data.size(), pos + block), params,
                   a.data(), b.data());
    *sink += a[0];
  }
  return Seconds(t0);
}

// Reads every 8 bytes once: what any pass over the data costs at least.
double RunRead(const std::vector<uint8_t>& data, uint64_t* sink) {
  const Clock::time_point t0 = Clock::now();
  uint64_t acc[4] = {0, 0, 0, 0};
  const size_t words = data.size() / 8;
  const auto* w = reinterpret_cast<const uint64_t*>(data.data());
  for (size_t i = 0; i + 4 <= words; i += 4) {
    for (int k = 0; k < 4; ++k) acc[k] += w[i + k];
  }
  *sink += acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
  return Seconds(t0);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const size_t size = absl::GetFlag(FLAGS_size_mib) << 20;
  const size_t piece =
      std::max<size_t>(1, absl::GetFlag(FLAGS_piece_kib) << 10);
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  std::vector<uint8_t> data(size);
  std::mt19937_64 rng(20260531);
  for (size_t i = 0; i + 8 <= size; i += 8) {
    const uint64_t v = rng();
    std::memcpy(data.data() + i, &v, 8);
  }
  double group = 1e30, separate = 1e30, read = 1e30, filter = 1e30;
  uint64_t sink = 0;
  std::vector<Digest> dg, ds;
  if (absl::GetFlag(FLAGS_group_only)) {
    for (int r = 0; r < runs; ++r)
      group = std::min(group, RunGroup(data, piece, &dg));
    std::printf("group: %.3f s\n", group);
    return 0;
  }
  for (int r = 0; r < runs; ++r) {
    group = std::min(group, RunGroup(data, piece, &dg));
    separate = std::min(separate, RunSeparate(data, piece, &ds));
    read = std::min(read, RunRead(data, &sink));
    filter = std::min(filter, RunFilter(data, &sink));
    if (!(dg == ds)) {
      std::fprintf(stderr, "the group's chunks differ from separate passes\n");
      return 1;
    }
  }
  std::printf(
      "fastcdc_group_bench: %zu MiB random, pieces of %zu KiB, "
      "4 sets, one thread, best of %d (sink %llu)\n",
      size >> 20, piece >> 10, runs, static_cast<unsigned long long>(sink & 1));
  for (size_t i = 0; i < dg.size(); ++i) {
    std::printf("  set %zu: %llu chunks\n", i,
                static_cast<unsigned long long>(dg[i].chunks));
  }
  std::printf("seconds: group %.3f, separate %.3f, read %.3f\n", group,
              separate, read);
  std::printf("group / four separate passes: %.3f\n", group / separate);
  std::printf("group / memory read:          %.2f\n", group / read);
  std::printf("separate / memory read:       %.2f\n", separate / read);
  std::printf("group's filter alone / group: %.2f (%s)\n", filter / group,
              chunkd::chunking::kernels::BestKernelSet().name);
  std::printf("one separate pass (mean) / memory read: %.2f\n",
              separate / 4 / read);
  return 0;
}
