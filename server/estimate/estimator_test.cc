#include "estimate/estimator.h"

#include <algorithm>
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

Expected ExpectedFor(const ChunkerOptions& options,
                     const std::vector<std::string>& files) {
  Expected e;
  std::set<std::string> seen;
  for (const std::string& file : files) {
    const auto data = absl::MakeConstSpan(
        reinterpret_cast<const uint8_t*>(file.data()), file.size());
    const std::vector<Chunk> chunks =
        chunking::FastChunks(options, data).value();
    for (const Chunk& c : chunks) {
      const absl::string_view bytes(file.data() + c.offset, c.length);
      ++e.chunks;
      e.bytes += c.length;
      e.sizes.push_back(c.length);
      uint64_t lower = 1;
      while (lower * 2 <= c.length) lower *= 2;
      e.histogram[lower].first += 1;
      e.histogram[lower].second += c.length;
      if (seen.insert(fingerprint::Digest(fingerprint::Kind::kXxh128, bytes))
              .second) {
        ++e.unique_chunks;
        e.unique_bytes += c.length;
      }
    }
  }
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

}  // namespace
}  // namespace chunkd::estimate
