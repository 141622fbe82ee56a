// StreamChunker: the fast engine (engine.h) over a stream that arrives in
// pieces.
//
// The buffer holds, from index 0: up to kContext bytes of left context, the
// chunk in progress (from start_), and bytes appended but not yet cut. The
// engine decides a cut only when it is final — at least max_size bytes are
// available from the chunk start, after which no algorithm's answer can
// change — or at Finish(), when the stream end is known; so its answers are
// those of ReferenceChunks however the stream is split and whenever the
// engine runs. The engine runs once window_size bytes have arrived since its
// last run, so that each run has enough input to fan out across threads; the
// engine's bitmaps refer to stream positions and survive both the runs and
// the compaction of this buffer. A piece of at least 4 * (final size +
// kContext) bytes is not copied but cut where it lies (AppendInPlace), with
// any number of threads.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/engine.h"

namespace chunkd::chunking {

class StreamChunker::Impl {
 public:
  Impl(const ChunkerOptions& options, std::unique_ptr<Engine> engine)
      : options_(options),
        engine_(std::move(engine)),
        bridge_(engine_->final_size() + kContext),
        in_place_min_(4 * bridge_) {}

  void Append(absl::string_view piece, std::vector<Chunk>* out) {
    if (finished_) return;  // REQUIRES violated; ignore rather than abort.
    // Views handed out by the previous call die here, so this is the one
    // place where bytes may move.
    Forget();
    Compact();
    const auto* bytes = reinterpret_cast<const uint8_t*>(piece.data());
    bytes_in_ += piece.size();
    // In place, whatever the thread count: a piece this long gives every
    // thread work on its own (the two-stage pipeline cuts it into segments
    // of at least 64 KiB, speculative segments into one per thread), and
    // gathering it first would copy every byte on the caller's thread.
    if (piece.size() >= in_place_min_) {
      AppendInPlace(bytes, piece.size(), out);
      return;
    }
    buffer_.insert(buffer_.end(), bytes, bytes + piece.size());
    pending_ += piece.size();
    if (pending_ >= engine_->plan().window_size &&
        buffer_.size() - start_ >= engine_->final_size()) {
      Run(/*at_end=*/false, out);
    }
  }

  void Finish(std::vector<Chunk>* out) {
    if (finished_) return;
    finished_ = true;
    Forget();
    Compact();
    Run(/*at_end=*/true, out);
  }

  absl::string_view ChunkData(const Chunk& chunk) const {
    for (const View& v : {View{piece_, piece_size_, piece_base_},
                          View{buffer_.data(), buffer_.size(), base_},
                          View{spare_.data(), spare_.size(), spare_base_}}) {
      if (v.data != nullptr && chunk.offset >= v.base &&
          chunk.offset + chunk.length <= v.base + v.size) {
        return absl::string_view(
            reinterpret_cast<const char*>(v.data) + (chunk.offset - v.base),
            chunk.length);
      }
    }
    return absl::string_view();  // Not a chunk of the last call.
  }

  absl::string_view Pending() const {
    return absl::string_view(
        reinterpret_cast<const char*>(buffer_.data()) + start_,
        buffer_.size() - start_);
  }

  uint64_t bytes_in() const { return bytes_in_; }
  const ChunkerOptions& options() const { return options_; }
  const EnginePlan& plan() const { return engine_->plan(); }

 private:
  struct View {
    const uint8_t* data;
    size_t size;
    uint64_t base;
  };

  // Cuts every chunk whose end is final and appends it to *out.
  void Run(bool at_end, std::vector<Chunk>* out) {
    Engine::Input input;
    input.data = buffer_.data();
    input.size = buffer_.size();
    input.offset = base_;
    input.at_end = at_end;
    start_ = engine_->CutFinal(input, start_, out);
    pending_ = 0;
  }

  // A large piece is cut where it lies. Its first bridge_ bytes are copied
  // behind the buffer, which finishes the chunks that started before the
  // piece and leaves the chunk in progress more than kContext bytes into the
  // piece; the engine then runs on the piece itself; the bytes from the
  // left context of the new chunk in progress on (fewer than bridge_) become
  // the buffer. The old buffer stays as spare_ until the next call, since
  // chunks emitted here may lie in it.
  void AppendInPlace(const uint8_t* bytes, size_t size,
                     std::vector<Chunk>* out) {
    const uint64_t piece_base = base_ + buffer_.size();
    buffer_.insert(buffer_.end(), bytes, bytes + bridge_);
    Run(/*at_end=*/false, out);
    // All chunks starting at or before buffer_.size() - final_size were cut.
    const size_t from = static_cast<size_t>(base_ + start_ - piece_base);
    Engine::Input input;
    input.data = bytes;
    input.size = size;
    input.offset = piece_base;
    input.at_end = false;
    const size_t next = engine_->CutFinal(input, from, out);
    piece_ = bytes;
    piece_size_ = size;
    piece_base_ = piece_base;
    std::swap(buffer_, spare_);
    spare_base_ = base_;
    const size_t keep_from = next - std::min(next, kContext);
    buffer_.assign(bytes + keep_from, bytes + size);
    base_ = piece_base + keep_from;
    start_ = next - keep_from;
  }

  // Drops the views of the last call: the piece cut in place and the spare
  // buffer.
  void Forget() {
    piece_ = nullptr;
    piece_size_ = 0;
    spare_.clear();
  }

  // Drops the bytes before the left context of the chunk in progress, but
  // only once they are at least as many as the bytes kept: every byte is then
  // moved O(1) times on average however small the pieces are, at the price of
  // holding up to twice the live bytes.
  void Compact() {
    const size_t keep_from = start_ - std::min(start_, kContext);
    if (keep_from == 0 || keep_from < buffer_.size() - keep_from) return;
    buffer_.erase(buffer_.begin(), buffer_.begin() + keep_from);
    base_ += keep_from;
    start_ -= keep_from;
  }

  const ChunkerOptions options_;
  const std::unique_ptr<Engine> engine_;
  // Bytes of a large piece copied behind the buffer: enough to finish every
  // chunk that started before the piece, plus a left context.
  const size_t bridge_;
  // Pieces at least this long are cut in place.
  const size_t in_place_min_;
  std::vector<uint8_t> buffer_;
  uint64_t base_ = 0;   // stream offset of buffer_[0]
  size_t start_ = 0;    // index in buffer_ of the chunk in progress
  size_t pending_ = 0;  // bytes appended since the engine last ran
  // The last call's piece when it was cut in place, and the buffer before it.
  const uint8_t* piece_ = nullptr;
  size_t piece_size_ = 0;
  uint64_t piece_base_ = 0;
  std::vector<uint8_t> spare_;
  uint64_t spare_base_ = 0;
  uint64_t bytes_in_ = 0;
  bool finished_ = false;
};

absl::StatusOr<std::unique_ptr<StreamChunker>> StreamChunker::Create(
    const ChunkerOptions& options) {
  return Create(options, EngineOptions());
}

absl::StatusOr<std::unique_ptr<StreamChunker>> StreamChunker::Create(
    const ChunkerOptions& options, const EngineOptions& engine) {
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(options, engine);
  if (!e.ok()) return e.status();
  return std::unique_ptr<StreamChunker>(
      new StreamChunker(std::make_unique<Impl>(options, *std::move(e))));
}

StreamChunker::StreamChunker(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

StreamChunker::~StreamChunker() = default;

void StreamChunker::Append(absl::string_view piece, std::vector<Chunk>* out) {
  impl_->Append(piece, out);
}

void StreamChunker::Finish(std::vector<Chunk>* out) { impl_->Finish(out); }

absl::string_view StreamChunker::ChunkData(const Chunk& chunk) const {
  return impl_->ChunkData(chunk);
}

absl::string_view StreamChunker::Pending() const { return impl_->Pending(); }

uint64_t StreamChunker::bytes_in() const { return impl_->bytes_in(); }

const ChunkerOptions& StreamChunker::options() const {
  return impl_->options();
}

const EnginePlan& StreamChunker::plan() const { return impl_->plan(); }

}  // namespace chunkd::chunking
