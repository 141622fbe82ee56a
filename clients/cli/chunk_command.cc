// `chunkctl chunk`: its command line, and the chunking of one file here
// (--local) or on a server.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "chunkd/v1/chunkd.pb.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"
#include "clients/cli/args.h"
#include "clients/cli/chunk_file.h"
#include "clients/cli/chunk_options.h"
#include "clients/cli/command_common.h"
#include "clients/cli/commands.h"
#include "clients/cli/common_flags.h"
#include "clients/cli/input_file.h"
#include "clients/cli/local_chunk.h"
#include "clients/cli/progress.h"
#include "clients/cli/record_writer.h"
#include "clients/cli/remote.h"
#include "clients/cli/replay.h"
#include "clients/cli/usage.h"

namespace chunkd::cli {
namespace {

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
  if (absl::Status s = CheckLocalTarget(args); !s.ok()) return s;
  absl::StatusOr<CommonOptions> common = CommonOptionsFromArgs(args);
  if (!common.ok()) return common.status();
  c.common = *std::move(common);
  c.local = args.Has("local");
  absl::StatusOr<const chunking::kernels::KernelSet*> kernel = LocalKernel(args);
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

}  // namespace

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

}  // namespace chunkd::cli
