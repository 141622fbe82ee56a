// NameIds: small integer ids for names (the memory index's namespaces and
// chunking-parameter keys), so that a table slot holds 4 bytes instead of
// the name. A name keeps its id while it is pinned (a call is using it) or
// used (something stored carries the id); then the id goes back to be
// reused by another name.
//
// Thread-safe: Pin and Unpin under one mutex, taken once per call of the
// index (not per fingerprint); uses are counted atomically by whoever holds
// a pin or, when dropping the last use without one, reported by id through
// ReleaseIfUnused.
#ifndef CHUNKD_INDEX_NAME_IDS_H_
#define CHUNKD_INDEX_NAME_IDS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace chunkd::index {

class NameIds {
 public:
  struct Name {
    std::string name;
    uint32_t id = 0;
    // Holders of a pin (guarded by the registry's mutex).
    uint64_t pins = 0;
    // Stored things carrying the id. Raised only under a pin.
    std::atomic<uint64_t> uses{0};
  };

  // Ids 1..max_id. With `by_id`, ById() works (an array of max_id + 1
  // pointers).
  NameIds(uint32_t max_id, bool by_id);
  NameIds(const NameIds&) = delete;
  NameIds& operator=(const NameIds&) = delete;

  // `name`, pinned: created if `create`; null when absent and not
  // `create`, or when every id is taken.
  Name* Pin(absl::string_view name, bool create);
  // Drops a pin; forgets the name if it is neither pinned nor used.
  void Unpin(Name* name);
  // After the caller dropped a use of `id` without holding a pin: forgets
  // the name with that id if it is neither pinned nor used.
  // REQUIRES: by_id.
  void ReleaseIfUnused(uint32_t id);
  // The name with id `id`. REQUIRES: by_id, and the name is used or pinned
  // (by the caller) while the result is in use.
  Name* ById(uint32_t id) const {
    return by_id_[id].load(std::memory_order_acquire);
  }
  // Names known.
  size_t size() const;

 private:
  // REQUIRES: mu_ held.
  void ForgetIfUnusedLocked(Name* name);

  const uint32_t max_id_;
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Name>>
      names_;                   // guarded by mu_
  std::vector<uint32_t> free_;  // guarded by mu_
  uint32_t next_id_ = 1;        // guarded by mu_
  // By id when by_id; written under mu_.
  std::unique_ptr<std::atomic<Name*>[]> by_id_;
};

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_NAME_IDS_H_
