// What `chunkctl chunk` and `chunkctl dedup` share to replay a file whose
// stream failed (--retries N; docs/cli.md, "Replays"): which errors are
// replayed, the backoff, the line announcing each replay, the check that
// the files can be read again from their start, and, for chunk, the check
// that a replay repeats the records already printed.
//
// Thread safety: ReplayFile runs on the calling thread; a DeliveredRecords
// is used by one thread at a time.
#ifndef CHUNKD_CLIENTS_CLI_REPLAY_H_
#define CHUNKD_CLIENTS_CLI_REPLAY_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fingerprint/fingerprint.h"

namespace chunkd::cli {

// The most --retries takes.
inline constexpr int kMaxRetries = 100;

struct ReplayOptions {
  // How many times a failed stream is sent again (0: never), 0..100.
  int retries = 0;
  // Whether the streams have a deadline (--timeout): its DEADLINE_EXCEEDED
  // is then replayed.
  bool timeout_set = false;
  // The wait before the first replay; each further one doubles it, up to
  // max_backoff. Each wait is drawn from [half, all] of its value (jitter),
  // so that clients cut off together do not come back together.
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{4000};
};

// The options of one file's stream, Chunk (`Params` ChunkParams) or Dedup
// (DedupParams).
template <typename Params>
struct FileStreamOptions {
  Params params;
  // The fingerprint in effect (for the protocol check).
  fingerprint::Kind kind = fingerprint::Kind::kSha256;
  size_t message_size = 1 << 20;
  // The deadline of each attempt; zero for none.
  std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero();
  // The replays of a failed stream (retries 0: none).
  ReplayOptions replay;
};

// True for the errors after which a file is sent again: UNAVAILABLE,
// ABORTED, RESOURCE_EXHAUSTED, INTERNAL, CANCELLED (which chunkctl never
// causes itself: a server stopped past its shutdown deadline, or a proxy
// that drops the stream, resets it with RST_STREAM CANCEL), and
// DEADLINE_EXCEEDED when `timeout_set`. Never an error chunkctl finds
// itself (FoundByClient(): a response that breaks the protocol, a replay
// that cuts otherwise, its input or output failing), a closed standard
// output, nor a summary that does not count every byte (DATA_LOSS).
bool IsRetryable(const absl::Status& status, bool timeout_set);

// Runs `attempt` once, and again after each retryable failure (IsRetryable)
// while replays are left: prints one line on `err` per replay,
//   chunkctl: NAME: CODE_NAME: message; sending it again in S s (retry i
//   of N)
// then waits the backoff. Returns the last attempt's status.
absl::Status ReplayFile(const ReplayOptions& options, const std::string& name,
                        std::FILE* err,
                        absl::FunctionRef<absl::Status()> attempt);

// With replays, only regular files can be read again from their start:
// stdin ("-") or another pipe (/dev/stdin, <(zcat x), a FIFO) would give
// the bytes not yet read. INVALID_ARGUMENT names a file that is not one;
// NOT_FOUND or FAILED_PRECONDITION one that cannot be examined.
absl::Status CheckReplayable(const std::vector<std::string>& files);

// The records of a stream already printed, as every replay must repeat
// them: where they end, how many there are, and a SHA-256 chain over their
// offsets, lengths and fingerprints (a few dozen bytes, however long the
// stream). In a replay the records before that end are repeats, checked
// against the ones printed once the replay reaches it. A replay that does
// not repeat them exactly (a record across that end, a gap, other offsets,
// lengths or fingerprints before it) means the file changed under the
// replay: DATA_LOSS, FoundByClient().
class DeliveredRecords {
 public:
  // Called as each attempt starts, the first included.
  void StartAttempt();

  // Whether to print the record: true for a new one (counted), false for a
  // repeat; DATA_LOSS for a replay that cuts otherwise.
  absl::StatusOr<bool> Take(uint64_t offset, uint32_t length,
                            absl::string_view fingerprint);

  // DATA_LOSS unless the summary of the attempt that ended OK counts the
  // records printed, no more and no less.
  absl::Status CheckSummary(uint64_t total_bytes, uint64_t total_chunks) const;

 private:
  uint64_t end_ = 0;
  uint64_t count_ = 0;
  std::string digest_;
  // While a replay is before end_: its repeats so far.
  bool repeating_ = false;
  uint64_t repeat_count_ = 0;
  std::string repeat_digest_;
};

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_REPLAY_H_
