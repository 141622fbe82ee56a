// rocksdb_index_bench: what the RocksDB index costs at scale
// (docs/benchmarks.md, "The RocksDB index"): bytes per entry on disk, the
// time to open, resident memory against its cache, and operations per
// second with an index that fits its block cache beside one ten times
// larger than it, in the same run.
//
//   rocksdb_index_bench                       # 10M entries under $TMPDIR
//   rocksdb_index_bench --entries=1000000 --dir=/var/tmp/x
//
// Fill: --entries SHA-256 fingerprints (32 bytes of a counter's SHA-256) in
// one namespace, batches of --batch, sync=none; then the same number with a
// next-size hint each (the default list of 2 sizes and a run of 3 under
// fastcdc's parameter key) into a second database. Disk: the bytes of the
// database's files after a full compaction (what a long-lived index
// settles at), per entry. Open: the median time of --repetitions opens of
// the filled database (its write-ahead log replayed, as after a crash).
// Speed, each in a child process of its own, cache "fits" (--fits_mib) and
// "small" (a tenth of the database on disk): one thread, batches of
// --batch, --ops fingerprints each: insert of new fingerprints, insert of
// present ones (each found and counted again), lookup of absent ones and
// of present ones, every answer checked; resident memory after them, and
// the block cache's hit ratio. The OS page cache holds the database's
// files in both (the machine has the memory): the small cache measures
// RocksDB's work for a block it does not hold, not a disk's seek.
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/child_process.h"
#include "index/fingerprint_index.h"
#include "openssl/sha.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/utilities/options_util.h"

ABSL_FLAG(uint64_t, entries, 10000000, "entries to fill the database with");
ABSL_FLAG(std::string, dir, "",
          "where the databases go (removed at the end); empty: a directory "
          "under $TMPDIR or /tmp");
ABSL_FLAG(uint64_t, batch, 256, "fingerprints per call (a Dedup batch)");
ABSL_FLAG(uint64_t, ops, 200000, "fingerprints per speed measurement");
ABSL_FLAG(uint64_t, fits_mib, 1024, "the block cache that holds the index");
ABSL_FLAG(int, repetitions, 3, "opens and speed runs (medians)");

namespace chunkd::bench {
namespace {

constexpr char kProgram[] = "rocksdb_index_bench";
constexpr char kNamespace[] = "default";
constexpr char kParams[] = "fastcdc:4096:16384:65536:2:0";

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "%s: %s\n", kProgram, what);
    std::exit(1);
  }
}

std::string Fingerprint(uint64_t i) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(&i), sizeof(i), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

std::unique_ptr<index::FingerprintIndex> Open(const std::string& dir,
                                              const std::string& query) {
  auto index = index::CreateIndex(absl::StrCat("rocksdb://", dir, query));
  if (!index.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram,
                 std::string(index.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(index);
}

// Inserts fingerprints [first, first + n), with a hint each if `hints`.
void Fill(index::FingerprintIndex& index, uint64_t first, uint64_t n,
          bool hints) {
  const uint64_t batch = absl::GetFlag(FLAGS_batch);
  for (uint64_t at = first; at < first + n; at += batch) {
    std::vector<index::InsertEntry> entries;
    std::vector<index::NextSize> next;
    for (uint64_t i = at; i < std::min(first + n, at + batch); ++i) {
      entries.push_back({Fingerprint(i), 16384});
      if (hints) next.emplace_back(entries.back().fingerprint, 20000,
                                   std::vector<uint32_t>{1, 2, 3});
    }
    auto done = index.Insert(kNamespace, entries);
    Check(done.ok() && (*done)[0].is_new, "a fill insert failed");
    if (hints) {
      Check(index.RecordNextSizes(kNamespace, kParams, next).ok(),
            "recording hints failed");
    }
  }
}

uint64_t DirectoryBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
    if (f.is_regular_file()) bytes += f.file_size();
  }
  return bytes;
}

// Opens the (closed) database with RocksDB alone, calls `work` on it and
// every column family, and closes it.
void WithDatabase(
    const std::string& dir,
    const std::function<void(rocksdb::DB*, rocksdb::ColumnFamilyHandle*)>&
        work) {
  // The options the database was written with (OPTIONS file): its merge
  // operator is RocksDB's own, so it loads by name.
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  Check(rocksdb::LoadLatestOptions(rocksdb::ConfigOptions(), dir, &db_options,
                                   &families)
            .ok(),
        "cannot load the database's options");
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  const rocksdb::Status opened =
      rocksdb::DB::Open(db_options, dir, families, &handles, &db);
  Check(opened.ok(), opened.ToString().c_str());
  for (auto* h : handles) {
    work(db, h);
    Check(db->DestroyColumnFamilyHandle(h).ok(), "close failed");
  }
  delete db;
}

// Compacts every column family of the (closed) database fully.
void CompactAll(const std::string& dir) {
  WithDatabase(dir, [](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* h) {
    rocksdb::CompactRangeOptions options;
    options.bottommost_level_compaction =
        rocksdb::BottommostLevelCompaction::kForceOptimized;
    Check(db->CompactRange(options, h, nullptr, nullptr).ok(),
          "compaction failed");
  });
}

// Flushes every memtable of the (closed) database: each speed run starts
// with an empty log, whatever the run before it left.
void FlushAll(const std::string& dir) {
  WithDatabase(dir, [](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* h) {
    Check(db->Flush(rocksdb::FlushOptions(), h).ok(), "flush failed");
  });
}

// Seconds per fingerprint of `op` over [first, first + n) in batches.
template <typename Op>
double Rate(uint64_t first, uint64_t n, Op op) {
  const uint64_t batch = absl::GetFlag(FLAGS_batch);
  const absl::Time start = absl::Now();
  for (uint64_t at = first; at < first + n; at += batch) {
    std::vector<std::string> fps;
    for (uint64_t i = at; i < std::min(first + n, at + batch); ++i) {
      fps.push_back(Fingerprint(i));
    }
    op(fps);
  }
  return static_cast<double>(n) / absl::ToDoubleSeconds(absl::Now() - start);
}

constexpr size_t kSpeedValues = 6;
// Operations per second (insert new, insert present, lookup absent, lookup
// present), resident MiB and the block cache's hit ratio, with a cache of
// `cache_mib`. Fresh fingerprints come after the filled ones, `round`
// apart, so that every run inserts new ones.
std::array<double, kSpeedValues> Speed(const std::string& dir,
                                       uint64_t cache_mib, int round) {
  const uint64_t n = absl::GetFlag(FLAGS_entries);
  const uint64_t ops = absl::GetFlag(FLAGS_ops);
  auto index = Open(dir, absl::StrCat("?sync=batch&cache_mib=", cache_mib));
  const uint64_t fresh = n + (2 * ops) * static_cast<uint64_t>(round + 1);
  // Present fingerprints spread over the whole filled range.
  const uint64_t stride = std::max<uint64_t>(1, n / ops);
  auto present = [&](uint64_t first, uint64_t count, auto op) {
    std::vector<std::string> fps;
    const absl::Time start = absl::Now();
    for (uint64_t k = 0; k < count; ++k) {
      fps.push_back(Fingerprint((first + k * stride) % n));
      if (fps.size() == absl::GetFlag(FLAGS_batch) || k + 1 == count) {
        op(fps);
        fps.clear();
      }
    }
    return static_cast<double>(count) /
           absl::ToDoubleSeconds(absl::Now() - start);
  };
  std::array<double, kSpeedValues> out{};
  out[0] = Rate(fresh, ops, [&](const std::vector<std::string>& fps) {
    std::vector<index::InsertEntry> e;
    for (const auto& fp : fps) e.push_back({fp, 16384});
    auto r = index->Insert(kNamespace, e);
    Check(r.ok() && (*r)[0].is_new, "insert of a new fingerprint");
  });
  out[1] = present(static_cast<uint64_t>(round), ops, [&](const auto& fps) {
    std::vector<index::InsertEntry> e;
    for (const auto& fp : fps) e.push_back({fp, 16384});
    auto r = index->Insert(kNamespace, e);
    Check(r.ok() && !(*r)[0].is_new, "insert of a present fingerprint");
  });
  out[2] = Rate(fresh + ops, ops, [&](const std::vector<std::string>& fps) {
    auto r = index->Lookup(kNamespace, fps);
    Check(r.ok() && !(*r)[0], "lookup of an absent fingerprint");
  });
  out[3] = present(static_cast<uint64_t>(round) + 7, ops, [&](const auto& fps) {
    auto r = index->Lookup(kNamespace, fps);
    Check(r.ok() && (*r)[0], "lookup of a present fingerprint");
  });
  out[4] = static_cast<double>(ResidentBytes()) / (1 << 20);
  const auto stats = index->Storage();
  out[5] = stats.has_value() && stats->cache_hits + stats->cache_misses > 0
               ? static_cast<double>(stats->cache_hits) /
                     static_cast<double>(stats->cache_hits +
                                         stats->cache_misses)
               : 0;
  return out;
}

// Fills `dir` (in a child process) and returns its bytes per entry after a
// full compaction, and the fill's entries per second.
std::array<double, 2> FillAndMeasure(const std::string& dir, uint64_t n,
                                     bool hints) {
  const std::array<double, 1> rate =
      InChild<1>(kProgram, [&]() -> std::array<double, 1> {
        auto index = Open(dir, "?sync=none");
        const absl::Time start = absl::Now();
        Fill(*index, 0, n, hints);
        return {static_cast<double>(n) /
                absl::ToDoubleSeconds(absl::Now() - start)};
      });
  InChild<1>(kProgram, [&]() -> std::array<double, 1> {
    CompactAll(dir);
    return {0};
  });
  return {static_cast<double>(DirectoryBytes(dir)) / static_cast<double>(n),
          rate[0]};
}

// Seconds to open the filled database, `repetitions` times; after a kill
// (`killed`): each time a chunkd killed with its write buffers full, so
// that the open replays the log (its fingerprints from a range of their
// own), else a clean one.
std::vector<double> OpenTimes(const std::string& dir, uint64_t n,
                              int repetitions, bool killed) {
  constexpr uint64_t kLogged = 1000000;
  std::vector<double> seconds;
  uint64_t entries = n;
  for (int r = 0; r < repetitions; ++r) {
    if (killed) {
      InChild<1>(kProgram, [&]() -> std::array<double, 1> {
        auto index = Open(dir, "?sync=none");
        Fill(*index, (uint64_t{1} << 40) + kLogged * static_cast<uint64_t>(r),
             kLogged, false);
        // Never closed: the child's _exit leaves the database as a SIGKILL
        // would, its memtables unflushed.
        (void)index.release();
        return {0};
      });
      entries += kLogged;
    }
    seconds.push_back(InChild<1>(kProgram, [&]() -> std::array<double, 1> {
      const absl::Time start = absl::Now();
      auto index = Open(dir, "");
      Check(index->EntryCount() == entries, "the reopened index lost entries");
      return {absl::ToDoubleSeconds(absl::Now() - start)};
    })[0]);
  }
  return seconds;
}

int Main() {
  const uint64_t n = absl::GetFlag(FLAGS_entries);
  const int repetitions = std::max(1, absl::GetFlag(FLAGS_repetitions));
  std::string root = absl::GetFlag(FLAGS_dir);
  if (root.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    root = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/rocksdb_index_bench.",
                        getpid());
  }
  const std::string plain = root + "/plain";
  const std::string hinted = root + "/hints";
  std::filesystem::remove_all(root);
  const auto [plain_bytes, fill_rate] = FillAndMeasure(plain, n, false);
  const auto [hinted_bytes, hinted_rate] = FillAndMeasure(hinted, n, true);
  std::filesystem::remove_all(hinted);
  const std::vector<double> opens = OpenTimes(plain, n, repetitions, false);
  const std::vector<double> crash_opens =
      OpenTimes(plain, n, repetitions, true);
  const uint64_t disk_mib = DirectoryBytes(plain) >> 20;
  const uint64_t small_mib = std::max<uint64_t>(8, disk_mib / 10);
  const uint64_t fits_mib = absl::GetFlag(FLAGS_fits_mib);
  std::array<std::vector<double>, kSpeedValues> fits, small;
  auto flushed = [&]() -> std::array<double, 1> {
    FlushAll(plain);
    return {0};
  };
  for (int r = 0; r < repetitions; ++r) {
    InChild<1>(kProgram, flushed);
    const auto a = InChild<kSpeedValues>(
        kProgram, [&] { return Speed(plain, fits_mib, 2 * r); });
    InChild<1>(kProgram, flushed);
    const auto b = InChild<kSpeedValues>(
        kProgram, [&] { return Speed(plain, small_mib, 2 * r + 1); });
    for (size_t k = 0; k < kSpeedValues; ++k) {
      fits[k].push_back(a[k]);
      small[k].push_back(b[k]);
    }
  }
  std::filesystem::remove_all(root);

  std::printf(
      "RocksDB index, %llu SHA-256 entries in one namespace, batches of %llu:\n"
      "\n| measure | value |\n|---|---|\n"
      "| disk bytes per entry after compaction | %.1f |\n"
      "| disk bytes per entry with next-size hints and runs | %.1f |\n"
      "| fill, entries/s (sync=none) | %.0f |\n"
      "| fill with hints, entries/s | %.0f |\n"
      "| open (median of %d), s | %.2f |\n"
      "| open after a kill with 1M entries in the log (median), s | %.2f |\n\n",
      static_cast<unsigned long long>(n),
      static_cast<unsigned long long>(absl::GetFlag(FLAGS_batch)),
      plain_bytes, hinted_bytes, fill_rate, hinted_rate, repetitions,
      Median(opens), Median(crash_opens));
  std::printf(
      "Operations per second, one thread, medians of %d; the database is "
      "%llu MiB on disk; block cache %llu MiB (fits) vs %llu MiB (a "
      "tenth):\n\n| operation | fits | small | small ÷ fits |\n"
      "|---|---|---|---|\n",
      repetitions, static_cast<unsigned long long>(disk_mib),
      static_cast<unsigned long long>(fits_mib),
      static_cast<unsigned long long>(small_mib));
  const char* names[] = {"insert, new", "insert, present", "lookup, absent",
                         "lookup, present"};
  for (size_t k = 0; k < 4; ++k) {
    std::printf("| %s | %.0f | %.0f | %.2f× |\n", names[k], Median(fits[k]),
                Median(small[k]), Median(small[k]) / Median(fits[k]));
  }
  std::printf("| resident MiB after the runs | %.0f | %.0f | |\n"
              "| block cache hit ratio | %.3f | %.3f | |\n",
              Median(fits[4]), Median(small[4]), Median(fits[5]),
              Median(small[5]));
  return 0;
}

}  // namespace
}  // namespace chunkd::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return chunkd::bench::Main();
}
