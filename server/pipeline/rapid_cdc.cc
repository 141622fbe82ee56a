#include "pipeline/rapid_cdc.h"

#include "absl/strings/str_cat.h"

namespace chunkd::pipeline {

absl::string_view HintTestName(HintTest test) {
  switch (test) {
    case HintTest::kOff:
      return "off";
    case HintTest::kFF:
      return "ff";
    case HintTest::kFFMT:
      return "ff_mt";
    case HintTest::kFFRWT:
      return "ff_rwt";
    case HintTest::kFFRWTFPT:
      return "ff_rwt_fpt";
  }
  return "off";
}

std::string HintParamsKey(const chunking::ChunkerOptions& o) {
  return absl::StrCat(chunking::AlgorithmName(o.algorithm), ":", o.min_size,
                      ":", o.avg_size, ":", o.max_size, ":",
                      o.normalization_level, ":", o.seed);
}

uint32_t EncodeHint(uint32_t size, uint8_t last_byte) {
  return ((size - 1) & 0xffffffu) | (uint32_t{last_byte} << 24);
}

}  // namespace chunkd::pipeline
