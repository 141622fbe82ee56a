// SHA-256 of many messages with the x86 SHA extensions, several messages
// interleaved per core (sha256_shani.cc). Not for direct use: call
// fingerprint/sha256_mb.h, which checks that the CPU can run it.
//
// This header is included by the SHA translation unit, which is compiled
// with -msha -msse4.1 -mssse3: it declares plain types only, so that no
// inline function of a shared header is compiled with those flags
// (docs/design.md, "Kernels and their selection"; check_shani_object.cmake checks the object).
#ifndef CHUNKD_FINGERPRINT_SHANI_SHA256_SHANI_H_
#define CHUNKD_FINGERPRINT_SHANI_SHA256_SHANI_H_

#include <cstddef>

namespace chunkd::fingerprint::shani {

// One message and where its 32-byte digest goes.
struct Job {
  const unsigned char* data;
  size_t size;
  unsigned char* digest;
};

// The most messages hashed at once.
inline constexpr int kMaxLanes = 4;

// Hashes jobs[0..count) with `lanes` (1..kMaxLanes) messages in flight: each
// lane runs one message's 64-byte blocks, interleaved with the other lanes'
// blocks, and takes the next job when its message ends. Jobs start in the
// given order. Requires the CPU features SHA, SSE4.1 and SSSE3.
void HashJobs(const Job* jobs, size_t count, int lanes);

}  // namespace chunkd::fingerprint::shani

#endif  // CHUNKD_FINGERPRINT_SHANI_SHA256_SHANI_H_
