#include "app/server_config.h"

#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::app {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The first problem CheckServerConfig finds in `config`, or "" when none.
std::string Problem(const ServerConfig& config) {
  const absl::Status status = CheckServerConfig(config);
  if (status.ok()) return "";
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  return std::string(status.message());
}

TEST(ServerConfigTest, DefaultsPass) { EXPECT_EQ(Problem(ServerConfig()), ""); }

TEST(ServerConfigTest, MessageSizeOutOfRangeNamesTheFlag) {
  ServerConfig c;
  c.max_message_bytes = kMinMessageBytes - 1;
  EXPECT_THAT(Problem(c),
              HasSubstr("--max_message_bytes 1023 is out of range"));
  c.max_message_bytes = kMaxMessageBytes + 1;
  c.max_inflight_bytes = kMaxMessageBytes + 1;
  EXPECT_THAT(Problem(c), HasSubstr("--max_message_bytes"));
  // The bounds themselves are allowed.
  c.max_message_bytes = kMaxMessageBytes;
  EXPECT_EQ(Problem(c), "");
  c.max_message_bytes = kMinMessageBytes;
  EXPECT_EQ(Problem(c), "");
}

TEST(ServerConfigTest, InflightBelowMessageIsRefused) {
  ServerConfig c;
  c.max_message_bytes = 8 << 20;
  c.max_inflight_bytes = (8 << 20) - 1;
  EXPECT_THAT(Problem(c),
              HasSubstr("--max_inflight_bytes 8388607 must be at least "
                        "--max_message_bytes 8388608"));
  c.max_inflight_bytes = 8 << 20;
  EXPECT_EQ(Problem(c), "");
}

TEST(ServerConfigTest, MemoryFlagsAsGiven) {
  ServerConfig c;
  c.max_streams = 0;
  EXPECT_THAT(Problem(c), HasSubstr("--max_streams must be at least 1"));
  c.max_streams = 1;
  EXPECT_EQ(Problem(c), "");

  c = ServerConfig();
  c.index_max_entries = -2;
  EXPECT_THAT(Problem(c), HasSubstr("--index_max_entries -2 must be -1"));
  c.index_max_entries = -1;
  c.estimate_max_entries = -2;
  EXPECT_THAT(Problem(c), HasSubstr("--estimate_max_entries -2 must be -1"));
  c.estimate_max_entries = std::nullopt;
  c.index_max_entries = -2;
  for (int64_t ok : {-1, 0, 1}) {
    c.index_max_entries = ok;
    EXPECT_EQ(Problem(c), "") << ok;
  }

  // Both given: the budget must hold one message per stream.
  c = ServerConfig();
  c.max_streams = 4;
  c.max_message_bytes = 1 << 20;
  c.memory_budget = (4 << 20) - 1;
  EXPECT_THAT(Problem(c), HasSubstr("--memory_budget 4194303 must be at least "
                                    "--max_streams (4)"));
  c.memory_budget = 4 << 20;
  EXPECT_EQ(Problem(c), "");
  // The budget alone is the memory plan's to judge: the streams are sized.
  c.max_streams.reset();
  c.memory_budget = 1;
  EXPECT_EQ(Problem(c), "");
}

TEST(ServerConfigTest, StreamAndConnectionLimits) {
  ServerConfig c;
  c.max_streams_per_token = -2;
  EXPECT_THAT(Problem(c), HasSubstr("--max_streams_per_token -2 must be -1"));
  c.max_streams_per_token = 0;
  EXPECT_EQ(Problem(c), "");

  c = ServerConfig();
  c.max_streams_per_connection = 0;
  EXPECT_THAT(Problem(c),
              HasSubstr("--max_streams_per_connection must be at least 1"));

  c = ServerConfig();
  c.stream_idle_timeout = absl::Seconds(-1);
  EXPECT_THAT(Problem(c), HasSubstr("--stream_idle_timeout"));
  c = ServerConfig();
  c.max_connection_idle = absl::Seconds(-1);
  EXPECT_THAT(Problem(c), HasSubstr("--max_connection_idle"));
  c = ServerConfig();
  c.stream_idle_timeout = absl::ZeroDuration();
  c.max_connection_idle = absl::ZeroDuration();
  EXPECT_EQ(Problem(c), "");

  c = ServerConfig();
  c.shutdown_grace = absl::Seconds(-1);
  EXPECT_THAT(Problem(c),
              HasSubstr("--shutdown_grace -1s must not be negative"));
  c.shutdown_grace = absl::ZeroDuration();
  EXPECT_EQ(Problem(c), "");
}

TEST(ServerConfigTest, TlsFilesGoInPairs) {
  ServerConfig c;
  c.tls_cert = "cert.pem";
  EXPECT_THAT(Problem(c), HasSubstr("TLS needs both --tls_cert and --tls_key"));
  c = ServerConfig();
  c.tls_key = "key.pem";
  EXPECT_THAT(Problem(c), HasSubstr("TLS needs both --tls_cert and --tls_key"));
  c = ServerConfig();
  c.tls_client_ca = "ca.pem";
  EXPECT_THAT(Problem(c),
              HasSubstr("--tls_client_ca needs --tls_cert and --tls_key"));
  c.tls_cert = "cert.pem";
  EXPECT_THAT(Problem(c), HasSubstr("TLS needs both"));
  c.tls_key = "key.pem";
  EXPECT_EQ(Problem(c), "");  // mutual TLS; the files are read at start
  c.tls_client_ca.clear();
  EXPECT_EQ(Problem(c), "");  // TLS
}

TEST(ServerConfigTest, IndexSpecForms) {
  ServerConfig c;
  for (const char* ok :
       {"memory", "rocksdb:///var/lib/chunkd/index?sync=always",
        "redis://:pw@127.0.0.1:6379/2", "redis-cluster://a:6379,b:6379"}) {
    c.index = ok;
    EXPECT_EQ(Problem(c), "") << ok;
  }
  for (const char* bad : {"", "Memory", "memory:", "rocksdb:/x", "http://x",
                          "rediss://h:6379"}) {
    c.index = bad;
    EXPECT_THAT(Problem(c), HasSubstr("--index '")) << bad;
    EXPECT_THAT(Problem(c), HasSubstr("is not supported")) << bad;
  }
  // The message never shows a password.
  c.index = "rediss://user:secret@h:6379";
  EXPECT_THAT(Problem(c), Not(HasSubstr("secret")));
}

TEST(ServerConfigTest, FirstProblemInFlagOrder) {
  ServerConfig c;
  c.max_message_bytes = 1;
  c.tls_cert = "cert.pem";
  c.index = "nowhere";
  EXPECT_THAT(Problem(c), HasSubstr("--max_message_bytes"));
  c.max_message_bytes = kMinMessageBytes;
  EXPECT_THAT(Problem(c), HasSubstr("TLS needs both"));
}

TEST(ServerConfigTest, IndexPlacementIsAskedOfTheSpec) {
  ServerConfig c;
  index::IndexPlacement p = IndexPlacementOf(c);
  EXPECT_EQ(p.backend, "memory");
  EXPECT_TRUE(p.in_process_memory && p.embedded);
  EXPECT_FALSE(p.persistent || p.block_cache);

  c.index = "rocksdb:///tmp/x";
  p = IndexPlacementOf(c);
  EXPECT_EQ(p.backend, "rocksdb");
  EXPECT_TRUE(p.embedded && p.persistent && p.block_cache);
  EXPECT_FALSE(p.in_process_memory);

  for (const char* redis : {"redis://h:1", "redis-cluster://h:1,g:2"}) {
    c.index = redis;
    p = IndexPlacementOf(c);
    EXPECT_TRUE(p.persistent) << redis;
    EXPECT_FALSE(p.in_process_memory || p.embedded || p.block_cache) << redis;
  }
  c.index = "nowhere";
  p = IndexPlacementOf(c);
  EXPECT_EQ(p.backend, "");
  EXPECT_FALSE(p.in_process_memory || p.embedded || p.persistent);
}

TEST(ServerConfigTest, MemoryInputsCarryWhatWasGiven) {
  ServerConfig c;
  service::MemoryInputs in = MemoryInputsOf(c, 6);
  EXPECT_FALSE(in.max_streams.has_value());
  EXPECT_FALSE(in.memory_budget.has_value());
  EXPECT_FALSE(in.stream_memory.has_value());
  EXPECT_FALSE(in.index_max_entries.has_value());
  EXPECT_FALSE(in.estimate_max_entries.has_value());
  EXPECT_FALSE(in.hint_cache_mib.has_value());
  EXPECT_FALSE(in.index_cache_mib.has_value());
  EXPECT_EQ(in.threads, 6u);  // --threads 0: one per core
  EXPECT_EQ(in.cores, 6u);
  EXPECT_TRUE(in.memory_index);
  EXPECT_FALSE(in.rocksdb_index);

  c.index = "rocksdb:///tmp/x";
  c.threads = 3;
  c.max_streams = 7;
  c.memory_budget = 1 << 30;
  c.stream_memory_budget = 0;  // given 0: sized all the same
  c.index_max_entries = 10;
  c.estimate_max_entries = 11;
  c.index_cache_mib = 32;
  c.hint_cache_mib = 0;
  c.max_message_bytes = 1 << 20;
  c.max_inflight_bytes = 2 << 20;
  in = MemoryInputsOf(c, 6);
  EXPECT_EQ(in.threads, 3u);
  EXPECT_EQ(in.max_streams, 7u);
  EXPECT_EQ(in.memory_budget, uint64_t{1} << 30);
  EXPECT_FALSE(in.stream_memory.has_value());
  EXPECT_EQ(in.index_max_entries, 10);
  EXPECT_EQ(in.estimate_max_entries, 11);
  EXPECT_EQ(in.index_cache_mib, 32u);
  EXPECT_EQ(in.hint_cache_mib, 0u);
  EXPECT_EQ(in.max_message_bytes, uint64_t{1} << 20);
  EXPECT_EQ(in.max_inflight_bytes, uint64_t{2} << 20);
  EXPECT_FALSE(in.memory_index);
  EXPECT_TRUE(in.rocksdb_index);

  c.stream_memory_budget = 5 << 20;
  EXPECT_EQ(MemoryInputsOf(c, 6).stream_memory, uint64_t{5} << 20);
  c.index = "redis://h:1";
  in = MemoryInputsOf(c, 6);
  EXPECT_FALSE(in.memory_index || in.rocksdb_index);
}

TEST(ServerConfigTest, StreamLimitsFromThePlan) {
  ServerConfig c;
  service::MemoryPlan plan;
  plan.max_streams = 10;
  plan.memory_budget = 123;
  plan.stream_memory = 456;
  plan.estimate_max_entries = 789;
  StreamLimits limits = StreamLimitsOf(c, plan);
  EXPECT_EQ(limits.max_message, c.max_message_bytes);
  EXPECT_EQ(limits.max_inflight, c.max_inflight_bytes);
  EXPECT_EQ(limits.memory_budget, 123u);
  EXPECT_EQ(limits.stream_memory, 456u);
  EXPECT_EQ(limits.estimate_max_entries, 789u);
  EXPECT_EQ(limits.registry.max_streams, 10u);
  EXPECT_EQ(limits.registry.max_streams_per_token, 2u);  // a quarter
  EXPECT_EQ(limits.registry.max_streams_per_ip, 0u);
  EXPECT_EQ(limits.streams_per_connection, 32u);
  EXPECT_EQ(limits.registry.max_streams_per_connection, 64u);  // twice
  EXPECT_EQ(limits.stream_rate, 1000u);
  EXPECT_EQ(limits.idle_timeout, absl::Seconds(60));
  EXPECT_EQ(limits.connection_idle, absl::Minutes(5));

  plan.max_streams = 3;  // a quarter, at least one
  EXPECT_EQ(StreamLimitsOf(c, plan).registry.max_streams_per_token, 1u);
  c.max_streams_per_token = 0;
  EXPECT_EQ(StreamLimitsOf(c, plan).registry.max_streams_per_token, 0u);
  c.max_streams_per_token = 5;
  c.max_streams_per_ip = 2;
  limits = StreamLimitsOf(c, plan);
  EXPECT_EQ(limits.registry.max_streams_per_token, 5u);
  EXPECT_EQ(limits.registry.max_streams_per_ip, 2u);
}

TEST(ServerConfigTest, WorkerThreads) {
  ServerConfig c;
  EXPECT_EQ(WorkerThreads(c, 8), 8u);
  EXPECT_EQ(WorkerThreads(c, 0), 1u);
  c.threads = 3;
  EXPECT_EQ(WorkerThreads(c, 8), 3u);
}

// The text of a file of the repository.
std::string ReadSource(const std::string& path) {
  std::ifstream in(std::string(CHUNKD_SOURCE_DIR) + "/" + path);
  EXPECT_TRUE(in.good()) << path << " not found";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// docs/operations.md's "Server flags" table: each flag's default cell, as
// its first `code` span ("" for "–" and "auto").
std::map<std::string, std::string> DocumentedDefaults() {
  std::istringstream in(ReadSource("docs/operations.md"));
  std::map<std::string, std::string> defaults;
  const std::regex code("`([^`]*)`");
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line == "## Server flags") in_table = true;
    if (!in_table) continue;
    if (!absl::StartsWith(line, "| `--")) {
      if (!defaults.empty() && !absl::StartsWith(line, "|")) break;
      continue;
    }
    const std::string row = absl::StrReplaceAll(line, {{"\\|", "/"}});
    std::vector<std::string> cells = absl::StrSplit(row, '|');
    if (cells.size() < 4) continue;
    std::smatch m;
    std::string value;
    if (std::regex_search(cells[2], m, code)) value = m[1];
    for (auto it = std::sregex_iterator(cells[1].begin(), cells[1].end(), code);
         it != std::sregex_iterator(); ++it) {
      std::string flag = (*it)[1];
      defaults[flag.substr(2)] = value;
    }
  }
  return defaults;
}

// server/main.cc's ABSL_FLAG defaults, as the table writes them: a string's
// contents, an integer in decimal (the forms `N`, `T{N} << M`), a duration
// in Abseil's form (`absl::Seconds(N)`, `absl::Minutes(N)`).
std::map<std::string, std::string> FlagDefaults() {
  const std::string text = ReadSource("server/main.cc");
  const std::regex flag(
      R"re(ABSL_FLAG\(\s*([\w:]+)\s*,\s*(\w+)\s*,\s*([^,]+?)\s*,\s*")re");
  const std::regex integer(R"re((?:\w+\{)?(-?\d+)\}?(?: << (\d+))?)re");
  const std::regex time(R"re(absl::(Seconds|Minutes)\((\d+)\))re");
  std::map<std::string, std::string> defaults;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), flag);
       it != std::sregex_iterator(); ++it) {
    const std::string type = (*it)[1], name = (*it)[2], value = (*it)[3];
    std::smatch m;
    if (type == "std::string") {
      EXPECT_TRUE(value.size() >= 2 && value.front() == '"') << name;
      defaults[name] = value.substr(1, value.size() - 2);
    } else if (std::regex_match(value, m, time)) {
      const int64_t n = std::stoll(m[2]);
      defaults[name] = absl::FormatDuration(
          m[1] == "Seconds" ? absl::Seconds(n) : absl::Minutes(n));
    } else if (std::regex_match(value, m, integer)) {
      const int shift = m[2].matched ? std::stoi(m[2]) : 0;
      defaults[name] = std::to_string(std::stoll(m[1]) * (int64_t{1} << shift));
    } else {
      ADD_FAILURE() << "--" << name << ": a new form of default: " << value;
    }
  }
  return defaults;
}

template <typename T>
std::function<bool(const std::string&)> Int(T expected) {
  return [expected](const std::string& doc) {
    int64_t value = 0;
    return absl::SimpleAtoi(doc, &value) && value == int64_t(expected);
  };
}

std::function<bool(const std::string&)> Text(std::string expected) {
  return [expected](const std::string& doc) { return doc == expected; };
}

std::function<bool(const std::string&)> Time(absl::Duration expected) {
  return [expected](const std::string& doc) {
    absl::Duration value;
    return absl::ParseDuration(doc, &value) && value == expected;
  };
}

TEST(ServerConfigTest, DefaultsAreTheDocumentedOnes) {
  const ServerConfig d;
  // The memory flags the plan sizes: their default without a limit.
  const std::map<std::string, std::function<bool(const std::string&)>> ours = {
      {"listen", Text(d.listen)},
      {"metrics_listen", Text(d.metrics_listen)},
      {"index", Text(d.index)},
      {"redis_password_file", Text(d.redis_password_file)},
      {"redis_pool_size", Int(d.redis_pool_size)},
      {"redis_connect_timeout", Time(d.redis_connect_timeout)},
      {"redis_command_timeout", Time(d.redis_command_timeout)},
      {"redis_failover_wait", Time(d.redis_failover_wait)},
      {"max_message_bytes", Int(d.max_message_bytes)},
      {"max_inflight_bytes", Int(d.max_inflight_bytes)},
      {"threads", Int(d.threads)},
      {"backend", Text(d.backend)},
      {"max_streams", Int(service::kDefaultMaxStreams)},
      {"max_streams_per_token", Int(d.max_streams_per_token)},
      {"max_streams_per_ip", Int(d.max_streams_per_ip)},
      {"max_streams_per_connection", Int(d.max_streams_per_connection)},
      {"max_stream_rate_per_connection",
       Int(d.max_stream_rate_per_connection)},
      {"stream_idle_timeout", Time(d.stream_idle_timeout)},
      {"max_connection_idle", Time(d.max_connection_idle)},
      {"memory_budget", Int(service::kDefaultMemoryBudget)},
      {"stream_memory_budget", Int(d.stream_memory_budget.value_or(0))},
      {"index_max_entries", Int(d.index_max_entries.value_or(-1))},
      {"estimate_max_entries", Int(d.estimate_max_entries.value_or(-1))},
      {"index_cache_mib", Int(service::kDefaultIndexCacheMib)},
      {"hint_cache_mib", Int(service::kDefaultHintCacheMib)},
      {"memory_limit_file", Text(d.memory_limit_file)},
      {"tls_cert", Text(d.tls_cert)},
      {"tls_key", Text(d.tls_key)},
      {"tls_client_ca", Text(d.tls_client_ca)},
      {"auth_tokens", Text(d.auth_tokens)},
      {"shutdown_grace", Time(d.shutdown_grace)},
  };
  // The table's defaults and the flags' (what --help prints).
  for (const auto& [where, defaults] :
       {std::pair{"docs/operations.md", DocumentedDefaults()},
        std::pair{"server/main.cc", FlagDefaults()}}) {
    ASSERT_EQ(defaults.size(), ours.size())
        << where << " and ServerConfig list different flags";
    for (const auto& [flag, matches] : ours) {
      const auto value = defaults.find(flag);
      ASSERT_NE(value, defaults.end()) << "--" << flag << " not in " << where;
      EXPECT_TRUE(matches(value->second))
          << "--" << flag << ": the default in " << where << ", '"
          << value->second << "', is not ServerConfig's";
    }
  }
}

}  // namespace
}  // namespace chunkd::app
