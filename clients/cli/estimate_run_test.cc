#include "clients/cli/estimate_run.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "clients/cli/fake_service.h"
#include "clients/cli/remote.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

namespace fs = std::filesystem;
using ::chunkd::cli::testing::Fault;
using ::chunkd::cli::testing::FakeServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class EstimateRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("estimate_run_test." + std::to_string(::getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, size_t size) {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << std::string(size, 'x');
    return path.string();
  }

  DataSetReader Reader(std::vector<std::string> files, size_t piece) {
    return DataSetReader(std::move(files), piece, [](InputFile* input) {
      return std::make_unique<Progress>(nullptr, input->name(), 0);
    });
  }

  absl::StatusOr<chunkd::v1::EstimateResult> Remote(
      const std::vector<std::string>& files, size_t piece,
      std::chrono::nanoseconds timeout = std::chrono::seconds(60)) {
    chunkd::v1::EstimateParams params;
    params.add_sets()->set_label("fastcdc");
    params.add_sets()->set_label("fixed:avg=8192");
    DataSetReader reader = Reader(files, piece);
    ConnectOptions connect;
    connect.address = server_.address();
    auto stub = chunkd::v1::ChunkService::NewStub(MakeChannel(connect));
    return EstimateRemotely(stub.get(), params, timeout, &reader);
  }

  fs::path dir_;
  FakeServer server_;
};

TEST_F(EstimateRunTest, DirectoriesAreTheirFilesInSortedPathOrder) {
  const std::string b = Write("d/b", 1);
  const std::string a2 = Write("d/a/2", 1);
  const std::string a1 = Write("d/a/1", 1);
  const std::string c = Write("c", 1);
  absl::StatusOr<std::vector<std::string>> files =
      DataSetFiles({c, (dir_ / "d").string(), "-", c});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(c, a1, a2, b, "-", c));
}

TEST_F(EstimateRunTest, EachFileEndsWithAMark) {
  const std::string a = Write("a", 2500);
  const std::string empty = Write("empty", 0);
  const std::string b = Write("b", 1000);
  absl::StatusOr<chunkd::v1::EstimateResult> result =
      Remote({a, empty, b}, 1000);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(server_.service().estimate_messages(),
              ElementsAre(1000, 1000, 500, -1, -1, 1000, -1));
  EXPECT_EQ(result->total_bytes(), 3500u);
  EXPECT_EQ(result->files(), 2u);
  ASSERT_EQ(result->sets_size(), 2);
  EXPECT_EQ(result->sets(1).label(), "fixed:avg=8192");
}

TEST_F(EstimateRunTest, AResultThatMissesBytesIsDataLoss) {
  const std::string a = Write("a", 2500);
  server_.service().fault = Fault::kNoSummary;
  absl::StatusOr<chunkd::v1::EstimateResult> result = Remote({a}, 1000);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(result.status().message(),
              HasSubstr("the stream ended without a result; 2500 bytes"));
  server_.service().fault = Fault::kWrongTotal;
  result = Remote({a}, 1000);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(result.status().message(),
              HasSubstr("total_bytes=2499 but 2500 bytes were sent"));
}

TEST_F(EstimateRunTest, TheServersErrorsComeBackNamed) {
  const std::string a = Write("a", 10);
  server_.service().fault = Fault::kReject;
  absl::StatusOr<chunkd::v1::EstimateResult> result = Remote({a}, 1000);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              HasSubstr("INVALID_ARGUMENT: set 1 (fastcdc): min_size"));
}

TEST_F(EstimateRunTest, AFileThatCannotBeReadIsNamed) {
  const std::string a = Write("a", 10);
  const std::string missing = (dir_ / "missing").string();
  absl::StatusOr<chunkd::v1::EstimateResult> result = Remote({a, missing}, 4);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr(missing));
  EXPECT_TRUE(FoundByClient(result.status()));
}

TEST_F(EstimateRunTest, TheDeadlineEndsACallWhoseSourceStalls) {
  // A pipe that never closes: the call can only end at its deadline.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "0123456789", 10), 10);
  const std::string a = Write("a", 100);
  absl::StatusOr<chunkd::v1::EstimateResult> result =
      Remote({a, "/dev/fd/" + std::to_string(fds[0])}, 1000,
             std::chrono::milliseconds(300));
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded)
      << result.status();
}

}  // namespace
}  // namespace chunkd::cli
