// The Estimate stream end to end in process: a real service on loopback
// (service_test_server.h) and a generated stub as the client. The result
// is the Estimator's on the same bytes, however the client splits them;
// every parameter error and the entry limit reach the client; a namespace
// is read and never written; the stream is counted with rpc="Estimate".

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chunkd/chunker.h"
#include "estimate/estimator.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "service/auth.h"
#include "service/down_index_for_tests.h"
#include "service/estimate_params.h"
#include "service/estimate_work.h"
#include "service/instrumented_index.h"
#include "service/memory_plan.h"
#include "service/memory_budget.h"
#include "service/service_test_server.h"

namespace chunkd::service {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
using EstimateStream =
    grpc::ClientReaderWriter<v1::EstimateRequest, v1::EstimateResponse>;
using DedupStream =
    grpc::ClientReaderWriter<v1::DedupRequest, v1::DedupResponse>;

std::string RandomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

// A small data set with duplicates within and across files: a base file,
// an edited version of it, and one that starts with the base's first part.
std::vector<std::string> DataSet() {
  const std::string base = RandomBytes(3 * kMiB / 2, 1);
  std::string edited = base;
  edited.replace(200000, 5000, RandomBytes(7000, 2));
  edited.insert(900000, RandomBytes(3000, 3));
  const std::string mixed = base.substr(0, 400000) + RandomBytes(300000, 4);
  return {base, edited, mixed};
}

v1::EstimateSet* AddSet(v1::EstimateParams* params, const std::string& label,
                        v1::Algorithm algorithm) {
  v1::EstimateSet* set = params->add_sets();
  set->set_label(label);
  set->mutable_chunking()->set_algorithm(algorithm);
  return set;
}

void AddFastCdc(v1::EstimateParams* params, const std::string& label,
                uint32_t min, uint32_t avg, uint32_t max) {
  v1::ChunkingParams* c =
      AddSet(params, label, v1::ALGORITHM_FASTCDC)->mutable_chunking();
  c->set_min_size(min);
  c->set_avg_size(avg);
  c->set_max_size(max);
}

// fastcdc at two sizes, fixed, seqcdc and crc32.
v1::EstimateParams SeveralSets() {
  v1::EstimateParams p;
  AddFastCdc(&p, "fastcdc:avg=4096", 1024, 4096, 16384);
  AddSet(&p, "fastcdc", v1::ALGORITHM_FASTCDC);
  AddSet(&p, "fixed:avg=8192", v1::ALGORITHM_FIXED)
      ->mutable_chunking()
      ->set_avg_size(8192);
  AddSet(&p, "seqcdc", v1::ALGORITHM_SEQCDC);
  AddSet(&p, "crc32", v1::ALGORITHM_CRC32);
  return p;
}

// What the client got from one Estimate stream.
struct Outcome {
  grpc::Status status;
  std::vector<v1::EstimateProgress> progress;
  std::vector<v1::EstimateResult> results;
  bool result_last = true;  // nothing came after a result
};

// Sends `files` in messages of at most `piece` bytes, each file's last
// ended by end_of_file, params in the first message; then half-closes and
// reads every response.
Outcome RunEstimate(TestServer* server, const v1::EstimateParams& params,
                    const std::vector<std::string>& files, size_t piece,
                    const std::string& token = "") {
  auto context = TestServer::Context(token);
  std::unique_ptr<EstimateStream> stream =
      server->stub().Estimate(context.get());
  bool first = true;
  bool writing = true;
  for (const std::string& file : files) {
    for (size_t at = 0; writing && (at < file.size() || at == 0);
         at += piece) {
      v1::EstimateRequest request;
      if (first) *request.mutable_params() = params;
      first = false;
      request.set_data(file.substr(at, piece));
      request.set_end_of_file(at + piece >= file.size());
      writing = stream->Write(request);
    }
  }
  if (first && writing) {
    v1::EstimateRequest request;
    *request.mutable_params() = params;
    stream->Write(request);
  }
  stream->WritesDone();
  Outcome out;
  v1::EstimateResponse response;
  while (stream->Read(&response)) {
    if (!out.results.empty()) out.result_last = false;
    if (response.has_progress()) out.progress.push_back(response.progress());
    if (response.has_result()) out.results.push_back(response.result());
  }
  out.status = stream->Finish();
  return out;
}

// The Estimator run directly on `files` with `params`.
std::vector<estimate::SetResult> Direct(const v1::EstimateParams& params,
                                        const std::vector<std::string>& files) {
  auto options =
      EstimatorOptionsFromProto(params, chunking::EngineOptions(), 0);
  EXPECT_TRUE(options.ok()) << options.status();
  auto estimator = estimate::Estimator::Create(*options);
  EXPECT_TRUE(estimator.ok()) << estimator.status();
  for (const std::string& file : files) {
    EXPECT_TRUE((*estimator)->Append(file).ok());
    EXPECT_TRUE((*estimator)->EndFile().ok());
  }
  auto results = (*estimator)->Finish();
  EXPECT_TRUE(results.ok()) << results.status();
  return *results;
}

void ExpectSameSets(const v1::EstimateResult& got,
                    const std::vector<estimate::SetResult>& want) {
  ASSERT_EQ(got.sets_size(), static_cast<int>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    v1::SetEstimate expected;
    SetEstimateToProto(want[i], &expected);
    std::string diff;
    google::protobuf::util::MessageDifferencer differencer;
    differencer.ReportDifferencesToString(&diff);
    EXPECT_TRUE(differencer.Compare(expected, got.sets(static_cast<int>(i))))
        << "set " << i << ": " << diff;
  }
}

uint64_t TotalBytes(const std::vector<std::string>& files) {
  uint64_t total = 0;
  for (const std::string& f : files) total += f.size();
  return total;
}

TEST(EstimateServiceTest, ResultIsTheEstimatorsInManySmallMessages) {
  TestServer server;
  ASSERT_TRUE(server.started());
  const std::vector<std::string> files = DataSet();
  for (uint32_t rate : {1u, 4u}) {
    v1::EstimateParams params = SeveralSets();
    params.set_sample_rate(rate);
    Outcome out = RunEstimate(&server, params, files, 7919);
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    ASSERT_EQ(out.results.size(), 1u);
    EXPECT_TRUE(out.result_last);
    const v1::EstimateResult& result = out.results[0];
    EXPECT_EQ(result.total_bytes(), TotalBytes(files));
    EXPECT_EQ(result.files(), files.size());
    EXPECT_EQ(result.sample_rate(), rate);
    EXPECT_EQ(result.fingerprint(), v1::FINGERPRINT_ALGORITHM_XXH128);
    ExpectSameSets(result, Direct(params, files));
    // Duplicates across files were found: the data set does deduplicate.
    EXPECT_GT(result.sets(1).dedup_ratio(), 1.2);
    EXPECT_FALSE(result.sets(0).has_namespace_bytes());
    EXPECT_EQ(result.sets(0).sampled(), rate > 1);
  }
  EXPECT_TRUE(WaitFor([&] { return server.service().active_streams() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return server.budget().used() == 0; }));
}

TEST(EstimateServiceTest, FileMarksEndFilesAndEmptyOnesAddNone) {
  TestServer server;
  ASSERT_TRUE(server.started());
  const std::vector<std::string> files = DataSet();
  v1::EstimateParams params = SeveralSets();
  auto context = TestServer::Context();
  std::unique_ptr<EstimateStream> stream =
      server.stub().Estimate(context.get());
  std::vector<v1::EstimateRequest> requests(7);
  *requests[0].mutable_params() = params;  // params alone, no data
  requests[1].set_data(files[0].substr(0, 100000));
  requests[2].set_data(files[0].substr(100000));
  requests[2].set_end_of_file(true);
  requests[3].set_end_of_file(true);  // no byte since the last mark
  requests[4].set_data(files[1]);
  requests[4].set_end_of_file(true);
  requests[5].set_end_of_file(true);
  requests[6].set_data(files[2]);  // the stream's end ends it
  for (const v1::EstimateRequest& r : requests) ASSERT_TRUE(stream->Write(r));
  stream->WritesDone();
  v1::EstimateResponse response;
  std::vector<v1::EstimateResult> results;
  while (stream->Read(&response)) {
    if (response.has_result()) results.push_back(response.result());
  }
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].files(), 3u);
  EXPECT_EQ(results[0].total_bytes(), TotalBytes(files));
  ExpectSameSets(results[0], Direct(params, files));
  // Cut as one file instead, the fixed set's chunks differ (its last
  // chunks of each file): the marks were obeyed.
  const std::string joined = files[0] + files[1] + files[2];
  v1::SetEstimate as_one;
  SetEstimateToProto(Direct(params, {joined})[2], &as_one);
  EXPECT_FALSE(google::protobuf::util::MessageDifferencer::Equals(
      results[0].sets(2), as_one));
  EXPECT_NE(results[0].sets(2).min_chunk_size(), as_one.min_chunk_size());

  // Only marks, no byte: no file at all.
  Outcome empty = RunEstimate(&server, params, {""}, 1024);
  ASSERT_TRUE(empty.status.ok()) << empty.status.error_message();
  ASSERT_EQ(empty.results.size(), 1u);
  EXPECT_EQ(empty.results[0].files(), 0u);
  EXPECT_EQ(empty.results[0].total_bytes(), 0u);
  EXPECT_EQ(empty.results[0].sets(0).chunks(), 0u);
  EXPECT_EQ(empty.results[0].sets(0).dedup_ratio(), 0);
}

TEST(EstimateServiceTest, ProgressComesWhileReadingAndTheResultLast) {
  TestServer server;
  ASSERT_TRUE(server.started());
  v1::EstimateParams params;
  AddSet(&params, "fixed", v1::ALGORITHM_FIXED);
  // Two files, 40 MiB together: more than twice kProgressBytes.
  const std::string block = RandomBytes(kMiB, 9);
  std::string file;
  for (int i = 0; i < 20; ++i) file += block;
  Outcome out = RunEstimate(&server, params, {file, file}, kMiB);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_EQ(out.results.size(), 1u);
  EXPECT_TRUE(out.result_last);
  // The first comes once kProgressBytes were cut, whatever the time; a task
  // takes at most 4 MiB and a message, so that is before the last task.
  ASSERT_GE(out.progress.size(), 1u);
  EXPECT_LE(out.progress.size(), 2 * file.size() / kProgressBytes);
  uint64_t before = 0;
  for (const v1::EstimateProgress& p : out.progress) {
    EXPECT_GE(p.bytes(), before + kProgressBytes);
    EXPECT_LE(p.bytes(), 2 * file.size());
    EXPECT_LE(p.files(), 2u);
    before = p.bytes();
  }
  EXPECT_EQ(out.results[0].total_bytes(), 2 * file.size());
  // 1 MiB repeated 40 times, cut in fixed chunks that divide it.
  EXPECT_EQ(out.results[0].sets(0).unique_bytes(), kMiB);
  EXPECT_DOUBLE_EQ(out.results[0].sets(0).dedup_ratio(), 40.0);
}

TEST(EstimateServiceTest, EveryBadParameterIsRefusedByName) {
  TestServer server;
  ASSERT_TRUE(server.started());
  const std::vector<std::string> files = {"some bytes"};
  struct Case {
    const char* what;
    std::function<void(v1::EstimateParams*)> spoil;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {"no set", [](v1::EstimateParams* p) { p->clear_sets(); },
       {"sets has 0 entries", "1 to 16"}},
      {"17 sets",
       [](v1::EstimateParams* p) {
         while (p->sets_size() < 17) AddSet(p, "x", v1::ALGORITHM_FASTCDC);
       },
       {"sets has 17 entries"}},
      {"long label",
       [](v1::EstimateParams* p) {
         p->mutable_sets(1)->set_label(std::string(257, 'l'));
       },
       {"sets[1].label has 257 bytes"}},
      {"bad size",
       [](v1::EstimateParams* p) {
         AddSet(p, "fastcdc:avg=7", v1::ALGORITHM_FASTCDC)
             ->mutable_chunking()
             ->set_avg_size(7);
       },
       {"sets[5] (label \"fastcdc:avg=7\"): ", "avg_size"}},
      {"a field fixed does not take",
       [](v1::EstimateParams* p) {
         p->mutable_sets(2)->mutable_chunking()->set_min_size(4096);
       },
       {"sets[2] (label \"fixed:avg=8192\"): ", "chunking.min_size"}},
      {"sample rate",
       [](v1::EstimateParams* p) { p->set_sample_rate(1048577); },
       {"sample_rate 1048577"}},
      {"no fingerprint",
       [](v1::EstimateParams* p) {
         p->set_fingerprint(v1::FINGERPRINT_ALGORITHM_NONE);
       },
       {"FINGERPRINT_ALGORITHM_NONE"}},
      {"bad namespace",
       [](v1::EstimateParams* p) { p->set_namespace_("bad\nname"); },
       {"namespace"}},
  };
  for (const Case& c : cases) {
    v1::EstimateParams params = SeveralSets();
    c.spoil(&params);
    Outcome out = RunEstimate(&server, params, files, 4);
    EXPECT_TRUE(out.results.empty()) << c.what;
    ExpectRefused(out.status, grpc::StatusCode::INVALID_ARGUMENT, c.message);
  }
  EXPECT_TRUE(WaitFor([&] { return server.service().active_streams() == 0; }));
}

TEST(EstimateServiceTest, ParamsFirstAndOnlyFirst) {
  TestServer server;
  ASSERT_TRUE(server.started());
  for (bool params_later : {false, true}) {
    auto context = TestServer::Context();
    std::unique_ptr<EstimateStream> stream =
        server.stub().Estimate(context.get());
    v1::EstimateRequest request;
    if (params_later) *request.mutable_params() = SeveralSets();
    request.set_data("abc");
    stream->Write(request);
    *request.mutable_params() = SeveralSets();
    stream->Write(request);
    stream->WritesDone();
    v1::EstimateResponse response;
    while (stream->Read(&response)) {
    }
    ExpectRefused(stream->Finish(), grpc::StatusCode::INVALID_ARGUMENT,
                  {params_later ? "params may be sent only in the first"
                                : "the first request of a stream must carry "
                                  "params"});
  }
}

TEST(EstimateServiceTest, ANamespaceTheTokenMayNotUse) {
  auto tokens = TokenTable::Parse("token-aaaaaaaaaaaa ns-a\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  TestServer server([&](ServiceOptions* o) { o->auth = &*tokens; });
  ASSERT_TRUE(server.started());
  v1::EstimateParams params = SeveralSets();
  // Without a namespace the token needs no grant.
  Outcome plain =
      RunEstimate(&server, params, {"abc"}, 8, "token-aaaaaaaaaaaa");
  EXPECT_TRUE(plain.status.ok()) << plain.status.error_message();
  params.set_namespace_("ns-b");
  Outcome out = RunEstimate(&server, params, {"abc"}, 8, "token-aaaaaaaaaaaa");
  ExpectRefused(out.status, grpc::StatusCode::PERMISSION_DENIED, {"ns-b"});
  params.set_namespace_("ns-a");
  out = RunEstimate(&server, params, {"abc"}, 8, "token-aaaaaaaaaaaa");
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
}

TEST(EstimateServiceTest, IdleAndDrainingAsTheOtherStreams) {
  // Only ExpireIdleStreams() below ends idle streams: the reaper's own
  // clock never reaches an hour here.
  TestServer server(
      [](ServiceOptions* o) { o->stream_idle_timeout = absl::Hours(1); });
  ASSERT_TRUE(server.started());
  auto context = TestServer::Context();
  std::unique_ptr<EstimateStream> stream =
      server.stub().Estimate(context.get());
  v1::EstimateRequest request;
  *request.mutable_params() = SeveralSets();
  request.set_data("the client then sends nothing more");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(WaitFor([&] { return server.service().active_streams() == 1; }));
  // Ended once it waits on its client, as of two hours from now.
  EXPECT_TRUE(WaitFor([&] {
    server.service().ExpireIdleStreams(absl::Now() + absl::Hours(2));
    return server.service().active_streams() == 0;
  }));
  v1::EstimateResponse response;
  while (stream->Read(&response)) {
  }
  ExpectRefused(stream->Finish(), grpc::StatusCode::DEADLINE_EXCEEDED,
                {"--stream_idle_timeout"});

  server.service().BeginShutdown();
  Outcome late = RunEstimate(&server, SeveralSets(), {"abc"}, 8);
  ExpectRefused(late.status, grpc::StatusCode::UNAVAILABLE, {"shutting down"});
}

// Dedups `file` into `ns` (SHA-256, fastcdc's defaults); its unique bytes.
uint64_t Dedup(TestServer* server, const std::string& ns,
               const std::string& file) {
  auto context = TestServer::Context();
  std::unique_ptr<DedupStream> stream = server->stub().Dedup(context.get());
  v1::DedupRequest request;
  request.mutable_params()->set_namespace_(ns);
  request.mutable_params()->mutable_chunking()->set_algorithm(
      v1::ALGORITHM_FASTCDC);
  request.set_data(file);
  EXPECT_TRUE(stream->Write(request));
  stream->WritesDone();
  v1::DedupResponse response;
  uint64_t unique = 0;
  while (stream->Read(&response)) {
    if (response.has_summary()) unique = response.summary().unique_bytes();
  }
  EXPECT_TRUE(stream->Finish().ok());
  return unique;
}

// Every chunk fingerprint of `files` (SHA-256, fastcdc's defaults), by Chunk.
std::vector<std::string> Fingerprints(TestServer* server,
                                      const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const std::string& file : files) {
    auto context = TestServer::Context();
    auto stream = server->stub().Chunk(context.get());
    v1::ChunkRequest request;
    request.mutable_params()->mutable_chunking()->set_algorithm(
        v1::ALGORITHM_FASTCDC);
    request.set_data(file);
    EXPECT_TRUE(stream->Write(request));
    stream->WritesDone();
    v1::ChunkResponse response;
    while (stream->Read(&response)) {
      for (const v1::ChunkRecord& r : response.batch().chunks()) {
        out.push_back(r.fingerprint());
      }
    }
    EXPECT_TRUE(stream->Finish().ok());
  }
  return out;
}

TEST(EstimateServiceTest, ANamespaceIsReadNeverWritten) {
  TestServer server;
  ASSERT_TRUE(server.started());
  const std::vector<std::string> files = DataSet();
  // Dedup the first two files: what the namespace holds.
  const uint64_t held =
      Dedup(&server, "tenant", files[0]) + Dedup(&server, "tenant", files[1]);
  ASSERT_GT(held, 0u);
  const size_t entries = server.index().size();
  const std::vector<std::string> fps = Fingerprints(&server, files);
  auto before = server.index().Lookup("tenant", fps);
  ASSERT_TRUE(before.ok());

  v1::EstimateParams params;
  AddSet(&params, "fastcdc", v1::ALGORITHM_FASTCDC);
  AddSet(&params, "fixed:avg=12288", v1::ALGORITHM_FIXED)
      ->mutable_chunking()
      ->set_avg_size(12288);
  params.set_namespace_("tenant");
  Outcome out = RunEstimate(&server, params, files, 65536);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_EQ(out.results.size(), 1u);
  const v1::EstimateResult& result = out.results[0];
  EXPECT_EQ(result.fingerprint(), v1::FINGERPRINT_ALGORITHM_SHA256);
  const v1::SetEstimate& fastcdc = result.sets(0);
  // Every distinct chunk of the first two files, and none of the third's
  // own: exactly the bytes Dedup found new.
  ASSERT_TRUE(fastcdc.has_namespace_bytes());
  EXPECT_EQ(fastcdc.namespace_bytes(), held);
  EXPECT_GT(fastcdc.unique_bytes(), held);
  EXPECT_GT(fastcdc.namespace_chunks(), 0u);
  EXPECT_LT(fastcdc.namespace_chunks(), fastcdc.unique_chunks());
  // Fixed chunks are not what Dedup wrote.
  EXPECT_TRUE(result.sets(1).has_namespace_bytes());
  EXPECT_EQ(result.sets(1).namespace_bytes(), 0u);
  // The index is as it was.
  EXPECT_EQ(server.index().size(), entries);
  auto after = server.index().Lookup("tenant", fps);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *before);

  // Sampled: 1 in 2 of the distinct chunks; the share of the kept ones the
  // namespace holds, of the estimated unique chunks and bytes.
  params.set_sample_rate(2);
  out = RunEstimate(&server, params, files, 65536);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  const v1::SetEstimate& sampled = out.results[0].sets(0);
  EXPECT_GT(sampled.namespace_chunks(), 0u);
  EXPECT_LT(sampled.namespace_chunks(), sampled.unique_chunks());
  EXPECT_GT(sampled.namespace_bytes(), 0u);
  EXPECT_LT(sampled.namespace_bytes(), sampled.unique_bytes());
  EXPECT_LE(sampled.namespace_chunks(), 2 * fastcdc.namespace_chunks());
  // Scaled, they estimate the exact holdings (the kept ones alone would be
  // about half of them).
  EXPECT_NEAR(static_cast<double>(sampled.namespace_chunks()),
              static_cast<double>(fastcdc.namespace_chunks()),
              0.2 * static_cast<double>(fastcdc.namespace_chunks()))
      << "kept " << sampled.sampled_unique_chunks();
  EXPECT_NEAR(static_cast<double>(sampled.namespace_bytes()),
              static_cast<double>(fastcdc.namespace_bytes()),
              0.2 * static_cast<double>(fastcdc.namespace_bytes()));
  EXPECT_EQ(server.index().size(), entries);
}

TEST(EstimateServiceTest, AnUnreachableIndexFailsTheComparisonAsFindMissing) {
  std::unique_ptr<InstrumentedIndex> down;
  TestServer server([&](ServiceOptions* o) {
    down = std::make_unique<InstrumentedIndex>(std::make_unique<DownIndex>(),
                                               o->metrics);
    o->index = down.get();
  });
  ASSERT_TRUE(server.started());
  v1::EstimateParams params = SeveralSets();
  // Without a namespace the index is never asked.
  Outcome out = RunEstimate(&server, params, {"some bytes"}, 4);
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
  params.set_namespace_("tenant");
  out = RunEstimate(&server, params, {"some bytes"}, 4);
  ExpectRefused(out.status, grpc::StatusCode::UNAVAILABLE, {"down"});
  EXPECT_TRUE(
      absl::StrContains(out.status.error_details(), "INDEX_UNAVAILABLE"));
  EXPECT_TRUE(out.results.empty());
  // FindMissing answers the same.
  grpc::ClientContext context;
  v1::FindMissingRequest request;
  request.set_namespace_("tenant");
  request.add_fingerprints(std::string(32, 'f'));
  v1::FindMissingResponse response;
  const grpc::Status find =
      server.stub().FindMissing(&context, request, &response);
  EXPECT_EQ(find.error_code(), out.status.error_code());
  EXPECT_EQ(find.error_details(), out.status.error_details());
}

TEST(EstimateServiceTest, PastTheEntryLimitTheStreamFailsAndGivesAllBack) {
  FairBudget stream_memory(size_t{2} << 30);
  TestServer server([&](ServiceOptions* o) {
    o->stream_memory = &stream_memory;
    o->estimate_max_entries = 100;
  });
  ASSERT_TRUE(server.started());
  v1::EstimateParams params;
  AddSet(&params, "fixed", v1::ALGORITHM_FIXED)
      ->mutable_chunking()
      ->set_avg_size(4096);
  // 256 distinct 4 KiB chunks.
  Outcome out = RunEstimate(&server, params, {RandomBytes(kMiB, 5)}, 65536);
  ExpectRefused(out.status, grpc::StatusCode::RESOURCE_EXHAUSTED,
                {"--estimate_max_entries", "sample_rate"});
  EXPECT_TRUE(absl::StrContains(out.status.error_details(), "STREAM_MEMORY"));
  EXPECT_TRUE(out.results.empty());
  EXPECT_TRUE(WaitFor([&] { return server.service().active_streams() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return stream_memory.used() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return server.budget().used() == 0; }));
  // Sampled, the same data fits.
  params.set_sample_rate(64);
  out = RunEstimate(&server, params, {RandomBytes(kMiB, 5)}, 65536);
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
}

TEST(EstimateServiceTest, AReservationThatCouldNeverFitIsRefused) {
  FairBudget stream_memory(size_t{8} << 20);
  TestServer server([&](ServiceOptions* o) {
    o->stream_memory = &stream_memory;
    o->estimate_max_entries = 1000000;
  });
  ASSERT_TRUE(server.started());
  Outcome out = RunEstimate(&server, SeveralSets(), {"abc"}, 8);
  ExpectRefused(out.status, grpc::StatusCode::RESOURCE_EXHAUSTED,
                {"5 sets", "--estimate_max_entries", "--stream_memory_budget"});
  EXPECT_TRUE(absl::StrContains(out.status.error_details(), "STREAM_MEMORY"));
  EXPECT_TRUE(WaitFor([&] { return server.service().active_streams() == 0; }));
  EXPECT_EQ(stream_memory.used(), 0u);
}

// What the stream reserves covers what the estimator says it holds, at every
// step, with the entry limit nearly reached.
TEST(EstimateMemoryTest, TheReservationCoversTheEstimatorsOwnCount) {
  v1::EstimateParams params;
  AddSet(&params, "fixed:avg=64", v1::ALGORITHM_FIXED)
      ->mutable_chunking()
      ->set_avg_size(64);
  // Two FastCDC sets of one seed: cut together by one group.
  AddFastCdc(&params, "fastcdc:avg=256", 64, 256, 1024);
  AddFastCdc(&params, "fastcdc:avg=1024", 256, 1024, 4096);
  params.set_namespace_("tenant");  // SHA-256
  constexpr uint64_t kEntries = 400000;
  auto options =
      EstimatorOptionsFromProto(params, chunking::EngineOptions(), kEntries);
  ASSERT_TRUE(options.ok()) << options.status();
  std::vector<StreamShape> shapes;
  for (const estimate::SetSpec& set : options->sets) {
    shapes.push_back(ShapeOf(set.options, false));
  }
  const uint64_t reserved = EstimateMemoryBytes(
      shapes, kEstimateEntryBytesSha256, kEntries, StreamSettings());
  auto estimator = estimate::Estimator::Create(*options);
  ASSERT_TRUE(estimator.ok()) << estimator.status();
  // About 340000 distinct chunks: their tables outweigh the chunkers.
  const std::string data = RandomBytes(16 * kMiB, 11);
  size_t most = 0;
  for (size_t at = 0; at < data.size(); at += 65536) {  // 256 pieces
    ASSERT_TRUE((*estimator)->Append(absl::string_view(data).substr(at, 65536))
                    .ok());
    most = std::max(most, (*estimator)->memory_bytes());
  }
  ASSERT_TRUE((*estimator)->Finish().ok());
  most = std::max(most, (*estimator)->memory_bytes());
  EXPECT_GT((*estimator)->entries(), kEntries * 3 / 4);
  EXPECT_LE(most, reserved);
  // The chunkers' part alone would not do.
  EXPECT_GT(most, EstimateMemoryBytes(shapes, 0, 0, StreamSettings()));
}

std::string Exposition(metrics::Metrics& m) {
  m.Refresh();
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, m.registry()->Collect());
  return out.str();
}

TEST(EstimateServiceTest, CountedWithRpcEstimate) {
  TestServer server;
  ASSERT_TRUE(server.started());
  v1::EstimateParams params;
  AddSet(&params, "crc32", v1::ALGORITHM_CRC32);
  AddSet(&params, "fixed", v1::ALGORITHM_FIXED);
  const std::vector<std::string> files = DataSet();
  Outcome out = RunEstimate(&server, params, files, 100000);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  const v1::EstimateResult& result = out.results[0];
  const std::string text = Exposition(server.metrics());
  // The first set's algorithm labels the stream.
  const std::string labels = "{algorithm=\"crc32\",rpc=\"Estimate\"} ";
  EXPECT_TRUE(absl::StrContains(
      text, absl::StrCat("chunkd_ingest_bytes_total", labels,
                         TotalBytes(files), "\n")))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text, absl::StrCat("chunkd_chunks_total", labels,
                         result.sets(0).chunks() + result.sets(1).chunks(),
                         "\n")));
  EXPECT_TRUE(absl::StrContains(
      text,
      "chunkd_ingest_bytes_total{algorithm=\"fixed\",rpc=\"Estimate\"} 0\n"));
}

}  // namespace
}  // namespace chunkd::service
