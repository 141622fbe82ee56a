#include "support/redis_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace chunkd::index::testing {
namespace {

constexpr absl::Duration kStartTimeout = absl::Seconds(15);

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

absl::StatusOr<std::string> MakeTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(
      base != nullptr && *base != '\0' ? base : "/tmp", "/chunkd-redis-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("mkdtemp ", pattern, ": ", std::strerror(errno)));
  }
  return pattern;
}

std::string Tail(const std::string& path, size_t bytes = 2000) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (text.size() > bytes) text = text.substr(text.size() - bytes);
  return text;
}

// fork + exec `argv` with stdout and stderr to `log`, dying with this
// thread. Everything the child needs is prepared before fork.
absl::StatusOr<pid_t> SpawnChild(const std::vector<std::string>& argv,
                                 const std::string& log,
                                 const std::string& cwd) {
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log_fd =
      open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(
        absl::StrCat("open ", log, ": ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died already
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    if (chdir(cwd.c_str()) != 0) _exit(127);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  return pid;
}

}  // namespace

absl::Status RedisToolsAvailable() {
  for (const char* tool : {"redis-server", "redis-cli"}) {
    if (FindOnPath(tool).empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          tool, " is not installed (apt-get install redis-server)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError(
        absl::StrCat("binding a free port: ", std::strerror(errno)));
  }
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

RedisProcess::RedisProcess(Options options, int port, int bus_port,
                           std::string dir)
    : options_(std::move(options)),
      port_(port),
      bus_port_(bus_port),
      dir_(std::move(dir)) {}

absl::StatusOr<std::unique_ptr<RedisProcess>> RedisProcess::Start(
    const Options& options) {
  if (absl::Status tools = RedisToolsAvailable(); !tools.ok()) return tools;
  // A port picked this way can be taken by someone else before the server
  // binds it: try a few.
  absl::Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto dir = MakeTempDir();
    if (!dir.ok()) return dir.status();
    auto port =
        options.port != 0 ? absl::StatusOr<int>(options.port) : PickFreePort();
    if (!port.ok()) return port.status();
    int bus_port = 0;
    if (options.cluster) {
      auto bus = PickFreePort();
      if (!bus.ok()) return bus.status();
      bus_port = *bus;
      if (bus_port == *port) continue;
    }
    std::unique_ptr<RedisProcess> process(
        new RedisProcess(options, *port, bus_port, *dir));
    last = process->Spawn();
    if (last.ok()) return process;
    if (options.port != 0) break;  // no other port to try
  }
  return last;
}

RedisProcess::~RedisProcess() {
  Kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string RedisProcess::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

absl::Status RedisProcess::Spawn() {
  std::vector<std::string> argv = {FindOnPath("redis-server"),
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--dir",
                                   dir_,
                                   "--save",
                                   "",
                                   "--daemonize",
                                   "no",
                                   "--hash-max-listpack-entries",
                                   "512",
                                   "--repl-diskless-sync",
                                   "yes",
                                   "--repl-diskless-sync-delay",
                                   "0"};
  if (options_.persistent) {
    argv.insert(argv.end(), {"--appendonly", "yes", "--appendfsync", "always"});
  } else {
    argv.insert(argv.end(), {"--appendonly", "no"});
  }
  if (options_.cluster) {
    argv.insert(argv.end(),
                {"--cluster-enabled", "yes", "--cluster-config-file",
                 "nodes.conf", "--cluster-node-timeout",
                 std::to_string(options_.cluster_node_timeout_ms),
                 "--cluster-port", std::to_string(bus_port_)});
  }
  argv.insert(argv.end(), options_.extra_args.begin(),
              options_.extra_args.end());
  const std::string log = absl::StrCat(dir_, "/redis.log");
  auto pid = SpawnChild(argv, log, dir_);
  if (!pid.ok()) return pid.status();
  pid_ = *pid;

  const absl::Time deadline = absl::Now() + kStartTimeout;
  while (absl::Now() < deadline) {
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat(
          "redis-server on port ", port_, " exited at start:\n", Tail(log)));
    }
    auto direct = DirectRedis::Connect("127.0.0.1", port_);
    if (direct.ok()) {
      // Any answer but LOADING means up (NOAUTH too, with requirepass).
      auto reply = (*direct)->Command({"PING"});
      if (reply.ok() ||
          (reply.status().code() == absl::StatusCode::kInternal &&
           !absl::StrContains(reply.status().message(), "LOADING"))) {
        return absl::OkStatus();
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "redis-server on port ", port_, " did not answer PING within ",
      absl::FormatDuration(kStartTimeout), ":\n", Tail(log)));
}

void RedisProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

void RedisProcess::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisProcess::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

absl::Status RedisProcess::Restart() {
  Kill();
  return Spawn();
}

absl::StatusOr<std::unique_ptr<DirectRedis>> DirectRedis::Connect(
    const std::string& host, int port) {
  redisContext* context = redisConnectWithTimeout(
      host.c_str(), port, absl::ToTimeval(absl::Seconds(1)));
  if (context == nullptr) return absl::InternalError("cannot allocate");
  if (context->err != 0) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat(host, ":", port, ": ", context->errstr));
    redisFree(context);
    return s;
  }
  redisSetTimeout(context, absl::ToTimeval(absl::Seconds(10)));
  return std::unique_ptr<DirectRedis>(new DirectRedis(context));
}

DirectRedis::~DirectRedis() { redisFree(context_); }

absl::StatusOr<ReplyPtr> DirectRedis::Command(
    const std::vector<std::string>& args) {
  if (context_->err != 0) {
    return absl::UnavailableError(context_->errstr);
  }
  ReplyPtr reply = RedisCommand(context_, args);
  if (reply == nullptr) return absl::UnavailableError(context_->errstr);
  if (reply->type == REDIS_REPLY_ERROR) {
    return absl::InternalError(
        absl::StrCat(absl::StrJoin(args, " ").substr(0, 60), ": ",
                     absl::string_view(reply->str, reply->len)));
  }
  return reply;
}

absl::StatusOr<long long> DirectRedis::Integer(
    const std::vector<std::string>& args) {
  auto reply = Command(args);
  if (!reply.ok()) return reply.status();
  if ((*reply)->type != REDIS_REPLY_INTEGER) {
    return absl::InternalError(absl::StrCat(args[0], ": not an integer reply"));
  }
  return (*reply)->integer;
}

absl::StatusOr<std::unique_ptr<RedisClusterProcesses>>
RedisClusterProcesses::Start(int masters, int replicas_per_master,
                             int node_timeout_ms, bool persistent) {
  std::unique_ptr<RedisClusterProcesses> cluster(new RedisClusterProcesses());
  RedisProcess::Options options;
  options.cluster = true;
  options.cluster_node_timeout_ms = node_timeout_ms;
  options.persistent = persistent;
  const int total = masters * (1 + replicas_per_master);
  for (int i = 0; i < total; ++i) {
    auto node = RedisProcess::Start(options);
    if (!node.ok()) return node.status();
    cluster->nodes_.push_back(*std::move(node));
  }

  std::vector<std::string> argv = {FindOnPath("redis-cli"), "--cluster",
                                   "create"};
  for (const auto& node : cluster->nodes_) argv.push_back(node->address());
  argv.insert(argv.end(),
              {"--cluster-replicas", std::to_string(replicas_per_master),
               "--cluster-yes"});
  const std::string dir = cluster->nodes_.front()->dir();
  const std::string log = absl::StrCat(dir, "/cluster-create.log");
  auto pid = SpawnChild(argv, log, dir);
  if (!pid.ok()) return pid.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  int wstatus = 0;
  while (true) {
    const pid_t done = waitpid(*pid, &wstatus, WNOHANG);
    if (done == *pid) break;
    if (absl::Now() > deadline) {
      kill(*pid, SIGKILL);
      waitpid(*pid, &wstatus, 0);
      return absl::DeadlineExceededError(
          absl::StrCat("redis-cli --cluster create hung:\n", Tail(log)));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return absl::InternalError(
        absl::StrCat("redis-cli --cluster create failed:\n", Tail(log)));
  }
  absl::Status healthy =
      cluster->WaitHealthy(absl::Seconds(60), replicas_per_master > 0);
  if (!healthy.ok()) return healthy;
  return cluster;
}

std::string RedisClusterProcesses::Spec() const {
  std::vector<std::string> addresses;
  for (const auto& node : nodes_) addresses.push_back(node->address());
  return absl::StrCat("redis-cluster://", absl::StrJoin(addresses, ","));
}

RedisProcess* RedisClusterProcesses::NodeWithPort(int port) const {
  for (const auto& node : nodes_) {
    if (node->port() == port) return node.get();
  }
  return nullptr;
}

namespace {

// Master ports per CLUSTER SLOTS of one node, and whether all slots are
// covered by them; with `slot` >= 0, only the master of that slot.
absl::StatusOr<std::vector<int>> SlotMasters(DirectRedis& direct,
                                             bool* covered, int slot = -1) {
  auto reply = direct.Command({"CLUSTER", "SLOTS"});
  if (!reply.ok()) return reply.status();
  std::set<int> ports;
  int slots = 0;
  for (size_t i = 0; i < (*reply)->elements; ++i) {
    const redisReply* range = (*reply)->element[i];
    if (range->elements < 3) continue;
    const long long first = range->element[0]->integer;
    const long long last = range->element[1]->integer;
    slots += static_cast<int>(last - first + 1);
    if (slot >= 0 && (slot < first || slot > last)) continue;
    ports.insert(static_cast<int>(range->element[2]->element[1]->integer));
  }
  *covered = slots == 16384;
  return std::vector<int>(ports.begin(), ports.end());
}

}  // namespace

absl::StatusOr<std::vector<int>> RedisClusterProcesses::MasterPorts(
    int slot) const {
  absl::Status last = absl::UnavailableError("no node is running");
  for (const auto& node : nodes_) {
    if (!node->running()) continue;
    auto direct = DirectRedis::Connect("127.0.0.1", node->port());
    if (!direct.ok()) {
      last = direct.status();
      continue;
    }
    bool covered = false;
    auto masters = SlotMasters(**direct, &covered, slot);
    if (masters.ok()) return masters;
    last = masters.status();
  }
  return last;
}

absl::StatusOr<int> RedisClusterProcesses::MasterPortOfSlot(int slot) const {
  auto masters = MasterPorts(slot);
  if (!masters.ok()) return masters.status();
  if (masters->size() != 1) {
    return absl::NotFoundError(absl::StrCat("no master serves slot ", slot));
  }
  return masters->front();
}

absl::Status RedisClusterProcesses::WaitHealthy(absl::Duration timeout,
                                                bool with_replicas) const {
  const absl::Time deadline = absl::Now() + timeout;
  std::string why;
  while (absl::Now() < deadline) {
    why.clear();
    for (const auto& node : nodes_) {
      if (!node->running() || !why.empty()) continue;
      auto direct = DirectRedis::Connect("127.0.0.1", node->port());
      if (!direct.ok()) {
        why = std::string(direct.status().message());
        continue;
      }
      auto info = (*direct)->Command({"CLUSTER", "INFO"});
      if (!info.ok() ||
          !absl::StrContains(absl::string_view((*info)->str, (*info)->len),
                             "cluster_state:ok")) {
        why = absl::StrCat(node->address(), " is not cluster_state:ok");
        continue;
      }
      bool covered = false;
      auto masters = SlotMasters(**direct, &covered);
      if (!masters.ok() || !covered) {
        why = absl::StrCat(node->address(), " does not see every slot served");
        continue;
      }
      for (int port : *masters) {
        RedisProcess* master = NodeWithPort(port);
        if (master == nullptr || !master->running()) {
          why = absl::StrCat(node->address(), " still routes to dead master ",
                             port);
        }
      }
      if (with_replicas) {
        auto repl = (*direct)->Command({"INFO", "replication"});
        if (!repl.ok()) {
          why = "INFO replication failed";
          continue;
        }
        absl::string_view text((*repl)->str, (*repl)->len);
        if (absl::StrContains(text, "role:slave") &&
            !absl::StrContains(text, "master_link_status:up")) {
          why =
              absl::StrCat(node->address(), " has not synced with its master");
        }
      }
    }
    if (why.empty()) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the cluster did not become healthy within ",
                   absl::FormatDuration(timeout), ": ", why));
}

}  // namespace chunkd::index::testing
