#include "metrics/metrics.h"

#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace chunkd::metrics {
namespace {

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

TEST(MetricsTest, FixedSeriesStartAtZero) {
  Metrics m("1.2.3", "avx2");
  const std::string text = Exposition(m);
  for (const char* rpc : {"Chunk", "Dedup", "Estimate"}) {
    for (const char* alg : {"fastcdc", "crc32", "seqcdc", "fixed", "repmaxcdc", "rabin", "buzhash"}) {
      const std::string labels =
          absl::StrCat("{algorithm=\"", alg, "\",rpc=\"", rpc, "\"} 0");
      EXPECT_TRUE(HasLine(text, "chunkd_ingest_bytes_total" + labels))
          << labels;
      EXPECT_TRUE(HasLine(text, "chunkd_chunks_total" + labels)) << labels;
    }
  }
  for (const char* alg : {"fastcdc", "crc32", "seqcdc", "fixed", "repmaxcdc", "rabin", "buzhash"}) {
    const std::string labels = absl::StrCat("{algorithm=\"", alg, "\"} 0");
    EXPECT_TRUE(HasLine(text, "chunkd_duplicate_bytes_total" + labels));
    EXPECT_TRUE(HasLine(text, "chunkd_duplicate_chunks_total" + labels));
  }
  for (const char* stage : kStages) {
    EXPECT_TRUE(HasLine(
        text,
        absl::StrCat("chunkd_stage_seconds_total{stage=\"", stage, "\"} 0")));
  }
  EXPECT_TRUE(HasLine(text, "chunkd_active_streams 0"));
  EXPECT_TRUE(HasLine(text, "chunkd_worker_queue_depth 0"));
  EXPECT_TRUE(
      HasLine(text, "chunkd_build_info{backend=\"avx2\",version=\"1.2.3\"} 1"));
}

TEST(MetricsTest, QueueDepthIsSampledAtScrape) {
  Metrics m("1", "scalar");
  size_t depth = 7;
  m.WatchQueueDepth([&depth] { return depth; });
  EXPECT_TRUE(HasLine(Exposition(m), "chunkd_worker_queue_depth 7"));
  depth = 3;
  EXPECT_TRUE(HasLine(Exposition(m), "chunkd_worker_queue_depth 3"));
  m.WatchQueueDepth(nullptr);
  EXPECT_TRUE(HasLine(Exposition(m), "chunkd_worker_queue_depth 3"));
}

TEST(MetricsTest, StreamMemoryIsSampledAtScrape) {
  Metrics m("1", "scalar");
  EXPECT_TRUE(
      HasLine(Exposition(m), "chunkd_stream_memory_bytes{state=\"reserved\"} 0"));
  EXPECT_TRUE(HasLine(Exposition(m), "chunkd_streams_waiting_for_memory 0"));
  StreamMemoryUse use;
  use.reserved = 300;
  use.waiting_bytes = 40;
  use.waiting_streams = 2;
  use.limit = 320;
  m.WatchStreamMemory([&use] { return use; });
  const std::string text = Exposition(m);
  EXPECT_TRUE(HasLine(text, "chunkd_stream_memory_bytes{state=\"reserved\"} 300"));
  EXPECT_TRUE(HasLine(text, "chunkd_stream_memory_bytes{state=\"waiting\"} 40"));
  EXPECT_TRUE(HasLine(text, "chunkd_stream_memory_bytes{state=\"limit\"} 320"));
  EXPECT_TRUE(HasLine(text, "chunkd_streams_waiting_for_memory 2"));
}

TEST(MetricsTest, IndexWaitsAreSampledAtScrape) {
  Metrics m("1", "scalar");
  EXPECT_FALSE(absl::StrContains(Exposition(m), "chunkd_index_wait"));
  std::optional<IndexWaits> waits;
  m.WatchIndexWaits([&waits] { return waits; });
  EXPECT_FALSE(absl::StrContains(Exposition(m), "chunkd_index_wait"))
      << "a memory index has none";
  waits = IndexWaits{2, 5, 1};
  std::string text = Exposition(m);
  EXPECT_TRUE(HasLine(text, "chunkd_index_waiting_calls 2")) << text;
  EXPECT_TRUE(HasLine(text, "chunkd_index_waits_total{result=\"recovered\"} 5"));
  EXPECT_TRUE(HasLine(text, "chunkd_index_waits_total{result=\"expired\"} 1"));
  waits = IndexWaits{0, 7, 1};
  text = Exposition(m);
  EXPECT_TRUE(HasLine(text, "chunkd_index_waiting_calls 0"));
  EXPECT_TRUE(HasLine(text, "chunkd_index_waits_total{result=\"recovered\"} 7"));
  EXPECT_TRUE(HasLine(text, "chunkd_index_waits_total{result=\"expired\"} 1"));
  m.WatchIndexWaits(nullptr);
}

TEST(MetricsTest, GrpcMethodHasEveryCodeAtZero) {
  Metrics m("1", "scalar");
  GrpcMethodMetrics g = m.ForGrpcMethod("unary", "a.B", "C");
  g.handled[3]->Increment();
  const std::string text = Exposition(m);
  const std::string base =
      "grpc_server_handled_total{grpc_code=\"%s\",grpc_method=\"C\","
      "grpc_service=\"a.B\",grpc_type=\"unary\"} ";
  for (int code = 0; code < 17; ++code) {
    std::string line = base;
    line.replace(line.find("%s"), 2, std::string(GrpcCodeLabel(code)));
    EXPECT_TRUE(HasLine(text, line + (code == 3 ? "1" : "0"))) << line;
  }
  EXPECT_TRUE(HasLine(text,
                      "grpc_server_started_total{grpc_method=\"C\","
                      "grpc_service=\"a.B\",grpc_type=\"unary\"} 0"));
  EXPECT_TRUE(HasLine(text,
                      "grpc_server_handling_seconds_count{grpc_method=\"C\","
                      "grpc_service=\"a.B\",grpc_type=\"unary\"} 0"));
}

TEST(MetricsTest, GrpcCodeLabelsAreGoNames) {
  EXPECT_EQ(GrpcCodeLabel(0), "OK");
  EXPECT_EQ(GrpcCodeLabel(1), "Canceled");
  EXPECT_EQ(GrpcCodeLabel(3), "InvalidArgument");
  EXPECT_EQ(GrpcCodeLabel(8), "ResourceExhausted");
  EXPECT_EQ(GrpcCodeLabel(14), "Unavailable");
  EXPECT_EQ(GrpcCodeLabel(16), "Unauthenticated");
  EXPECT_EQ(GrpcCodeLabel(17), "Unknown");
  EXPECT_EQ(GrpcCodeLabel(-1), "Unknown");
}

}  // namespace
}  // namespace chunkd::metrics
