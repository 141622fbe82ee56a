// Multi-buffer SHA-256 against OpenSSL's SHA256(), byte for byte, for every
// implementation this CPU runs; implementations it cannot run are skipped with
// the features it lacks.
#include "fingerprint/sha256_mb.h"

#include <openssl/sha.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "fingerprint/fingerprint.h"
#include "gtest/gtest.h"
#include "platform/isa.h"

#if defined(__x86_64__)
#include "fingerprint/shani/sha256_shani.h"
#endif

namespace chunkd::fingerprint {

// Test parameters by name (found by argument-dependent lookup).
void PrintTo(const Sha256Impl* impl, std::ostream* os) { *os << impl->name; }

namespace {

constexpr size_t kDigest = 32;
constexpr unsigned char kSentinel = 0xa5;

std::string OpenSslDigest(absl::string_view m) {
  unsigned char d[kDigest];
  SHA256(reinterpret_cast<const unsigned char*>(m.data()), m.size(), d);
  return std::string(reinterpret_cast<char*>(d), kDigest);
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// Hashes `messages` with `implementation` into a buffer followed by sentinel
// bytes and checks every digest against OpenSSL and that nothing was written
// past the last digest.
void ExpectMatchesOpenSsl(const Sha256Impl& impl,
                          const std::vector<absl::string_view>& messages) {
  std::vector<unsigned char> out(kDigest * messages.size() + 64, kSentinel);
  Sha256Many(impl, messages, out.data());
  for (size_t i = 0; i < messages.size(); ++i) {
    ASSERT_EQ(
        ToHex(absl::string_view(
            reinterpret_cast<const char*>(out.data()) + kDigest * i, kDigest)),
        ToHex(OpenSslDigest(messages[i])))
        << impl.name << ": message " << i << " of " << messages.size() << ", "
        << messages[i].size() << " bytes";
  }
  for (size_t i = kDigest * messages.size(); i < out.size(); ++i) {
    ASSERT_EQ(out[i], kSentinel) << impl.name << " wrote past the end";
  }
}

class Sha256ImplTest : public ::testing::TestWithParam<const Sha256Impl*> {
 protected:
  void SetUp() override {
    const std::vector<std::string> missing = Sha256ImplMissing(impl());
    if (!missing.empty()) {
      GTEST_SKIP() << impl().name << ": this CPU lacks "
                   << absl::StrJoin(missing, ", ");
    }
  }
  const Sha256Impl& impl() const { return *GetParam(); }
};

TEST_P(Sha256ImplTest, NistVectors) {
  const std::string million(1000000, 'a');
  const std::vector<absl::string_view> messages = {
      "abc", "", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
      million};
  std::vector<unsigned char> out(kDigest * messages.size());
  Sha256Many(impl(), messages, out.data());
  auto hex = [&](size_t i) {
    return ToHex(absl::string_view(
        reinterpret_cast<const char*>(out.data()) + kDigest * i, kDigest));
  };
  // FIPS 180-4 examples (NIST CSRC) and the one-million-'a' vector.
  EXPECT_EQ(hex(0),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(1),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(2),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(3),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Every length 0..1100 (every padding case: a tail of 0..63 bytes, one or
// two final blocks), alone and all in one batch of different lengths.
TEST_P(Sha256ImplTest, EveryLengthUpTo1100) {
  const std::string data = RandomBytes(1100, 1);
  std::vector<absl::string_view> all;
  for (size_t n = 0; n <= 1100; ++n) {
    const absl::string_view m(data.data(), n);
    all.push_back(m);
    ExpectMatchesOpenSsl(impl(), {m});
    if (HasFatalFailure()) return;
  }
  ExpectMatchesOpenSsl(impl(), all);
}

TEST_P(Sha256ImplTest, RandomBatchesOfRandomLengths) {
  const std::string data = RandomBytes(size_t{1} << 20, 2);
  std::mt19937_64 rng(3);
  for (int round = 0; round < 60; ++round) {
    const size_t count = rng() % 41;
    std::vector<absl::string_view> messages;
    for (size_t i = 0; i < count; ++i) {
      const size_t size = rng() % (70 * 1024 + 1);
      const size_t offset = rng() % (data.size() - size + 1);
      messages.emplace_back(data.data() + offset, size);
    }
    ExpectMatchesOpenSsl(impl(), messages);
    if (HasFatalFailure()) return;
  }
}

TEST_P(Sha256ImplTest, UnalignedAndOverlappingMessages) {
  const std::string data = RandomBytes(20000, 4);
  std::vector<absl::string_view> messages;
  for (size_t offset = 0; offset < 32; ++offset) {
    messages.emplace_back(data.data() + offset, 4096 + 7 * offset);
    messages.emplace_back(data.data() + 1 + offset, 63 + offset);
  }
  ExpectMatchesOpenSsl(impl(), messages);
}

TEST_P(Sha256ImplTest, SmallBatches) {
  const std::string data = RandomBytes(200000, 5);
  std::mt19937_64 rng(6);
  for (size_t count : {0, 1, 2, 3, 5}) {
    for (int round = 0; round < 20; ++round) {
      std::vector<absl::string_view> messages;
      for (size_t i = 0; i < count; ++i) {
        const size_t size = rng() % 70000;
        messages.emplace_back(data.data() + rng() % 64, size);
      }
      ExpectMatchesOpenSsl(impl(), messages);
      if (HasFatalFailure()) return;
    }
  }
}

// Many equal messages: the lanes end together.
TEST_P(Sha256ImplTest, EqualLengths) {
  const std::string data = RandomBytes(16 * 16384, 7);
  std::vector<absl::string_view> messages;
  for (size_t i = 0; i < 16; ++i) {
    messages.emplace_back(data.data() + 16384 * i, 16384);
  }
  ExpectMatchesOpenSsl(impl(), messages);
}

INSTANTIATE_TEST_SUITE_P(
    All, Sha256ImplTest,
    ::testing::ValuesIn(AllSha256Impls().begin(), AllSha256Impls().end()),
    [](const ::testing::TestParamInfo<const Sha256Impl*>& info) {
      std::string name = info.param->name;
      for (char& c : name) {
        if (c == '-') c = '_';
      }
      return name;
    });

#if defined(__x86_64__)
// The lane scheduler itself, for every lane count 1..4 (3 included, which
// the implementations reach only when four lanes drain), with jobs in the given
// order rather than longest first.
TEST(ShaNiLanesTest, EveryLaneCountInGivenOrder) {
  const std::vector<std::string> missing =
      Sha256ImplMissing(Sha256Impl{"shani-x1", 1});
  if (!missing.empty()) {
    GTEST_SKIP() << "this CPU lacks " << absl::StrJoin(missing, ", ");
  }
  const std::string data = RandomBytes(size_t{1} << 20, 8);
  std::mt19937_64 rng(9);
  for (int lanes = 1; lanes <= shani::kMaxLanes; ++lanes) {
    for (int round = 0; round < 20; ++round) {
      const size_t count = rng() % 12;
      std::vector<std::string> want;
      std::vector<unsigned char> out(kDigest * count + 1, kSentinel);
      std::vector<shani::Job> jobs;
      for (size_t i = 0; i < count; ++i) {
        const size_t size = rng() % 3 == 0 ? rng() % 200 : rng() % 70000;
        const unsigned char* p =
            reinterpret_cast<const unsigned char*>(data.data()) + rng() % 64;
        jobs.push_back({p, size, out.data() + kDigest * i});
        want.push_back(OpenSslDigest(
            absl::string_view(reinterpret_cast<const char*>(p), size)));
      }
      shani::HashJobs(jobs.data(), jobs.size(), lanes);
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(std::string(reinterpret_cast<char*>(out.data()) + kDigest * i,
                              kDigest),
                  want[i])
            << lanes << " lanes, job " << i << " of " << count;
      }
      ASSERT_EQ(out.back(), kSentinel);
    }
  }
}
#endif

std::set<std::string> CpuinfoFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w;
    while (words >> w) flags.insert(w);
    break;
  }
  return flags;
}

// On a CPU with the SHA extensions the default is a multi-buffer
// implementation.
TEST(Sha256DispatchTest, PicksShaNiWhereTheCpuHasIt) {
  ScopedEnv env(kSha256EnvVar, nullptr);
  const std::set<std::string> flags = CpuinfoFlags();
  const bool cpuinfo_says =
      flags.count("sha_ni") && flags.count("sse4_1") && flags.count("ssse3");
#if defined(__x86_64__)
  const std::vector<std::string> missing =
      Sha256ImplMissing(*AllSha256Impls()[0]);
  if (!flags.empty()) {
    // Detection agrees with what the Linux kernel reports.
    EXPECT_EQ(cpuinfo_says, missing.empty()) << absl::StrJoin(missing, ", ");
  }
  if (!missing.empty()) {
    EXPECT_EQ(BestSha256Impl().lanes, 0);
    GTEST_SKIP() << "this CPU lacks " << absl::StrJoin(missing, ", ")
                 << ": the openssl implementation is the default";
  }
  absl::StatusOr<const Sha256Impl*> chosen = DefaultSha256Impl();
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_GT((*chosen)->lanes, 1) << (*chosen)->name;
  EXPECT_EQ(*chosen, &BestSha256Impl());
  absl::StatusOr<const Sha256Impl*> shani = FindSha256Impl("shani");
  ASSERT_TRUE(shani.ok()) << shani.status();
  EXPECT_EQ(*shani, &BestSha256Impl());
#else
  GTEST_SKIP() << "the SHA-NI implementations are built for x86-64 only";
#endif
}

TEST(Sha256DispatchTest, EnvironmentForcesOpenSsl) {
  ScopedEnv env(kSha256EnvVar, "openssl");
  absl::StatusOr<const Sha256Impl*> chosen = DefaultSha256Impl();
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(std::string((*chosen)->name), "openssl");
  EXPECT_EQ((*chosen)->lanes, 0);
}

TEST(Sha256DispatchTest, EnvironmentSelectsLanes) {
  for (const Sha256Impl* impl : AllSha256Impls()) {
    ScopedEnv env(kSha256EnvVar, impl->name);
    absl::StatusOr<const Sha256Impl*> chosen = DefaultSha256Impl();
    if (!Sha256ImplMissing(*impl).empty()) {
      ASSERT_FALSE(chosen.ok());
      EXPECT_EQ(chosen.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_NE(chosen.status().message().find("missing"), std::string::npos)
          << chosen.status();
      continue;
    }
    ASSERT_TRUE(chosen.ok()) << chosen.status();
    EXPECT_EQ(*chosen, impl);
  }
}

TEST(Sha256DispatchTest, UnknownNameIsAnErrorNamingTheVariable) {
  ScopedEnv env(kSha256EnvVar, "sha3");
  absl::StatusOr<const Sha256Impl*> chosen = DefaultSha256Impl();
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(chosen.status().message());
  EXPECT_NE(message.find("CHUNKD_SHA256"), std::string::npos) << message;
  EXPECT_NE(message.find("'sha3'"), std::string::npos) << message;
  EXPECT_NE(message.find("openssl"), std::string::npos) << message;
}

TEST(Sha256DispatchTest, ActiveImplIsSupportedAndUsed) {
  const Sha256Impl& active = ActiveSha256Impl();
  EXPECT_TRUE(Sha256ImplMissing(active).empty()) << active.name;
  const std::string data = RandomBytes(100000, 10);
  const std::vector<absl::string_view> messages = {
      absl::string_view(data).substr(0, 30000),
      absl::string_view(data).substr(1, 99999), absl::string_view()};
  std::vector<unsigned char> out(kDigest * messages.size());
  Sha256Many(messages, out.data());
  for (size_t i = 0; i < messages.size(); ++i) {
    EXPECT_EQ(std::string(reinterpret_cast<char*>(out.data()) + kDigest * i,
                          kDigest),
              OpenSslDigest(messages[i]))
        << i;
  }
}

}  // namespace
}  // namespace chunkd::fingerprint
