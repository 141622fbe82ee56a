#include "service/memory_limit.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace chunkd::service {
namespace {

constexpr char kV1File[] = "memory.limit_in_bytes";
constexpr char kV2File[] = "memory.max";

// A file's whole text; nullopt with `error` set when it cannot be read.
std::optional<std::string> ReadText(const std::string& path, int* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = errno;
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    *error = errno;
    return std::nullopt;
  }
  return std::move(text).str();
}

// mountinfo escapes space, tab, newline and backslash as \ooo (octal).
std::string Unescape(absl::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      int value = 0;
      bool octal = true;
      for (size_t j = 1; j <= 3; ++j) {
        const char c = field[i + j];
        octal = octal && c >= '0' && c <= '7';
        value = value * 8 + (c - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(value));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

// One cgroup mount of /proc/self/mountinfo.
struct CgroupMount {
  std::string root;         // the cgroup directory mounted there
  std::string mount_point;  // where
};

// The first mount of `fstype` ("cgroup" or "cgroup2") whose super options
// hold `option` (empty: any), if any.
std::optional<CgroupMount> FindMount(absl::string_view mountinfo,
                                     absl::string_view fstype,
                                     absl::string_view option) {
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n')) {
    // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE
    // SOURCE SUPER_OPTIONS
    const size_t dash = line.find(" - ");
    if (dash == absl::string_view::npos) continue;
    const std::vector<absl::string_view> before =
        absl::StrSplit(line.substr(0, dash), ' ', absl::SkipEmpty());
    const std::vector<absl::string_view> after =
        absl::StrSplit(line.substr(dash + 3), ' ', absl::SkipEmpty());
    if (before.size() < 5 || after.size() < 3 || after[0] != fstype) continue;
    bool has_option = option.empty();
    for (absl::string_view o : absl::StrSplit(after[2], ',')) {
      has_option = has_option || o == option;
    }
    if (has_option) {
      return CgroupMount{Unescape(before[3]), Unescape(before[4])};
    }
  }
  return std::nullopt;
}

// The cgroup path of the v1 hierarchy holding the memory controller
// (`v1` true) or of the v2 hierarchy, from /proc/self/cgroup.
std::optional<std::string> CgroupPath(absl::string_view proc_cgroup, bool v1) {
  for (absl::string_view line : absl::StrSplit(proc_cgroup, '\n')) {
    // HIERARCHY_ID:CONTROLLERS:PATH (the path may hold colons).
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    if (!v1) {
      if (fields[0] == "0" && fields[1].empty()) return std::string(fields[2]);
      continue;
    }
    for (absl::string_view c : absl::StrSplit(fields[1], ',')) {
      if (c == "memory") return std::string(fields[2]);
    }
  }
  return std::nullopt;
}

// The files `name` of the directory `path` maps to under `mount` and of its
// ancestors up to the mount point, innermost first.
std::vector<std::string> FilesUpTheTree(const CgroupMount& mount,
                                        absl::string_view path,
                                        absl::string_view name) {
  std::string relative;
  if (mount.root == "/") {
    relative = std::string(path);
  } else if (absl::string_view root = mount.root;
             path.substr(0, root.size()) == root &&
             (path.size() == root.size() || path[root.size()] == '/')) {
    relative = std::string(path.substr(root.size()));
  }
  // Otherwise the cgroup lies outside what is mounted (a cgroup namespace
  // shows its own root): the mount point's directory is the process's.
  while (!relative.empty() && relative.back() == '/') relative.pop_back();
  std::vector<std::string> files;
  for (;;) {
    files.push_back(absl::StrCat(mount.mount_point, relative, "/", name));
    if (relative.empty()) break;
    relative.resize(relative.rfind('/'));
  }
  return files;
}

}  // namespace

absl::StatusOr<std::optional<uint64_t>> ParseMemoryLimit(
    absl::string_view text) {
  const absl::string_view value = absl::StripAsciiWhitespace(text);
  if (value == "max") return std::optional<uint64_t>();
  uint64_t bytes = 0;
  // SimpleAtoi alone would take a sign and surrounding spaces.
  if (value.empty() ||
      !absl::ascii_isdigit(static_cast<unsigned char>(value[0])) ||
      !absl::SimpleAtoi(value, &bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", value.substr(0, 64),
                     "\" is not a memory limit (a byte count or \"max\")"));
  }
  if (bytes >= kNoMemoryLimitFrom) return std::optional<uint64_t>();
  return std::optional<uint64_t>(bytes);
}

std::vector<std::string> CgroupMemoryLimitFiles(absl::string_view proc_cgroup,
                                                absl::string_view mountinfo) {
  if (std::optional<CgroupMount> v1 =
          FindMount(mountinfo, "cgroup", "memory")) {
    std::optional<std::string> path = CgroupPath(proc_cgroup, /*v1=*/true);
    if (path.has_value()) return FilesUpTheTree(*v1, *path, kV1File);
  }
  if (std::optional<CgroupMount> v2 = FindMount(mountinfo, "cgroup2", "")) {
    std::optional<std::string> path = CgroupPath(proc_cgroup, /*v1=*/false);
    if (path.has_value()) return FilesUpTheTree(*v2, *path, kV2File);
  }
  return {};
}

absl::StatusOr<MemoryLimit> ReadCgroupMemoryLimit(const std::string& root) {
  int error = 0;
  const std::optional<std::string> proc_cgroup =
      ReadText(root + "/proc/self/cgroup", &error);
  const std::optional<std::string> mountinfo =
      ReadText(root + "/proc/self/mountinfo", &error);
  if (!proc_cgroup.has_value() || !mountinfo.has_value()) {
    return MemoryLimit{std::nullopt,
                       absl::StrCat("no cgroup: /proc/self/cgroup or "
                                    "/proc/self/mountinfo unreadable (",
                                    std::strerror(error), ")")};
  }
  const std::vector<std::string> files =
      CgroupMemoryLimitFiles(*proc_cgroup, *mountinfo);
  if (files.empty()) return MemoryLimit{std::nullopt, "no memory cgroup"};
  MemoryLimit limit{std::nullopt,
                    absl::StrCat("no limit in ", root, files.front(),
                                 " or its parents")};
  for (const std::string& file : files) {
    const std::string path = root + file;
    const std::optional<std::string> text = ReadText(path, &error);
    if (!text.has_value()) continue;  // no memory controller at this level
    absl::StatusOr<std::optional<uint64_t>> bytes = ParseMemoryLimit(*text);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", bytes.status().message()));
    }
    if (bytes->has_value() &&
        (!limit.bytes.has_value() || **bytes < *limit.bytes)) {
      limit = MemoryLimit{*bytes, path};
    }
  }
  return limit;
}

absl::StatusOr<MemoryLimit> ReadMemoryLimitFile(const std::string& path) {
  int error = 0;
  const std::optional<std::string> text = ReadText(path, &error);
  if (!text.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory_limit_file ", path, ": ", std::strerror(error)));
  }
  absl::StatusOr<std::optional<uint64_t>> bytes = ParseMemoryLimit(*text);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory_limit_file ", path, ": ", bytes.status().message()));
  }
  return MemoryLimit{*bytes, bytes->has_value()
                                 ? path
                                 : absl::StrCat("no limit in ", path)};
}

}  // namespace chunkd::service
