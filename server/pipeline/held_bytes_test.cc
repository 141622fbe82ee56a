#include "pipeline/held_bytes.h"

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

TEST(HeldBytesTest, CutsAPieceWhereItLiesWhenNothingIsHeld) {
  HeldBytes held(16);
  const std::string piece = Bytes(100, 1);
  held.Append(piece);
  EXPECT_EQ(held.view().data(), piece.data());
  EXPECT_EQ(held.view(), piece);
  held.Skip(30);
  EXPECT_EQ(held.view(), absl::string_view(piece).substr(30));
}

TEST(HeldBytesTest, BridgesHeldBytesIntoThePieceThenMovesOnToIt) {
  HeldBytes held(16);
  held.Hold("abc");
  const std::string piece = Bytes(100, 2);
  held.Append(piece);
  // The held bytes and the piece's first 16.
  EXPECT_EQ(held.view(), "abc" + piece.substr(0, 16));
  held.Skip(10);
  ASSERT_TRUE(held.Refill());
  // The cut position lies in the bridged bytes: on in the piece itself.
  EXPECT_EQ(held.view().data(), piece.data() + 7);
  EXPECT_EQ(held.view(), absl::string_view(piece).substr(7));
  EXPECT_FALSE(held.Refill());
}

TEST(HeldBytesTest, RefillBeforeTheBridgeCopiesTheRest) {
  HeldBytes held(4);
  held.Hold("0123456789");
  const std::string piece = Bytes(50, 3);
  held.Append(piece);
  held.Skip(2);
  ASSERT_TRUE(held.Refill());
  EXPECT_EQ(held.view(), "23456789" + piece);
}

TEST(HeldBytesTest, KeepCopiesWhatIsLeftOfTheCallersPiece) {
  HeldBytes held(8);
  std::string piece = Bytes(64, 4);
  const std::string want = piece.substr(40);
  held.Append(piece);
  held.Skip(40);
  held.Keep();
  piece.assign(piece.size(), 'x');  // the caller reuses its buffer
  EXPECT_EQ(held.view(), want);

  // Held and waiting bytes are both kept.
  std::string next = Bytes(32, 5);
  const std::string next_copy = next;
  held.Append(next);
  held.Skip(4);
  held.Keep();
  next.assign(next.size(), 'y');
  EXPECT_EQ(held.view(), want.substr(4) + next_copy);
}

TEST(HeldBytesTest, ReleaseHandsOverEverythingFromTheCutPosition) {
  HeldBytes held(8);
  held.Hold("held");
  const std::string piece = Bytes(40, 6);
  held.Append(piece);
  held.Skip(2);
  EXPECT_EQ(held.Release(), "ld" + piece);
  EXPECT_TRUE(held.view().empty());
  EXPECT_FALSE(held.Refill());
  held.Keep();
  EXPECT_TRUE(held.view().empty());
}

TEST(HeldBytesTest, ReleaseWithoutTheHeldBytesIsThePieceWhereItLies) {
  HeldBytes held(8);
  held.Hold("held");
  const std::string piece = Bytes(40, 6);
  held.Append(piece);
  const absl::string_view rest = held.Release(4);
  EXPECT_EQ(rest, piece);
  EXPECT_EQ(rest.data(), piece.data());  // not a copy
  EXPECT_TRUE(held.view().empty());
  held.Keep();
  EXPECT_TRUE(held.view().empty());

  // Anything else is a copy of the bytes after the dropped ones.
  held.Hold("held");
  held.Append(piece);
  EXPECT_EQ(held.Release(2), "ld" + piece);
  held.Hold("held");
  held.Append(piece);
  held.Keep();  // the piece is copied behind the held bytes
  EXPECT_EQ(held.Release(4), piece);
  held.Hold("held");
  EXPECT_EQ(held.Release(1), "eld");
}

// Whatever the pieces and the cuts, view() shows the stream from the cut
// position on, and Keep() makes it independent of the caller's buffers.
TEST(HeldBytesTest, ViewIsAlwaysTheStreamFromTheCutPosition) {
  const std::string stream = Bytes(200000, 7);
  std::mt19937 rng(8);
  HeldBytes held(300);
  size_t fed = 0;
  size_t pos = 0;
  while (fed < stream.size()) {
    std::string piece = stream.substr(fed, 1 + rng() % 5000);
    fed += piece.size();
    held.Append(piece);
    for (;;) {
      const absl::string_view view = held.view();
      ASSERT_EQ(view, absl::string_view(stream).substr(pos, view.size()))
          << pos;
      // Cuts of at most half the bridge: a chunk never outgrows it.
      const size_t n = std::min<size_t>(view.size(), rng() % 150);
      if (n == 0) {
        if (!held.Refill()) break;
        continue;
      }
      held.Skip(n);
      pos += n;
    }
    held.Keep();
    piece.assign(piece.size(), '\0');
    ASSERT_EQ(held.view(), absl::string_view(stream).substr(pos, fed - pos));
  }
}

}  // namespace
}  // namespace chunkd::pipeline
