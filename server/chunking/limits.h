// Named bounds and defaults of every chunking parameter.
//
// Parameters arrive over the network, so ValidateOptions() checks them against
// these constants in every build; LimitsFor() publishes
// them, e.g. in GetServerInfo. Sizes are in bytes.
#ifndef CHUNKD_CHUNKING_LIMITS_H_
#define CHUNKD_CHUNKING_LIMITS_H_

#include <cstdint>

namespace chunkd::chunking {

inline constexpr uint32_t kKiB = 1024;
inline constexpr uint32_t kMiB = 1024 * 1024;

// fastcdc: the bounds of the Rust crate `fastcdc` v2020 (MINIMUM_MIN ..
// MAXIMUM_MAX), so that every parameter set we accept is one the crate
// accepts. The average is not required to be a power of two: like the crate
// we use round(log2(avg)) bits (REAPI's FAST_CDC_2020 only ever uses powers of
// two, where both agree).
inline constexpr uint32_t kFastCdcMinSizeLowerBound = 64;         // MINIMUM_MIN
inline constexpr uint32_t kFastCdcMinSizeUpperBound = 1 * kMiB;   // MINIMUM_MAX
inline constexpr uint32_t kFastCdcAvgSizeLowerBound = 256;        // AVERAGE_MIN
inline constexpr uint32_t kFastCdcAvgSizeUpperBound = 4 * kMiB;   // AVERAGE_MAX
inline constexpr uint32_t kFastCdcMaxSizeLowerBound = 1 * kKiB;   // MAXIMUM_MIN
inline constexpr uint32_t kFastCdcMaxSizeUpperBound = 16 * kMiB;  // MAXIMUM_MAX
inline constexpr uint32_t kFastCdcLevelLowerBound = 0;
inline constexpr uint32_t kFastCdcLevelUpperBound = 3;
inline constexpr uint32_t kFastCdcDefaultMinSize = 4 * kKiB;
inline constexpr uint32_t kFastCdcDefaultAvgSize = 16 * kKiB;
inline constexpr uint32_t kFastCdcDefaultMaxSize = 64 * kKiB;
inline constexpr uint32_t kFastCdcDefaultLevel = 1;
// REAPI FastCdc2020Params: avg 512 KiB by default, min = avg / 4,
// max = avg * 4, normalization level 2, seed 0.
inline constexpr uint32_t kFastCdcReapiAvgSize = 512 * kKiB;
inline constexpr uint32_t kFastCdcReapiLevel = 2;

// crc32 (SS-CDC): the same size ranges as fastcdc; the average must be a
// power of two because a candidate is `(crc & (avg - 1)) == 0`.
inline constexpr uint32_t kCrc32MinSizeLowerBound = 64;
inline constexpr uint32_t kCrc32MinSizeUpperBound = 1 * kMiB;
inline constexpr uint32_t kCrc32AvgSizeLowerBound = 256;
inline constexpr uint32_t kCrc32AvgSizeUpperBound = 4 * kMiB;
inline constexpr uint32_t kCrc32MaxSizeLowerBound = 1 * kKiB;
inline constexpr uint32_t kCrc32MaxSizeUpperBound = 16 * kMiB;
// The paper's defaults.
inline constexpr uint32_t kCrc32DefaultMinSize = 2 * kKiB;
inline constexpr uint32_t kCrc32DefaultAvgSize = 16 * kKiB;
inline constexpr uint32_t kCrc32DefaultMaxSize = 64 * kKiB;
// Bytes in the rolling window, the current byte included.
inline constexpr uint32_t kCrc32WindowSize = 256;

// seqcdc: min >= 1 is what the authors' scan needs (it compares byte min with
// byte min - 1); 64 keeps hand-made test inputs small. avg is not used for
// cutting (the authors' find_cutpoint ignores it) but is kept consistent.
inline constexpr uint32_t kSeqCdcMinSizeLowerBound = 64;
inline constexpr uint32_t kSeqCdcMinSizeUpperBound = 1 * kMiB;
inline constexpr uint32_t kSeqCdcAvgSizeLowerBound = 256;
inline constexpr uint32_t kSeqCdcAvgSizeUpperBound = 4 * kMiB;
inline constexpr uint32_t kSeqCdcMaxSizeLowerBound = 1 * kKiB;
inline constexpr uint32_t kSeqCdcMaxSizeUpperBound = 16 * kMiB;
// A strictly monotonic run of bytes has at most 255 steps (equal bytes do not
// count), so a longer SeqLength could never cut; 0 would cut on every
// opposing step in the authors' code.
inline constexpr uint32_t kSeqCdcSeqLengthLowerBound = 1;
inline constexpr uint32_t kSeqCdcSeqLengthUpperBound = 255;
// The authors count opposing steps in a uint16_t compared with `==`: a larger
// trigger would never fire there; 0 would fire on every supporting step.
inline constexpr uint32_t kSeqCdcSkipTriggerLowerBound = 1;
inline constexpr uint32_t kSeqCdcSkipTriggerUpperBound = 65535;
// 0 is allowed (a jump then only resets the opposing counter); a jump longer
// than max_size simply ends the chunk at max_size.
inline constexpr uint32_t kSeqCdcSkipSizeLowerBound = 0;
inline constexpr uint32_t kSeqCdcSkipSizeUpperBound = 1 * kMiB;
// The authors' 16 KiB profile (build/config_16kb_middleware24/seqcdc_16kb.conf
// in UWASL/dedup-bench), also our default.
inline constexpr uint32_t kSeqCdc16kMinSize = 8 * kKiB;
inline constexpr uint32_t kSeqCdc16kAvgSize = 16 * kKiB;
inline constexpr uint32_t kSeqCdc16kMaxSize = 32 * kKiB;
inline constexpr uint32_t kSeqCdc16kSeqLength = 5;
inline constexpr uint32_t kSeqCdc16kSkipTrigger = 50;
inline constexpr uint32_t kSeqCdc16kSkipSize = 512;
// The authors' 8 KiB profile: the DEFAULT_SEQ_* constants of
// dedup/include/chunking/seq_chunking.hpp in UWASL/dedup-bench.
inline constexpr uint32_t kSeqCdc8kMinSize = 4 * kKiB;
inline constexpr uint32_t kSeqCdc8kAvgSize = 8 * kKiB;
inline constexpr uint32_t kSeqCdc8kMaxSize = 16 * kKiB;
inline constexpr uint32_t kSeqCdc8kSeqLength = 5;
inline constexpr uint32_t kSeqCdc8kSkipTrigger = 50;
inline constexpr uint32_t kSeqCdc8kSkipSize = 256;

// fixed: every chunk but the last is exactly avg_size bytes.
// repmaxcdc: go-cdc needs min >= 64 (its Gear window); the bounds keep
// 2 * min + horizon, what one cut looks at, at most 24 MiB.
inline constexpr uint32_t kRepMaxCdcMinSizeLowerBound = 64;
inline constexpr uint32_t kRepMaxCdcMinSizeUpperBound = 4 * kMiB;
inline constexpr uint32_t kRepMaxCdcHorizonLowerBound = 0;
inline constexpr uint32_t kRepMaxCdcHorizonUpperBound = 16 * kMiB;
inline constexpr uint32_t kRepMaxCdcDefaultMinSize = 256 * kKiB;
inline constexpr uint32_t kRepMaxCdcDefaultHorizon = 8 * 256 * kKiB;
inline constexpr uint32_t kRepMaxCdcWindowSize = 64;

// rabin: restic's window of 64 bytes, so min >= 64; any average of
// SetAverageBits(0..24); its defaults.
inline constexpr uint32_t kRabinMinSizeLowerBound = 64;
inline constexpr uint32_t kRabinMinSizeUpperBound = 8 * kMiB;
inline constexpr uint32_t kRabinAvgSizeLowerBound = 1;
inline constexpr uint32_t kRabinAvgSizeUpperBound = 16 * kMiB;
inline constexpr uint32_t kRabinMaxSizeLowerBound = 64;
inline constexpr uint32_t kRabinMaxSizeUpperBound = 16 * kMiB;
inline constexpr uint32_t kRabinDefaultMinSize = 512 * kKiB;
inline constexpr uint32_t kRabinDefaultAvgSize = 1 * kMiB;
inline constexpr uint32_t kRabinDefaultMaxSize = 8 * kMiB;
inline constexpr uint64_t kRabinPolynomialLowerBound = uint64_t{1} << 53;
inline constexpr uint64_t kRabinPolynomialUpperBound = (uint64_t{1} << 54) - 1;
inline constexpr uint64_t kRabinDefaultPolynomial = 0x3DA3358B4DC173;
inline constexpr uint32_t kRabinWindowSize = 64;

// buzhash: desync needs min >= its window of 48 bytes and min <= avg <=
// max; its discriminator formula is positive for avg up to ~9.3 MB.
inline constexpr uint32_t kBuzhashMinSizeLowerBound = 48;
inline constexpr uint32_t kBuzhashMinSizeUpperBound = 4 * kMiB;
inline constexpr uint32_t kBuzhashAvgSizeLowerBound = 48;
inline constexpr uint32_t kBuzhashAvgSizeUpperBound = 4 * kMiB;
inline constexpr uint32_t kBuzhashMaxSizeLowerBound = 48;
inline constexpr uint32_t kBuzhashMaxSizeUpperBound = 16 * kMiB;
inline constexpr uint32_t kBuzhashDefaultMinSize = 16 * kKiB;
inline constexpr uint32_t kBuzhashDefaultAvgSize = 64 * kKiB;
inline constexpr uint32_t kBuzhashDefaultMaxSize = 256 * kKiB;
inline constexpr uint32_t kBuzhashWindowSize = 48;

inline constexpr uint32_t kFixedSizeLowerBound = 64;
inline constexpr uint32_t kFixedSizeUpperBound = 16 * kMiB;
inline constexpr uint32_t kFixedDefaultSize = 16 * kKiB;

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_LIMITS_H_
