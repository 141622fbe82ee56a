// Seeded versioned data for the Estimator's tests and benchmark: a random
// base, then versions that each apply small insertions, deletions and
// overwrites at random offsets of the version before, so that most of a
// version's chunks are copies of the previous version's. Unlike
// workload::GenerateVersioned, it holds one version at a time, so a data set
// of any size can be generated in pieces.
//
// Thread safety: one object, one thread at a time.
#ifndef CHUNKD_ESTIMATE_VERSIONED_DATA_H_
#define CHUNKD_ESTIMATE_VERSIONED_DATA_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "workload/datagen.h"

namespace chunkd::estimate {

struct VersionedDataOptions {
  // Bytes of the base, version 0. Default 4 MiB.
  size_t base_size = size_t{4} << 20;
  // Versions, the base included. Default 8.
  size_t versions = 8;
  // Edits that turn one version into the next. Default 64.
  size_t edits = 64;
  // Each edit's length is uniform in [1, 2 * edit_size]. Default 64.
  // REQUIRES: >= 1.
  size_t edit_size = 64;
  // Default 1.
  uint64_t seed = 1;
};

// The versions one after the other. The same options give the same bytes.
class VersionedData {
 public:
  explicit VersionedData(const VersionedDataOptions& options);
  VersionedData(const VersionedData&) = delete;
  VersionedData& operator=(const VersionedData&) = delete;

  // The next version (the base first); empty once every version was given.
  // Valid until the next call.
  absl::string_view Next();

  // Every version concatenated (small data sets only).
  static std::string All(const VersionedDataOptions& options);

 private:
  std::string Edited(const std::string& previous);

  VersionedDataOptions options_;
  workload::Xoshiro256 rng_;
  size_t given_ = 0;
  std::string current_;
};

}  // namespace chunkd::estimate

#endif  // CHUNKD_ESTIMATE_VERSIONED_DATA_H_
