// Tests of the stage-1 kernels:
//   - selection: detection, the table, FindKernelSet / ForcedKernelSet errors;
//   - the scalar kernel against the definitions of functions.h and against the
//     reference cutters (label "scalar");
//   - every other kernel against scalar, bit for bit (labels "avx2",
//     "avx512"), on inputs placed against PROT_NONE pages so that a read
//     outside [0, end) crashes. A kernel the CPU lacks is SKIPPED with the
//     missing features.

#include "chunking/kernels/kernels.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chunkd/chunker.h"
#include "chunking/buzhash.h"
#include "chunking/crc32.h"
#include "chunking/fastcdc.h"
#include "chunking/limits.h"
#include "chunking/rabin.h"
#include "chunking/test_util.h"
#include "gtest/gtest.h"
#include "platform/isa.h"

namespace chunkd::chunking::kernels {
namespace {

using ::chunkd::chunking::testing::Bytes;
using ::chunkd::chunking::testing::ConstantBytes;
using ::chunkd::chunking::testing::RandomBytes;
using ::chunkd::chunking::testing::RepeatingBytes;
using ::chunkd::chunking::testing::TextBytes;

// ------------------------------------------------------------ test inputs --

struct DataSet {
  std::string name;
  Bytes bytes;
};

std::vector<DataSet> DataSets(size_t size) {
  std::vector<DataSet> sets;
  sets.push_back({"random", RandomBytes(size, 42)});
  sets.push_back({"zeros", ConstantBytes(size, 0)});
  sets.push_back({"ff", ConstantBytes(size, 0xFF)});
  sets.push_back({"pattern_ab", RepeatingBytes(size, "ab")});
  sets.push_back({"pattern_7",
                  RepeatingBytes(size, std::string("\x01\x80\xff\x00q7Z", 7))});
  sets.push_back({"text", TextBytes(size, 7)});
  return sets;
}

// A buffer between two PROT_NONE pages. Place() copies a prefix of an input
// so that it ends right at the trailing guard (catches reads at or past
// `end`) or starts right after the leading guard (catches reads before
// data[0]).
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t capacity) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    inner_ = (capacity + page_ - 1) / page_ * page_ + page_;
    void* p = mmap(nullptr, inner_ + 2 * page_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base_ = static_cast<uint8_t*>(p);
    mprotect(base_, page_, PROT_NONE);
    mprotect(base_ + page_ + inner_, page_, PROT_NONE);
  }
  ~GuardedBuffer() { munmap(base_, inner_ + 2 * page_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  enum class Align { kEndAtGuard, kStartAtGuard };

  const uint8_t* Place(const uint8_t* src, size_t size, Align align) {
    uint8_t* const first = base_ + page_;
    uint8_t* dst =
        align == Align::kStartAtGuard ? first : first + inner_ - size;
    if (size > 0) memcpy(dst, src, size);
    return dst;
  }

 private:
  size_t page_ = 0;
  size_t inner_ = 0;
  uint8_t* base_ = nullptr;
};

// Gear tables: the crate's table with seeds, and an unrelated random table
// (every byte of every entry random, so that all six planes matter).
struct GearTable {
  std::string name;
  std::vector<uint64_t> gear;
};

std::vector<GearTable> GearTables() {
  std::vector<GearTable> tables;
  const auto& base = FastCdcGearTable();
  std::mt19937_64 rng(2024);
  for (uint64_t seed : {uint64_t{0}, uint64_t{666}, uint64_t{rng()}}) {
    std::vector<uint64_t> g(256);
    for (int i = 0; i < 256; ++i) g[i] = base[i] ^ seed;
    tables.push_back({absl::StrCat("seed_", seed), std::move(g)});
  }
  std::vector<uint64_t> g(256);
  for (auto& x : g) x = rng();
  tables.push_back({"random_table", std::move(g)});
  return tables;
}

struct MaskPair {
  std::string name;
  uint64_t mask_s;
  uint64_t mask_l;
};

// mask_s = MASKS[bits + level], mask_l = MASKS[bits - level] for every
// average 256 B .. 4 MiB and level 0..3, as FastCdcCutter picks them.
std::vector<MaskPair> AllFastCdcMasks() {
  std::vector<MaskPair> masks;
  for (uint32_t bits = 8; bits <= 22; ++bits) {
    for (uint32_t level = 0; level <= 3; ++level) {
      masks.push_back({absl::StrCat("avg_2^", bits, "_level", level),
                       kFastCdcMasks[bits + level],
                       kFastCdcMasks[bits - level]});
    }
  }
  return masks;
}

// A few pairs that reach every code path: sparse and dense output, masks the
// 48-bit lanes cannot take, all-zero masks.
std::vector<MaskPair> SomeFastCdcMasks() {
  return {
      {"16k_level2", kFastCdcMasks[16], kFastCdcMasks[12]},
      {"256_level3", kFastCdcMasks[11], kFastCdcMasks[5]},
      {"4m_level1", kFastCdcMasks[23], kFastCdcMasks[21]},
      {"top_bit_63", uint64_t{1} << 63 | 0x3000, 0x0000d90003530000},
      {"bit_48", uint64_t{1} << 48 | 0x1000, uint64_t{1} << 48},
      {"zero", 0, 0},
  };
}

std::vector<uint32_t> AllCrcMasks() {
  std::vector<uint32_t> masks;
  for (int k = 8; k <= 22; ++k) masks.push_back((uint32_t{1} << k) - 1);
  return masks;
}

std::vector<uint32_t> SomeCrcMasks() {
  return {0xFF, 0x3FFF, 0x3FFFFF, 0, 0x1, 0xFFFFFFFFu, 0x80000000u};
}

// ---------------------------------------------------------- kernel calls --

constexpr uint64_t kGarbage = 0x5A5A5A5A5A5A5A5Aull;
constexpr uint64_t kCanary = 0xC0FFEE00C0FFEE00ull;

// Output words prefilled with garbage (every word must be written) and two
// canaries after them (no word past BitmapWords(n) may be written).
class Bitmap {
 public:
  explicit Bitmap(size_t n) : words_(BitmapWords(n)), v_(words_ + 2, kGarbage) {
    v_[words_] = v_[words_ + 1] = kCanary;
  }
  uint64_t* data() { return v_.data(); }
  bool CanariesIntact() const {
    return v_[words_] == kCanary && v_[words_ + 1] == kCanary;
  }
  std::vector<uint64_t> words() const {
    return std::vector<uint64_t>(v_.begin(), v_.begin() + words_);
  }

 private:
  size_t words_;
  std::vector<uint64_t> v_;
};

struct Result {
  std::vector<uint64_t> a, b;
  bool canaries = true;
};

Result RunFastCdc(const KernelSet& k, const uint8_t* data, size_t begin,
                  size_t end, const GearParams& params) {
  Bitmap s(end - begin), l(end - begin);
  k.fastcdc(data, begin, end, params, s.data(), l.data());
  return {s.words(), l.words(), s.CanariesIntact() && l.CanariesIntact()};
}

Result RunCrc32(const KernelSet& k, const uint8_t* data, size_t begin,
                size_t end, uint32_t mask) {
  Bitmap h(end - begin);
  k.crc32(data, begin, end, mask, h.data());
  return {h.words(), {}, h.CanariesIntact()};
}

Result RunSeqCdc(const KernelSet& k, const uint8_t* data, size_t begin,
                 size_t end) {
  Bitmap g(end - begin), l(end - begin);
  k.seqcdc(data, begin, end, g.data(), l.data());
  return {g.words(), l.words(), g.CanariesIntact() && l.CanariesIntact()};
}

// The first differing position, or success.
::testing::AssertionResult SameBits(const std::vector<uint64_t>& want,
                                    const std::vector<uint64_t>& got,
                                    size_t begin) {
  if (want.size() != got.size()) {
    return ::testing::AssertionFailure()
           << "word count " << got.size() << ", want " << want.size();
  }
  for (size_t w = 0; w < want.size(); ++w) {
    if (want[w] == got[w]) continue;
    const int bit = __builtin_ctzll(want[w] ^ got[w]);
    return ::testing::AssertionFailure()
           << "first difference at position " << begin + 64 * w + bit
           << " (word " << w << ": want 0x" << absl::StrCat(absl::Hex(want[w]))
           << ", got 0x" << absl::StrCat(absl::Hex(got[w])) << ")";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SameResult(const Result& want, const Result& got,
                                      size_t begin) {
  if (!got.canaries) {
    return ::testing::AssertionFailure() << "wrote past the last bitmap word";
  }
  auto a = SameBits(want.a, got.a, begin);
  if (!a) return a << " [first bitmap]";
  auto b = SameBits(want.b, got.b, begin);
  if (!b) return b << " [second bitmap]";
  return ::testing::AssertionSuccess();
}

// ------------------------------------------------------------- selection --

TEST(KernelSelectionTest, TableIsBestFirstWithScalarLast) {
  std::vector<std::string> names;
  for (const KernelSet* k : AllKernelSets()) names.push_back(k->name);
#if defined(__x86_64__)
  EXPECT_EQ(names, (std::vector<std::string>{"avx512", "avx2", "scalar"}));
#endif
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.back(), "scalar");
  EXPECT_STREQ(ScalarKernelSet().name, "scalar");
  EXPECT_TRUE(ScalarKernelSet().supported());
}

TEST(KernelSelectionTest, BestIsTheFirstSupported) {
  const KernelSet* first = nullptr;
  for (const KernelSet* k : AllKernelSets()) {
    if (k->supported()) {
      first = k;
      break;
    }
  }
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(&BestKernelSet(), first);
}

TEST(KernelSelectionTest, FindKernelReturnsSupportedOnes) {
  for (const KernelSet* k : AllKernelSets()) {
    absl::StatusOr<const KernelSet*> found = FindKernelSet(k->name);
    if (k->supported()) {
      ASSERT_TRUE(found.ok()) << found.status();
      EXPECT_EQ(*found, k);
    } else {
      EXPECT_EQ(found.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_NE(found.status().message().find("missing"), std::string::npos)
          << found.status();
    }
  }
}

TEST(KernelSelectionTest, UnknownNameIsInvalidArgumentListingNames) {
  for (const char* name : {"sse", "", "AVX512", "avx512 ", "auto"}) {
    absl::StatusOr<const KernelSet*> found = FindKernelSet(name);
    ASSERT_EQ(found.status().code(), absl::StatusCode::kInvalidArgument)
        << name;
    for (const KernelSet* k : AllKernelSets()) {
      EXPECT_NE(found.status().message().find(k->name), std::string::npos)
          << found.status();
    }
  }
}

TEST(KernelSelectionTest, UnsupportedKernelIsFailedPrecondition) {
  bool any = false;
  for (const KernelSet* k : AllKernelSets()) {
    if (k->supported()) continue;
    any = true;
    EXPECT_EQ(FindKernelSet(k->name).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  if (!any) GTEST_SKIP() << "this CPU supports every kernel";
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
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
  std::string old_;
  bool had_ = false;
};

TEST(KernelSelectionTest, ForcedKernelHonoursEnvironment) {
  {
    ScopedEnv env("CHUNKD_BACKEND", nullptr);
    auto k = ForcedKernelSet();
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(*k, nullptr);
  }
  {
    ScopedEnv env("CHUNKD_BACKEND", "");
    auto k = ForcedKernelSet();
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(*k, nullptr);
  }
  {
    ScopedEnv env("CHUNKD_BACKEND", "scalar");
    auto k = ForcedKernelSet();
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(*k, &ScalarKernelSet());
  }
  for (const KernelSet* kernel : AllKernelSets()) {
    ScopedEnv env("CHUNKD_BACKEND", kernel->name);
    auto k = ForcedKernelSet();
    if (kernel->supported()) {
      ASSERT_TRUE(k.ok()) << k.status();
      EXPECT_EQ(*k, kernel);
    } else {
      EXPECT_EQ(k.status().code(), absl::StatusCode::kFailedPrecondition);
    }
  }
  {
    ScopedEnv env("CHUNKD_BACKEND", "neon");
    auto k = ForcedKernelSet();
    EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(k.status().message().find("CHUNKD_BACKEND"), std::string::npos)
        << k.status();
  }
}

// ------------------------------------------ scalar vs. the definitions --

// W(p) of functions.h, summed term by term.
uint64_t WindowedGear(const uint8_t* data, size_t p, const uint64_t* gear) {
  uint64_t w = 0;
  for (size_t i = 0; i <= (p < 63 ? p : 63); ++i) {
    w += gear[data[p - i]] << i;
  }
  return w;
}

bool Bit(const std::vector<uint64_t>& words, size_t i) {
  return (words[i / 64] >> (i % 64)) & 1;
}

TEST(ScalarKernelTest, FastCdcIsTheWindowedGearDefinition) {
  const Bytes data = RandomBytes(3000, 1);
  for (const GearTable& table : GearTables()) {
    for (const MaskPair& m : SomeFastCdcMasks()) {
      // Wide masks so that hits of both values occur in 3000 positions.
      for (const auto& [ms, ml] :
           {std::pair{m.mask_s, m.mask_l},
            std::pair{uint64_t{0x0000000000001110}, uint64_t{0x1}}}) {
        const GearParams params{table.gear.data(), ms, ml};
        for (size_t begin : {0, 1, 62, 63, 64, 100, 2999}) {
          const Result r = RunFastCdc(ScalarKernelSet(), data.data(), begin,
                                      data.size(), params);
          ASSERT_TRUE(r.canaries);
          for (size_t p = begin; p < data.size(); ++p) {
            const uint64_t w = WindowedGear(data.data(), p, params.gear);
            ASSERT_EQ(Bit(r.a, p - begin), (w & ms) == 0) << p;
            ASSERT_EQ(Bit(r.b, p - begin), (w & ml) == 0) << p;
          }
          // Bits past `end` in the last word are zero.
          const size_t n = data.size() - begin;
          if (n % 64) {
            EXPECT_EQ(r.a.back() >> (n % 64), 0u);
            EXPECT_EQ(r.b.back() >> (n % 64), 0u);
          }
        }
      }
    }
  }
}

// Every content-defined cut of the reference FastCDC lies on a kernel bit,
// and no bit lies between min + 64 (where the restarted hash equals the
// windowed one) and the cut: the bitmaps carry exactly what stage 2 needs.
TEST(ScalarKernelTest, FastCdcBitsExplainTheReferenceCuts) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{666}}) {
    ChunkerOptions o = DefaultOptions(Algorithm::kFastCdc);
    o.min_size = 1024;
    o.avg_size = 4096;
    o.max_size = 16384;
    o.normalization_level = 2;
    o.seed = seed;
    FastCdcCutter cutter(o.min_size, o.avg_size, o.max_size,
                         o.normalization_level, o.seed);
    const Bytes data = RandomBytes(1 << 20, 3 + seed);
    const GearParams params{cutter.gear().data(), cutter.mask_s(),
                            cutter.mask_l()};
    const Result r =
        RunFastCdc(ScalarKernelSet(), data.data(), 0, data.size(), params);
    const std::vector<Chunk> chunks = ReferenceChunks(o, data);
    int checked = 0;
    for (size_t i = 0; i + 1 < chunks.size(); ++i) {
      const Chunk& c = chunks[i];
      if (c.length >= o.max_size) continue;  // cut by max, not by content
      const size_t start = c.offset;
      const size_t cut = c.offset + c.length;  // the byte that matched
      const size_t scan = start + (o.min_size & ~1u) + 64;
      if (cut < scan) continue;
      auto hit = [&](size_t p) {
        return p - start < o.avg_size ? Bit(r.a, p) : Bit(r.b, p);
      };
      ASSERT_TRUE(hit(cut)) << "chunk " << i;
      for (size_t p = scan; p < cut; ++p) ASSERT_FALSE(hit(p)) << p;
      ++checked;
    }
    EXPECT_GT(checked, 100);
  }
}

uint32_t WindowCrc(const uint8_t* data, size_t p) {
  const size_t first = p >= 255 ? p - 255 : 0;
  return Crc32Update(0, data + first, p - first + 1);
}

TEST(ScalarKernelTest, Crc32IsTheDirectWindowCrc) {
  const Bytes data = RandomBytes(2500, 2);
  for (uint32_t mask : {0x7u, 0xFFu, 0x3FFFu, 0u, 0xFFFFFFFFu}) {
    for (size_t begin : {0, 1, 254, 255, 256, 257, 300, 2499}) {
      const Result r =
          RunCrc32(ScalarKernelSet(), data.data(), begin, data.size(), mask);
      ASSERT_TRUE(r.canaries);
      for (size_t p = begin; p < data.size(); ++p) {
        ASSERT_EQ(Bit(r.a, p - begin), (WindowCrc(data.data(), p) & mask) == 0)
            << "mask " << mask << " begin " << begin << " p " << p;
      }
    }
  }
}

// A crc32 chunk cut at a candidate ends on a kernel bit whose window CRC is
// the chunk's hash.
TEST(ScalarKernelTest, Crc32BitsExplainTheReferenceCuts) {
  ChunkerOptions o = DefaultOptions(Algorithm::kCrc32);
  o.min_size = 256;
  o.avg_size = 1024;
  o.max_size = 8192;
  const Bytes data = RandomBytes(1 << 19, 5);
  const Result r =
      RunCrc32(ScalarKernelSet(), data.data(), 0, data.size(), o.avg_size - 1);
  int checked = 0;
  for (const Chunk& c : ReferenceChunks(o, data)) {
    if (c.hash == 0 && c.length >= o.max_size) continue;
    const size_t last = c.offset + c.length - 1;
    if (c.offset + c.length == data.size()) continue;
    ASSERT_TRUE(Bit(r.a, last)) << c.offset;
    EXPECT_EQ(c.hash, WindowCrc(data.data(), last));
    for (size_t p = c.offset + o.min_size - 1; p < last; ++p) {
      ASSERT_FALSE(Bit(r.a, p)) << p;
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(ScalarKernelTest, SeqCdcComparesNeighbours) {
  for (const DataSet& set : DataSets(700)) {
    const Bytes& d = set.bytes;
    for (size_t begin : {0, 1, 63, 64, 65, 699}) {
      const Result r = RunSeqCdc(ScalarKernelSet(), d.data(), begin, d.size());
      ASSERT_TRUE(r.canaries);
      for (size_t p = begin; p < d.size(); ++p) {
        ASSERT_EQ(Bit(r.a, p - begin), p > 0 && d[p] > d[p - 1]) << p;
        ASSERT_EQ(Bit(r.b, p - begin), p > 0 && d[p] < d[p - 1]) << p;
      }
    }
  }
}

// --------------------------------------------------- differential tests --

class KernelDiffTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    absl::StatusOr<const KernelSet*> k = FindKernelSet(GetParam());
    if (k.status().code() == absl::StatusCode::kFailedPrecondition) {
      GTEST_SKIP() << k.status().message();
    }
    ASSERT_TRUE(k.ok()) << k.status();
    kernel_ = *k;
  }

  // Compares one range of every predicate; `what` names the case.
  void CheckFastCdc(const uint8_t* data, size_t begin, size_t end,
                    const GearParams& params, const std::string& what) {
    const Result want = RunFastCdc(ScalarKernelSet(), data, begin, end, params);
    const Result got = RunFastCdc(*kernel_, data, begin, end, params);
    ASSERT_TRUE(SameResult(want, got, begin))
        << "fastcdc " << what << " begin " << begin << " end " << end;
  }
  void CheckCrc32(const uint8_t* data, size_t begin, size_t end, uint32_t mask,
                  const std::string& what) {
    const Result want = RunCrc32(ScalarKernelSet(), data, begin, end, mask);
    const Result got = RunCrc32(*kernel_, data, begin, end, mask);
    ASSERT_TRUE(SameResult(want, got, begin))
        << "crc32 " << what << " mask 0x" << absl::StrCat(absl::Hex(mask))
        << " begin " << begin << " end " << end;
  }
  void CheckSeqCdc(const uint8_t* data, size_t begin, size_t end,
                   const std::string& what) {
    const Result want = RunSeqCdc(ScalarKernelSet(), data, begin, end);
    const Result got = RunSeqCdc(*kernel_, data, begin, end);
    ASSERT_TRUE(SameResult(want, got, begin))
        << "seqcdc " << what << " begin " << begin << " end " << end;
  }

  const KernelSet* kernel_ = nullptr;
};

// Every length 0..300 at many begins (at 0, inside the first window, past
// every window), each buffer ending at a guard page and, separately, starting
// at one.
TEST_P(KernelDiffTest, EveryLengthUpTo300) {
  const std::vector<size_t> begins = {0, 1, 17, 47, 48, 63, 64, 255, 256, 1000};
  const size_t size = 1000 + 300;
  GuardedBuffer buffer(size);
  const GearTable table = GearTables()[1];
  const std::vector<MaskPair> masks = {SomeFastCdcMasks()[0],
                                       SomeFastCdcMasks()[1]};
  for (const DataSet& set : DataSets(size)) {
    for (size_t begin : begins) {
      for (size_t len = 0; len <= 300; ++len) {
        const size_t end = begin + len;
        for (auto align : {GuardedBuffer::Align::kEndAtGuard,
                           GuardedBuffer::Align::kStartAtGuard}) {
          const uint8_t* d = buffer.Place(set.bytes.data(), end, align);
          for (const MaskPair& m : masks) {
            CheckFastCdc(d, begin, end, {table.gear.data(), m.mask_s, m.mask_l},
                         set.name + " " + m.name);
            if (HasFatalFailure()) return;
          }
          for (uint32_t mask : {0xFFu, 0x3FFFu}) {
            CheckCrc32(d, begin, end, mask, set.name);
            if (HasFatalFailure()) return;
          }
          CheckSeqCdc(d, begin, end, set.name);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Lengths at vector, word, block and lane edges, and segment-sized ranges.
TEST_P(KernelDiffTest, EdgeLengths) {
  std::vector<size_t> lengths;
  for (size_t edge : {64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}) {
    for (size_t d = 0; d <= 6; ++d) {
      lengths.push_back(edge - 3 + d);
    }
  }
  // 65536 and 262144 (the two-thread segment): power-of-two ranges, whose
  // lanes the crc32 kernel lengthens to an odd number of words.
  for (size_t len : {size_t{4096 + 1}, size_t{65535}, size_t{65536},
                     size_t{65537}, size_t{100000}, size_t{1} << 18,
                     size_t{(1 << 20) + 1}}) {
    lengths.push_back(len);
  }
  const std::vector<size_t> begins = {0, 1, 48, 255, 256, 4095};
  const size_t size = 4095 + (1 << 20) + 1;
  GuardedBuffer buffer(size);
  const GearTable table = GearTables()[0];
  const std::vector<DataSet> sets = {DataSets(size)[0], DataSets(size)[1],
                                     DataSets(size)[5]};
  for (const DataSet& set : sets) {
    for (size_t begin : begins) {
      for (size_t len : lengths) {
        const size_t end = begin + len;
        const uint8_t* d = buffer.Place(set.bytes.data(), end,
                                        GuardedBuffer::Align::kEndAtGuard);
        for (const MaskPair& m : SomeFastCdcMasks()) {
          CheckFastCdc(d, begin, end, {table.gear.data(), m.mask_s, m.mask_l},
                       set.name + " " + m.name);
          if (HasFatalFailure()) return;
        }
        for (uint32_t mask : SomeCrcMasks()) {
          CheckCrc32(d, begin, end, mask, set.name);
          if (HasFatalFailure()) return;
        }
        CheckSeqCdc(d, begin, end, set.name);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Every MASKS pair of levels 0..3 for averages 256 B .. 4 MiB, with every
// Gear table, on ranges that take each code path.
TEST_P(KernelDiffTest, FastCdcEveryMaskAndSeed) {
  const size_t size = 300000;
  GuardedBuffer buffer(size);
  const std::vector<std::pair<size_t, size_t>> ranges = {
      {0, 100},    {5, 300},      {0, 2000},   {40, 5000},
      {100, 4196}, {1000, 70000}, {7, 300000}, {64, 192}};
  for (const DataSet& set : {DataSets(size)[0], DataSets(size)[5]}) {
    for (const GearTable& table : GearTables()) {
      for (const MaskPair& m : AllFastCdcMasks()) {
        for (const auto& [begin, end] : ranges) {
          const uint8_t* d = buffer.Place(set.bytes.data(), end,
                                          GuardedBuffer::Align::kEndAtGuard);
          CheckFastCdc(d, begin, end, {table.gear.data(), m.mask_s, m.mask_l},
                       set.name + " " + table.name + " " + m.name);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_P(KernelDiffTest, Crc32EveryMask) {
  const size_t size = 300000;
  GuardedBuffer buffer(size);
  const std::vector<std::pair<size_t, size_t>> ranges = {
      {0, 100},    {5, 300},      {255, 2000}, {256, 5000},
      {100, 4196}, {1000, 70000}, {7, 300000}};
  for (const DataSet& set : DataSets(size)) {
    for (uint32_t mask : AllCrcMasks()) {
      for (const auto& [begin, end] : ranges) {
        for (auto align : {GuardedBuffer::Align::kEndAtGuard,
                           GuardedBuffer::Align::kStartAtGuard}) {
          const uint8_t* d = buffer.Place(set.bytes.data(), end, align);
          CheckCrc32(d, begin, end, mask, set.name);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Random ranges of a larger random buffer, and the pure-function property:
// word-aligned pieces of a range give the bits of the whole.
TEST_P(KernelDiffTest, RandomRangesAndPieces) {
  const size_t size = 1 << 22;
  const Bytes data = RandomBytes(size, 99);
  const GearTable table = GearTables()[3];
  std::mt19937_64 rng(5);
  for (int iter = 0; iter < 40; ++iter) {
    const size_t begin = rng() % (size / 2);
    const size_t end = begin + rng() % (size - begin);
    const MaskPair m = AllFastCdcMasks()[rng() % AllFastCdcMasks().size()];
    const uint32_t cm = AllCrcMasks()[rng() % AllCrcMasks().size()];
    const GearParams params{table.gear.data(), m.mask_s, m.mask_l};
    CheckFastCdc(data.data(), begin, end, params, m.name);
    CheckCrc32(data.data(), begin, end, cm, "random");
    CheckSeqCdc(data.data(), begin, end, "random");
    if (HasFatalFailure()) return;
    // Pieces.
    const Result whole = RunFastCdc(*kernel_, data.data(), begin, end, params);
    const Result whole_crc = RunCrc32(*kernel_, data.data(), begin, end, cm);
    Result pieces, pieces_crc;
    for (size_t p = begin; p < end;) {
      const size_t len = std::min<size_t>(end - p, 64 * (1 + rng() % 3000));
      const Result r = RunFastCdc(*kernel_, data.data(), p, p + len, params);
      pieces.a.insert(pieces.a.end(), r.a.begin(), r.a.end());
      pieces.b.insert(pieces.b.end(), r.b.begin(), r.b.end());
      const Result c = RunCrc32(*kernel_, data.data(), p, p + len, cm);
      pieces_crc.a.insert(pieces_crc.a.end(), c.a.begin(), c.a.end());
      p += len;
    }
    ASSERT_TRUE(SameResult(whole, pieces, begin)) << "fastcdc pieces";
    ASSERT_TRUE(SameResult(whole_crc, pieces_crc, begin)) << "crc32 pieces";
  }
}

// Every kernel built into this binary but scalar, against scalar; a test's
// name ends with the kernel's (CMake labels by it).
std::vector<const char*> WiderKernels() {
  std::vector<const char*> names;
  for (const KernelSet* k : AllKernelSets()) {
    if (k != &ScalarKernelSet()) names.push_back(k->name);
  }
  return names;
}

INSTANTIATE_TEST_SUITE_P(VsScalar, KernelDiffTest,
                         ::testing::ValuesIn(WiderKernels()),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// ------------------------------------ shared by the interop chunkers' tests --

// Lengths around each of `edges` (edge - 3 .. edge + 3), then `extra`.
std::vector<size_t> LengthsAround(std::initializer_list<size_t> edges,
                                  std::initializer_list<size_t> extra) {
  std::vector<size_t> lengths;
  for (size_t edge : edges) {
    for (size_t d = 0; d <= 6; ++d) lengths.push_back(edge - 3 + d);
  }
  lengths.insert(lengths.end(), extra.begin(), extra.end());
  return lengths;
}

// Calls check(data, begin, end, dataset name) for every begin and length on
// three data sets (random, zeros and text), each range ending at a
// guard page; stops at the first fatal failure.
template <class Check>
void ForEachEdgeRange(std::initializer_list<size_t> begins,
                      const std::vector<size_t>& lengths, Check check) {
  size_t longest = 0;
  for (size_t len : lengths) longest = std::max(longest, len);
  const size_t size = std::max(begins) + longest;
  GuardedBuffer buffer(size);
  const std::vector<DataSet> all = DataSets(size);
  for (const DataSet& set : {all[0], all[1], all.back()}) {
    for (size_t begin : begins) {
      for (size_t len : lengths) {
        const uint8_t* d = buffer.Place(set.bytes.data(), begin + len,
                                        GuardedBuffer::Align::kEndAtGuard);
        check(d, begin, begin + len, set.name);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// run(begin, end) over [begin, end) cut into random word-aligned pieces,
// the pieces' words concatenated: what a kernel must give for the whole.
template <class Run>
Result InRandomPieces(size_t begin, size_t end, std::mt19937_64& rng, Run run) {
  Result pieces;
  for (size_t p = begin; p < end;) {
    const size_t len = std::min<size_t>(end - p, 64 * (1 + rng() % 3000));
    const Result r = run(p, p + len);
    pieces.a.insert(pieces.a.end(), r.a.begin(), r.a.end());
    p += len;
  }
  return pieces;
}

// --------------------------------------------------------------- buzhash --

Result RunBuzhash(const KernelSet& k, const uint8_t* data, size_t begin,
                  size_t end, const BuzhashParams& params) {
  Bitmap h(end - begin);
  k.buzhash(data, begin, end, params, h.data());
  return {h.words(), {}, h.CanariesIntact()};
}

BuzhashParams CasyncBuzhash(uint32_t d) { return {BuzhashTable().data(), d}; }

uint32_t Rotl32(uint32_t x, size_t n) {
  n %= 32;
  return n == 0 ? x : (x << n) | (x >> (32 - n));
}

// H(p) of functions.h, term by term.
uint32_t BuzhashDirect(const uint8_t* data, size_t p, const uint32_t* table) {
  uint32_t h = 0;
  for (size_t i = 0; i <= std::min<size_t>(47, p); ++i) {
    h ^= Rotl32(table[data[p - i]], i);
  }
  return h;
}

// Discriminators: 1 (every position), powers of two (no bias, the rotation
// of the test), odd ones (desync's for averages 48, 16 KiB, 64 KiB, 1 MiB)
// and even ones with an odd factor (256 B, 256 KiB, 4 MiB), the largest.
std::vector<uint32_t> SomeBuzhashDivisors() {
  return {1,     2,           3,           36,          64,         192,
          12318, 49535,       65536,       202440,      886711,     5721670,
          5,     0x80000000u, 0x80000001u, 0xFFFFFFFEu, 0xFFFFFFFFu};
}

// A 48-byte window whose hash is `target`. All bytes are `a` but where the
// window puts byte b instead: at age i (0: the newest byte) that adds
// rotl32(v, i) with v = table[a] ^ table[b]. The 32 rotations of a word of
// odd weight span all of GF(2)^32 (v is then prime to x^32 + 1), so
// elimination over ages 0..31 finds the positions for any target.
std::vector<uint8_t> WindowWithHash(uint32_t target) {
  const uint32_t* t = BuzhashTable().data();
  const uint8_t a = 0;
  uint8_t b = 1;
  while (__builtin_popcount(t[a] ^ t[b]) % 2 == 0) ++b;
  const uint32_t v = t[a] ^ t[b];
  std::vector<uint8_t> window(48, a);
  // pivot[k]: a combination of rotations whose highest set bit is k, and
  // which ages it uses.
  uint32_t pivot[32] = {};
  uint32_t uses[32] = {};
  for (size_t age = 0; age < 32; ++age) {
    uint32_t x = Rotl32(v, age);
    uint32_t u = uint32_t{1} << age;
    for (int k = 31; k >= 0 && x != 0; --k) {
      if (!((x >> k) & 1)) continue;
      if (pivot[k] == 0) {
        pivot[k] = x;
        uses[k] = u;
        break;
      }
      x ^= pivot[k];
      u ^= uses[k];
    }
  }
  uint32_t want = target ^ BuzhashDirect(window.data(), 47, t);
  uint32_t ages = 0;
  for (int k = 31; k >= 0; --k) {
    if ((want >> k) & 1) {
      want ^= pivot[k];
      ages ^= uses[k];
    }
  }
  EXPECT_EQ(want, 0u) << "no window for 0x" << absl::StrCat(absl::Hex(target));
  for (size_t age = 0; age < 32; ++age) {
    if ((ages >> age) & 1) window[47 - age] = b;
  }
  return window;
}

TEST(ScalarKernelTest, BuzhashIsTheWindowDefinition) {
  const Bytes data = RandomBytes(2000, 4);
  const uint32_t* table = BuzhashTable().data();
  for (uint32_t d : {1u, 3u, 7u, 64u, 49535u}) {
    for (size_t begin : {0, 1, 46, 47, 48, 49, 100, 1999}) {
      const Result r = RunBuzhash(ScalarKernelSet(), data.data(), begin,
                                  data.size(), CasyncBuzhash(d));
      ASSERT_TRUE(r.canaries);
      for (size_t p = begin; p < data.size(); ++p) {
        ASSERT_EQ(Bit(r.a, p - begin),
                  BuzhashDirect(data.data(), p, table) % d == d - 1)
            << "d " << d << " begin " << begin << " p " << p;
      }
      const size_t n = data.size() - begin;
      if (n % 64 != 0) {
        EXPECT_EQ(r.a.back() >> (n % 64), 0u);
      }
    }
  }
}

TEST(ScalarKernelTest, BuzhashWindowCraftingHitsItsTarget) {
  for (uint32_t target : {0u, 1u, 49534u, 0x80000000u, 0xFFFFFFFFu}) {
    const std::vector<uint8_t> w = WindowWithHash(target);
    EXPECT_EQ(BuzhashDirect(w.data(), 47, BuzhashTable().data()), target);
  }
}

// Every buzhash chunk cut at a candidate ends on a kernel bit, and no bit
// lies between the chunk's min offset and that cut.
TEST(ScalarKernelTest, BuzhashBitsExplainTheReferenceCuts) {
  ChunkerOptions o = DefaultOptions(Algorithm::kBuzhash);
  o.min_size = 256;
  o.avg_size = 1024;
  o.max_size = 8192;
  const Bytes data = RandomBytes(1 << 19, 9);
  const Result r = RunBuzhash(ScalarKernelSet(), data.data(), 0, data.size(),
                              CasyncBuzhash(BuzhashDiscriminator(1024)));
  int checked = 0;
  for (const Chunk& c : ReferenceChunks(o, data)) {
    if (c.hash == 0) continue;  // cut by max_size or the end
    const size_t last = c.offset + c.length - 1;
    ASSERT_TRUE(Bit(r.a, last)) << c.offset;
    EXPECT_EQ(c.hash, BuzhashDirect(data.data(), last, BuzhashTable().data()));
    for (size_t p = c.offset + o.min_size; p < last; ++p) {
      ASSERT_FALSE(Bit(r.a, p)) << p;
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

class BuzhashDiffTest : public KernelDiffTest {
 protected:
  void CheckBuzhash(const uint8_t* data, size_t begin, size_t end,
                    const BuzhashParams& params, const std::string& what) {
    const Result want = RunBuzhash(ScalarKernelSet(), data, begin, end, params);
    const Result got = RunBuzhash(*kernel_, data, begin, end, params);
    ASSERT_TRUE(SameResult(want, got, begin))
        << "buzhash " << what << " d " << params.discriminator << " begin "
        << begin << " end " << end;
  }
};

// The candidate test without a division, on hashes where it could go
// wrong: 0, d - 1 and its neighbours, the last h with h % d == d - 1 below
// 2^32, 2^32 - 1 (where h + 1 wraps) and 2^31, for odd d, powers of two and
// even d with an odd factor. Windows crafted to those hashes, one every 48
// bytes, at several alignments of the range.
TEST_P(BuzhashDiffTest, EdgeHashes) {
  for (uint32_t d : SomeBuzhashDivisors()) {
    const uint64_t last_hit = (uint64_t{0xFFFFFFFF} + 1) / d * d - 1;
    // 14413: the false boundary of desync's earlier fast test (v1.0.1 to
    // v1.0.3) for d 49535.
    std::vector<uint32_t> targets = {
        0,         1,          d - 1,      d,
        2 * d - 1, 2 * d,      0xFFFFFFFF, 0xFFFFFFFE,
        14413,     0x80000000, 0x7FFFFFFF, static_cast<uint32_t>(last_hit)};
    if (d >= 2) targets.push_back(d - 2);
    if (last_hit >= d) targets.push_back(static_cast<uint32_t>(last_hit - d));
    Bytes data;
    std::vector<size_t> crafted;
    for (uint32_t target : targets) {
      const std::vector<uint8_t> w = WindowWithHash(target);
      data.insert(data.end(), w.begin(), w.end());
      crafted.push_back(data.size() - 1);
    }
    const Bytes tail = RandomBytes(200, d);
    data.insert(data.end(), tail.begin(), tail.end());
    for (size_t begin : {0, 1, 5, 47, 48, 63, 64, 100}) {
      const BuzhashParams params = CasyncBuzhash(d);
      CheckBuzhash(data.data(), begin, data.size(), params, "crafted");
      if (HasFatalFailure()) return;
      const Result r =
          RunBuzhash(*kernel_, data.data(), begin, data.size(), params);
      for (size_t i = 0; i < targets.size(); ++i) {
        if (crafted[i] < begin) continue;
        ASSERT_EQ(Bit(r.a, crafted[i] - begin), targets[i] % d == d - 1)
            << "h " << targets[i] << " d " << d << " begin " << begin;
      }
    }
  }
}

// Every length 0..300 at many begins, each buffer ending at a guard page
// and, separately, starting at one.
TEST_P(BuzhashDiffTest, EveryLengthUpTo300) {
  const std::vector<size_t> begins = {0, 1, 17, 47, 48, 63, 64, 65, 255, 1000};
  const size_t size = 1000 + 300;
  GuardedBuffer buffer(size);
  for (const DataSet& set : DataSets(size)) {
    for (size_t begin : begins) {
      for (size_t len = 0; len <= 300; ++len) {
        const size_t end = begin + len;
        for (auto align : {GuardedBuffer::Align::kEndAtGuard,
                           GuardedBuffer::Align::kStartAtGuard}) {
          const uint8_t* d = buffer.Place(set.bytes.data(), end, align);
          for (uint32_t div : {3u, 64u}) {
            CheckBuzhash(d, begin, end, CasyncBuzhash(div), set.name);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Lengths at vector, word, block and lane edges and segment-sized ranges,
// with every discriminator of SomeBuzhashDivisors.
TEST_P(BuzhashDiffTest, EdgeLengthsEveryDivisor) {
  ForEachEdgeRange(
      {0, 1, 48, 255, 4095},
      LengthsAround({64, 128, 256, 512, 1024, 4096, 16384},
                    {65535, 65536, 100000, size_t{1} << 18,
                     (size_t{1} << 20) + 1}),
      [&](const uint8_t* d, size_t begin, size_t end, const std::string& name) {
        for (uint32_t div : SomeBuzhashDivisors()) {
          CheckBuzhash(d, begin, end, CasyncBuzhash(div), name);
          if (HasFatalFailure()) return;
        }
      });
}

// Random ranges with casync's and a random table, and the pure-function
// property: word-aligned pieces of a range give the bits of the whole.
TEST_P(BuzhashDiffTest, RandomRangesAndPieces) {
  const size_t size = 1 << 22;
  const Bytes data = RandomBytes(size, 98);
  std::mt19937_64 rng(6);
  std::vector<uint32_t> random_table(256);
  for (uint32_t& e : random_table) e = static_cast<uint32_t>(rng());
  const std::vector<uint32_t> divisors = SomeBuzhashDivisors();
  for (int iter = 0; iter < 40; ++iter) {
    const size_t begin = rng() % (size / 2);
    const size_t end = begin + rng() % (size - begin);
    const BuzhashParams params{
        iter % 2 == 0 ? BuzhashTable().data() : random_table.data(),
        divisors[rng() % divisors.size()]};
    CheckBuzhash(data.data(), begin, end, params, "random");
    if (HasFatalFailure()) return;
    const Result whole = RunBuzhash(*kernel_, data.data(), begin, end, params);
    const Result pieces = InRandomPieces(begin, end, rng, [&](size_t b, size_t e) {
      return RunBuzhash(*kernel_, data.data(), b, e, params);
    });
    ASSERT_TRUE(SameResult(whole, pieces, begin)) << "buzhash pieces";
  }
}

INSTANTIATE_TEST_SUITE_P(VsScalar, BuzhashDiffTest,
                         ::testing::ValuesIn(WiderKernels()),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// ----------------------------------------------------------------- rabin --

Result RunRabin(const KernelSet& k, const uint8_t* data, size_t begin,
                size_t end, const RabinParams& params) {
  Bitmap h(end - begin);
  k.rabin(data, begin, end, params, h.data());
  return {h.words(), {}, h.CanariesIntact()};
}

// restic's tables for its test polynomial and for another irreducible one.
const RabinTables& ResticTables(int which) {
  static const RabinTables* const kTables[] = {
      new RabinTables(MakeRabinTables(0x3DA3358B4DC173)),
      new RabinTables(MakeRabinTables(0x2482734cacca49))};
  return *kTables[which];
}

RabinParams Rabin(uint64_t mask, int which = 0) {
  return {ResticTables(which).out.data(), ResticTables(which).mod.data(), mask};
}

// Masks: dense (every position, or a few bits: bits collected per word) and
// sparse (the branch per candidate), up to restic's largest average, 16 MiB.
std::vector<uint64_t> SomeRabinMasks() {
  return {0, 0x1, 0xFF, 0x1FF, 0x3FF, 0xFFFF, 0xFFFFF, 0xFFFFFF};
}

// D(p) of functions.h without rolling: the 64-byte window (fewer bytes
// before p = 63) appended one byte at a time to a zero digest, which is
// restic's appendByte with its mod table.
uint64_t RabinDirect(const uint8_t* data, size_t p, const RabinTables& t) {
  uint64_t d = 0;
  for (size_t q = p >= 63 ? p - 63 : 0; q <= p; ++q) {
    d = ((d << 8) | data[q]) ^ t.mod[d >> 45];
  }
  return d;
}

TEST(ScalarKernelTest, RabinIsTheWindowDefinition) {
  const Bytes data = RandomBytes(2000, 5);
  for (uint64_t mask : {uint64_t{0x3}, uint64_t{0x1F}, uint64_t{0}}) {
    for (size_t begin : {0, 1, 62, 63, 64, 65, 100, 1999}) {
      const Result r = RunRabin(ScalarKernelSet(), data.data(), begin,
                                data.size(), Rabin(mask));
      ASSERT_TRUE(r.canaries);
      for (size_t p = begin; p < data.size(); ++p) {
        ASSERT_EQ(Bit(r.a, p - begin),
                  (RabinDirect(data.data(), p, ResticTables(0)) & mask) == 0)
            << "mask " << mask << " begin " << begin << " p " << p;
      }
      const size_t n = data.size() - begin;
      if (n % 64 != 0) {
        EXPECT_EQ(r.a.back() >> (n % 64), 0u);
      }
    }
  }
}

// Every rabin chunk cut at a candidate ends on a kernel bit whose digest is
// the chunk's hash, and no bit lies between length min_size and the cut.
TEST(ScalarKernelTest, RabinBitsExplainTheReferenceCuts) {
  ChunkerOptions o = DefaultOptions(Algorithm::kRabin);
  o.min_size = 256;
  o.avg_size = 1024;
  o.max_size = 8192;
  const Bytes data = RandomBytes(1 << 19, 10);
  const Result r =
      RunRabin(ScalarKernelSet(), data.data(), 0, data.size(), Rabin(1023));
  int checked = 0;
  for (const Chunk& c : ReferenceChunks(o, data)) {
    if (c.hash == 0) continue;  // cut by max_size or the end
    const size_t last = c.offset + c.length - 1;
    ASSERT_TRUE(Bit(r.a, last)) << c.offset;
    EXPECT_EQ(c.hash, RabinDirect(data.data(), last, ResticTables(0)));
    for (size_t p = c.offset + o.min_size - 1; p < last; ++p) {
      ASSERT_FALSE(Bit(r.a, p)) << p;
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

class RabinDiffTest : public KernelDiffTest {
 protected:
  void CheckRabin(const uint8_t* data, size_t begin, size_t end,
                  const RabinParams& params, const std::string& what) {
    const Result want = RunRabin(ScalarKernelSet(), data, begin, end, params);
    const Result got = RunRabin(*kernel_, data, begin, end, params);
    ASSERT_TRUE(SameResult(want, got, begin))
        << "rabin " << what << " mask 0x"
        << absl::StrCat(absl::Hex(params.mask)) << " begin " << begin << " end "
        << end;
  }
};

// Every length 0..300 at many begins (at 0, inside the first window, past
// it), each buffer ending at a guard page and, separately, starting at one.
TEST_P(RabinDiffTest, EveryLengthUpTo300) {
  const std::vector<size_t> begins = {0, 1, 17, 62, 63, 64, 65, 127, 255, 1000};
  const size_t size = 1000 + 300;
  GuardedBuffer buffer(size);
  for (const DataSet& set : DataSets(size)) {
    for (size_t begin : begins) {
      for (size_t len = 0; len <= 300; ++len) {
        const size_t end = begin + len;
        for (auto align : {GuardedBuffer::Align::kEndAtGuard,
                           GuardedBuffer::Align::kStartAtGuard}) {
          const uint8_t* d = buffer.Place(set.bytes.data(), end, align);
          for (uint64_t mask : {uint64_t{0xF}, uint64_t{0x3FF}}) {
            CheckRabin(d, begin, end, Rabin(mask), set.name);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Lengths at word and lane edges (six lanes of whole words) and
// segment-sized ranges, with every mask of SomeRabinMasks.
TEST_P(RabinDiffTest, EdgeLengthsEveryMask) {
  ForEachEdgeRange(
      {0, 1, 63, 64, 255, 4095},
      LengthsAround({64, 128, 384, 448, 512, 1024, 4096, 16384},
                    {6 * 64 * 7 + 1, 65535, 65536, 100000, size_t{1} << 18,
                     (size_t{1} << 20) + 1}),
      [&](const uint8_t* d, size_t begin, size_t end, const std::string& name) {
        for (uint64_t mask : SomeRabinMasks()) {
          CheckRabin(d, begin, end, Rabin(mask), name);
          if (HasFatalFailure()) return;
        }
      });
}

// Random ranges with both polynomials and every mask, and the pure-function
// property: word-aligned pieces of a range give the bits of the whole.
TEST_P(RabinDiffTest, RandomRangesAndPieces) {
  const size_t size = 1 << 22;
  const Bytes data = RandomBytes(size, 97);
  const std::vector<uint64_t> masks = SomeRabinMasks();
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 40; ++iter) {
    const size_t begin = rng() % (size / 2);
    const size_t end = begin + rng() % (size - begin);
    const RabinParams params =
        Rabin(masks[rng() % masks.size()], static_cast<int>(iter % 2));
    CheckRabin(data.data(), begin, end, params, "random");
    if (HasFatalFailure()) return;
    const Result whole = RunRabin(*kernel_, data.data(), begin, end, params);
    const Result pieces = InRandomPieces(begin, end, rng, [&](size_t b, size_t e) {
      return RunRabin(*kernel_, data.data(), b, e, params);
    });
    ASSERT_TRUE(SameResult(whole, pieces, begin)) << "rabin pieces";
  }
}

INSTANTIATE_TEST_SUITE_P(VsScalar, RabinDiffTest,
                         ::testing::ValuesIn(WiderKernels()),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// ------------------------------------------------------------- repmaxcdc --

// The group maxima of the repmaxcdc kernel (functions.h): one word per 64
// positions, the largest W(p).
Result RunRepMaxCdc(const KernelSet& k, const uint8_t* data, size_t begin,
                    size_t end, const uint64_t* gear) {
  Bitmap max(end - begin);
  k.repmaxcdc(data, begin, end, gear, max.data());
  return {max.words(), {}, max.CanariesIntact()};
}

// The first differing group, or success: the words are maxima, not bits.
::testing::AssertionResult SameMaxima(const Result& want, const Result& got) {
  if (!got.canaries) {
    return ::testing::AssertionFailure() << "wrote past the last group word";
  }
  if (want.a.size() != got.a.size()) {
    return ::testing::AssertionFailure()
           << "word count " << got.a.size() << ", want " << want.a.size();
  }
  for (size_t g = 0; g < want.a.size(); ++g) {
    if (want.a[g] == got.a[g]) continue;
    return ::testing::AssertionFailure()
           << "group " << g << ": want 0x" << absl::StrCat(absl::Hex(want.a[g]))
           << ", got 0x" << absl::StrCat(absl::Hex(got.a[g]));
  }
  return ::testing::AssertionSuccess();
}

TEST(ScalarKernelTest, RepMaxCdcIsTheGroupMaximumOfW) {
  for (const DataSet& set : DataSets(1500)) {
    for (const GearTable& table : GearTables()) {
      for (size_t begin : {0, 1, 62, 63, 64, 100, 1499}) {
        const Result r =
            RunRepMaxCdc(ScalarKernelSet(), set.bytes.data(), begin,
                         set.bytes.size(), table.gear.data());
        ASSERT_TRUE(r.canaries);
        for (size_t g = 0; g < r.a.size(); ++g) {
          uint64_t want = 0;
          const size_t first = begin + 64 * g;
          for (size_t p = first; p < std::min(first + 64, set.bytes.size());
               ++p) {
            want = std::max(want,
                            WindowedGear(set.bytes.data(), p, table.gear.data()));
          }
          ASSERT_EQ(r.a[g], want) << set.name << " " << table.name << " begin "
                                  << begin << " group " << g;
        }
      }
    }
  }
}

class RepMaxCdcDiffTest : public KernelDiffTest {
 protected:
  void CheckRepMaxCdc(const uint8_t* data, size_t begin, size_t end,
                      const uint64_t* gear, const std::string& what) {
    const Result want = RunRepMaxCdc(ScalarKernelSet(), data, begin, end, gear);
    const Result got = RunRepMaxCdc(*kernel_, data, begin, end, gear);
    ASSERT_TRUE(SameMaxima(want, got))
        << "repmaxcdc " << what << " begin " << begin << " end " << end;
  }
};

// Every length 0..600 (the lanes start at 8 whole groups) at several
// begins, against guard pages on both sides.
TEST_P(RepMaxCdcDiffTest, EveryLengthUpTo600) {
  const size_t size = 1000 + 600;
  GuardedBuffer buffer(size);
  const GearTable table = GearTables()[3];
  for (const DataSet& set : DataSets(size)) {
    for (size_t begin : {0, 1, 63, 64, 65, 1000}) {
      for (size_t len = 0; len <= 600; ++len) {
        for (auto align : {GuardedBuffer::Align::kEndAtGuard,
                           GuardedBuffer::Align::kStartAtGuard}) {
          const uint8_t* d = buffer.Place(set.bytes.data(), begin + len, align);
          CheckRepMaxCdc(d, begin, begin + len, table.gear.data(), set.name);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Lengths at lane and group edges up to segment sizes, every Gear table.
TEST_P(RepMaxCdcDiffTest, EdgeLengthsAndTables) {
  std::vector<size_t> lengths;
  for (size_t edge : {256, 512, 1024, 4096, 16384, 65536}) {
    for (size_t d = 0; d <= 130; d += 13) lengths.push_back(edge - 65 + d);
  }
  lengths.push_back((size_t{1} << 20) + 1);
  const size_t size = 4095 + (size_t{1} << 20) + 1;
  GuardedBuffer buffer(size);
  const std::vector<DataSet> sets = DataSets(size);
  for (const DataSet& set : {sets[0], sets[1], sets[3], sets[5]}) {
    for (const GearTable& table : GearTables()) {
      for (size_t begin : {0, 1, 48, 4095}) {
        for (size_t len : lengths) {
          const uint8_t* d = buffer.Place(set.bytes.data(), begin + len,
                                          GuardedBuffer::Align::kEndAtGuard);
          CheckRepMaxCdc(d, begin, begin + len, table.gear.data(),
                         set.name + " " + table.name);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Random ranges, and the pure-function property the engine's segments rely
// on: word-aligned pieces of a range give the words of the whole.
TEST_P(RepMaxCdcDiffTest, RandomRangesAndPieces) {
  const size_t size = 1 << 22;
  const Bytes data = RandomBytes(size, 77);
  const uint64_t* gear = FastCdcGearTable().data();
  std::mt19937_64 rng(8);
  for (int iter = 0; iter < 40; ++iter) {
    const size_t begin = rng() % (size / 2);
    const size_t end = begin + rng() % (size - begin);
    CheckRepMaxCdc(data.data(), begin, end, gear, "random");
    if (HasFatalFailure()) return;
    const Result whole = RunRepMaxCdc(*kernel_, data.data(), begin, end, gear);
    const Result pieces = InRandomPieces(begin, end, rng, [&](size_t b, size_t e) {
      return RunRepMaxCdc(*kernel_, data.data(), b, e, gear);
    });
    ASSERT_TRUE(SameMaxima(whole, pieces)) << "repmaxcdc pieces";
  }
}

INSTANTIATE_TEST_SUITE_P(VsScalar, RepMaxCdcDiffTest,
                         ::testing::ValuesIn(WiderKernels()),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace chunkd::chunking::kernels
