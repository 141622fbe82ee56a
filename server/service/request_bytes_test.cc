#include "service/request_bytes.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "chunkd/v1/chunkd.pb.h"
#include "gtest/gtest.h"

namespace chunkd::service {
namespace {

// `wire` cut at the given offsets (ascending), as gRPC's slices would be.
std::vector<absl::string_view> Cut(const std::string& wire,
                                   const std::vector<size_t>& cuts) {
  std::vector<absl::string_view> pieces;
  size_t from = 0;
  for (size_t at : cuts) {
    pieces.push_back(absl::string_view(wire).substr(from, at - from));
    from = at;
  }
  pieces.push_back(absl::string_view(wire).substr(from));
  return pieces;
}

// Cuts every `step` bytes, with an empty piece at the front and the back.
std::vector<size_t> Every(size_t step, size_t size) {
  std::vector<size_t> cuts = {0};
  for (size_t at = step; at < size; at += step) cuts.push_back(at);
  cuts.push_back(size);
  return cuts;
}

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string Field(uint32_t number, uint32_t wire_type, const std::string& v) {
  std::string out = Varint((uint64_t{number} << 3) | wire_type);
  if (wire_type == 2) out += Varint(v.size());
  return out + v;
}

std::string Params() {
  v1::ChunkRequest r;
  r.mutable_params()->mutable_chunking()->set_algorithm(
      v1::ALGORITHM_FASTCDC);
  r.mutable_params()->mutable_chunking()->set_avg_size(16384);
  r.mutable_params()->set_fingerprint(v1::FINGERPRINT_ALGORITHM_SHA256);
  return r.SerializeAsString();
}

std::string Bytes(size_t n, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(random());
  return out;
}

// Whether SplitRequest split the message; when it did, checks that the
// split gives what protobuf makes of the whole message: the same verdict,
// the same data, and (data aside) the same message, unknown fields
// included.
template <typename Request>
bool SplitsLikeProtobuf(const std::string& wire,
                        const std::vector<size_t>& cuts) {
  const std::vector<absl::string_view> pieces = Cut(wire, cuts);
  RequestParts parts;
  if (!SplitRequest(pieces, &parts)) return false;
  Request whole, rest;
  const bool whole_ok = whole.ParseFromString(wire);
  EXPECT_EQ(rest.ParseFromString(parts.others), whole_ok);
  if (!whole_ok) return true;
  std::string data;
  if (parts.has_data) {
    CopyBytes(pieces, parts.data_offset, parts.data_size, &data);
  }
  EXPECT_EQ(data, whole.data());
  EXPECT_EQ(parts.data_size, whole.data().size());
  whole.clear_data();
  EXPECT_EQ(rest.SerializeAsString(), whole.SerializeAsString());
  return true;
}

TEST(SplitRequestTest, ParamsOnly) {
  const std::string wire = Params();
  EXPECT_TRUE(SplitsLikeProtobuf<v1::ChunkRequest>(wire, {}));
  RequestParts parts;
  const absl::string_view piece = wire;
  ASSERT_TRUE(SplitRequest({&piece, 1}, &parts));
  EXPECT_FALSE(parts.has_data);
  EXPECT_EQ(parts.others, wire);
}

TEST(SplitRequestTest, DataAcrossSlicesIsFoundNotCopied) {
  v1::ChunkRequest r;
  r.set_data(Bytes(size_t{1} << 20, 1));
  const std::string wire = r.SerializeAsString();
  for (size_t step : {size_t{1}, size_t{7}, size_t{65536}, wire.size()}) {
    if (step == 1) {
      // Every byte a slice: the first 300 bytes only, bounded work.
      const std::string small = Field(2, 2, Bytes(300, 2));
      EXPECT_TRUE(SplitsLikeProtobuf<v1::ChunkRequest>(small, Every(1, 303)));
      continue;
    }
    EXPECT_TRUE(SplitsLikeProtobuf<v1::ChunkRequest>(wire,
                                                     Every(step, wire.size())));
  }
  RequestParts parts;
  const absl::string_view piece = wire;
  ASSERT_TRUE(SplitRequest({&piece, 1}, &parts));
  EXPECT_TRUE(parts.others.empty());
  EXPECT_EQ(parts.data_size, size_t{1} << 20);
  EXPECT_EQ(parts.data_offset, wire.size() - (size_t{1} << 20));
}

TEST(SplitRequestTest, EmptyDataField) {
  const std::string wire = Field(2, 2, "");
  RequestParts parts;
  const absl::string_view piece = wire;
  ASSERT_TRUE(SplitRequest({&piece, 1}, &parts));
  EXPECT_TRUE(parts.has_data);
  EXPECT_EQ(parts.data_size, 0u);
  EXPECT_TRUE(SplitsLikeProtobuf<v1::ChunkRequest>(wire, {}));
  // No bytes at all: an empty request.
  EXPECT_TRUE(SplitsLikeProtobuf<v1::ChunkRequest>("", {}));
}

TEST(SplitRequestTest, ParamsAfterDataAndRepeatedFields) {
  const std::string data = Field(2, 2, Bytes(5000, 3));
  // Params after the data, in the same message.
  const std::string after = data + Params();
  EXPECT_TRUE(SplitsLikeProtobuf<v1::ChunkRequest>(after,
                                                   Every(1000, after.size())));
  // Data twice: protobuf keeps the last.
  const std::string twice = data + Field(2, 2, "second");
  EXPECT_TRUE(SplitsLikeProtobuf<v1::ChunkRequest>(twice, {4000}));
  RequestParts parts;
  const absl::string_view piece = twice;
  ASSERT_TRUE(SplitRequest({&piece, 1}, &parts));
  EXPECT_EQ(parts.data_size, 6u);
  // Params twice: protobuf merges them.
  EXPECT_TRUE(
      SplitsLikeProtobuf<v1::ChunkRequest>(Params() + data + Params(), {3}));
  v1::DedupRequest dedup;
  dedup.mutable_params()->set_namespace_("ns");
  EXPECT_TRUE(SplitsLikeProtobuf<v1::DedupRequest>(
      data + dedup.SerializeAsString(), {17}));
}

TEST(SplitRequestTest, UnknownFieldsAreKeptAsProtobufKeepsThem) {
  const std::string unknown = Field(15, 0, Varint(uint64_t{1} << 63)) +
                              Field(16, 1, "12345678") +
                              Field(17, 5, "1234") + Field(100, 2, "xyz") +
                              // the data field's number with another type
                              Field(2, 0, Varint(7));
  const std::string wire = unknown + Field(2, 2, Bytes(1000, 4)) + unknown;
  EXPECT_TRUE(
      SplitsLikeProtobuf<v1::ChunkRequest>(wire, Every(3, wire.size())));
  RequestParts parts;
  const absl::string_view piece = wire;
  ASSERT_TRUE(SplitRequest({&piece, 1}, &parts));
  EXPECT_EQ(parts.others, unknown + unknown);
  EXPECT_EQ(parts.data_size, 1000u);
}

TEST(SplitRequestTest, MalformedMessagesAreLeftToProtobufWhichRejectsThem) {
  const std::string data = Field(2, 2, Bytes(100, 5));
  const std::vector<std::string> malformed = {
      data.substr(0, data.size() - 1),         // data cut off
      data + "\x12",                            // a tag without its length
      data + "\x12\x80",                        // a length cut off
      data + "\x8a",                            // a tag cut off
      std::string("\x00\x01", 2) + data,        // field number 0
      data + "\x0e\x01",                        // wire type 6
      data + "\x0f\x01",                        // wire type 7
      data + "\x78" + std::string(10, '\xff') + "\x01",  // an 11-byte varint
      data + "\x79" + "1234567",                // a fixed64 cut off
      data + "\x7d" + "123",                    // a fixed32 cut off
      data + "\x0c",                            // an end-group at the top
      data + "\x12\xff\xff\xff\xff\x0f",        // a length of 2^32 - 1
  };
  for (size_t i = 0; i < malformed.size(); ++i) {
    SCOPED_TRACE(i);
    RequestParts parts;
    const absl::string_view piece = malformed[i];
    EXPECT_FALSE(SplitRequest({&piece, 1}, &parts));
    v1::ChunkRequest whole;
    EXPECT_FALSE(whole.ParseFromString(malformed[i]));
  }
}

TEST(SplitRequestTest, GroupsAreLeftToProtobuf) {
  // An unknown group (field 20) that protobuf accepts: SplitRequest does not
  // decide it, the service parses such a message whole.
  const std::string group = "\xa3\x01\x08\x01\xa4\x01";
  const std::string wire = group + Field(2, 2, "abc");
  RequestParts parts;
  const absl::string_view piece = wire;
  EXPECT_FALSE(SplitRequest({&piece, 1}, &parts));
  v1::ChunkRequest whole;
  EXPECT_TRUE(whole.ParseFromString(wire));
  EXPECT_EQ(whole.data(), "abc");
}

TEST(SplitRequestTest, BadParamsFailAsInTheWholeMessage) {
  // Params whose bytes are not a ChunkParams: the others do not parse.
  const std::string wire = Field(1, 2, "\xff") + Field(2, 2, "abc");
  EXPECT_TRUE(SplitsLikeProtobuf<v1::ChunkRequest>(wire, {2}));
  v1::ChunkRequest whole;
  EXPECT_FALSE(whole.ParseFromString(wire));
  // A namespace that is not UTF-8.
  const std::string ns = Field(1, 2, Field(3, 2, "\xc3\x28"));
  v1::DedupRequest dedup;
  EXPECT_FALSE(dedup.ParseFromString(ns));
  EXPECT_TRUE(SplitsLikeProtobuf<v1::DedupRequest>(ns, {}));
}

TEST(SplitRequestTest, EveryTruncationAndMutationAgreesWithProtobuf) {
  const std::string wire = Params() + Field(2, 2, Bytes(200, 6)) +
                           Field(30, 0, Varint(300)) + Field(2, 2, "tail");
  for (size_t n = 0; n <= wire.size(); ++n) {
    SCOPED_TRACE(n);
    SplitsLikeProtobuf<v1::ChunkRequest>(wire.substr(0, n), {n / 2});
  }
  std::mt19937_64 random(7);
  int split = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string mutated = wire;
    for (int k = 0; k < 3; ++k) {
      mutated[random() % mutated.size()] = static_cast<char>(random());
    }
    SCOPED_TRACE(i);
    split += SplitsLikeProtobuf<v1::ChunkRequest>(
        mutated, {static_cast<size_t>(random() % mutated.size())});
  }
  // Most mutations hit the data and still split (the check is not vacuous).
  EXPECT_GT(split, 1000);
}

TEST(CopyBytesTest, CopiesAnyRangeAcrossPieces) {
  const std::string wire = Bytes(100, 8);
  const std::vector<absl::string_view> pieces =
      Cut(wire, {0, 10, 10, 33, 99});
  for (size_t from = 0; from <= wire.size(); from += 7) {
    for (size_t size = 0; from + size <= wire.size(); size += 5) {
      std::string out = "x";
      CopyBytes(pieces, from, size, &out);
      EXPECT_EQ(out, "x" + wire.substr(from, size));
    }
  }
}

TEST(BufferPoolTest, ReusesGivenBuffersWithinItsBound) {
  constexpr size_t kSize = size_t{1} << 20;
  BufferPool pool(2 * kSize);
  std::string a = pool.Take(kSize);
  EXPECT_TRUE(a.empty());
  EXPECT_GE(a.capacity(), kSize);
  a.append(kSize, 'a');
  const char* storage = a.data();
  pool.Give(std::move(a));
  EXPECT_GE(pool.kept_bytes(), kSize);
  std::string b = pool.Take(kSize);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.data(), storage);  // the same pages
  EXPECT_EQ(pool.kept_bytes(), 0u);

  // At most max_bytes kept; small and moved-from buffers are not kept.
  std::string c = pool.Take(kSize), d = pool.Take(kSize);
  pool.Give(std::move(b));
  pool.Give(std::move(c));
  pool.Give(std::move(d));
  EXPECT_LE(pool.kept_bytes(), 2 * kSize);
  EXPECT_GE(pool.kept_bytes(), kSize);
  BufferPool small(2 * kSize);
  small.Give(std::string(100, 'x'));
  std::string moved = small.Take(kSize);
  std::string taken = std::move(moved);
  small.Give(std::move(moved));  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(small.kept_bytes(), 0u);
  // A kept buffer smaller than asked for grows.
  small.Give(std::move(taken));
  EXPECT_GE(small.Take(4 * kSize).capacity(), 4 * kSize);
  // Clear() frees what is kept.
  EXPECT_GT(pool.kept_bytes(), 0u);
  pool.Clear();
  EXPECT_EQ(pool.kept_bytes(), 0u);
}

}  // namespace
}  // namespace chunkd::service
