// `chunkctl estimate`: its command line, the estimate here (--local) or on
// a server, and what it prints (estimate_output.h).
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "chunkd/v1/chunkd.pb.h"
#include "chunking/executor.h"
#include "clients/cli/args.h"
#include "clients/cli/chunk_options.h"
#include "clients/cli/command_common.h"
#include "clients/cli/commands.h"
#include "clients/cli/common_flags.h"
#include "clients/cli/estimate_output.h"
#include "clients/cli/estimate_run.h"
#include "clients/cli/estimate_sets.h"
#include "clients/cli/record_writer.h"
#include "clients/cli/usage.h"
#include "estimate/estimator.h"

namespace chunkd::cli {
namespace {

// Everything `chunkctl estimate` needs, from its command line.
struct EstimateCommand {
  std::vector<EstimateSetFlag> sets;
  uint32_t sample_rate = 1;
  std::optional<fingerprint::Kind> fingerprint;  // as given
  std::string ns;                                // empty: none
  std::optional<std::string> plot;
  std::vector<std::string> files;
  CommonOptions common;
  size_t message_size = kDefaultMessageSize;
  bool local = false;
  chunking::EngineOptions engine;
  size_t threads = 1;
};

std::vector<FlagSpec> EstimateFlagSpecs() {
  return WithOutputFlags(WithConnectionFlags({{"set", true, true},
                                              {"sample"},
                                              {"fingerprint"},
                                              {"namespace"},
                                              {"plot"},
                                              {"local", false},
                                              {"backend"},
                                              {"threads"},
                                              {"message-size"},
                                              {"help", false}}));
}

// --sample, 1 when not given.
absl::StatusOr<uint32_t> SampleRate(const ParsedArgs& args) {
  std::optional<std::string> text = args.Get("sample");
  if (!text.has_value()) return 1;
  absl::StatusOr<uint64_t> n =
      ParseUint("sample", *text, estimate::kMaxSampleRate);
  if (!n.ok() || *n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sample: expected an integer in 1..",
                     estimate::kMaxSampleRate, ", got \"", *text, "\""));
  }
  return static_cast<uint32_t>(*n);
}

// --fingerprint: xxh128 or sha256 (none cannot tell chunks apart).
absl::Status ReadFingerprint(const ParsedArgs& args, EstimateCommand* c) {
  std::optional<std::string> text = args.Get("fingerprint");
  if (!text.has_value()) return absl::OkStatus();
  if (*text != "xxh128" && *text != "sha256") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fingerprint: expected xxh128 or sha256, got \"", *text, "\""));
  }
  c->fingerprint = *text == "sha256" ? fingerprint::Kind::kSha256
                                     : fingerprint::Kind::kXxh128;
  return absl::OkStatus();
}

// --namespace and FILE|DIR|-...
absl::Status ReadTargets(const ParsedArgs& args, EstimateCommand* c) {
  if (std::optional<std::string> ns = args.Get("namespace")) {
    if (absl::Status s = CheckNamespace(*ns); !s.ok()) return s;
    c->ns = *ns;
  }
  if (args.positional().empty()) {
    return absl::InvalidArgumentError(
        "missing FILE, DIR or \"-\" (stdin): the data set to estimate");
  }
  if (std::count(args.positional().begin(), args.positional().end(), "-") >
      1) {
    return absl::InvalidArgumentError("stdin (\"-\") can be read only once");
  }
  absl::StatusOr<std::vector<std::string>> files =
      DataSetFiles(args.positional());
  if (!files.ok()) return files.status();
  c->files = *std::move(files);
  return absl::OkStatus();
}

// --local, --backend and --threads.
absl::Status ReadLocal(const ParsedArgs& args, EstimateCommand* c) {
  if (absl::Status s = CheckLocalTarget(args); !s.ok()) return s;
  c->local = args.Has("local");
  absl::StatusOr<const chunking::kernels::KernelSet*> kernel =
      LocalKernel(args);
  if (!kernel.ok()) return kernel.status();
  c->engine.kernel = *kernel;
  absl::StatusOr<size_t> threads = LocalThreads(args);
  if (!threads.ok()) return threads.status();
  c->threads = *threads;
  return absl::OkStatus();
}

// Reads and checks `estimate`'s command line: a usage error, or
// FAILED_PRECONDITION for a directory it names that cannot be read.
absl::StatusOr<EstimateCommand> ParseEstimateCommand(const ParsedArgs& args) {
  EstimateCommand c;
  absl::StatusOr<std::vector<EstimateSetFlag>> sets =
      ParseEstimateSets(args.GetAll("set"));
  if (!sets.ok()) return sets.status();
  c.sets = *std::move(sets);
  absl::StatusOr<uint32_t> sample = SampleRate(args);
  if (!sample.ok()) return sample.status();
  c.sample_rate = *sample;
  if (absl::Status s = ReadFingerprint(args, &c); !s.ok()) return s;
  c.plot = args.Get("plot");
  if (c.plot.has_value()) {
    // The picture chunkd-client draws is a PNG or an SVG, as the other two
    // CLIs check.
    const std::string extension = absl::AsciiStrToLower(
        std::filesystem::path(*c.plot).extension().string());
    if (extension != ".png" && extension != ".svg") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--plot: expected a file name ending in .png or .svg, got \"",
          *c.plot, "\""));
    }
  }
  absl::StatusOr<size_t> message_size = MessageSize(args);
  if (!message_size.ok()) return message_size.status();
  c.message_size = *message_size;
  if (absl::Status s = ReadLocal(args, &c); !s.ok()) return s;
  absl::StatusOr<CommonOptions> common = CommonOptionsFromArgs(args);
  if (!common.ok()) return common.status();
  c.common = *std::move(common);
  if (absl::Status s = ReadTargets(args, &c); !s.ok()) return s;
  return c;
}

// The fingerprint in effect: the one given, else sha256 with a namespace
// and xxh128 without.
fingerprint::Kind EffectiveKind(const EstimateCommand& c) {
  if (c.fingerprint.has_value()) return *c.fingerprint;
  return c.ns.empty() ? fingerprint::Kind::kXxh128 : fingerprint::Kind::kSha256;
}

absl::StatusOr<EstimateReport> RunLocally(const EstimateCommand& c,
                                          DataSetReader* reader) {
  estimate::EstimatorOptions options;
  for (const EstimateSetFlag& set : c.sets) {
    options.sets.push_back({set.label, ToChunkerOptions(set.flags)});
  }
  options.sample_rate = c.sample_rate;
  options.fingerprint = EffectiveKind(c) == fingerprint::Kind::kSha256
                            ? estimate::FingerprintKind::kSha256
                            : estimate::FingerprintKind::kXxh128;
  options.engine = c.engine;
  std::optional<chunking::ThreadPoolExecutor> pool;
  if (c.threads > 1) options.engine.executor = &pool.emplace(c.threads);
  return EstimateLocally(options, reader);
}

absl::StatusOr<EstimateReport> RunRemotely(const EstimateCommand& c,
                                           DataSetReader* reader) {
  chunkd::v1::EstimateParams params;
  for (const EstimateSetFlag& set : c.sets) {
    chunkd::v1::EstimateSet* proto = params.add_sets();
    proto->set_label(set.label);
    ToProto(set.flags, proto->mutable_chunking());
  }
  params.set_sample_rate(c.sample_rate);
  if (c.fingerprint.has_value()) {
    params.set_fingerprint(*c.fingerprint == fingerprint::Kind::kSha256
                               ? chunkd::v1::FINGERPRINT_ALGORITHM_SHA256
                               : chunkd::v1::FINGERPRINT_ALGORITHM_XXH128);
  }
  params.set_namespace_(c.ns);
  absl::StatusOr<chunkd::v1::EstimateResult> result = EstimateRemotely(
      Connect(c.common.connect).get(), params, c.common.timeout, reader);
  if (!result.ok()) return result.status();
  return ReportFromProto(*result, !c.ns.empty());
}

// --plot FILE: the JSON next to FILE, as FILE with the extension .json.
absl::Status WritePlotJson(const std::string& plot, const std::string& json,
                           std::FILE* err) {
  const std::string path =
      std::filesystem::path(plot).replace_extension(".json").string();
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
  }
  const bool written =
      std::fwrite(json.data(), 1, json.size(), file) == json.size();
  if (std::fclose(file) != 0 || !written) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
  }
  absl::FPrintF(err, "wrote %s; draw %s with: chunkd-client plot %s %s\n",
                path, plot, path, plot);
  return absl::OkStatus();
}

}  // namespace

int RunEstimate(absl::Span<const std::string> words, std::FILE* out,
                std::FILE* err) {
  const Io io(out, err, "estimate");
  if (WantsHelp(words)) {
    return io.Usage(absl::StrCat(kEstimateUsage, "\n", kEstimateSetUsage, "\n",
                                 kEstimateOutputUsage, kProgressUsage, "\n",
                                 kLocalUsage, "\n", kConnectionUsage));
  }
  absl::StatusOr<ParsedArgs> args = ParseArgs(words, EstimateFlagSpecs());
  if (!args.ok()) return io.UsageError(args.status().message());
  absl::StatusOr<EstimateCommand> command = ParseEstimateCommand(*args);
  if (!command.ok()) return io.Refused(command.status());

  std::FILE* const tty = ProgressTarget(command->common.progress, err);
  DataSetReader reader(
      command->files, command->message_size,
      [tty](InputFile* input) { return ProgressFor(tty, input); });
  absl::StatusOr<EstimateReport> report =
      command->local ? RunLocally(*command, &reader)
                     : RunRemotely(*command, &reader);
  if (!report.ok()) return io.Failure(report.status());
  const std::string json = EstimateJson(*report);
  if (command->plot.has_value()) {
    if (absl::Status s = WritePlotJson(*command->plot, json, err); !s.ok()) {
      return io.Failure(s);
    }
  }
  return io.Print(command->common.format == OutputFormat::kJson
                      ? json
                      : EstimateText(*report));
}

}  // namespace chunkd::cli
