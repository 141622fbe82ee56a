#include "clients/cli/json_output.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::HasSubstr;

TEST(JsonStringTest, EscapesWhatJsonRequires) {
  EXPECT_EQ(JsonString("a.img"), "\"a.img\"");
  EXPECT_EQ(JsonString("say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
  EXPECT_EQ(JsonString("a\nb\tc\rd"), "\"a\\nb\\tc\\rd\"");
  EXPECT_EQ(JsonString(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonString(std::string("\0", 1)), "\"\\u0000\"");
}

TEST(JsonStringTest, KeepsUtf8AndReplacesOtherBytes) {
  EXPECT_EQ(JsonString("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  // A Latin-1 name, a stray continuation byte, a truncated sequence, an
  // overlong '/', a surrogate.
  EXPECT_EQ(JsonString("caf\xe9"), "\"caf\\ufffd\"");
  EXPECT_EQ(JsonString("\x80x"), "\"\\ufffdx\"");
  EXPECT_EQ(JsonString("\xe2\x82"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(JsonString("\xc0\xaf"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(JsonString("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
}

TEST(JsonRatioTest, SixDecimalsAtMostAndNullWithoutUniqueBytes) {
  EXPECT_EQ(JsonRatio(10, 0), "null");
  EXPECT_EQ(JsonRatio(0, 0), "null");
  EXPECT_EQ(JsonRatio(10, 10), "1.0");
  EXPECT_EQ(JsonRatio(20, 10), "2.0");
  EXPECT_EQ(JsonRatio(3, 2), "1.5");
  EXPECT_EQ(JsonRatio(4, 3), "1.333333");
  EXPECT_EQ(JsonRatio(5, 3), "1.666667");
  EXPECT_EQ(JsonRatio(218932, 109466), "2.0");
  EXPECT_EQ(JsonRatio(1, 3), "0.333333");
}

TEST(DedupJsonLineTest, FileAndTotalLinesHaveEveryKey) {
  DedupTotals file;
  file.bytes = 300;
  file.unique_bytes = 100;
  file.chunks = 3;
  file.unique_chunks = 1;
  file.hints_tried = 4;
  file.hints_accepted = 3;
  file.hints_rejected = 1;
  file.hint_skipped_bytes = 77;
  DedupTotals running = file;
  running.bytes = 400;
  EXPECT_EQ(DedupJsonLine("dir/a \"b\".img", file, running),
            "{\"file\":\"dir/a \\\"b\\\".img\",\"bytes\":300,"
            "\"unique_bytes\":100,\"chunks\":3,\"unique_chunks\":1,"
            "\"ratio\":4.0,\"hints_tried\":4,\"hints_accepted\":3,"
            "\"hints_rejected\":1,\"hint_skipped_bytes\":77}");
  EXPECT_EQ(DedupJsonLine(std::nullopt, DedupTotals(), DedupTotals()),
            "{\"total\":true,\"bytes\":0,\"unique_bytes\":0,\"chunks\":0,"
            "\"unique_chunks\":0,\"ratio\":null,\"hints_tried\":0,"
            "\"hints_accepted\":0,\"hints_rejected\":0,"
            "\"hint_skipped_bytes\":0}");
}

chunkd::v1::ParamRange Range(uint64_t min, uint64_t max, uint64_t value) {
  chunkd::v1::ParamRange range;
  range.set_min(min);
  range.set_max(max);
  range.set_default_value(value);
  return range;
}

TEST(ServerInfoJsonTest, TheShapeOfTheContract) {
  chunkd::v1::GetServerInfoResponse info;
  info.set_version("0.3.0");
  info.set_chunking_backend("auto");
  info.set_index_backend("memory");
  info.set_max_message_bytes(4194304);
  info.set_max_inflight_bytes(268435456);
  info.add_fingerprints(chunkd::v1::FINGERPRINT_ALGORITHM_SHA256);
  info.add_fingerprints(chunkd::v1::FINGERPRINT_ALGORITHM_NONE);
  chunkd::v1::AlgorithmInfo* fastcdc = info.add_algorithms();
  fastcdc->set_algorithm(chunkd::v1::ALGORITHM_FASTCDC);
  fastcdc->set_name("fastcdc");
  fastcdc->set_backend("avx2");
  fastcdc->set_backend_threads(2);
  *fastcdc->mutable_min_size() = Range(64, 1048576, 2048);
  *fastcdc->mutable_avg_size() = Range(256, 4194304, 8192);
  *fastcdc->mutable_max_size() = Range(1024, 16777216, 65536);
  fastcdc->set_avg_size_power_of_two(true);
  *fastcdc->mutable_normalization_level() = Range(0, 3, 1);
  chunkd::v1::AlgorithmInfo* rabin = info.add_algorithms();
  rabin->set_name("rabin");
  rabin->set_backend("scalar");
  *rabin->mutable_polynomial() =
      Range(1ull << 53, (1ull << 54) - 1, 0x3DA3358B4DC173);
  EXPECT_EQ(
      ServerInfoJson(info),
      "{\n"
      "  \"version\": \"0.3.0\",\n"
      "  \"chunking_backend\": \"auto\",\n"
      "  \"index_backend\": \"memory\",\n"
      "  \"max_message_bytes\": 4194304,\n"
      "  \"max_inflight_bytes\": 268435456,\n"
      "  \"fingerprints\": [\"sha256\", \"none\"],\n"
      "  \"algorithms\": [\n"
      "    {\"name\":\"fastcdc\",\"backend\":\"avx2\",\"backend_threads\":2,"
      "\"min_size\":{\"min\":64,\"max\":1048576,\"default\":2048},"
      "\"avg_size\":{\"min\":256,\"max\":4194304,\"default\":8192},"
      "\"max_size\":{\"min\":1024,\"max\":16777216,\"default\":65536},"
      "\"avg_size_power_of_two\":true,"
      "\"normalization_level\":{\"min\":0,\"max\":3,\"default\":1},"
      "\"horizon_size\":null,\"polynomial\":null},\n"
      "    {\"name\":\"rabin\",\"backend\":\"scalar\",\"backend_threads\":0,"
      "\"min_size\":{\"min\":0,\"max\":0,\"default\":0},"
      "\"avg_size\":{\"min\":0,\"max\":0,\"default\":0},"
      "\"max_size\":{\"min\":0,\"max\":0,\"default\":0},"
      "\"avg_size_power_of_two\":false,\"normalization_level\":null,"
      "\"horizon_size\":null,\"polynomial\":{\"min\":9007199254740992,"
      "\"max\":18014398509481983,\"default\":17349423945073011}}\n"
      "  ]\n"
      "}\n");
  EXPECT_THAT(ServerInfoJson(chunkd::v1::GetServerInfoResponse()),
              HasSubstr("\"fingerprints\": [],\n  \"algorithms\": []\n}\n"));
}

}  // namespace
}  // namespace chunkd::cli
