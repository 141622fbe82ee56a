#include "clients/cli/usage.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "clients/cli/chunk_options.h"

namespace chunkd::cli {
namespace {

constexpr absl::string_view kBenchUsageTemplate =
    R"(Usage: chunkctl bench [options]

Measures the chunking library in this process, as `make bench` does: for
each algorithm, the scalar reference (ReferenceChunks) and then every backend
on every thread count, over the same generated data. Prints one row per
measurement as it finishes: GB/s (10^9 input bytes per second, the fastest of
the runs), the ratio to the reference on one thread, the fraction of the
memory-read ceiling (summing the data's 64-bit words on as many threads), the
chunk count, and whether the chunks equal the reference's. Any difference
fails the command (exit status 1).

Parameters are those of the project's speed targets: each algorithm's
defaults (`chunkctl info` lists them), fastcdc at normalization level 2.

%ALGORITHM_AND_PRESET%  --backend B          scalar, avx2, avx512, auto, a comma-separated list, or
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

}  // namespace

const absl::string_view kMainUsage =
    R"(Usage: chunkctl COMMAND [options] [ARGS]

chunkctl is the command-line client of chunkd, the content-defined chunking
and deduplication service. It can also chunk locally, without a server.

Commands:
  chunk    cut a file into chunks and print one record per chunk
  dedup    deduplicate files against a namespace of the server's index
  estimate how a data set would deduplicate under up to 16 chunking
           parameter sets at once, here (--local) or on the server
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

const absl::string_view kChunkUsage =
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

const absl::string_view kConnectionUsage = R"(Connection (not with --local):
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

const absl::string_view kProgressUsage =
    R"(  --progress WHEN      auto (default: a progress line with bytes, rate and
                       ETA on stderr while a file streams, when stderr is a
                       terminal), always or never
)";

const absl::string_view kChunkRetriesUsage =
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

const absl::string_view kChunkOutputUsage = R"(Output and transfer:
  --format FMT         text (default; the csv lines above; csv is another
                       name of it) or json
  --json               the same as --format json
  --message-size N     bytes per data message to the server (with --local:
                       per read), 1..67108864 (default 1048576)
)";

const absl::string_view kLocalUsage =
    R"(With --local only (the output never depends on them):
  --backend NAME       stage-1 kernel: scalar, avx2 or avx512 (default:
                       $CHUNKD_BACKEND when set, else per algorithm the
                       fastest on this CPU, calibrated at the first chunk)
  --threads N          threads that cut the file, 1..256 (default 1)
sha256 with --local hashes several chunks at once where the CPU has the SHA
extensions; $CHUNKD_SHA256=openssl forces OpenSSL one chunk at a time
(also: shani, shani-x1 .. shani-x4).
)";

const absl::string_view kDedupUsage =
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

const absl::string_view kDedupOutputUsage = R"(Output:
  --format FMT         text (default; csv is another name of it) or json
  --json               the same as --format json
)";

const absl::string_view kDedupChunkNote =
    "\nDedup needs a fingerprint: --fingerprint none is not accepted.\n";

const absl::string_view kEstimateUsage =
    R"(Usage: chunkctl estimate [--server ADDR | --local] --set SPEC...
                         [options] FILE|DIR|-...

Estimates how the data set made of the FILEs (stdin for "-"; a DIR's files,
recursively, in sorted path order) would deduplicate under each parameter
set, cutting every set from the same bytes in one pass; nothing is written
to any index. Each file is cut on its own; distinct chunks are counted over
all of them. Prints a table of bytes, chunks, unique chunks and bytes, the
dedup ratio (bytes / unique bytes), its 95 % interval when sampled, the mean
and percentiles of chunk sizes; a table of what an index of the unique
chunks takes in each index backend; and a line with the total bytes, the
files, the sample rate and the fingerprint. docs/estimate.md explains the
numbers.

Where to estimate:
  --server ADDR        stream the files to the chunkd server at ADDR (the
                       default, see Connection below)
  --local              run the Estimator in this process instead; the same
                       numbers
)";

const absl::string_view kEstimateSetUsage = R"(Parameter sets and sampling:
  --set SPEC           a parameter set, 1 to 16 times: ALGO or
                       ALGO:KEY=VALUE[,KEY=VALUE...], e.g.
                       fastcdc:min=4096,avg=16384,max=65536,
                       seqcdc:preset=seqcdc-16k, fixed:avg=8192. KEY is a
                       chunking flag of `chunkctl chunk --help` without the
                       dashes (min, avg, max, level, seed, seq-mode,
                       seq-length, skip-trigger, skip-size, horizon,
                       polynomial; each algorithm takes only its own) or
                       preset (of ALGO; KEYs given override its values);
                       unset ones take the algorithm's defaults. SPEC is the
                       set's name in the output
  --sample N           keep 1 in N distinct chunks, chosen by fingerprint,
                       and estimate the unique ones with sketches: less
                       memory, an interval instead of the exact ratio;
                       1..1048576 (default 1: exact)
  --fingerprint NAME   xxh128 (default) or sha256 (default with --namespace)
  --namespace NS       also count the unique bytes the namespace NS of the
                       server's index already holds (read only; not with
                       --local)
)";

const absl::string_view kEstimateOutputUsage = R"(Output and transfer:
  --format FMT         text (default; csv is another name of it) or json
  --json               the same as --format json: one object on one line
  --plot FILE          also write the JSON to FILE with the extension .json,
                       for `chunkd-client plot JSON FILE` to draw (PNG or
                       SVG)
  --message-size N     bytes per data message to the server (with --local:
                       per read), 1..67108864 (default 1048576)
)";

const absl::string_view kInfoUsage = R"(Usage: chunkctl info [options]

Prints the server's version, chunking and index backends, limits, and the
parameter ranges and defaults of every algorithm: readable text, or with
--json one object (the shape of docs/cli.md).

  --format FMT         text (default; csv is another name of it) or json
  --json               the same as --format json
)";

const absl::string_view kSizeUsage =
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

std::string BenchUsage() {
  const std::string lines = absl::StrCat(
      "  --algorithm A        ",
      WrapHelp(absl::StrCat(absl::StrJoin(AlgorithmNames(), ", "),
                            ", a comma-separated list of them, or all "
                            "(default)")),
      "\n  --preset NAME        ",
      WrapHelp(absl::StrCat(OrList(PresetNames()),
                            ": time that preset's algorithm alone, with the "
                            "preset's parameters instead of the ones above")),
      "\n");
  return absl::StrReplaceAll(kBenchUsageTemplate,
                             {{"%ALGORITHM_AND_PRESET%", lines}});
}

}  // namespace chunkd::cli
