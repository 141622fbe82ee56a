#include "index/redis_config.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace chunkd::index {
namespace {

TEST(RedisSpecTest, PlainAddress) {
  auto c = ParseRedisSpec("redis://127.0.0.1:6379", {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->cluster);
  ASSERT_EQ(c->servers.size(), 1u);
  EXPECT_EQ(c->servers[0].host, "127.0.0.1");
  EXPECT_EQ(c->servers[0].port, 6379);
  EXPECT_EQ(c->servers[0].ToString(), "127.0.0.1:6379");
  EXPECT_EQ(c->db, 0);
  EXPECT_TRUE(c->password.empty());
}

TEST(RedisSpecTest, PasswordUserAndDatabase) {
  auto c = ParseRedisSpec("redis://:p%40ss%3Aw@redis.svc:6380/3", {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->password, "p@ss:w");
  EXPECT_TRUE(c->username.empty());
  EXPECT_EQ(c->servers[0].host, "redis.svc");
  EXPECT_EQ(c->db, 3);
  auto u = ParseRedisSpec("redis://chunkd:pw@h:1", {});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->username, "chunkd");
  EXPECT_EQ(u->password, "pw");
}

TEST(RedisSpecTest, ClusterSeedsAndIpv6) {
  auto c = ParseRedisSpec("redis-cluster://a:7000,b:7001,[::1]:7002", {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->cluster);
  ASSERT_EQ(c->servers.size(), 3u);
  EXPECT_EQ(c->servers[1].host, "b");
  EXPECT_EQ(c->servers[2].host, "::1");
  EXPECT_EQ(c->servers[2].ToString(), "[::1]:7002");
}

TEST(RedisSpecTest, QueryOptions) {
  IndexOptions options;
  auto c = ParseRedisSpec(
      "redis://h:1?connect_timeout_ms=250&command_timeout_ms=900&pool_size=4",
      options);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->options.connect_timeout, absl::Milliseconds(250));
  EXPECT_EQ(c->options.command_timeout, absl::Milliseconds(900));
  EXPECT_EQ(c->options.pool_size, 4);
}

TEST(RedisSpecTest, BucketBitsFromTheQueryAndItsBounds) {
  auto c = ParseRedisSpec("redis-cluster://h:1?bucket_bits=24", {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->options.redis_bucket_bits, 24);
  EXPECT_EQ(ParseRedisSpec("redis://h:1", {})->options.redis_bucket_bits, 0);
  for (const char* spec : {"redis://h:1?bucket_bits=7",
                           "redis://h:1?bucket_bits=33",
                           "redis://h:1?bucket_bits=x"}) {
    auto bad = ParseRedisSpec(spec, {});
    ASSERT_FALSE(bad.ok()) << spec;
    EXPECT_NE(bad.status().message().find("bucket_bits must be 8..32"),
              std::string::npos)
        << bad.status();
  }
}

TEST(RedisSpecTest, FailoverWaitFromTheQueryAndItsBounds) {
  IndexOptions options;
  EXPECT_EQ(options.failover_wait, absl::Seconds(30));
  options.failover_wait = absl::Seconds(3);
  auto flag = ParseRedisSpec("redis-cluster://h:1", options);
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_EQ(flag->options.failover_wait, absl::Seconds(3));
  auto url = ParseRedisSpec("redis-cluster://h:1?failover_wait_ms=25000",
                            options);
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->options.failover_wait, absl::Seconds(25));
  auto off = ParseRedisSpec("redis://h:1?failover_wait_ms=0", options);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->options.failover_wait, absl::ZeroDuration());

  for (const char* spec : {"redis://h:1?failover_wait_ms=-1",
                           "redis://h:1?failover_wait_ms=3600001",
                           "redis://h:1?failover_wait_ms=10s"}) {
    auto bad = ParseRedisSpec(spec, {});
    ASSERT_FALSE(bad.ok()) << spec;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(
                  "failover_wait_ms must be 0..3600000 milliseconds"),
              std::string::npos)
        << bad.status();
  }
  options.failover_wait = absl::Hours(2);
  auto long_flag = ParseRedisSpec("redis://h:1", options);
  ASSERT_FALSE(long_flag.ok());
  EXPECT_NE(long_flag.status().message().find(
                "the failover wait (--redis_failover_wait, failover_wait_ms) "
                "must be in [0, 1h]"),
            std::string::npos)
      << long_flag.status();
}

TEST(RedisSpecTest, ClusterWaitMustEndBeforeTheCommandTimeout) {
  EXPECT_TRUE(ParseRedisSpec("redis://h:1?command_timeout_ms=200", {}).ok());
  auto c = ParseRedisSpec("redis-cluster://h:1?command_timeout_ms=200", {});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  IndexOptions options;
  options.cluster_wait_replicas = 0;
  EXPECT_TRUE(
      ParseRedisSpec("redis-cluster://h:1?command_timeout_ms=200", options)
          .ok());
}

TEST(RedisSpecTest, PasswordSourcesInOrder) {
  const std::string file = ::testing::TempDir() + "/redis-password";
  { std::ofstream(file) << "from-file\n"; }
  IndexOptions options;
  setenv(kRedisPasswordEnv, "from-env", 1);
  EXPECT_EQ(ParseRedisSpec("redis://h:1", options)->password, "from-env");
  options.redis_password_file = file;
  EXPECT_EQ(ParseRedisSpec("redis://h:1", options)->password, "from-file");
  options.redis_password = "from-option";
  EXPECT_EQ(ParseRedisSpec("redis://h:1", options)->password, "from-option");
  EXPECT_EQ(
      ParseRedisSpec("redis://h:1?password_file=" + file, options)->password,
      "from-file");
  EXPECT_EQ(ParseRedisSpec("redis://:url@h:1?password_file=" + file, options)
                ->password,
            "url");
  unsetenv(kRedisPasswordEnv);

  auto missing =
      ParseRedisSpec("redis://h:1?password_file=/nonexistent/pw", {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("/nonexistent/pw"),
            std::string::npos);

  IndexOptions flag;
  flag.redis_password_file = "/nonexistent/flag-pw";
  auto unreadable = ParseRedisSpec("redis://h:1", flag);
  EXPECT_EQ(unreadable.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unreadable.status().message().find(
                "--redis_password_file: cannot read the Redis password file "
                "/nonexistent/flag-pw: No such file or directory"),
            std::string::npos)
      << unreadable.status();
}

TEST(RedisSpecTest, PasswordFileLosesOnlyItsTrailingNewline) {
  const std::string file = ::testing::TempDir() + "/redis-password-2";
  IndexOptions options;
  options.redis_password_file = file;
  { std::ofstream(file) << " two words \r\n"; }
  EXPECT_EQ(ParseRedisSpec("redis://h:1", options)->password, " two words ");
  const std::string long_secret(100, 'k');
  { std::ofstream(file) << long_secret << "\n"; }
  EXPECT_EQ(ParseRedisSpec("redis://h:1", options)->password, long_secret);
  { std::ofstream(file) << "no-newline"; }
  EXPECT_EQ(ParseRedisSpec("redis://h:1", options)->password, "no-newline");
  { std::ofstream(file) << "\n"; }
  auto empty = ParseRedisSpec("redis://h:1", options);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos)
      << empty.status();
}

TEST(RedisSpecTest, RejectsMalformedSpecsWithoutLeakingPasswords) {
  for (const char* spec :
       {"redis://", "redis://host", "redis://host:0", "redis://host:99999",
        "redis://h:1,h:2", "redis://h:1/16", "redis://h:1/x",
        "redis-cluster://h:1/2", "redis://h:1?bogus=1",
        "redis://h:1?pool_size=0", "redis://h:1?command_timeout_ms=0",
        "redis://secret@h:1", "redis://:secret@h:1?pool_size=99999",
        "redis://:bad%zz@h:1", "redis://h o:1", "redis://u:@h:1"}) {
    auto c = ParseRedisSpec(spec, {});
    ASSERT_FALSE(c.ok()) << spec;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(c.status().message().find("--index"), std::string::npos) << spec;
    EXPECT_EQ(c.status().message().find("secret"), std::string::npos)
        << c.status().message();
  }
}

TEST(RedisAddressTest, ParsesMovedTargets) {
  auto a = ParseRedisAddress("127.0.0.1:6381");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->port, 6381);
  EXPECT_FALSE(ParseRedisAddress("127.0.0.1").ok());
  EXPECT_FALSE(ParseRedisAddress("[::1:6379").ok());
}

}  // namespace
}  // namespace chunkd::index
