// RapidCDC next-chunk hints for Dedup: the pieces that do not depend on the
// stream's state — the acceptance tests, the hint encoding and the key hints
// are stored under (docs/design.md, "RapidCDC hints in Dedup"; why
// FF+RWT+FPT gives exactly the chunker's chunks: "Why FF+RWT+FPT is
// exact"). HintFollower (hint_follower.h) applies them; the rolling-window
// test itself is chunking::FastCdcBoundary (chunking/fastcdc_boundary.h).
//
// A hint is the size of the chunk that followed a chunk in an earlier stream,
// stored in the index under that chunk's fingerprint and the chunking
// parameters (HintParamsKey). Its value also carries the suggested chunk's
// last byte, for FF+MT.
//
// Thread safety: the functions are pure.
#ifndef CHUNKD_PIPELINE_RAPID_CDC_H_
#define CHUNKD_PIPELINE_RAPID_CDC_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"

namespace chunkd::pipeline {

enum class HintTest { kOff, kFF, kFFMT, kFFRWT, kFFRWTFPT };

// "off", "ff", "ff_mt", "ff_rwt", "ff_rwt_fpt": metric labels and docs.
absl::string_view HintTestName(HintTest test);

// The parameters that decide FastCDC's cuts, e.g.
// "fastcdc:4096:16384:65536:2:0" (algorithm, min, avg, max, level, seed).
std::string HintParamsKey(const chunking::ChunkerOptions& options);

// A hint value: the chunk's size (1..2^24) and its last byte.
uint32_t EncodeHint(uint32_t size, uint8_t last_byte);
inline uint32_t HintSize(uint32_t hint) { return (hint & 0xffffffu) + 1; }
inline uint8_t HintMarker(uint32_t hint) {
  return static_cast<uint8_t>(hint >> 24);
}

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_RAPID_CDC_H_
