#include "pipeline/retained_input.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace chunkd::pipeline {
namespace {

std::string Bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(RetainedInputTest, CutsAPieceWhereItLiesWhenNothingIsHeld) {
  RetainedInput input(16);
  const std::string piece = Bytes(100, 1);
  input.Append(piece);
  EXPECT_EQ(input.view().data(), piece.data());
  EXPECT_EQ(input.view(), piece);
  input.Consume(30);
  EXPECT_EQ(input.view(), absl::string_view(piece).substr(30));
}

TEST(RetainedInputTest, BridgesHeldBytesIntoThePieceThenMovesOnToIt) {
  RetainedInput input(16);
  input.HoldCopy("abc");
  const std::string piece = Bytes(100, 2);
  input.Append(piece);
  // The held bytes and the piece's first 16.
  EXPECT_EQ(input.view(), "abc" + piece.substr(0, 16));
  input.Consume(10);
  ASSERT_TRUE(input.ExtendIntoPiece());
  // The cut position lies in the bridged bytes: on in the piece itself.
  EXPECT_EQ(input.view().data(), piece.data() + 7);
  EXPECT_EQ(input.view(), absl::string_view(piece).substr(7));
  EXPECT_FALSE(input.ExtendIntoPiece());
}

TEST(RetainedInputTest, ExtendingBeforeTheBridgeCopiesTheRest) {
  RetainedInput input(4);
  input.HoldCopy("0123456789");
  const std::string piece = Bytes(50, 3);
  input.Append(piece);
  input.Consume(2);
  ASSERT_TRUE(input.ExtendIntoPiece());
  EXPECT_EQ(input.view(), "23456789" + piece);
}

TEST(RetainedInputTest, CopyRestOfPieceCopiesWhatIsLeftOfIt) {
  RetainedInput input(8);
  std::string piece = Bytes(64, 4);
  const std::string want = piece.substr(40);
  input.Append(piece);
  input.Consume(40);
  input.CopyRestOfPiece();
  piece.assign(piece.size(), 'x');  // the caller reuses its buffer
  EXPECT_EQ(input.view(), want);

  // Held and waiting bytes are both kept.
  std::string next = Bytes(32, 5);
  const std::string next_copy = next;
  input.Append(next);
  input.Consume(4);
  input.CopyRestOfPiece();
  next.assign(next.size(), 'y');
  EXPECT_EQ(input.view(), want.substr(4) + next_copy);
}

TEST(RetainedInputTest, HandOverGivesEverythingFromTheCutPosition) {
  RetainedInput input(8);
  input.HoldCopy("held");
  const std::string piece = Bytes(40, 6);
  input.Append(piece);
  input.Consume(2);
  EXPECT_EQ(input.HandOver(), "ld" + piece);
  EXPECT_TRUE(input.view().empty());
  EXPECT_FALSE(input.ExtendIntoPiece());
  input.CopyRestOfPiece();
  EXPECT_TRUE(input.view().empty());
}

TEST(RetainedInputTest, HandOverWithoutTheHeldBytesIsThePieceWhereItLies) {
  RetainedInput input(8);
  input.HoldCopy("held");
  const std::string piece = Bytes(40, 6);
  input.Append(piece);
  const absl::string_view rest = input.HandOver(4);
  EXPECT_EQ(rest, piece);
  EXPECT_EQ(rest.data(), piece.data());  // not a copy
  EXPECT_TRUE(input.view().empty());
  input.CopyRestOfPiece();
  EXPECT_TRUE(input.view().empty());

  // Anything else is a copy of the bytes after the dropped ones.
  input.HoldCopy("held");
  input.Append(piece);
  EXPECT_EQ(input.HandOver(2), "ld" + piece);
  input.HoldCopy("held");
  input.Append(piece);
  input.CopyRestOfPiece();  // the piece is copied behind the held bytes
  EXPECT_EQ(input.HandOver(4), piece);
  input.HoldCopy("held");
  EXPECT_EQ(input.HandOver(1), "eld");
}

// Whatever the pieces and the cuts, view() shows the stream from the cut
// position on, and CopyRestOfPiece() makes it independent of the caller's
// buffers.
TEST(RetainedInputTest, ViewIsAlwaysTheStreamFromTheCutPosition) {
  const std::string stream = Bytes(200000, 7);
  std::mt19937 rng(8);
  RetainedInput input(300);
  size_t fed = 0;
  size_t pos = 0;
  while (fed < stream.size()) {
    std::string piece = stream.substr(fed, 1 + rng() % 5000);
    fed += piece.size();
    input.Append(piece);
    for (;;) {
      const absl::string_view view = input.view();
      ASSERT_EQ(view, absl::string_view(stream).substr(pos, view.size()))
          << pos;
      // Cuts of at most half the bridge: a chunk never outgrows it.
      const size_t n = std::min<size_t>(view.size(), rng() % 150);
      if (n == 0) {
        if (!input.ExtendIntoPiece()) break;
        continue;
      }
      input.Consume(n);
      pos += n;
    }
    input.CopyRestOfPiece();
    piece.assign(piece.size(), '\0');
    ASSERT_EQ(input.view(), absl::string_view(stream).substr(pos, fed - pos));
  }
}

}  // namespace
}  // namespace chunkd::pipeline
