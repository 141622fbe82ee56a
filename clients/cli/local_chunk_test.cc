#include "clients/cli/local_chunk.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "clients/cli/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

const std::string kDataDir = CHUNKD_TEST_DATA_DIR;

using ::chunkd::cli::testing::ReadAll;

// The csv chunkctl must print for one seed of fastcdc2020_test_vectors.txt:
// "offset,length,sha256" per vector line.
std::string ExpectedCsv(uint64_t seed) {
  std::ifstream vectors(kDataDir + "/fastcdc2020_test_vectors.txt");
  EXPECT_TRUE(vectors.good());
  std::string csv;
  std::string line;
  bool in_section = false;
  while (std::getline(vectors, line)) {
    if (absl::StartsWith(line, "# Seed: ")) {
      uint64_t value = 0;
      in_section =
          absl::SimpleAtoi(absl::StripPrefix(line, "# Seed: "), &value) &&
          value == seed;
      continue;
    }
    if (!in_section || line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    EXPECT_EQ(fields.size(), 4u) << line;
    absl::StrAppend(&csv, fields[0], ",", fields[1], ",", fields[2], "\n");
  }
  EXPECT_FALSE(csv.empty()) << "no vectors for seed " << seed;
  return csv;
}

// Runs ChunkLocally on `path`; returns what it printed.
std::string RunLocal(const chunking::ChunkerOptions& options,
                     fingerprint::Kind kind, size_t piece_size,
                     const std::string& path,
                     OutputFormat format = OutputFormat::kText) {
  absl::StatusOr<std::unique_ptr<InputFile>> input = InputFile::Open(path);
  EXPECT_TRUE(input.ok()) << input.status();
  if (!input.ok()) return "";
  std::FILE* out = std::tmpfile();
  RecordWriter writer(out, format, kind != fingerprint::Kind::kNone);
  absl::Status status =
      ChunkLocally(options, kind, piece_size, input->get(), &writer);
  EXPECT_TRUE(status.ok()) << status;
  std::string printed = ReadAll(out);
  std::fclose(out);
  return printed;
}

// What the reference implementation says chunkctl should print.
std::string ReferenceCsv(const chunking::ChunkerOptions& options,
                         fingerprint::Kind kind, const std::string& data) {
  std::string csv;
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  for (const chunking::Chunk& chunk : chunking::ReferenceChunks(
           options, absl::MakeConstSpan(bytes, data.size()))) {
    absl::StrAppend(&csv, chunk.offset, ",", chunk.length);
    if (kind != fingerprint::Kind::kNone) {
      absl::StrAppend(&csv, ",",
                      fingerprint::ToHex(fingerprint::Digest(
                          kind, absl::string_view(data).substr(chunk.offset,
                                                               chunk.length))));
    }
    csv += '\n';
  }
  return csv;
}

std::string WriteTemp(const std::string& name, const std::string& data) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path =
      absl::StrCat(tmp ? tmp : "/tmp", "/chunkctl_", getpid(), "_", name);
  std::ofstream(path, std::ios::binary) << data;
  return path;
}

TEST(ChunkLocallyTest, MatchesFastCdc2020Vectors) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{666}}) {
    chunking::ChunkerOptions options =
        chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
    options.min_size = 4096;
    options.avg_size = 16384;
    options.max_size = 65535;
    options.normalization_level = 2;
    options.seed = seed;
    ASSERT_TRUE(chunking::ValidateOptions(options).ok());
    const std::string expected = ExpectedCsv(seed);
    // Any piece size must give the same chunks, including tiny, odd ones.
    for (size_t piece :
         {size_t{1}, size_t{7}, size_t{4096}, size_t{65536}, size_t{1} << 20}) {
      EXPECT_EQ(RunLocal(options, fingerprint::Kind::kSha256, piece,
                         kDataDir + "/SekienAkashita.jpg"),
                expected)
          << "seed " << seed << ", piece size " << piece;
    }
  }
}

TEST(ChunkLocallyTest, EqualsTheReferenceForEveryAlgorithm) {
  std::mt19937_64 rng(42);
  std::string random(3 << 20, '\0');
  for (char& c : random) c = static_cast<char>(rng());
  std::string inputs[] = {random, std::string(300000, '\0'),
                          std::string(1, 'x'), std::string()};
  for (size_t i = 0; i < std::size(inputs); ++i) {
    const std::string path = WriteTemp(absl::StrCat("input", i), inputs[i]);
    for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
      const chunking::ChunkerOptions options =
          chunking::DefaultOptions(algorithm);
      for (fingerprint::Kind kind :
           {fingerprint::Kind::kSha256, fingerprint::Kind::kNone}) {
        EXPECT_EQ(RunLocal(options, kind, 100003, path),
                  ReferenceCsv(options, kind, inputs[i]))
            << chunking::AlgorithmName(algorithm) << " on input " << i;
      }
    }
    std::remove(path.c_str());
  }
}

TEST(ChunkLocallyTest, ReportsUnreadableInput) {
  absl::StatusOr<std::unique_ptr<InputFile>> input =
      InputFile::Open("/nonexistent/chunkctl");
  EXPECT_EQ(input.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(input.status().message(),
            "/nonexistent/chunkctl: No such file or directory");
  // A directory opens but cannot be read.
  input = InputFile::Open("/");
  ASSERT_TRUE(input.ok());
  std::FILE* out = std::tmpfile();
  RecordWriter writer(out, OutputFormat::kText, true);
  absl::Status status =
      ChunkLocally(chunking::DefaultOptions(chunking::Algorithm::kFastCdc),
                   fingerprint::Kind::kSha256, 4096, input->get(), &writer);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), "/: read error: Is a directory");
  std::fclose(out);
}

}  // namespace
}  // namespace chunkd::cli
