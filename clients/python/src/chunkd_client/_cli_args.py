"""The command line of ``chunkd-client``: its commands, their flags (every
dashed flag also under its underscore spelling) and their help."""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, Optional

from chunkd_client._calls import MAX_RETRIES
from chunkd_client._cli_params import CHUNKING_FLAGS, PRESETS, UsageError
from chunkd_client._convert import (
    ALGORITHM_PARAMETERS, ALGORITHMS, DEFAULT_MESSAGE_SIZE, FINGERPRINTS, HINTS,
    SEQ_MODES,
)
from chunkd_client._plot import INSTALL_HINT
from chunkd_client._sets import MAX_SAMPLE_RATE, MAX_SETS
from chunkd_client._version import __version__

PROG = "chunkd-client"

#: Where the server is when neither --server nor $CHUNKD_SERVER says.
DEFAULT_SERVER = "127.0.0.1:50051"


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


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``chunkd-client:
    MESSAGE (see chunkd-client COMMAND --help)``, with exit status 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UsageError(message, self.prog)


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


def _connection_parser() -> "Parser":
    parent = Parser(add_help=False, allow_abbrev=False)
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


def _chunking_parser() -> "Parser":
    parent = Parser(add_help=False, allow_abbrev=False)
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
         help="a named set of parameters: " + ", ".join(PRESETS)
         + "; flags given beside it override it")
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


def _sample_rate(text: str) -> int:
    value = _positive(text)
    if not 1 <= value <= MAX_SAMPLE_RATE:
        raise argparse.ArgumentTypeError(
            f"expected an integer in 1..{MAX_SAMPLE_RATE}, got {text!r}")
    return value


def _estimate_parser(commands: Any, connection: "Parser", common: Dict[str, Any]) -> None:
    estimate = commands.add_parser(
        "estimate", parents=[connection], **common,
        help="estimate how files would deduplicate under several parameter sets",
        description="Cuts the data set (every FILE, every file under a DIR in sorted "
        "path order; each file chunked on its own) under each --set in one pass on "
        "the server and prints, per set, the chunks, unique chunks and bytes, the "
        "dedup ratio (with its 95 % interval when sampled) and chunk sizes, then "
        "what an index of the unique chunks takes per backend. Nothing is written "
        "to any index. With --json one object. The same output as chunkctl estimate "
        "and chunkd-go estimate (docs/estimate.md).",
    )
    group = estimate.add_argument_group("estimate")
    _add(group, "--set", dest="sets", action="append", default=[], metavar="SPEC",
         help=f"a parameter set, 1 to {MAX_SETS} of them: ALGO or "
         "ALGO:KEY=VALUE[,KEY=VALUE...], KEY a chunking flag's name (min, avg, max, "
         "level, seed, seq-mode, seq-length, skip-trigger, skip-size, horizon, "
         "polynomial) or preset; e.g. fastcdc:min=4096,avg=16384,max=65536 or "
         "seqcdc:preset=seqcdc-16k")
    _add(group, "--sample", type=_sample_rate, default=1, metavar="N",
         help="keep 1 in N distinct chunks, chosen by fingerprint, and estimate the "
              "unique ones (default 1: exact)")
    _add(group, "--fingerprint", choices=("xxh128", "sha256"),
         help="xxh128 (default), or sha256 (the default with --namespace)")
    _add(group, "--namespace", metavar="NS",
         help="also count what this namespace already holds (read only)")
    _add(group, "--plot", metavar="FILE",
         help=f"also draw the estimate as FILE, .png or .svg ({INSTALL_HINT})")
    _add(group, "--message-size", type=_positive, default=DEFAULT_MESSAGE_SIZE,
         metavar="N", help="bytes per data message (default %(default)s)")
    estimate.add_argument("files", nargs="+", metavar="FILE",
                          help='inputs: files, directories ("-" for stdin)')


def parser() -> argparse.ArgumentParser:
    parser = Parser(
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
                                     parser_class=Parser)
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

    _estimate_parser(commands, connection, common)
    plot = commands.add_parser(
        "plot", formatter_class=_HelpFormatter, allow_abbrev=False, epilog=_EXIT_STATUS,
        help="draw the JSON of estimate --json (of any of the three clients)",
        description="Draws the estimate saved in JSON (the output of estimate --json, "
        "or the file chunkctl and chunkd-go write for --plot) as OUT, a PNG or SVG "
        "by its extension: the dedup ratio against the mean chunk size, and the "
        "chunk size histograms (docs/estimate.md). Needs matplotlib: "
        f"{INSTALL_HINT}.",
    )
    plot.add_argument("json", metavar="JSON", help='the saved estimate ("-" for stdin)')
    plot.add_argument("out", metavar="OUT", help="the picture to write, .png or .svg")

    commands.add_parser(
        "info", parents=[connection], **common,
        help="describe the server: version, backends, limits, algorithms",
        description="Prints the server's version, backends, limits and every "
        "algorithm's parameter ranges; with --json one object.",
    )
    return parser
