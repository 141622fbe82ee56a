#include "bench/index_bench_rates.h"

namespace chunkd::index::bench {

Rate RedisBenchmark(testing::DirectRedis& direct, const std::string& host,
                    int port, int requests, const std::string& command,
                    int64_t random_keys) {
  const std::string line = absl::StrCat(
      "redis-benchmark -h ", host, " -p ", port, " --dbnum ", kBaselineDb,
      " -P 64 -n ", requests,
      random_keys > 0 ? absl::StrCat(" -r ", random_keys) : "", " --csv ",
      command, " 2>/dev/null");
  Rate rate;
  const double cpu_before = ServerCpuSeconds(direct);
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) return rate;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    // "SET","431034.47",... after a header line "test","rps",...
    std::vector<std::string> fields = absl::StrSplit(buffer, ',');
    if (fields.size() >= 2 && fields[0] != "\"test\"") {
      std::string value = fields[1];
      value.erase(std::remove(value.begin(), value.end(), '"'), value.end());
      if (!absl::SimpleAtod(value, &rate.ops)) rate.ops = -1;
    }
  }
  pclose(pipe);
  const double cpu_after = ServerCpuSeconds(direct);
  if (rate.ops > 0 && cpu_before >= 0 && cpu_after >= 0) {
    const double cpu = cpu_after - cpu_before;
    rate.server_us = 1e6 * cpu / requests;
    rate.server_busy = cpu / (requests / rate.ops);
  }
  return rate;
}

absl::StatusOr<Baselines> MeasureBaselines(testing::DirectRedis& direct,
                                           const std::string& host, int port,
                                           int requests) {
  Baselines b;
  constexpr int64_t kSpace = 1000000000;
  (void)direct.Command({"FLUSHDB"});
  b.set = RedisBenchmark(direct, host, port, requests, "SET key:one value", 0);
  b.set_r = RedisBenchmark(direct, host, port, requests,
                           "SET key:__rand_int__ value", kSpace);
  (void)direct.Command({"FLUSHDB"});
  b.hset_new = RedisBenchmark(direct, host, port, requests,
                              "HSET e:__rand_int__ r 1 s 16384", kSpace);
  (void)direct.Command({"FLUSHDB"});
  // 100000 keys, created by the first pass over them, then incremented.
  b.hincrby = RedisBenchmark(direct, host, port, requests,
                             "HINCRBY e:__rand_int__ r 1", 100000);
  b.exists = RedisBenchmark(direct, host, port, requests,
                            "EXISTS e:__rand_int__", 100000);
  (void)direct.Command({"FLUSHDB"});
  if (b.set.ops <= 0 || b.set_r.ops <= 0 || b.hset_new.ops <= 0 ||
      b.hincrby.ops <= 0 || b.exists.ops <= 0) {
    return absl::UnavailableError("redis-benchmark did not run");
  }
  return b;
}

long long AppendRaw(const Subject& s, Raw raw, const std::string& fp,
                    const std::string& key, const std::string& value,
                    RawConnection& c) {
  if (s.legacy) {
    switch (raw) {
      case Raw::kCreate:
        c.Append({"HSET", key, "r", "1", "s", "16384"});
        return 2;
      case Raw::kIncrement:
        c.Append({"HINCRBY", key, "r", "1"});
        return 4;
      case Raw::kExists:
        c.Append({"EXISTS", key});
        return 1;
    }
  }
  switch (raw) {
    case Raw::kCreate:
      c.Append({"HSET", key, s.Field(fp), value});
      return 1;
    case Raw::kIncrement:
      c.Append({"HSET", key, s.Field(fp), value});
      return 0;
    case Raw::kExists:
      c.Append({"HEXISTS", key, s.Field(fp)});
      return 1;
  }
  return -1;
}

Rate MeasureOnConnections(
    testing::DirectRedis& direct, const Server& server, int db, int n,
    int batch, int threads,
    const std::function<absl::Status(RawConnection&, int64_t, int64_t)>&
        work) {
  std::vector<std::unique_ptr<RawConnection>> connections;
  for (int t = 0; t < threads; ++t) {
    auto c = RawConnection::Open(server.host, server.port, db);
    if (!c.ok()) {
      std::fprintf(stderr, "index_bench: %s\n",
                   std::string(c.status().message()).c_str());
      return Rate{};
    }
    connections.push_back(*std::move(c));
  }
  const double cpu_before = ServerCpuSeconds(direct);
  const absl::Time start = absl::Now();
  absl::Status status =
      ForBatches(n, batch, threads, [&](int t, int64_t first, int64_t last) {
        return work(*connections[t], first, last);
      });
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu_after = ServerCpuSeconds(direct);
  Rate rate;
  if (!status.ok()) {
    std::fprintf(stderr, "index_bench: %s\n",
                 std::string(status.message()).c_str());
    return rate;
  }
  rate.ops = n / seconds;
  if (cpu_before >= 0 && cpu_after >= 0) {
    rate.server_us = 1e6 * (cpu_after - cpu_before) / n;
    rate.server_busy = (cpu_after - cpu_before) / seconds;
  }
  return rate;
}

Rate MeasureRaw(Subject& s, const Server& server, Raw raw, uint64_t run,
                int n, int batch, int threads) {
  const std::string value = EncodeEntryValue(
      EntryValue{raw == Raw::kCreate ? 1u : 4u, 16384, {}});
  return MeasureOnConnections(
      *s.direct, server, s.db, n, batch, threads,
      [&](RawConnection& c, int64_t first, int64_t last) {
        long long want = 0;
        for (int64_t i = first; i < last; ++i) {
          const std::string fp = Fingerprint(run, i);
          want = AppendRaw(s, raw, fp, s.Key(fp), value, c);
        }
        return c.ExpectIntegers(last - first, want);
      });
}

absl::Status DeleteEntries(Subject& s, const Server& server, uint64_t run,
                           int n, int threads) {
  Rate r = MeasureOnConnections(
      *s.direct, server, s.db, n, 1024, threads,
      [&](RawConnection& c, int64_t first, int64_t last) {
        for (int64_t i = first; i < last; ++i) {
          const std::string fp = Fingerprint(run, i);
          if (s.legacy) {
            c.Append({"DEL", s.Key(fp)});
          } else {
            c.Append({"HDEL", s.Key(fp), s.Field(fp)});
          }
        }
        return c.ExpectIntegers(last - first, 1);
      });
  return r.ops < 0 ? absl::InternalError("clean-up failed") : absl::OkStatus();
}

absl::Status RunOp(FingerprintIndex& index, Op op, uint64_t run, int64_t first,
                   int64_t last) {
  std::vector<InsertEntry> entries;
  std::vector<std::string> fps;
  for (int64_t i = first; i < last; ++i) {
    fps.push_back(Fingerprint(run, i));
    entries.push_back({fps.back(), 16384});
  }
  bool wrong = false;
  if (op == Op::kLookup) {
    auto found = index.Lookup(kNamespace, fps);
    if (!found.ok()) return found.status();
    for (bool f : *found) wrong = wrong || !f;
  } else {
    // kInsertTokened: a third reference, idempotent per position
    // (WriteToken), as Dedup streams write.
    const WriteToken token{absl::StrCat("bench-", run),
                           static_cast<uint64_t>(first)};
    auto inserted = index.Insert(kNamespace, entries,
                                 op == Op::kInsertTokened ? &token : nullptr);
    if (!inserted.ok()) return inserted.status();
    const uint64_t expect_count = op == Op::kInsertNew         ? 1
                                  : op == Op::kInsertDuplicate ? 2
                                                               : 3;
    for (const InsertResult& r : *inserted) {
      wrong = wrong || r.is_new != (op == Op::kInsertNew) ||
              r.ref_count != expect_count;
    }
  }
  return wrong ? absl::InternalError("wrong answers from the index")
               : absl::OkStatus();
}

Rate Measure(Subject& s, Op op, uint64_t run, int n, int batch, int threads) {
  const double cpu_before = ServerCpuSeconds(*s.direct);
  const absl::Time start = absl::Now();
  absl::Status status =
      ForBatches(n, batch, threads, [&](int, int64_t first, int64_t last) {
        return RunOp(*s.index, op, run, first, last);
      });
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu_after = ServerCpuSeconds(*s.direct);
  Rate rate;
  if (!status.ok()) {
    std::fprintf(stderr, "index_bench: %s: %s\n", s.name,
                 std::string(status.message()).c_str());
    return rate;
  }
  rate.ops = n / seconds;
  if (cpu_before >= 0 && cpu_after >= 0) {
    rate.server_us = 1e6 * (cpu_after - cpu_before) / n;
    rate.server_busy = (cpu_after - cpu_before) / seconds;
  }
  return rate;
}

}  // namespace chunkd::index::bench
