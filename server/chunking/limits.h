// Named bounds and defaults of every chunking parameter.
//
// They are declared once, in the table (proto/chunkd/v1/tables.json), and
// generated into chunkd/tables.h as k<Algorithm><Parameter>LowerBound,
// ...UpperBound and ...Default (kFastCdcMinSizeLowerBound, ...), with each
// algorithm's constants (kCrc32WindowSize, ...). Parameters arrive over the
// network, so ValidateOptions() checks them against these in every build;
// LimitsFor() publishes them, e.g. in GetServerInfo. Sizes are in bytes. Why
// each bound is what it is: docs/design.md, "Parameters, ranges and
// defaults", and the notes beside each row of the table.
#ifndef CHUNKD_CHUNKING_LIMITS_H_
#define CHUNKD_CHUNKING_LIMITS_H_

#include <cstdint>

#include "chunkd/tables.h"

namespace chunkd::chunking {

inline constexpr uint32_t kKiB = 1024;
inline constexpr uint32_t kMiB = 1024 * 1024;

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_LIMITS_H_
