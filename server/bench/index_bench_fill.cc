#include "bench/index_bench_fill.h"

namespace chunkd::index::bench {

uint64_t Mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return x;
}

std::string Fingerprint(uint64_t run, uint64_t i) {
  std::string fp(32, '\0');
  uint64_t x = (run << 40) ^ (i + 1) * 0x9e3779b97f4a7c15ull;
  for (size_t k = 0; k < fp.size(); k += 8) {
    x = Mix(x);
    for (size_t b = 0; b < 8; ++b) fp[k + b] = static_cast<char>(x >> (8 * b));
  }
  return fp;
}

uint32_t ChunkSize(uint64_t run, uint64_t i) {
  return 4096 + static_cast<uint32_t>(
                    Mix((run << 40) ^ (i * 0x2545f4914f6cdd1dull) ^ 77) %
                    24576);
}

double InfoSum(testing::DirectRedis& direct, const char* section,
               const std::vector<const char*>& names) {
  auto reply = direct.Command({"INFO", section});
  if (!reply.ok() || (*reply)->type != REDIS_REPLY_STRING) return -1;
  double total = 0;
  size_t found = 0;
  for (absl::string_view line : absl::StrSplit(
           absl::string_view((*reply)->str, (*reply)->len), "\r\n")) {
    for (const char* field : names) {
      if (absl::ConsumePrefix(&line, field)) {
        double v = 0;
        if (!absl::SimpleAtod(line, &v)) return -1;
        total += v;
        ++found;
      }
    }
  }
  return found == names.size() ? total : -1;
}

double ServerCpuSeconds(testing::DirectRedis& direct) {
  return InfoSum(direct, "cpu", {"used_cpu_user:", "used_cpu_sys:"});
}

double UsedMemory(testing::DirectRedis& direct) {
  return InfoSum(direct, "memory", {"used_memory:"});
}

double SettledUsedMemory(testing::DirectRedis& direct) {
  double last = UsedMemory(direct);
  for (int i = 0; i < 60; ++i) {
    absl::SleepFor(absl::Seconds(1));
    const double now = UsedMemory(direct);
    if (now < 0 || std::abs(now - last) <= 0.0005 * last) return now;
    last = now;
  }
  return last;
}

absl::Status ForBatches(
    int64_t n, int batch, int threads,
    const std::function<absl::Status(int, int64_t, int64_t)>& work) {
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  absl::Status failure;
  std::mutex failure_mu;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      while (!failed.load()) {
        const int64_t first = next.fetch_add(batch);
        if (first >= n) return;
        absl::Status s = work(t, first, std::min(n, first + batch));
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(failure_mu);
          if (failure.ok()) failure = s;
          failed = true;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  return failure;
}

absl::StatusOr<std::unique_ptr<testing::DirectRedis>> ConnectDb(
    const Server& server, int db) {
  auto direct = testing::DirectRedis::Connect(server.host, server.port);
  if (!direct.ok()) return direct.status();
  if (auto s = (*direct)->Command({"SELECT", std::to_string(db)}); !s.ok()) {
    return s.status();
  }
  return direct;
}

absl::StatusOr<std::unique_ptr<Subject>> OpenSubject(
    const Server& server, bool legacy, const IndexOptions& options) {
  auto subject = std::make_unique<Subject>();
  subject->name = legacy ? "old" : "new";
  subject->legacy = legacy;
  subject->db = legacy ? 0 : 1;
  auto direct = ConnectDb(server, subject->db);
  if (!direct.ok()) return direct.status();
  subject->direct = *std::move(direct);
  if (auto s = subject->direct->Command({"FLUSHDB"}); !s.ok()) {
    return s.status();
  }
  auto config = ParseRedisSpec(
      absl::StrCat("redis://", server.host, ":", server.port, "/",
                   subject->db),
      options);
  if (!config.ok()) return config.status();
  config->legacy_layout = legacy;
  auto index = CreateRedisIndex(*std::move(config));
  if (!index.ok()) return index.status();
  subject->index = *std::move(index);
  if (!legacy) {
    auto bits = subject->direct->Command({"HGET", kLayoutKey, "bucket_bits"});
    int b = 0;
    if (!bits.ok() || (*bits)->type != REDIS_REPLY_STRING ||
        !absl::SimpleAtoi(absl::string_view((*bits)->str, (*bits)->len), &b)) {
      return absl::InternalError("the new index wrote no bucket_bits");
    }
    subject->buckets.emplace(b);
  }
  return subject;
}

absl::Status FillEntries(Subject& s, uint64_t run, int64_t n, int batch,
                         int threads) {
  return ForBatches(n, batch, threads,
                    [&](int, int64_t first, int64_t last) -> absl::Status {
                      std::vector<InsertEntry> entries;
                      for (int64_t i = first; i < last; ++i) {
                        entries.push_back(
                            {Fingerprint(run, i), ChunkSize(run, i)});
                      }
                      auto r = s.index->Insert(kNamespace, entries, nullptr);
                      if (!r.ok()) return r.status();
                      for (const InsertResult& x : *r) {
                        if (!x.is_new || x.ref_count != 1) {
                          return absl::InternalError(
                              "fill: an insert was not new with count 1");
                        }
                      }
                      return absl::OkStatus();
                    });
}

NextSize HintOf(uint64_t run, int64_t i) {
  return NextSize(Fingerprint(run, i), ChunkSize(run, i + 1),
                  {ChunkSize(run, i + 2), ChunkSize(run, i + 3),
                   ChunkSize(run, i + 4)});
}

absl::Status FillHints(Subject& s, uint64_t run, int64_t n, int batch,
                       int threads) {
  return ForBatches(n, batch, threads,
                    [&](int, int64_t first, int64_t last) -> absl::Status {
                      std::vector<NextSize> hints;
                      for (int64_t i = first; i < last; ++i) {
                        hints.push_back(HintOf(run, i));
                      }
                      return s.index->RecordNextSizes(kNamespace, kParamsKey,
                                                      hints);
                    });
}

std::vector<int64_t> SampleOf(int64_t n, int sample) {
  std::vector<int64_t> out;
  const int64_t step = std::max<int64_t>(1, n / std::max(sample, 1));
  for (int64_t i = 0; i < n && static_cast<int>(out.size()) < sample;
       i += step) {
    out.push_back(i);
  }
  return out;
}

absl::Status CheckHints(Subject& s, uint64_t run, int64_t n, int sample) {
  std::vector<std::string> fps;
  std::vector<NextSize> want;
  for (int64_t i : SampleOf(n, sample)) {
    want.push_back(HintOf(run, i));
    fps.push_back(want.back().fingerprint);
  }
  for (size_t k = 0; k < fps.size(); k += 256) {
    const size_t count = std::min<size_t>(256, fps.size() - k);
    auto got = s.index->NextHintsOf(
        kNamespace, kParamsKey, absl::MakeConstSpan(fps).subspan(k, count));
    if (!got.ok()) return got.status();
    for (size_t j = 0; j < count; ++j) {
      const NextHints& h = (*got)[j];
      const NextSize& w = want[k + j];
      if (h.sizes != std::vector<uint32_t>{w.next_size} || h.run != w.run) {
        return absl::InternalError(
            absl::StrCat(s.name, ": hints read back differ from those "
                                 "recorded"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CountBuckets(Subject& s, RawConnection& raw, FillCheck* check) {
  std::vector<std::string> keys;
  std::string cursor = "0";
  const std::string match =
      absl::StrCat(s.buckets->KeyPrefix(kNamespace), "*");
  do {
    auto reply = s.direct->Command(
        {"SCAN", cursor, "MATCH", match, "COUNT", "10000"});
    if (!reply.ok()) return reply.status();
    const redisReply& r = **reply;
    if (r.type != REDIS_REPLY_ARRAY || r.elements != 2) {
      return absl::InternalError("SCAN: unexpected reply");
    }
    cursor.assign(r.element[0]->str, r.element[0]->len);
    for (size_t k = 0; k < r.element[1]->elements; ++k) {
      keys.emplace_back(r.element[1]->element[k]->str,
                        r.element[1]->element[k]->len);
    }
  } while (cursor != "0");
  for (const std::string& key : keys) raw.Append({"HLEN", key});
  for (size_t k = 0; k < keys.size(); ++k) {
    auto reply = raw.Read();
    if (!reply.ok()) return reply.status();
    check->entries += (*reply)->integer;
  }
  check->keys = static_cast<int64_t>(keys.size());
  return absl::OkStatus();
}

absl::StatusOr<FillCheck> CheckFill(Subject& s, const Server& server,
                                    uint64_t run, int64_t n, int sample) {
  FillCheck check;
  auto raw = RawConnection::Open(server.host, server.port, s.db);
  if (!raw.ok()) return raw.status();
  if (s.legacy) {
    auto size = s.direct->Integer({"DBSIZE"});
    if (!size.ok()) return size.status();
    check.keys = check.entries = *size;
  } else if (absl::Status c = CountBuckets(s, **raw, &check); !c.ok()) {
    return c;
  }
  if (check.entries != n) {
    return absl::InternalError(absl::StrCat(s.name, ": ", check.entries,
                                            " entries after a fill of ", n));
  }
  std::set<std::string> keys;
  for (int64_t i : SampleOf(n, sample)) keys.insert(s.Key(Fingerprint(run, i)));
  for (const std::string& key : keys) (*raw)->Append({"OBJECT", "ENCODING", key});
  for (size_t k = 0; k < keys.size(); ++k) {
    auto reply = (*raw)->Read();
    if (!reply.ok()) return reply.status();
    if (absl::string_view((*reply)->str, (*reply)->len) == "listpack") {
      ++check.listpack;
    }
  }
  check.sampled = static_cast<int>(keys.size());
  return check;
}

absl::StatusOr<Footprint> MeasureFootprint(Subject& s, const Server& server,
                                           uint64_t run, int64_t n) {
  const int batch = absl::GetFlag(FLAGS_fill_batch);
  const int threads = absl::GetFlag(FLAGS_threads);
  const int sample = absl::GetFlag(FLAGS_encoding_sample);
  if (absl::Status f = s.Flush(); !f.ok()) return f;
  Footprint fp;
  fp.entries = n;
  const double before = SettledUsedMemory(*s.direct);
  if (absl::Status f = FillEntries(s, run, n, batch, threads); !f.ok()) {
    return f;
  }
  const double filled = SettledUsedMemory(*s.direct);
  if (absl::Status f = FillHints(s, run, n, batch, threads); !f.ok()) {
    return f;
  }
  const double hinted = SettledUsedMemory(*s.direct);
  if (before < 0 || filled < 0 || hinted < 0) {
    return absl::InternalError("INFO memory: no used_memory");
  }
  fp.plain = (filled - before) / static_cast<double>(n);
  fp.hinted = (hinted - before) / static_cast<double>(n);
  if (absl::Status c = CheckHints(s, run, n, 1000); !c.ok()) return c;
  auto check = CheckFill(s, server, run, n, sample);
  if (!check.ok()) return check.status();
  fp.check = *check;
  return fp;
}

}  // namespace chunkd::index::bench
