#include "index/compact_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <new>
#include <random>
#include <utility>

namespace chunkd::index {

namespace compact_table_internal {
namespace {
uint64_t RandomWord() {
  std::random_device device;
  return (uint64_t{device()} << 32) ^ device();
}
}  // namespace
const uint64_t kSeed[3] = {RandomWord(), RandomWord() | 1, RandomWord() | 1};
}  // namespace compact_table_internal

namespace {

// Arrays from this size on are mapped from the kernel directly: their pages
// are resident only once written, and return to the system as soon as the
// table has grown out of them. (Through malloc, freed arrays below its
// dynamic mmap threshold, up to 32 MiB with glibc, would stay in the heap
// as holes that other allocations fragment.)
constexpr size_t kMapBytes = size_t{256} << 10;

void* AllocateZeroed(size_t bytes) {
  if (bytes >= kMapBytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
  }
  void* p = std::calloc(bytes, 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void Deallocate(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes >= kMapBytes) {
    munmap(p, bytes);
  } else {
    std::free(p);
  }
}

// Smallest capacity of a table that has entries.
constexpr size_t kMinCapacity = 8;

}  // namespace

template <size_t N, typename Value>
SlotArray<N, Value>::~SlotArray() {
  Deallocate(slots_, bytes());
}

template <size_t N, typename Value>
const typename SlotArray<N, Value>::Slot* SlotArray<N, Value>::Find(
    const TableKey& key) const {
  if (size_ == 0) return nullptr;
  size_t at = Home(key.hash);
  for (size_t distance = 0; distance <= size_; ++distance) {
    const Slot& slot = slots_[at];
    if (slot.tag == 0) return nullptr;
    if ((slot.tag & kIdMask) == key.ns_id &&
        std::memcmp(slot.key, key.data(), N) == 0) {
      return &slot;
    }
    // Robin Hood order: the key would have displaced an entry closer to
    // its home than the key is to its own.
    if (distance > 0 && DistanceOf(slot, at) < distance) return nullptr;
    at = Next(at);
  }
  return nullptr;
}

template <size_t N, typename Value>
typename SlotArray<N, Value>::Slot* SlotArray<N, Value>::Place(Slot slot,
                                                               uint64_t hash) {
  size_t at = Home(hash);
  size_t distance = 0;
  Slot* placed = nullptr;
  while (true) {
    Slot& resident = slots_[at];
    if (resident.tag == 0) {
      SetDistance(slot, distance);
      resident = slot;
      return placed != nullptr ? placed : &resident;
    }
    const size_t resident_distance = DistanceOf(resident, at);
    if (resident_distance < distance) {
      SetDistance(slot, distance);
      std::swap(resident, slot);
      if (placed == nullptr) placed = &resident;
      distance = resident_distance;
    }
    at = Next(at);
    ++distance;
  }
}

template <size_t N, typename Value>
void SlotArray<N, Value>::Grow() {
  const size_t grown =
      static_cast<size_t>(std::ceil(static_cast<double>(capacity_) * kGrowth));
  const size_t capacity = std::max(kMinCapacity, grown);
  Slot* const old_slots = slots_;
  const size_t old_capacity = capacity_;
  slots_ = static_cast<Slot*>(AllocateZeroed(capacity * sizeof(Slot)));
  capacity_ = capacity;
  max_size_ =
      std::min(capacity - 1,
               static_cast<size_t>(static_cast<double>(capacity) * kMaxLoad));
  // Home slots grow with the hash, so the old array holds its entries by
  // home in index order, but for those that wrapped around its end. Taken
  // in that order, an entry goes to the first free slot from its new home:
  // every entry placed before it is at home no later. Entries out of that
  // order (ties, wrapped ones) take the general way.
  size_t last_home = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < old_capacity; ++i) {
      const Slot& slot = old_slots[i];
      // Wrapped entries are in the run of entries at the array's start.
      if (slot.tag == 0 && pass == 1) break;
      if (slot.tag == 0) continue;
      const uint64_t hash = CompactKeyHash(slot.tag & kIdMask, slot.key, N);
      const size_t old_home = static_cast<size_t>(
          (static_cast<unsigned __int128>(hash) * old_capacity) >> 64);
      const bool wrapped = old_home > i;
      if (wrapped != (pass == 1)) continue;
      const size_t home = Home(hash);
      if (!wrapped && home >= last_home) {
        size_t at = home;
        while (at < capacity_ && slots_[at].tag != 0) ++at;
        if (at < capacity_) {
          slots_[at] = slot;
          SetDistance(slots_[at], at - home);
          last_home = home;
          continue;
        }
      }
      Place(slot, hash);
    }
  }
  Deallocate(old_slots, old_capacity * sizeof(Slot));
}

template <size_t N, typename Value>
typename SlotArray<N, Value>::Slot* SlotArray<N, Value>::Insert(
    const TableKey& key) {
  if (size_ + 1 > max_size_) Grow();
  Slot fresh{};
  std::memcpy(fresh.key, key.data(), N);
  fresh.tag = key.ns_id;
  ++size_;
  return Place(fresh, key.hash);
}

template <size_t N, typename Value>
void SlotArray<N, Value>::Erase(Slot* slot) {
  // Backward shift: the entries after it that are not at home move back by
  // one, which keeps every one of them reachable, in Robin Hood order.
  size_t at = static_cast<size_t>(slot - slots_);
  while (true) {
    const size_t next = Next(at);
    const Slot& following = slots_[next];
    if (following.tag == 0) break;
    const size_t distance = DistanceOf(following, next);
    if (distance == 0) break;
    slots_[at] = following;
    SetDistance(slots_[at], distance - 1);
    at = next;
  }
  slots_[at] = Slot{};
  --size_;
}

template <size_t N>
std::string CompactTable<N>::SpillKey(const Slot& slot) {
  const uint32_t id = slot.tag & Slots::kIdMask;
  std::string key(sizeof(id) + N, '\0');
  std::memcpy(key.data(), &id, sizeof(id));
  std::memcpy(key.data() + sizeof(id), slot.key, N);
  return key;
}

template <size_t N>
uint64_t CompactTable<N>::AddRef(Slot& slot) {
  uint64_t high = 0;
  if (slot.value.refs == ref_low_max_) {
    // Carry into the spill map.
    high = ++spill_[SpillKey(slot)];
    slot.tag |= kSpilled;
    slot.value.refs = 0;
  } else {
    ++slot.value.refs;
    if ((slot.tag & kSpilled) != 0) high = spill_.at(SpillKey(slot));
  }
  return high * (uint64_t{ref_low_max_} + 1) + slot.value.refs;
}

template <size_t N>
uint64_t CompactTable<N>::RefCount(const TableKey& key) const {
  const Slot* slot = slots_.Find(key);
  if (slot == nullptr) return 0;
  uint64_t high = 0;
  if ((slot->tag & kSpilled) != 0) high = spill_.at(SpillKey(*slot));
  return high * (uint64_t{ref_low_max_} + 1) + slot->value.refs;
}

template <size_t N>
bool CompactTable<N>::MarkHints(const TableKey& key) {
  Slot* slot = slots_.Find(key);
  if (slot == nullptr) return false;
  slot->tag |= kHints;
  return true;
}

template <size_t N>
ReleaseResult CompactTable<N>::Release(const TableKey& key) {
  Slot* slot = slots_.Find(key);
  if (slot == nullptr) return {};
  uint32_t& refs = slot->value.refs;
  if ((slot->tag & kSpilled) != 0) {
    auto it = spill_.find(SpillKey(*slot));
    if (refs == 0) {
      // Borrow from the spill map.
      refs = ref_low_max_;
      if (--it->second == 0) {
        spill_.erase(it);
        slot->tag &= ~kSpilled;
        return {refs, false, false};
      }
    } else {
      --refs;
    }
    return {it->second * (uint64_t{ref_low_max_} + 1) + refs, false, false};
  }
  if (--refs != 0) return {refs, false, false};
  const bool had_hints = (slot->tag & kHints) != 0;
  slots_.Erase(slot);
  return {0, true, had_hints};
}

template class SlotArray<16, EntryCounts>;
template class SlotArray<32, EntryCounts>;
template class SlotArray<16, InlineHints>;
template class SlotArray<32, InlineHints>;
template class CompactTable<16>;
template class CompactTable<32>;

std::string StringKeyTable::MapKey(const TableKey& key) {
  std::string map_key(sizeof(key.ns_id) + key.bytes.size(), '\0');
  std::memcpy(map_key.data(), &key.ns_id, sizeof(key.ns_id));
  if (!key.bytes.empty()) {
    std::memcpy(map_key.data() + sizeof(key.ns_id), key.bytes.data(),
                key.bytes.size());
  }
  return map_key;
}

ReleaseResult StringKeyTable::Release(const TableKey& key) {
  auto it = map_.find(MapKey(key));
  if (it == map_.end()) return {};
  if (--it->second.refs != 0) return {it->second.refs, false, false};
  const bool had_hints = it->second.hints;
  map_.erase(it);
  return {0, true, had_hints};
}

bool StringKeyTable::MarkHints(const TableKey& key) {
  auto it = map_.find(MapKey(key));
  if (it == map_.end()) return false;
  it->second.hints = true;
  return true;
}

bool StringKeyTable::HasHints(const TableKey& key) const {
  auto it = map_.find(MapKey(key));
  return it != map_.end() && it->second.hints;
}

uint64_t StringKeyTable::RefCount(const TableKey& key) const {
  auto it = map_.find(MapKey(key));
  return it == map_.end() ? 0 : it->second.refs;
}

}  // namespace chunkd::index
