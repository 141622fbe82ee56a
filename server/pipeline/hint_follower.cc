#include "pipeline/hint_follower.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "pipeline/stage_clock.h"

namespace chunkd::pipeline {

absl::StatusOr<std::unique_ptr<HintFollower>> HintFollower::Create(
    Options options, HintSource* source, StreamTotals* totals) {
  auto cutter = chunking::MakeCutter(options.chunking);
  if (!cutter.ok()) return cutter.status();
  std::unique_ptr<HintFollower> follower(new HintFollower(
      std::move(options), *std::move(cutter), source, totals));
  absl::Status status = follower->StartChunker();
  if (!status.ok()) return status;
  return follower;
}

HintFollower::HintFollower(Options options,
                           std::unique_ptr<chunking::Cutter> cutter,
                           HintSource* source, StreamTotals* totals)
    : options_(std::move(options)),
      source_(source),
      totals_(totals),
      chunk_stage_(
          StageCounter(options_.stages, &metrics::StageCounters::chunk)),
      fingerprint_stage_(
          StageCounter(options_.stages, &metrics::StageCounters::fingerprint)),
      cutter_(std::move(cutter)),
      boundary_(options_.chunking),
      // Twice what a chunk and its test read (FastCdcBoundary::Needed).
      input_(2 * (size_t{options_.chunking.max_size} + 64)) {}

absl::Status HintFollower::CutChunks(absl::string_view piece, bool at_end,
                                     ChunkSink* sink) {
  // The end of the stream is taken alone: the tests read the end of the
  // bytes they see as the stream's end only when nothing more waits.
  absl::Status status = Advance(piece, at_end && piece.empty(), sink);
  if (status.ok() && at_end && !piece.empty()) {
    status = Advance(absl::string_view(), /*at_end=*/true, sink);
  }
  // What is left of the caller's bytes must outlive this call.
  input_.CopyRestOfPiece();
  return status;
}

absl::Status HintFollower::Advance(absl::string_view piece, bool at_end,
                                   ChunkSink* sink) {
  for (;;) {
    absl::Status status;
    if (mode_ == Mode::kChunker) {
      absl::string_view rest;
      status = FeedChunker(piece, at_end, sink, &rest);
      if (!status.ok() || mode_ == Mode::kChunker) return status;
      piece = rest;
    }
    input_.Append(piece);
    piece = absl::string_view();
    if (mode_ == Mode::kHints) {
      bool fall_back = false;
      status = FollowHints(at_end, sink, &fall_back);
      if (!status.ok()) return status;
      if (!fall_back) {
        if (input_.ExtendIntoPiece()) continue;
        return status;  // more bytes, or done
      }
      // After a run of accepted hints the data most likely changed a little
      // (an edit): cut chunk by chunk until the hints resume. A duplicate
      // that leads nowhere sends the stream back to the fast chunker.
      mode_ = run_accepted_ ? Mode::kSequential : Mode::kChunker;
      sequential_misses_ = 0;
    }
    if (mode_ == Mode::kSequential) {
      status = CutSequential(at_end, sink);
      if (!status.ok()) return status;
      if (mode_ == Mode::kHints) continue;
      if (mode_ == Mode::kSequential) {
        if (input_.ExtendIntoPiece()) continue;
        return status;  // more bytes, or done
      }
    }
    if (parked_ != nullptr) {
      // No hint passed: the chunker that stopped here goes on with the
      // bytes after those it holds.
      chunker_ = std::move(parked_);
      piece = input_.HandOver(parked_pending_);
      continue;
    }
    // Many chunks in a row without hints: new data, so a fast chunker takes
    // the held bytes over.
    status = StartChunker();
    if (!status.ok()) return status;
    piece = input_.HandOver();
  }
}

absl::Status HintFollower::StartChunker() {
  auto chunker = ChunkerBoundaries::Create(
      options_.chunking, options_.engine, input_start_,
      &totals_->chunk_seconds, chunk_stage_);
  if (!chunker.ok()) return chunker.status();
  chunker_ = *std::move(chunker);
  slice_ = 0;
  return absl::OkStatus();
}

absl::Status HintFollower::FeedChunker(absl::string_view piece, bool at_end,
                                       ChunkSink* sink,
                                       absl::string_view* rest) {
  // In slices: a duplicate at the end of a slice's chunks hands the rest of
  // the piece to the hints. A new chunker starts with short slices, so that
  // duplicate data reaches the hints soon, and doubles them up to its window
  // while the data stays new.
  const size_t window = std::max<size_t>(chunker_->window_size(), 1);
  if (slice_ == 0) {
    // The shortest piece the StreamChunker cuts at once (4 x (max + its
    // context); shorter ones wait for its window), and one chunk more.
    const size_t max = options_.chunking.max_size;
    slice_ = std::min(window, 4 * (max + chunking::kContext) + max);
  }
  do {
    const absl::string_view part = piece.substr(0, slice_);
    slice_ = std::min(window, 2 * slice_);
    piece.remove_prefix(part.size());
    const uint64_t end_before = chunker_->end();
    absl::Status status = chunker_->CutChunks(part, /*at_end=*/false, sink);
    // Only a slice that cut chunks can end in a duplicate.
    if (status.ok() && chunker_->end() > end_before) {
      status = FollowIfDuplicate();
    }
    if (!status.ok()) return status;
    if (mode_ == Mode::kHints) {
      *rest = piece;
      return absl::OkStatus();
    }
  } while (!piece.empty());
  if (!at_end) return absl::OkStatus();
  return chunker_->CutChunks(absl::string_view(), at_end, sink);
}

absl::Status HintFollower::FollowIfDuplicate() {
  auto duplicate = source_->LastChunkIfDuplicate();
  if (!duplicate.ok()) return duplicate.status();
  if (!duplicate->has_value()) return absl::OkStatus();
  // The last chunk is a duplicate: follow the hints from its end.
  const absl::string_view pending = chunker_->Pending();
  input_.HoldCopy(pending);
  input_start_ = chunker_->end();
  hint_fp_ = **std::move(duplicate);
  candidates_known_ = false;
  run_accepted_ = false;
  parked_pending_ = pending.size();
  parked_ = std::move(chunker_);
  mode_ = Mode::kHints;
  return absl::OkStatus();
}

absl::Status HintFollower::FollowHints(bool at_end, ChunkSink* sink,
                                       bool* fall_back) {
  const bool rwt =
      options_.test == HintTest::kFFRWT || options_.test == HintTest::kFFRWTFPT;
  FoundChunk found;  // reused from chunk to chunk (it keeps its capacity)
  for (;;) {
    const absl::string_view bytes = input_.view();
    if (bytes.empty() && at_end) return absl::OkStatus();
    if (!candidates_known_) {
      auto hints = source_->NextHintsOf(hint_fp_, nullptr);
      if (!hints.ok()) return hints.status();
      candidates_ = std::move(hints->sizes);
      run_ = std::move(hints->run);
      candidates_known_ = true;
      next_candidate_ = 0;
    }
    if (next_candidate_ >= candidates_.size()) {
      *fall_back = true;
      return absl::OkStatus();
    }
    // Runs once the chain holds (a hint was accepted): at the chunker's
    // duplicate the first candidate alone is tried first, since a duplicate
    // that leads nowhere would waste the hashing of a whole run.
    if (next_candidate_ == 0 && !run_.empty() && run_accepted_ &&
        options_.test == HintTest::kFFRWTFPT) {
      bool took = false;
      absl::Status status = FollowRun(bytes, at_end, sink, &took);
      if (!status.ok()) return status;
      if (took) continue;
    }
    const uint32_t candidate = candidates_[next_candidate_];
    const size_t size = HintSize(candidate);
    const size_t needed = rwt ? boundary_.Needed(size) : size;
    if (!at_end && bytes.size() < needed) return absl::OkStatus();
    ++totals_->hints_tried;
    absl::StatusOr<bool> accepted =
        TryCandidate(candidate, bytes, at_end, &found);
    if (!accepted.ok()) return accepted.status();
    if (!*accepted) {
      ++totals_->hints_rejected;
      ++next_candidate_;
      continue;
    }
    absl::Status status = AcceptHinted(size, &found, sink);
    if (!status.ok()) return status;
  }
}

absl::Status HintFollower::AcceptHinted(size_t size, FoundChunk* found,
                                        ChunkSink* sink) {
  ++totals_->hints_accepted;
  totals_->hint_skipped_bytes += size;
  run_accepted_ = true;
  parked_.reset();  // the stream moved past it
  hint_fp_ = found->fingerprint;
  absl::Status status = EmitChunk(size, found, /*learnable=*/false, sink);
  candidates_.swap(found->next);
  run_.swap(found->run);
  candidates_known_ = found->next_known;
  next_candidate_ = 0;
  return status;
}

size_t HintFollower::RunChunks(absl::string_view bytes, bool at_end,
                               absl::string_view* chunks,
                               uint32_t* hints) const {
  size_t count = 0;
  size_t at = 0;
  const size_t run = std::min(run_.size(), index::kHintRunLength);
  for (size_t i = 0; i <= run; ++i) {
    const uint32_t hint = i == 0 ? candidates_[0] : run_[i - 1];
    const size_t size = HintSize(hint);
    const absl::string_view rest = bytes.substr(at);
    if (size > rest.size() || size > boundary_.max_size()) break;
    if (!at_end && rest.size() < boundary_.Needed(size)) break;
    if (!PassesTest(hint, rest, at_end)) break;
    chunks[count] = rest.substr(0, size);
    hints[count] = hint;
    ++count;
    at += size;
  }
  return count;
}

absl::Status HintFollower::FollowRun(absl::string_view bytes, bool at_end,
                                     ChunkSink* sink, bool* took) {
  constexpr size_t kMax = 1 + index::kHintRunLength;
  absl::string_view chunks[kMax];
  uint32_t hints[kMax];
  Laps laps;
  const size_t count = RunChunks(bytes, at_end, chunks, hints);
  laps.Lap(&totals_->chunk_seconds, chunk_stage_);
  if (count < 2) return absl::OkStatus();
  FoundChunk found[kMax];
  bool hits[kMax];
  absl::Status status = IdentifyRun(chunks, count, found, hits);
  if (!status.ok()) return status;
  *took = true;
  for (size_t i = 0; i < count; ++i) {
    // Counted as TryCandidate() counts: the chunks tried, the last maybe
    // failing.
    ++totals_->hints_tried;
    if (source_->cached()) {
      ++(hits[i] ? totals_->cache_hits : totals_->cache_misses);
    }
    if (found[i].next.empty()) {
      // Not these bytes' cut: the other candidates at this position remain.
      ++totals_->hints_rejected;
      auto rejected =
          std::find(candidates_.begin(), candidates_.end(), hints[i]);
      if (rejected == candidates_.begin()) run_.clear();
      if (rejected != candidates_.end()) candidates_.erase(rejected);
      return absl::OkStatus();
    }
    ++totals_->hints_in_runs;
    status = AcceptHinted(chunks[i].size(), &found[i], sink);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status HintFollower::IdentifyRun(const absl::string_view* chunks,
                                       size_t count, FoundChunk* found,
                                       bool* hits) {
  Laps laps;
  // Their fingerprints, hashed together (or from the cache).
  const bool cached = source_->cached();
  std::vector<HintCache::Key> keys;
  for (size_t i = 0; cached && i < count; ++i) {
    keys.push_back(source_->KeyOf(chunks[i]));
  }
  std::vector<std::string> fps;
  std::vector<std::optional<HintCache::Entry>> entries;
  source_->FingerprintsOf(absl::MakeConstSpan(chunks, count), keys, &fps,
                          &entries);
  laps.Lap(nullptr, fingerprint_stage_);
  // FPT: their own hints, from the cache where it knows them, else from
  // the index in one call.
  std::vector<std::string> ask;
  std::vector<HintCache::Key> ask_keys;
  for (size_t i = 0; i < count; ++i) {
    found[i].fingerprint = std::move(fps[i]);
    if (cached) found[i].key = keys[i];
    const auto& hit = entries[i];
    hits[i] = hit.has_value();
    found[i].next_known = hit.has_value() && hit->num_sizes > 0;
    if (found[i].next_known) {
      found[i].next.assign(hit->sizes.begin(),
                           hit->sizes.begin() + hit->num_sizes);
    } else {
      ask.push_back(found[i].fingerprint);
      if (cached) ask_keys.push_back(keys[i]);
    }
  }
  if (ask.empty()) return absl::OkStatus();
  auto answers = source_->NextHintsOf(ask, ask_keys);
  if (!answers.ok()) return answers.status();
  size_t a = 0;
  for (size_t i = 0; i < count; ++i) {
    if (found[i].next_known) continue;
    found[i].next = std::move((*answers)[a].sizes);
    found[i].run = std::move((*answers)[a].run);
    found[i].next_known = true;
    ++a;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> HintFollower::TryCandidate(uint32_t candidate,
                                                absl::string_view bytes,
                                                bool at_end,
                                                FoundChunk* found) {
  const size_t size = HintSize(candidate);
  if (size > bytes.size() || size > boundary_.max_size()) return false;
  const absl::string_view chunk = bytes.substr(0, size);
  const bool cached = source_->cached();
  Laps laps;
  if (cached) {
    // The key first (cheap next to SHA-256): reading the chunk for it also
    // brings the bytes the test reads at its end into the CPU's caches.
    found->key = source_->KeyOf(chunk);
    laps.Lap(nullptr, fingerprint_stage_);
  }
  const bool pass = PassesTest(candidate, bytes, at_end);
  laps.Lap(&totals_->chunk_seconds, chunk_stage_);
  if (!pass) return false;
  const std::optional<HintCache::Entry> hit = source_->FingerprintOf(
      chunk, cached ? &found->key : nullptr, &found->fingerprint);
  if (cached) {
    ++(hit.has_value() ? totals_->cache_hits : totals_->cache_misses);
  }
  laps.Lap(nullptr, fingerprint_stage_);
  found->next_known = false;
  found->run.clear();
  if (hit.has_value() && hit->num_sizes > 0) {
    // The cache knows this content was cut under these parameters before
    // (what FPT asks the index), and what followed it: no round trip.
    found->next.assign(hit->sizes.begin(), hit->sizes.begin() + hit->num_sizes);
    found->next_known = true;
    return true;
  }
  if (options_.test != HintTest::kFFRWTFPT) return true;
  // FPT: the suggested chunk's own hints under these parameters exist only
  // if these very bytes were cut as a chunk under them (docs/design.md,
  // "Why FF+RWT+FPT is exact"); they are also the candidates for the chunk
  // after it.
  auto hints =
      source_->NextHintsOf(found->fingerprint, cached ? &found->key : nullptr);
  if (!hints.ok()) return hints.status();
  found->next = std::move(hints->sizes);
  found->run = std::move(hints->run);
  found->next_known = true;
  return !found->next.empty();
}

bool HintFollower::PassesTest(uint32_t candidate, absl::string_view bytes,
                              bool at_end) const {
  const size_t size = HintSize(candidate);
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  switch (options_.test) {
    case HintTest::kOff:
      return false;
    case HintTest::kFF:
      return true;
    case HintTest::kFFMT:
      return data[size - 1] == HintMarker(candidate);
    case HintTest::kFFRWT:
    case HintTest::kFFRWTFPT:
      return boundary_.Holds(data, bytes.size(), at_end, size);
  }
  return false;
}

absl::Status HintFollower::CutSequential(bool at_end, ChunkSink* sink) {
  FoundChunk found;  // reused from chunk to chunk (it keeps its capacity)
  for (;;) {
    const absl::string_view bytes = input_.view();
    if (bytes.empty()) return absl::OkStatus();
    if (!at_end && bytes.size() < cutter_->max_size()) {
      return absl::OkStatus();
    }
    size_t size;
    {
      Stopwatch watch(&totals_->chunk_seconds, chunk_stage_);
      uint64_t hash = 0;
      size = cutter_->Cut(reinterpret_cast<const uint8_t*>(bytes.data()),
                          bytes.size(), 0, &hash);
    }
    // A chunk the stream's end cut says nothing about what follows.
    const bool end_cut = at_end && size == bytes.size();
    absl::Status status = Identify(bytes.substr(0, size), end_cut, &found);
    if (!status.ok()) return status;
    hint_fp_ = found.fingerprint;
    status = EmitChunk(size, &found, /*learnable=*/!end_cut, sink);
    if (!status.ok()) return status;
    if (!found.next.empty()) {
      candidates_.swap(found.next);
      run_.swap(found.run);
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

absl::Status HintFollower::Identify(absl::string_view chunk, bool end_cut,
                                    FoundChunk* found) {
  found->next.clear();
  found->run.clear();
  found->next_known = false;
  const bool cached = source_->cached();
  {
    Stopwatch watch(nullptr, fingerprint_stage_);
    if (cached) found->key = source_->KeyOf(chunk);
    const std::optional<HintCache::Entry> hit = source_->FingerprintOf(
        chunk, cached ? &found->key : nullptr, &found->fingerprint);
    if (hit.has_value() && !end_cut && hit->num_sizes > 0) {
      // Seen before (as in TryCandidate): its hints too.
      found->next.assign(hit->sizes.begin(),
                         hit->sizes.begin() + hit->num_sizes);
      found->next_known = true;
    }
  }
  if (end_cut || found->next_known) return absl::OkStatus();
  auto hints =
      source_->NextHintsOf(found->fingerprint, cached ? &found->key : nullptr);
  if (!hints.ok()) return hints.status();
  found->next = std::move(hints->sizes);
  found->run = std::move(hints->run);
  return absl::OkStatus();
}

absl::Status HintFollower::EmitChunk(size_t size, FoundChunk* found,
                                     bool learnable, ChunkSink* sink) {
  emitted_.offset = input_start_;
  emitted_.bytes = input_.view().substr(0, size);
  emitted_.fingerprint = std::move(found->fingerprint);
  emitted_.learnable = learnable;
  emitted_.keyed = source_->cached();
  emitted_.key = found->key;
  absl::Status status = sink->AcceptChunks(absl::MakeSpan(&emitted_, 1));
  input_start_ += size;
  input_.Consume(size);
  found->fingerprint.clear();  // moved from: valid, unspecified
  return status;
}

}  // namespace chunkd::pipeline
