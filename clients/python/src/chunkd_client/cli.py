"""``chunkd-client``: the console script of the Python client.

    chunkd-client chunk [options] FILE|-
    chunkd-client dedup --namespace NS [options] FILE|- ...
    chunkd-client info  [options]

``chunk`` prints one chunk per line in chunkctl's formats (csv
``offset,length,fingerprint_hex``, or with ``--json`` one JSON object per
line), so its output is byte-identical to ``chunkctl chunk`` for the same
input and parameters. A progress bar (bytes, rate, ETA) goes to stderr when
stderr is a terminal; piped or redirected, the command prints nothing but its
results.

Exit status: 0 on success, 1 when a call failed or a file could not be read
(the message names the gRPC status code), 2 on a usage error, 130 when
interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import IO, Any, Dict, Iterator, List, Optional, Sequence

from chunkd_client._channel import TlsOptions, token_from_file
from chunkd_client._convert import (
    ALGORITHM_PARAMETERS, ALGORITHMS, DEFAULT_MESSAGE_SIZE, FINGERPRINTS, HINTS,
    SEQ_MODES, ChunkingParams,
)
from chunkd_client.client import Client
from chunkd_client.errors import ChunkdError
from chunkd_client.records import DedupSummary, ServerInfo

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: Where the server is when neither --server nor $CHUNKD_SERVER says.
DEFAULT_SERVER = "127.0.0.1:50051"

#: The flag of each chunking parameter, in the order of ``--help``.
CHUNKING_FLAGS = {
    "min_size": "--min",
    "avg_size": "--avg",
    "max_size": "--max",
    "normalization_level": "--level",
    "seed": "--seed",
    "seq_mode": "--seq-mode",
    "seq_length": "--seq-length",
    "skip_trigger": "--skip-trigger",
    "skip_size": "--skip-size",
    "horizon_size": "--horizon",
    "polynomial": "--polynomial",
}


class Progress:
    """A one-line progress bar on a terminal: bytes done, rate and ETA.

    Redraws at most ten times a second; ``total`` None (stdin) shows bytes
    and rate only. Inactive (prints nothing) when ``stream`` is None.
    """

    WIDTH = 24

    def __init__(
        self,
        stream: Optional[IO[str]],
        label: str,
        total: Optional[int],
        clock: Any = time.monotonic,
    ) -> None:
        self._stream = stream
        self._label = label
        self._total = total
        self._clock = clock
        self._start = clock()
        self._last_draw = float("-inf")
        self._done = 0

    def update(self, done: int) -> None:
        self._done = done
        now = self._clock()
        if now - self._last_draw >= 0.1:
            self._last_draw = now
            self._draw(now)

    def finish(self) -> None:
        if self._stream is not None:
            self._draw(self._clock())
            self._stream.write("\n")
            self._stream.flush()

    def line(self, now: float) -> str:
        """The text of the bar at time ``now``."""
        elapsed = max(now - self._start, 1e-9)
        rate = self._done / elapsed
        parts = [self._label]
        if self._total:
            fraction = min(self._done / self._total, 1.0)
            filled = int(fraction * self.WIDTH)
            parts.append("[" + "#" * filled + "-" * (self.WIDTH - filled) + "]")
            parts.append(f"{fraction * 100:5.1f}%")
            parts.append(f"{human_bytes(self._done)}/{human_bytes(self._total)}")
        else:
            parts.append(human_bytes(self._done))
        parts.append(f"{human_bytes(rate)}/s")
        if self._total and rate > 0:
            parts.append("ETA " + clock_time(max(self._total - self._done, 0) / rate))
        return " ".join(parts)

    def _draw(self, now: float) -> None:
        if self._stream is None:
            return
        self._stream.write("\r\x1b[K" + self.line(now))
        self._stream.flush()


def human_bytes(n: float) -> str:
    """1536 -> "1.5 KiB"."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def clock_time(seconds: float) -> str:
    """75 -> "1:15", 3725 -> "1:02:05"."""
    seconds = int(seconds + 0.5)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _positive(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chunkd-client",
        description="Command-line client of chunkd, the content-defined chunking "
        "and deduplication service.",
        epilog="Exit status: 0 on success, 1 when a call or a file failed, "
        "2 on a usage error, 130 when interrupted.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    connection = argparse.ArgumentParser(add_help=False)
    group = connection.add_argument_group("connection")
    group.add_argument(
        "--server",
        default=os.environ.get("CHUNKD_SERVER", DEFAULT_SERVER),
        help="host:port of chunkd (default: $CHUNKD_SERVER or %(default)s)",
    )
    group.add_argument("--tls", action="store_true", help="use TLS (system roots unless --tls-ca)")
    group.add_argument("--tls-ca", "--tls_ca", metavar="PEM", help="CA certificates of the server (implies --tls)")
    group.add_argument("--tls-cert", "--tls_cert", metavar="PEM", help="client certificate for mutual TLS (implies --tls)")
    group.add_argument("--tls-key", "--tls_key", metavar="PEM", help="the client certificate's private key")
    group.add_argument("--tls-server-name", "--tls_server_name", metavar="NAME", help="name to verify in the server's certificate")
    group.add_argument("--token", help="bearer token (default: $CHUNKD_TOKEN)")
    group.add_argument("--token-file", "--token_file", metavar="FILE", help="read the bearer token from FILE")
    group.add_argument("--timeout", type=float, metavar="SECONDS", help="deadline of each call")
    group.add_argument("--json", action="store_true", help="print JSON")

    chunking = argparse.ArgumentParser(add_help=False)
    group = chunking.add_argument_group(
        "chunking (unset: the server's defaults)",
        "Each algorithm takes only its own parameters: "
        + "; ".join(f"{name} {' '.join(CHUNKING_FLAGS[p] for p in params)}"
                    for name, params in ALGORITHM_PARAMETERS.items())
        + ". Another one is a usage error.",
    )
    group.add_argument("--algorithm", default="fastcdc", choices=sorted(ALGORITHMS))
    group.add_argument("--min", dest="min_size", type=_positive, metavar="N")
    group.add_argument("--avg", dest="avg_size", type=_positive, metavar="N")
    group.add_argument("--max", dest="max_size", type=_positive, metavar="N")
    group.add_argument("--level", dest="normalization_level", type=_positive, metavar="L",
                       help="fastcdc normalization level 0..3")
    group.add_argument("--seed", type=_positive, help="fastcdc Gear table seed (default 0)")
    group.add_argument("--seq-mode", choices=sorted(SEQ_MODES))
    group.add_argument("--seq-length", type=_positive, metavar="N")
    group.add_argument("--skip-trigger", type=_positive, metavar="N")
    group.add_argument("--skip-size", type=_positive, metavar="N")
    group.add_argument("--horizon", dest="horizon_size", type=_positive, metavar="N",
                       help="repmaxcdc: bytes past --min searched for the best cut")
    group.add_argument("--polynomial", type=_positive, metavar="P",
                       help="rabin: irreducible polynomial of degree 53 (0x... or decimal)")
    group.add_argument("--fingerprint", default="sha256", choices=sorted(FINGERPRINTS))
    group.add_argument("--message-size", type=_positive, default=DEFAULT_MESSAGE_SIZE,
                       metavar="N", help="bytes per data message (default %(default)s)")
    group.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                       help="progress bar on stderr (auto: when stderr is a terminal)")

    chunk = commands.add_parser(
        "chunk", parents=[connection, chunking],
        help="cut a file into chunks and print one line per chunk",
        description="Prints offset,length,fingerprint_hex per chunk (with --json "
        "one object per line), as chunkctl chunk does.",
    )
    chunk.add_argument("file", metavar="FILE", help='the input ("-" for stdin)')

    dedup = commands.add_parser(
        "dedup", parents=[connection, chunking],
        help="deduplicate files against a namespace of the server's index",
        description="Prints per file: FILE bytes=N unique_bytes=M chunks=C "
        "unique_chunks=U ratio=R.RR (running ratio), then a total line; a "
        "line where RapidCDC hints were tried ends with hints_tried=T "
        "hints_accepted=A hints_rejected=R hint_skipped_bytes=S (as chunkctl "
        "and chunkd-go print it); with --json one object per file and one for "
        "the total.",
    )
    dedup.add_argument("--namespace", required=True, help="the tenant's index")
    dedup.add_argument("--hints", type=str.lower, choices=list(HINTS),
                       help="RapidCDC hint test (fastcdc only; unset: the server's "
                       "default, ff_rwt_fpt for fastcdc)")
    dedup.add_argument("files", nargs="+", metavar="FILE", help='inputs ("-" for stdin)')

    commands.add_parser(
        "info", parents=[connection],
        help="describe the server: version, backends, limits, algorithms",
    )
    return parser


def _client(args: argparse.Namespace) -> Client:
    token = args.token
    if args.token_file:
        if token:
            raise _UsageError("give --token or --token-file, not both")
        token = token_from_file(args.token_file)
    if token is None:
        token = os.environ.get("CHUNKD_TOKEN") or None
    tls: Any = None
    if args.tls_ca or args.tls_cert or args.tls_key or args.tls_server_name:
        if bool(args.tls_cert) != bool(args.tls_key):
            raise _UsageError("--tls-cert and --tls-key go together")
        tls = TlsOptions(ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key,
                         server_name=args.tls_server_name)
    elif args.tls:
        tls = True
    return Client(args.server, tls=tls, token=token, timeout=args.timeout)


class _UsageError(Exception):
    pass


def _check_chunking_flags(args: argparse.Namespace) -> None:
    """Refuses, before any call, a chunking flag the algorithm does not take
    (the server would refuse its field)."""
    takes = ALGORITHM_PARAMETERS[args.algorithm]
    for field, flag in CHUNKING_FLAGS.items():
        if getattr(args, field) is not None and field not in takes:
            raise _UsageError(
                f"{flag} is not a parameter of {args.algorithm} (it takes "
                f"{', '.join(CHUNKING_FLAGS[f] for f in takes)})"
            )


def _chunking_kwargs(args: argparse.Namespace) -> Dict[str, Any]:
    """The keywords of ``chunk`` and ``dedup`` the flags give: the
    ChunkingParams, the fingerprint and the message size."""
    fields = {field: getattr(args, field) for field in CHUNKING_FLAGS}
    if fields["seed"] is None:
        fields["seed"] = 0
    return dict(
        params=ChunkingParams(args.algorithm, **fields),
        fingerprint=args.fingerprint,
        message_size=args.message_size,
    )


def _open(name: str) -> Any:
    if name == "-":
        return sys.stdin.buffer
    return open(name, "rb")


def _size(f: Any) -> Optional[int]:
    try:
        st = os.fstat(f.fileno())
    except (OSError, AttributeError, ValueError):
        return None
    import stat

    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _progress(args: argparse.Namespace, label: str, total: Optional[int]) -> Progress:
    if args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty()):
        return Progress(sys.stderr, label, total)
    return Progress(None, label, total)


def _run_chunk(args: argparse.Namespace, out: IO[str]) -> int:
    if args.message_size < 1:
        raise _UsageError("--message-size must be at least 1")
    _check_chunking_flags(args)
    with_fingerprint = args.fingerprint != "none"
    with _client(args) as client, _open(args.file) as f:
        progress = _progress(args, args.file, _size(f))
        with client.chunk(f, **_chunking_kwargs(args)) as stream:
            lines: List[str] = []
            for record in stream:
                if args.json:
                    obj: Dict[str, Any] = {"offset": record.offset, "length": record.length}
                    if with_fingerprint:
                        obj["fingerprint"] = record.fingerprint.hex()
                    lines.append(json.dumps(obj, separators=(",", ":")))
                elif with_fingerprint:
                    lines.append(f"{record.offset},{record.length},{record.fingerprint.hex()}")
                else:
                    lines.append(f"{record.offset},{record.length}")
                if len(lines) >= 1024:
                    out.write("\n".join(lines) + "\n")
                    lines.clear()
                progress.update(record.end)
            if lines:
                out.write("\n".join(lines) + "\n")
        progress.finish()
    return EXIT_OK


def _ratio(total: int, unique: int) -> str:
    return "inf" if unique == 0 else f"{total / unique:.2f}"


def _dedup_line(name: str, s: DedupSummary, running: DedupSummary, as_json: bool) -> str:
    if as_json:
        return json.dumps(
            {"file": name, "bytes": s.total_bytes, "unique_bytes": s.unique_bytes,
             "chunks": s.total_chunks, "unique_chunks": s.unique_chunks,
             "ratio": None if running.unique_bytes == 0
             else round(running.total_bytes / running.unique_bytes, 6),
             "hints_tried": s.hints_tried, "hints_accepted": s.hints_accepted,
             "hints_rejected": s.hints_rejected,
             "hint_skipped_bytes": s.hint_skipped_bytes},
            separators=(",", ":"))
    line = (f"{name} bytes={s.total_bytes} unique_bytes={s.unique_bytes} "
            f"chunks={s.total_chunks} unique_chunks={s.unique_chunks} "
            f"ratio={_ratio(running.total_bytes, running.unique_bytes)}")
    if s.hints_tried:
        line += (f" hints_tried={s.hints_tried} hints_accepted={s.hints_accepted} "
                 f"hints_rejected={s.hints_rejected} hint_skipped_bytes={s.hint_skipped_bytes}")
    return line


def _run_dedup(args: argparse.Namespace, out: IO[str]) -> int:
    if args.files.count("-") > 1:
        raise _UsageError('stdin ("-") can be read only once')
    if args.fingerprint == "none":
        raise _UsageError("--fingerprint none: dedup needs a fingerprint (sha256 or xxh128)")
    _check_chunking_flags(args)
    total = DedupSummary(0, 0, 0, 0)
    with _client(args) as client:
        for name in args.files:
            with _open(name) as f:
                progress = _progress(args, name, _size(f))
                with client.dedup(f, namespace=args.namespace, hints=args.hints,
                                  **_chunking_kwargs(args)) as stream:
                    for record in stream:
                        progress.update(record.end)
                    summary = stream.summary
                progress.finish()
            total = DedupSummary(
                total.total_bytes + summary.total_bytes,
                total.total_chunks + summary.total_chunks,
                total.unique_bytes + summary.unique_bytes,
                total.unique_chunks + summary.unique_chunks,
                total.hints_tried + summary.hints_tried,
                total.hints_accepted + summary.hints_accepted,
                total.hints_rejected + summary.hints_rejected,
                total.hint_skipped_bytes + summary.hint_skipped_bytes,
            )
            out.write(_dedup_line(name, summary, total, args.json) + "\n")
            out.flush()
    out.write(_dedup_line("total", total, total, args.json) + "\n")
    return EXIT_OK


def info_text(info: ServerInfo) -> str:
    """The readable form of ``info``."""
    lines = [
        f"version: {info.version}",
        f"chunking backend: {info.chunking_backend}",
        f"index backend: {info.index_backend}",
        f"max message bytes: {info.max_message_bytes}",
        f"max in-flight bytes: {info.max_inflight_bytes}",
        f"fingerprints: {', '.join(info.fingerprints)}",
        "algorithms:",
    ]
    for a in info.algorithms:
        # A range with max 0 is a parameter the algorithm does not take.
        ranges = ", ".join(
            f"{name} {r.min}..{r.max} (default {r.default})"
            for name, r in (("min", a.min_size), ("avg", a.avg_size), ("max", a.max_size),
                            ("level", a.normalization_level), ("horizon", a.horizon_size))
            if r is not None and r.max != 0
        )
        if a.avg_size_power_of_two:
            ranges += ", avg a power of two"
        if a.polynomial is not None:
            r = a.polynomial
            ranges += (f", polynomial {r.min:#x}..{r.max:#x} (default {r.default:#x}),"
                       " irreducible")
        if a.backend:
            threads = "thread" if a.backend_threads == 1 else "threads"
            ranges += f"; backend {a.backend} ({a.backend_threads} {threads})"
        lines.append(f"  {a.name}: {ranges}")
    return "\n".join(lines) + "\n"


def _run_info(args: argparse.Namespace, out: IO[str]) -> int:
    import dataclasses

    with _client(args) as client:
        info = client.server_info()
    if args.json:
        out.write(json.dumps(dataclasses.asdict(info), indent=2) + "\n")
    else:
        out.write(info_text(info))
    return EXIT_OK


def main(argv: Optional[Sequence[str]] = None, out: Optional[IO[str]] = None) -> int:
    """Runs the command line ``argv`` (default: sys.argv[1:]); returns the
    exit status."""
    out = out if out is not None else sys.stdout
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code or 0)
    run = {"chunk": _run_chunk, "dedup": _run_dedup, "info": _run_info}[args.command]
    try:
        return run(args, out)
    except _UsageError as e:
        parser.print_usage(sys.stderr)
        print(f"chunkd-client: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ChunkdError as e:
        print(f"\nchunkd-client: {e.code.name}: {e.message}" if sys.stderr.isatty()
              else f"chunkd-client: {e.code.name}: {e.message}", file=sys.stderr)
        return EXIT_FAILURE
    except (OSError, ValueError) as e:
        if isinstance(e, BrokenPipeError):
            return EXIT_FAILURE
        if isinstance(e, OSError) and e.filename is not None and e.strerror:
            print(f"chunkd-client: {e.filename}: {e.strerror}", file=sys.stderr)
        else:
            print(f"chunkd-client: {e}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("\nchunkd-client: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def entry_point() -> None:
    """The ``chunkd-client`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
