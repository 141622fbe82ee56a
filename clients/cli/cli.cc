#include "clients/cli/cli.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>

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
#include "clients/cli/chunk_options.h"
#include "clients/cli/input_file.h"
#include "clients/cli/local_chunk.h"
#include "clients/cli/progress.h"
#include "clients/cli/record_writer.h"
#include "clients/cli/remote.h"
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

Run 'chunkctl COMMAND --help' for the options of a command.
'chunkctl --version' prints the version.

Exit status:
  0  success
  1  a failure while running: an input that cannot be read, output that
     cannot be written, an error from the server, printed as CODE_NAME:
     message (e.g. UNAVAILABLE: no server answers; RESOURCE_EXHAUSTED: the
     server is at its --max_streams; INVALID_ARGUMENT: the server refused
     the request), a stream that ended OK but whose summary does not count
     every byte sent (DATA_LOSS), or a response that breaks the protocol
  2  a usage error, found before contacting any server: an unknown command
     or flag, a bad value, parameters out of range, a flag the algorithm
     does not take
)";

constexpr absl::string_view kChunkUsage =
    R"(Usage: chunkctl chunk (--server ADDR | --local) [options] FILE|-

Cuts FILE (stdin for "-") into chunks and prints one line per chunk:
  csv   offset,length,fingerprint_hex   (offset,length with --fingerprint none)
  json  {"offset":N,"length":N,"fingerprint":"hex"}
For the same input and options, --local and --server print identical output.

Where to chunk (exactly one):
  --server ADDR        stream FILE to the chunkd server at ADDR (host:port)
  --local              run the chunking library in this process
)";

constexpr absl::string_view kConnectionUsage = R"(Connection (with --server):
  --tls                use TLS, verifying the server against the system's
                       roots (or $GRPC_DEFAULT_SSL_ROOTS_FILE_PATH)
  --tls_ca FILE        PEM certificates of the CA that signed the server's
                       certificate (implies --tls)
  --tls_cert FILE      client certificate (PEM) for mutual TLS; with
  --tls_key FILE       its private key (implies --tls)
  --token TOKEN        bearer token sent with every call (default:
                       $CHUNKD_TOKEN); prefer --token_file, since command
                       lines are visible to other users
  --token_file FILE    read the token from the first line of FILE
)";

constexpr absl::string_view kProgressNote =
    "\nWhile a file streams, a progress line (bytes, rate, ETA) is drawn on "
    "stderr\nwhen stderr is a terminal; nothing is drawn when it is not.\n";

constexpr absl::string_view kChunkOutputUsage = R"(Output and transfer:
  --format FMT         csv (default) or json
  --message-size N     bytes per data message to the server (with --local:
                       per read), 1..67108864 (default 1048576)

With --local only (the output never depends on them):
  --backend NAME       stage-1 kernel: scalar, avx2 or avx512 (default:
                       $CHUNKD_BACKEND when set, else per algorithm the
                       fastest on this CPU, calibrated at the first chunk)
  --threads N          threads that cut the file, 1..256 (default 1)
sha256 with --local hashes several chunks at once where the CPU has the SHA
extensions; $CHUNKD_SHA256=openssl forces OpenSSL one chunk at a time
(also: shani, shani-x1 .. shani-x4).
)";

constexpr absl::string_view kDedupUsage =
    R"(Usage: chunkctl dedup --server ADDR --namespace NS [options] FILE...

Deduplicates each FILE (stdin for "-") in turn against the namespace NS of
the server's fingerprint index, one Dedup stream per file, and prints per file
  FILE bytes=N unique_bytes=M chunks=C unique_chunks=U ratio=R.RR
where ratio is the running deduplication ratio: bytes / unique bytes of all
files so far ("inf" while no byte is unique). A last line gives the totals.
A line where RapidCDC hints were tried ends with
  hints_tried=T hints_accepted=A hints_rejected=R hint_skipped_bytes=S

  --server ADDR        the chunkd server (host:port)
  --namespace NS       the tenant's index: 1..128 characters of [A-Za-z0-9._-]
  --message-size N     bytes per data message, 1..67108864 (default 1048576)
  --hints NAME         RapidCDC: after a duplicate chunk, how a size that
                       followed it before is accepted instead of cutting
                       (fastcdc only; see docs/design.md): ff_rwt_fpt (the
                       server's default for fastcdc; the same chunks as off),
                       ff_rwt, ff_mt, ff (faster, chunks may differ) or off
)";

constexpr absl::string_view kDedupChunkNote =
    "\nDedup needs a fingerprint: --fingerprint none is not accepted.\n";

constexpr absl::string_view kInfoUsage = R"(Usage: chunkctl info --server ADDR

Prints the server's version, chunking and index backends, limits, and the
parameter ranges and defaults of every algorithm.

  --server ADDR        the chunkd server (host:port)
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

// Where a command prints, and how it reports errors.
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
    absl::FPrintF(err_, "chunkctl: %s\nRun 'chunkctl %s--help' for usage.\n",
                  message, command_.empty() ? "" : absl::StrCat(command_, " "));
    return kExitUsage;
  }
  // Parameters the library rejects: its message names field and range.
  int InvalidParameters(const absl::Status& status) const {
    absl::FPrintF(err_, "chunkctl: %s\n", status.message());
    return kExitUsage;
  }
  // Anything that went wrong while running.
  int Failure(const absl::Status& status) const {
    absl::FPrintF(err_, "chunkctl: %s\n", status.message());
    return kExitFailure;
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

std::vector<FlagSpec> WithConnectionFlags(std::vector<FlagSpec> specs) {
  for (const char* name :
       {"tls_ca", "tls_cert", "tls_key", "token", "token_file"}) {
    specs.push_back({name});
  }
  specs.push_back({"tls", false});
  return specs;
}

absl::StatusOr<std::string> ReadWholeFile(absl::string_view flag,
                                          const std::string& path) {
  absl::StatusOr<std::unique_ptr<InputFile>> file = InputFile::Open(path);
  if (!file.ok()) {
    return absl::Status(
        file.status().code(),
        absl::StrCat("--", flag, ": ", file.status().message()));
  }
  std::string text;
  char buffer[4096];
  while (true) {
    absl::StatusOr<size_t> n = (*file)->Read(buffer, sizeof(buffer));
    if (!n.ok()) {
      return absl::Status(n.status().code(),
                          absl::StrCat("--", flag, ": ", n.status().message()));
    }
    if (*n == 0) return text;
    text.append(buffer, *n);
    if (text.size() > (1 << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": ", path, " is larger than 1 MiB"));
    }
  }
}

// The connection flags of `args`; files are read here, so a missing one is
// reported before anything is sent.
absl::StatusOr<ConnectOptions> ConnectOptionsFromArgs(const ParsedArgs& args) {
  ConnectOptions options;
  options.address = args.Get("server").value_or("");
  options.tls = args.Has("tls") || args.Has("tls_ca") || args.Has("tls_cert") ||
                args.Has("tls_key");
  if (args.Has("tls_cert") != args.Has("tls_key")) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key go together: give both or neither");
  }
  for (auto [flag, field] : {std::pair{"tls_ca", &options.tls_root_certs},
                             std::pair{"tls_cert", &options.tls_cert_chain},
                             std::pair{"tls_key", &options.tls_private_key}}) {
    if (std::optional<std::string> path = args.Get(flag)) {
      absl::StatusOr<std::string> text = ReadWholeFile(flag, *path);
      if (!text.ok()) return text.status();
      if (text->find("-----BEGIN") == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, ": ", *path, " holds no PEM block"));
      }
      *field = *std::move(text);
    }
  }
  if (args.Has("token") && args.Has("token_file")) {
    return absl::InvalidArgumentError("give --token or --token_file, not both");
  }
  std::string token;
  if (std::optional<std::string> value = args.Get("token")) {
    token = *value;
  } else if (std::optional<std::string> path = args.Get("token_file")) {
    absl::StatusOr<std::string> text = ReadWholeFile("token_file", *path);
    if (!text.ok()) return text.status();
    token = std::string(absl::StripAsciiWhitespace(
        absl::string_view(*text).substr(0, text->find('\n'))));
    if (token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token_file: ", *path, " holds no token"));
    }
  } else if (const char* env = std::getenv("CHUNKD_TOKEN")) {
    token = std::string(absl::StripAsciiWhitespace(env));
  }
  if (std::any_of(token.begin(), token.end(),
                  [](char c) { return absl::ascii_isspace(c) || c == 0; })) {
    return absl::InvalidArgumentError("the token must be one word");
  }
  options.token = std::move(token);
  return options;
}

std::unique_ptr<chunkd::v1::ChunkService::Stub> Connect(
    const ConnectOptions& options) {
  return chunkd::v1::ChunkService::NewStub(MakeChannel(options));
}

// The progress display of one input: on `err` when it is a terminal.
std::unique_ptr<Progress> ProgressFor(std::FILE* err, InputFile* input) {
  auto progress = std::make_unique<Progress>(
      Progress::IsTerminal(err) ? err : nullptr,
      input->name() == "-" ? std::string("stdin") : input->name(),
      input->size());
  input->set_progress(progress.get());
  return progress;
}

// RunChunk's flags and FILE, with exactly one of --server and --local.
absl::StatusOr<ParsedArgs> ParseChunkArgs(absl::Span<const std::string> words) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(words, WithConnectionFlags(WithChunkFlags({{"server"},
                                                           {"local", false},
                                                           {"format"},
                                                           {"message-size"},
                                                           {"backend"},
                                                           {"threads"},
                                                           {"help", false}})));
  if (!args.ok()) return args.status();
  if (args->Has("server") == args->Has("local")) {
    return absl::InvalidArgumentError(
        "give exactly one of --server ADDR and --local");
  }
  if (args->positional().size() != 1) {
    return absl::InvalidArgumentError(args->positional().empty()
                                          ? "missing FILE (\"-\" for stdin)"
                                          : "give exactly one FILE");
  }
  return args;
}

// --format, CSV when not given.
absl::StatusOr<OutputFormat> ChunkOutputFormat(const ParsedArgs& args) {
  if (std::optional<std::string> name = args.Get("format")) {
    return ParseOutputFormat(*name);
  }
  return OutputFormat::kCsv;
}

// The flags that apply to only one of --server and --local.
absl::Status CheckChunkTarget(const ParsedArgs& args) {
  if (args.Has("server") && (args.Has("backend") || args.Has("threads"))) {
    return absl::InvalidArgumentError(
        "--backend and --threads apply to --local; the server has its own");
  }
  for (const char* flag :
       {"tls", "tls_ca", "tls_cert", "tls_key", "token", "token_file"}) {
    if (args.Has("local") && args.Has(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " applies to --server"));
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

// Chunks `input` into `writer`, here (--local) or on the server.
absl::Status ChunkInput(const ParsedArgs& args, const ChunkFlags& flags,
                        const ConnectOptions& connect, fingerprint::Kind kind,
                        size_t message_size,
                        const chunking::EngineOptions& engine, InputFile* input,
                        RecordWriter* writer) {
  if (args.Has("local")) {
    return ChunkLocally(ToChunkerOptions(flags), kind, message_size, input,
                        writer, engine);
  }
  chunkd::v1::ChunkParams params;
  ToProto(flags, params.mutable_chunking());
  params.set_fingerprint(ToProtoFingerprint(flags));
  return ChunkRemotely(Connect(connect).get(), params, kind, message_size,
                       input, writer);
}

int RunChunk(absl::Span<const std::string> words, std::FILE* out,
             std::FILE* err) {
  const Io io(out, err, "chunk");
  if (WantsHelp(words)) {
    return io.Usage(absl::StrCat(kChunkUsage, "\n", ChunkFlagsHelp(), "\n",
                                 kChunkOutputUsage, "\n", kConnectionUsage,
                                 kProgressNote));
  }
  absl::StatusOr<ParsedArgs> args = ParseChunkArgs(words);
  if (!args.ok()) return io.UsageError(args.status().message());
  absl::StatusOr<ChunkFlags> flags = ChunkFlagsFromArgs(*args);
  if (!flags.ok()) return io.UsageError(flags.status().message());
  absl::StatusOr<OutputFormat> format = ChunkOutputFormat(*args);
  if (!format.ok()) return io.UsageError(format.status().message());
  absl::StatusOr<size_t> message_size = MessageSize(*args);
  if (!message_size.ok()) return io.UsageError(message_size.status().message());
  if (absl::Status s = Validate(*flags); !s.ok()) {
    return io.InvalidParameters(s);
  }

  if (absl::Status s = CheckChunkTarget(*args); !s.ok()) {
    return io.UsageError(s.message());
  }
  absl::StatusOr<ConnectOptions> connect = ConnectOptionsFromArgs(*args);
  if (!connect.ok()) return io.UsageError(connect.status().message());
  chunking::EngineOptions engine;
  absl::StatusOr<const chunking::kernels::Kernel*> kernel = ChunkKernel(*args);
  if (!kernel.ok()) return io.UsageError(kernel.status().message());
  engine.kernel = *kernel;
  absl::StatusOr<size_t> threads = LocalThreads(*args);
  if (!threads.ok()) return io.UsageError(threads.status().message());
  std::optional<chunking::ThreadPoolExecutor> pool;
  if (*threads > 1) engine.executor = &pool.emplace(*threads);

  absl::StatusOr<std::unique_ptr<InputFile>> input =
      InputFile::Open(args->positional()[0]);
  if (!input.ok()) return io.Failure(input.status());
  const fingerprint::Kind kind = EffectiveFingerprint(*flags);
  RecordWriter writer(out, *format, kind != fingerprint::Kind::kNone);
  const std::unique_ptr<Progress> progress = ProgressFor(err, input->get());
  const absl::Status status =
      ChunkInput(*args, *flags, *connect, kind, *message_size, engine,
                 input->get(), &writer);
  progress->Finish();
  if (!status.ok()) return io.Failure(status);
  return kExitOk;
}

std::string Ratio(uint64_t bytes, uint64_t unique_bytes) {
  if (unique_bytes == 0) return "inf";
  return absl::StrFormat(
      "%.2f", static_cast<double>(bytes) / static_cast<double>(unique_bytes));
}

std::string DedupLine(absl::string_view name, const DedupTotals& file,
                      const DedupTotals& running) {
  std::string line = absl::StrFormat(
      "%s bytes=%d unique_bytes=%d chunks=%d unique_chunks=%d ratio=%s", name,
      file.bytes, file.unique_bytes, file.chunks, file.unique_chunks,
      Ratio(running.bytes, running.unique_bytes));
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

int RunDedup(absl::Span<const std::string> words, std::FILE* out,
             std::FILE* err) {
  const Io io(out, err, "dedup");
  if (WantsHelp(words)) {
    return io.Usage(absl::StrCat(kDedupUsage, "\n", ChunkFlagsHelp(),
                                 kDedupChunkNote, "\n", kConnectionUsage,
                                 kProgressNote));
  }
  absl::StatusOr<ParsedArgs> args = ParseArgs(
      words,
      WithConnectionFlags(WithChunkFlags(
          {{"server"},
           {"namespace"},
           {"message-size"},
           {"hints"},
           {"help", false}})));
  if (!args.ok()) return io.UsageError(args.status().message());
  if (!args->Has("server")) return io.UsageError("missing --server ADDR");
  if (!args->Has("namespace")) return io.UsageError("missing --namespace NS");
  const std::string ns = *args->Get("namespace");
  if (absl::Status s = CheckNamespace(ns); !s.ok()) {
    return io.UsageError(s.message());
  }
  const std::vector<std::string>& files = args->positional();
  if (files.empty()) return io.UsageError("missing FILE (\"-\" for stdin)");
  if (std::count(files.begin(), files.end(), "-") > 1) {
    return io.UsageError("stdin (\"-\") can be read only once");
  }
  absl::StatusOr<ChunkFlags> flags = ChunkFlagsFromArgs(*args);
  if (!flags.ok()) return io.UsageError(flags.status().message());
  const fingerprint::Kind kind = EffectiveFingerprint(*flags);
  if (kind == fingerprint::Kind::kNone) {
    return io.UsageError(
        "--fingerprint none: dedup needs a fingerprint (sha256 or xxh128)");
  }
  std::optional<chunkd::v1::HintTest> hints;
  if (std::optional<std::string> name = args->Get("hints")) {
    absl::StatusOr<chunkd::v1::HintTest> test = ParseHints(*name);
    if (!test.ok()) return io.UsageError(test.status().message());
    if (*test != chunkd::v1::HINT_TEST_OFF &&
        EffectiveAlgorithm(*flags) != chunking::Algorithm::kFastCdc) {
      return io.UsageError(absl::StrCat(
          "--hints ", HintsName(*test), " needs --algorithm fastcdc, not ",
          chunking::AlgorithmName(EffectiveAlgorithm(*flags)),
          " (hints apply to FastCDC only); use --hints off or leave it out"));
    }
    hints = *test;
  }
  absl::StatusOr<size_t> message_size = MessageSize(*args);
  if (!message_size.ok()) return io.UsageError(message_size.status().message());
  if (absl::Status s = Validate(*flags); !s.ok()) {
    return io.InvalidParameters(s);
  }

  absl::StatusOr<ConnectOptions> connect = ConnectOptionsFromArgs(*args);
  if (!connect.ok()) return io.UsageError(connect.status().message());

  chunkd::v1::DedupParams params;
  if (hints) params.set_hints(*hints);
  ToProto(*flags, params.mutable_chunking());
  params.set_fingerprint(ToProtoFingerprint(*flags));
  params.set_namespace_(ns);
  std::unique_ptr<chunkd::v1::ChunkService::Stub> stub = Connect(*connect);
  DedupTotals total;
  for (const std::string& name : files) {
    absl::StatusOr<std::unique_ptr<InputFile>> input = InputFile::Open(name);
    if (!input.ok()) return io.Failure(input.status());
    const std::unique_ptr<Progress> progress = ProgressFor(err, input->get());
    absl::StatusOr<DedupTotals> file =
        DedupRemotely(stub.get(), params, kind, *message_size, input->get());
    progress->Finish();
    if (!file.ok()) return io.Failure(file.status());
    total.bytes += file->bytes;
    total.unique_bytes += file->unique_bytes;
    total.chunks += file->chunks;
    total.unique_chunks += file->unique_chunks;
    total.hints_tried += file->hints_tried;
    total.hints_accepted += file->hints_accepted;
    total.hints_rejected += file->hints_rejected;
    total.hint_skipped_bytes += file->hint_skipped_bytes;
    if (std::fputs(DedupLine(name, *file, total).c_str(), out) < 0 ||
        std::fflush(out) != 0) {
      return io.Failure(absl::UnavailableError("writing output failed"));
    }
  }
  if (std::fputs(DedupLine("total", total, total).c_str(), out) < 0 ||
      std::fflush(out) != 0) {
    return io.Failure(absl::UnavailableError("writing output failed"));
  }
  return kExitOk;
}

int RunInfo(absl::Span<const std::string> words, std::FILE* out,
            std::FILE* err) {
  const Io io(out, err, "info");
  if (WantsHelp(words)) {
    return io.Usage(absl::StrCat(kInfoUsage, "\n", kConnectionUsage));
  }
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(words, WithConnectionFlags({{"server"}, {"help", false}}));
  if (!args.ok()) return io.UsageError(args.status().message());
  if (!args->Has("server")) return io.UsageError("missing --server ADDR");
  if (!args->positional().empty()) {
    return io.UsageError(
        absl::StrCat("unexpected argument \"", args->positional()[0], "\""));
  }
  absl::StatusOr<ConnectOptions> connect = ConnectOptionsFromArgs(*args);
  if (!connect.ok()) return io.UsageError(connect.status().message());
  absl::StatusOr<chunkd::v1::GetServerInfoResponse> info =
      GetServerInfo(Connect(*connect).get());
  if (!info.ok()) return io.Failure(info.status());
  std::fputs(FormatServerInfo(*info).c_str(), out);
  if (std::fflush(out) != 0) {
    return io.Failure(absl::UnavailableError("writing output failed"));
  }
  return kExitOk;
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
    absl::FPrintF(out, "chunkctl %s\n", CHUNKD_VERSION);
    return kExitOk;
  }
  if (command == "chunk") return RunChunk(rest, out, err);
  if (command == "dedup") return RunDedup(rest, out, err);
  if (command == "info") return RunInfo(rest, out, err);
  if (command == "bench") return RunBenchCommand(rest, out, err);
  return io.UsageError(absl::StrCat("unknown command \"", command, "\""));
}

}  // namespace chunkd::cli
