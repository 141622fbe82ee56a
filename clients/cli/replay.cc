#include "clients/cli/replay.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clients/cli/record_writer.h"
#include "clients/cli/remote.h"
#include "fingerprint/fingerprint.h"

namespace chunkd::cli {
namespace {

// The wait before retry number `retry` (1 for the first):
// initial_backoff * 2^(retry-1), at most max_backoff, then a random part of
// it from a half to all.
std::chrono::milliseconds Backoff(const ReplayOptions& options, int retry,
                                  std::mt19937_64* random) {
  std::chrono::milliseconds wait = options.initial_backoff;
  for (int i = 1; i < retry && wait < options.max_backoff; ++i) wait *= 2;
  wait = std::min(wait, options.max_backoff);
  std::uniform_int_distribution<int64_t> jitter(wait.count() / 2, wait.count());
  return std::chrono::milliseconds(jitter(*random));
}

// One link of the chain: SHA-256 of the previous link and the record (its
// fingerprints all have one size, so "offset,length," ends unambiguously).
std::string Chain(const std::string& previous, uint64_t offset,
                  uint32_t length, absl::string_view fingerprint) {
  return fingerprint::Digest(
      fingerprint::Kind::kSha256,
      absl::StrCat(previous, offset, ",", length, ",", fingerprint));
}

absl::Status Changed(absl::string_view what) {
  return ClientFound(absl::DataLossError(
      absl::StrCat("DATA_LOSS: the replayed stream ", what,
                   ": the file changed under the replay")));
}

}  // namespace

bool IsRetryable(const absl::Status& status, bool timeout_set) {
  if (FoundByClient(status) || IsBrokenPipe(status)) return false;
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kCancelled:
      return true;
    case absl::StatusCode::kDeadlineExceeded:
      return timeout_set;
    default:
      return false;
  }
}

absl::Status ReplayFile(const ReplayOptions& options, const std::string& name,
                        std::FILE* err,
                        absl::FunctionRef<absl::Status()> attempt) {
  std::mt19937_64 random{std::random_device()()};
  for (int retry = 1;; ++retry) {
    absl::Status status = attempt();
    if (status.ok() || retry > options.retries ||
        !IsRetryable(status, options.timeout_set)) {
      return status;
    }
    const std::chrono::milliseconds wait = Backoff(options, retry, &random);
    absl::FPrintF(err,
                  "chunkctl: %s: %s; sending it again in %.2f s (retry %d of "
                  "%d)\n",
                  name, status.message(),
                  static_cast<double>(wait.count()) / 1000, retry,
                  options.retries);
    std::fflush(err);
    std::this_thread::sleep_for(wait);
  }
}

absl::Status CheckReplayable(const std::vector<std::string>& files) {
  for (const std::string& name : files) {
    if (name == "-") {
      return absl::InvalidArgumentError(
          "--retries: stdin (\"-\") cannot be sent again; give a file or "
          "--retries 0");
    }
    struct stat st;
    if (::stat(name.c_str(), &st) != 0) {
      const int error = errno;
      return absl::Status(
          error == ENOENT ? absl::StatusCode::kNotFound
                          : absl::StatusCode::kFailedPrecondition,
          absl::StrCat(name, ": ", std::strerror(error)));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--retries: ", name,
          " is not a regular file, so it cannot be sent again from its "
          "start; give a file or --retries 0"));
    }
  }
  return absl::OkStatus();
}

void DeliveredRecords::StartAttempt() {
  repeating_ = end_ > 0;
  repeat_count_ = 0;
  repeat_digest_.clear();
}

absl::StatusOr<bool> DeliveredRecords::Take(uint64_t offset, uint32_t length,
                                            absl::string_view fingerprint) {
  const uint64_t end = offset + length;
  if (!repeating_) {
    digest_ = Chain(digest_, offset, length, fingerprint);
    end_ = end;
    ++count_;
    return true;
  }
  if (offset >= end_) {
    return Changed(absl::StrCat("goes on at offset ", offset,
                                ", not at offset ", end_,
                                ", where the chunks already printed end"));
  }
  if (end > end_) {
    return Changed(absl::StrCat("has a chunk [", offset, ", ", end,
                                ") across offset ", end_,
                                ", where the chunks already printed end"));
  }
  repeat_digest_ = Chain(repeat_digest_, offset, length, fingerprint);
  ++repeat_count_;
  if (end == end_) {
    if (repeat_count_ != count_ || repeat_digest_ != digest_) {
      return Changed(absl::StrCat(
          "has ", repeat_count_, " chunks before offset ", end_,
          " that differ from the ", count_,
          " already printed (in offsets, lengths or fingerprints)"));
    }
    repeating_ = false;
  }
  return false;
}

absl::Status DeliveredRecords::CheckSummary(uint64_t total_bytes,
                                            uint64_t total_chunks) const {
  if (repeating_) {
    return Changed(absl::StrCat("ended at offset ", total_bytes,
                                ", before offset ", end_,
                                ", where the chunks already printed end"));
  }
  if (total_bytes != end_ || total_chunks != count_) {
    return ClientFound(absl::DataLossError(absl::StrCat(
        "DATA_LOSS: the stream's summary counts ", total_bytes, " bytes in ",
        total_chunks, " chunks, but the chunks printed cover ", end_,
        " bytes in ", count_)));
  }
  return absl::OkStatus();
}

}  // namespace chunkd::cli
