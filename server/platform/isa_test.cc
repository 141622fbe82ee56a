#include "platform/isa.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace chunkd::platform {
namespace {

TEST(IsaTest, XcrZeroWithoutZmmStateDisablesAvx512) {
  // Every CPU bit, but the OS saves only SSE and AVX state.
  const uint32_t f = FeaturesFromCpuid(~0u, ~0u, ~0u, true, 0x7);
  EXPECT_TRUE(f & kOsYmm);
  EXPECT_FALSE(f & kOsZmm);
  const auto missing = MissingFeatures(kAvx512F | kOsZmm, f);
  EXPECT_EQ(missing, (std::vector<std::string>{"os-zmm-state"}));
  // Without OSXSAVE nothing wider than SSE is usable.
  const uint32_t g = FeaturesFromCpuid(~0u, ~0u, ~0u, false, 0xe7);
  EXPECT_FALSE(g & (kOsYmm | kOsZmm));
  // Full state.
  const uint32_t h = FeaturesFromCpuid(~0u, ~0u, ~0u, true, 0xe7);
  EXPECT_TRUE((h & (kOsYmm | kOsZmm)) == (kOsYmm | kOsZmm));
  EXPECT_TRUE(MissingFeatures(~0u & ((kOsZmm << 1) - 1), h).empty());
}

TEST(IsaTest, MissingFeaturesNamesEachInOrder) {
  EXPECT_EQ(MissingFeatures(kAvx2 | kGfni | kAvx512Vbmi, kAvx2),
            (std::vector<std::string>{"avx512vbmi", "gfni"}));
  EXPECT_TRUE(MissingFeatures(0, 0).empty());
}

// /proc/cpuinfo lists what the Linux kernel found and enabled; detection must
// agree with it on every CPU feature (not the OS-state bits, which cpuinfo
// expresses by omitting the features).
TEST(IsaTest, DetectionAgreesWithProcCpuinfo) {
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
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  const uint32_t f = CpuFeatures();
  const std::pair<IsaFeature, const char*> map[] = {
      {kPopcnt, "popcnt"},
      {kBmi1, "bmi1"},
      {kBmi2, "bmi2"},
      {kAvx, "avx"},
      {kAvx2, "avx2"},
      {kAvx512F, "avx512f"},
      {kAvx512Dq, "avx512dq"},
      {kAvx512Bw, "avx512bw"},
      {kAvx512Vl, "avx512vl"},
      {kAvx512Vbmi, "avx512vbmi"},
      {kAvx512Ifma, "avx512ifma"},
      {kGfni, "gfni"},
      {kSsse3, "ssse3"},
      {kSse41, "sse4_1"},
      {kSha, "sha_ni"},
      {kPclmul, "pclmulqdq"},
      {kVpclmulqdq, "vpclmulqdq"},
  };
  for (const auto& [feature, flag] : map) {
    EXPECT_EQ((f & feature) != 0, flags.count(flag) != 0) << flag;
  }
  // Linux hides avx512* from cpuinfo unless it saves ZMM state.
  if (flags.count("avx512f")) {
    EXPECT_TRUE(f & kOsZmm);
  }
  if (flags.count("avx2")) {
    EXPECT_TRUE(f & kOsYmm);
  }
}

}  // namespace
}  // namespace chunkd::platform
