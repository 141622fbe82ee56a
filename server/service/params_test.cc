#include "service/params.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::service {
namespace {

using ::testing::HasSubstr;

v1::ChunkingParams Params(v1::Algorithm algorithm) {
  v1::ChunkingParams p;
  p.set_algorithm(algorithm);
  return p;
}

TEST(ChunkerOptionsFromProtoTest, EveryAlgorithmAcceptsItsOwnFields) {
  v1::ChunkingParams fastcdc = Params(v1::ALGORITHM_FASTCDC);
  fastcdc.set_min_size(2048);
  fastcdc.set_avg_size(8192);
  fastcdc.set_max_size(32768);
  fastcdc.set_normalization_level(2);
  fastcdc.set_seed(666);
  EXPECT_TRUE(ChunkerOptionsFromProto(fastcdc).ok());

  v1::ChunkingParams crc32 = Params(v1::ALGORITHM_CRC32);
  crc32.set_min_size(2048);
  crc32.set_avg_size(8192);
  crc32.set_max_size(32768);
  EXPECT_TRUE(ChunkerOptionsFromProto(crc32).ok());

  v1::ChunkingParams seqcdc = Params(v1::ALGORITHM_SEQCDC);
  seqcdc.set_min_size(2048);
  seqcdc.set_max_size(8192);
  seqcdc.set_seq_mode(v1::SEQ_CDC_MODE_DECREASING);
  seqcdc.set_seq_length(4);
  seqcdc.set_skip_trigger(40);
  seqcdc.set_skip_size(256);
  EXPECT_TRUE(ChunkerOptionsFromProto(seqcdc).ok());

  v1::ChunkingParams fixed = Params(v1::ALGORITHM_FIXED);
  fixed.set_avg_size(4096);
  auto options = ChunkerOptionsFromProto(fixed);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->avg_size, 4096u);

  v1::ChunkingParams repmaxcdc = Params(v1::ALGORITHM_REP_MAX_CDC);
  repmaxcdc.set_min_size(4096);
  repmaxcdc.set_horizon_size(0);
  options = ChunkerOptionsFromProto(repmaxcdc);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->algorithm, chunking::Algorithm::kRepMaxCdc);
  EXPECT_EQ(options->horizon_size, 0u);

  v1::ChunkingParams rabin = Params(v1::ALGORITHM_RABIN);
  rabin.set_min_size(4096);
  rabin.set_avg_size(8192);
  rabin.set_max_size(32768);
  rabin.set_polynomial(0x3DA3358B4DC173);
  options = ChunkerOptionsFromProto(rabin);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->algorithm, chunking::Algorithm::kRabin);
  EXPECT_EQ(options->polynomial, uint64_t{0x3DA3358B4DC173});

  v1::ChunkingParams buzhash = Params(v1::ALGORITHM_BUZHASH);
  buzhash.set_min_size(48);
  buzhash.set_avg_size(64);
  buzhash.set_max_size(64);
  options = ChunkerOptionsFromProto(buzhash);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->algorithm, chunking::Algorithm::kBuzhash);
}

TEST(ChunkerOptionsFromProtoTest, EveryAlgorithmMapsBothWays) {
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    const v1::Algorithm proto = AlgorithmToProto(algorithm);
    EXPECT_NE(proto, v1::ALGORITHM_UNSPECIFIED);
    auto options = ChunkerOptionsFromProto(Params(proto));
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->algorithm, algorithm);
  }
}

TEST(ChunkerOptionsFromProtoTest, TheTableNumbersTheAlgorithmsAsTheProto) {
  // The library's numbers come from the table, the API's from chunkd.proto:
  // each row's value must be the proto enum value of the row's name.
  for (const chunking::tables::AlgorithmRow& row : chunking::tables::kAlgorithms) {
    v1::Algorithm proto = v1::ALGORITHM_UNSPECIFIED;
    ASSERT_TRUE(v1::Algorithm_Parse(row.proto_name, &proto))
        << row.proto_name << " is not in chunkd.proto";
    EXPECT_EQ(static_cast<int>(proto), static_cast<int>(row.algorithm))
        << row.name;
  }
  // And every value of the proto's enum is in the table.
  const google::protobuf::EnumDescriptor* e = v1::Algorithm_descriptor();
  EXPECT_EQ(e->value_count() - 1, chunking::kAlgorithmCount);
}

TEST(FillAlgorithmInfoTest, ListsExactlyTheParametersTheAlgorithmTakes) {
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    v1::AlgorithmInfo info;
    FillAlgorithmInfo(algorithm, &info);
    EXPECT_EQ(info.name(), chunking::AlgorithmName(algorithm));
    EXPECT_EQ(info.algorithm(), AlgorithmToProto(algorithm));
    const google::protobuf::Descriptor* d = v1::AlgorithmInfo::descriptor();
    const google::protobuf::Reflection* r = info.GetReflection();
    for (int i = 0; i < d->field_count(); ++i) {
      const google::protobuf::FieldDescriptor* field = d->field(i);
      if (field->message_type() != v1::ParamRange::descriptor()) continue;
      EXPECT_EQ(r->HasField(info, field),
                chunking::TakesParameter(algorithm, field->name()))
          << chunking::AlgorithmName(algorithm) << " " << field->name();
    }
  }
  // The case behind the rule: seqcdc keeps an average inside the library but
  // refuses avg_size from a caller, so GetServerInfo must not list it.
  v1::AlgorithmInfo seqcdc;
  FillAlgorithmInfo(chunking::Algorithm::kSeqCdc, &seqcdc);
  EXPECT_FALSE(seqcdc.has_avg_size());
  EXPECT_TRUE(seqcdc.has_min_size());
}

TEST(ChunkerOptionsFromProtoTest, UnknownAlgorithmListsTheKnownOnes) {
  auto options = ChunkerOptionsFromProto(Params(static_cast<v1::Algorithm>(99)));
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(options.status().message()),
              HasSubstr("algorithm 99 is unknown; use ALGORITHM_FASTCDC (1), "));
  EXPECT_THAT(std::string(options.status().message()),
              HasSubstr(" or ALGORITHM_BUZHASH (7)"));
}

TEST(ChunkerOptionsFromProtoTest, RabinPolynomialOfAnotherDegreeIsRefused) {
  v1::ChunkingParams rabin = Params(v1::ALGORITHM_RABIN);
  rabin.set_polynomial(0x11B);  // irreducible, degree 8
  auto options = ChunkerOptionsFromProto(rabin);
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(std::string(options.status().message()),
              HasSubstr("polynomial 0x11b does not have degree 53"));
}

struct Case {
  v1::Algorithm algorithm;
  void (*set)(v1::ChunkingParams*);
  const char* field;
};

TEST(ChunkerOptionsFromProtoTest, FieldsOfAnotherAlgorithmAreRefused) {
  const Case cases[] = {
      {v1::ALGORITHM_CRC32,
       [](v1::ChunkingParams* p) { p->set_normalization_level(2); },
       "normalization_level"},
      {v1::ALGORITHM_CRC32, [](v1::ChunkingParams* p) { p->set_seed(1); },
       "seed"},
      {v1::ALGORITHM_FASTCDC,
       [](v1::ChunkingParams* p) { p->set_seq_length(5); }, "seq_length"},
      {v1::ALGORITHM_UNSPECIFIED,
       [](v1::ChunkingParams* p) {
         p->set_seq_mode(v1::SEQ_CDC_MODE_INCREASING);
       },
       "seq_mode"},
      {v1::ALGORITHM_SEQCDC,
       [](v1::ChunkingParams* p) { p->set_avg_size(8192); }, "avg_size"},
      {v1::ALGORITHM_SEQCDC,
       [](v1::ChunkingParams* p) { p->set_normalization_level(0); },
       "normalization_level"},
      {v1::ALGORITHM_FIXED,
       [](v1::ChunkingParams* p) { p->set_min_size(8192); }, "min_size"},
      {v1::ALGORITHM_FIXED,
       [](v1::ChunkingParams* p) { p->set_max_size(8192); }, "max_size"},
      {v1::ALGORITHM_FIXED,
       [](v1::ChunkingParams* p) { p->set_skip_size(0); }, "skip_size"},
      {v1::ALGORITHM_FASTCDC,
       [](v1::ChunkingParams* p) { p->set_horizon_size(0); }, "horizon_size"},
      {v1::ALGORITHM_BUZHASH,
       [](v1::ChunkingParams* p) { p->set_polynomial(0x3DA3358B4DC173); },
       "polynomial"},
      {v1::ALGORITHM_REP_MAX_CDC,
       [](v1::ChunkingParams* p) { p->set_avg_size(8192); }, "avg_size"},
      {v1::ALGORITHM_REP_MAX_CDC,
       [](v1::ChunkingParams* p) { p->set_max_size(8192); }, "max_size"},
  };
  for (const Case& c : cases) {
    v1::ChunkingParams p = Params(c.algorithm);
    c.set(&p);
    auto options = ChunkerOptionsFromProto(p);
    ASSERT_FALSE(options.ok()) << c.field;
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(options.status().message());
    EXPECT_THAT(message, HasSubstr(std::string("chunking.") + c.field +
                                   " is not a parameter of "))
        << message;
    EXPECT_THAT(message, HasSubstr("leave")) << message;
  }
}

TEST(ChunkerOptionsFromProtoTest, MessageListsWhatTheAlgorithmTakes) {
  v1::ChunkingParams p = Params(v1::ALGORITHM_FIXED);
  p.set_avg_size(4096);
  p.set_min_size(8192);  // the "min_size above avg_size" mistake
  auto options = ChunkerOptionsFromProto(p);
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().message(),
            "chunking.min_size is not a parameter of fixed (it takes "
            "avg_size); leave min_size unset");
}

TEST(ChunkerOptionsFromProtoTest, EveryApiFieldIsAKnownParameter) {
  // A field added to ChunkingParams must be added to the parameter table
  // too, or no algorithm would be checked for it.
  const google::protobuf::Descriptor* d = v1::ChunkingParams::descriptor();
  std::vector<std::string> fields;
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->name() != "algorithm") fields.push_back(d->field(i)->name());
  }
  std::vector<std::string> known(chunking::AllParameters().begin(),
                                 chunking::AllParameters().end());
  EXPECT_EQ(fields, known);
  // And each is refused by some algorithm when set.
  for (const std::string& field : fields) {
    bool refused_somewhere = false;
    for (chunking::Algorithm a : chunking::AllAlgorithms()) {
      refused_somewhere |= !chunking::TakesParameter(a, field);
    }
    EXPECT_TRUE(refused_somewhere) << field;
  }
}

TEST(ChunkerOptionsFromProtoTest, ZeroSeedAndUnsetModeCountAsUnset) {
  v1::ChunkingParams p = Params(v1::ALGORITHM_CRC32);
  p.set_seed(0);
  p.set_seq_mode(v1::SEQ_CDC_MODE_UNSPECIFIED);
  EXPECT_TRUE(ChunkerOptionsFromProto(p).ok());
}

}  // namespace
}  // namespace chunkd::service
