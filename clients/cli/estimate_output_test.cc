#include "clients/cli/estimate_output.h"

#include <string>
#include <vector>

#include "clients/cli/json_output.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::HasSubstr;

std::vector<estimate::IndexCostEstimate> Costs(uint64_t entries,
                                               uint64_t memory,
                                               uint64_t rocksdb,
                                               uint64_t redis) {
  return {{"memory", "memory", entries, memory},
          {"rocksdb", "disk", entries, rocksdb},
          {"redis", "memory", entries, redis}};
}

// Two sets sampled 1 in 64 against a namespace: one with an interval, one
// without. The figures need not be consistent, only distinct.
EstimateReport SampleReport() {
  EstimateReport report;
  EstimateSetReport a;
  a.result.label = "fastcdc:avg=16384";
  a.result.options = chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  a.result.options.avg_size = 16384;
  a.result.bytes = 1000000;
  a.result.chunks = 61;
  a.result.unique_chunks = 2560;
  a.result.unique_bytes = 650000;
  a.result.dedup_ratio = 1.5384615;
  a.result.histogram = {{4096, 10, 50000}, {8192, 51, 950000}};
  a.result.mean_chunk_size = 16393.44262;
  a.result.min_chunk_size = 4096;
  a.result.p50_chunk_size = 15000;
  a.result.p90_chunk_size = 30000;
  a.result.p99_chunk_size = 60000;
  a.result.max_chunk_size = 65536;
  a.result.sampled = true;
  a.result.sampled_unique_chunks = 40;
  a.result.has_interval = true;
  a.result.ratio_low = 1.2;
  a.result.ratio_high = 1.9499999;
  a.result.index_costs = Costs(2560, 125440, 95232, 192000);
  a.namespace_bytes = 4096;
  a.namespace_chunks = 1;
  EstimateSetReport b;
  b.result.label = "fixed";
  b.result.options = chunking::DefaultOptions(chunking::Algorithm::kFixed);
  b.result.bytes = 1000000;
  b.result.chunks = 62;
  b.result.unique_chunks = 64;
  b.result.unique_bytes = 1048576;
  b.result.dedup_ratio = 1.0;
  b.result.histogram = {{8192, 1, 576}, {16384, 61, 999424}};
  b.result.mean_chunk_size = 16129.032;
  b.result.min_chunk_size = 576;
  b.result.p50_chunk_size = 16384;
  b.result.p90_chunk_size = 16384;
  b.result.p99_chunk_size = 16384;
  b.result.max_chunk_size = 16384;
  b.result.sampled = true;
  b.result.sampled_unique_chunks = 1;
  b.result.index_costs = Costs(64, 3136, 2381, 4800);
  b.namespace_bytes = 0;
  b.namespace_chunks = 0;
  report.sets = {a, b};
  report.total_bytes = 2000000;
  report.files = 3;
  report.sample_rate = 64;
  report.fingerprint = fingerprint::Kind::kSha256;
  report.with_namespace = true;
  return report;
}

constexpr char kSampleText[] =
    "set                  bytes  chunks  unique_chunks  unique_bytes  "
    "dedup_ratio  ratio_interval  mean_size    p50    p90    p99  "
    "namespace_bytes\n"
    "fastcdc:avg=16384  1000000      61           2560        650000        "
    "1.538     1.200-1.950      16393  15000  30000  60000             "
    "4096\n"
    "fixed              1000000      62             64       1048576        "
    "1.000               -      16129  16384  16384  16384                "
    "0\n"
    "\n"
    "set                index_entries  memory_bytes  rocksdb_disk_bytes  "
    "redis_memory_bytes\n"
    "fastcdc:avg=16384           2560        125440               95232      "
    "        192000\n"
    "fixed                         64          3136                2381      "
    "          4800\n"
    "\n"
    "2000000 bytes in 3 files; sample 1 in 64; fingerprint sha256\n";

constexpr char kSampleJson[] =
    R"({"sets": [{"set": "fastcdc:avg=16384", "algorithm": "fastcdc", )"
    R"("parameters": {"min_size": 4096, "avg_size": 16384, "max_size": 65536, )"
    R"("normalization_level": 1, "seed": 0}, "bytes": 1000000, "chunks": 61, )"
    R"("unique_bytes": 650000, "unique_chunks": 2560, "dedup_ratio": 1.538461, )"
    R"("ratio_interval": [1.2, 1.95], "sampled": true, )"
    R"("sampled_unique_chunks": 40, "histogram": [[4096, 10], [8192, 51]], )"
    R"("histogram_bytes": [[4096, 50000], [8192, 950000]], )"
    R"("mean_chunk_size": 16393.44262, "chunk_sizes": {"min": 4096, )"
    R"("p50": 15000, "p90": 30000, "p99": 60000, "max": 65536}, )"
    R"("namespace_bytes": 4096, "namespace_chunks": 1, "index": [)"
    R"({"backend": "memory", "medium": "memory", "entries": 2560, )"
    R"("bytes": 125440}, {"backend": "rocksdb", "medium": "disk", )"
    R"("entries": 2560, "bytes": 95232}, {"backend": "redis", )"
    R"("medium": "memory", "entries": 2560, "bytes": 192000}]}, )"
    R"({"set": "fixed", "algorithm": "fixed", "parameters": {"avg_size": )"
    R"(16384}, "bytes": 1000000, "chunks": 62, "unique_bytes": 1048576, )"
    R"("unique_chunks": 64, "dedup_ratio": 1.0, "ratio_interval": null, )"
    R"("sampled": true, "sampled_unique_chunks": 1, "histogram": [[8192, 1], )"
    R"([16384, 61]], "histogram_bytes": [[8192, 576], [16384, 999424]], )"
    R"("mean_chunk_size": 16129.032, "chunk_sizes": {"min": 576, "p50": )"
    R"(16384, "p90": 16384, "p99": 16384, "max": 16384}, )"
    R"("namespace_bytes": 0, "namespace_chunks": 0, "index": [{"backend": )"
    R"("memory", "medium": "memory", "entries": 64, "bytes": 3136}, )"
    R"({"backend": "rocksdb", "medium": "disk", "entries": 64, "bytes": )"
    R"(2381}, {"backend": "redis", "medium": "memory", "entries": 64, )"
    R"("bytes": 4800}]}], "total_bytes": 2000000, "files": 3, )"
    R"("sample_rate": 64, "fingerprint": "sha256"})"
    "\n";

TEST(EstimateTextTest, TablesAndTotalLineByteForByte) {
  EXPECT_EQ(EstimateText(SampleReport()), kSampleText);
}

TEST(EstimateTextTest, NoNamespaceColumnWithoutANamespace) {
  EstimateReport report = SampleReport();
  report.with_namespace = false;
  report.sets.resize(1);
  report.sets[0].result.has_interval = false;
  report.sample_rate = 1;
  report.fingerprint = fingerprint::Kind::kXxh128;
  EXPECT_EQ(EstimateText(report),
            "set                  bytes  chunks  unique_chunks  unique_bytes  "
            "dedup_ratio  ratio_interval  mean_size    p50    p90    p99\n"
            "fastcdc:avg=16384  1000000      61           2560        650000  "
            "      1.538               -      16393  15000  30000  60000\n"
            "\n"
            "set                index_entries  memory_bytes  "
            "rocksdb_disk_bytes  redis_memory_bytes\n"
            "fastcdc:avg=16384           2560        125440               "
            "95232              192000\n"
            "\n"
            "2000000 bytes in 3 files; sample 1 in 1; fingerprint xxh128\n");
}

TEST(EstimateJsonTest, KeysInOrderAndFloatsRoundedToSixDecimals) {
  EXPECT_EQ(EstimateJson(SampleReport()), kSampleJson);
}

TEST(EstimateJsonTest, SeqModeByNameAndNullsWithoutANamespace) {
  EstimateReport report = SampleReport();
  report.sets.resize(1);
  report.sets[0].result.options =
      chunking::DefaultOptions(chunking::Algorithm::kSeqCdc);
  report.sets[0].result.options.seq_mode = chunking::SeqMode::kDecreasing;
  report.sets[0].namespace_bytes.reset();
  report.sets[0].namespace_chunks.reset();
  const std::string json = EstimateJson(report);
  EXPECT_THAT(json, HasSubstr(R"("algorithm": "seqcdc", "parameters": {)"
                              R"("min_size": 8192, "max_size": 32768, )"
                              R"("seq_mode": "decreasing", "seq_length": 5, )"
                              R"("skip_trigger": 50, "skip_size": 512})"));
  EXPECT_THAT(json, HasSubstr(R"("namespace_bytes": null, )"
                              R"("namespace_chunks": null)"));
}

TEST(JsonNumberTest, RoundsAndTrims) {
  EXPECT_EQ(JsonNumber(0), "0.0");
  EXPECT_EQ(JsonNumber(2), "2.0");
  EXPECT_EQ(JsonNumber(1.0 / 3), "0.333333");
  EXPECT_EQ(JsonNumber(2.0 / 3), "0.666667");
  EXPECT_EQ(JsonNumber(16384.5), "16384.5");
  EXPECT_EQ(JsonNumber(1.23456749), "1.234567");
}

// The server's result as the same report prints the same bytes.
TEST(ReportFromProtoTest, PrintsWhatTheLocalReportPrints) {
  const EstimateReport local = SampleReport();
  chunkd::v1::EstimateResult proto;
  for (const EstimateSetReport& set : local.sets) {
    const estimate::SetResult& r = set.result;
    chunkd::v1::SetEstimate* s = proto.add_sets();
    s->set_label(r.label);
    chunkd::v1::ChunkingParams* p = s->mutable_chunking();
    p->set_algorithm(static_cast<chunkd::v1::Algorithm>(r.options.algorithm));
    p->set_avg_size(r.options.avg_size);  // the rest left to the defaults
    s->set_bytes(r.bytes);
    s->set_chunks(r.chunks);
    s->set_unique_chunks(r.unique_chunks);
    s->set_unique_bytes(r.unique_bytes);
    s->set_dedup_ratio(r.dedup_ratio);
    for (const estimate::SizeBucket& b : r.histogram) {
      chunkd::v1::SizeBucket* bucket = s->add_histogram();
      bucket->set_lower_bound(b.lower_bound);
      bucket->set_chunks(b.chunks);
      bucket->set_bytes(b.bytes);
    }
    s->set_mean_chunk_size(r.mean_chunk_size);
    s->set_min_chunk_size(r.min_chunk_size);
    s->set_p50_chunk_size(r.p50_chunk_size);
    s->set_p90_chunk_size(r.p90_chunk_size);
    s->set_p99_chunk_size(r.p99_chunk_size);
    s->set_max_chunk_size(r.max_chunk_size);
    s->set_sampled(r.sampled);
    s->set_sampled_unique_chunks(r.sampled_unique_chunks);
    if (r.has_interval) {
      s->set_ratio_low(r.ratio_low);
      s->set_ratio_high(r.ratio_high);
    }
    s->set_namespace_bytes(*set.namespace_bytes);
    s->set_namespace_chunks(*set.namespace_chunks);
    for (const estimate::IndexCostEstimate& c : r.index_costs) {
      chunkd::v1::IndexCost* cost = s->add_index_costs();
      cost->set_backend(c.backend);
      cost->set_medium(c.medium);
      cost->set_entries(c.entries);
      cost->set_bytes(c.bytes);
    }
  }
  proto.set_total_bytes(local.total_bytes);
  proto.set_files(local.files);
  proto.set_sample_rate(local.sample_rate);
  proto.set_fingerprint(chunkd::v1::FINGERPRINT_ALGORITHM_SHA256);
  absl::StatusOr<EstimateReport> remote = ReportFromProto(proto, true);
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ(EstimateText(*remote), kSampleText);
  EXPECT_EQ(EstimateJson(*remote), kSampleJson);

  proto.set_fingerprint(chunkd::v1::FINGERPRINT_ALGORITHM_NONE);
  absl::StatusOr<EstimateReport> bad = ReportFromProto(proto, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("protocol error"));
  EXPECT_THAT(bad.status().message(), HasSubstr("fingerprint none"));
}

TEST(OptionsFromProtoTest, UnsetFieldsTakeTheDefaults) {
  chunkd::v1::ChunkingParams p;
  p.set_algorithm(chunkd::v1::ALGORITHM_RABIN);
  p.set_min_size(1 << 20);
  absl::StatusOr<chunking::ChunkerOptions> o = OptionsFromProto(p);
  ASSERT_TRUE(o.ok()) << o.status();
  const chunking::ChunkerOptions d =
      chunking::DefaultOptions(chunking::Algorithm::kRabin);
  EXPECT_EQ(o->algorithm, chunking::Algorithm::kRabin);
  EXPECT_EQ(o->min_size, 1u << 20);
  EXPECT_EQ(o->max_size, d.max_size);
  EXPECT_EQ(o->polynomial, d.polynomial);
  p.set_algorithm(static_cast<chunkd::v1::Algorithm>(99));
  EXPECT_FALSE(OptionsFromProto(p).ok());
}

}  // namespace
}  // namespace chunkd::cli
