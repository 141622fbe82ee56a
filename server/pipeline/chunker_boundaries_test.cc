#include "pipeline/chunker_boundaries.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace chunkd::pipeline {
namespace {

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Keeps copies of what it is handed.
class CollectingSink final : public ChunkSink {
 public:
  struct Got {
    uint64_t offset;
    std::string bytes;
    bool learnable;
  };
  absl::Status AcceptChunks(absl::Span<CutChunk> cuts) override {
    ++calls;
    for (const CutChunk& c : cuts) {
      EXPECT_TRUE(c.fingerprint.empty());
      EXPECT_FALSE(c.keyed);
      got.push_back({c.offset, std::string(c.bytes), c.learnable});
    }
    return absl::OkStatus();
  }

  std::vector<Got> got;
  int calls = 0;  // of AcceptChunks
};

chunking::ChunkerOptions Small() {
  chunking::ChunkerOptions o =
      chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  o.min_size = 256;
  o.avg_size = 1024;
  o.max_size = 4096;
  return o;
}

// The reference's chunks, at offsets from the chunker's base, with their
// bytes; only the stream's last chunk is not learnable.
TEST(ChunkerBoundariesTest, CutsAsTheReferenceFromItsBase) {
  const std::string data = RandomBytes(1 << 20, 1);
  const uint64_t base = 123456;
  double seconds = 0;
  auto chunker = ChunkerBoundaries::Create(Small(), chunking::EngineOptions(),
                                           base, &seconds, nullptr);
  ASSERT_TRUE(chunker.ok()) << chunker.status();
  EXPECT_EQ((*chunker)->end(), base);
  CollectingSink sink;
  for (size_t at = 0; at < data.size(); at += 77777) {
    const absl::string_view piece = absl::string_view(data).substr(at, 77777);
    ASSERT_TRUE((*chunker)->CutChunks(piece, false, &sink).ok());
  }
  ASSERT_TRUE((*chunker)->CutChunks(absl::string_view(), true, &sink).ok());
  const auto ref = chunking::ReferenceChunks(
      Small(), absl::MakeConstSpan(
                   reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  ASSERT_EQ(sink.got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(sink.got[i].offset, base + ref[i].offset) << i;
    EXPECT_EQ(sink.got[i].bytes, data.substr(ref[i].offset, ref[i].length));
    EXPECT_EQ(sink.got[i].learnable, i + 1 < ref.size()) << i;
  }
  EXPECT_EQ((*chunker)->end(), base + data.size());
  EXPECT_GT(seconds, 0);
}

// Pending() is what it was fed and has not handed on; a call that finds no
// chunk hands nothing.
TEST(ChunkerBoundariesTest, PendingIsWhatItHasNotCut) {
  const std::string data = RandomBytes(64 << 10, 2);
  chunking::EngineOptions engine;
  engine.window_size = 1;  // cut on every call
  auto chunker =
      ChunkerBoundaries::Create(Small(), engine, 1000, nullptr, nullptr);
  ASSERT_TRUE(chunker.ok());
  CollectingSink sink;
  const absl::string_view all(data);
  ASSERT_TRUE((*chunker)->CutChunks(all.substr(0, 100), false, &sink).ok());
  EXPECT_EQ(sink.calls, 0);
  EXPECT_EQ((*chunker)->Pending(), data.substr(0, 100));
  ASSERT_TRUE((*chunker)->CutChunks(all.substr(100), false, &sink).ok());
  ASSERT_EQ(sink.calls, 1);
  ASSERT_FALSE(sink.got.empty());
  const uint64_t end = (*chunker)->end();
  EXPECT_EQ(end, sink.got.back().offset + sink.got.back().bytes.size());
  EXPECT_EQ((*chunker)->Pending(), data.substr(end - 1000));
}

}  // namespace
}  // namespace chunkd::pipeline
