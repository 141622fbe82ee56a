#include "fingerprint/sha256_mb.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "platform/isa.h"

#ifdef CHUNKD_SHA256_SHANI
#include "fingerprint/shani/sha256_shani.h"
#endif

namespace chunkd::fingerprint {
namespace {

constexpr size_t kDigestBytes = 32;

constexpr Sha256Impl kOpenSsl = {"openssl", 0};
#ifdef CHUNKD_SHA256_SHANI
constexpr Sha256Impl kShaNi1 = {"shani-x1", 1};
constexpr Sha256Impl kShaNi2 = {"shani-x2", 2};
constexpr Sha256Impl kShaNi3 = {"shani-x3", 3};
constexpr Sha256Impl kShaNi4 = {"shani-x4", 4};
// Best first. sha256_bench on a Zen 4 core: four lanes 1.7x OpenSSL, three
// 1.6x, two 1.5x, one 1.03x (docs/benchmarks.md, "SHA-256"). One message waits
// for each round's latency; two lanes still leave the SHA unit idle part of
// the time, four keep it busy at its throughput.
constexpr const Sha256Impl* kImpls[] = {&kShaNi4, &kShaNi3, &kShaNi2, &kShaNi1,
                                        &kOpenSsl};
// Exactly the instruction sets sha256_shani.cc is compiled for.
constexpr uint32_t kShaNiFeatures =
    platform::kSha | platform::kSse41 | platform::kSsse3;
#else
constexpr const Sha256Impl* kImpls[] = {&kOpenSsl};
#endif

void HashWithOpenSsl(absl::Span<const absl::string_view> messages,
                     unsigned char* out) {
  for (size_t i = 0; i < messages.size(); ++i) {
    SHA256(reinterpret_cast<const unsigned char*>(messages[i].data()),
           messages[i].size(), out + kDigestBytes * i);
  }
}

const Sha256Impl* Decide() {
  absl::StatusOr<const Sha256Impl*> impl = DefaultSha256Impl();
  if (!impl.ok()) {
    std::fprintf(stderr, "chunkd: %s\n",
                 std::string(impl.status().message()).c_str());
    std::abort();
  }
  return *impl;
}

}  // namespace

absl::Span<const Sha256Impl* const> AllSha256Impls() { return kImpls; }

std::vector<std::string> Sha256ImplMissing(const Sha256Impl& impl) {
  if (impl.lanes == 0) return {};
#ifdef CHUNKD_SHA256_SHANI
  return platform::MissingFeatures(kShaNiFeatures, platform::CpuFeatures());
#else
  return {"not built for this architecture"};
#endif
}

const Sha256Impl& BestSha256Impl() {
  for (const Sha256Impl* impl : kImpls) {
    if (Sha256ImplMissing(*impl).empty()) return *impl;
  }
  return kOpenSsl;
}

absl::StatusOr<const Sha256Impl*> FindSha256Impl(absl::string_view name) {
  if (name == "shani") {
    const Sha256Impl& best = BestSha256Impl();
    if (best.lanes > 0) return &best;
    // Report what this CPU lacks for the multi-buffer code.
    name = kImpls[0]->name;
  }
  std::vector<std::string> names;
  for (const Sha256Impl* impl : kImpls) {
    if (name != impl->name) {
      names.emplace_back(impl->name);
      continue;
    }
    std::vector<std::string> missing = Sha256ImplMissing(*impl);
    if (!missing.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sha256 implementation '", name, "' cannot run on this CPU: ",
          absl::StrJoin(missing, ", "), " missing"));
    }
    return impl;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("sha256 implementation '", name, "' is not one of: shani, ",
                   absl::StrJoin(names, ", ")));
}

absl::StatusOr<const Sha256Impl*> DefaultSha256Impl() {
  const char* forced = std::getenv(kSha256EnvVar);
  if (forced == nullptr || *forced == '\0') return &BestSha256Impl();
  absl::StatusOr<const Sha256Impl*> impl = FindSha256Impl(forced);
  if (!impl.ok()) {
    return absl::Status(
        impl.status().code(),
        absl::StrCat(kSha256EnvVar, ": ", impl.status().message()));
  }
  return impl;
}

const Sha256Impl& ActiveSha256Impl() {
  static const Sha256Impl* const active = Decide();
  return *active;
}

void Sha256Many(absl::Span<const absl::string_view> messages,
                unsigned char* out) {
  Sha256Many(ActiveSha256Impl(), messages, out);
}

void Sha256Many(const Sha256Impl& impl,
                absl::Span<const absl::string_view> messages,
                unsigned char* out) {
#ifdef CHUNKD_SHA256_SHANI
  if (impl.lanes > 0) {
    std::vector<shani::Job> jobs(messages.size());
    for (size_t i = 0; i < messages.size(); ++i) {
      jobs[i] = {reinterpret_cast<const unsigned char*>(messages[i].data()),
                 messages[i].size(), out + kDigestBytes * i};
    }
    // Longest first: the lanes then end on short messages, and the last
    // stretch, when fewer messages than lanes are left, is short.
    if (impl.lanes > 1) {
      std::stable_sort(jobs.begin(), jobs.end(),
                       [](const shani::Job& a, const shani::Job& b) {
                         return a.size > b.size;
                       });
    }
    shani::HashJobs(jobs.data(), jobs.size(), impl.lanes);
    return;
  }
#endif
  HashWithOpenSsl(messages, out);
}

}  // namespace chunkd::fingerprint
