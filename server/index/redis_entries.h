// RedisEntries: the keys, and in the bucket layout the fields, of a batch
// op's entries (redis_ops.h), in either layout: the buckets of
// redis_layout.h or, with no BucketLayout, the key-per-entry layout of
// chunkd 0.3.
//
// Thread safety: one op's; not shared.
#ifndef CHUNKD_INDEX_REDIS_ENTRIES_H_
#define CHUNKD_INDEX_REDIS_ENTRIES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "index/redis_batch.h"
#include "index/redis_layout.h"

namespace chunkd::index {

// An op's entries: their keys (in the op's keys) and, in the bucket
// layout, their fields. `layout` nullptr: the key-per-entry layout.
class RedisEntries {
 public:
  explicit RedisEntries(const BucketLayout* layout) : layout_(layout) {}
  bool buckets() const { return layout_ != nullptr; }
  void Add(absl::string_view ns, absl::string_view fp,
           std::vector<std::string>* keys) {
    if (layout_ == nullptr) {
      keys->push_back(LegacyEntryKey(ns, fp));
    } else {
      keys->push_back(layout_->BucketKey(ns, fp));
      fields_.push_back(layout_->Field(fp));
    }
  }
  absl::string_view field(size_t i) const { return fields_[i]; }
  // Appends the fields of `items` (bucket layout only).
  void AddFields(absl::Span<const size_t> items, RedisArgs& args) const {
    if (layout_ == nullptr) return;
    for (size_t i : items) args.Add(fields_[i]);
  }

 private:
  const BucketLayout* layout_;
  std::vector<absl::string_view> fields_;  // into the caller's fingerprints
};

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_ENTRIES_H_
