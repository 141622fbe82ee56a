#include "estimate/versioned_data.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/string_view.h"
#include "workload/datagen.h"

namespace chunkd::estimate {
namespace {

enum class Edit { kInsert, kDelete, kOverwrite };

struct PlannedEdit {
  size_t offset;
  Edit kind;
  size_t length;
};

void AppendRandom(workload::Xoshiro256* rng, size_t n, std::string* out) {
  const size_t at = out->size();
  out->resize(at + n);
  rng->Fill(reinterpret_cast<uint8_t*>(out->data() + at), n);
}

}  // namespace

VersionedData::VersionedData(const VersionedDataOptions& options)
    : options_(options), rng_(options.seed) {
  options_.edit_size = std::max<size_t>(options_.edit_size, 1);
}

absl::string_view VersionedData::Next() {
  if (given_ >= options_.versions) {
    current_.clear();
    return {};
  }
  if (given_ == 0) {
    current_.clear();
    AppendRandom(&rng_, options_.base_size, &current_);
  } else {
    current_ = Edited(current_);
  }
  ++given_;
  return current_;
}

std::string VersionedData::Edited(const std::string& previous) {
  std::vector<PlannedEdit> edits;
  for (size_t i = 0; i < options_.edits; ++i) {
    PlannedEdit e;
    e.offset = static_cast<size_t>(rng_.Below(previous.size() + 1));
    e.kind = static_cast<Edit>(rng_.Below(3));
    e.length = 1 + static_cast<size_t>(rng_.Below(2 * options_.edit_size));
    edits.push_back(e);
  }
  std::stable_sort(edits.begin(), edits.end(),
                   [](const PlannedEdit& a, const PlannedEdit& b) {
                     return a.offset < b.offset;
                   });
  std::string next;
  next.reserve(previous.size() + options_.edits * 2 * options_.edit_size);
  size_t pos = 0;  // bytes of `previous` consumed
  for (const PlannedEdit& e : edits) {
    const size_t at = std::max(pos, e.offset);
    next.append(previous, pos, at - pos);
    pos = at;
    const size_t span = std::min(e.length, previous.size() - pos);
    switch (e.kind) {
      case Edit::kInsert:
        AppendRandom(&rng_, e.length, &next);
        break;
      case Edit::kDelete:
        pos += span;
        break;
      case Edit::kOverwrite:
        AppendRandom(&rng_, span, &next);
        pos += span;
        break;
    }
  }
  next.append(previous, pos, std::string::npos);
  return next;
}

std::string VersionedData::All(const VersionedDataOptions& options) {
  VersionedData data(options);
  std::string out;
  for (absl::string_view v = data.Next(); !v.empty(); v = data.Next()) {
    out.append(v.data(), v.size());
  }
  return out;
}

}  // namespace chunkd::estimate
