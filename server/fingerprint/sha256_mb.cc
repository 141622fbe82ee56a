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

constexpr Sha256Backend kOpenSsl = {"openssl", 0};
#ifdef CHUNKD_SHA256_SHANI
constexpr Sha256Backend kShaNi1 = {"shani-x1", 1};
constexpr Sha256Backend kShaNi2 = {"shani-x2", 2};
constexpr Sha256Backend kShaNi3 = {"shani-x3", 3};
constexpr Sha256Backend kShaNi4 = {"shani-x4", 4};
// Best first. sha256_bench on a Zen 4 core: four lanes 1.7x OpenSSL, three
// 1.6x, two 1.5x, one 1.03x (docs/benchmarks.md, "SHA-256"). One message waits
// for each round's latency; two lanes still leave the SHA unit idle part of
// the time, four keep it busy at its throughput.
constexpr const Sha256Backend* kBackends[] = {&kShaNi4, &kShaNi3, &kShaNi2,
                                              &kShaNi1, &kOpenSsl};
// Exactly the instruction sets sha256_shani.cc is compiled for.
constexpr uint32_t kShaNiFeatures =
    platform::kSha | platform::kSse41 | platform::kSsse3;
#else
constexpr const Sha256Backend* kBackends[] = {&kOpenSsl};
#endif

void HashWithOpenSsl(absl::Span<const absl::string_view> messages,
                     unsigned char* out) {
  for (size_t i = 0; i < messages.size(); ++i) {
    SHA256(reinterpret_cast<const unsigned char*>(messages[i].data()),
           messages[i].size(), out + kDigestBytes * i);
  }
}

const Sha256Backend* Decide() {
  absl::StatusOr<const Sha256Backend*> backend = DefaultSha256Backend();
  if (!backend.ok()) {
    std::fprintf(stderr, "chunkd: %s\n",
                 std::string(backend.status().message()).c_str());
    std::abort();
  }
  return *backend;
}

}  // namespace

absl::Span<const Sha256Backend* const> AllSha256Backends() {
  return kBackends;
}

std::vector<std::string> Sha256BackendMissing(const Sha256Backend& backend) {
  if (backend.lanes == 0) return {};
#ifdef CHUNKD_SHA256_SHANI
  return platform::MissingFeatures(kShaNiFeatures, platform::CpuFeatures());
#else
  return {"not built for this architecture"};
#endif
}

const Sha256Backend& BestSha256Backend() {
  for (const Sha256Backend* backend : kBackends) {
    if (Sha256BackendMissing(*backend).empty()) return *backend;
  }
  return kOpenSsl;
}

absl::StatusOr<const Sha256Backend*> FindSha256Backend(absl::string_view name) {
  if (name == "shani") {
    const Sha256Backend& best = BestSha256Backend();
    if (best.lanes > 0) return &best;
    // Report what this CPU lacks for the multi-buffer code.
    name = kBackends[0]->name;
  }
  std::vector<std::string> names;
  for (const Sha256Backend* backend : kBackends) {
    if (name != backend->name) {
      names.emplace_back(backend->name);
      continue;
    }
    std::vector<std::string> missing = Sha256BackendMissing(*backend);
    if (!missing.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("sha256 backend '", name, "' cannot run on this CPU: ",
                       absl::StrJoin(missing, ", "), " missing"));
    }
    return backend;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("sha256 backend '", name, "' is not one of: shani, ",
                   absl::StrJoin(names, ", ")));
}

absl::StatusOr<const Sha256Backend*> DefaultSha256Backend() {
  const char* forced = std::getenv(kSha256EnvVar);
  if (forced == nullptr || *forced == '\0') return &BestSha256Backend();
  absl::StatusOr<const Sha256Backend*> backend = FindSha256Backend(forced);
  if (!backend.ok()) {
    return absl::Status(backend.status().code(),
                        absl::StrCat(kSha256EnvVar, ": ",
                                     backend.status().message()));
  }
  return backend;
}

const Sha256Backend& ActiveSha256Backend() {
  static const Sha256Backend* const active = Decide();
  return *active;
}

void Sha256Many(absl::Span<const absl::string_view> messages,
                unsigned char* out) {
  Sha256Many(ActiveSha256Backend(), messages, out);
}

void Sha256Many(const Sha256Backend& backend,
                absl::Span<const absl::string_view> messages,
                unsigned char* out) {
#ifdef CHUNKD_SHA256_SHANI
  if (backend.lanes > 0) {
    std::vector<shani::Job> jobs(messages.size());
    for (size_t i = 0; i < messages.size(); ++i) {
      jobs[i] = {reinterpret_cast<const unsigned char*>(messages[i].data()),
                 messages[i].size(), out + kDigestBytes * i};
    }
    // Longest first: the lanes then end on short messages, and the last
    // stretch, when fewer messages than lanes are left, is short.
    if (backend.lanes > 1) {
      std::stable_sort(jobs.begin(), jobs.end(),
                       [](const shani::Job& a, const shani::Job& b) {
                         return a.size > b.size;
                       });
    }
    shani::HashJobs(jobs.data(), jobs.size(), backend.lanes);
    return;
  }
#endif
  HashWithOpenSsl(messages, out);
}

}  // namespace chunkd::fingerprint
