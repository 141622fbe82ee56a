// memory_index_footprint: the memory a MemoryIndex takes per entry (and per
// write-token position), measured, for sizing --index_max_entries.
//
//   memory_index_footprint                      # 1M and 1.75M entries
//   memory_index_footprint --entries=4000000 --namespace=backup-2024
//
// Each measurement runs in a child process of its own: N entries with
// SHA-256 fingerprints (32 bytes) in one namespace are inserted in batches
// of 1000, optionally with a next-size hint list of the default length (2
// sizes under one chunking-parameter key), or N write-token positions of one
// stream are written. Reported per entry (position): the growth of the
// bytes malloc has handed out (mallinfo2: uordblks + hblkhd) and of the
// resident set (/proc/self/statm). The hash tables grow by doubling, so the
// figure depends on N: just after a table grew (1M entries: 64 shards of
// ~15600 in tables of 32767 slots) it is highest, just before (1.75M) it is
// lowest.
#include <malloc.h>
#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "index/memory_index.h"

ABSL_FLAG(std::string, entries, "1000000,1750000",
          "entry counts to measure, comma-separated");
ABSL_FLAG(std::string, namespace, "default", "namespace of the entries");

namespace chunkd::index {
namespace {

constexpr char kParams[] = "fastcdc:4096:16384:65536:2:0";

uint64_t HeapBytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0;
  uint64_t resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

std::string Sha256(uint64_t i) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(&i, sizeof(i), digest, &length, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

enum class What { kEntries, kEntriesWithHints, kTokenPositions };

// Runs in the child: prints one line.
void Measure(What what, uint64_t n, const std::string& ns) {
  const char* label = what == What::kEntries ? "entries"
                      : what == What::kEntriesWithHints
                          ? "entries + hints"
                          : "token positions";
  // Fingerprints are made before the baseline: they are the caller's.
  std::vector<std::string> fps;
  const uint64_t distinct = what == What::kTokenPositions ? 1000 : n;
  fps.reserve(distinct);
  for (uint64_t i = 0; i < distinct; ++i) fps.push_back(Sha256(i));
  std::vector<InsertEntry> batch;
  std::vector<NextSize> hints;
  batch.reserve(1000);
  hints.reserve(1000);

  auto index = std::make_unique<MemoryIndex>();
  if (what == What::kTokenPositions) {
    // The fingerprints exist; the stream writes them again and again.
    for (const std::string& fp : fps) batch.push_back({fp, 16384});
    if (!index->Insert(ns, batch).ok()) std::abort();
  }
  const uint64_t heap1 = HeapBytes();
  const uint64_t rss1 = ResidentBytes();
  for (uint64_t at = 0; at < n; at += 1000) {
    batch.clear();
    hints.clear();
    const uint64_t end = std::min(n, at + 1000);
    for (uint64_t i = at; i < end; ++i) {
      batch.push_back({fps[i % distinct], 16384});
    }
    if (what == What::kTokenPositions) {
      const WriteToken token{"stream", at};
      if (!index->Insert(ns, batch, &token).ok()) std::abort();
      continue;
    }
    if (!index->Insert(ns, batch).ok()) std::abort();
    if (what == What::kEntriesWithHints) {
      // Two sizes: the list of the default length (2), full.
      for (uint64_t i = at; i < end; ++i) hints.push_back({fps[i], 12000});
      if (!index->RecordNextSizes(ns, kParams, hints).ok()) std::abort();
      for (NextSize& h : hints) h.next_size = 20000;
      if (!index->RecordNextSizes(ns, kParams, hints).ok()) std::abort();
    }
  }
  const uint64_t heap = HeapBytes() - heap1;
  const uint64_t rss = ResidentBytes() - rss1;
  std::printf("%-16s %10llu  heap %7.1f B each  RSS %7.1f B each\n", label,
              static_cast<unsigned long long>(n),
              static_cast<double>(heap) / static_cast<double>(n),
              static_cast<double>(rss) / static_cast<double>(n));
}

}  // namespace
}  // namespace chunkd::index

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using chunkd::index::What;
  const std::string ns = absl::GetFlag(FLAGS_namespace);
  std::printf("namespace '%s', SHA-256 fingerprints, hints under '%s'\n",
              ns.c_str(), chunkd::index::kParams);
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_entries), ',', absl::SkipEmpty())) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(text, &n) || n == 0) {
      std::fprintf(stderr, "--entries: bad count '%s'\n",
                   std::string(text).c_str());
      return 2;
    }
    for (What what :
         {What::kEntries, What::kEntriesWithHints, What::kTokenPositions}) {
      std::fflush(stdout);
      const pid_t child = fork();
      if (child == 0) {
        chunkd::index::Measure(what, n, ns);
        std::fflush(stdout);
        _exit(0);
      }
      int status = 0;
      waitpid(child, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    }
  }
  return 0;
}
