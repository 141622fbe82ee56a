// StreamChunker == ReferenceChunks for every algorithm and every way of
// splitting the stream (docs/design.md, "The reference is the specification").
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/executor.h"
#include "chunking/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using testing::Bytes;

absl::string_view View(const Bytes& data, size_t pos, size_t n) {
  return absl::string_view(reinterpret_cast<const char*>(data.data()) + pos, n);
}

// Window 1: the chunker runs its engine on every Append, so each chunk is
// emitted as soon as it is final.
EngineOptions EveryAppend() {
  EngineOptions engine;
  engine.window_size = 1;
  return engine;
}

// Streams `data` in pieces of the sizes `next_size()` returns and checks, after
// every call, that the chunks emitted so far are exactly the reference chunks
// that are final — those with at least max bytes after their start, or all at
// Finish() — and that ChunkData() returns their bytes.
template <typename NextSize>
void ExpectStreamEqualsReference(const ChunkerOptions& options,
                                 const Bytes& data, NextSize next_size) {
  const std::vector<Chunk> reference = ReferenceChunks(options, data);
  absl::StatusOr<std::unique_ptr<StreamChunker>> chunker =
      StreamChunker::Create(options, EveryAppend());
  ASSERT_TRUE(chunker.ok()) << chunker.status();
  const uint64_t final_size = MakeCutter(options).value()->final_size();
  std::vector<Chunk> all;
  std::vector<Chunk> out;
  size_t pos = 0;
  size_t calls = 0;
  auto check = [&](bool at_end) {
    for (const Chunk& c : out) {
      ASSERT_EQ((*chunker)->ChunkData(c), View(data, c.offset, c.length))
          << "chunk at " << c.offset;
    }
    all.insert(all.end(), out.begin(), out.end());
    out.clear();
    size_t expected = 0;
    while (expected < reference.size() &&
           (at_end || reference[expected].offset + final_size <= pos)) {
      ++expected;
    }
    ASSERT_EQ(all.size(), expected) << "after " << pos << " bytes";
    for (size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(all[i], reference[i]) << "chunk " << i;
    }
  };
  while (pos < data.size()) {
    const size_t n = std::min(next_size(), data.size() - pos);
    (*chunker)->Append(View(data, pos, n), &out);
    pos += n;
    ++calls;
    ASSERT_EQ((*chunker)->bytes_in(), pos);
    check(false);
    if (::testing::Test::HasFatalFailure()) return;
  }
  (*chunker)->Finish(&out);
  check(true);
  EXPECT_EQ(all, reference);
  // Finish() is final: later calls change nothing.
  (*chunker)->Append("more", &out);
  (*chunker)->Finish(&out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ((*chunker)->bytes_in(), data.size());
}

std::vector<ChunkerOptions> SmallOptionSets() {
  std::vector<ChunkerOptions> sets;
  for (Algorithm algorithm : AllAlgorithms()) {
    sets.push_back(testing::SmallOptions(algorithm));
  }
  ChunkerOptions decreasing = testing::SmallOptions(Algorithm::kSeqCdc);
  decreasing.seq_mode = SeqMode::kDecreasing;
  sets.push_back(decreasing);
  ChunkerOptions odd = testing::SmallOptions(Algorithm::kFastCdc);
  odd.min_size = 65;
  odd.max_size = 1025;
  odd.normalization_level = 3;
  odd.seed = 666;
  sets.push_back(odd);
  return sets;
}

TEST(StreamChunkerTest, OneBytePieces) {
  const Bytes random = testing::RandomBytes(96 * 1024, 5);
  const Bytes text = testing::TextBytes(32 * 1024, 6);
  for (const ChunkerOptions& options : SmallOptionSets()) {
    SCOPED_TRACE(AlgorithmName(options.algorithm));
    ExpectStreamEqualsReference(options, random, [] { return size_t{1}; });
    ExpectStreamEqualsReference(options, text, [] { return size_t{1}; });
  }
}

TEST(StreamChunkerTest, OddAndLargePieces) {
  const Bytes data = testing::RandomBytes(5 << 20, 8);
  for (const auto& [name, options] : testing::AllOptionSets()) {
    SCOPED_TRACE(name);
    for (size_t piece : {size_t{4093}, size_t{1} << 20, data.size()}) {
      SCOPED_TRACE(piece);
      ExpectStreamEqualsReference(options, data, [piece] { return piece; });
    }
  }
}

TEST(StreamChunkerTest, SeededRandomPieces) {
  const Bytes data = testing::RandomBytes(3 << 20, 9);
  for (const auto& [name, options] : testing::AllOptionSets()) {
    SCOPED_TRACE(name);
    std::mt19937_64 rng(std::hash<std::string>()(name));
    // Mostly small pieces, sometimes large ones, sometimes empty ones.
    ExpectStreamEqualsReference(options, data, [&rng] {
      const uint64_t r = rng();
      switch (r % 4) {
        case 0:
          return size_t{0};
        case 1:
          return static_cast<size_t>((r >> 8) % 300);
        case 2:
          return static_cast<size_t>((r >> 8) % 70000);
        default:
          return static_cast<size_t>((r >> 8) % 3000000);
      }
    });
  }
}

TEST(StreamChunkerTest, ConstantAndTinyStreams) {
  for (const ChunkerOptions& options : SmallOptionSets()) {
    SCOPED_TRACE(AlgorithmName(options.algorithm));
    for (size_t size : {0, 1, 63, 64, 65, 1023, 1024, 1025, 5000}) {
      for (uint8_t fill : {0x00, 0xFF}) {
        ExpectStreamEqualsReference(options, Bytes(size, fill),
                                    [] { return size_t{7}; });
      }
    }
  }
}

TEST(StreamChunkerTest, FastCdcPublicVectorsStreamed) {
  const Bytes image = testing::ReadTestFile("SekienAkashita.jpg");
  ASSERT_EQ(image.size(), 109466u);
  for (uint64_t seed : {0, 666}) {
    ChunkerOptions options = DefaultOptions(Algorithm::kFastCdc);
    options.min_size = 4096;
    options.avg_size = 16384;
    options.max_size = 65535;
    options.normalization_level = 2;
    options.seed = seed;
    for (size_t piece : {1, 1000, 65535, 65536, 200000}) {
      ExpectStreamEqualsReference(options, image, [piece] { return piece; });
    }
    // Spot check against the vectors (fastcdc_test checks all fields).
    const std::vector<Chunk> chunks = ReferenceChunks(options, image);
    ASSERT_EQ(chunks.size(), 6u);
    EXPECT_EQ(chunks[1].offset, seed == 0 ? 19186u : 17635u);
  }
}

TEST(StreamChunkerTest, ChunkDataOfUnknownChunkIsEmpty) {
  absl::StatusOr<std::unique_ptr<StreamChunker>> chunker =
      StreamChunker::Create(testing::SmallOptions(Algorithm::kFixed),
                            EveryAppend());
  ASSERT_TRUE(chunker.ok());
  std::vector<Chunk> out;
  (*chunker)->Append(std::string(300, 'x'), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ((*chunker)->ChunkData(out[0]), std::string(256, 'x'));
  EXPECT_TRUE((*chunker)->ChunkData(Chunk{100000, 10, 0}).empty());
  EXPECT_EQ((*chunker)->options().avg_size, 256u);
}

// Pending() is exactly the input after the last emitted chunk.
TEST(StreamChunkerTest, PendingIsTheInputAfterTheLastChunk) {
  absl::StatusOr<std::unique_ptr<StreamChunker>> chunker =
      StreamChunker::Create(testing::SmallOptions(Algorithm::kFixed),
                            EveryAppend());
  ASSERT_TRUE(chunker.ok());
  std::vector<Chunk> out;
  EXPECT_TRUE((*chunker)->Pending().empty());
  (*chunker)->Append(std::string(300, 'a'), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ((*chunker)->Pending(), std::string(44, 'a'));
  (*chunker)->Append(std::string(100, 'b'), &out);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ((*chunker)->Pending(), std::string(44, 'a') + std::string(100, 'b'));
  (*chunker)->Append(std::string(600, 'c'), &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ((*chunker)->Pending(), std::string(1000 - 3 * 256, 'c'));
  (*chunker)->Finish(&out);
  EXPECT_TRUE((*chunker)->Pending().empty());
}

// With the default window the chunker batches: nothing comes out before a
// window's worth of input (so that the engine has enough to fan out), then
// every final chunk at once; the result is still the reference.
TEST(StreamChunkerTest, DefaultWindowBatchesThenEmitsEverythingFinal) {
  const ChunkerOptions options = testing::SmallOptions(Algorithm::kFastCdc);
  const Bytes data = testing::RandomBytes(3 << 20, 21);
  const std::vector<Chunk> reference = ReferenceChunks(options, data);
  absl::StatusOr<std::unique_ptr<StreamChunker>> chunker =
      StreamChunker::Create(options);
  ASSERT_TRUE(chunker.ok()) << chunker.status();
  const size_t window = (*chunker)->plan().window_size;
  ASSERT_GE(window, size_t{1} << 20);
  std::vector<Chunk> all;
  std::vector<Chunk> out;
  // Below 4 * (max_size + 256): a larger piece is cut in place at once.
  const size_t piece = 4000;
  for (size_t pos = 0; pos < data.size(); pos += piece) {
    const size_t n = std::min(piece, data.size() - pos);
    (*chunker)->Append(View(data, pos, n), &out);
    if (pos + n < window) {
      EXPECT_TRUE(out.empty()) << "after " << pos + n << " bytes";
    }
    if (!out.empty()) {
      // A run emits every chunk that is final at that point.
      size_t final_count = 0;
      while (final_count < reference.size() &&
             reference[final_count].offset + options.max_size <= pos + n) {
        ++final_count;
      }
      EXPECT_EQ(all.size() + out.size(), final_count);
    }
    all.insert(all.end(), out.begin(), out.end());
    out.clear();
  }
  (*chunker)->Finish(&out);
  all.insert(all.end(), out.begin(), out.end());
  EXPECT_EQ(all, reference);
}

// A large piece is cut where it lies at once also with several threads: the
// engine's pipeline fans a single piece out, so nothing waits for a window.
TEST(StreamChunkerTest, LargePieceIsCutAtOnceWithSeveralThreads) {
  const ChunkerOptions options = testing::SmallOptions(Algorithm::kCrc32);
  const Bytes data = testing::RandomBytes(3 << 20, 22);
  const std::vector<Chunk> reference = ReferenceChunks(options, data);
  ThreadPoolExecutor executor(2);
  EngineOptions engine;
  engine.executor = &executor;
  absl::StatusOr<std::unique_ptr<StreamChunker>> chunker =
      StreamChunker::Create(options, engine);
  ASSERT_TRUE(chunker.ok()) << chunker.status();
  const size_t piece = size_t{1} << 20;
  ASSERT_LT(piece, (*chunker)->plan().window_size);
  std::vector<Chunk> all;
  for (size_t pos = 0; pos < data.size(); pos += piece) {
    std::vector<Chunk> out;
    (*chunker)->Append(View(data, pos, piece), &out);
    // Every chunk final after this piece came out, and those are the
    // reference's.
    size_t final_count = 0;
    while (final_count < reference.size() &&
           reference[final_count].offset + options.max_size <= pos + piece) {
      ++final_count;
    }
    all.insert(all.end(), out.begin(), out.end());
    ASSERT_EQ(all.size(), final_count) << "after " << pos + piece << " bytes";
    // Chunks cut in place are readable through ChunkData.
    for (const Chunk& c : out) {
      ASSERT_EQ((*chunker)->ChunkData(c), View(data, c.offset, c.length));
    }
  }
  std::vector<Chunk> out;
  (*chunker)->Finish(&out);
  all.insert(all.end(), out.begin(), out.end());
  EXPECT_EQ(all, reference);
}

// An unknown CHUNKD_BACKEND makes the default kernel an error, never a silent
// fallback.
TEST(StreamChunkerTest, UnknownKernelSetInEnvironmentIsAnError) {
  const char* old = std::getenv("CHUNKD_BACKEND");
  const std::string saved = old == nullptr ? "" : old;
  setenv("CHUNKD_BACKEND", "sse9", 1);
  absl::StatusOr<std::unique_ptr<StreamChunker>> chunker =
      StreamChunker::Create(DefaultOptions(Algorithm::kFastCdc));
  EXPECT_EQ(chunker.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(chunker.status().message().find("sse9"), absl::string_view::npos)
      << chunker.status();
  setenv("CHUNKD_BACKEND", "scalar", 1);
  chunker = StreamChunker::Create(DefaultOptions(Algorithm::kFastCdc));
  ASSERT_TRUE(chunker.ok()) << chunker.status();
  EXPECT_EQ((*chunker)->plan().kernel, "scalar");
  if (old == nullptr) {
    unsetenv("CHUNKD_BACKEND");
  } else {
    setenv("CHUNKD_BACKEND", saved.c_str(), 1);
  }
}

}  // namespace
}  // namespace chunkd::chunking
