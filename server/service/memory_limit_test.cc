#include "service/memory_limit.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace chunkd::service {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// /proc/self/mountinfo of a cgroup v2 host (Kubernetes nodes, Debian 12).
constexpr char kV2Mountinfo[] =
    "22 28 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc "
    "proc rw\n"
    "26 23 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 "
    "- cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";

// A cgroup v1 host: one mount per controller, a v2 tree beside them
// without the memory controller (hybrid).
constexpr char kV1Mountinfo[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup "
    "rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

constexpr char kV1Cgroup[] =
    "9:name=systemd:/\n"
    "4:memory:/kubepods/pod1/ctr\n"
    "1:cpu,cpuacct:/\n"
    "0::/\n";

TEST(ParseMemoryLimitTest, BytesMaxAndV1Unlimited) {
  EXPECT_EQ(*ParseMemoryLimit("1073741824\n"), kGiB);
  EXPECT_EQ(*ParseMemoryLimit("  536870912 "), kGiB / 2);
  EXPECT_EQ(*ParseMemoryLimit("0"), 0u);
  EXPECT_EQ(*ParseMemoryLimit("max\n"), std::nullopt);
  // v1's "unlimited" with 4 KiB and 64 KiB pages.
  EXPECT_EQ(*ParseMemoryLimit("9223372036854771712\n"), std::nullopt);
  EXPECT_EQ(*ParseMemoryLimit("9223372036854710272"), std::nullopt);
  EXPECT_EQ(*ParseMemoryLimit("4611686018427387903"),
            4611686018427387903u);  // just below kNoMemoryLimitFrom
}

TEST(ParseMemoryLimitTest, AnythingElseIsAnErrorQuotingTheText) {
  for (const char* bad : {"", "\n", "-1", "1G", "1.5", "unlimited", "0x10",
                          "+5", "99999999999999999999999"}) {
    absl::StatusOr<std::optional<uint64_t>> limit = ParseMemoryLimit(bad);
    ASSERT_FALSE(limit.ok()) << bad;
    EXPECT_EQ(limit.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(limit.status().message().find("is not a memory limit"),
              std::string::npos)
        << limit.status();
  }
  EXPECT_NE(ParseMemoryLimit("1G").status().message().find("\"1G\""),
            std::string::npos);
}

// Docker without a cgroup namespace: the mount's root is the container's
// cgroup, which /proc/self/cgroup names in full.
constexpr char kDockerV1Mountinfo[] =
    "700 690 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup "
    "cgroup rw,memory\n";

struct FilesCase {
  const char* name;
  const char* proc_cgroup;
  const char* mountinfo;
  std::vector<std::string> files;  // innermost first
};

TEST(CgroupMemoryLimitFilesTest, TheCgroupAndItsAncestorsUnderTheMount) {
  const std::string v1 = "/sys/fs/cgroup/memory/";
  const std::string v1_file = "memory.limit_in_bytes";
  const FilesCase cases[] = {
      {"v2, nested", "0::/kubepods.slice/pod1/cri-ctr\n", kV2Mountinfo,
       {"/sys/fs/cgroup/kubepods.slice/pod1/cri-ctr/memory.max",
        "/sys/fs/cgroup/kubepods.slice/pod1/memory.max",
        "/sys/fs/cgroup/kubepods.slice/memory.max",
        "/sys/fs/cgroup/memory.max"}},
      // A container with its own cgroup namespace sees its cgroup as "/".
      {"v2 in a cgroup namespace", "0::/\n", kV2Mountinfo,
       {"/sys/fs/cgroup/memory.max"}},
      // v1 wins over the unified tree of a hybrid host.
      {"v1, hybrid host", kV1Cgroup, kV1Mountinfo,
       {v1 + "kubepods/pod1/ctr/" + v1_file, v1 + "kubepods/pod1/" + v1_file,
        v1 + "kubepods/" + v1_file, v1 + v1_file}},
      {"v1 container", "4:memory:/docker/abc\n", kDockerV1Mountinfo,
       {v1 + v1_file}},
      {"v1 container, nested", "4:memory:/docker/abc/sub\n",
       kDockerV1Mountinfo, {v1 + "sub/" + v1_file, v1 + v1_file}},
      // "/docker/abcd" is not under "/docker/abc": the mount point is all
      // there is.
      {"v1, outside the mounted root", "4:memory:/docker/abcd\n",
       kDockerV1Mountinfo, {v1 + v1_file}},
      {"escaped mount point, colons in the path", "4:memory:/a:b\n",
       "35 31 0:32 / /sys/fs/cgroup/my\\040memory rw - cgroup cgroup "
       "rw,memory,nosuid\n",
       {"/sys/fs/cgroup/my memory/a:b/" + v1_file,
        "/sys/fs/cgroup/my memory/" + v1_file}},
  };
  for (const FilesCase& c : cases) {
    EXPECT_EQ(CgroupMemoryLimitFiles(c.proc_cgroup, c.mountinfo), c.files)
        << c.name;
  }
}

TEST(CgroupMemoryLimitFilesTest, NoMemoryCgroupNoFiles) {
  EXPECT_TRUE(CgroupMemoryLimitFiles("", "").empty());
  // A v1 host whose memory controller is not mounted, and no v2 line.
  EXPECT_TRUE(CgroupMemoryLimitFiles(
                  "1:cpu:/\n",
                  "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")
                  .empty());
  // "memoryx" is not the memory controller.
  EXPECT_TRUE(CgroupMemoryLimitFiles(
                  "4:memoryx:/a\n",
                  "35 31 0:32 / /m rw - cgroup cgroup rw,memoryx\n")
                  .empty());
}

// A directory tree standing for the root of a system.
class FakeRoot {
 public:
  FakeRoot() {
    char name[] = "/tmp/memory_limit_test.XXXXXX";
    dir_ = mkdtemp(name);
  }
  ~FakeRoot() { std::filesystem::remove_all(dir_); }
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;

  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(
        std::filesystem::path(dir_ + path).parent_path());
    std::ofstream(dir_ + path) << text;
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

TEST(ReadCgroupMemoryLimitTest, V2TheSmallestLimitUpTheTree) {
  FakeRoot root;
  root.Write("/proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  root.Write("/proc/self/mountinfo", kV2Mountinfo);
  // The container has no limit of its own; the pod's binds. The root
  // cgroup has no memory.max at all.
  root.Write("/sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n");
  root.Write("/sys/fs/cgroup/kubepods/pod1/memory.max", "1073741824\n");
  root.Write("/sys/fs/cgroup/kubepods/memory.max", "8589934592\n");
  absl::StatusOr<MemoryLimit> limit = ReadCgroupMemoryLimit(root.dir());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, kGiB);
  EXPECT_EQ(limit->source,
            root.dir() + "/sys/fs/cgroup/kubepods/pod1/memory.max");
  // Now the container's own limit is the smaller.
  root.Write("/sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "805306368\n");
  limit = ReadCgroupMemoryLimit(root.dir());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, 768 << 20);
  EXPECT_EQ(limit->source,
            root.dir() + "/sys/fs/cgroup/kubepods/pod1/ctr/memory.max");
}

TEST(ReadCgroupMemoryLimitTest, V1LimitAndV1Unlimited) {
  FakeRoot root;
  root.Write("/proc/self/cgroup", kV1Cgroup);
  root.Write("/proc/self/mountinfo", kV1Mountinfo);
  const std::string dir = "/sys/fs/cgroup/memory/kubepods/pod1/ctr/";
  root.Write(dir + "memory.limit_in_bytes", "9223372036854771712\n");
  absl::StatusOr<MemoryLimit> limit = ReadCgroupMemoryLimit(root.dir());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, std::nullopt);
  EXPECT_NE(limit->source.find("no limit in " + root.dir() + dir),
            std::string::npos)
      << limit->source;
  root.Write(dir + "memory.limit_in_bytes", "2147483648\n");
  limit = ReadCgroupMemoryLimit(root.dir());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, 2 * kGiB);
  // The v2 tree beside it is not read, whatever it holds.
  root.Write("/sys/fs/cgroup/unified/memory.max", "1024\n");
  EXPECT_EQ(ReadCgroupMemoryLimit(root.dir())->bytes, 2 * kGiB);
}

TEST(ReadCgroupMemoryLimitTest, NoCgroupFilesMeansNoLimit) {
  FakeRoot root;
  absl::StatusOr<MemoryLimit> limit = ReadCgroupMemoryLimit(root.dir());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, std::nullopt);
  EXPECT_NE(limit->source.find("no cgroup"), std::string::npos);
  root.Write("/proc/self/cgroup", "0::/\n");
  root.Write("/proc/self/mountinfo", "");
  limit = ReadCgroupMemoryLimit(root.dir());
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, std::nullopt);
  EXPECT_EQ(limit->source, "no memory cgroup");
}

TEST(ReadCgroupMemoryLimitTest, AMalformedFileIsAnErrorNamingIt) {
  FakeRoot root;
  root.Write("/proc/self/cgroup", "0::/a\n");
  root.Write("/proc/self/mountinfo", kV2Mountinfo);
  root.Write("/sys/fs/cgroup/a/memory.max", "lots\n");
  absl::StatusOr<MemoryLimit> limit = ReadCgroupMemoryLimit(root.dir());
  ASSERT_FALSE(limit.ok());
  EXPECT_EQ(limit.status().message(),
            root.dir() +
                "/sys/fs/cgroup/a/memory.max: \"lots\" is not a memory limit "
                "(a byte count or \"max\")");
}

TEST(ReadMemoryLimitFileTest, ReadsEitherFormatAndNamesTheFlag) {
  FakeRoot root;
  root.Write("/limit", "1073741824\n");
  absl::StatusOr<MemoryLimit> limit =
      ReadMemoryLimitFile(root.dir() + "/limit");
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->bytes, kGiB);
  EXPECT_EQ(limit->source, root.dir() + "/limit");
  root.Write("/limit", "max\n");
  EXPECT_EQ(ReadMemoryLimitFile(root.dir() + "/limit")->bytes, std::nullopt);
  root.Write("/limit", "1 GiB\n");
  limit = ReadMemoryLimitFile(root.dir() + "/limit");
  ASSERT_FALSE(limit.ok());
  EXPECT_NE(limit.status().message().find("--memory_limit_file " + root.dir() +
                                          "/limit: \"1 GiB\" is not"),
            std::string::npos)
      << limit.status();
  limit = ReadMemoryLimitFile(root.dir() + "/missing");
  ASSERT_FALSE(limit.ok());
  EXPECT_EQ(limit.status().message(),
            "--memory_limit_file " + root.dir() +
                "/missing: No such file or directory");
}

TEST(ReadCgroupMemoryLimitTest, ThisProcessHasAnAnswer) {
  // Whatever this machine has, reading it never fails.
  absl::StatusOr<MemoryLimit> limit = ReadCgroupMemoryLimit();
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_FALSE(limit->source.empty());
}

}  // namespace
}  // namespace chunkd::service
