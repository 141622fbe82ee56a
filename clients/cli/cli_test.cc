#include "clients/cli/cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "chunking/kernels/kernels.h"
#include "clients/cli/fake_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kJpeg =
    std::string(CHUNKD_TEST_DATA_DIR) + "/SekienAkashita.jpg";

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

std::string ReadAll(std::FILE* file) {
  std::rewind(file);
  std::string contents;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    contents.append(buffer, n);
  }
  return contents;
}

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
  for (const std::string command : {"chunk", "dedup", "info", "bench"}) {
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

TEST(CliTest, UsageErrorsExitTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{}, "Usage: chunkctl COMMAND"},
           {{"frobnicate"},
            "chunkctl: unknown command \"frobnicate\"\n"
            "Run 'chunkctl --help' for usage.\n"},
           {{"chunk", kJpeg}, "give exactly one of --server ADDR and --local"},
           {{"chunk", "--local", "--server", "x:1", kJpeg},
            "give exactly one of --server ADDR and --local"},
           {{"chunk", "--local"}, "missing FILE"},
           {{"chunk", "--local", "a", "b"}, "give exactly one FILE"},
           {{"chunk", "--local", "--bogus", kJpeg},
            "chunkctl: unknown flag \"--bogus\"\n"
            "Run 'chunkctl chunk --help' for usage.\n"},
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
            "--avg and --max\nRun 'chunkctl chunk --help' for usage.\n"},
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
            "--max, --seq-mode, --seq-length, --skip-trigger and --skip-size\n"
            "Run 'chunkctl dedup --help' for usage.\n"},
           {{"dedup", "--server", "127.0.0.1:1", "--namespace", "ns",
             "--algorithm", "fixed", "--max", "8192", kJpeg},
            "--max does not apply to fixed; fixed takes only --avg"},
           {{"dedup", "--namespace", "ns", kJpeg}, "missing --server ADDR"},
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
           {{"dedup", "--server", "x:1", "--namespace", "ns", "--format", "csv",
             kJpeg},
            "unknown flag \"--format\""},
           {{"info"}, "missing --server ADDR"},
           {{"info", "--server", "x:1", "extra"}, "unexpected argument"},
           {{"bench", "extra"}, "unexpected argument \"extra\""},
           {{"bench", "--threads", "0"}, "--threads: expected thread counts"},
           {{"bench", "--backend", "neon"}, "--backend: "},
           {{"bench", "--server", "x:1"}, "unknown flag \"--server\""},
           {{"chunk", "--local", "--token", "t0123456789abcdef", kJpeg},
            "--token applies to --server"},
           {{"chunk", "--local", "--tls", kJpeg}, "--tls applies to --server"},
           {{"info", "--server", "x:1", "--tls_cert", kJpeg},
            "--tls_cert and --tls_key go together"},
           {{"info", "--server", "x:1", "--tls_ca", "/nonexistent/ca.pem"},
            "--tls_ca: /nonexistent/ca.pem: No such file or directory"},
           {{"info", "--server", "x:1", "--tls_ca", kJpeg},
            "holds no PEM block"},
           {{"info", "--server", "x:1", "--token", "a", "--token_file", kJpeg},
            "give --token or --token_file, not both"},
           {{"info", "--server", "x:1", "--token", "two words"},
            "the token must be one word"},
       }) {
    CliRun run = Cli(c.args);
    EXPECT_EQ(run.exit_code, kExitUsage)
        << (c.args.empty() ? "" : c.args.back());
    EXPECT_THAT(run.err, HasSubstr(c.message));
    EXPECT_EQ(run.out, "");
  }
}

TEST(CliTest, LocalOutputIsTheSameForEveryBackendAndThreadCount) {
  const CliRun reference = Cli({"chunk", "--local", "--backend", "scalar",
                                "--avg", "4096", "--min", "1024", "--max",
                                "16384", kJpeg});
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  ASSERT_GT(std::count(reference.out.begin(), reference.out.end(), '\n'), 10);
  for (const chunking::kernels::Kernel* kernel :
       chunking::kernels::AllKernels()) {
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

TEST(CliTest, ServerErrorsPrintCodeAndMessageAndExitOne) {
  testing::FakeServer server;
  struct Case {
    grpc::StatusCode code;
    std::string message;
    std::string err;
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
            "crc32\n"},
       }) {
    server.service().fail_status = grpc::Status(c.code, c.message);
    for (testing::Fault fault :
         {testing::Fault::kFail, testing::Fault::kFailMidStream}) {
      server.service().fault = fault;
      CliRun chunk = Cli({"chunk", "--server", server.address(), kJpeg});
      EXPECT_EQ(chunk.exit_code, kExitFailure) << c.err;
      EXPECT_EQ(chunk.err, c.err);
      // Records printed before the error stay printed; the exit status
      // tells they are not the whole file.
      EXPECT_EQ(chunk.out.empty(), fault == testing::Fault::kFail);
      CliRun dedup = Cli({"dedup", "--server", server.address(),
                          "--namespace", "ns", kJpeg, kJpeg});
      EXPECT_EQ(dedup.exit_code, kExitFailure) << c.err;
      EXPECT_EQ(dedup.err, c.err);
      EXPECT_EQ(dedup.out, "");
    }
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

}  // namespace
}  // namespace chunkd::cli
