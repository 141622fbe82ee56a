// The memory index's flat hash tables of fixed-size keys (docs/design.md,
// "The memory backend"). CompactTable<N> holds the entries: each is one
// slot of a flat array, the N-byte fingerprint, the id of its namespace,
// the chunk size and the reference count, N + 12 bytes in all (44 for
// SHA-256), with no pointer and no allocation of its own. MemoryIndex keeps
// next-size hints in a SlotArray of the same kind (InlineHints slots), and
// fingerprints of other lengths in a StringKeyTable.
//
// Open addressing with linear probing in Robin Hood order (along a run of
// occupied slots the entries sit in the order of their home slots), so
// that a lookup of an absent key stops as soon as it meets an entry whose
// home is past its own; removal shifts the entries behind back by one (no
// tombstones). The home slot is the hash scaled to the capacity, which need
// not be a power of two: a table grows by kGrowth when it would pass
// kMaxLoad full, so that it stays between kMaxLoad / kGrowth (0.72) and
// kMaxLoad (0.9) full: 49 to 61 bytes per SHA-256 entry, plus, while it
// grows, the old array until every entry has moved. Removing entries does
// not shrink it. Arrays of 256 KiB and more are mapped from the kernel
// directly, so that a table's old array goes back to the system at once.
//
// Reference counts are 64-bit: the slot holds the low part (up to
// ref_low_max, UINT32_MAX but for tests), and a count that passes it
// keeps its higher part in a side map, flagged in the slot.
//
// Not thread-safe: MemoryIndex locks a table's shard around every call.
#ifndef CHUNKD_INDEX_COMPACT_TABLE_H_
#define CHUNKD_INDEX_COMPACT_TABLE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace chunkd::index {

// Largest namespace id a CompactTable stores (ids start at 1; 0 marks an
// empty slot).
inline constexpr uint32_t kMaxNamespaceId = (uint32_t{1} << 22) - 1;

namespace compact_table_internal {
// Random per process (CompactKeyHash).
extern const uint64_t kSeed[3];
inline uint64_t Mum(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}
}  // namespace compact_table_internal

// The hash of (namespace id, key) the tables place entries by, seeded per
// process so that chosen fingerprints cannot pile up in one place. Its
// lowest bits are free for picking a shard: a table uses the highest.
// REQUIRES: n is a multiple of 16.
inline uint64_t CompactKeyHash(uint32_t ns_id, const unsigned char* key,
                               size_t n) {
  using compact_table_internal::kSeed;
  using compact_table_internal::Mum;
  uint64_t h = kSeed[0] ^ (uint64_t{ns_id} * 0x9e3779b97f4a7c15ull);
  for (size_t i = 0; i < n; i += 16) {
    uint64_t a;
    uint64_t b;
    std::memcpy(&a, key + i, 8);
    std::memcpy(&b, key + i + 8, 8);
    h = Mum(a ^ h, b ^ kSeed[1]);
  }
  return Mum(h ^ n, kSeed[2]);
}

// A fingerprint in a namespace, with its hash: CompactKeyHash(ns_id,
// bytes) for the compact tables.
struct TableKey {
  uint32_t ns_id = 0;  // 1..kMaxNamespaceId
  absl::string_view bytes;
  uint64_t hash = 0;

  const unsigned char* data() const {
    return reinterpret_cast<const unsigned char*>(bytes.data());
  }
};

struct TableAddResult {
  bool is_new = false;
  uint64_t refs = 0;
};
struct ReleaseResult {
  // The count left: 0 when the entry was removed or absent.
  uint64_t refs = 0;
  // The count reached 0 and the entry was removed...
  bool removed = false;
  // ...flagged by MarkHints.
  bool had_hints = false;
};

// The open addressing both tables share: slots of an N-byte key, a tag and
// a Value, in one flat array. The tag holds the namespace id (bits 0..21;
// 0 for an empty slot), the slot's distance from the key's home slot (bits
// 22..29; 255 for 255 and more, then computed from the hash), so that
// probing compares distances without hashing the entries it passes, and
// the owner's two flags (bits 30 and 31). Robin Hood linear probing,
// backward-shift removal, growth by kGrowth past kMaxLoad (see above).
template <size_t N, typename Value>
class SlotArray {
 public:
  static_assert(N % 16 == 0 && N > 0, "keys are whole 128-bit words");
  static_assert(std::is_trivially_copyable_v<Value> && alignof(Value) <= 4,
                "slots are moved as bytes and packed");
  // Fullest the array gets before it grows...
  static constexpr double kMaxLoad = 0.9;
  // ...by this factor.
  static constexpr double kGrowth = 1.25;
  struct Slot {
    unsigned char key[N];
    uint32_t tag;
    Value value;
  };
  static constexpr uint32_t kIdMask = kMaxNamespaceId;
  static constexpr int kDistanceShift = 22;
  static constexpr uint32_t kFar = 255;
  static constexpr uint32_t kDistanceMask = kFar << kDistanceShift;

  // `far`: the distance from which it is computed rather than stored
  // (kFar but for tests).
  explicit SlotArray(uint32_t far = kFar) : far_(std::min(far, kFar)) {}
  ~SlotArray();
  SlotArray(const SlotArray&) = delete;
  SlotArray& operator=(const SlotArray&) = delete;

  // Every call: REQUIRES key.bytes.size() == N.
  const Slot* Find(const TableKey& key) const;
  Slot* Find(const TableKey& key) {
    return const_cast<Slot*>(std::as_const(*this).Find(key));
  }
  // Adds the absent `key` with a zero value and no flags; returns its slot
  // (valid until the next Insert or Erase).
  Slot* Insert(const TableKey& key);
  // Removes the entry at `slot`.
  void Erase(Slot* slot);

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  // Bytes the slot array takes.
  size_t bytes() const { return capacity_ * sizeof(Slot); }

 private:
  size_t Home(uint64_t hash) const {
    return static_cast<size_t>(
        (static_cast<unsigned __int128>(hash) * capacity_) >> 64);
  }
  size_t HomeOf(const Slot& slot) const {
    return Home(CompactKeyHash(slot.tag & kIdMask, slot.key, N));
  }
  // How far slot `at` is from `home`, wrapping around the end.
  size_t Distance(size_t at, size_t home) const {
    return at >= home ? at - home : at + capacity_ - home;
  }
  size_t Next(size_t at) const { return at + 1 == capacity_ ? 0 : at + 1; }
  // How far `slot`, at `at`, is from its home.
  size_t DistanceOf(const Slot& slot, size_t at) const {
    const uint32_t stored = (slot.tag & kDistanceMask) >> kDistanceShift;
    return stored < far_ ? stored : Distance(at, HomeOf(slot));
  }
  void SetDistance(Slot& slot, size_t distance) const {
    const uint32_t stored =
        static_cast<uint32_t>(std::min<size_t>(distance, far_));
    slot.tag = (slot.tag & ~kDistanceMask) | (stored << kDistanceShift);
  }
  // Puts `slot` (absent, with hash `hash`) in Robin Hood order; returns
  // where it went. REQUIRES: a free slot.
  Slot* Place(Slot slot, uint64_t hash);
  void Grow();

  const uint32_t far_;
  Slot* slots_ = nullptr;
  size_t capacity_ = 0;
  size_t size_ = 0;
  // Most entries before the array grows: kMaxLoad * capacity_.
  size_t max_size_ = 0;
};

// The chunk size and the low part of the reference count of an entry.
struct EntryCounts {
  uint32_t size;
  uint32_t refs;
};

template <size_t N>
class CompactTable {
 public:
  using Slots = SlotArray<N, EntryCounts>;
  using Slot = typename Slots::Slot;
  static_assert(sizeof(Slot) == N + 12, "slots are packed");
  static constexpr double kMaxLoad = Slots::kMaxLoad;
  static constexpr double kGrowth = Slots::kGrowth;
  static constexpr uint32_t kHints = uint32_t{1} << 30;
  static constexpr uint32_t kSpilled = uint32_t{1} << 31;

  using AddResult = TableAddResult;

  // Tests pass a small `ref_low_max` (counts spill past it) or
  // `far_distance` (distances from it on are computed from the hash).
  explicit CompactTable(uint32_t ref_low_max = UINT32_MAX,
                        uint32_t far_distance = Slots::kFar)
      : ref_low_max_(ref_low_max), slots_(far_distance) {}

  // Every call: REQUIRES key.bytes.size() == N.
  bool Contains(const TableKey& key) const {
    return slots_.Find(key) != nullptr;
  }

  // Counts a reference, creating the entry (with `size`) if absent, but
  // only if `reserve()` returns true: nullopt (nothing done) otherwise.
  template <typename Reserve>
  std::optional<AddResult> Add(const TableKey& key, uint32_t size,
                               Reserve reserve) {
    if (Slot* slot = slots_.Find(key)) {
      return AddResult{false, AddRef(*slot)};
    }
    if (!reserve()) return std::nullopt;
    Slot* slot = slots_.Insert(key);
    slot->value.size = size;
    slot->value.refs = 1;
    return AddResult{true, 1};
  }

  // Drops a reference (nothing when the entry is absent).
  ReleaseResult Release(const TableKey& key);

  // Flags the entry as having next-size hints; false when it is absent.
  bool MarkHints(const TableKey& key);
  // Whether the entry is present and flagged.
  bool HasHints(const TableKey& key) const {
    const Slot* slot = slots_.Find(key);
    return slot != nullptr && (slot->tag & kHints) != 0;
  }
  // The entry's reference count, 0 when absent.
  uint64_t RefCount(const TableKey& key) const;

  size_t size() const { return slots_.size(); }
  size_t capacity() const { return slots_.capacity(); }
  // Entries whose count passed ref_low_max.
  size_t spilled() const { return spill_.size(); }
  // Bytes the slot array takes.
  size_t bytes() const { return slots_.bytes(); }

 private:
  uint64_t AddRef(Slot& slot);
  // "<ns_id><key>": the key of the spill map.
  static std::string SpillKey(const Slot& slot);

  const uint32_t ref_low_max_;
  Slots slots_;
  // Per entry flagged kSpilled: its reference count / (ref_low_max_ + 1).
  absl::flat_hash_map<std::string, uint64_t> spill_;
};

// One list of next-size hints kept in a slot: the chunking-parameter key's
// id (bits 0..15; MemoryIndex's registry), the count of sizes (bits
// 16..19) and of the run (bits 20..23), up to kInlineHintSizes sizes, most
// recent first, and the run recorded with the first (FingerprintIndex's
// NextHints).
struct InlineHints {
  uint32_t params;
  uint32_t sizes[2];
  uint32_t run[3];
};
inline constexpr size_t kInlineHintSizes = 2;

extern template class SlotArray<16, EntryCounts>;
extern template class SlotArray<32, EntryCounts>;
extern template class SlotArray<16, InlineHints>;
extern template class SlotArray<32, InlineHints>;
extern template class CompactTable<16>;
extern template class CompactTable<32>;

// The same interface for fingerprints of any other length (no digest the
// service accepts has one; callers of the library may): a hash map from
// "<ns_id><bytes>" to the entry, a few times the memory of a compact slot.
// key.hash is not used.
class StringKeyTable {
 public:
  using AddResult = TableAddResult;

  bool Contains(const TableKey& key) const {
    return map_.contains(MapKey(key));
  }
  template <typename Reserve>
  std::optional<AddResult> Add(const TableKey& key, uint32_t size,
                               Reserve reserve) {
    std::string map_key = MapKey(key);
    auto it = map_.find(map_key);
    if (it != map_.end()) return AddResult{false, ++it->second.refs};
    if (!reserve()) return std::nullopt;
    map_.emplace(std::move(map_key), Entry{size, false, 1});
    return AddResult{true, 1};
  }
  ReleaseResult Release(const TableKey& key);
  bool MarkHints(const TableKey& key);
  bool HasHints(const TableKey& key) const;
  uint64_t RefCount(const TableKey& key) const;
  size_t size() const { return map_.size(); }

 private:
  struct Entry {
    uint32_t size = 0;
    bool hints = false;
    uint64_t refs = 0;
  };
  static std::string MapKey(const TableKey& key);

  absl::flat_hash_map<std::string, Entry> map_;
};

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_COMPACT_TABLE_H_
