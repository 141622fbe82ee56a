// memory_index_footprint: the memory a MemoryIndex takes per entry (and per
// write-token position), for sizing --index_max_entries, and its operations
// per second, each side by side in the same run with the design it
// replaced (docs/design.md, "The fingerprint index"): 64 shards of
// absl::flat_hash_map from "<namespace>:<fingerprint>" strings to an entry
// holding its hint lists in vectors, reproduced here as MapIndex.
//
//   memory_index_footprint                   # 1M and 10M entries
//   memory_index_footprint --entries=4000000 --namespace=backup-2024
//   memory_index_footprint --speed_entries=0 # memory only
//
// Memory: each measurement runs in a child process of its own: N entries
// with SHA-256 fingerprints (32 bytes) in one namespace are inserted in
// batches of 1000, optionally with a next-size hint list of the default
// length (2 sizes under one chunking-parameter key), or N write-token
// positions of one stream are written. Reported per entry (position): the
// growth of the resident set (/proc/self/statm), which counts the tables
// MemoryIndex maps from the kernel as well as what malloc hands out.
//
// Speed: one thread, batches of 1000, --speed_entries fingerprints: insert
// (new), insert (duplicate), lookup (present), lookup (absent), record a
// next size, read next sizes, release (twice: the second removes), every
// answer checked. Each repetition runs both indexes, each in a fresh child
// process, in turns; medians of --repetitions are reported, with their
// ratio.
#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/hash/hash.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/child_process.h"
#include "index/memory_index.h"

ABSL_FLAG(std::string, entries, "1000000,10000000",
          "entry counts to measure memory at, comma-separated");
ABSL_FLAG(std::string, namespace, "default", "namespace of the entries");
ABSL_FLAG(uint64_t, speed_entries, 1000000,
          "fingerprints per speed measurement; 0: no speed measurement");
ABSL_FLAG(int, repetitions, 3, "speed measurements per index (medians)");
ABSL_FLAG(bool, baseline, true,
          "also measure the replaced design (MapIndex), side by side");

namespace chunkd::index {
namespace {

using bench::InChild;
using bench::Median;
using bench::ResidentBytes;

constexpr char kProgram[] = "memory_index_footprint";
constexpr char kParams[] = "fastcdc:4096:16384:65536:2:0";
constexpr uint64_t kBatch = 1000;

// The replaced design, reduced to what is measured here (no limits, no
// write tokens): the same maps, keys, entries and locking.
class MapIndex {
 public:
  absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view ns, absl::Span<const std::string> fingerprints) {
    std::vector<bool> found;
    found.reserve(fingerprints.size());
    for (const std::string& fp : fingerprints) {
      const std::string key = absl::StrCat(ns, ":", fp);
      Shard& shard = ShardFor(key);
      std::lock_guard<std::mutex> lock(shard.mu);
      found.push_back(shard.map.contains(key));
    }
    return found;
  }
  absl::StatusOr<std::vector<InsertResult>> Insert(
      absl::string_view ns, absl::Span<const InsertEntry> entries) {
    std::vector<InsertResult> results;
    results.reserve(entries.size());
    for (const InsertEntry& e : entries) {
      const std::string key = absl::StrCat(ns, ":", e.fingerprint);
      Shard& shard = ShardFor(key);
      std::lock_guard<std::mutex> lock(shard.mu);
      auto [it, is_new] = shard.map.try_emplace(key);
      if (is_new) it->second.size = e.size;
      results.push_back({is_new, ++it->second.ref_count});
    }
    return results;
  }
  absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fingerprints) {
    std::vector<uint64_t> left;
    left.reserve(fingerprints.size());
    for (const std::string& fp : fingerprints) {
      const std::string key = absl::StrCat(ns, ":", fp);
      Shard& shard = ShardFor(key);
      std::lock_guard<std::mutex> lock(shard.mu);
      auto it = shard.map.find(key);
      if (it == shard.map.end()) {
        left.push_back(0);
      } else if (--it->second.ref_count == 0) {
        shard.map.erase(it);
        left.push_back(0);
      } else {
        left.push_back(it->second.ref_count);
      }
    }
    return left;
  }
  absl::Status RecordNextSizes(absl::string_view ns,
                               absl::string_view params_key,
                               absl::Span<const NextSize> hints) {
    for (const NextSize& hint : hints) {
      const std::string key = absl::StrCat(ns, ":", hint.fingerprint);
      Shard& shard = ShardFor(key);
      std::lock_guard<std::mutex> lock(shard.mu);
      auto it = shard.map.find(key);
      if (it == shard.map.end()) continue;
      auto& lists = it->second.next_sizes;
      auto list = std::find_if(lists.begin(), lists.end(), [&](const auto& l) {
        return l.first == params_key;
      });
      if (list == lists.end()) {
        lists.emplace_back(std::string(params_key), std::vector<uint32_t>());
        list = lists.end() - 1;
      }
      std::vector<uint32_t>& sizes = list->second;
      sizes.erase(std::remove(sizes.begin(), sizes.end(), hint.next_size),
                  sizes.end());
      sizes.insert(sizes.begin(), hint.next_size);
      if (sizes.size() > 2) sizes.resize(2);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::vector<uint32_t>>> NextSizes(
      absl::string_view ns, absl::string_view params_key,
      absl::Span<const std::string> fingerprints) {
    std::vector<std::vector<uint32_t>> out(fingerprints.size());
    for (size_t i = 0; i < fingerprints.size(); ++i) {
      const std::string key = absl::StrCat(ns, ":", fingerprints[i]);
      Shard& shard = ShardFor(key);
      std::lock_guard<std::mutex> lock(shard.mu);
      auto it = shard.map.find(key);
      if (it == shard.map.end()) continue;
      for (const auto& [params, sizes] : it->second.next_sizes) {
        if (params == params_key) out[i] = sizes;
      }
    }
    return out;
  }

 private:
  struct Entry {
    uint32_t size = 0;
    uint64_t ref_count = 0;
    std::vector<std::pair<std::string, std::vector<uint32_t>>> next_sizes;
  };
  struct Shard {
    std::mutex mu;
    absl::flat_hash_map<std::string, Entry> map;
  };
  Shard& ShardFor(const std::string& key) {
    return shards_[absl::Hash<std::string>{}(key) % shards_.size()];
  }
  std::array<Shard, 64> shards_;
};

std::string Sha256(uint64_t i) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(&i, sizeof(i), digest, &length, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

std::vector<std::string> Fingerprints(uint64_t from, uint64_t n) {
  std::vector<std::string> fps;
  fps.reserve(n);
  for (uint64_t i = from; i < from + n; ++i) fps.push_back(Sha256(i));
  return fps;
}

void Check(bool ok) {
  if (!ok) {
    std::fprintf(stderr, "memory_index_footprint: an index call failed\n");
    std::abort();
  }
}

enum class What { kEntries, kEntriesWithHints, kTokenPositions };

// Calls `f(begin, end)` per batch of [0, n).
template <typename F>
void Batches(uint64_t n, F f) {
  for (uint64_t at = 0; at < n; at += kBatch) f(at, std::min(n, at + kBatch));
}

// Runs in a child: the resident bytes per entry (position) `what` takes.
template <typename Index>
double MeasureMemory(What what, uint64_t n, const std::string& ns) {
  // Fingerprints are made before the baseline: they are the caller's.
  const uint64_t distinct = what == What::kTokenPositions ? 1000 : n;
  const std::vector<std::string> fps = Fingerprints(0, distinct);
  std::vector<InsertEntry> batch;
  std::vector<NextSize> hints;
  auto index = std::make_unique<Index>();
  if (what == What::kTokenPositions) {
    // The fingerprints exist; the stream writes them again and again.
    for (const std::string& fp : fps) batch.push_back({fp, 16384});
    Check(index->Insert(ns, batch).ok());
  }
  const uint64_t rss = ResidentBytes();
  Batches(n, [&](uint64_t at, uint64_t end) {
    batch.clear();
    hints.clear();
    for (uint64_t i = at; i < end; ++i) {
      batch.push_back({fps[i % distinct], 16384});
    }
    if constexpr (std::is_same_v<Index, MemoryIndex>) {
      if (what == What::kTokenPositions) {
        const WriteToken token{"stream", at};
        Check(index->Insert(ns, batch, &token).ok());
        return;
      }
    }
    Check(index->Insert(ns, batch).ok());
    if (what == What::kEntriesWithHints) {
      // Two sizes: the list of the default length (2), full.
      for (uint64_t i = at; i < end; ++i) hints.push_back({fps[i], 12000});
      Check(index->RecordNextSizes(ns, kParams, hints).ok());
      for (NextSize& h : hints) h.next_size = 20000;
      Check(index->RecordNextSizes(ns, kParams, hints).ok());
    }
  });
  return static_cast<double>(ResidentBytes() - rss) / static_cast<double>(n);
}

// Operations per second of each measured operation, in this order.
const char* const kOps[] = {
    "insert, new",    "insert, duplicate",  "lookup, present",
    "lookup, absent", "record a next size", "read next sizes",
    "release",
};
constexpr size_t kOpCount = sizeof(kOps) / sizeof(kOps[0]);

// Runs in a child.
template <typename Index>
std::array<double, kOpCount> MeasureSpeed(uint64_t n, const std::string& ns) {
  const std::vector<std::string> fps = Fingerprints(0, n);
  const std::vector<std::string> absent = Fingerprints(n, n);
  std::vector<InsertEntry> entries;
  std::vector<NextSize> hints;
  for (const std::string& fp : fps) {
    entries.push_back({fp, 16384});
    hints.push_back({fp, 12000});
  }
  auto index = std::make_unique<Index>();
  std::array<double, kOpCount> rates{};
  auto timed = [&](size_t op, uint64_t count, const std::function<void()>& f) {
    const absl::Time start = absl::Now();
    f();
    rates[op] =
        static_cast<double>(count) / absl::ToDoubleSeconds(absl::Now() - start);
  };
  auto span = [](const auto& v, uint64_t at, uint64_t end) {
    return absl::MakeConstSpan(v).subspan(at, end - at);
  };
  for (size_t op : {0, 1}) {
    timed(op, n, [&] {
      Batches(n, [&](uint64_t at, uint64_t end) {
        auto r = index->Insert(ns, span(entries, at, end));
        Check(r.ok());
        for (const InsertResult& result : *r) {
          Check(result.is_new == (op == 0) && result.ref_count == op + 1);
        }
      });
    });
  }
  for (size_t op : {2, 3}) {
    timed(op, n, [&] {
      Batches(n, [&](uint64_t at, uint64_t end) {
        auto r = index->Lookup(ns, span(op == 2 ? fps : absent, at, end));
        Check(r.ok());
        for (bool found : *r) Check(found == (op == 2));
      });
    });
  }
  timed(4, n, [&] {
    Batches(n, [&](uint64_t at, uint64_t end) {
      Check(index->RecordNextSizes(ns, kParams, span(hints, at, end)).ok());
    });
  });
  timed(5, n, [&] {
    Batches(n, [&](uint64_t at, uint64_t end) {
      auto r = index->NextSizes(ns, kParams, span(fps, at, end));
      Check(r.ok());
      for (const std::vector<uint32_t>& sizes : *r) {
        Check(sizes == std::vector<uint32_t>{12000});
      }
    });
  });
  timed(6, 2 * n, [&] {
    for (uint64_t round = 0; round < 2; ++round) {
      Batches(n, [&](uint64_t at, uint64_t end) {
        auto r = index->Release(ns, span(fps, at, end));
        Check(r.ok());
        for (uint64_t left : *r) Check(left == 1 - round);
      });
    }
  });
  return rates;
}


void ReportMemory(const std::vector<uint64_t>& counts, const std::string& ns,
                  bool baseline) {
  std::printf(
      "Resident bytes per entry (per position), SHA-256 "
      "fingerprints, namespace '%s', hints under '%s':\n\n",
      ns.c_str(), kParams);
  std::printf("%-10s %-16s %12s %12s %7s\n", "entries", "what", "MemoryIndex",
              baseline ? "MapIndex" : "", baseline ? "ratio" : "");
  for (uint64_t n : counts) {
    for (What what :
         {What::kEntries, What::kEntriesWithHints, What::kTokenPositions}) {
      const char* label = what == What::kEntries            ? "entries"
                          : what == What::kEntriesWithHints ? "entries + hints"
                                                            : "token positions";
      const double ours = InChild<1>(kProgram, [&] {
        return std::array<double, 1>{MeasureMemory<MemoryIndex>(what, n, ns)};
      })[0];
      if (!baseline || what == What::kTokenPositions) {
        std::printf("%-10llu %-16s %10.1f B\n",
                    static_cast<unsigned long long>(n), label, ours);
        continue;
      }
      const double old = InChild<1>(kProgram, [&] {
        return std::array<double, 1>{MeasureMemory<MapIndex>(what, n, ns)};
      })[0];
      std::printf("%-10llu %-16s %10.1f B %10.1f B %6.2fx\n",
                  static_cast<unsigned long long>(n), label, ours, old,
                  old / ours);
    }
  }
}

void ReportSpeed(uint64_t n, int repetitions, const std::string& ns,
                 bool baseline) {
  std::vector<std::array<double, kOpCount>> ours;
  std::vector<std::array<double, kOpCount>> old;
  for (int r = 0; r < repetitions; ++r) {
    ours.push_back(
        InChild<kOpCount>(kProgram, [&] { return MeasureSpeed<MemoryIndex>(n, ns); }));
    if (baseline) {
      old.push_back(
          InChild<kOpCount>(kProgram, [&] { return MeasureSpeed<MapIndex>(n, ns); }));
    }
  }
  std::printf(
      "\nOperations per second, one thread, batches of %llu, %llu "
      "fingerprints; medians of %d, in turns:\n\n",
      static_cast<unsigned long long>(kBatch),
      static_cast<unsigned long long>(n), repetitions);
  std::printf("%-20s %12s %12s %7s\n", "operation", "MemoryIndex",
              baseline ? "MapIndex" : "", baseline ? "ratio" : "");
  for (size_t op = 0; op < kOpCount; ++op) {
    std::vector<double> a;
    std::vector<double> b;
    for (const auto& run : ours) a.push_back(run[op]);
    for (const auto& run : old) b.push_back(run[op]);
    const double mine = Median(a);
    if (!baseline) {
      std::printf("%-20s %10.2f M\n", kOps[op], mine / 1e6);
      continue;
    }
    const double theirs = Median(b);
    std::printf("%-20s %10.2f M %10.2f M %6.2fx\n", kOps[op], mine / 1e6,
                theirs / 1e6, mine / theirs);
  }
}

}  // namespace
}  // namespace chunkd::index

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string ns = absl::GetFlag(FLAGS_namespace);
  const bool baseline = absl::GetFlag(FLAGS_baseline);
  std::vector<uint64_t> counts;
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_entries), ',', absl::SkipEmpty())) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(text, &n) || n == 0) {
      std::fprintf(stderr, "--entries: bad count '%s'\n",
                   std::string(text).c_str());
      return 2;
    }
    counts.push_back(n);
  }
  const int repetitions = absl::GetFlag(FLAGS_repetitions);
  if (repetitions < 1) {
    std::fprintf(stderr, "--repetitions: must be at least 1\n");
    return 2;
  }
  chunkd::index::ReportMemory(counts, ns, baseline);
  const uint64_t speed_entries = absl::GetFlag(FLAGS_speed_entries);
  if (speed_entries != 0) {
    chunkd::index::ReportSpeed(speed_entries, repetitions, ns, baseline);
  }
  return 0;
}
