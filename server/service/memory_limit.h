// The memory limit chunkd runs under: its cgroup's, read at start-up so that
// the memory flags left at their defaults can be sized to it
// (service/memory_plan.h; docs/operations.md, "Memory and the chart's
// resources").
//
// cgroup v2 keeps the limit in memory.max ("max" or bytes), v1 in
// memory.limit_in_bytes (bytes; "no limit" is the largest page multiple
// below 2^63). Which cgroup is this process's comes from /proc/self/cgroup,
// where its directory is mounted from /proc/self/mountinfo; every ancestor
// up to the mount's root binds too (a pod's limit may sit on the pod's
// cgroup, not the container's), so the smallest limit among them is the
// one that holds. With the v1 memory controller mounted (hybrid set-ups)
// v1 is read, since v2 then has no memory controller.
//
// Thread safety: free functions without shared state.
#ifndef CHUNKD_SERVICE_MEMORY_LIMIT_H_
#define CHUNKD_SERVICE_MEMORY_LIMIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chunkd::service {

// Limits at or above this mean none: cgroup v1's "unlimited" is
// 0x7FFFFFFFFFFFF000 with 4 KiB pages, a little less with larger ones.
inline constexpr uint64_t kNoMemoryLimitFrom = uint64_t{1} << 62;

struct MemoryLimit {
  std::optional<uint64_t> bytes;  // nullopt: no limit
  // The file the limit came from; without a limit, why there is none.
  std::string source;
};

// The text of a limit file: "max" (v2) or a byte count, surrounding white
// space allowed; nullopt for no limit ("max", or kNoMemoryLimitFrom and
// above). INVALID_ARGUMENT quoting the text otherwise.
absl::StatusOr<std::optional<uint64_t>> ParseMemoryLimit(
    absl::string_view text);

// The limit files of this process's memory cgroup, innermost first, from
// the text of /proc/self/cgroup and of /proc/self/mountinfo: the cgroup's
// own file and those of its ancestors up to the mount point. Empty when no
// memory cgroup is mounted.
std::vector<std::string> CgroupMemoryLimitFiles(absl::string_view proc_cgroup,
                                                absl::string_view mountinfo);

// The smallest limit among CgroupMemoryLimitFiles() that exist, every path
// read under `root` ("" on a real system; a test's directory tree
// otherwise). Without /proc/self/cgroup, a memory cgroup or a readable limit
// file: no limit, `source` saying why. INVALID_ARGUMENT naming the file
// when one holds something else than a limit.
absl::StatusOr<MemoryLimit> ReadCgroupMemoryLimit(const std::string& root = "");

// The limit in `path`, in either format (for --memory_limit_file: tests,
// or a limit the cgroup does not show). INVALID_ARGUMENT naming the file
// when it cannot be read or holds something else.
absl::StatusOr<MemoryLimit> ReadMemoryLimitFile(const std::string& path);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_MEMORY_LIMIT_H_
