// Real redis-server processes for tests and benchmarks: one server, or a
// cluster built with `redis-cli --cluster create`, each node on free
// 127.0.0.1 ports in its own temporary directory.
//
// Processes never outlive their owner: the destructor kills (SIGKILL) and
// reaps them and removes the directory, and every child is started with
// PR_SET_PDEATHSIG = SIGKILL, so that a test that crashes or is killed by
// ctest's timeout takes its servers with it. PDEATHSIG follows the thread
// that forked, so start servers from the main thread (gtest runs tests on
// it) or from a thread that lives as long as they should.
//
// Thread safety: not thread-safe; one owner drives a process. DirectRedis is
// one connection, for one thread.
#ifndef CHUNKD_TESTS_SUPPORT_REDIS_PROCESS_H_
#define CHUNKD_TESTS_SUPPORT_REDIS_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "index/redis_connection.h"

namespace chunkd::index::testing {

// OK when redis-server and redis-cli are on PATH; otherwise FAILED_PRECONDITION
// saying which is missing (tests skip with that reason).
absl::Status RedisToolsAvailable();

// A TCP port on 127.0.0.1 that was free a moment ago.
absl::StatusOr<int> PickFreePort();

class RedisProcess {
 public:
  struct Options {
    // --cluster-enabled yes, with this --cluster-node-timeout.
    bool cluster = false;
    int cluster_node_timeout_ms = 1000;
    // --appendonly yes --appendfsync always: a kill -9 loses nothing that
    // was acknowledged. Otherwise nothing is persisted (--save '').
    bool persistent = false;
    // The port to listen on; 0 picks a free one.
    int port = 0;
    std::vector<std::string> extra_args;
  };

  // Starts a server on a free port and waits until it answers PING.
  static absl::StatusOr<std::unique_ptr<RedisProcess>> Start(
      const Options& options);
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;
  ~RedisProcess();

  int port() const { return port_; }
  std::string address() const;  // "127.0.0.1:<port>"
  const std::string& dir() const { return dir_; }
  bool running() const { return pid_ > 0; }

  // kill -9 and reap.
  void Kill();
  // SIGSTOP and SIGCONT: the server holds its connections and answers
  // nothing until it goes on (what a stalled host looks like).
  void Pause();
  void Resume();
  // Starts again on the same port and directory (loading its AOF when
  // persistent); waits until it answers PING.
  absl::Status Restart();

 private:
  RedisProcess(Options options, int port, int bus_port, std::string dir);
  absl::Status Spawn();

  const Options options_;
  const int port_;
  const int bus_port_;
  const std::string dir_;
  pid_t pid_ = -1;
};

// A plain connection for checking what an index wrote.
class DirectRedis {
 public:
  static absl::StatusOr<std::unique_ptr<DirectRedis>> Connect(
      const std::string& host, int port);
  DirectRedis(const DirectRedis&) = delete;
  DirectRedis& operator=(const DirectRedis&) = delete;
  ~DirectRedis();

  // One command; UNAVAILABLE on an I/O error, INTERNAL for an error reply.
  absl::StatusOr<ReplyPtr> Command(const std::vector<std::string>& args);
  // The same for commands answered with an integer.
  absl::StatusOr<long long> Integer(const std::vector<std::string>& args);

 private:
  explicit DirectRedis(redisContext* context) : context_(context) {}
  redisContext* context_;
};

class RedisClusterProcesses {
 public:
  // Starts masters * (1 + replicas_per_master) nodes (RedisProcess::Options
  // persistent: each with its AOF), joins them with redis-cli --cluster
  // create and waits until the cluster is healthy (WaitHealthy with
  // replicas).
  static absl::StatusOr<std::unique_ptr<RedisClusterProcesses>> Start(
      int masters, int replicas_per_master, int node_timeout_ms = 1000,
      bool persistent = false);
  RedisClusterProcesses(const RedisClusterProcesses&) = delete;
  RedisClusterProcesses& operator=(const RedisClusterProcesses&) = delete;
  ~RedisClusterProcesses() = default;

  // "redis-cluster://127.0.0.1:p1,127.0.0.1:p2,..." over every node.
  std::string Spec() const;
  const std::vector<std::unique_ptr<RedisProcess>>& nodes() const {
    return nodes_;
  }
  RedisProcess* NodeWithPort(int port) const;

  // Ports of the running masters that serve slots (`slot` >= 0: that
  // slot), per CLUSTER SLOTS of a running node.
  absl::StatusOr<std::vector<int>> MasterPorts(int slot = -1) const;
  // The port of the master serving `slot`, per CLUSTER SLOTS of a running
  // node.
  absl::StatusOr<int> MasterPortOfSlot(int slot) const;

  // Waits until every running node reports cluster_state:ok, every slot has
  // a running master, and (with_replicas) every running replica's link to
  // its master is up.
  absl::Status WaitHealthy(absl::Duration timeout, bool with_replicas) const;

 private:
  RedisClusterProcesses() = default;
  std::vector<std::unique_ptr<RedisProcess>> nodes_;
};

}  // namespace chunkd::index::testing

#endif  // CHUNKD_TESTS_SUPPORT_REDIS_PROCESS_H_
