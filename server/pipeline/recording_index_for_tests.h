// RecordingIndex (tests only): a MemoryIndex that records the calls the
// pipeline makes and can fail its Inserts, to check when the pipeline
// writes and what it asks.
//
// Thread safety: not thread-safe.
#ifndef CHUNKD_PIPELINE_RECORDING_INDEX_FOR_TESTS_H_
#define CHUNKD_PIPELINE_RECORDING_INDEX_FOR_TESTS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "index/fingerprint_index.h"
#include "index/memory_index.h"

namespace chunkd::pipeline {

class RecordingIndex final : public index::FingerprintIndex {
 public:
  absl::string_view backend() const override { return "test"; }
  absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view ns, absl::Span<const std::string> fps) override {
    return inner.Lookup(ns, fps);
  }
  using FingerprintIndex::Insert;
  using FingerprintIndex::Release;
  absl::StatusOr<std::vector<index::InsertResult>> Insert(
      absl::string_view ns, absl::Span<const index::InsertEntry> entries,
      const index::WriteToken* token) override {
    if (fail) return absl::UnavailableError("down");
    log.push_back(token == nullptr ? "insert"
                                   : token->stream_id + "@" +
                                         std::to_string(token->first_position));
    batches.push_back(entries.size());
    auto result = inner.Insert(ns, entries, token);
    if (static_cast<int>(batches.size()) == lose_reply_of) {
      return absl::UnavailableError("reply lost");
    }
    return result;
  }
  absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fps,
      const index::WriteToken* token) override {
    return inner.Release(ns, fps, token);
  }
  absl::Status RecordNextSizes(absl::string_view ns, absl::string_view key,
                               absl::Span<const index::NextSize> h) override {
    log.push_back("record:" + std::to_string(h.size()));
    return inner.RecordNextSizes(ns, key, h);
  }
  absl::StatusOr<std::vector<index::NextHints>> NextHintsOf(
      absl::string_view ns, absl::string_view key,
      absl::Span<const std::string> fps) override {
    asked.insert(asked.end(), fps.begin(), fps.end());
    return inner.NextHintsOf(ns, key, fps);
  }

  index::MemoryIndex inner;
  // One line per write: "insert" (or "<stream id>@<first position>" with a
  // token) and "record:<hints>".
  std::vector<std::string> log;
  // The number of entries of every Insert applied, in order.
  std::vector<size_t> batches;
  // Every fingerprint NextHintsOf was asked about, in order.
  std::vector<std::string> asked;
  // While set, every Insert fails and is not applied.
  bool fail = false;
  // The Insert (counted from 1) that is applied but answered UNAVAILABLE,
  // as when Redis dies before its reply arrives; 0: none.
  int lose_reply_of = 0;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_RECORDING_INDEX_FOR_TESTS_H_
