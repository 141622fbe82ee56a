#include "estimate/estimator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"
#include "chunking/test_util.h"
#include "estimate/distinct_sketch.h"
#include "estimate/file_cutter.h"
#include "estimate/versioned_data.h"
#include "fingerprint/fingerprint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "index/entry_cost.h"
#include "workload/datagen.h"

namespace chunkd::estimate {
namespace {

using chunking::Algorithm;
using chunking::Chunk;
using chunking::ChunkerOptions;
using ::testing::HasSubstr;

// The data set of the exactness tests: files of versioned data, one file a
// copy of another so that chunks repeat across files.
std::vector<std::string> TestFiles() {
  VersionedDataOptions options;
  options.base_size = 384 << 10;
  options.versions = 3;
  options.edits = 24;
  options.seed = 7;
  VersionedData data(options);
  std::vector<std::string> files;
  for (absl::string_view v = data.Next(); !v.empty(); v = data.Next()) {
    files.emplace_back(v);
  }
  files.push_back(files[0]);
  files.push_back(std::string(100, 'x'));  // one short chunk
  return files;
}

// Two parameter sets per algorithm: the tests' small ones and 16 times
// larger.
std::vector<SetSpec> TwoSetsPerAlgorithm() {
  std::vector<SetSpec> sets;
  for (Algorithm algorithm : chunking::AllAlgorithms()) {
    ChunkerOptions small = chunking::testing::SmallOptions(algorithm);
    ChunkerOptions larger = small;
    larger.min_size *= 16;
    larger.avg_size *= 16;
    larger.max_size *= 16;
    larger.horizon_size *= 16;
    larger.skip_size *= 4;
    const std::string name(chunking::AlgorithmName(algorithm));
    sets.push_back({name + "-small", small});
    sets.push_back({name + "-larger", larger});
  }
  return sets;
}

// What the estimate of one set must be, computed without the Estimator:
// FastChunks per file, fingerprints, sorts.
struct Expected {
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  uint64_t unique_chunks = 0;
  uint64_t unique_bytes = 0;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> histogram;
  std::vector<uint32_t> sizes;  // sorted
};

// Calls fn with the bytes of every chunk FastChunks cuts, file by file.
void ForEachFastChunk(const ChunkerOptions& options,
                      const std::vector<std::string>& files,
                      const std::function<void(absl::string_view)>& fn) {
  for (const std::string& file : files) {
    const auto data = absl::MakeConstSpan(
        reinterpret_cast<const uint8_t*>(file.data()), file.size());
    const std::vector<Chunk> chunks =
        chunking::FastChunks(options, data).value();
    for (const Chunk& c : chunks) {
      fn(absl::string_view(file.data() + c.offset, c.length));
    }
  }
}

Expected ExpectedFor(const ChunkerOptions& options,
                     const std::vector<std::string>& files) {
  Expected e;
  std::set<std::string> seen;
  ForEachFastChunk(options, files, [&](absl::string_view bytes) {
    const uint32_t length = static_cast<uint32_t>(bytes.size());
    ++e.chunks;
    e.bytes += length;
    e.sizes.push_back(length);
    uint64_t lower = 1;
    while (lower * 2 <= length) lower *= 2;
    e.histogram[lower].first += 1;
    e.histogram[lower].second += length;
    if (seen.insert(fingerprint::Digest(fingerprint::Kind::kXxh128, bytes))
            .second) {
      ++e.unique_chunks;
      e.unique_bytes += length;
    }
  });
  std::sort(e.sizes.begin(), e.sizes.end());
  return e;
}

uint32_t NearestRank(const std::vector<uint32_t>& sorted, uint64_t percent) {
  if (sorted.empty()) return 0;
  const uint64_t rank = std::max<uint64_t>(
      1, (percent * sorted.size() + 99) / 100);
  return sorted[rank - 1];
}

void ExpectMatches(const SetResult& r, const Expected& e) {
  SCOPED_TRACE(r.label);
  EXPECT_EQ(r.bytes, e.bytes);
  EXPECT_EQ(r.chunks, e.chunks);
  EXPECT_EQ(r.unique_chunks, e.unique_chunks);
  EXPECT_EQ(r.unique_bytes, e.unique_bytes);
  EXPECT_EQ(r.sampled_unique_chunks, e.unique_chunks);
  EXPECT_FALSE(r.sampled);
  EXPECT_FALSE(r.has_interval);
  EXPECT_DOUBLE_EQ(r.dedup_ratio, static_cast<double>(e.bytes) /
                                      static_cast<double>(e.unique_bytes));
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> histogram;
  for (const SizeBucket& b : r.histogram) {
    histogram[b.lower_bound] = {b.chunks, b.bytes};
  }
  EXPECT_EQ(histogram, e.histogram);
  EXPECT_DOUBLE_EQ(r.mean_chunk_size, static_cast<double>(e.bytes) /
                                          static_cast<double>(e.chunks));
  EXPECT_EQ(r.min_chunk_size, e.sizes.front());
  EXPECT_EQ(r.p50_chunk_size, NearestRank(e.sizes, 50));
  EXPECT_EQ(r.p90_chunk_size, NearestRank(e.sizes, 90));
  EXPECT_EQ(r.p99_chunk_size, NearestRank(e.sizes, 99));
  EXPECT_EQ(r.max_chunk_size, e.sizes.back());
}

// Feeds `files` in pieces of the sizes `split` gives (cycled), with a file
// mark after each file, and an extra mark (a no-op) after the first.
std::vector<SetResult> RunEstimate(const EstimatorOptions& options,
                                   const std::vector<std::string>& files,
                           const std::vector<size_t>& split) {
  std::unique_ptr<Estimator> estimator = Estimator::Create(options).value();
  size_t next = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    absl::string_view rest = files[f];
    while (!rest.empty()) {
      const size_t n = std::min(rest.size(), split[next++ % split.size()]);
      EXPECT_TRUE(estimator->Append(rest.substr(0, n)).ok());
      rest.remove_prefix(n);
    }
    EXPECT_TRUE(estimator->EndFile().ok());
    if (f == 0) {
      EXPECT_TRUE(estimator->EndFile().ok());
    }
  }
  EXPECT_EQ(estimator->files(), files.size());
  uint64_t total = 0;
  for (const std::string& file : files) total += file.size();
  EXPECT_EQ(estimator->bytes_in(), total);
  return estimator->Finish().value();
}

const std::vector<std::vector<size_t>>& Splits() {
  static const auto* const kSplits = new std::vector<std::vector<size_t>>{
      {size_t{1} << 30},                  // each file whole
      {4093},                             // small pieces
      {1, 70000, 333, 3 << 20, 65536}};  // mixed, some of one byte
  return *kSplits;
}

// Exact mode against FastChunks, per kernel set and thread count.
class ExactTest
    : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {};

TEST_P(ExactTest, EqualsDistinctFingerprintsOfFastChunks) {
  const auto& [kernel_name, threads] = GetParam();
  const chunking::kernels::KernelSet* kernel = nullptr;
  for (const auto* k : chunking::kernels::AllKernelSets()) {
    if (kernel_name == k->name) kernel = k;
  }
  ASSERT_NE(kernel, nullptr);
  if (!kernel->supported()) GTEST_SKIP() << "this CPU lacks " << kernel_name;
  const std::vector<std::string> files = TestFiles();
  EstimatorOptions options;
  options.sets = TwoSetsPerAlgorithm();
  std::vector<Expected> expected;
  for (const SetSpec& set : options.sets) {
    expected.push_back(ExpectedFor(set.options, files));
  }
  chunking::ThreadPoolExecutor pool(threads);
  options.engine.kernel = kernel;
  options.engine.executor = threads > 1 ? &pool : nullptr;
  for (const std::vector<size_t>& split : Splits()) {
    SCOPED_TRACE(absl::StrCat("split of ", split.size(), " sizes"));
    const std::vector<SetResult> results = RunEstimate(options, files, split);
    ASSERT_EQ(results.size(), options.sets.size());
    for (size_t i = 0; i < results.size(); ++i) {
      EXPECT_EQ(results[i].label, options.sets[i].label);
      ExpectMatches(results[i], expected[i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    KernelsAndThreads, ExactTest,
    ::testing::Combine(::testing::ValuesIn(chunking::testing::KernelNames()),
                       ::testing::Values(size_t{1}, size_t{3})),
    [](const auto& info) {
      return absl::StrCat(std::get<0>(info.param), "_threads",
                          std::get<1>(info.param));
    });


EstimatorOptions OneSet(const ChunkerOptions& chunking, uint32_t rate = 1) {
  EstimatorOptions options;
  options.sets = {{"set", chunking}};
  options.sample_rate = rate;
  return options;
}

ChunkerOptions Fixed(uint32_t size) {
  ChunkerOptions options = chunking::DefaultOptions(Algorithm::kFixed);
  options.avg_size = size;
  options.min_size = size;
  options.max_size = size;
  return options;
}

uint64_t BigEndian(absl::string_view bytes) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(bytes[i]);
  return v;
}

// Every kept chunk, by fingerprint: (length, copies).
std::map<std::string, std::pair<uint32_t, uint64_t>> Kept(
    const Estimator& estimator, size_t set) {
  std::map<std::string, std::pair<uint32_t, uint64_t>> kept;
  estimator.ForEachKept(set, [&](const KeptChunk& c) {
    kept[std::string(c.fingerprint)] = {c.length, c.copies};
  });
  return kept;
}

std::unique_ptr<Estimator> Fed(const EstimatorOptions& options,
                               const std::vector<std::string>& files) {
  std::unique_ptr<Estimator> estimator = Estimator::Create(options).value();
  for (const std::string& file : files) {
    EXPECT_TRUE(estimator->Append(file).ok());
    EXPECT_TRUE(estimator->EndFile().ok());
  }
  return estimator;
}

TEST(SamplingTest, KeepsOrDropsEveryCopyTogether) {
  const std::vector<std::string> files = TestFiles();
  const ChunkerOptions chunking = chunking::testing::SmallOptions(
      Algorithm::kFastCdc);
  constexpr uint32_t kRate = 8;
  const auto exact = Fed(OneSet(chunking), files);
  const auto sampled = Fed(OneSet(chunking, kRate), files);
  const auto all = Kept(*exact, 0);
  const auto kept = Kept(*sampled, 0);
  size_t expected_kept = 0;
  for (const auto& [fp, counts] : all) {
    const bool keep = BigEndian(fp) <= UINT64_MAX / kRate;
    expected_kept += keep ? 1 : 0;
    auto it = kept.find(fp);
    ASSERT_EQ(it != kept.end(), keep) << fingerprint::ToHex(fp);
    if (keep) {
      EXPECT_EQ(it->second, counts);  // every copy counted
    }
  }
  EXPECT_EQ(kept.size(), expected_kept);
  EXPECT_GT(kept.size(), 100u);
  EXPECT_LT(kept.size(), all.size() / 4);
  // Sizes and counts still see every chunk.
  const SetResult e = exact->Finish().value()[0];
  const SetResult s = sampled->Finish().value()[0];
  EXPECT_EQ(s.chunks, e.chunks);
  EXPECT_EQ(s.histogram.size(), e.histogram.size());
  EXPECT_EQ(s.p90_chunk_size, e.p90_chunk_size);
  EXPECT_TRUE(s.sampled);
  EXPECT_EQ(s.sampled_unique_chunks, kept.size());
  // The distinct chunks come from the sketch of every fingerprint: within
  // a few of its standard errors (0.3 % here) of the exact count.
  EXPECT_NEAR(static_cast<double>(s.unique_chunks),
              static_cast<double>(e.unique_chunks),
              0.02 * static_cast<double>(e.unique_chunks));
  // The unique bytes come from the sketch of granules: within a few of its
  // standard errors of the exact bytes.
  EXPECT_NEAR(static_cast<double>(s.unique_bytes),
              static_cast<double>(e.unique_bytes),
              0.02 * static_cast<double>(e.unique_bytes));
  // The ratio is bytes over the estimated unique bytes, as the columns say.
  EXPECT_NEAR(s.dedup_ratio,
              static_cast<double>(s.bytes) / static_cast<double>(s.unique_bytes),
              1e-6 * s.dedup_ratio);
  ASSERT_TRUE(s.has_interval);
  EXPECT_LE(s.ratio_low, s.dedup_ratio);
  EXPECT_GE(s.ratio_high, s.dedup_ratio);
  EXPECT_GE(s.ratio_low, 1.0);
}

// Everything a result holds, compared field by field.
void ExpectSameResult(const SetResult& a, const SetResult& b) {
  SCOPED_TRACE(a.label);
  EXPECT_EQ(a.label, b.label);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.chunks, b.chunks);
  EXPECT_EQ(a.unique_chunks, b.unique_chunks);
  EXPECT_EQ(a.unique_bytes, b.unique_bytes);
  EXPECT_EQ(a.dedup_ratio, b.dedup_ratio);
  ASSERT_EQ(a.histogram.size(), b.histogram.size());
  for (size_t i = 0; i < a.histogram.size(); ++i) {
    EXPECT_EQ(a.histogram[i].lower_bound, b.histogram[i].lower_bound);
    EXPECT_EQ(a.histogram[i].chunks, b.histogram[i].chunks);
    EXPECT_EQ(a.histogram[i].bytes, b.histogram[i].bytes);
  }
  EXPECT_EQ(a.mean_chunk_size, b.mean_chunk_size);
  EXPECT_EQ(a.min_chunk_size, b.min_chunk_size);
  EXPECT_EQ(a.p50_chunk_size, b.p50_chunk_size);
  EXPECT_EQ(a.p90_chunk_size, b.p90_chunk_size);
  EXPECT_EQ(a.p99_chunk_size, b.p99_chunk_size);
  EXPECT_EQ(a.max_chunk_size, b.max_chunk_size);
  EXPECT_EQ(a.sampled_unique_chunks, b.sampled_unique_chunks);
  EXPECT_EQ(a.has_interval, b.has_interval);
  EXPECT_EQ(a.ratio_low, b.ratio_low);
  EXPECT_EQ(a.ratio_high, b.ratio_high);
}

// FastCDC sets of two seeds and another algorithm among them: the sets of
// one seed are cut by one FastCdcGroup, or each by its own StreamChunker.
TEST(GroupTest, SameResultsWithAndWithoutTheGroup) {
  const std::vector<std::string> files = TestFiles();
  EstimatorOptions options;
  for (uint32_t avg : {256u, 1024u, 4096u, 16384u, 700u}) {
    for (uint64_t seed : {0u, 666u}) {
      ChunkerOptions fastcdc = chunking::DefaultOptions(Algorithm::kFastCdc);
      fastcdc.min_size = avg / 4;
      fastcdc.avg_size = avg;
      fastcdc.max_size = avg * 4;
      fastcdc.seed = seed;
      fastcdc.normalization_level = avg == 700 ? 3 : 1;
      options.sets.push_back({absl::StrCat("fastcdc-", avg, "-", seed),
                              fastcdc});
    }
  }
  options.sets.insert(options.sets.begin() + 3,
                      {"seqcdc", chunking::testing::SmallOptions(
                                     Algorithm::kSeqCdc)});
  options.sample_rate = 4;
  // The groups: seed 0's five FastCDC sets, seed 666's five, seqcdc alone.
  std::vector<ChunkerOptions> chunkings;
  for (const SetSpec& set : options.sets) chunkings.push_back(set.options);
  const std::vector<CutterGroup> groups = GroupSets(chunkings, true);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_THAT(groups[0].sets, ::testing::ElementsAre(0, 2, 5, 7, 9));
  EXPECT_TRUE(groups[0].fastcdc_group);
  EXPECT_THAT(groups[1].sets, ::testing::ElementsAre(1, 4, 6, 8, 10));
  EXPECT_TRUE(groups[1].fastcdc_group);
  EXPECT_THAT(groups[2].sets, ::testing::ElementsAre(3));
  EXPECT_FALSE(groups[2].fastcdc_group);
  EXPECT_EQ(GroupSets(chunkings, false).size(), chunkings.size());
  chunking::ThreadPoolExecutor pool(3);
  for (bool threads : {false, true}) {
    options.engine.executor = threads ? &pool : nullptr;
    for (const std::vector<size_t>& split : Splits()) {
      options.group_fastcdc = true;
      const std::vector<SetResult> grouped = RunEstimate(options, files, split);
      options.group_fastcdc = false;
      const std::vector<SetResult> apart = RunEstimate(options, files, split);
      ASSERT_EQ(grouped.size(), options.sets.size());
      ASSERT_EQ(apart.size(), options.sets.size());
      for (size_t i = 0; i < grouped.size(); ++i) {
        ExpectSameResult(grouped[i], apart[i]);
      }
    }
  }
}

TEST(SamplingTest, ResultsAreDeterministic) {
  const std::vector<std::string> files = TestFiles();
  EstimatorOptions options;
  options.sets = TwoSetsPerAlgorithm();
  options.sample_rate = 16;
  chunking::ThreadPoolExecutor pool(3);
  const std::vector<SetResult> a = RunEstimate(options, files, {4093});
  options.engine.executor = &pool;
  const std::vector<SetResult> b = RunEstimate(options, files, {1 << 30});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].label);
    EXPECT_EQ(a[i].unique_chunks, b[i].unique_chunks);
    EXPECT_EQ(a[i].unique_bytes, b[i].unique_bytes);
    EXPECT_EQ(a[i].dedup_ratio, b[i].dedup_ratio);
    EXPECT_EQ(a[i].has_interval, b[i].has_interval);
    EXPECT_EQ(a[i].ratio_low, b[i].ratio_low);
    EXPECT_EQ(a[i].ratio_high, b[i].ratio_high);
  }
}

TEST(FingerprintTest, Sha256CountsTheSameChunks) {
  const std::vector<std::string> files = TestFiles();
  const ChunkerOptions chunking = chunking::testing::SmallOptions(
      Algorithm::kSeqCdc);
  EstimatorOptions options = OneSet(chunking);
  options.fingerprint = FingerprintKind::kSha256;
  const auto sha = Fed(options, files);
  std::set<std::string> expected;
  ForEachFastChunk(chunking, files, [&](absl::string_view bytes) {
    expected.insert(fingerprint::Digest(fingerprint::Kind::kSha256, bytes));
  });
  std::set<std::string> kept;
  sha->ForEachKept(0, [&](const KeptChunk& c) {
    EXPECT_EQ(c.fingerprint.size(), 32u);
    kept.insert(std::string(c.fingerprint));
  });
  EXPECT_EQ(kept, expected);
  const Expected e = ExpectedFor(chunking, files);
  EXPECT_EQ(sha->Finish().value()[0].unique_bytes, e.unique_bytes);
}

// Coverage of the 95 % interval: data sets of blocks drawn with repeats from
// a pool, cut by fixed-size chunks of the block size, so that the exact
// ratio is known from the draws. The seeds are fixed: the test either passes
// or fails, always the same way.
TEST(IntervalTest, CoversTheExactRatioIn93Of100) {
  constexpr size_t kBlock = 64;
  constexpr size_t kPool = 32000;
  constexpr size_t kDraws = 48000;
  constexpr uint32_t kRate = 64;
  int covered = 0;
  size_t min_kept = SIZE_MAX;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    workload::Xoshiro256 rng(seed);
    const std::vector<uint8_t> pool =
        workload::RandomBytes(kPool * kBlock, seed + 1000);
    std::string data;
    data.reserve(kDraws * kBlock);
    std::vector<bool> drawn(kPool, false);
    size_t distinct = 0;
    for (size_t i = 0; i < kDraws; ++i) {
      // Skewed: low blocks repeat often, high ones rarely.
      const uint64_t u = rng.Below(kPool);
      const size_t block = static_cast<size_t>(u * rng.Below(kPool) / kPool);
      distinct += drawn[block] ? 0 : 1;
      drawn[block] = true;
      data.append(reinterpret_cast<const char*>(pool.data()) + block * kBlock,
                  kBlock);
    }
    const double exact =
        static_cast<double>(kDraws) / static_cast<double>(distinct);
    const auto estimator = Fed(OneSet(Fixed(kBlock), kRate), {data});
    const SetResult r = estimator->Finish().value()[0];
    ASSERT_TRUE(r.has_interval);
    min_kept = std::min<size_t>(min_kept, r.sampled_unique_chunks);
    if (r.ratio_low <= exact && exact <= r.ratio_high) ++covered;
  }
  EXPECT_GE(min_kept, 200u);
  EXPECT_GE(covered, 93);
  std::printf("the interval covered the exact ratio in %d of 100\n", covered);
  EXPECT_LE(covered, 99);  // an interval too wide would cover every time
}

TEST(IntervalTest, ExactWhenNotSampled) {
  const std::vector<KeptCount> kept = {{100, 1}, {200, 3}, {50, 2}};
  const RatioInterval exact = ComputeRatioInterval(kept, 1, 800);
  EXPECT_TRUE(exact.valid);
  EXPECT_DOUBLE_EQ(exact.ratio, (100.0 + 600 + 100) / 350);
  EXPECT_DOUBLE_EQ(exact.low, exact.ratio);
  EXPECT_DOUBLE_EQ(exact.high, exact.ratio);
  // The formula of docs/estimate.md at a rate of 4, of 4000 bytes: 10
  // distinct chunks counted within 1 %, 30 granules of 64 bytes within 2 %;
  // the kept chunks' pads to granules are 28, 56 and 14.
  SketchCounts sketches;
  sketches.chunks = {10, 0.01};
  sketches.granules = {30, 0.02};
  sketches.granule_bytes = 64;
  const RatioInterval s = ComputeRatioInterval(kept, 4, 4000, sketches);
  const double pad = (28.0 + 56 + 14) / 3;
  const double pad_var = ((28 - pad) * (28 - pad) + (56 - pad) * (56 - pad) +
                          (14 - pad) * (14 - pad)) / 2;
  const double unique = 30 * 64 - 10 * pad;
  const double e = std::sqrt(std::pow(30 * 64 * 0.02, 2) +
                             std::pow(10 * pad * 0.01, 2) +
                             100 * 0.75 * pad_var / 3) / unique;
  EXPECT_NEAR(s.unique_chunks, 10, 1e-9);
  EXPECT_NEAR(s.unique_bytes, unique, 1e-9);
  EXPECT_NEAR(s.ratio, 4000 / unique, 1e-12);
  EXPECT_NEAR(s.low, 4000 / (unique * (1 + 1.96 * e)), 1e-12);
  EXPECT_NEAR(s.high, 4000 / std::max(350.0, unique * (1 - 1.96 * e)), 1e-12);
  EXPECT_LT(s.low, s.ratio);
  EXPECT_GT(s.high, s.ratio);
  // The unique bytes are at most all bytes: the low end is at least 1, and
  // there are at least the kept chunks.
  sketches.chunks = {2, 0.01};
  sketches.granules = {7, 0.01};
  const RatioInterval few = ComputeRatioInterval(kept, 4, 400, sketches);
  EXPECT_EQ(few.unique_chunks, 3);
  EXPECT_EQ(few.low, 1.0);
  EXPECT_FALSE(ComputeRatioInterval({{100, 5}}, 4, 2000, sketches).valid);
  // Nothing kept: the sketches still count; the pad is half a granule.
  sketches.chunks = {4, 0.01};
  sketches.granules = {20, 0.01};
  const RatioInterval none = ComputeRatioInterval({}, 4, 4000, sketches);
  EXPECT_FALSE(none.valid);
  EXPECT_NEAR(none.unique_chunks, 4, 1e-9);
  EXPECT_NEAR(none.unique_bytes, 20 * 64 - 4 * 32, 1e-9);
  EXPECT_NEAR(none.ratio, 4000.0 / (20 * 64 - 4 * 32), 1e-12);
  EXPECT_EQ(ComputeRatioInterval({}, 4, 0).ratio, 0);
}

TEST(DistinctSketchTest, CountsDistinctValuesWithinItsError) {
  for (uint64_t n : {1000u, 50000u, 200000u, 400000u, 2000000u}) {
    SCOPED_TRACE(n);
    DistinctSketch sketch;
    workload::Xoshiro256 rng(n);
    std::vector<uint64_t> values(n);
    for (uint64_t& v : values) v = rng.Next();
    for (uint64_t v : values) sketch.Add(v);
    const DistinctSketch::Count once = sketch.Estimate();
    // Repetitions and order change nothing.
    for (size_t i = values.size(); i-- > 0;) sketch.Add(values[i]);
    const DistinctSketch::Count twice = sketch.Estimate();
    EXPECT_EQ(once.distinct, twice.distinct);
    EXPECT_GT(once.relative_se, 0.0);
    EXPECT_LT(once.relative_se, 0.007);
    // Within four standard errors: a seeded run, not a flaky bound.
    EXPECT_NEAR(once.distinct / static_cast<double>(n), 1.0,
                4 * once.relative_se);
  }
  EXPECT_EQ(DistinctSketch().Estimate().distinct, 0);
}

TEST(ErrorsTest, RefusesBadOptionsNamingTheProblem) {
  const ChunkerOptions fastcdc = chunking::DefaultOptions(Algorithm::kFastCdc);
  auto error = [](const EstimatorOptions& options) {
    return Estimator::Create(options).status();
  };
  EstimatorOptions none;
  EXPECT_EQ(error(none).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(error(none).message(), HasSubstr("1 to 16 parameter sets"));
  EstimatorOptions many;
  many.sets.assign(17, {"s", fastcdc});
  EXPECT_THAT(error(many).message(), HasSubstr("got 17"));
  EstimatorOptions label = OneSet(fastcdc);
  label.sets.push_back({std::string(257, 'l'), fastcdc});
  EXPECT_EQ(error(label).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(error(label).message(), HasSubstr("sets[1].label has 257 bytes; at most 256"));
  label.sets[1].label.resize(256);
  EXPECT_TRUE(error(label).ok());
  EXPECT_THAT(error(OneSet(fastcdc, 0)).message(), HasSubstr("sample_rate"));
  EXPECT_THAT(error(OneSet(fastcdc, kMaxSampleRate + 1)).message(),
              HasSubstr("sample_rate must be in [1, 1048576]"));
  EXPECT_TRUE(error(OneSet(fastcdc, kMaxSampleRate)).ok());
  EstimatorOptions bad = OneSet(fastcdc);
  ChunkerOptions small_max = fastcdc;
  small_max.max_size = 100;
  bad.sets.push_back({"fastcdc:max=100", small_max});
  EXPECT_EQ(error(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(error(bad).message(),
              HasSubstr("sets[1] (label \"fastcdc:max=100\"): "));
  EXPECT_THAT(error(bad).message(), HasSubstr("max_size"));
}

TEST(LimitsTest, MaxEntriesStopsWithResourceExhausted) {
  const std::vector<std::string> files = TestFiles();
  EstimatorOptions options = OneSet(Fixed(256));
  options.sets.push_back({"second", Fixed(512)});
  options.max_entries = 1000;
  std::unique_ptr<Estimator> estimator = Estimator::Create(options).value();
  const absl::Status status = estimator->Append(files[0]);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("max_entries = 1000"));
  EXPECT_THAT(status.message(), HasSubstr("sample_rate (e.g. 64)"));
  EXPECT_EQ(estimator->entries(), 1000u);
  // The error sticks.
  EXPECT_EQ(estimator->EndFile().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(estimator->Finish().status().code(),
            absl::StatusCode::kResourceExhausted);
  // Sampled, the same data fits.
  options.sample_rate = 64;
  estimator = Estimator::Create(options).value();
  EXPECT_TRUE(estimator->Append(files[0]).ok());
  EXPECT_TRUE(estimator->Finish().ok());
  EXPECT_LT(estimator->entries(), 1000u);
}

TEST(LimitsTest, EmptyDataSet) {
  std::unique_ptr<Estimator> estimator =
      Estimator::Create(OneSet(Fixed(256), 4)).value();
  EXPECT_TRUE(estimator->EndFile().ok());
  EXPECT_TRUE(estimator->Append("").ok());
  EXPECT_TRUE(estimator->EndFile().ok());
  const SetResult r = estimator->Finish().value()[0];
  EXPECT_EQ(estimator->files(), 0u);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_EQ(r.chunks, 0u);
  EXPECT_EQ(r.unique_chunks, 0u);
  EXPECT_EQ(r.dedup_ratio, 0);
  EXPECT_EQ(r.mean_chunk_size, 0);
  EXPECT_EQ(r.max_chunk_size, 0u);
  EXPECT_TRUE(r.histogram.empty());
  EXPECT_FALSE(r.has_interval);
  ASSERT_EQ(r.index_costs.size(), 3u);
  EXPECT_EQ(r.index_costs[0].bytes, 0u);
}

TEST(LimitsTest, FileMarksWithoutBytesAddNoFile) {
  std::unique_ptr<Estimator> estimator =
      Estimator::Create(OneSet(Fixed(256))).value();
  const std::string block(1000, 'a');
  EXPECT_TRUE(estimator->Append(block).ok());
  EXPECT_TRUE(estimator->EndFile().ok());
  EXPECT_TRUE(estimator->EndFile().ok());
  EXPECT_TRUE(estimator->Append(block).ok());
  EXPECT_EQ(estimator->files(), 1u);
  const SetResult r = estimator->Finish().value()[0];
  EXPECT_EQ(estimator->files(), 2u);
  // Each file restarts the chunking: 3 chunks of 256 and one of 232 each.
  EXPECT_EQ(r.chunks, 8u);
  EXPECT_EQ(r.unique_chunks, 2u);
  EXPECT_EQ(r.min_chunk_size, 232u);
  EXPECT_DOUBLE_EQ(r.dedup_ratio, 2000.0 / 488);
}

TEST(IndexCostTest, EntriesTimesBytesPerEntryRoundedUp) {
  const std::vector<std::string> files = TestFiles();
  const auto estimator = Fed(OneSet(Fixed(64)), files);
  const SetResult r = estimator->Finish().value()[0];
  ASSERT_EQ(r.index_costs.size(), 3u);
  const char* const names[] = {"memory", "rocksdb", "redis"};
  const char* const media[] = {"memory", "disk", "memory"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.index_costs[i].backend, names[i]);
    EXPECT_EQ(r.index_costs[i].medium, media[i]);
    EXPECT_EQ(r.index_costs[i].entries, r.unique_chunks);
  }
  // The figures at fewer than 1M entries: 53, 37.2 and 65.8 bytes.
  const uint64_t n = r.unique_chunks;
  EXPECT_EQ(r.index_costs[0].bytes, n * 53);
  EXPECT_EQ(r.index_costs[1].bytes, (n * 372 + 9) / 10);
  EXPECT_EQ(r.index_costs[2].bytes, (n * 658 + 9) / 10);
  EXPECT_EQ(index::IndexBytes(index::CostedIndex::kRocksDb, 1000), 37200u);
  EXPECT_EQ(index::IndexBytes(index::CostedIndex::kRocksDb, 1001), 37238u);
  EXPECT_EQ(index::IndexBytes(index::CostedIndex::kMemory, 10'000'000),
            490'000'000u);
}

TEST(MemoryTest, CountsTablesAndChunkers) {
  const std::vector<std::string> files = TestFiles();
  std::unique_ptr<Estimator> estimator =
      Estimator::Create(OneSet(Fixed(64))).value();
  const size_t empty = estimator->memory_bytes();
  ASSERT_TRUE(estimator->Append(files[0]).ok());
  const size_t open = estimator->memory_bytes();
  // Thousands of entries of at least 16 + 12 bytes each.
  EXPECT_GT(open, empty + estimator->entries() * 28);
  ASSERT_TRUE(estimator->EndFile().ok());
  EXPECT_LT(estimator->memory_bytes(), open);  // no chunker between files
}

}  // namespace
}  // namespace chunkd::estimate
