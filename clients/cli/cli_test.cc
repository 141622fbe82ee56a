#include "clients/cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "chunking/kernels/kernels.h"
#include "clients/cli/fake_service.h"
#include "clients/cli/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

const std::string kJpeg =
    std::string(CHUNKD_TEST_DATA_DIR) + "/SekienAkashita.jpg";

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

using ::chunkd::cli::testing::ReadAll;

CliRun Cli(const std::vector<std::string>& args) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  CliRun run;
  run.exit_code = RunCli(args, out, err);
  run.out = ReadAll(out);
  run.err = ReadAll(err);
  std::fclose(out);
  std::fclose(err);
  return run;
}

TEST(CliTest, Help) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"}, {"-h"}, {"help"}}) {
    CliRun run = Cli(args);
    EXPECT_EQ(run.exit_code, kExitOk);
    EXPECT_THAT(run.out, StartsWith("Usage: chunkctl COMMAND"));
  }
  for (const std::string command :
       {"chunk", "dedup", "estimate", "info", "bench", "size"}) {
    CliRun run = Cli({command, "--help"});
    EXPECT_EQ(run.exit_code, kExitOk) << command;
    EXPECT_THAT(run.out, StartsWith("Usage: chunkctl " + command));
    EXPECT_EQ(run.err, "");
    EXPECT_EQ(Cli({"help", command}).out, run.out);
    // Help wins over any other problem on the line.
    EXPECT_EQ(Cli({command, "--bogus", "-h"}).out, run.out);
  }
  EXPECT_THAT(Cli({"chunk", "--help"}).out, HasSubstr("--seq-length N"));
  EXPECT_THAT(Cli({"--version"}).out, StartsWith("chunkctl "));
}

// A command line and a part of the error it must print.
struct UsageCase {
  std::vector<std::string> args;
  std::string message;
};

// Each case exits 2 with its message on stderr and nothing on stdout.
void ExpectUsageErrors(const std::vector<UsageCase>& cases) {
  for (const UsageCase& c : cases) {
    CliRun run = Cli(c.args);
    EXPECT_EQ(run.exit_code, kExitUsage)
        << (c.args.empty() ? "" : c.args.back());
    EXPECT_THAT(run.err, HasSubstr(c.message));
    EXPECT_EQ(run.out, "");
  }
}

TEST(CliTest, EstimateUsageErrorsExitTwo) {
  ExpectUsageErrors({
      {{"estimate", "--local", kJpeg},
       "chunkctl: missing --set SPEC: give 1 to 16 parameter sets"},
      {{"estimate", "--local", "--set", "fastcdc"}, "missing FILE, DIR"},
      {{"estimate", "--local", "--set", "fastcdc", "-", "-"},
       "stdin (\"-\") can be read only once"},
      {{"estimate", "--local", "--set", "fixed:max=1", kJpeg},
       "chunkctl: --set \"fixed:max=1\": fixed does not take max (fixed "
       "takes avg) (see chunkctl estimate --help)\n"},
      {{"estimate", "--local", "--set", "fastcdc", "--sample", "2000000",
        kJpeg},
       "--sample: expected an integer in 1..1048576, got \"2000000\""},
      {{"estimate", "--local", "--set", "fastcdc", "--token", "t", kJpeg},
       "--token applies to a server, not to --local"},
      {{"estimate", "--server", "127.0.0.1:1", "--set", "fastcdc", "--threads",
        "2", kJpeg},
       "--backend and --threads apply to --local"},
      {{"estimate", "--server", "127.0.0.1:1", "--set", "fastcdc",
        "--namespace", "a/b", kJpeg},
       "--namespace: expected 1..128 characters"},
      {{"estimate", "--local", "--set", "fastcdc", "--plot=", kJpeg},
       "--plot: expected a file name ending in .png or .svg"},
      {{"estimate", "--local", "--set", "fastcdc", "--plot", "out.pdf", kJpeg},
       "--plot: expected a file name ending in .png or .svg, got \"out.pdf\""},
      // A range the Estimator refuses names the set.
      {{"estimate", "--local", "--set", "fastcdc:avg=7", kJpeg},
       "fastcdc:avg=7"},
  });
}

TEST(CliTest, EstimateLocalCountsTheFilesAsOneDataSet) {
  CliRun once = Cli({"estimate", "--local", "--json", "--set", "fixed:avg=4096",
                     kJpeg});
  ASSERT_EQ(once.exit_code, kExitOk) << once.err;
  CliRun twice = Cli({"estimate", "--local", "--json", "--set",
                      "fixed:avg=4096", kJpeg, kJpeg});
  ASSERT_EQ(twice.exit_code, kExitOk) << twice.err;
  // The second copy adds bytes and chunks but no unique chunk.
  EXPECT_THAT(once.out, HasSubstr("\"bytes\": 109466,"));
  EXPECT_THAT(twice.out, HasSubstr("\"bytes\": 218932,"));
  EXPECT_THAT(twice.out, HasSubstr("\"unique_bytes\": 109466,"));
  EXPECT_THAT(twice.out, HasSubstr("\"dedup_ratio\": 2.0,"));
  EXPECT_THAT(twice.out, HasSubstr("\"files\": 2,"));
  CliRun text = Cli({"estimate", "--local", "--set", "fixed:avg=4096", kJpeg});
  EXPECT_THAT(text.out, HasSubstr("\n109466 bytes in 1 files; sample 1 in 1; "
                                  "fingerprint xxh128\n"));
}

TEST(CliTest, UsageErrorsExitTwo) {
  ExpectUsageErrors({
           {{}, "Usage: chunkctl COMMAND"},
           {{"frobnicate"},
            "chunkctl: unknown command \"frobnicate\" (see chunkctl --help)\n"},
           {{"chunk", "--local", "--server", "x:1", kJpeg},
            "chunkctl: --server applies to a server, not to --local (see "
            "chunkctl chunk --help)\n"},
           {{"chunk", "--local", "--timeout", "1", kJpeg},
            "--timeout applies to a server, not to --local"},
           {{"chunk", "--local"}, "missing FILE"},
           {{"chunk", "--local", "a", "b"}, "give exactly one FILE"},
           {{"chunk", "--local", "--bogus", kJpeg},
            "chunkctl: unknown flag \"--bogus\" (see chunkctl chunk --help)\n"},
           {{"chunk", "--local", "--min", "4k", kJpeg},
            "--min: expected an integer in 0..4294967295, got \"4k\""},
           {{"chunk", "--local", "--format", "xml", kJpeg}, "--format"},
           {{"chunk", "--local", "--message-size", "0", kJpeg},
            "--message-size: expected an integer in 1..67108864"},
           {{"chunk", "--local", "--algorithm", "crc32", "--level", "1", kJpeg},
            "--level does not apply to crc32"},
           {{"chunk", "--server", "127.0.0.1:1", "--level", "2", "--algorithm",
             "crc32", kJpeg},
            "chunkctl: --level does not apply to crc32; crc32 takes --min, "
            "--avg and --max (see chunkctl chunk --help)\n"},
           {{"chunk", "--local", "--min", "8192", "--algorithm", "fixed",
             kJpeg},
            "--min does not apply to fixed; fixed takes only --avg"},
           {{"chunk", "--server", "127.0.0.1:1", "--min", "8192", "--algorithm",
             "fixed", kJpeg},
            "--min does not apply to fixed; fixed takes only --avg"},
           {{"chunk", "--local", "--algorithm", "seqcdc", "--avg", "8192",
             kJpeg},
            "--avg does not apply to seqcdc; seqcdc takes --min, --max, "
            "--seq-mode, --seq-length, --skip-trigger and --skip-size"},
           {{"chunk", "--server", "127.0.0.1:1", "--preset", "seqcdc-8k",
             "--avg", "8192", kJpeg},
            "--avg does not apply to seqcdc (the algorithm of --preset "
            "seqcdc-8k)"},
           {{"dedup", "--server", "127.0.0.1:1", "--namespace", "ns",
             "--algorithm", "seqcdc", "--avg", "8192", kJpeg},
            "chunkctl: --avg does not apply to seqcdc; seqcdc takes --min, "
            "--max, --seq-mode, --seq-length, --skip-trigger and --skip-size "
            "(see chunkctl dedup --help)\n"},
           {{"dedup", "--server", "127.0.0.1:1", "--namespace", "ns",
             "--algorithm", "fixed", "--max", "8192", kJpeg},
            "--max does not apply to fixed; fixed takes only --avg"},
           {{"dedup", "--server", "x:1", kJpeg}, "missing --namespace NS"},
           {{"dedup", "--server", "x:1", "--namespace", "a/b", kJpeg},
            "--namespace: expected 1..128 characters"},
           {{"dedup", "--server", "x:1", "--namespace", "ns"}, "missing FILE"},
           {{"dedup", "--server", "x:1", "--namespace", "ns", "-", "-"},
            "stdin (\"-\") can be read only once"},
           {{"dedup", "--server", "x:1", "--namespace", "ns", "--hints", "fast",
             kJpeg},
            "--hints 'fast' is not one of: off, ff, ff_mt, ff_rwt, ff_rwt_fpt"},
           {{"dedup", "--server", "x:1", "--namespace", "ns", "--algorithm",
             "crc32", "--hints", "ff", kJpeg},
            "--hints ff needs --algorithm fastcdc, not crc32"},
           {{"dedup", "--server", "x:1", "--namespace", "ns", "--fingerprint",
             "none", kJpeg},
            "dedup needs a fingerprint"},
           {{"info", "--server", "x:1", "extra"}, "unexpected argument"},
           {{"bench", "extra"}, "unexpected argument \"extra\""},
           {{"bench", "--threads", "0"}, "--threads: expected thread counts"},
           {{"bench", "--backend", "neon"}, "--backend: "},
           {{"bench", "--server", "x:1"}, "unknown flag \"--server\""},
           {{"size"},
            "chunkctl: missing --data SIZE, the unique data to index (e.g. "
            "--data 500TB) (see chunkctl size --help)\n"},
           {{"size", "--data", "5XB"},
            "chunkctl: --data: expected a size such as 500TB, 1.5PB or 64KiB"},
           {{"size", "--data", "1PB", "--avg", "16k"},
            "--avg: expected a size such as 500TB"},
           {{"size", "--data", "1PB", "--index", "mem"},
            "--index: expected memory, rocksdb, redis, redis-cluster or all"},
           {{"size", "--data", "1PB", "--server", "x:1"},
            "unknown flag \"--server\""},
           {{"chunk", "--local", "--token", "t0123456789abcdef", kJpeg},
            "--token applies to a server, not to --local"},
           {{"chunk", "--local", "--tls", kJpeg},
            "--tls applies to a server, not to --local"},
           {{"info", "--server", "x:1", "--tls_cert", kJpeg},
            "--tls-cert and --tls-key go together"},
           {{"info", "--server", "x:1", "--tls-ca", kJpeg},
            "holds no PEM block"},
           {{"info", "--server", "x:1", "--token", "a", "--token_file", kJpeg},
            "give --token or --token-file, not both"},
           {{"info", "--server", "x:1", "--token", "two words"},
            "the token must be one word"},
  });
}

TEST(CliTest, UsageErrorsOfTheSharedFlagsExitTwo) {
  ExpectUsageErrors({
           {{"chunk", "--local", "--tls_bogus", kJpeg},
            "chunkctl: unknown flag \"--tls_bogus\" (see chunkctl chunk "
            "--help)\n"},
           {{"chunk", "--local", "--message-size", "1", "--message_size", "2",
             kJpeg},
            "flag --message-size given more than once"},
           {{"chunk", "--server", "x:1", "--timeout", "-1", kJpeg},
            "--timeout: expected seconds"},
           {{"chunk", "--server", "x:1", "--timeout", "30s", kJpeg},
            "--timeout: expected seconds"},
           {{"chunk", "--server", "x:1", "--progress", "sometimes", kJpeg},
            "--progress: expected auto, always or never"},
           {{"chunk", "--local", "--json", "--format", "csv", kJpeg},
            "--json is --format json"},
           {{"dedup", "--server", "x:1", "--namespace", "ns", "--retries", "1",
             kJpeg, "-"},
            "--retries: stdin (\"-\") cannot be sent again"},
           {{"dedup", "--server", "x:1", "--namespace", "ns", "--retries", "1",
             kJpeg, "/dev/null"},
            "--retries: /dev/null is not a regular file, so it cannot be sent "
            "again from its start"},
           {{"dedup", "--server", "x:1", "--namespace", "ns", "--retries",
             "101", kJpeg},
            "--retries: expected an integer in 0..100"},
           {{"chunk", "--server", "x:1", "--retries", "1", "-"},
            "--retries: stdin (\"-\") cannot be sent again"},
           {{"chunk", "--server", "x:1", "--retries", "2", "/dev/null"},
            "--retries: /dev/null is not a regular file"},
           {{"chunk", "--server", "x:1", "--retries", "101", kJpeg},
            "--retries: expected an integer in 0..100"},
           {{"chunk", "--local", "--retries", "1", kJpeg},
            "--retries applies to a server, not to --local"},
           {{"dedup", "--server", "x:1", "--namespace", "ns", "--format",
             "xml", kJpeg},
            "--format: expected text, csv or json"},
           {{"info", "--server", "x:1", "--format", "yaml"},
            "--format: expected text, csv or json"},
           {{"info", "--server", "x:1", "--timeout", "soon"},
            "--timeout: expected seconds"},
           {{"info", "--server", "x:1", "--tls-cert", kJpeg},
            "--tls-cert and --tls-key go together"},
  });
}

TEST(CliTest, LocalOutputIsTheSameForEveryBackendAndThreadCount) {
  const CliRun reference = Cli({"chunk", "--local", "--backend", "scalar",
                                "--avg", "4096", "--min", "1024", "--max",
                                "16384", kJpeg});
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  ASSERT_GT(std::count(reference.out.begin(), reference.out.end(), '\n'), 10);
  for (const chunking::kernels::KernelSet* kernel :
       chunking::kernels::AllKernelSets()) {
    if (!kernel->supported()) continue;
    for (const char* threads : {"1", "2", "3"}) {
      const CliRun run = Cli({"chunk", "--local", "--backend", kernel->name,
                              "--threads", threads, "--avg", "4096", "--min",
                              "1024", "--max", "16384", kJpeg});
      EXPECT_EQ(run.exit_code, 0) << run.err;
      EXPECT_EQ(run.out, reference.out) << kernel->name << " x" << threads;
    }
  }
}

TEST(CliTest, BadBackendOrThreadsExitTwo) {
  CliRun run = Cli({"chunk", "--local", "--backend", "avx9", kJpeg});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--backend: unknown"), std::string::npos) << run.err;
  run = Cli({"chunk", "--local", "--threads", "0", kJpeg});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--threads"), std::string::npos) << run.err;
  run = Cli({"chunk", "--server", "127.0.0.1:1", "--backend", "scalar", kJpeg});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("apply to --local"), std::string::npos) << run.err;
  // Without --local, chunk goes to a server (the default one).
  run = Cli({"chunk", "--threads", "2", kJpeg});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("apply to --local"), std::string::npos) << run.err;
}

TEST(CliTest, InvalidParametersExitTwoWithTheLibrarysMessage) {
  CliRun run = Cli({"chunk", "--local", "--min", "1", kJpeg});
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_THAT(run.err, StartsWith("chunkctl: "));
  EXPECT_THAT(run.err, HasSubstr("min_size"));
  // Also before contacting a server.
  CliRun remote =
      Cli({"chunk", "--server", "127.0.0.1:1", "--min", "1", kJpeg});
  EXPECT_EQ(remote.exit_code, kExitUsage);
  EXPECT_EQ(remote.err, run.err);
}

TEST(CliTest, MissingFileExitsOne) {
  CliRun run = Cli({"chunk", "--local", "/nonexistent/x"});
  EXPECT_EQ(run.exit_code, kExitFailure);
  EXPECT_EQ(run.err, "chunkctl: /nonexistent/x: No such file or directory\n");
  // So does a file a flag names (docs/cli.md: a file that cannot be read is
  // exit 1, whichever names it), and a file --retries must examine.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"info", "--server", "x:1", "--tls_ca", "/nonexistent/ca.pem"},
           {"chunk", "--server", "x:1", "--token-file", "/nonexistent/t",
            kJpeg},
           {"dedup", "--server", "x:1", "--namespace", "ns", "--retries", "1",
            "/nonexistent/x"},
       }) {
    CliRun flag = Cli(args);
    EXPECT_EQ(flag.exit_code, kExitFailure) << args[3];
    EXPECT_THAT(flag.err, MatchesRegex("chunkctl: .*/nonexistent/.*: No such "
                                       "file or directory\n"))
        << args[3];
  }
}

TEST(CliTest, UnreachableServerExitsOne) {
  CliRun run = Cli({"chunk", "--server", "127.0.0.1:1", kJpeg});
  EXPECT_EQ(run.exit_code, kExitFailure);
  EXPECT_THAT(run.err, StartsWith("chunkctl: UNAVAILABLE: "));
}

TEST(CliTest, LocalChunkPrintsTheVectors) {
  CliRun run =
      Cli({"chunk", "--local", "--algorithm", "fastcdc", "--min", "4096",
           "--avg", "16384", "--max", "65535", "--level", "2", kJpeg});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out,
              StartsWith("0,19186,0f9efa589121d5d9e9e2c4ace91337d77cae866537143"
                         "f6f15a0ffd525a77c2d\n19186,19279,"));
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(run.out, '\n')).size(), 7u);
}

TEST(CliTest, LocalAndServerPrintTheSame) {
  testing::FakeServer server;
  for (const std::vector<std::string>& options :
       std::vector<std::vector<std::string>>{
           {},
           {"--format", "json", "--fingerprint", "xxh128"},
           {"--preset", "fastcdc-reapi", "--avg", "8192", "--min", "2048",
            "--max", "32768"},
           {"--algorithm", "crc32", "--fingerprint", "none"},
           {"--preset", "seqcdc-8k", "--message-size", "777"},
           {"--preset", "seqcdc-16k", "--max", "20000"},
           {"--algorithm", "seqcdc", "--min", "4096", "--max", "16384",
            "--seq-mode", "decreasing", "--seq-length", "4"},
           {"--preset", "fastcdc-reapi", "--level", "3", "--seed", "5"},
           {"--algorithm", "crc32", "--avg", "8192", "--min", "2048"},
           {"--algorithm", "fixed", "--avg", "10000", "--format", "json"},
       }) {
    std::vector<std::string> local = {"chunk", "--local"};
    std::vector<std::string> remote = {"chunk", "--server", server.address()};
    for (const std::string& option : options) {
      local.push_back(option);
      remote.push_back(option);
    }
    local.push_back(kJpeg);
    remote.push_back(kJpeg);
    CliRun a = Cli(local);
    CliRun b = Cli(remote);
    EXPECT_EQ(a.exit_code, kExitOk) << a.err;
    EXPECT_EQ(b.exit_code, kExitOk) << b.err;
    EXPECT_FALSE(a.out.empty());
    EXPECT_EQ(a.out, b.out);
  }
}

TEST(CliTest, StreamWhoseSummaryMissesBytesFailsWithDataLoss) {
  testing::FakeServer server;
  struct Case {
    testing::Fault fault;
    std::string err;
  };
  for (const Case& c : std::vector<Case>{
           {testing::Fault::kWrongTotal,
            "chunkctl: DATA_LOSS: server summary reports total_bytes=109465 "
            "but 109466 bytes were sent\n"},
           {testing::Fault::kNoSummary,
            "chunkctl: DATA_LOSS: the stream ended without a summary; 109466 "
            "bytes were sent\n"},
       }) {
    server.service().fault = c.fault;
    CliRun chunk = Cli({"chunk", "--server", server.address(), kJpeg});
    EXPECT_EQ(chunk.exit_code, kExitFailure);
    EXPECT_EQ(chunk.err, c.err);
    CliRun dedup = Cli(
        {"dedup", "--server", server.address(), "--namespace", "ns", kJpeg});
    EXPECT_EQ(dedup.exit_code, kExitFailure);
    EXPECT_EQ(dedup.err, c.err);
    // No dedup line for a file the server did not account for.
    EXPECT_EQ(dedup.out, "");
  }
}

TEST(CliTest, ServerErrorsPrintCodeAndMessageAndExitOneOrTwo) {
  testing::FakeServer server;
  struct Case {
    grpc::StatusCode code;
    std::string message;
    std::string err;
    // 2 for the server's INVALID_ARGUMENT (a bad parameter), else 1.
    int exit_code = kExitFailure;
  };
  for (const Case& c : std::vector<Case>{
           {grpc::StatusCode::RESOURCE_EXHAUSTED,
            "chunkd is serving its limit of 1 streams (--max_streams)",
            "chunkctl: RESOURCE_EXHAUSTED: chunkd is serving its limit of 1 "
            "streams (--max_streams)\n"},
           {grpc::StatusCode::UNAVAILABLE, "chunkd is shutting down",
            "chunkctl: UNAVAILABLE: chunkd is shutting down\n"},
           {grpc::StatusCode::DATA_LOSS, "the index lost an entry",
            "chunkctl: DATA_LOSS: the index lost an entry\n"},
           {grpc::StatusCode::INVALID_ARGUMENT,
            "chunking.seed is not a parameter of crc32",
            "chunkctl: INVALID_ARGUMENT: chunking.seed is not a parameter of "
            "crc32\n",
            kExitUsage},
       }) {
    server.service().fail_status = grpc::Status(c.code, c.message);
    for (testing::Fault fault :
         {testing::Fault::kFail, testing::Fault::kFailMidStream}) {
      server.service().fault = fault;
      CliRun chunk = Cli({"chunk", "--server", server.address(), kJpeg});
      EXPECT_EQ(chunk.exit_code, c.exit_code) << c.err;
      EXPECT_EQ(chunk.err, c.err);
      // Records printed before the error stay printed; the exit status
      // tells they are not the whole file.
      EXPECT_EQ(chunk.out.empty(), fault == testing::Fault::kFail);
      CliRun dedup = Cli({"dedup", "--server", server.address(),
                          "--namespace", "ns", kJpeg, kJpeg});
      EXPECT_EQ(dedup.exit_code, c.exit_code) << c.err;
      EXPECT_EQ(dedup.err, c.err);
      EXPECT_EQ(dedup.out, "");
    }
    server.service().fault = testing::Fault::kNone;
    // --retries does not change what a final error does; and a transient
    // one, after the last retry, is reported the same way.
    server.service().dedup_failures = 2;
    CliRun dedup = Cli({"dedup", "--server", server.address(), "--namespace",
                        "ns", "--retries", "1", kJpeg});
    EXPECT_EQ(dedup.exit_code, c.exit_code) << c.err;
    EXPECT_THAT(dedup.err, ::testing::EndsWith(c.err));
    server.service().dedup_failures = 0;
  }
}

TEST(CliTest, DedupLines) {
  testing::FakeServer server;
  CliRun run = Cli({"dedup", "--server", server.address(), "--namespace", "t-1",
                    kJpeg, kJpeg, "/dev/null"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  const std::vector<std::string> lines = absl::StrSplit(run.out, '\n');
  ASSERT_EQ(lines.size(), 5u) << run.out;
  EXPECT_THAT(lines[0], StartsWith(kJpeg + " bytes=109466 unique_bytes=109466 "
                                           "chunks="));
  EXPECT_THAT(lines[0], HasSubstr(" ratio=1.00"));
  EXPECT_THAT(lines[1], StartsWith(kJpeg + " bytes=109466 unique_bytes=0 "));
  EXPECT_THAT(lines[1], HasSubstr(" unique_chunks=0 ratio=2.00"));
  EXPECT_EQ(lines[2],
            "/dev/null bytes=0 unique_bytes=0 chunks=0 unique_chunks=0 "
            "ratio=2.00");
  EXPECT_THAT(lines[3],
              StartsWith("total bytes=218932 unique_bytes=109466 chunks="));
  EXPECT_THAT(lines[3], HasSubstr(" ratio=2.00"));
  EXPECT_EQ(lines[4], "");

  // A run in which no byte is new has no ratio to speak of: "inf".
  CliRun again =
      Cli({"dedup", "--server", server.address(), "--namespace", "t-1", kJpeg});
  EXPECT_EQ(again.exit_code, kExitOk) << again.err;
  EXPECT_THAT(again.out, HasSubstr("ratio=inf\ntotal "));
}

TEST(CliTest, DedupSendsHints) {
  testing::FakeServer server;
  CliRun run = Cli({"dedup", "--server", server.address(), "--namespace", "t-1",
                    "--hints", "FF_MT", kJpeg});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(server.service().last_dedup_params().hints(),
            chunkd::v1::HINT_TEST_FF_MT);
  // --hints off is allowed for every algorithm.
  run = Cli({"dedup", "--server", server.address(), "--namespace", "t-1",
             "--algorithm", "fixed", "--hints", "off", kJpeg});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(server.service().last_dedup_params().hints(),
            chunkd::v1::HINT_TEST_OFF);
  // Without --hints the field stays unset: the server's default applies.
  run = Cli({"dedup", "--server", server.address(), "--namespace", "t-1", kJpeg});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(server.service().last_dedup_params().hints(),
            chunkd::v1::HINT_TEST_UNSPECIFIED);
}

TEST(CliTest, SizePrintsTheEstimate) {
  CliRun run = Cli({"size", "--data", "1PB", "--avg", "16KiB"});
  EXPECT_EQ(run.exit_code, kExitOk);
  EXPECT_EQ(run.err, "");
  EXPECT_THAT(run.out, StartsWith("unique data    1,000,000,000,000,000 "));
  EXPECT_THAT(run.out, HasSubstr("\nentries        61,035,156,250, "));
  for (const char* index : {"\nmemory ", "\nrocksdb ", "\nredis ",
                            "\nredis-cluster "}) {
    EXPECT_THAT(run.out, HasSubstr(index));
  }
  run = Cli({"size", "--data", "1PB", "--index", "rocksdb", "--json"});
  EXPECT_EQ(run.exit_code, kExitOk);
  EXPECT_THAT(run.out, StartsWith("{\"data_bytes\":1000000000000000,"));
  EXPECT_THAT(run.out, HasSubstr("\"indexes\":[{\"index\":\"rocksdb\","));
}

TEST(CliTest, BenchPrintsATable) {
  CliRun run =
      Cli({"bench", "--algorithm", "fixed,fastcdc", "--backend", "scalar",
           "--threads", "1", "--size", "100000", "--seconds", "0.001"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_THAT(run.out, StartsWith("chunkctl bench: 100000 bytes of random "));
  EXPECT_THAT(run.out, HasSubstr("\nfixed      reference        1  reference"));
  EXPECT_THAT(run.out, HasSubstr("\nfastcdc    scalar           1  "));
}

TEST(CliTest, TokenFromFlagFileOrEnvironmentReachesTheServer) {
  testing::FakeServer server;
  const std::string path = ::testing::TempDir() + "/chunkctl-token";
  std::FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fputs("  file-token-0123456789 \n# comment\n", file);
  std::fclose(file);

  ASSERT_EQ(Cli({"info", "--server", server.address(), "--token_file", path})
                .exit_code,
            kExitOk);
  EXPECT_EQ(server.service().last_authorization,
            "Bearer file-token-0123456789");
  ASSERT_EQ(::setenv("CHUNKD_TOKEN", "env-token-0123456789", 1), 0);
  ASSERT_EQ(Cli({"info", "--server", server.address()}).exit_code, kExitOk);
  EXPECT_EQ(server.service().last_authorization, "Bearer env-token-0123456789");
  // The flag wins over the environment.
  ASSERT_EQ(Cli({"info", "--server", server.address(), "--token",
                 "flag-token-0123456789"})
                .exit_code,
            kExitOk);
  EXPECT_EQ(server.service().last_authorization,
            "Bearer flag-token-0123456789");
  ASSERT_EQ(::unsetenv("CHUNKD_TOKEN"), 0);
  ASSERT_EQ(Cli({"info", "--server", server.address()}).exit_code, kExitOk);
  EXPECT_EQ(server.service().last_authorization, "");
}

TEST(CliTest, InfoPrintsTheServersAnswer) {
  testing::FakeServer server;
  server.service().info.set_version("9.9.9");
  CliRun run = Cli({"info", "--server", server.address()});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, StartsWith("version:             9.9.9\n"));
}

TEST(CliTest, DedupJsonLines) {
  testing::FakeServer server;
  CliRun run = Cli({"dedup", "--server", server.address(), "--namespace", "t-2",
                    "--json", kJpeg, kJpeg});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  const std::vector<std::string> lines =
      absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << run.out;
  EXPECT_THAT(lines[0], StartsWith("{\"file\":\"" + kJpeg +
                                   "\",\"bytes\":109466,"
                                   "\"unique_bytes\":109466,\"chunks\":"));
  EXPECT_THAT(lines[0], HasSubstr(",\"ratio\":1.0,\"hints_tried\":0,"));
  EXPECT_THAT(lines[1], HasSubstr(",\"unique_bytes\":0,"));
  EXPECT_THAT(lines[1], HasSubstr(",\"ratio\":2.0,"));
  EXPECT_THAT(lines[2], StartsWith("{\"total\":true,\"bytes\":218932,"
                                   "\"unique_bytes\":109466,"));
  EXPECT_THAT(lines[2], HasSubstr(",\"ratio\":2.0,"));
  // --format json is the same; nothing is unique the third time: null.
  CliRun again = Cli({"dedup", "--server", server.address(), "--namespace",
                      "t-2", "--format", "json", kJpeg});
  EXPECT_EQ(again.exit_code, kExitOk) << again.err;
  EXPECT_THAT(again.out, HasSubstr("\"ratio\":null,"));
}

TEST(CliTest, InfoJson) {
  testing::FakeServer server;
  server.service().info.set_version("9.9.9");
  CliRun run = Cli({"info", "--server", server.address(), "--json"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, StartsWith("{\n  \"version\": \"9.9.9\",\n"));
  EXPECT_EQ(Cli({"info", "--server", server.address(), "--format=json"}).out,
            run.out);
}

TEST(CliTest, ServerDefaultsToChunkdServer) {
  testing::FakeServer server;
  server.service().info.set_version("9.9.8");
  ASSERT_EQ(::setenv("CHUNKD_SERVER", server.address().c_str(), 1), 0);
  CliRun info = Cli({"info"});
  CliRun chunk = Cli({"chunk", kJpeg});
  ASSERT_EQ(::unsetenv("CHUNKD_SERVER"), 0);
  EXPECT_EQ(info.exit_code, kExitOk) << info.err;
  EXPECT_THAT(info.out, StartsWith("version:             9.9.8\n"));
  EXPECT_EQ(chunk.exit_code, kExitOk) << chunk.err;
  EXPECT_EQ(chunk.out, Cli({"chunk", "--local", kJpeg}).out);
}

TEST(CliTest, UnderscoreSpellingsAreTheSameFlags) {
  testing::FakeServer server;
  const CliRun dashed = Cli({"chunk", "--server", server.address(),
                             "--message-size", "777", "--seq-length", "4",
                             "--algorithm", "seqcdc", kJpeg});
  const CliRun underscored = Cli({"chunk", "--server", server.address(),
                                  "--message_size", "777", "--seq_length",
                                  "4", "--algorithm", "seqcdc", kJpeg});
  EXPECT_EQ(dashed.exit_code, kExitOk) << dashed.err;
  EXPECT_EQ(underscored.exit_code, kExitOk) << underscored.err;
  EXPECT_EQ(dashed.out, underscored.out);
  EXPECT_NE(dashed.out, Cli({"chunk", "--local", kJpeg}).out);
}

TEST(CliTest, GetServerInfoIsRetriedOnUnavailable) {
  testing::FakeServer server;
  server.service().info.set_version("9.9.7");
  // The default service config allows 5 attempts.
  server.service().info_failures = 4;
  CliRun run = Cli({"info", "--server", server.address()});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(server.service().info_calls, 5);
  server.service().info_failures = 5;
  run = Cli({"info", "--server", server.address()});
  EXPECT_EQ(run.exit_code, kExitFailure);
  EXPECT_EQ(run.err, "chunkctl: UNAVAILABLE: starting up\n");
  EXPECT_EQ(server.service().info_calls, 10);
}

TEST(CliTest, TimeoutEndsTheCallWithDeadlineExceeded) {
  testing::FakeServer server;
  server.service().delay_ms = 2000;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"chunk", "--server", server.address(), "--timeout", "0.000000001",
            kJpeg},
           {"dedup", "--server", server.address(), "--namespace", "ns",
            "--timeout=0.000000001", kJpeg},
           {"info", "--server", server.address(), "--timeout", "0.000000001"},
       }) {
    CliRun run = Cli(args);
    EXPECT_EQ(run.exit_code, kExitFailure) << args[0];
    EXPECT_THAT(run.err, StartsWith("chunkctl: DEADLINE_EXCEEDED: "))
        << args[0];
  }
  // A timeout long enough changes nothing; 0 means none.
  server.service().delay_ms = 0;
  for (const char* timeout : {"60", "0"}) {
    CliRun run = Cli({"chunk", "--server", server.address(), "--timeout",
                      timeout, kJpeg});
    EXPECT_EQ(run.exit_code, kExitOk) << run.err;
    EXPECT_EQ(run.out, Cli({"chunk", "--local", kJpeg}).out);
  }
}

// Runs `args` with standard output a pipe whose reader has gone.
CliRun CliIntoClosedPipe(const std::vector<std::string>& args) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  std::FILE* out = ::fdopen(fds[1], "w");
  std::FILE* err = std::tmpfile();
  void (*const previous)(int) = std::signal(SIGPIPE, SIG_IGN);
  CliRun run;
  run.exit_code = RunCli(args, out, err);
  std::signal(SIGPIPE, previous);
  run.err = ReadAll(err);
  std::fclose(out);
  std::fclose(err);
  return run;
}

TEST(CliTest, AClosedStandardOutputExits141Silently) {
  testing::FakeServer server;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"chunk", "--local", kJpeg},
           {"chunk", "--server", server.address(), kJpeg},
           {"chunk", "--server", server.address(), "--json", kJpeg},
           {"dedup", "--server", server.address(), "--namespace", "ns", kJpeg},
           {"info", "--server", server.address()},
           {"info", "--server", server.address(), "--json"},
           {"--version"},
       }) {
    CliRun run = CliIntoClosedPipe(args);
    EXPECT_EQ(run.exit_code, kExitBrokenPipe) << args[0] << " " << args[1];
    EXPECT_EQ(run.err, "") << args[0];
  }
}

TEST(CliTest, ProgressAlwaysAndNever) {
  testing::FakeServer server;
  CliRun always = Cli({"chunk", "--server", server.address(), "--progress",
                       "always", kJpeg});
  EXPECT_EQ(always.exit_code, kExitOk) << always.err;
  EXPECT_THAT(always.err, HasSubstr("100.0%"));
  CliRun dedup = Cli({"dedup", "--server", server.address(), "--namespace",
                      "p", "--progress=always", kJpeg});
  EXPECT_EQ(dedup.exit_code, kExitOk) << dedup.err;
  EXPECT_THAT(dedup.err, HasSubstr("100.0%"));
  for (const char* mode : {"never", "auto"}) {
    CliRun run = Cli({"chunk", "--server", server.address(), "--progress",
                      mode, kJpeg});
    EXPECT_EQ(run.exit_code, kExitOk) << run.err;
    EXPECT_EQ(run.err, "") << mode;  // stderr is a file, not a terminal
    EXPECT_EQ(run.out, always.out);
  }
}

TEST(CliTest, VersionIsTheBuildsVersion) {
  CliRun run = Cli({"--version"});
  EXPECT_EQ(run.exit_code, kExitOk);
  EXPECT_EQ(run.out, std::string("chunkctl ") + CHUNKD_VERSION + "\n");
  EXPECT_EQ(run.err, "");
}

}  // namespace
}  // namespace chunkd::cli
