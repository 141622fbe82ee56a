"""``chunkd-client``: the console script of the Python client.

    chunkd-client chunk [options] FILE|-
    chunkd-client dedup --namespace NS [options] FILE|- ...
    chunkd-client info  [options]
    chunkd-client estimate --set SPEC [--set SPEC ...] [options] FILE|DIR|- ...
    chunkd-client plot JSON OUT
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
import json
import os
import stat
import sys
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple

import grpc

from chunkd_client._channel import TlsOptions, token_from_file
from chunkd_client._cli_args import DEFAULT_SERVER, PROG, parser
from chunkd_client._cli_output import (
    Progress, added, clock_time, compact, dedup_line, estimate_json, estimate_text,
    human_bytes, info_json, info_text,
)
from chunkd_client._cli_params import (
    CHUNKING_FLAGS, NAMESPACE, PRESETS, RANGES, UsageError, chunking_fields,
    chunking_kwargs,
)
from chunkd_client._plot import PlotError, draw, plot_format, require_matplotlib
from chunkd_client._sets import MAX_SETS, parse_set
from chunkd_client._sources import dataset_files
from chunkd_client.client import Client
from chunkd_client.errors import ChunkdError
from chunkd_client.records import DedupSummary, EstimateProgress

__all__ = [
    "CHUNKING_FLAGS", "DEFAULT_SERVER", "NAMESPACE", "PRESETS", "PROG", "RANGES",
    "Progress", "clock_time", "human_bytes", "info_json", "info_text", "main",
    "entry_point",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
#: The status of a process killed by SIGPIPE (128 + 13), for output closed
#: early.
EXIT_CLOSED_OUTPUT = 141


def _client(args: argparse.Namespace) -> Client:
    token = args.token
    if args.token_file:
        if token:
            raise UsageError("give --token or --token-file, not both", args.prog)
        token = token_from_file(args.token_file)
    if token is None:
        token = os.environ.get("CHUNKD_TOKEN") or None
    tls: Any = None
    if args.tls_ca or args.tls_cert or args.tls_key or args.tls_server_name:
        if bool(args.tls_cert) != bool(args.tls_key):
            raise UsageError("--tls-cert and --tls-key go together", args.prog)
        tls = TlsOptions(ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key,
                         server_name=args.tls_server_name)
    elif args.tls:
        tls = True
    return Client(args.server, tls=tls, token=token, timeout=args.timeout)


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
            raise UsageError('stdin ("-") cannot be read again: --retries needs '
                              "files", args.prog)
        if not stat.S_ISREG(os.stat(name).st_mode):
            raise UsageError(f"--retries: {name} is not a regular file, so it cannot "
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


def _run_chunk(args: argparse.Namespace, out: IO[str]) -> int:
    kwargs = chunking_kwargs(args)
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
                    lines.append(compact(obj))
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
        raise UsageError('stdin ("-") can be read only once', args.prog)
    if args.fingerprint == "none":
        raise UsageError("--fingerprint none: dedup needs a fingerprint (sha256 or "
                          "xxh128)", args.prog)
    if not NAMESPACE.fullmatch(args.namespace):
        raise UsageError(f"--namespace {args.namespace!r}: 1..128 characters of "
                          "[A-Za-z0-9._-]", args.prog)
    kwargs = chunking_kwargs(args)
    _check_replayable(args, args.files)
    algorithm = chunking_fields(args)["algorithm"]
    if args.hints not in (None, "off") and algorithm != "fastcdc":
        raise UsageError(f"--hints {args.hints} needs --algorithm fastcdc, not "
                          f"{algorithm}; give --hints off or leave it out", args.prog)
    as_json = args.format == "json"
    total = DedupSummary(0, 0, 0, 0)
    with _client(args) as client:
        for name in args.files:
            summary = _dedup_file(client, args, name, kwargs)
            total = added(total, summary)
            out.write(dedup_line(name, summary, total, as_json) + "\n")
            out.flush()
    out.write(dedup_line(None, total, total, as_json) + "\n")
    return EXIT_OK


def _run_info(args: argparse.Namespace, out: IO[str]) -> int:
    with _client(args) as client:
        info = client.server_info()
    if args.format == "json":
        out.write(json.dumps(info_json(info), indent=2) + "\n")
    else:
        out.write(info_text(info))
    return EXIT_OK


def _estimate_checks(args: argparse.Namespace) -> None:
    """The usage errors of estimate, found before any call: the sets, stdin
    twice, the namespace, and a --plot that cannot be drawn."""
    if not args.sets:
        raise UsageError("give at least one --set", args.prog)
    if len(args.sets) > MAX_SETS:
        raise UsageError(f"at most {MAX_SETS} --set, got {len(args.sets)}", args.prog)
    for spec in args.sets:
        try:
            parse_set(spec)
        except ValueError as e:
            raise UsageError(f"--set: {e}", args.prog) from None
    if args.files.count("-") > 1:
        raise UsageError('stdin ("-") can be read only once', args.prog)
    if args.namespace is not None and not NAMESPACE.fullmatch(args.namespace):
        raise UsageError(f"--namespace {args.namespace!r}: 1..128 characters of "
                          "[A-Za-z0-9._-]", args.prog)
    if args.message_size < 1:
        raise UsageError("--message-size must be at least 1", args.prog)
    if args.plot is not None:
        try:
            plot_format(args.plot)
        except PlotError as e:
            raise UsageError(f"--plot {e}", args.prog) from None
        require_matplotlib()


def _estimate_progress(args: argparse.Namespace, files: List[Any]) -> Progress:
    """The progress line of an estimate: the bytes the server has read, of
    the files' total when every file is a regular one."""
    sizes = [None if f == "-" else _size_path(f) for f in files]
    total = None if None in sizes else sum(s for s in sizes if s is not None)
    label = files[0] if len(files) == 1 else f"{len(files)} files"
    return _progress(args, str(label), total)


def _size_path(path: str) -> Optional[int]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _run_estimate(args: argparse.Namespace, out: IO[str]) -> int:
    _estimate_checks(args)
    files = dataset_files(args.files)
    progress = _estimate_progress(args, files)

    def on_progress(p: EstimateProgress) -> None:
        progress.update(p.bytes)

    sources = [_open(f) if f == "-" else f for f in files]
    with _client(args) as client:
        result = client.estimate(
            *sources, sets=args.sets, sample_rate=args.sample, namespace=args.namespace,
            fingerprint=args.fingerprint, on_progress=on_progress,
            message_size=args.message_size)
    progress.update(result.total_bytes)
    progress.finish()
    if args.plot is not None:
        draw(result.to_json(), args.plot)
    out.write(estimate_json(result) if args.format == "json" else estimate_text(result))
    return EXIT_OK


def _run_plot(args: argparse.Namespace, out: IO[str]) -> int:
    try:
        plot_format(args.out)
    except PlotError as e:
        raise UsageError(str(e), args.prog) from None
    with _open(args.json) as f:
        text = f.read()
    try:
        estimate = json.loads(text)
    except ValueError as e:
        raise PlotError(f"{args.json}: not JSON: {e}") from None
    try:
        draw(estimate, args.out)
    except PlotError as e:
        raise PlotError(f"{args.json}: {e}") from None
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
            args, unknown = parser().parse_known_args(argv)
        except SystemExit as e:  # --help, --version: 0
            out.flush()
            return int(e.code or 0)
        args.prog = f"{PROG} {args.command}"
        if unknown:
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)}", args.prog)
        run = {"chunk": _run_chunk, "dedup": _run_dedup, "info": _run_info,
               "estimate": _run_estimate, "plot": _run_plot}[args.command]
        status = run(args, out)
        out.flush()
        return status
    except BrokenPipeError:
        return EXIT_CLOSED_OUTPUT
    except UsageError as e:
        print(f"{PROG}: {e} (see {e.prog or PROG} --help)", file=sys.stderr)
        return EXIT_USAGE
    except (ChunkdError, OSError, ValueError, PlotError) as e:
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
