#include "index/name_ids.h"

namespace chunkd::index {

NameIds::NameIds(uint32_t max_id, bool by_id) : max_id_(max_id) {
  if (by_id) {
    by_id_ = std::make_unique<std::atomic<Name*>[]>(size_t{max_id} + 1);
  }
}

NameIds::Name* NameIds::Pin(absl::string_view name, bool create) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = names_.find(name);
  if (it == names_.end()) {
    if (!create) return nullptr;
    uint32_t id = 0;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else if (next_id_ <= max_id_) {
      id = next_id_++;
    } else {
      return nullptr;
    }
    it = names_.emplace(std::string(name), std::make_unique<Name>()).first;
    it->second->name = std::string(name);
    it->second->id = id;
    if (by_id_ != nullptr) {
      by_id_[id].store(it->second.get(), std::memory_order_release);
    }
  }
  ++it->second->pins;
  return it->second.get();
}

void NameIds::Unpin(Name* name) {
  std::lock_guard<std::mutex> lock(mu_);
  --name->pins;
  ForgetIfUnusedLocked(name);
}

void NameIds::ReleaseIfUnused(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  // The name may be gone already, or the id another name's by now: either
  // way it is forgotten only when nothing holds it.
  if (Name* name = by_id_[id].load(std::memory_order_acquire)) {
    ForgetIfUnusedLocked(name);
  }
}

void NameIds::ForgetIfUnusedLocked(Name* name) {
  // Uses rise only under a pin: unpinned and unused, it stays unused.
  if (name->pins != 0 || name->uses.load() != 0) return;
  free_.push_back(name->id);
  if (by_id_ != nullptr) {
    by_id_[name->id].store(nullptr, std::memory_order_release);
  }
  names_.erase(name->name);  // destroys *name
}

size_t NameIds::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return names_.size();
}

}  // namespace chunkd::index
