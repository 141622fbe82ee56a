#include "estimate/estimator.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "estimate/file_cutter.h"
#include "estimate/set_tally.h"
#include "index/entry_cost.h"

namespace chunkd::estimate {
namespace {

using chunking::Chunk;

// Pieces are cut in slices of this many bytes, every set in turn, so that
// the slice is still in cache when the next set reads it; or longer, as long
// as every chunker needs to cut them in place (InPlacePieceBytes).
constexpr size_t kSliceBytes = size_t{1} << 20;

// The normal quantile of a two-sided 95 % interval.
constexpr double kZ95 = 1.96;

// The unique chunks and bytes, the ratio and its interval from the kept
// chunks that `for_each` visits (it calls its argument with each one's
// length), for a sample of 1 in `rate` of a data set of `total_bytes`
// (docs/estimate.md, "The interval"). Exact at rate 1. Sampled: D distinct
// chunks (`sketches.chunks`) whose bytes, rounded up to granules, are
// `sketches.granules` granules of `sketches.granule_bytes`: U = g G - D *
// mean(pad), the pad of a kept chunk being what rounding it up adds, its
// mean from the sample. The ratio is total_bytes / U, and U's variance sums
// those of its three terms. The sums are exact integers, so the result does
// not depend on the order of the visit (a table's order does).
template <typename ForEach>
RatioInterval IntervalOf(const ForEach& for_each, uint32_t rate,
                         uint64_t total_bytes, const SketchCounts& sketches) {
  const uint64_t g = std::max<uint64_t>(sketches.granule_bytes, 1);
  absl::uint128 sum_u = 0, sum_pad = 0, sum_pad2 = 0;
  uint64_t kept = 0;
  for_each([&](uint64_t length) {
    const uint64_t pad = (length + g - 1) / g * g - length;
    sum_u += length;
    sum_pad += pad;
    sum_pad2 += absl::uint128(pad) * pad;
    ++kept;
  });
  RatioInterval out;
  using Real = long double;
  const Real n = std::max<uint32_t>(rate, 1);
  const Real t = static_cast<Real>(total_bytes);
  const Real k = static_cast<Real>(kept);
  const Real kept_bytes = static_cast<Real>(sum_u);
  out.valid = kept >= 2;
  if (n == 1) {
    if (kept == 0 || sum_u == 0) return out;
    out.unique_chunks = k;
    out.unique_bytes = kept_bytes;
    out.ratio = out.low = out.high = static_cast<double>(t / kept_bytes);
    return out;
  }
  if (total_bytes == 0 || sketches.granules.distinct <= 0) return out;
  // With no chunk kept, the mean pad is taken as half a granule.
  const Real pad = kept == 0 ? static_cast<Real>(g) / 2
                             : static_cast<Real>(sum_pad) / k;
  // Fewer than two kept: the pad's variance is that of a uniform one.
  const Real pad_var =
      kept < 2 ? static_cast<Real>(g) * static_cast<Real>(g) / 12
               : std::max(Real{0}, (static_cast<Real>(sum_pad2) - k * pad * pad) /
                                       (k - 1));
  const Real chunks = std::max<Real>(sketches.chunks.distinct, k);
  const Real granule_bytes =
      static_cast<Real>(g) * static_cast<Real>(sketches.granules.distinct);
  // The unique bytes are at least the kept ones, and at most all bytes.
  const Real unique =
      std::clamp(granule_bytes - chunks * pad, std::max(kept_bytes, Real{1}), t);
  const Real e_granules = granule_bytes * sketches.granules.relative_se;
  const Real e_pad_chunks = chunks * pad * sketches.chunks.relative_se;
  const Real e_pad =
      chunks * std::sqrt((1 - 1 / n) * pad_var / std::max(k, Real{1}));
  const Real rse = std::sqrt(e_granules * e_granules +
                             e_pad_chunks * e_pad_chunks + e_pad * e_pad) /
                   unique;
  out.unique_chunks = static_cast<double>(chunks);
  out.unique_bytes = static_cast<double>(unique);
  out.ratio = static_cast<double>(t / unique);
  out.low = static_cast<double>(t / std::min(t, unique * (1 + kZ95 * rse)));
  out.high = static_cast<double>(
      t / std::max({kept_bytes, Real{1}, unique * (1 - kZ95 * rse)}));
  return out;
}

absl::Status CheckOptions(const EstimatorOptions& options) {
  if (options.sets.empty() || options.sets.size() > kMaxSets) {
    return absl::InvalidArgumentError(
        absl::StrCat("an estimate takes 1 to ", kMaxSets,
                     " parameter sets, got ", options.sets.size()));
  }
  if (options.sample_rate == 0 || options.sample_rate > kMaxSampleRate) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample_rate must be in [1, ", kMaxSampleRate, "], got ",
                     options.sample_rate));
  }
  for (size_t i = 0; i < options.sets.size(); ++i) {
    const SetSpec& set = options.sets[i];
    // Named as the Estimate RPC names them: "sets[3] (label \"fixed:avg=7\")".
    const std::string name = absl::StrCat("sets[", i, "] (label \"",
                                          absl::CEscape(set.label), "\")");
    if (set.label.size() > kMaxLabelBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("sets[", i, "].label has ", set.label.size(),
                       " bytes; at most ", kMaxLabelBytes));
    }
    absl::Status status = chunking::ValidateOptions(set.options);
    if (status.ok()) {
      status = chunking::PlanEngine(set.options, options.engine).status();
    }
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat(name, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

RatioInterval ComputeRatioInterval(absl::Span<const KeptCount> kept,
                                   uint32_t sample_rate, uint64_t total_bytes,
                                   const SketchCounts& sketches) {
  return IntervalOf(
      [&](const auto& fn) {
        for (const KeptCount& k : kept) fn(k.length);
      },
      sample_rate, total_bytes, sketches);
}

class Estimator::Impl {
 public:
  explicit Impl(const EstimatorOptions& options)
      : options_(options), budget_(options.max_entries) {
    for (const SetSpec& set : options_.sets) {
      set_options_.push_back(set.options);
      tallies_.emplace_back(options_.fingerprint, options_.sample_rate,
                            set.options);
    }
    groups_ = GroupSets(set_options_, options_.group_fastcdc);
    slice_bytes_ = std::max(kSliceBytes, InPlacePieceBytes(set_options_));
  }

  absl::Status Append(absl::string_view piece) {
    while (!piece.empty() && status_.ok()) {
      const absl::string_view slice =
          piece.substr(0, std::min(piece.size(), slice_bytes_));
      piece.remove_prefix(slice.size());
      if (cutters_.empty()) status_ = OpenFile();
      if (!status_.ok()) break;
      for (size_t g = 0; g < cutters_.size(); ++g) {
        cutters_[g]->Append(slice, &outs_[g]);
      }
      Tally();
      bytes_in_ += slice.size();
    }
    return status_;
  }

  absl::Status EndFile() {
    if (!status_.ok() || cutters_.empty()) return status_;
    for (size_t g = 0; g < cutters_.size(); ++g) cutters_[g]->Finish(&outs_[g]);
    Tally();
    cutters_.clear();
    ++files_;
    return status_;
  }

  absl::StatusOr<std::vector<SetResult>> Finish() {
    absl::Status status = EndFile();
    if (!status.ok()) return status;
    std::vector<SetResult> results;
    for (size_t i = 0; i < tallies_.size(); ++i) results.push_back(Result(i));
    return results;
  }

  void ForEachKept(size_t set,
                   const std::function<void(const KeptChunk&)>& fn) const {
    if (set < tallies_.size()) tallies_[set].kept().ForEach(fn);
  }

  uint64_t bytes_in() const { return bytes_in_; }
  uint64_t files() const { return files_; }
  uint64_t entries() const { return budget_.used(); }
  size_t memory_bytes() const {
    size_t bytes = 0;
    for (const SetTally& tally : tallies_) bytes += tally.memory_bytes();
    for (const auto& cutter : cutters_) bytes += cutter->memory_bytes();
    return bytes;
  }
  const EstimatorOptions& options() const { return options_; }

 private:
  absl::Status OpenFile() {
    for (const CutterGroup& group : groups_) {
      absl::StatusOr<std::unique_ptr<FileCutter>> cutter =
          NewFileCutter(group, set_options_, options_.engine);
      if (!cutter.ok()) {
        cutters_.clear();
        return cutter.status();
      }
      cutters_.push_back(*std::move(cutter));
    }
    outs_.resize(cutters_.size());
    return absl::OkStatus();
  }

  // Counts the chunks the cutters just emitted, the sets spread over the
  // executor's threads.
  void Tally() {
    std::vector<std::pair<size_t, size_t>> work;  // (group, k)
    for (size_t g = 0; g < groups_.size(); ++g) {
      for (size_t k = 0; k < groups_[g].sets.size(); ++k) work.push_back({g, k});
    }
    chunking::RunParallel(options_.engine.executor, work.size(), [&](size_t w) {
      const auto [g, k] = work[w];
      const FileCutter& cutter = *cutters_[g];
      tallies_[groups_[g].sets[k]].Add(
          outs_[g][k],
          [&](const Chunk& chunk) { return cutter.ChunkData(k, chunk); },
          &budget_);
    });
    if (budget_.exhausted()) status_ = Exhausted();
  }

  absl::Status Exhausted() const {
    const uint64_t suggested = std::min<uint64_t>(
        uint64_t{options_.sample_rate} * 64, kMaxSampleRate);
    return absl::ResourceExhaustedError(absl::StrCat(
        "the estimate needs more than max_entries = ", budget_.limit(),
        " distinct chunks (and chunk sizes beyond ", kSizesPerSet,
        " per set) over its sets after ", bytes_in_,
        " bytes at sample_rate ", options_.sample_rate,
        "; sample fewer chunks with a higher sample_rate (e.g. ", suggested,
        ") or raise the limit"));
  }

  SetResult Result(size_t i) const {
    const SetTally& tally = tallies_[i];
    const uint32_t rate = options_.sample_rate;
    SetResult r;
    r.label = options_.sets[i].label;
    r.options = options_.sets[i].options;
    r.bytes = tally.sizes().bytes();
    tally.sizes().Fill(&r);
    SketchCounts sketches;
    if (tally.sketch() != nullptr) {
      const DistinctSketch::Count chunks = tally.sketch()->Estimate();
      const DistinctSketch::Count granules = tally.granule_sketch()->Estimate();
      sketches.chunks = DistinctCount{chunks.distinct, chunks.relative_se};
      sketches.granules = DistinctCount{granules.distinct, granules.relative_se};
      sketches.granule_bytes = tally.granule_bytes();
    }
    const RatioInterval interval = IntervalOf(
        [&](const auto& fn) {
          tally.kept().ForEach([&](const KeptChunk& c) { fn(c.length); });
        },
        rate, r.bytes, sketches);
    r.sampled_unique_chunks = tally.kept().size();
    if (rate == 1) {
      // Exact: the integers themselves, not through a double.
      r.unique_chunks = tally.kept().size();
      tally.kept().ForEach(
          [&](const KeptChunk& c) { r.unique_bytes += c.length; });
    } else {
      r.unique_chunks =
          static_cast<uint64_t>(std::llround(interval.unique_chunks));
      r.unique_bytes =
          static_cast<uint64_t>(std::llround(interval.unique_bytes));
    }
    r.dedup_ratio = interval.ratio;
    r.sampled = rate > 1;
    r.has_interval = r.sampled && interval.valid;
    if (r.has_interval) {
      r.ratio_low = interval.low;
      r.ratio_high = interval.high;
    }
    for (index::CostedIndex backend : index::AllCostedIndexes()) {
      r.index_costs.push_back(IndexCostEstimate{
          std::string(index::CostedIndexName(backend)),
          std::string(index::CostedIndexMedium(backend)), r.unique_chunks,
          index::IndexBytes(backend, r.unique_chunks)});
    }
    return r;
  }

  const EstimatorOptions options_;
  std::vector<chunking::ChunkerOptions> set_options_;
  std::vector<CutterGroup> groups_;
  size_t slice_bytes_ = kSliceBytes;
  std::vector<SetTally> tallies_;
  EntryBudget budget_;
  // The current file's cutters, one per group; empty between files.
  std::vector<std::unique_ptr<FileCutter>> cutters_;
  std::vector<std::vector<std::vector<Chunk>>> outs_;  // per group, per set
  uint64_t bytes_in_ = 0;
  uint64_t files_ = 0;
  absl::Status status_;  // the first error; every later call returns it
};

absl::StatusOr<std::unique_ptr<Estimator>> Estimator::Create(
    const EstimatorOptions& options) {
  absl::Status status = CheckOptions(options);
  if (!status.ok()) return status;
  return std::unique_ptr<Estimator>(
      new Estimator(std::make_unique<Impl>(options)));
}

Estimator::Estimator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Estimator::~Estimator() = default;

absl::Status Estimator::Append(absl::string_view piece) {
  return impl_->Append(piece);
}
absl::Status Estimator::EndFile() { return impl_->EndFile(); }
absl::StatusOr<std::vector<SetResult>> Estimator::Finish() {
  return impl_->Finish();
}
void Estimator::ForEachKept(
    size_t set, const std::function<void(const KeptChunk&)>& fn) const {
  impl_->ForEachKept(set, fn);
}
uint64_t Estimator::bytes_in() const { return impl_->bytes_in(); }
uint64_t Estimator::files() const { return impl_->files(); }
uint64_t Estimator::entries() const { return impl_->entries(); }
size_t Estimator::memory_bytes() const { return impl_->memory_bytes(); }
const EstimatorOptions& Estimator::options() const { return impl_->options(); }

}  // namespace chunkd::estimate
