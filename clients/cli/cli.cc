#include "clients/cli/cli.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "chunkd/v1/chunkd.pb.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"
#include "clients/cli/args.h"
#include "clients/cli/bench.h"
#include "clients/cli/chunk_file.h"
#include "clients/cli/chunk_options.h"
#include "clients/cli/common_flags.h"
#include "clients/cli/dedup_file.h"
#include "clients/cli/error_reason.h"
#include "clients/cli/input_file.h"
#include "clients/cli/json_output.h"
#include "clients/cli/local_chunk.h"
#include "clients/cli/progress.h"
#include "clients/cli/record_writer.h"
#include "clients/cli/remote.h"
#include "clients/cli/replay.h"
#include "clients/cli/index_command.h"
#include "clients/cli/size.h"
#include "fingerprint/sha256_mb.h"

#ifndef CHUNKD_VERSION
#define CHUNKD_VERSION "unknown"
#endif

namespace chunkd::cli {
namespace {

constexpr uint64_t kDefaultMessageSize = 1 << 20;
constexpr uint64_t kMaxMessageSize = 64 << 20;
// Most threads `chunk --local` cuts one file with.
constexpr uint64_t kMaxLocalThreads = 256;
constexpr size_t kMaxNamespaceLength = 128;

constexpr absl::string_view kMainUsage =
    R"(Usage: chunkctl COMMAND [options] [ARGS]

chunkctl is the command-line client of chunkd, the content-defined chunking
and deduplication service. It can also chunk locally, without a server.

Commands:
  chunk    cut a file into chunks and print one record per chunk
  dedup    deduplicate files against a namespace of the server's index
  info     describe a server: version, backends, limits, algorithms
  bench    measure local chunking throughput of every backend against the
           reference, checking that every chunk list equals the reference's
  size     estimate what an index of a given amount of unique data costs in
           memory, disk and Redis servers
  index migrate
           move a Redis index to the bucket layout of this version (from
           chunkd 0.3's, or to other bucket_bits)

Run 'chunkctl COMMAND --help' for the options of a command.
'chunkctl --version' prints the version.

Flags are spelled with dashes (--tls-ca); the underscore spelling of earlier
releases (--tls_ca) is the same flag. chunkctl, chunkd-client and chunkd-go
take the same flags and print the same output (docs/cli.md).

Exit status:
  0    success
  1    a failure while running: an input that cannot be read, output that
       cannot be written, an error from the server other than
       INVALID_ARGUMENT, printed as CODE_NAME: message (e.g. UNAVAILABLE: no
       server answers; RESOURCE_EXHAUSTED: the server is at its
       --max_streams; DEADLINE_EXCEEDED: --timeout passed), a stream that
       ended OK but whose summary does not count every byte sent
       (DATA_LOSS), or a response that breaks the protocol
  2    a usage error or a bad parameter: an unknown command or flag, a bad
       value, parameters out of range, a flag the algorithm does not take;
       found before any call, or answered by the server (INVALID_ARGUMENT:
       the server refused the request)
  130  interrupted (SIGINT)
  141  standard output closed early (e.g. | head): chunkctl stops at once
       and prints nothing more, as a process killed by SIGPIPE
)";

constexpr absl::string_view kChunkUsage =
    R"(Usage: chunkctl chunk [--server ADDR | --local] [options] FILE|-

Cuts FILE (stdin for "-") into chunks and prints one line per chunk:
  text  offset,length,fingerprint_hex   (offset,length with --fingerprint none)
  json  {"offset":N,"length":N,"fingerprint":"hex"}
For the same input and options, --local and --server print identical output.

Where to chunk:
  --server ADDR        stream FILE to the chunkd server at ADDR (the default,
                       see Connection below)
  --local              run the chunking library in this process instead
)";

constexpr absl::string_view kConnectionUsage = R"(Connection (not with --local):
  --server ADDR        the chunkd server: host:port, or a gRPC target such as
                       dns:///chunkd-headless.ns.svc:50051 (default:
                       $CHUNKD_SERVER, else 127.0.0.1:50051). Calls are
                       balanced round_robin over every address it resolves
                       to; GetServerInfo is retried on UNAVAILABLE
  --tls                use TLS, verifying the server against the system's
                       roots (or $GRPC_DEFAULT_SSL_ROOTS_FILE_PATH)
  --tls-ca FILE        PEM certificates of the CA that signed the server's
                       certificate (implies --tls)
  --tls-cert FILE      client certificate (PEM) for mutual TLS; with
  --tls-key FILE       its private key (implies --tls)
  --tls-server-name NAME
                       the name to verify in the server's certificate
                       instead of ADDR's host (implies --tls)
  --token TOKEN        bearer token sent with every call (default:
                       $CHUNKD_TOKEN); prefer --token-file, since command
                       lines are visible to other users
  --token-file FILE    read the token from the first line of FILE
  --timeout SECONDS    deadline of each call, e.g. 30 or 0.5; 0 (default):
                       none
Every flag may also be spelled with underscores (--tls_ca, --message_size),
as in earlier releases.
)";

constexpr absl::string_view kProgressUsage =
    R"(  --progress WHEN      auto (default: a progress line with bytes, rate and
                       ETA on stderr while a file streams, when stderr is a
                       terminal), always or never
)";

constexpr absl::string_view kChunkRetriesUsage =
    R"(Replays (not with --local):
  --retries N          when the stream fails with UNAVAILABLE, ABORTED,
                       RESOURCE_EXHAUSTED, INTERNAL, CANCELLED or (with
                       --timeout) DEADLINE_EXCEEDED, send FILE again from its
                       start, up to N more times, after a backoff of 0.25 s
                       doubling to 4 s (default 0; at most 100), printing
                       only the chunks past those already printed. A replay
                       that cuts FILE otherwise (it changed) fails with
                       DATA_LOSS. A regular file only (not "-" or another
                       pipe); each replay is announced on stderr
)";

constexpr absl::string_view kChunkOutputUsage = R"(Output and transfer:
  --format FMT         text (default; the csv lines above; csv is another
                       name of it) or json
  --json               the same as --format json
  --message-size N     bytes per data message to the server (with --local:
                       per read), 1..67108864 (default 1048576)
)";

constexpr absl::string_view kLocalUsage =
    R"(With --local only (the output never depends on them):
  --backend NAME       stage-1 kernel: scalar, avx2 or avx512 (default:
                       $CHUNKD_BACKEND when set, else per algorithm the
                       fastest on this CPU, calibrated at the first chunk)
  --threads N          threads that cut the file, 1..256 (default 1)
sha256 with --local hashes several chunks at once where the CPU has the SHA
extensions; $CHUNKD_SHA256=openssl forces OpenSSL one chunk at a time
(also: shani, shani-x1 .. shani-x4).
)";

constexpr absl::string_view kDedupUsage =
    R"(Usage: chunkctl dedup --namespace NS [options] FILE|-...

Deduplicates each FILE (stdin for "-") in turn against the namespace NS of
the server's fingerprint index, one Dedup stream per file, and prints per file
  FILE bytes=N unique_bytes=M chunks=C unique_chunks=U ratio=R.RR
where ratio is the running deduplication ratio: bytes / unique bytes of all
files so far ("inf" while no byte is unique). A last line gives the totals.
A line where RapidCDC hints were tried ends with
  hints_tried=T hints_accepted=A hints_rejected=R hint_skipped_bytes=S
With --json, one object per line instead, every key always present:
  {"file":"FILE","bytes":N,"unique_bytes":M,"chunks":C,"unique_chunks":U,
   "ratio":R,"hints_tried":T,"hints_accepted":A,"hints_rejected":R,
   "hint_skipped_bytes":S}
and last {"total":true,...}; ratio is rounded to 6 decimals, null while no
byte is unique.

  --namespace NS       the tenant's index: 1..128 characters of [A-Za-z0-9._-]
  --retries N          when a file's stream fails with UNAVAILABLE, ABORTED,
                       RESOURCE_EXHAUSTED, INTERNAL, CANCELLED or (with
                       --timeout) DEADLINE_EXCEEDED, send the file again from
                       its start, up to N more times, after a backoff of
                       0.25 s doubling to 4 s (default 0; at most 100). Every
                       stream of a file then carries the same random
                       stream_id, so a replay counts no reference twice: the
                       counts equal a single run's. Regular files only (not
                       "-" or another pipe); each replay is announced on
                       stderr
  --message-size N     bytes per data message, 1..67108864 (default 1048576)
  --hints NAME         RapidCDC: after a duplicate chunk, how a size that
                       followed it before is accepted instead of cutting
                       (fastcdc only; see docs/design.md): ff_rwt_fpt (the
                       server's default for fastcdc; the same chunks as off),
                       ff_rwt, ff_mt, ff (faster, chunks may differ) or off
)";

constexpr absl::string_view kDedupOutputUsage = R"(Output:
  --format FMT         text (default; csv is another name of it) or json
  --json               the same as --format json
)";

constexpr absl::string_view kDedupChunkNote =
    "\nDedup needs a fingerprint: --fingerprint none is not accepted.\n";

constexpr absl::string_view kInfoUsage = R"(Usage: chunkctl info [options]

Prints the server's version, chunking and index backends, limits, and the
parameter ranges and defaults of every algorithm: readable text, or with
--json one object (the shape of docs/cli.md).

  --format FMT         text (default; csv is another name of it) or json
  --json               the same as --format json
)";

constexpr absl::string_view kBenchUsage =
    R"(Usage: chunkctl bench [options]

Measures the chunking library in this process, as `make bench` does: for
each algorithm, the scalar reference (ReferenceChunks) and then every backend
on every thread count, over the same generated data. Prints one row per
measurement as it finishes: GB/s (10^9 input bytes per second, the fastest of
the runs), the ratio to the reference on one thread, the fraction of the
memory-read ceiling (summing the data's 64-bit words on as many threads), the
chunk count, and whether the chunks equal the reference's. Any difference
fails the command (exit status 1).

Parameters are those of the project's speed targets: fastcdc min 4 KiB, avg
16 KiB, max 64 KiB, level 2; crc32 2/16/64 KiB; seqcdc the seqcdc-16k
preset; fixed 16 KiB; and the defaults of the algorithms that match upstream
Go modules: repmaxcdc min 256 KiB, horizon 2 MiB; rabin 512 KiB/1 MiB/8 MiB
with restic's test polynomial; buzhash 16/64/256 KiB.

  --algorithm A        fastcdc, crc32, seqcdc, fixed, repmaxcdc, rabin,
                       buzhash, a comma-separated list of them, or all
                       (default)
  --preset NAME        fastcdc-reapi, seqcdc-8k or seqcdc-16k: time that
                       preset's algorithm alone, with the preset's parameters
                       instead of the ones above
  --backend B          scalar, avx2, avx512, auto, a comma-separated list, or
                       all (default: every backend this CPU supports, then
                       auto; a backend named here must be supported). auto
                       is the engine's default ($CHUNKD_BACKEND when set,
                       else per algorithm and thread count the fastest on
                       this CPU, calibrated at its first use); its row names
                       the kernel and its ratio to the fastest other row on
                       as many threads
  --threads N,...      thread counts of the fast paths, each 1..256 (default:
                       1 and the number of cores)
  --strategy S         auto (default), two-stage, sequential or reference
  --dataset D          random (default: seeded random bytes) or versioned (a
                       base file and 7 edited versions, concatenated)
  --size BYTES         bytes of data, 1..4294967296 (default 67108864)
  --input FILE         time FILE's bytes instead (read into memory, at most
                       4294967296; not with --dataset or --size)
  --seconds S          how long to repeat each measurement, e.g. 0.5; at
                       least one run (default 1)
)";

constexpr absl::string_view kSizeUsage =
    R"(Usage: chunkctl size --data SIZE [options]

Estimates what the index of SIZE of unique data costs, without a server: the
number of entries (SIZE / the average chunk, rounded up; duplicate data adds
no entries) and, for each index, the bytes an entry takes as measured by the
benchmarks at 1M and 10M entries and what that comes to: memory for the
memory index and Redis, disk for RocksDB; for Redis the servers or Cluster
masters needed, counting 75 % of a server's RAM for data (the rest is left
for fragmentation, replication buffers and the fork that persists it), and
the ?bucket_bits= of the redis URL that keeps a namespace of every entry at
64 entries a bucket or fewer on average. docs/operations.md ("Capacity")
explains the figures.

A SIZE is a number (decimals allowed) and a unit: B, KB, MB, GB, TB, PB
(powers of 1000) or KiB, MiB, GiB, TiB, PiB (powers of 1024), e.g. 500TB,
1.5PB, 64KiB; a bare number is bytes.

  --data SIZE          unique data to index (required)
  --avg SIZE           average chunk size (default 16KiB, fastcdc's)
  --index NAME         memory, rocksdb, redis, redis-cluster or all (default)
  --hints              every entry carries next-size hints and their runs
                       (RapidCDC: what a Dedup with hints records)
  --redis-master-memory SIZE
                       RAM of one Redis server or Cluster master (default
                       64GiB)
  --format FMT         text (default; csv is another name of it) or json
  --json               the same as --format json
)";

// Where a command prints, and how it reports errors (docs/cli.md, "Exit
// status"): one line on stderr, "chunkctl: message".
class Io {
 public:
  Io(std::FILE* out, std::FILE* err, absl::string_view command)
      : out_(out), err_(err), command_(command) {}

  int Usage(absl::string_view text) const {
    std::fputs(std::string(text).c_str(), out_);
    return kExitOk;
  }
  // A bad command line: the message and where to find help.
  int UsageError(absl::string_view message) const {
    absl::FPrintF(err_, "chunkctl: %s (see chunkctl %s--help)\n", message,
                  command_.empty() ? "" : absl::StrCat(command_, " "));
    return kExitUsage;
  }
  // A command line that could not be taken: a usage error, or a file it
  // names (--token-file, --tls-ca, ...) that cannot be read (exit 1).
  int Refused(const absl::Status& status) const {
    return status.code() == absl::StatusCode::kInvalidArgument
               ? UsageError(status.message())
               : Failure(status);
  }
  // Anything that went wrong while running: exit status 1, except the
  // server's INVALID_ARGUMENT (a bad parameter: 2) and a closed standard
  // output (141, silently).
  int Failure(const absl::Status& status) const {
    if (IsBrokenPipe(status)) return kExitBrokenPipe;
    absl::FPrintF(err_, "chunkctl: %s%s\n", status.message(),
                  ReasonSuffix(status));
    return status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage
                                                                : kExitFailure;
  }
  // Writes `text` to standard output and flushes it.
  int Print(absl::string_view text) const {
    if (std::fwrite(text.data(), 1, text.size(), out_) != text.size() ||
        std::fflush(out_) != 0) {
      return Failure(WriteError(errno));
    }
    return kExitOk;
  }

 private:
  std::FILE* const out_;
  std::FILE* const err_;
  const std::string command_;
};

std::vector<FlagSpec> WithChunkFlags(std::vector<FlagSpec> specs) {
  for (FlagSpec& spec : ChunkFlagSpecs()) specs.push_back(std::move(spec));
  return specs;
}

absl::StatusOr<size_t> MessageSize(const ParsedArgs& args) {
  std::optional<std::string> text = args.Get("message-size");
  if (!text.has_value()) return kDefaultMessageSize;
  absl::StatusOr<uint64_t> size =
      ParseUint("message-size", *text, kMaxMessageSize);
  if (!size.ok()) return size.status();
  if (*size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--message-size: expected an integer in 1..",
                     kMaxMessageSize, ", got \"", *text, "\""));
  }
  return static_cast<size_t>(*size);
}

absl::Status CheckNamespace(absl::string_view ns) {
  const bool valid_chars = std::all_of(ns.begin(), ns.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
  });
  if (ns.empty() || ns.size() > kMaxNamespaceLength || !valid_chars) {
    return absl::InvalidArgumentError(
        absl::StrCat("--namespace: expected 1..", kMaxNamespaceLength,
                     " characters of [A-Za-z0-9._-], got \"", ns, "\""));
  }
  return absl::OkStatus();
}

std::unique_ptr<chunkd::v1::ChunkService::Stub> Connect(
    const ConnectOptions& options) {
  return chunkd::v1::ChunkService::NewStub(MakeChannel(options));
}

// The progress display of one input, drawn on `tty` (nullptr: none).
std::unique_ptr<Progress> ProgressFor(std::FILE* tty, InputFile* input) {
  auto progress = std::make_unique<Progress>(
      tty, input->name() == "-" ? std::string("stdin") : input->name(),
      input->size());
  input->set_progress(progress.get());
  return progress;
}

// The options every command with a server shares, read from its flags.
struct CommonOptions {
  ConnectOptions connect;
  std::chrono::nanoseconds timeout{0};
  OutputFormat format = OutputFormat::kText;
  ProgressMode progress = ProgressMode::kAuto;
};

// Reads CommonOptions from `args`; INVALID_ARGUMENT names the flag.
absl::StatusOr<CommonOptions> CommonOptionsFromArgs(const ParsedArgs& args) {
  CommonOptions options;
  absl::StatusOr<OutputFormat> format = OutputFormatFromArgs(args);
  if (!format.ok()) return format.status();
  options.format = *format;
  absl::StatusOr<ProgressMode> progress = ProgressModeFromArgs(args);
  if (!progress.ok()) return progress.status();
  options.progress = *progress;
  absl::StatusOr<std::chrono::nanoseconds> timeout = TimeoutFromArgs(args);
  if (!timeout.ok()) return timeout.status();
  options.timeout = *timeout;
  absl::StatusOr<ConnectOptions> connect = ConnectOptionsFromArgs(args);
  if (!connect.ok()) return connect.status();
  options.connect = *std::move(connect);
  return options;
}

// RunChunk's flags and its one FILE.
absl::StatusOr<ParsedArgs> ParseChunkArgs(absl::Span<const std::string> words) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(
      words, WithOutputFlags(WithConnectionFlags(
                 WithChunkFlags({{"local", false},
                                 {"message-size"},
                                 {"backend"},
                                 {"threads"},
                                 {"retries"},
                                 {"help", false}}))));
  if (!args.ok()) return args.status();
  if (args->positional().size() != 1) {
    return absl::InvalidArgumentError(args->positional().empty()
                                          ? "missing FILE (\"-\" for stdin)"
                                          : "give exactly one FILE");
  }
  return args;
}

// The flags that apply to only one of --server and --local.
absl::Status CheckChunkTarget(const ParsedArgs& args) {
  const bool local = args.Has("local");
  if (!local && (args.Has("backend") || args.Has("threads"))) {
    return absl::InvalidArgumentError(
        "--backend and --threads apply to --local; the server has its own");
  }
  for (const char* flag : {"server", "tls", "tls-ca", "tls-cert", "tls-key",
                           "tls-server-name", "token", "token-file", "timeout",
                           "retries"}) {
    if (local && args.Has(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " applies to a server, not to --local"));
    }
  }
  return absl::OkStatus();
}

// --backend, else CHUNKD_BACKEND's, else nullptr (automatic); with --local,
// $CHUNKD_SHA256 is checked too (reported here, not at the first chunk).
absl::StatusOr<const chunking::kernels::Kernel*> ChunkKernel(
    const ParsedArgs& args) {
  absl::StatusOr<const chunking::kernels::Kernel*> kernel;
  if (std::optional<std::string> name = args.Get("backend")) {
    kernel = chunking::kernels::FindKernel(*name);
    if (!kernel.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--backend: ", kernel.status().message()));
    }
  } else {
    // CHUNKD_BACKEND's, else nullptr: the engine's automatic choice.
    kernel = chunking::kernels::ForcedKernel();
    if (!kernel.ok()) return kernel.status();
  }
  if (args.Has("local")) {
    absl::StatusOr<const fingerprint::Sha256Backend*> sha256 =
        fingerprint::DefaultSha256Backend();
    if (!sha256.ok()) return sha256.status();
  }
  return kernel;
}

// --threads, 1 when not given.
absl::StatusOr<size_t> LocalThreads(const ParsedArgs& args) {
  std::optional<std::string> text = args.Get("threads");
  if (!text.has_value()) return 1;
  absl::StatusOr<uint64_t> n = ParseUint("threads", *text, kMaxLocalThreads);
  if (!n.ok() || *n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads: expected an integer in 1..", kMaxLocalThreads,
                     ", got \"", *text, "\""));
  }
  return static_cast<size_t>(*n);
}

// Everything `chunkctl chunk` needs, from its command line.
struct ChunkCommand {
  ChunkFlags flags;
  CommonOptions common;
  size_t message_size = kDefaultMessageSize;
  bool local = false;
  chunking::EngineOptions engine;
  size_t threads = 1;
  int retries = 0;
};

// --retries, 0 when not given; with replays, `files` must be regular files
// (CheckReplayable()).
absl::StatusOr<int> Retries(const ParsedArgs& args,
                            const std::vector<std::string>& files) {
  std::optional<std::string> text = args.Get("retries");
  if (!text.has_value()) return 0;
  absl::StatusOr<uint64_t> n = ParseUint("retries", *text, kMaxRetries);
  if (!n.ok()) return n.status();
  if (*n > 0) {
    if (absl::Status s = CheckReplayable(files); !s.ok()) return s;
  }
  return static_cast<int>(*n);
}

// Reads and checks `chunk`'s command line; any error is a usage error.
absl::StatusOr<ChunkCommand> ParseChunkCommand(const ParsedArgs& args) {
  ChunkCommand c;
  absl::StatusOr<ChunkFlags> flags = ChunkFlagsFromArgs(args);
  if (!flags.ok()) return flags.status();
  c.flags = *std::move(flags);
  absl::StatusOr<size_t> message_size = MessageSize(args);
  if (!message_size.ok()) return message_size.status();
  c.message_size = *message_size;
  if (absl::Status s = Validate(c.flags); !s.ok()) return s;
  if (absl::Status s = CheckChunkTarget(args); !s.ok()) return s;
  absl::StatusOr<CommonOptions> common = CommonOptionsFromArgs(args);
  if (!common.ok()) return common.status();
  c.common = *std::move(common);
  c.local = args.Has("local");
  absl::StatusOr<const chunking::kernels::Kernel*> kernel = ChunkKernel(args);
  if (!kernel.ok()) return kernel.status();
  c.engine.kernel = *kernel;
  absl::StatusOr<size_t> threads = LocalThreads(args);
  if (!threads.ok()) return threads.status();
  c.threads = *threads;
  absl::StatusOr<int> retries = Retries(args, args.positional());
  if (!retries.ok()) return retries.status();
  c.retries = *retries;
  return c;
}

// Chunks the file `name` into `writer`, here (--local) or on the server.
absl::Status ChunkInput(const ChunkCommand& c, const std::string& name,
                        fingerprint::Kind kind, RecordWriter* writer,
                        std::FILE* err) {
  std::FILE* const tty = ProgressTarget(c.common.progress, err);
  auto progress_for = [tty](InputFile* input) {
    return ProgressFor(tty, input);
  };
  if (c.local) {
    absl::StatusOr<std::unique_ptr<InputFile>> input = InputFile::Open(name);
    if (!input.ok()) return input.status();
    const std::unique_ptr<Progress> progress = progress_for(input->get());
    absl::Status status = ChunkLocally(ToChunkerOptions(c.flags), kind,
                                       c.message_size, input->get(), writer,
                                       c.engine);
    progress->Finish();
    return status;
  }
  ChunkFileOptions options;
  ToProto(c.flags, options.params.mutable_chunking());
  options.params.set_fingerprint(ToProtoFingerprint(c.flags));
  options.kind = kind;
  options.message_size = c.message_size;
  options.timeout = c.common.timeout;
  options.replay.retries = c.retries;
  options.replay.timeout_set = c.common.timeout > std::chrono::nanoseconds(0);
  return ChunkFile(Connect(c.common.connect).get(), options, name, writer,
                   progress_for, err);
}

int RunChunk(absl::Span<const std::string> words, std::FILE* out,
             std::FILE* err) {
  const Io io(out, err, "chunk");
  if (WantsHelp(words)) {
    return io.Usage(absl::StrCat(kChunkUsage, "\n", ChunkFlagsHelp(), "\n",
                                 kChunkOutputUsage, kProgressUsage, "\n",
                                 kChunkRetriesUsage, "\n", kLocalUsage, "\n",
                                 kConnectionUsage));
  }
  absl::StatusOr<ParsedArgs> args = ParseChunkArgs(words);
  if (!args.ok()) return io.UsageError(args.status().message());
  absl::StatusOr<ChunkCommand> command = ParseChunkCommand(*args);
  if (!command.ok()) return io.Refused(command.status());
  std::optional<chunking::ThreadPoolExecutor> pool;
  if (command->threads > 1) {
    command->engine.executor = &pool.emplace(command->threads);
  }

  const fingerprint::Kind kind = EffectiveFingerprint(command->flags);
  RecordWriter writer(out, command->common.format,
                      kind != fingerprint::Kind::kNone);
  const absl::Status status =
      ChunkInput(*command, args->positional()[0], kind, &writer, err);
  if (!status.ok()) return io.Failure(status);
  return kExitOk;
}

std::string Ratio(uint64_t bytes, uint64_t unique_bytes) {
  if (unique_bytes == 0) return "inf";
  return absl::StrFormat(
      "%.2f", static_cast<double>(bytes) / static_cast<double>(unique_bytes));
}

// One line of `dedup`'s output, with its newline: a file's (`name`), or the
// total line (nullopt).
std::string DedupLine(OutputFormat format,
                      const std::optional<std::string>& name,
                      const DedupTotals& file, const DedupTotals& running) {
  if (format == OutputFormat::kJson) {
    return DedupJsonLine(name, file, running) + "\n";
  }
  std::string line = absl::StrFormat(
      "%s bytes=%d unique_bytes=%d chunks=%d unique_chunks=%d ratio=%s",
      name.value_or("total"), file.bytes, file.unique_bytes, file.chunks,
      file.unique_chunks, Ratio(running.bytes, running.unique_bytes));
  if (file.hints_tried > 0) {
    absl::StrAppendFormat(
        &line,
        " hints_tried=%d hints_accepted=%d hints_rejected=%d "
        "hint_skipped_bytes=%d",
        file.hints_tried, file.hints_accepted, file.hints_rejected,
        file.hint_skipped_bytes);
  }
  return line + "\n";
}

void AddTotals(const DedupTotals& file, DedupTotals* total) {
  total->bytes += file.bytes;
  total->unique_bytes += file.unique_bytes;
  total->chunks += file.chunks;
  total->unique_chunks += file.unique_chunks;
  total->hints_tried += file.hints_tried;
  total->hints_accepted += file.hints_accepted;
  total->hints_rejected += file.hints_rejected;
  total->hint_skipped_bytes += file.hint_skipped_bytes;
}

// Everything `chunkctl dedup` needs, from its command line.
struct DedupCommand {
  DedupFileOptions file;
  CommonOptions common;
  std::vector<std::string> files;
};

// --hints, checked against the algorithm; nullopt when not given.
absl::StatusOr<std::optional<chunkd::v1::HintTest>> DedupHints(
    const ParsedArgs& args, const ChunkFlags& flags) {
  std::optional<std::string> name = args.Get("hints");
  if (!name.has_value()) return std::nullopt;
  absl::StatusOr<chunkd::v1::HintTest> test = ParseHints(*name);
  if (!test.ok()) return test.status();
  if (*test != chunkd::v1::HINT_TEST_OFF &&
      EffectiveAlgorithm(flags) != chunking::Algorithm::kFastCdc) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--hints ", HintsName(*test), " needs --algorithm fastcdc, not ",
        chunking::AlgorithmName(EffectiveAlgorithm(flags)),
        " (hints apply to FastCDC only); use --hints off or leave it out"));
  }
  return std::optional<chunkd::v1::HintTest>(*test);
}

// --namespace, FILE... and --retries: the files and how to send them.
absl::Status DedupTargets(const ParsedArgs& args, DedupCommand* c) {
  if (!args.Has("namespace")) return absl::InvalidArgumentError(
      "missing --namespace NS");
  const std::string ns = *args.Get("namespace");
  if (absl::Status s = CheckNamespace(ns); !s.ok()) return s;
  c->file.params.set_namespace_(ns);
  c->files = args.positional();
  if (c->files.empty()) {
    return absl::InvalidArgumentError("missing FILE (\"-\" for stdin)");
  }
  if (std::count(c->files.begin(), c->files.end(), "-") > 1) {
    return absl::InvalidArgumentError("stdin (\"-\") can be read only once");
  }
  absl::StatusOr<int> retries = Retries(args, c->files);
  if (!retries.ok()) return retries.status();
  c->file.replay.retries = *retries;
  return absl::OkStatus();
}

// Reads and checks `dedup`'s command line: a usage error, or NOT_FOUND /
// FAILED_PRECONDITION for a file it names that cannot be read.
absl::StatusOr<DedupCommand> ParseDedupCommand(const ParsedArgs& args) {
  DedupCommand c;
  if (absl::Status s = DedupTargets(args, &c); !s.ok()) return s;
  absl::StatusOr<ChunkFlags> flags = ChunkFlagsFromArgs(args);
  if (!flags.ok()) return flags.status();
  c.file.kind = EffectiveFingerprint(*flags);
  if (c.file.kind == fingerprint::Kind::kNone) {
    return absl::InvalidArgumentError(
        "--fingerprint none: dedup needs a fingerprint (sha256 or xxh128)");
  }
  absl::StatusOr<std::optional<chunkd::v1::HintTest>> hints =
      DedupHints(args, *flags);
  if (!hints.ok()) return hints.status();
  if (hints->has_value()) c.file.params.set_hints(**hints);
  absl::StatusOr<size_t> message_size = MessageSize(args);
  if (!message_size.ok()) return message_size.status();
  c.file.message_size = *message_size;
  if (absl::Status s = Validate(*flags); !s.ok()) return s;
  absl::StatusOr<CommonOptions> common = CommonOptionsFromArgs(args);
  if (!common.ok()) return common.status();
  c.common = *std::move(common);
  c.file.timeout = c.common.timeout;
  c.file.replay.timeout_set = c.common.timeout > std::chrono::nanoseconds(0);
  ToProto(*flags, c.file.params.mutable_chunking());
  c.file.params.set_fingerprint(ToProtoFingerprint(*flags));
  return c;
}

int RunDedup(absl::Span<const std::string> words, std::FILE* out,
             std::FILE* err) {
  const Io io(out, err, "dedup");
  if (WantsHelp(words)) {
    return io.Usage(absl::StrCat(kDedupUsage, "\n", ChunkFlagsHelp(),
                                 kDedupChunkNote, "\n", kDedupOutputUsage,
                                 kProgressUsage, "\n", kConnectionUsage));
  }
  absl::StatusOr<ParsedArgs> args = ParseArgs(
      words, WithOutputFlags(WithConnectionFlags(WithChunkFlags(
                 {{"namespace"},
                  {"message-size"},
                  {"hints"},
                  {"retries"},
                  {"help", false}}))));
  if (!args.ok()) return io.UsageError(args.status().message());
  absl::StatusOr<DedupCommand> command = ParseDedupCommand(*args);
  if (!command.ok()) return io.Refused(command.status());

  std::unique_ptr<chunkd::v1::ChunkService::Stub> stub =
      Connect(command->common.connect);
  std::FILE* const tty = ProgressTarget(command->common.progress, err);
  DedupTotals total;
  for (const std::string& name : command->files) {
    absl::StatusOr<DedupTotals> file = DedupFile(
        stub.get(), command->file, name,
        [tty](InputFile* input) { return ProgressFor(tty, input); }, err);
    if (!file.ok()) return io.Failure(file.status());
    AddTotals(*file, &total);
    if (int status =
            io.Print(DedupLine(command->common.format, name, *file, total));
        status != kExitOk) {
      return status;
    }
  }
  return io.Print(
      DedupLine(command->common.format, std::nullopt, total, total));
}

int RunInfo(absl::Span<const std::string> words, std::FILE* out,
            std::FILE* err) {
  const Io io(out, err, "info");
  if (WantsHelp(words)) {
    return io.Usage(absl::StrCat(kInfoUsage, "\n", kConnectionUsage));
  }
  absl::StatusOr<ParsedArgs> args = ParseArgs(
      words, WithOutputFlags(WithConnectionFlags({{"help", false}})));
  if (!args.ok()) return io.UsageError(args.status().message());
  if (!args->positional().empty()) {
    return io.UsageError(
        absl::StrCat("unexpected argument \"", args->positional()[0], "\""));
  }
  absl::StatusOr<CommonOptions> common = CommonOptionsFromArgs(*args);
  if (!common.ok()) return io.Refused(common.status());
  absl::StatusOr<chunkd::v1::GetServerInfoResponse> info =
      GetServerInfo(Connect(common->connect).get(), common->timeout);
  if (!info.ok()) return io.Failure(info.status());
  return io.Print(common->format == OutputFormat::kJson
                      ? ServerInfoJson(*info)
                      : FormatServerInfo(*info));
}

int RunBenchCommand(absl::Span<const std::string> words, std::FILE* out,
                    std::FILE* err) {
  const Io io(out, err, "bench");
  if (WantsHelp(words)) return io.Usage(kBenchUsage);
  absl::StatusOr<ParsedArgs> args = ParseArgs(words, BenchFlagSpecs());
  if (!args.ok()) return io.UsageError(args.status().message());
  if (!args->positional().empty()) {
    return io.UsageError(
        absl::StrCat("unexpected argument \"", args->positional()[0], "\""));
  }
  absl::StatusOr<BenchConfig> config = BenchConfigFromArgs(*args);
  if (!config.ok()) return io.UsageError(config.status().message());
  if (absl::Status s = RunBench(*config, out); !s.ok()) return io.Failure(s);
  return kExitOk;
}

int RunIndexCommand(absl::Span<const std::string> words, std::FILE* out,
                    std::FILE* err) {
  const Io io(out, err, "index");
  if (words.empty() || words[0] != "migrate") {
    if (WantsHelp(words)) return io.Usage(kIndexUsage);
    return io.UsageError(words.empty()
                             ? "a subcommand is required: migrate"
                             : absl::StrCat("unknown subcommand \"", words[0],
                                            "\"; known: migrate"));
  }
  const absl::Span<const std::string> rest = words.subspan(1);
  if (WantsHelp(rest)) return io.Usage(kIndexUsage);
  absl::StatusOr<ParsedArgs> args = ParseArgs(rest, MigrateFlagSpecs());
  if (!args.ok()) return io.UsageError(args.status().message());
  absl::StatusOr<MigrateConfig> config = MigrateConfigFromArgs(*args);
  if (!config.ok()) return io.UsageError(config.status().message());
  if (absl::Status s = RunMigrate(*config, out, err); !s.ok()) {
    return io.Failure(s);
  }
  return kExitOk;
}

int RunSizeCommand(absl::Span<const std::string> words, std::FILE* out,
                   std::FILE* err) {
  const Io io(out, err, "size");
  if (WantsHelp(words)) return io.Usage(kSizeUsage);
  absl::StatusOr<ParsedArgs> args = ParseArgs(words, SizeFlagSpecs());
  if (!args.ok()) return io.UsageError(args.status().message());
  absl::StatusOr<SizeConfig> config = SizeConfigFromArgs(*args);
  if (!config.ok()) return io.UsageError(config.status().message());
  return io.Print(FormatSizeEstimate(*config));
}

}  // namespace

int RunCli(const std::vector<std::string>& args, std::FILE* out,
           std::FILE* err) {
  const Io io(out, err, "");
  if (args.empty()) {
    std::fputs(std::string(kMainUsage).c_str(), err);
    return kExitUsage;
  }
  const std::string& command = args[0];
  const absl::Span<const std::string> rest =
      absl::MakeConstSpan(args).subspan(1);
  if (command == "--help" || command == "-h" || command == "help") {
    if (command == "help" && !rest.empty()) {
      // "chunkctl help chunk" is "chunkctl chunk --help".
      return RunCli({rest[0], "--help"}, out, err);
    }
    return io.Usage(kMainUsage);
  }
  if (command == "--version") {
    return io.Print(absl::StrCat("chunkctl ", CHUNKD_VERSION, "\n"));
  }
  if (command == "chunk") return RunChunk(rest, out, err);
  if (command == "dedup") return RunDedup(rest, out, err);
  if (command == "info") return RunInfo(rest, out, err);
  if (command == "bench") return RunBenchCommand(rest, out, err);
  if (command == "size") return RunSizeCommand(rest, out, err);
  if (command == "index") return RunIndexCommand(rest, out, err);
  return io.UsageError(absl::StrCat("unknown command \"", command, "\""));
}

}  // namespace chunkd::cli
