// StreamPipeline: the work of one Chunk or Dedup stream, free of gRPC.
//
// Bytes go in piece by piece; out come records of the chunks that became
// final: cut by the StreamChunker, fingerprinted, and (Dedup only) recorded in
// the namespace's index. Dedup records wait for their index batch: one
// batched call (one round trip) per Flush(), or per kMaxPendingChunks
// chunks, or at Finish(), so that the owner decides how much work shares a
// round trip (with hints, each call of Process commits its own records, since
// whether the last chunk was a duplicate decides what comes next). Records
// come out in stream order.
//
// Dedup with RapidCDC hints (PipelineOptions::hints, fastcdc only; see
// rapid_cdc.h): every pair of consecutive chunks teaches the index which size
// followed the first. When the chunker emits a duplicate as its last chunk
// (it is fed in slices of its window, so this is checked often), the pipeline
// stops cutting and tries the sizes that followed that chunk before, with the
// chosen acceptance test; each accepted size is a chunk nobody had to scan.
// When no size passes, the reference cutter cuts one chunk at a time from the
// last boundary, scanning only that chunk, and asks the index for the hints
// of each, until one has hints (back to following them) or many in a row had
// none (new data: back to the fast chunker). With FF+RWT+FPT the records are
// exactly those without hints.
//
// With a HintCache the chain takes each accepted chunk's fingerprint from the
// cache when it holds the chunk's content (keyed with a secret key, so that
// a hit is as good as hashing the bytes: hint_cache.h), and hashes it with
// SHA-256 otherwise.
//
// Thread safety: not thread-safe; the owner runs one call at a time (the
// service's reactor runs at most one task per stream on the shared pool).
#ifndef CHUNKD_PIPELINE_STREAM_PIPELINE_H_
#define CHUNKD_PIPELINE_STREAM_PIPELINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/fastcdc_boundary.h"
#include "fingerprint/fingerprint.h"
#include "index/fingerprint_index.h"
#include "metrics/metrics.h"
#include "pipeline/hint_cache.h"
#include "pipeline/rapid_cdc.h"
#include "pipeline/records.h"
#include "pipeline/stage_clock.h"

namespace chunkd::pipeline {

struct PipelineOptions {
  chunking::ChunkerOptions chunking;
  // How the chunks are cut (kernel, executor, segment and window sizes); the
  // executor must outlive the pipeline. Never changes the chunks.
  chunking::EngineOptions engine;
  fingerprint::Kind fingerprint = fingerprint::Kind::kSha256;
  // Dedup only: the index and namespace to record chunks in. nullptr: Chunk.
  index::FingerprintIndex* index = nullptr;
  std::string ns;
  // Dedup with fastcdc only: RapidCDC's acceptance test; kOff for none.
  HintTest hints = HintTest::kOff;
  // Hints with sha256 only: the server's cache of content -> SHA-256 that
  // lets the hint chain run without hashing (hint_cache.h); null: none.
  // Never changes the records. Must outlive the pipeline.
  HintCache* hint_cache = nullptr;
  // Whether the cache takes every chunk the chunker cuts (with what
  // followed it), or only the duplicates. Every chunk costs an XXH3 of
  // each new chunk and lets the next stream over the same data follow its
  // hints without asking the index per chunk: worth it when the index is a
  // round trip away (Redis), not with the embedded one.
  bool hint_cache_all_chunks = false;
  // Where the time of each stage goes (chunkd_stage_seconds_total); null:
  // not measured. Must outlive the pipeline.
  const metrics::StageCounters* stages = nullptr;
  // Dedup only: when not empty, every index write carries the WriteToken
  // {stream_id, ordinal of the batch's first chunk in the stream}, so that
  // a client that retries the whole stream with the same id after a failure
  // gets every reference counted exactly once and the same answers.
  // REQUIRES: empty or valid (index::ValidateWriteToken).
  std::string stream_id;
};

class StreamPipeline {
 public:
  // INVALID_ARGUMENT for bad chunking options, for Dedup without a
  // fingerprint, and for hints with another algorithm than fastcdc.
  static absl::StatusOr<std::unique_ptr<StreamPipeline>> Create(
      PipelineOptions options);

  StreamPipeline(const StreamPipeline&) = delete;
  StreamPipeline& operator=(const StreamPipeline&) = delete;

  // Consumes the next piece of the stream; appends final records to *out.
  // An index error (e.g. UNAVAILABLE) is returned as is; the stream must then
  // be abandoned.
  absl::Status Process(absl::string_view piece, std::vector<ChunkRecord>* out);

  // Dedup: records the chunks that wait for the index in one batch and
  // appends their records to *out. Chunk: nothing to do. An index error is
  // returned as by Process.
  absl::Status Flush(std::vector<ChunkRecord>* out);

  // Ends the stream; appends the remaining records to *out.
  absl::Status Finish(std::vector<ChunkRecord>* out);

  // Dedup chunks that trigger an index batch without waiting for Flush().
  static constexpr size_t kMaxPendingChunks = 1024;

  const StreamTotals& totals() const { return totals_; }

 private:
  StreamPipeline(PipelineOptions options,
                 std::unique_ptr<chunking::StreamChunker> chunker);
  bool hints_on() const { return options_.hints != HintTest::kOff; }
  // The counter of one stage, or null when stages are not measured.
  prometheus::Counter* Stage(
      prometheus::Counter* metrics::StageCounters::*stage) const {
    return StageCounter(options_.stages, stage);
  }
  enum class Mode { kChunker, kHints, kSequential };
  // Moves the stream on by `piece` (and to its end when `at_end`), switching
  // between the modes as often as the data calls for.
  absl::Status Advance(absl::string_view piece, bool at_end,
                       std::vector<ChunkRecord>* out);
  // Chunker mode: feeds `piece`; may switch to hints (then *rest holds the
  // part of `piece` the chunker did not take).
  absl::Status FeedChunker(absl::string_view piece, bool at_end,
                           std::vector<ChunkRecord>* out,
                           absl::string_view* rest);
  // Sequential mode: cuts chunks one by one from held_start_ until one has
  // hints (mode becomes kHints), many in a row had none (kChunker), or more
  // bytes are needed.
  absl::Status CutSequential(bool at_end, std::vector<ChunkRecord>* out);
  // The bytes from held_start_ on that this call of Advance can see.
  absl::string_view Held() const { return data_.substr(held_skip_); }
  // Makes `piece` (the caller's bytes, valid during Advance) follow the
  // held bytes: as it is when nothing is held, else its first bytes are
  // copied after them and the rest waits in rest_.
  void TakeIn(absl::string_view piece);
  // The held bytes ran short while rest_ waits: goes on in the piece (the
  // held ones that are left lie at its start). False when nothing waits.
  bool Refill();
  // Adds a record cut outside the chunker (hints or sequential) at
  // held_start_ to pending_, and advances held_start_; `key`: its hint
  // cache key, when the cache is used.
  void AddHeldRecord(size_t size, std::string fingerprint, bool learnable,
                     const HintCache::Key* key);
  // The next-chunk sizes the index holds for `fingerprint`.
  absl::StatusOr<std::vector<uint32_t>> HintsOf(const std::string& fingerprint);
  // Records, fingerprints and indexes the chunker's chunks (offsets relative
  // to chunker_base_), and learns what followed what; `last_call` when they
  // come from Finish() (the stream's end may have cut the last one).
  absl::Status Emit(const std::vector<chunking::Chunk>& chunks, bool last_call,
                    std::vector<ChunkRecord>* out);
  // Inserts pending_ into the index (with the stream's WriteToken), sets
  // is_new and the totals, records the hints learned meanwhile, and moves
  // the records to *out.
  absl::Status Commit(std::vector<ChunkRecord>* out);
  // Takes chunks from hints while a test accepts one. Sets *fall_back when
  // no candidate passed (a chunker must take over at held_start_); returns
  // with it false when more bytes are needed or the stream is done.
  absl::Status FollowHints(bool at_end, bool* fall_back);
  // Whether the test accepts `candidate` at held_start_; sets the chunk's
  // *fingerprint (from the cache when it holds the content) and, with FPT,
  // its hints (*next, *next_known).
  bool Accept(uint32_t candidate, absl::string_view bytes, bool at_end,
              std::string* fingerprint, std::vector<uint32_t>* next,
              bool* next_known, absl::Status* status);
  // SHA-256 of `bytes`, put in the cache under `key`.
  std::string HashAndCache(const HintCache::Key& key, absl::string_view bytes);

  PipelineOptions options_;
  std::unique_ptr<chunking::StreamChunker> chunker_;
  std::vector<chunking::Chunk> scratch_;
  std::vector<ChunkRecord> pending_;  // Dedup: not yet in the index
  uint64_t committed_chunks_ = 0;     // Dedup: chunks in the index so far
  StreamTotals totals_;

  // RapidCDC state. In kChunker mode chunker_ cuts (from stream offset
  // chunker_base_); otherwise the pipeline cuts from held_start_ the bytes
  // Held(), following the candidates of the chunk before
  // (hint_fp_) or with cutter_. What was learned waits in pending_learned_
  // for the records' Commit.
  Mode mode_ = Mode::kChunker;
  uint64_t chunker_base_ = 0;
  size_t slice_ = 0;  // bytes fed to the chunker at once (0: not yet set)
  std::unique_ptr<chunking::Cutter> cutter_;
  size_t sequential_misses_ = 0;
  bool run_accepted_ = false;  // a hint was accepted since the chunker left
  std::vector<index::NextSize> pending_learned_;
  // The cut bytes come from data_ (from held_skip_ on): held_, or during
  // Advance the caller's piece, whose bytes after data_ are rest_. bridged_:
  // how many of the piece's first bytes TakeIn copied to held_.
  std::string held_;
  absl::string_view data_;
  size_t held_skip_ = 0;
  absl::string_view rest_;
  size_t bridged_ = 0;
  size_t bridge_size_ = 0;
  uint64_t held_start_ = 0;
  std::string hint_fp_;
  std::vector<uint32_t> candidates_;
  bool candidates_known_ = false;
  size_t next_candidate_ = 0;
  // The last record and whether a chunk after it may be learned.
  std::string last_fp_;
  bool last_learnable_ = false;
  std::string params_key_;
  std::unique_ptr<chunking::FastCdcBoundary> boundary_;

  // Hint cache (null when not used) and the stream's scope in it.
  HintCache* cache_ = nullptr;
  HintCache::Scope cache_scope_{};
  // The cache key of the last record (when known), for learning what
  // follows it; of the chunk Accept() last looked at.
  HintCache::Key last_key_;
  bool last_key_valid_ = false;
  HintCache::Key accepted_key_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_STREAM_PIPELINE_H_
