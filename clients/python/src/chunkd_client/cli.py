"""``chunkd-client``: the console script of the Python client.

    chunkd-client chunk [options] FILE|-
    chunkd-client dedup --namespace NS [options] FILE|- ...
    chunkd-client info  [options]
    chunkd-client --version

It follows the contract of chunkd's three command-line clients
(docs/cli.md): the flags, output and exit statuses of ``chunkctl`` and
``chunkd-go``. ``chunk`` prints one chunk per line
(``offset,length,fingerprint_hex``, or with ``--json`` one JSON object per
line), byte-identical to ``chunkctl chunk`` for the same input and
parameters. A progress bar (bytes, rate, ETA) goes to stderr when stderr is
a terminal; piped or redirected, the command prints nothing but its results.

Exit status: 0 on success; 1 when a file cannot be read, the output cannot
be written or the server fails the call; 2 on a usage error or a bad
parameter (also when the server answers INVALID_ARGUMENT); 130 when
interrupted; 141 when standard output was closed early (``| head``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import stat
import sys
import time
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import grpc

from chunkd_client._calls import MAX_RETRIES
from chunkd_client._channel import TlsOptions, token_from_file
from chunkd_client._convert import (
    ALGORITHM_PARAMETERS, ALGORITHMS, DEFAULT_MESSAGE_SIZE, FINGERPRINTS, HINTS,
    SEQ_MODES, ChunkingParams,
)
from chunkd_client._version import __version__
from chunkd_client.client import Client
from chunkd_client.errors import ChunkdError
from chunkd_client.records import DedupSummary, ParamRange, ServerInfo

PROG = "chunkd-client"

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
#: The status of a process killed by SIGPIPE (128 + 13), for output closed
#: early.
EXIT_CLOSED_OUTPUT = 141

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

#: The values chunkd accepts per algorithm and chunking field
#: (server/chunking/limits.h, as GetServerInfo reports them; a test holds the
#: table to a real server's answer), so that a value out of range is a usage
#: error before any call, as chunkctl and chunkd-go find it. Rules between
#: fields (min <= avg <= max, a power of two, an irreducible polynomial) are
#: left to the server, whose INVALID_ARGUMENT exits 2 as well.
RANGES: Dict[str, Dict[str, Tuple[int, int]]] = {
    "fastcdc": {"min_size": (64, 1 << 20), "avg_size": (256, 4 << 20),
                "max_size": (1024, 16 << 20), "normalization_level": (0, 3)},
    "crc32": {"min_size": (64, 1 << 20), "avg_size": (256, 4 << 20),
              "max_size": (1024, 16 << 20)},
    "seqcdc": {"min_size": (64, 1 << 20), "max_size": (1024, 16 << 20)},
    "fixed": {"avg_size": (64, 16 << 20)},
    "repmaxcdc": {"min_size": (64, 4 << 20), "horizon_size": (0, 16 << 20)},
    "rabin": {"min_size": (64, 8 << 20), "avg_size": (1, 16 << 20),
              "max_size": (64, 16 << 20), "polynomial": (1 << 53, (1 << 54) - 1)},
    "buzhash": {"min_size": (48, 4 << 20), "avg_size": (48, 4 << 20),
                "max_size": (48, 16 << 20)},
}

#: What chunkd takes as a namespace.
NAMESPACE = re.compile(r"[A-Za-z0-9._-]{1,128}")

#: The named parameter sets of ``--preset`` (chunkctl's, the server's
#: chunking library's): the algorithm and its parameters. Flags given beside
#: a preset override its values.
PRESETS: Dict[str, Dict[str, Any]] = {
    "fastcdc-reapi": dict(algorithm="fastcdc", min_size=128 << 10, avg_size=512 << 10,
                          max_size=2 << 20, normalization_level=2),
    "seqcdc-8k": dict(algorithm="seqcdc", seq_mode="increasing", min_size=4 << 10,
                      max_size=16 << 10, seq_length=5, skip_trigger=50, skip_size=256),
    "seqcdc-16k": dict(algorithm="seqcdc", seq_mode="increasing", min_size=8 << 10,
                       max_size=32 << 10, seq_length=5, skip_trigger=50, skip_size=512),
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

    def note(self, text: str) -> None:
        """Prints ``text`` on a line of its own on stderr; an active bar is
        cleared first and drawn again below it."""
        if self._stream is None:
            print(text, file=sys.stderr, flush=True)
            return
        self._stream.write("\r\x1b[K" + text + "\n")
        self._draw(self._clock())

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


def _retries(text: str) -> int:
    value = _positive(text)
    if value > MAX_RETRIES:
        raise argparse.ArgumentTypeError(
            f"expected an integer in 0..{MAX_RETRIES}, got {text!r}")
    return value


def _seconds(text: str) -> Optional[float]:
    """--timeout: seconds, decimals allowed; 0 means no deadline."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a non-negative number of seconds, "
                                         f"got {text!r}")
    return value or None


class _UsageError(Exception):
    """A usage error or a bad parameter: exit status 2, with the hint to
    ``prog``'s help."""

    def __init__(self, message: str, prog: str = "") -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``chunkd-client:
    MESSAGE (see chunkd-client COMMAND --help)``, with exit status 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise _UsageError(message, self.prog)


class _HelpFormatter(argparse.HelpFormatter):
    """Help that shows every flag in its dash spelling only; the underscore
    spellings of earlier releases are accepted without being listed."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        shown = [o for o in action.option_strings if "_" not in o]
        if not action.option_strings or shown == action.option_strings:
            return super()._format_action_invocation(action)
        original = action.option_strings
        action.option_strings = shown
        try:
            return super()._format_action_invocation(action)
        finally:
            action.option_strings = original


def _add(group: Any, flag: str, *more: str, **kwargs: Any) -> None:
    """Adds ``flag`` (and ``more`` names), each with a dash also under its
    underscore spelling."""
    names = [flag, *more]
    aliases = [n.replace("-", "_").replace("__", "--", 1) for n in names if "-" in n[2:]]
    group.add_argument(*names, *aliases, **kwargs)


def _connection_parser() -> "_Parser":
    parent = _Parser(add_help=False, allow_abbrev=False)
    group = parent.add_argument_group("connection")
    _add(group, "--server", default=os.environ.get("CHUNKD_SERVER") or DEFAULT_SERVER,
         metavar="ADDR",
         help="host:port of chunkd or a gRPC target (dns:///name:port spreads the "
         "streams over every address; default: $CHUNKD_SERVER, else %(default)s)")
    _add(group, "--tls", action="store_true",
         help="TLS, verifying the server against the system's roots")
    _add(group, "--tls-ca", metavar="FILE",
         help="PEM CA certificates of the server (implies --tls)")
    _add(group, "--tls-cert", metavar="FILE",
         help="client certificate for mutual TLS (implies --tls)")
    _add(group, "--tls-key", metavar="FILE",
         help="the client certificate's private key (implies --tls)")
    _add(group, "--tls-server-name", metavar="NAME",
         help="the name to verify in the server's certificate")
    _add(group, "--token", help="bearer token (default: $CHUNKD_TOKEN)")
    _add(group, "--token-file", metavar="FILE", help="read the bearer token from FILE")
    _add(group, "--timeout", type=_seconds, metavar="SECONDS",
         help="deadline of each call in seconds, decimals allowed (0 or unset: none)")

    group = parent.add_argument_group("output")
    _add(group, "--format", choices=("text", "csv", "json"), default="text",
         help="text (default; for chunk the CSV lines offset,length,fingerprint_hex), "
         "csv (the same as text) or json")
    _add(group, "--json", dest="format", action="store_const", const="json",
         help="the same as --format json")
    _add(group, "--progress", choices=("auto", "always", "never"), default="auto",
         help="a progress line on stderr: auto (default: when stderr is a terminal), "
         "always or never")
    return parent


def _chunking_parser() -> "_Parser":
    parent = _Parser(add_help=False, allow_abbrev=False)
    group = parent.add_argument_group(
        "chunking (unset: the preset's, else the server's defaults)",
        "Each algorithm takes only its own parameters: "
        + "; ".join(f"{name} {' '.join(CHUNKING_FLAGS[p] for p in params)}"
                    for name, params in ALGORITHM_PARAMETERS.items())
        + ". Another one is a usage error.",
    )
    _add(group, "--algorithm", choices=list(ALGORITHMS),
         help="the chunking algorithm (default: the preset's, else fastcdc)")
    _add(group, "--preset", choices=list(PRESETS),
         help="a named set of parameters (fastcdc-reapi: fastcdc 128K/512K/2M level "
         "2; seqcdc-8k, seqcdc-16k); flags given beside it override it")
    _add(group, "--min", dest="min_size", type=_positive, metavar="N",
         help="smallest chunk in bytes")
    _add(group, "--avg", dest="avg_size", type=_positive, metavar="N",
         help="average (fixed: every) chunk size in bytes")
    _add(group, "--max", dest="max_size", type=_positive, metavar="N",
         help="largest chunk in bytes")
    _add(group, "--level", dest="normalization_level", type=_positive, metavar="L",
         help="fastcdc normalization level 0..3")
    _add(group, "--seed", type=_positive, metavar="S",
         help="fastcdc Gear table seed (default 0)")
    _add(group, "--seq-mode", choices=sorted(SEQ_MODES), help="seqcdc: the run to look for")
    _add(group, "--seq-length", type=_positive, metavar="N", help="seqcdc: run length")
    _add(group, "--skip-trigger", type=_positive, metavar="N",
         help="seqcdc: opposing pairs before a skip")
    _add(group, "--skip-size", type=_positive, metavar="N", help="seqcdc: bytes skipped")
    _add(group, "--horizon", dest="horizon_size", type=_positive, metavar="N",
         help="repmaxcdc: bytes past --min searched for the best cut")
    _add(group, "--polynomial", type=_positive, metavar="P",
         help="rabin: irreducible polynomial of degree 53 (0x... or decimal)")
    _add(group, "--fingerprint", default="sha256", choices=list(FINGERPRINTS),
         help="sha256 (default), xxh128 or none (chunk only)")
    _add(group, "--message-size", type=_positive, default=DEFAULT_MESSAGE_SIZE,
         metavar="N", help="bytes per data message (default %(default)s)")
    return parent


_EXIT_STATUS = (
    "Exit status: 0 success; 1 a file that cannot be read, output that cannot be "
    "written or an error from the server; 2 a usage error or a bad parameter (also "
    "the server's INVALID_ARGUMENT); 130 interrupted; 141 standard output closed "
    "early."
)


def _add_retries(group: Any, what: str) -> None:
    """--retries of chunk and dedup; ``what`` is sent again."""
    _add(group, "--retries", type=_retries, default=0, metavar="N",
         help=f"send {what} again from its start, up to N more times, when its stream "
         "fails with UNAVAILABLE, ABORTED, RESOURCE_EXHAUSTED, INTERNAL, CANCELLED "
         "or (with --timeout) DEADLINE_EXCEEDED, after a backoff of 0.1 s doubling "
         "to 2 s; each replay is announced on stderr. Regular files only, not - "
         "or another pipe (default 0)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Command-line client of chunkd, the content-defined chunking "
        "and deduplication service.",
        epilog=_EXIT_STATUS,
        formatter_class=_HelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}",
                        help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Parser)
    connection, chunking = _connection_parser(), _chunking_parser()
    common: Dict[str, Any] = dict(formatter_class=_HelpFormatter, allow_abbrev=False,
                                  epilog=_EXIT_STATUS)

    chunk = commands.add_parser(
        "chunk", parents=[connection, chunking], **common,
        help="cut a file into chunks and print one line per chunk",
        description="Prints offset,length,fingerprint_hex per chunk (offset,length "
        "with --fingerprint none); with --json one object per line, "
        '{"offset":O,"length":L,"fingerprint":"HEX"}. The same output as '
        "chunkctl chunk and chunkd-go chunk.",
    )
    _add_retries(chunk.add_argument_group("replays"), "the file")
    chunk.add_argument("file", metavar="FILE", help='the input ("-" for stdin)')

    dedup = commands.add_parser(
        "dedup", parents=[connection, chunking], **common,
        help="deduplicate files against a namespace of the server's index",
        description="Prints per file: FILE bytes=N unique_bytes=M chunks=C "
        "unique_chunks=U ratio=R.RR (the running ratio), then a total line; a "
        "line where RapidCDC hints were tried ends with hints_tried=T "
        "hints_accepted=A hints_rejected=R hint_skipped_bytes=S. With --json one "
        'object per file ("file": NAME), then one for the total ("total": true).',
    )
    group = dedup.add_argument_group("dedup")
    _add(group, "--namespace", required=True, metavar="NS",
         help="the tenant's index: 1..128 characters of [A-Za-z0-9._-]")
    _add(group, "--hints", type=str.lower, choices=list(HINTS),
         help="RapidCDC hint test (fastcdc only; unset: the server's default, "
         "ff_rwt_fpt for fastcdc)")
    _add_retries(group, "a file; each file's stream then carries a random "
                 "stream_id, so the reference counts equal a single run's")
    dedup.add_argument("files", nargs="+", metavar="FILE", help='inputs ("-" for stdin)')

    commands.add_parser(
        "info", parents=[connection], **common,
        help="describe the server: version, backends, limits, algorithms",
        description="Prints the server's version, backends, limits and every "
        "algorithm's parameter ranges; with --json one object.",
    )
    return parser


def _client(args: argparse.Namespace) -> Client:
    token = args.token
    if args.token_file:
        if token:
            raise _UsageError("give --token or --token-file, not both", args.prog)
        token = token_from_file(args.token_file)
    if token is None:
        token = os.environ.get("CHUNKD_TOKEN") or None
    tls: Any = None
    if args.tls_ca or args.tls_cert or args.tls_key or args.tls_server_name:
        if bool(args.tls_cert) != bool(args.tls_key):
            raise _UsageError("--tls-cert and --tls-key go together", args.prog)
        tls = TlsOptions(ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key,
                         server_name=args.tls_server_name)
    elif args.tls:
        tls = True
    return Client(args.server, tls=tls, token=token, timeout=args.timeout)


def _chunking_fields(args: argparse.Namespace) -> Dict[str, Any]:
    """The ChunkingParams fields the flags give: the preset's, overridden by
    the flags given; the algorithm fastcdc when neither says."""
    fields: Dict[str, Any] = dict(PRESETS[args.preset]) if args.preset else {}
    if args.algorithm is not None:
        if args.preset and args.algorithm != fields["algorithm"]:
            raise _UsageError(f"--preset {args.preset} is a {fields['algorithm']} "
                              f"preset, not {args.algorithm}", args.prog)
        fields["algorithm"] = args.algorithm
    fields.setdefault("algorithm", "fastcdc")
    for field, flag in CHUNKING_FLAGS.items():
        if getattr(args, field) is not None:
            fields[field] = getattr(args, field)
    return fields


def _check_chunking_flags(args: argparse.Namespace, fields: Dict[str, Any]) -> None:
    """Refuses, before any call, a chunking flag the algorithm does not take
    (the server would refuse its field), a value out of its RANGES, and a
    zero message size."""
    algorithm = fields["algorithm"]
    takes = ALGORITHM_PARAMETERS[algorithm]
    for field, flag in CHUNKING_FLAGS.items():
        if getattr(args, field) is not None and field not in takes:
            raise _UsageError(
                f"{flag} is not a parameter of {algorithm} (it takes "
                f"{', '.join(CHUNKING_FLAGS[f] for f in takes)})", args.prog
            )
    for field, (low, high) in RANGES[algorithm].items():
        value = getattr(args, field)
        if value is not None and not low <= value <= high:
            raise _UsageError(f"{CHUNKING_FLAGS[field]} {value} is out of range for "
                              f"{algorithm}: {low}..{high}", args.prog)
    if args.message_size < 1:
        raise _UsageError("--message-size must be at least 1", args.prog)


def _chunking_kwargs(args: argparse.Namespace) -> Dict[str, Any]:
    """The keywords of ``chunk`` and ``dedup`` the flags give: the
    ChunkingParams, the fingerprint and the message size."""
    fields = _chunking_fields(args)
    _check_chunking_flags(args, fields)
    if fields.get("seed") is None:
        fields["seed"] = 0
    return dict(
        params=ChunkingParams(**fields),
        fingerprint=args.fingerprint,
        message_size=args.message_size,
    )


def _open(name: str) -> Any:
    """The file ``name``; for "-", stdin unbuffered and left open: its pieces
    go out as they arrive, and a read that stalls holds no lock that closing
    it, or the interpreter's exit, would wait for (a call that times out
    meanwhile ends at once)."""
    if name == "-":
        return open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)
    return open(name, "rb")


def _check_replayable(args: argparse.Namespace, names: Sequence[str]) -> None:
    """With --retries, only regular files can be read again from their
    start: stdin or another pipe (a FIFO, /dev/stdin, <(zcat x)) would give
    the bytes not yet read. A usage error before any call."""
    if not args.retries:
        return
    for name in names:
        if name == "-":
            raise _UsageError('stdin ("-") cannot be read again: --retries needs '
                              "files", args.prog)
        if not stat.S_ISREG(os.stat(name).st_mode):
            raise _UsageError(f"--retries: {name} is not a regular file, so it cannot "
                              "be sent again from its start; give a file or "
                              "--retries 0", args.prog)


def _announcer(args: argparse.Namespace, name: str,
               progress: "Progress") -> Callable[[ChunkdError, float], None]:
    """The on_replay of a file's stream: one line on stderr per replay, as
    chunkctl and chunkd-go print it (docs/cli.md)."""
    replays = 0

    def announce(error: ChunkdError, delay: float) -> None:
        nonlocal replays
        replays += 1
        progress.note(f"{PROG}: {name}: {error.code().name}: {error.details()}; "
                      f"sending it again in {delay:.2f} s "
                      f"(retry {replays} of {args.retries})")

    return announce


def _size(f: Any) -> Optional[int]:
    try:
        st = os.fstat(f.fileno())
    except (OSError, AttributeError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _progress(args: argparse.Namespace, label: str, total: Optional[int]) -> Progress:
    if args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty()):
        return Progress(sys.stderr, label, total)
    return Progress(None, label, total)


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _run_chunk(args: argparse.Namespace, out: IO[str]) -> int:
    kwargs = _chunking_kwargs(args)
    with_fingerprint = args.fingerprint != "none"
    as_json = args.format == "json"
    _check_replayable(args, [args.file])
    with _client(args) as client, _open(args.file) as f:
        progress = _progress(args, args.file, _size(f))
        with client.chunk(f, retries=args.retries,
                          on_replay=_announcer(args, args.file, progress),
                          **kwargs) as stream:
            lines: List[str] = []
            for record in stream:
                if as_json:
                    obj: Dict[str, Any] = {"offset": record.offset, "length": record.length}
                    if with_fingerprint:
                        obj["fingerprint"] = record.fingerprint.hex()
                    lines.append(_compact(obj))
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


def _dedup_line(name: Optional[str], s: DedupSummary, running: DedupSummary,
                as_json: bool) -> str:
    """The report of one file (``name``), or of the total (``name`` None);
    ``running`` is the total so far, whose ratio the line shows."""
    if as_json:
        head: Dict[str, Any] = {"file": name} if name is not None else {"total": True}
        return _compact({
            **head,
            "bytes": s.total_bytes, "unique_bytes": s.unique_bytes,
            "chunks": s.total_chunks, "unique_chunks": s.unique_chunks,
            "ratio": None if running.unique_bytes == 0
            else round(running.total_bytes / running.unique_bytes, 6),
            "hints_tried": s.hints_tried, "hints_accepted": s.hints_accepted,
            "hints_rejected": s.hints_rejected,
            "hint_skipped_bytes": s.hint_skipped_bytes,
        })
    line = (f"{'total' if name is None else name} bytes={s.total_bytes} "
            f"unique_bytes={s.unique_bytes} "
            f"chunks={s.total_chunks} unique_chunks={s.unique_chunks} "
            f"ratio={_ratio(running.total_bytes, running.unique_bytes)}")
    if s.hints_tried:
        line += (f" hints_tried={s.hints_tried} hints_accepted={s.hints_accepted} "
                 f"hints_rejected={s.hints_rejected} hint_skipped_bytes={s.hint_skipped_bytes}")
    return line


def _added(a: DedupSummary, b: DedupSummary) -> DedupSummary:
    return DedupSummary(*(x + y for x, y in zip(dataclasses.astuple(a),
                                                 dataclasses.astuple(b))))


def _dedup_file(client: Client, args: argparse.Namespace, name: str,
                kwargs: Dict[str, Any]) -> DedupSummary:
    """Streams one file; returns its summary."""
    with _open(name) as f:
        progress = _progress(args, name, _size(f))
        with client.dedup(f, namespace=args.namespace, hints=args.hints,
                          retries=args.retries,
                          on_replay=_announcer(args, name, progress),
                          **kwargs) as stream:
            for record in stream:
                progress.update(record.end)
            summary = stream.summary
        progress.finish()
    return summary


def _run_dedup(args: argparse.Namespace, out: IO[str]) -> int:
    if args.files.count("-") > 1:
        raise _UsageError('stdin ("-") can be read only once', args.prog)
    if args.fingerprint == "none":
        raise _UsageError("--fingerprint none: dedup needs a fingerprint (sha256 or "
                          "xxh128)", args.prog)
    if not NAMESPACE.fullmatch(args.namespace):
        raise _UsageError(f"--namespace {args.namespace!r}: 1..128 characters of "
                          "[A-Za-z0-9._-]", args.prog)
    kwargs = _chunking_kwargs(args)
    _check_replayable(args, args.files)
    algorithm = _chunking_fields(args)["algorithm"]
    if args.hints not in (None, "off") and algorithm != "fastcdc":
        raise _UsageError(f"--hints {args.hints} needs --algorithm fastcdc, not "
                          f"{algorithm}; give --hints off or leave it out", args.prog)
    as_json = args.format == "json"
    total = DedupSummary(0, 0, 0, 0)
    with _client(args) as client:
        for name in args.files:
            summary = _dedup_file(client, args, name, kwargs)
            total = _added(total, summary)
            out.write(_dedup_line(name, summary, total, as_json) + "\n")
            out.flush()
    out.write(_dedup_line(None, total, total, as_json) + "\n")
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


def _range(r: Optional[ParamRange]) -> Optional[Dict[str, int]]:
    return None if r is None else {"min": r.min, "max": r.max, "default": r.default}


def info_json(info: ServerInfo) -> Dict[str, Any]:
    """The JSON object of ``info`` (docs/cli.md, "info"): the keys of every
    client, a range the algorithm does not take as null (level, horizon,
    polynomial) or zeros (the sizes)."""
    return {
        "version": info.version,
        "chunking_backend": info.chunking_backend,
        "index_backend": info.index_backend,
        "max_message_bytes": info.max_message_bytes,
        "max_inflight_bytes": info.max_inflight_bytes,
        "fingerprints": list(info.fingerprints),
        "algorithms": [
            {"name": a.name, "backend": a.backend, "backend_threads": a.backend_threads,
             "min_size": _range(a.min_size), "avg_size": _range(a.avg_size),
             "max_size": _range(a.max_size),
             "avg_size_power_of_two": a.avg_size_power_of_two,
             "normalization_level": _range(a.normalization_level),
             "horizon_size": _range(a.horizon_size),
             "polynomial": _range(a.polynomial)}
            for a in info.algorithms
        ],
    }


def _run_info(args: argparse.Namespace, out: IO[str]) -> int:
    with _client(args) as client:
        info = client.server_info()
    if args.format == "json":
        out.write(json.dumps(info_json(info), indent=2) + "\n")
    else:
        out.write(info_text(info))
    return EXIT_OK


def _error_line(e: BaseException) -> Tuple[str, int]:
    """The message and exit status of a failure while running."""
    if isinstance(e, ChunkdError):
        code = e.code()
        status = EXIT_USAGE if code == grpc.StatusCode.INVALID_ARGUMENT else EXIT_FAILURE
        reason = f" [reason: {e.reason}]" if e.reason else ""
        return f"{PROG}: {code.name}: {e.details()}{reason}", status
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{PROG}: {e.filename}: {e.strerror}", EXIT_FAILURE
    return f"{PROG}: {e}", EXIT_FAILURE


def main(argv: Optional[Sequence[str]] = None, out: Optional[IO[str]] = None) -> int:
    """Runs the command line ``argv`` (default: sys.argv[1:]); returns the
    exit status. Output closed early (BrokenPipeError) is EXIT_CLOSED_OUTPUT,
    with nothing printed."""
    out = out if out is not None else sys.stdout
    try:
        try:
            args, unknown = _parser().parse_known_args(argv)
        except SystemExit as e:  # --help, --version: 0
            out.flush()
            return int(e.code or 0)
        args.prog = f"{PROG} {args.command}"
        if unknown:
            raise _UsageError(f"unrecognized arguments: {' '.join(unknown)}", args.prog)
        run = {"chunk": _run_chunk, "dedup": _run_dedup, "info": _run_info}[args.command]
        status = run(args, out)
        out.flush()
        return status
    except BrokenPipeError:
        return EXIT_CLOSED_OUTPUT
    except _UsageError as e:
        print(f"{PROG}: {e} (see {e.prog or PROG} --help)", file=sys.stderr)
        return EXIT_USAGE
    except (ChunkdError, OSError, ValueError) as e:
        message, status = _error_line(e)
        # After a progress line, start on a line of its own.
        print(("\n" if sys.stderr.isatty() else "") + message, file=sys.stderr)
        return status
    except KeyboardInterrupt:
        print(("\n" if sys.stderr.isatty() else "") + f"{PROG}: interrupted",
              file=sys.stderr)
        return EXIT_INTERRUPTED


def entry_point() -> None:
    """The ``chunkd-client`` console script."""
    status = main()
    if status == EXIT_CLOSED_OUTPUT:
        # Nothing more may reach the closed pipe, not even the interpreter's
        # flush of stdout at exit (which would print a traceback).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    sys.exit(status)


if __name__ == "__main__":
    entry_point()
