#include "clients/cli/dedup_file.h"

#include <algorithm>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace chunkd::cli {
namespace {

// The wait before retry number `retry` (1 for the first):
// initial_backoff * 2^(retry-1), at most max_backoff, then a random part of
// it from a half to all.
std::chrono::milliseconds Backoff(const DedupFileOptions& options, int retry,
                                  std::mt19937_64* random) {
  std::chrono::milliseconds wait = options.initial_backoff;
  for (int i = 1; i < retry && wait < options.max_backoff; ++i) wait *= 2;
  wait = std::min(wait, options.max_backoff);
  std::uniform_int_distribution<int64_t> jitter(wait.count() / 2, wait.count());
  return std::chrono::milliseconds(jitter(*random));
}

// One attempt: opens `name` and streams it.
absl::StatusOr<DedupTotals> Attempt(
    chunkd::v1::ChunkService::StubInterface* stub,
    const DedupFileOptions& options, const chunkd::v1::DedupParams& params,
    const std::string& name,
    absl::FunctionRef<std::unique_ptr<Progress>(InputFile*)> progress_for) {
  absl::StatusOr<std::unique_ptr<InputFile>> input = InputFile::Open(name);
  if (!input.ok()) return input.status();
  const std::unique_ptr<Progress> progress = progress_for(input->get());
  absl::StatusOr<DedupTotals> totals =
      DedupRemotely(stub, params, options.kind, options.message_size,
                    input->get(), options.timeout);
  progress->Finish();
  return totals;
}

}  // namespace

bool IsRetryable(const absl::Status& status, bool timeout_set) {
  if (FoundByClient(status)) return false;
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kInternal:
      return true;
    case absl::StatusCode::kDeadlineExceeded:
      return timeout_set;
    default:
      return false;
  }
}

std::string RandomStreamId() {
  std::random_device device;
  std::string id = "chunkctl-";
  for (int i = 0; i < 4; ++i) {
    absl::StrAppendFormat(&id, "%08x", device());
  }
  return id;
}

absl::StatusOr<DedupTotals> DedupFile(
    chunkd::v1::ChunkService::StubInterface* stub,
    const DedupFileOptions& options, const std::string& name,
    absl::FunctionRef<std::unique_ptr<Progress>(InputFile*)> progress_for,
    std::FILE* err) {
  chunkd::v1::DedupParams params = options.params;
  if (options.retries > 0) params.set_stream_id(RandomStreamId());
  std::mt19937_64 random{std::random_device()()};
  const bool timeout_set = options.timeout > std::chrono::nanoseconds::zero();
  for (int retry = 1;; ++retry) {
    absl::StatusOr<DedupTotals> totals =
        Attempt(stub, options, params, name, progress_for);
    if (totals.ok() || retry > options.retries ||
        !IsRetryable(totals.status(), timeout_set)) {
      return totals;
    }
    const std::chrono::milliseconds wait = Backoff(options, retry, &random);
    absl::FPrintF(err,
                  "chunkctl: %s: %s; sending it again in %.2f s (retry %d of "
                  "%d)\n",
                  name, totals.status().message(),
                  static_cast<double>(wait.count()) / 1000, retry,
                  options.retries);
    std::fflush(err);
    std::this_thread::sleep_for(wait);
  }
}

}  // namespace chunkd::cli
