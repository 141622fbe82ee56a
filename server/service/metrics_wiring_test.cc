#include "service/grpc_metrics.h"
#include "service/instrumented_index.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chunkd/chunker.h"
#include "gtest/gtest.h"
#include "index/fingerprint_index.h"
#include "metrics/metrics.h"
#include "prometheus/text_serializer.h"
#include "service/down_index_for_tests.h"

namespace chunkd::service {
namespace {

using metrics::IndexOpMetrics;
using metrics::Metrics;

std::string Exposition(Metrics& m) {
  m.Refresh();
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, m.registry()->Collect());
  return out.str();
}

// True when the exposition has the sample line `line` exactly.
bool HasLine(const std::string& text, const std::string& line) {
  return absl::StrContains(absl::StrCat("\n", text),
                           absl::StrCat("\n", line, "\n"));
}

// The metrics library lists the algorithm label values itself (it does not
// depend on the chunking library): every algorithm's series must exist.
TEST(MetricsWiringTest, EveryAlgorithmHasItsSeries) {
  Metrics m("1.2.3", "avx2");
  const std::string text = Exposition(m);
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    const std::string labels =
        absl::StrCat("{algorithm=\"", chunking::AlgorithmName(algorithm),
                     "\",rpc=\"Chunk\"} 0");
    EXPECT_TRUE(absl::StrContains(text, "chunkd_chunks_total" + labels))
        << labels;
  }
}

TEST(GrpcMetricsTest, UnknownServiceIsAnError) {
  Metrics m("1", "scalar");
  auto f = GrpcMetricsInterceptorFactory::Create(&m, {"no.such.Service"});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(f.status().message(), "no.such.Service"));
}

TEST(GrpcMetricsTest, HealthMethodsStartAtZero) {
  Metrics m("1", "scalar");
  auto f = GrpcMetricsInterceptorFactory::Create(&m, {"grpc.health.v1.Health"});
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = Exposition(m);
  EXPECT_TRUE(HasLine(text,
                      "grpc_server_started_total{grpc_method=\"Check\","
                      "grpc_service=\"grpc.health.v1.Health\","
                      "grpc_type=\"unary\"} 0"));
  EXPECT_TRUE(HasLine(text,
                      "grpc_server_started_total{grpc_method=\"Watch\","
                      "grpc_service=\"grpc.health.v1.Health\","
                      "grpc_type=\"server_stream\"} 0"));
}

double Requests(Metrics& m, const std::string& backend, const std::string& op,
                const std::string& result) {
  const IndexOpMetrics series = m.ForIndexOp(backend, op);
  return (result == "ok" ? series.ok : series.error)->Value();
}

TEST(InstrumentedIndexTest, CountsAndTimesEveryCallOfTheMemoryIndex) {
  Metrics m("1", "scalar");
  auto memory = index::CreateIndex("memory");
  ASSERT_TRUE(memory.ok());
  InstrumentedIndex idx(*std::move(memory), &m);
  EXPECT_EQ(idx.backend(), "memory");
  const std::string text = Exposition(m);
  for (const char* op : kIndexOps) {
    for (const char* result : {"ok", "error"}) {
      EXPECT_TRUE(HasLine(
          text,
          absl::StrCat("chunkd_index_requests_total{backend=\"memory\",op=\"",
                       op, "\",result=\"", result, "\"} 0")));
    }
    EXPECT_TRUE(HasLine(
        text, absl::StrCat("chunkd_index_request_duration_seconds_count{"
                           "backend=\"memory\",op=\"",
                           op, "\"} 0")));
  }

  const std::string fp(32, 'a');
  auto inserted = idx.Insert("ns", {index::InsertEntry{fp, 100}});
  ASSERT_TRUE(inserted.ok());
  EXPECT_TRUE((*inserted)[0].is_new);
  auto found = idx.Lookup("ns", {fp, std::string(32, 'b')});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, (std::vector<bool>{true, false}));
  ASSERT_TRUE(idx.RecordNextSizes("ns", "k", {index::NextSize{fp, 5}}).ok());
  auto sizes = idx.NextSizes("ns", "k", {fp});
  ASSERT_TRUE(sizes.ok());
  EXPECT_EQ((*sizes)[0], (std::vector<uint32_t>{5}));
  ASSERT_TRUE(idx.Release("ns", {fp}).ok());
  ASSERT_TRUE(idx.Health().ok());
  // Bad input is an error of the call, and counted as one.
  EXPECT_FALSE(idx.Lookup("bad namespace!", {fp}).ok());

  EXPECT_EQ(Requests(m, "memory", "insert", "ok"), 1);
  EXPECT_EQ(Requests(m, "memory", "lookup", "ok"), 1);
  EXPECT_EQ(Requests(m, "memory", "lookup", "error"), 1);
  EXPECT_EQ(Requests(m, "memory", "hints", "ok"), 2);
  EXPECT_EQ(Requests(m, "memory", "release", "ok"), 1);
  EXPECT_EQ(Requests(m, "memory", "health", "ok"), 1);
  EXPECT_EQ(Requests(m, "memory", "insert", "error"), 0);
  EXPECT_TRUE(HasLine(Exposition(m),
                      "chunkd_index_request_duration_seconds_count{"
                      "backend=\"memory\",op=\"lookup\"} 2"));
}

TEST(InstrumentedIndexTest, CountsErrorsAndPassesThemThrough) {
  Metrics m("1", "scalar");
  InstrumentedIndex idx(std::make_unique<DownIndex>(), &m);
  const std::string fp(32, 'a');
  EXPECT_EQ(idx.Health().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(idx.Lookup("ns", {fp}).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(idx.Insert("ns", {index::InsertEntry{fp, 1}}).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(idx.Release("ns", {fp}).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(idx.NextSizes("ns", "k", {fp}).status().code(),
            absl::StatusCode::kUnavailable);
  for (const char* op : kIndexOps) {
    EXPECT_EQ(Requests(m, "down", op, "error"), 1) << op;
    EXPECT_EQ(Requests(m, "down", op, "ok"), 0) << op;
  }
}

}  // namespace
}  // namespace chunkd::service
