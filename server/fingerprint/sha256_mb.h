// Multi-buffer SHA-256: the digests of many messages (a group of chunks)
// computed together.
//
// One SHA-256 message cannot go faster than the latency of the CPU's SHA
// round instruction, since every round depends on the one before; OpenSSL
// reaches that bound. Chunks are independent messages, so the `shani-xN`
// implementations hash N of them at once on one core, their rounds interleaved
// (shani/sha256_shani.cc): N lanes each run one message's 64-byte blocks and
// take the next message when theirs ends (longest messages first, so that
// the lanes run out of work at about the same time). They need the SHA
// extensions with SSE4.1 and SSSE3 (Intel since Ice Lake and Goldmont, AMD
// since Zen); elsewhere `openssl` (OpenSSL's SHA256(), one message at a time)
// is the best. The digests are the same whatever the implementation.
//
// The implementation is chosen once per process: $CHUNKD_SHA256 when set (a
// name below, or "shani" for the best shani-xN), else the best this CPU runs.
// An unknown or unsupported name is an error, never a silent fallback.
//
// Thread safety: every function is thread-safe.
#ifndef CHUNKD_FINGERPRINT_SHA256_MB_H_
#define CHUNKD_FINGERPRINT_SHA256_MB_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace chunkd::fingerprint {

// One way to compute the SHA-256 of many messages.
struct Sha256Impl {
  const char* name;  // "openssl", "shani-x1" .. "shani-x4"
  int lanes;         // messages in flight per call; 0 for openssl
};

// The name of the environment variable that forces an implementation.
inline constexpr char kSha256EnvVar[] = "CHUNKD_SHA256";

// Every implementation built into this binary, best first: shani-x4, shani-x3,
// shani-x2, shani-x1, openssl (the shani ones on x86-64 only).
absl::Span<const Sha256Impl* const> AllSha256Impls();

// The CPU features (names as in /proc/cpuinfo: "sha_ni", "sse4_1",
// "ssse3") that `impl` needs and this CPU lacks, or "not built for this
// architecture"; empty when this CPU runs it.
std::vector<std::string> Sha256ImplMissing(const Sha256Impl& impl);

// The best implementation this CPU runs.
const Sha256Impl& BestSha256Impl();

// The implementation called `name`; "shani" is the best shani-xN.
// INVALID_ARGUMENT for an unknown name (listing the known ones),
// FAILED_PRECONDITION when this CPU cannot run it (naming what it lacks).
absl::StatusOr<const Sha256Impl*> FindSha256Impl(absl::string_view name);

// $CHUNKD_SHA256 when set and not empty (errors as FindSha256Impl, the
// message naming the variable), else BestSha256Impl().
absl::StatusOr<const Sha256Impl*> DefaultSha256Impl();

// The implementation Sha256Many(messages, out) uses: DefaultSha256Impl(),
// decided at the first call. If $CHUNKD_SHA256 is invalid the process stops
// there with the error on stderr, so programs call DefaultSha256Impl() at
// start-up to report it properly (chunkd and chunkctl do).
const Sha256Impl& ActiveSha256Impl();

// The SHA-256 of each message: 32 bytes per message, one after the other,
// from `out`. With the active implementation, or with `implementation`, which
// this CPU must run (Sha256ImplMissing empty).
void Sha256Many(absl::Span<const absl::string_view> messages,
                unsigned char* out);
void Sha256Many(const Sha256Impl& impl,
                absl::Span<const absl::string_view> messages,
                unsigned char* out);

}  // namespace chunkd::fingerprint

#endif  // CHUNKD_FINGERPRINT_SHA256_MB_H_
