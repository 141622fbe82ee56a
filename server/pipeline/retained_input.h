// RetainedInput: the bytes the hint follower cuts from, most of them left
// where the caller has them.
//
// The follower cuts chunk after chunk from one position of the stream. The
// bytes from there on are a copy it holds (what the chunker had not cut, or
// what was left at the end of the last call) followed by the caller's piece,
// which is valid only during the call. Copying every piece would cost a copy
// of every byte; instead the first bytes of the piece are copied behind the
// held ones, enough for any chunk that starts in the held bytes and for the
// bytes its test reads (`bridge_size`); once the cut position passes into
// the piece, the view moves to the piece itself (ExtendIntoPiece()). At the
// end of the call CopyRestOfPiece() copies what is left of the piece, at
// most what one call could not cut.
//
// The held copy drops the bytes before the cut position once they are at
// least as many as the bytes kept, so every byte is moved O(1) times.
//
// Thread safety: not thread-safe.
#ifndef CHUNKD_PIPELINE_RETAINED_INPUT_H_
#define CHUNKD_PIPELINE_RETAINED_INPUT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace chunkd::pipeline {

class RetainedInput {
 public:
  // `bridge_size`: bytes of a piece copied behind held bytes (twice what a
  // chunk and its test read).
  explicit RetainedInput(size_t bridge_size) : bridge_size_(bridge_size) {}

  RetainedInput(const RetainedInput&) = delete;
  RetainedInput& operator=(const RetainedInput&) = delete;

  // The bytes from the cut position on that can be seen now: held ones and
  // the bridged start of a piece, or (after ExtendIntoPiece()) the piece
  // itself.
  absl::string_view view() const { return data_.substr(skip_); }

  // `n` bytes of view() were cut.
  void Consume(size_t n) { skip_ += n; }

  // Holds a copy of `bytes`, and nothing else, from the cut position on.
  void HoldCopy(absl::string_view bytes);

  // Makes `piece` (the caller's bytes, valid during the call) follow the
  // held bytes: as it is when nothing is held, else its first bytes are
  // copied behind them and the rest waits.
  void Append(absl::string_view piece);

  // view() ran short while part of a piece waits: goes on with it. False
  // when nothing waits.
  bool ExtendIntoPiece();

  // Everything from the cut position on, seen or waiting, as one piece for a
  // chunker to take over; holds nothing afterwards. Valid until the next
  // HandOver() or CopyRestOfPiece().
  absl::string_view HandOver();

  // HandOver() without its first `drop` bytes (REQUIRES: at most as many as
  // it holds). When those are exactly the held bytes before the caller's
  // piece, this is the rest of the piece where it lies, not a copy.
  absl::string_view HandOver(size_t drop);

  // Ends the caller's call: copies what view() and the waiting bytes still
  // see of the caller's piece, and drops what HandOver() returned.
  void CopyRestOfPiece();

 private:
  const size_t bridge_size_;
  // The bytes from data_[skip_] on: held_, or during a call the caller's
  // piece, whose bytes after data_ are rest_. bridged_: how many of the
  // piece's first bytes Append() copied to held_.
  std::string held_;
  absl::string_view data_;
  size_t skip_ = 0;
  absl::string_view rest_;
  size_t bridged_ = 0;
  std::string released_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_RETAINED_INPUT_H_
