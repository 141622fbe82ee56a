#include "service/estimate_work.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "estimate/distinct_sketch.h"
#include "estimate/estimator.h"
#include "metrics/metrics.h"
#include "platform/error_reason.h"
#include "service/chunk_service.h"
#include "service/estimate_params.h"
#include "service/wire_format.h"

namespace chunkd::service {
namespace {

class EstimateWork final : public StreamWork {
 public:
  EstimateWork(std::unique_ptr<estimate::Estimator> estimator, std::string ns,
               index::FingerprintIndex* index,
               const metrics::StreamCounters& counters)
      : estimator_(std::move(estimator)),
        ns_(std::move(ns)),
        index_(index),
        counters_(counters) {}

  uint64_t MemoryBytes(const StreamSettings& settings) const override;
  absl::Status NeverFits(uint64_t bytes, uint64_t limit) const override;
  absl::Status Run(TaskInput* input,
                   std::deque<grpc::ByteBuffer>* out) override;

 private:
  const estimate::EstimatorOptions& options() const {
    return estimator_->options();
  }
  // Appends the pieces, ending files where marked; every buffer goes back.
  absl::Status Cut(TaskInput* input);
  // The entry limit's failure, with the server's flag named.
  absl::Status Translate(absl::Status status) const;
  // Queues an EstimateProgress when it is due.
  absl::Status MaybeProgress(std::deque<grpc::ByteBuffer>* out);
  // Finishes the estimate and queues the result.
  absl::Status Result(std::deque<grpc::ByteBuffer>* out);
  // Fills the namespace fields of set `set`'s result from the index.
  absl::Status NamespaceHoldings(size_t set, v1::SetEstimate* out) const;

  const std::unique_ptr<estimate::Estimator> estimator_;
  const std::string ns_;  // empty: no comparison
  index::FingerprintIndex* const index_;
  const metrics::StreamCounters counters_;
  bool progress_sent_ = false;
  uint64_t progress_bytes_ = 0;  // bytes_in() at the last progress
  absl::Time progress_time_;     // when it was sent
};

uint64_t EstimateWork::MemoryBytes(const StreamSettings& settings) const {
  std::vector<StreamShape> shapes;
  for (const estimate::SetSpec& set : options().sets) {
    shapes.push_back(ShapeOf(set.options, /*hints=*/false));
  }
  const uint64_t entry_bytes =
      options().fingerprint == estimate::FingerprintKind::kSha256
          ? kEstimateEntryBytesSha256
          : kEstimateEntryBytesXxh128;
  // Sampled, each set also counts its distinct chunks and their bytes in
  // two fixed sketches.
  const uint64_t sketches =
      options().sample_rate > 1
          ? shapes.size() * 2 * estimate::DistinctSketch::kMemoryBytes
          : 0;
  return EstimateMemoryBytes(shapes, entry_bytes, options().max_entries,
                             settings) +
         sketches;
}

absl::Status EstimateWork::NeverFits(uint64_t bytes, uint64_t limit) const {
  return WithReason(
      absl::ResourceExhaustedError(absl::StrCat(
          "the estimate's ", options().sets.size(), " sets and up to ",
          options().max_entries,
          " distinct chunks (--estimate_max_entries) need up to ", bytes,
          " bytes of memory, more than all of --stream_memory_budget (",
          limit, "): it could never start here; send fewer sets, or sets "
          "with a smaller max_size")),
      ErrorReason::kStreamMemory);
}

absl::Status EstimateWork::Translate(absl::Status status) const {
  if (status.code() != absl::StatusCode::kResourceExhausted) return status;
  return WithReason(
      absl::ResourceExhaustedError(absl::StrCat(
          status.message(), " (the limit is the server's "
          "--estimate_max_entries, ", options().max_entries, ")")),
      ErrorReason::kStreamMemory);
}

absl::Status EstimateWork::Cut(TaskInput* input) {
  absl::Status status;
  for (InputPiece& piece : input->pieces) {
    if (status.ok() && !piece.bytes.empty()) {
      status = estimator_->Append(piece.bytes);
    }
    if (status.ok() && piece.end_of_file) status = estimator_->EndFile();
    input->buffers->Give(std::move(piece.bytes));
  }
  return Translate(status);
}

absl::Status EstimateWork::MaybeProgress(std::deque<grpc::ByteBuffer>* out) {
  const uint64_t bytes = estimator_->bytes_in();
  if (bytes - progress_bytes_ < kProgressBytes) return absl::OkStatus();
  const absl::Time now = absl::Now();
  if (progress_sent_ && now - progress_time_ < kProgressInterval) {
    return absl::OkStatus();
  }
  progress_sent_ = true;
  progress_bytes_ = bytes;
  progress_time_ = now;
  v1::EstimateResponse response;
  response.mutable_progress()->set_bytes(bytes);
  response.mutable_progress()->set_files(estimator_->files());
  return SerializeResponse(response, &out->emplace_back());
}

absl::Status EstimateWork::NamespaceHoldings(size_t set,
                                             v1::SetEstimate* out) const {
  std::vector<std::string> batch;
  std::vector<uint32_t> lengths;
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  absl::Status status;
  auto look_up = [&] {
    if (!status.ok() || batch.empty()) return;
    auto found = index_->Lookup(ns_, batch);
    if (!found.ok()) {
      status = found.status();
      return;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!(*found)[i]) continue;
      bytes += lengths[i];
      ++chunks;
    }
    batch.clear();
    lengths.clear();
  };
  uint64_t kept_bytes = 0;
  uint64_t kept_chunks = 0;
  estimator_->ForEachKept(set, [&](const estimate::KeptChunk& chunk) {
    kept_bytes += chunk.length;
    ++kept_chunks;
    if (!status.ok()) return;
    batch.emplace_back(chunk.fingerprint);
    lengths.push_back(chunk.length);
    if (batch.size() >= kNamespaceLookupBatch) look_up();
  });
  look_up();
  if (!status.ok()) return status;
  // Sampled: the share of the kept chunks (and of their bytes) that the
  // namespace holds, of the estimated unique chunks (and bytes); exact: the
  // counts themselves.
  auto scaled = [](uint64_t part, uint64_t kept, uint64_t estimate) {
    if (kept == 0) return uint64_t{0};
    return static_cast<uint64_t>(std::llround(
        static_cast<long double>(part) * estimate / kept));
  };
  out->set_namespace_bytes(scaled(bytes, kept_bytes, out->unique_bytes()));
  out->set_namespace_chunks(scaled(chunks, kept_chunks, out->unique_chunks()));
  return absl::OkStatus();
}

absl::Status EstimateWork::Result(std::deque<grpc::ByteBuffer>* out) {
  auto results = estimator_->Finish();
  if (!results.ok()) return Translate(results.status());
  v1::EstimateResponse response;
  v1::EstimateResult* result = response.mutable_result();
  uint64_t chunks = 0;
  for (size_t i = 0; i < results->size(); ++i) {
    v1::SetEstimate* set = result->add_sets();
    SetEstimateToProto((*results)[i], set);
    chunks += (*results)[i].chunks;
    if (ns_.empty()) continue;
    if (absl::Status held = NamespaceHoldings(i, set); !held.ok()) return held;
  }
  counters_.chunks->Increment(static_cast<double>(chunks));
  result->set_total_bytes(estimator_->bytes_in());
  result->set_files(estimator_->files());
  result->set_sample_rate(options().sample_rate);
  result->set_fingerprint(
      options().fingerprint == estimate::FingerprintKind::kSha256
          ? v1::FINGERPRINT_ALGORITHM_SHA256
          : v1::FINGERPRINT_ALGORITHM_XXH128);
  return SerializeResponse(response, &out->emplace_back());
}

absl::Status EstimateWork::Run(TaskInput* input,
                               std::deque<grpc::ByteBuffer>* out) {
  absl::Status status = Cut(input);
  counters_.ingest_bytes->Increment(static_cast<double>(input->bytes));
  if (!status.ok()) return status;
  return input->last ? Result(out) : MaybeProgress(out);
}

}  // namespace

absl::StatusOr<std::unique_ptr<StreamWork>> MakeEstimateWork(
    const v1::EstimateParams& params, const ServiceOptions& service) {
  auto options = EstimatorOptionsFromProto(params, service.engine,
                                           service.estimate_max_entries);
  if (!options.ok()) return options.status();
  auto estimator = estimate::Estimator::Create(*options);
  if (!estimator.ok()) return estimator.status();
  const metrics::StreamCounters counters = service.metrics->ForStream(
      "Estimate", chunking::AlgorithmName(options->sets[0].options.algorithm));
  return std::make_unique<EstimateWork>(*std::move(estimator),
                                        params.namespace_(), service.index,
                                        counters);
}

}  // namespace chunkd::service
