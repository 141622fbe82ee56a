// Deterministic data for benchmarks and tests: seeded random bytes and a
// versioned dataset (a base file plus successive edited versions).
//
// The output of every function here is part of the project's contract: a
// benchmark's chunk counts, a test's golden vectors and the ratios reported
// are only comparable across commits if the bytes are the same.
// So the generators are written out here (SplitMix64 and xoshiro256**, the
// public-domain generators of Vigna et al.) rather than taken from <random>,
// whose distributions are implementation-defined, and datagen_test.cc pins
// their output. Never change what an existing function returns; add a new
// one instead.
//
// The versioned dataset follows the synthetic recipe of RapidCDC (Ni and
// Jiang, "RapidCDC: Leveraging Duplicate Locality to Accelerate Chunking in
// CDC-based Deduplication Systems", SoCC 2019): a random base file, then
// versions that each apply a number of small modifications (~100 bytes) at
// random offsets of the previous version, so that most chunks of a version
// are duplicates of the one before it.
//
// Thread safety: the generators are values with no shared state; one object,
// one thread at a time. The free functions are thread-safe.
#ifndef CHUNKD_WORKLOAD_DATAGEN_H_
#define CHUNKD_WORKLOAD_DATAGEN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chunkd::workload {

// SplitMix64 (Steele, Lea and Flood, OOPSLA 2014; Vigna's C version): used to
// expand a 64-bit seed into a xoshiro state. Every seed, 0 included, is fine.
// Copyable.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// xoshiro256** 1.0 (Blackman and Vigna, 2018), its state the first four
// outputs of SplitMix64(seed). Fast enough to generate bytes at several GB/s.
// Copyable.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed);

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // A number in [0, bound): the high 64 bits of Next() * bound (Lemire's
  // multiply-shift; its bias, below bound / 2^64, does not matter here).
  // REQUIRES: bound > 0.
  uint64_t Below(uint64_t bound) {
    return static_cast<uint64_t>(
        (static_cast<unsigned __int128>(Next()) * bound) >> 64);
  }

  // Fills data[0, size) with successive outputs, least significant byte
  // first; a last partial word uses its low bytes and consumes the whole
  // output. The same on every platform (no dependence on endianness).
  void Fill(uint8_t* data, size_t size);

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t s_[4];
};

// `size` bytes of Xoshiro256(seed).Fill.
std::vector<uint8_t> RandomBytes(size_t size, uint64_t seed);

// The parameters of a versioned dataset. Defaults: the dataset of the
// chunking benchmarks, 8 versions of about 8 MiB (64 MiB in all).
struct VersionedOptions {
  // Bytes of version 0, the random base file. Default 8 MiB.
  size_t base_size = size_t{8} << 20;
  // Versions after the base. Default 7.
  size_t versions = 7;
  // Modifications that turn one version into the next. Default 100.
  size_t modifications = 100;
  // The mean length of a modification: each is uniform in
  // [(size + 1) / 2, size + size / 2]. Default 100 (50..150 bytes).
  // REQUIRES: >= 1.
  size_t modification_size = 100;
  // Default 1.
  uint64_t seed = 1;
};

// What a modification does to the previous version.
enum class EditKind : int {
  kInsert = 0,     // new random bytes before the offset
  kDelete = 1,     // the bytes from the offset on are dropped
  kOverwrite = 2,  // the bytes from the offset on are replaced, same length
};

// A base file and its versions; versions[0] is the base.
struct VersionedDataset {
  std::vector<std::vector<uint8_t>> versions;

  // Every version, one after the other: the stream a backup of all of them
  // would send (and the input of the versioned benchmarks).
  std::vector<uint8_t> Concatenated() const;
  // Sum of the versions' sizes.
  size_t total_size() const;
};

// The dataset for `options`. One Xoshiro256(seed) drives everything, in this
// order: the base file's bytes; then per version, first every modification's
// (offset, kind, length) — the offset uniform in [0, size of the previous
// version], the kind uniform over EditKind, the length as in
// VersionedOptions::modification_size — then, walking the modifications by
// offset (ties in drawing order), the random bytes of each insert and
// overwrite. Offsets refer to the previous version; a modification that
// starts inside the bytes an earlier one deleted or overwrote starts at their
// end instead, and deletes and overwrites stop at the end of the version.
// REQUIRES: options.modification_size >= 1.
VersionedDataset GenerateVersioned(const VersionedOptions& options);

}  // namespace chunkd::workload

#endif  // CHUNKD_WORKLOAD_DATAGEN_H_
