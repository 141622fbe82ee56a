#include "pipeline/retained_input.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace chunkd::pipeline {

void RetainedInput::HoldCopy(absl::string_view bytes) {
  held_.assign(bytes.data(), bytes.size());
  data_ = held_;
  skip_ = 0;
}

void RetainedInput::Append(absl::string_view piece) {
  if (piece.empty()) return;
  if (view().empty()) {
    // Nothing held: cut the caller's bytes where they lie.
    held_.clear();
    data_ = piece;
    skip_ = 0;
    return;
  }
  // Held bytes and the start of the piece together, enough for any chunk
  // (and the bytes its test reads) that begins in the held ones;
  // ExtendIntoPiece() moves on to the piece itself.
  if (data_.data() == held_.data()) {
    held_.erase(0, skip_);
  } else {
    held_.assign(view().data(), view().size());
  }
  skip_ = 0;
  bridged_ = std::min(piece.size(), bridge_size_);
  held_.append(piece.data(), bridged_);
  data_ = held_;
  rest_ = piece.substr(bridged_);
}

bool RetainedInput::ExtendIntoPiece() {
  if (rest_.empty()) return false;
  const size_t left = data_.size() - skip_;
  if (left <= bridged_) {
    // What is left lies in the piece's first bytes: go on in the piece.
    data_ = absl::string_view(rest_.data() - bridged_, bridged_ + rest_.size());
    skip_ = bridged_ - left;
    held_.clear();
  } else {
    held_.erase(0, skip_);
    held_.append(rest_.data(), rest_.size());
    data_ = held_;
    skip_ = 0;
  }
  rest_ = absl::string_view();
  return true;
}

absl::string_view RetainedInput::HandOver() {
  // (view() and rest_ may point into released_ itself.)
  std::string next = absl::StrCat(view(), rest_);
  released_.swap(next);
  held_.clear();
  data_ = absl::string_view();
  skip_ = 0;
  rest_ = absl::string_view();
  return released_;
}

absl::string_view RetainedInput::HandOver(size_t drop) {
  const size_t seen = view().size();
  if (!rest_.empty() && data_.data() == held_.data() && seen >= bridged_ &&
      drop == seen - bridged_) {
    // Only the piece's bridged start is seen after the dropped bytes: the
    // piece itself follows them.
    const absl::string_view piece(rest_.data() - bridged_,
                                  bridged_ + rest_.size());
    held_.clear();
    data_ = absl::string_view();
    skip_ = 0;
    rest_ = absl::string_view();
    return piece;
  }
  return HandOver().substr(drop);
}

void RetainedInput::CopyRestOfPiece() {
  if (data_.data() != held_.data()) {
    held_.assign(view().data(), view().size());
    skip_ = 0;
  } else if (skip_ > 0 && skip_ >= held_.size() - skip_) {
    // Drop the bytes behind once they outnumber the bytes kept.
    held_.erase(0, skip_);
    skip_ = 0;
  }
  held_.append(rest_.data(), rest_.size());
  rest_ = absl::string_view();
  data_ = held_;
  std::string().swap(released_);
}

}  // namespace chunkd::pipeline
