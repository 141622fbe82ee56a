#include "pipeline/stream_pipeline.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "chunking/executor.h"

namespace chunkd::pipeline {
namespace {

// Bytes of chunks one fingerprinting task hashes (about 0.1 ms of SHA-256).
constexpr size_t kFingerprintGroupBytes = size_t{256} << 10;

}  // namespace

absl::StatusOr<std::unique_ptr<StreamPipeline>> StreamPipeline::Create(
    PipelineOptions options) {
  if (options.index != nullptr &&
      options.fingerprint == fingerprint::Kind::kNone) {
    return absl::InvalidArgumentError(
        "fingerprint NONE cannot be used with Dedup: the index needs one");
  }
  if (options.hints != HintTest::kOff) {
    if (options.index == nullptr) {
      return absl::InvalidArgumentError("hints apply to Dedup only");
    }
    if (options.chunking.algorithm != chunking::Algorithm::kFastCdc) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hints (RapidCDC) need algorithm fastcdc, not ",
          chunking::AlgorithmName(options.chunking.algorithm),
          "; set hints to HINT_TEST_OFF or leave it unset"));
    }
  }
  auto chunker =
      chunking::StreamChunker::Create(options.chunking, options.engine);
  if (!chunker.ok()) return chunker.status();
  std::unique_ptr<StreamPipeline> pipeline(
      new StreamPipeline(std::move(options), *std::move(chunker)));
  if (pipeline->hints_on()) {
    const chunking::ChunkerOptions& c = pipeline->options_.chunking;
    pipeline->params_key_ = HintParamsKey(c);
    pipeline->boundary_ = std::make_unique<chunking::FastCdcBoundary>(c);
    // Twice what a chunk and its test read (FastCdcBoundary::Needed).
    pipeline->bridge_size_ = 2 * (size_t{c.max_size} + 64);
    auto cutter = chunking::MakeCutter(c);
    if (!cutter.ok()) return cutter.status();
    pipeline->cutter_ = *std::move(cutter);
    if (pipeline->options_.fingerprint == fingerprint::Kind::kSha256 &&
        pipeline->options_.hint_cache != nullptr) {
      pipeline->cache_ = pipeline->options_.hint_cache;
      pipeline->cache_scope_ = pipeline->cache_->ScopeOf(
          pipeline->options_.ns, pipeline->params_key_);
    }
  }
  return pipeline;
}

StreamPipeline::StreamPipeline(PipelineOptions options,
                               std::unique_ptr<chunking::StreamChunker> chunker)
    : options_(std::move(options)), chunker_(std::move(chunker)) {}

absl::Status StreamPipeline::Process(absl::string_view piece,
                                     std::vector<ChunkRecord>* out) {
  totals_.bytes += piece.size();
  return Advance(piece, /*at_end=*/false, out);
}

absl::Status StreamPipeline::Finish(std::vector<ChunkRecord>* out) {
  absl::Status status = Advance(absl::string_view(), /*at_end=*/true, out);
  if (!status.ok()) return status;
  return Commit(out);
}

absl::Status StreamPipeline::Advance(absl::string_view piece, bool at_end,
                                     std::vector<ChunkRecord>* out) {
  std::string carried;  // held bytes handed back to a new chunker
  absl::Status status;
  for (;;) {
    if (mode_ == Mode::kChunker) {
      absl::string_view rest;
      status = FeedChunker(piece, at_end, out, &rest);
      if (!status.ok() || mode_ == Mode::kChunker) return status;
      piece = rest;
    }
    TakeIn(piece);
    piece = absl::string_view();
    if (mode_ == Mode::kHints) {
      bool fall_back = false;
      status = FollowHints(at_end, &fall_back);
      if (!status.ok()) break;
      if (!fall_back) {
        if (Refill()) continue;
        break;  // more bytes, or done
      }
      // After a run of accepted hints the data most likely changed a little
      // (an edit): cut chunk by chunk until the hints resume. A duplicate
      // that leads nowhere sends the stream back to the fast chunker.
      mode_ = run_accepted_ ? Mode::kSequential : Mode::kChunker;
      sequential_misses_ = 0;
    }
    if (mode_ == Mode::kSequential) {
      status = CutSequential(at_end, out);
      if (!status.ok()) break;
      if (mode_ == Mode::kHints) continue;
      if (mode_ == Mode::kSequential) {
        if (Refill()) continue;
        break;  // more bytes, or done
      }
    }
    // Many chunks in a row without hints: new data, so the fast chunker
    // takes the held bytes over.
    status = Commit(out);
    if (!status.ok()) break;
    auto chunker =
        chunking::StreamChunker::Create(options_.chunking, options_.engine);
    if (!chunker.ok()) {
      status = chunker.status();
      break;
    }
    chunker_ = *std::move(chunker);
    chunker_base_ = held_start_;
    slice_ = 0;
    // (Held() and rest_ may point into carried itself.)
    std::string next = absl::StrCat(Held(), rest_);
    carried.swap(next);
    held_.clear();
    data_ = absl::string_view();
    held_skip_ = 0;
    rest_ = absl::string_view();
    piece = carried;
  }
  // What is left of the caller's bytes must outlive this call.
  if (data_.data() != held_.data()) {
    held_.assign(Held().data(), Held().size());
    held_.append(rest_.data(), rest_.size());
    held_skip_ = 0;
    rest_ = absl::string_view();
  } else if (held_skip_ > 0 && held_skip_ >= held_.size() - held_skip_) {
    // Drop the bytes behind once they outnumber the bytes kept.
    held_.erase(0, held_skip_);
    held_skip_ = 0;
  }
  data_ = held_;
  if (!status.ok()) {
    // The stream fails: nothing cut but not yet indexed is reported.
    pending_.clear();
    pending_learned_.clear();
    return status;
  }
  return Commit(out);
}

void StreamPipeline::TakeIn(absl::string_view piece) {
  if (piece.empty()) return;
  if (Held().empty()) {
    // Nothing held: cut the caller's bytes where they lie.
    held_.clear();
    data_ = piece;
    held_skip_ = 0;
    return;
  }
  // Held bytes and the start of the piece together, enough for any chunk
  // (and the bytes its test reads) that begins in the held ones; Refill()
  // moves on to the piece itself.
  if (data_.data() == held_.data()) {
    held_.erase(0, held_skip_);
  } else {
    held_.assign(Held().data(), Held().size());
  }
  held_skip_ = 0;
  bridged_ = std::min(piece.size(), bridge_size_);
  held_.append(piece.data(), bridged_);
  data_ = held_;
  rest_ = piece.substr(bridged_);
}

bool StreamPipeline::Refill() {
  if (rest_.empty()) return false;
  const size_t left = data_.size() - held_skip_;
  if (left <= bridged_) {
    // What is left lies in the piece's first bytes: go on in the piece.
    data_ = absl::string_view(rest_.data() - bridged_, bridged_ + rest_.size());
    held_skip_ = bridged_ - left;
    held_.clear();
  } else {
    held_.erase(0, held_skip_);
    held_.append(rest_.data(), rest_.size());
    data_ = held_;
    held_skip_ = 0;
  }
  rest_ = absl::string_view();
  return true;
}

absl::Status StreamPipeline::FeedChunker(absl::string_view piece, bool at_end,
                                         std::vector<ChunkRecord>* out,
                                         absl::string_view* rest) {
  // With hints, in slices: a duplicate at the end of a slice's chunks hands
  // the rest of the piece to the hints. A new chunker starts with short
  // slices, so that duplicate data reaches the hints soon, and doubles
  // them up to its window while the data stays new.
  const size_t window = std::max<size_t>(chunker_->plan().window_size, 1);
  if (slice_ == 0) {
    // The shortest piece the StreamChunker cuts at once (4 x (max + its
    // context); shorter ones wait for its window), and one chunk more.
    const size_t max = options_.chunking.max_size;
    slice_ = std::min(window, 4 * (max + chunking::kContext) + max);
  }
  do {
    const size_t slice = hints_on() ? slice_ : piece.size();
    if (hints_on()) slice_ = std::min(window, 2 * slice_);
    const absl::string_view part = piece.substr(0, slice);
    piece.remove_prefix(part.size());
    const size_t before = out->size();
    scratch_.clear();
    if (!part.empty()) {
      Stopwatch watch(&totals_.chunk_seconds, Stage(&metrics::StageCounters::chunk));
      chunker_->Append(part, &scratch_);
    }
    absl::Status status = Emit(scratch_, /*last_call=*/false, out);
    if (!status.ok()) return status;
    if (hints_on() && out->size() > before && !out->back().is_new) {
      // The last chunk is a duplicate: follow the hints from its end.
      held_.assign(chunker_->Pending().data(), chunker_->Pending().size());
      data_ = held_;
      held_skip_ = 0;
      held_start_ = out->back().offset + out->back().length;
      hint_fp_ = out->back().fingerprint;
      candidates_known_ = false;
      run_accepted_ = false;
      chunker_.reset();
      mode_ = Mode::kHints;
      *rest = piece;
      return absl::OkStatus();
    }
  } while (!piece.empty());
  if (!at_end) return absl::OkStatus();
  scratch_.clear();
  {
    Stopwatch watch(&totals_.chunk_seconds, Stage(&metrics::StageCounters::chunk));
    chunker_->Finish(&scratch_);
  }
  return Emit(scratch_, /*last_call=*/true, out);
}

void StreamPipeline::AddHeldRecord(size_t size, std::string fingerprint,
                                   bool learnable, const HintCache::Key* key) {
  if (learnable && last_learnable_) {
    const uint8_t last = static_cast<uint8_t>(data_[held_skip_ + size - 1]);
    const uint32_t hint = EncodeHint(static_cast<uint32_t>(size), last);
    pending_learned_.push_back({last_fp_, hint});
    if (cache_ != nullptr && last_key_valid_) cache_->Learn(last_key_, hint);
  }
  last_key_valid_ = key != nullptr;
  if (key != nullptr) last_key_ = *key;
  ChunkRecord& r = pending_.emplace_back();
  r.offset = held_start_;
  r.length = static_cast<uint32_t>(size);
  r.fingerprint = std::move(fingerprint);
  last_fp_ = r.fingerprint;
  last_learnable_ = true;
  held_start_ += size;
  held_skip_ += size;
  ++totals_.chunks;
}

absl::Status StreamPipeline::Flush(std::vector<ChunkRecord>* out) {
  return Commit(out);
}

absl::Status StreamPipeline::Commit(std::vector<ChunkRecord>* out) {
  if (pending_.empty()) return absl::OkStatus();
  Stopwatch watch(nullptr, Stage(&metrics::StageCounters::index));
  std::vector<index::InsertEntry> entries;
  entries.reserve(pending_.size());
  for (const ChunkRecord& r : pending_) {
    entries.push_back({r.fingerprint, r.length});
  }
  // Positions of a stream's chunks are their ordinals, the same however
  // the bytes arrive and the batches fall, so that a retried stream writes
  // the same positions.
  index::WriteToken token;
  const index::WriteToken* token_ptr = nullptr;
  if (!options_.stream_id.empty()) {
    token.stream_id = options_.stream_id;
    token.first_position = committed_chunks_;
    token_ptr = &token;
  }
  auto inserted = options_.index->Insert(options_.ns, entries, token_ptr);
  if (!inserted.ok()) {
    pending_.clear();
    pending_learned_.clear();
    return inserted.status();
  }
  committed_chunks_ += pending_.size();
  for (size_t i = 0; i < pending_.size(); ++i) {
    ChunkRecord& r = pending_[i];
    r.is_new = (*inserted)[i].is_new;
    if (r.is_new) {
      ++totals_.unique_chunks;
      totals_.unique_bytes += r.length;
    }
    out->push_back(std::move(r));
  }
  pending_.clear();
  // Hints only after their fingerprints are in: the index drops hints of
  // fingerprints it does not have.
  std::vector<index::NextSize> learned;
  learned.swap(pending_learned_);
  if (learned.empty()) return absl::OkStatus();
  return options_.index->RecordNextSizes(options_.ns, params_key_, learned);
}

absl::StatusOr<std::vector<uint32_t>> StreamPipeline::HintsOf(
    const std::string& fingerprint) {
  Stopwatch watch(nullptr, Stage(&metrics::StageCounters::index));
  auto sizes = options_.index->NextSizes(options_.ns, params_key_,
                                         absl::MakeConstSpan(&fingerprint, 1));
  if (!sizes.ok()) return sizes.status();
  return std::move((*sizes)[0]);
}

absl::Status StreamPipeline::CutSequential(bool at_end,
                                           std::vector<ChunkRecord>* out) {
  // After this many chunks in a row without hints the data is new.
  constexpr size_t kMaxMisses = 16;
  for (;;) {
    const size_t avail = data_.size() - held_skip_;
    if (avail == 0) return absl::OkStatus();
    if (!at_end && avail < cutter_->max_size()) return absl::OkStatus();
    const auto* data = reinterpret_cast<const uint8_t*>(data_.data()) + held_skip_;
    size_t size;
    {
      Stopwatch watch(&totals_.chunk_seconds, Stage(&metrics::StageCounters::chunk));
      uint64_t hash = 0;
      size = cutter_->Cut(data, avail, 0, &hash);
    }
    // A chunk the stream's end cut says nothing about what follows.
    const bool end_cut = at_end && size == avail;
    std::string fp;
    HintCache::Key key;
    std::vector<uint32_t> next;
    bool next_known = false;
    {
      Stopwatch watch(nullptr, Stage(&metrics::StageCounters::fingerprint));
      const absl::string_view chunk(reinterpret_cast<const char*>(data), size);
      std::optional<HintCache::Entry> hit;
      if (cache_ == nullptr) {
        fp = fingerprint::Digest(options_.fingerprint, chunk);
      } else {
        key = cache_->KeyOf(cache_scope_, chunk);
        hit = cache_->Get(key);
      }
      if (hit.has_value()) {
        // Seen before (as in Accept): its SHA-256, and maybe its hints.
        fp.assign(reinterpret_cast<const char*>(hit->sha256.data()),
                  hit->sha256.size());
        if (!end_cut && hit->num_sizes > 0) {
          next.assign(hit->sizes.begin(), hit->sizes.begin() + hit->num_sizes);
          next_known = true;
        }
      } else if (cache_ != nullptr) {
        fp = HashAndCache(key, chunk);
      }
    }
    if (!end_cut && !next_known) {
      auto sizes = HintsOf(fp);
      if (!sizes.ok()) return sizes.status();
      next = *std::move(sizes);
    }
    if (cache_ != nullptr && !next_known && !next.empty()) {
      cache_->SetSizes(key, next);
    }
    hint_fp_ = fp;
    AddHeldRecord(size, std::move(fp), !end_cut,
                  cache_ != nullptr ? &key : nullptr);
    if (!next.empty()) {
      candidates_ = std::move(next);
      candidates_known_ = true;
      next_candidate_ = 0;
      mode_ = Mode::kHints;
      return absl::OkStatus();
    }
    if (++sequential_misses_ >= kMaxMisses && !at_end) {
      mode_ = Mode::kChunker;
      return absl::OkStatus();
    }
  }
}

absl::Status StreamPipeline::Emit(const std::vector<chunking::Chunk>& chunks,
                                  bool last_call,
                                  std::vector<ChunkRecord>* out) {
  if (chunks.empty()) return absl::OkStatus();
  // Dedup records wait in pending_ for their index batch.
  std::vector<ChunkRecord>* dest = options_.index == nullptr ? out : &pending_;
  const size_t first = dest->size();
  dest->resize(first + chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    (*dest)[first + i].offset = chunker_base_ + chunks[i].offset;
    (*dest)[first + i].length = chunks[i].length;
  }
  // Fingerprints in parallel on the engine's executor (the shared pool in
  // the service), in groups of about kFingerprintGroupBytes so a task is
  // worth its hand-off; each record keeps its place, so order is kept.
  std::vector<size_t> group_start = {0};
  size_t group_bytes = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    group_bytes += chunks[i].length;
    if (group_bytes >= kFingerprintGroupBytes && i + 1 < chunks.size()) {
      group_start.push_back(i + 1);
      group_bytes = 0;
    }
  }
  group_start.push_back(chunks.size());
  // With the hint cache taking every chunk, their cache keys too (below).
  const bool cache_all = cache_ != nullptr && options_.hint_cache_all_chunks;
  std::vector<HintCache::Key> keys(cache_all ? chunks.size() : 0);
  {
    Stopwatch watch(nullptr, Stage(&metrics::StageCounters::fingerprint));
    chunking::RunParallel(
        options_.engine.executor, group_start.size() - 1, [&](size_t g) {
          // The group's chunks together: sha256 hashes several at once.
          std::vector<absl::string_view> data;
          data.reserve(group_start[g + 1] - group_start[g]);
          for (size_t i = group_start[g]; i < group_start[g + 1]; ++i) {
            data.push_back(chunker_->ChunkData(chunks[i]));
          }
          std::vector<std::string> digests =
              fingerprint::DigestMany(options_.fingerprint, data);
          for (size_t i = group_start[g]; i < group_start[g + 1]; ++i) {
            (*dest)[first + i].fingerprint =
                std::move(digests[i - group_start[g]]);
          }
          if (keys.empty()) return;
          for (size_t i = group_start[g]; i < group_start[g + 1]; ++i) {
            keys[i] = cache_->KeyOf(cache_scope_, data[i - group_start[g]]);
            cache_->Put(keys[i], (*dest)[first + i].fingerprint);
          }
        });
  }
  totals_.chunks += chunks.size();
  if (options_.index == nullptr) return absl::OkStatus();
  if (!hints_on()) {
    return pending_.size() >= kMaxPendingChunks ? Commit(out)
                                                : absl::OkStatus();
  }
  // Learn what followed what. The stream's end may have cut the last chunk
  // of Finish(): its size says nothing about this content. A cache that
  // takes every chunk learns the same.
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ChunkRecord& r = pending_[first + i];
    if (last_learnable_ && !(last_call && i + 1 == chunks.size())) {
      const absl::string_view bytes = chunker_->ChunkData(chunks[i]);
      const uint32_t hint =
          EncodeHint(r.length, static_cast<uint8_t>(bytes.back()));
      pending_learned_.push_back({last_fp_, hint});
      if (cache_all && last_key_valid_) cache_->Learn(last_key_, hint);
    }
    last_fp_ = r.fingerprint;
    last_learnable_ = true;
    last_key_valid_ = cache_all;
    if (cache_all) last_key_ = keys[i];
  }
  // Whether the last chunk is a duplicate decides what comes next.
  absl::Status status = Commit(out);
  if (!status.ok() || cache_ == nullptr || cache_all) return status;
  // Otherwise the duplicates: what comes again, the hint chain will meet.
  Stopwatch watch(nullptr, Stage(&metrics::StageCounters::fingerprint));
  const size_t first_record = out->size() - chunks.size();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ChunkRecord& r = (*out)[first_record + i];
    if (r.is_new) continue;
    cache_->Put(cache_->KeyOf(cache_scope_, chunker_->ChunkData(chunks[i])),
                r.fingerprint);
  }
  return status;
}

std::string StreamPipeline::HashAndCache(const HintCache::Key& key,
                                         absl::string_view bytes) {
  std::string fp = fingerprint::Digest(options_.fingerprint, bytes);
  cache_->Put(key, fp);
  return fp;
}

bool StreamPipeline::Accept(uint32_t candidate, absl::string_view bytes,
                            bool at_end, std::string* fingerprint,
                            std::vector<uint32_t>* next,
                            bool* next_known, absl::Status* status) {
  const size_t size = HintSize(candidate);
  if (size > bytes.size() || size > boundary_->max_size()) return false;
  std::optional<HintCache::Entry> hit;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const absl::string_view chunk = bytes.substr(0, size);
  prometheus::Counter* const fingerprint_stage =
      Stage(&metrics::StageCounters::fingerprint);
  Laps laps;
  if (cache_ != nullptr) {
    // The key first (cheap next to SHA-256): reading the chunk for it also
    // brings the bytes the test reads at its end into the CPU's caches.
    accepted_key_ = cache_->KeyOf(cache_scope_, chunk);
    laps.Lap(nullptr, fingerprint_stage);
  }
  bool pass = false;
  switch (options_.hints) {
    case HintTest::kOff:
      break;
    case HintTest::kFF:
      pass = true;
      break;
    case HintTest::kFFMT:
      pass = data[size - 1] == HintMarker(candidate);
      break;
    case HintTest::kFFRWT:
    case HintTest::kFFRWTFPT:
      pass = boundary_->Holds(data, bytes.size(), at_end, size);
      break;
  }
  laps.Lap(&totals_.chunk_seconds, Stage(&metrics::StageCounters::chunk));
  if (!pass) return false;
  if (cache_ == nullptr) {
    *fingerprint = fingerprint::Digest(options_.fingerprint, chunk);
  } else {
    hit = cache_->Get(accepted_key_);
    if (hit.has_value()) {
      fingerprint->assign(reinterpret_cast<const char*>(hit->sha256.data()),
                          hit->sha256.size());
      ++totals_.cache_hits;
    } else {
      *fingerprint = HashAndCache(accepted_key_, chunk);
      ++totals_.cache_misses;
    }
  }
  laps.Lap(nullptr, fingerprint_stage);
  *next_known = false;
  if (hit.has_value() && hit->num_sizes > 0) {
    // The cache knows this content was cut under these parameters before
    // (what FPT asks the index), and what followed it: no round trip.
    next->assign(hit->sizes.begin(), hit->sizes.begin() + hit->num_sizes);
    *next_known = true;
    return true;
  }
  if (options_.hints != HintTest::kFFRWTFPT) return true;
  // FPT: the suggested chunk's own hints under these parameters exist only
  // if these very bytes were cut as a chunk under them (see rapid_cdc.h);
  // they are also the candidates for the chunk after it.
  auto sizes = HintsOf(*fingerprint);
  if (!sizes.ok()) {
    *status = sizes.status();
    return false;
  }
  *next = *std::move(sizes);
  *next_known = true;
  if (cache_ != nullptr && !next->empty()) cache_->SetSizes(accepted_key_, *next);
  return !next->empty();
}

absl::Status StreamPipeline::FollowHints(bool at_end, bool* fall_back) {
  absl::Status status;
  // Reused from chunk to chunk (they keep their capacity).
  std::string fp;
  std::vector<uint32_t> next;
  for (;;) {
    const absl::string_view bytes = Held();
    if (bytes.empty() && at_end) break;
    if (!candidates_known_) {
      auto sizes = HintsOf(hint_fp_);
      if (!sizes.ok()) {
        status = sizes.status();
        break;
      }
      candidates_ = *std::move(sizes);
      candidates_known_ = true;
      next_candidate_ = 0;
    }
    if (next_candidate_ >= candidates_.size()) {
      *fall_back = true;
      break;
    }
    const uint32_t candidate = candidates_[next_candidate_];
    const size_t size = HintSize(candidate);
    const size_t needed = options_.hints == HintTest::kFFRWT ||
                                  options_.hints == HintTest::kFFRWTFPT
                              ? boundary_->Needed(size)
                              : size;
    if (!at_end && bytes.size() < needed) break;  // wait for more bytes
    ++totals_.hints_tried;
    bool next_known = false;
    if (!Accept(candidate, bytes, at_end, &fp, &next, &next_known, &status)) {
      if (!status.ok()) break;
      ++totals_.hints_rejected;
      ++next_candidate_;
      continue;
    }
    ++totals_.hints_accepted;
    totals_.hint_skipped_bytes += size;
    run_accepted_ = true;
    hint_fp_ = fp;
    AddHeldRecord(size, std::move(fp), /*learnable=*/false,
                  cache_ != nullptr ? &accepted_key_ : nullptr);
    fp.clear();  // moved from: valid, unspecified
    candidates_.swap(next);
    candidates_known_ = next_known;
    next_candidate_ = 0;
  }
  return status;
}

}  // namespace chunkd::pipeline
