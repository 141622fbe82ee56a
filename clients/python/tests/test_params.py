"""Strict chunking parameters: each algorithm takes only some ChunkingParams
fields, and chunkd refuses any other that is set with INVALID_ARGUMENT. The
client never sets one on its own; it passes what its caller gives (and
shows the server's refusal); the console script refuses such a flag itself,
before any call. Against a real chunkd (see conftest.py).
"""

from __future__ import annotations

import asyncio
import io
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import grpc
import pytest

from chunkd_client import ALGORITHM_PARAMETERS, ALGORITHMS, ChunkdError, Client
from chunkd_client._convert import chunk_params, dedup_params
from chunkd_client.aio import AsyncClient
from chunkd_client.cli import CHUNKING_FLAGS, main
from chunkd_client.testing import ChunkdServer, free_port

from conftest import RPC_TIMEOUT

DATA = random.Random(31337).randbytes(200_000)
SCRIPT = Path(sys.executable).with_name("chunkd-client")
FIELDS = tuple(CHUNKING_FLAGS)
#: A value the server accepts for each field, for the algorithms that take it.
VALUES: Dict[str, Any] = dict(
    min_size=2048, avg_size=8192, max_size=32768, normalization_level=2, seed=7,
    seq_mode="decreasing", seq_length=4, skip_trigger=40, skip_size=256,
    horizon_size=4096, polynomial=0x3DA3358B4DC173,
)
#: Every (algorithm, field) the algorithm does not take.
UNUSED = [(a, f) for a, takes in ALGORITHM_PARAMETERS.items() for f in FIELDS
          if f not in takes]


def refusal(algorithm: str, field: str) -> str:
    takes = ", ".join(ALGORITHM_PARAMETERS[algorithm])
    return (f"chunking.{field} is not a parameter of {algorithm} (it takes {takes}); "
            f"leave {field} unset")


def namespace() -> str:
    return f"params-{random.getrandbits(64):016x}"


def test_the_table_covers_every_algorithm_and_field() -> None:
    assert set(ALGORITHM_PARAMETERS) == set(ALGORITHMS)
    assert {f for takes in ALGORITHM_PARAMETERS.values() for f in takes} == set(FIELDS)
    assert len(UNUSED) == 7 * len(FIELDS) - 24


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_defaults_set_no_parameter(algorithm: str) -> None:
    """What Client.chunk and dedup send when given only the algorithm (their
    own defaults: seed 0, the rest None)."""
    for params in (chunk_params("sha256", algorithm=algorithm, seed=0),
                   dedup_params("ns", "sha256", algorithm=algorithm, seed=0)):
        assert [f.name for f, _ in params.chunking.ListFields()] == ["algorithm"]


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_defaults_are_accepted_by_every_entry_point(server: ChunkdServer, client: Client,
                                                    algorithm: str) -> None:
    records, summary = client.chunk_all(DATA, algorithm=algorithm)
    assert summary.total_bytes == len(DATA) and records
    stream = client.chunk(io.BytesIO(DATA), algorithm=algorithm)
    assert list(stream) == records
    dedup, _ = client.dedup_all(DATA, namespace=namespace(), algorithm=algorithm)
    assert [(r.offset, r.length) for r in dedup] == [(r.offset, r.length) for r in records]

    async def main() -> Tuple[List[Any], List[Any]]:
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as aclient:
            chunked, _ = await aclient.chunk_all(DATA, algorithm=algorithm)
            deduped, _ = await aclient.dedup_all(DATA, namespace=namespace(),
                                                 algorithm=algorithm)
            return chunked, deduped

    chunked, deduped = asyncio.run(asyncio.wait_for(main(), RPC_TIMEOUT))
    assert chunked == records and deduped == dedup


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_parameter_the_algorithm_takes_is_accepted(client: Client,
                                                         algorithm: str) -> None:
    given = {f: VALUES[f] for f in ALGORITHM_PARAMETERS[algorithm]}
    records, summary = client.chunk_all(DATA, algorithm=algorithm, **given)
    assert summary.total_bytes == len(DATA)
    default, _ = client.chunk_all(DATA, algorithm=algorithm)
    assert records != default  # the parameters were applied, not dropped
    _, dedup = client.dedup_all(DATA, namespace=namespace(), algorithm=algorithm, **given)
    assert dedup.total_chunks == len(records)


@pytest.mark.parametrize("algorithm,field", UNUSED)
def test_a_parameter_the_algorithm_does_not_take_is_refused(
        client: Client, algorithm: str, field: str) -> None:
    for call in (lambda: client.chunk_all(DATA, algorithm=algorithm, **{field: VALUES[field]}),
                 lambda: client.dedup_all(DATA, namespace=namespace(), algorithm=algorithm,
                                          **{field: VALUES[field]})):
        with pytest.raises(ChunkdError) as caught:
            call()
        assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.message == refusal(algorithm, field)


def test_set_means_present_and_seed_zero_means_unset(client: Client) -> None:
    """A zero is still a value for the optional fields; seed 0 is none."""
    for algorithm, field in (("crc32", "normalization_level"), ("fixed", "min_size"),
                             ("fixed", "skip_size"), ("seqcdc", "avg_size")):
        with pytest.raises(ChunkdError) as caught:
            client.chunk_all(DATA, algorithm=algorithm, **{field: 0})
        assert caught.value.message == refusal(algorithm, field)
    for algorithm in ("crc32", "seqcdc", "fixed"):
        assert client.chunk_all(DATA, algorithm=algorithm, seed=0)[1].total_bytes == len(DATA)


def test_async_client_shows_the_refusal(server: ChunkdServer) -> None:
    async def main() -> List[ChunkdError]:
        errors = []
        async with AsyncClient(server.address, timeout=RPC_TIMEOUT) as aclient:
            for algorithm, field in UNUSED:
                with pytest.raises(ChunkdError) as caught:
                    await aclient.chunk_all(DATA, algorithm=algorithm,
                                            **{field: VALUES[field]})
                errors.append(caught.value)
        return errors

    errors = asyncio.run(asyncio.wait_for(main(), RPC_TIMEOUT))
    assert [(e.code, e.message) for e in errors] == [
        (grpc.StatusCode.INVALID_ARGUMENT, refusal(a, f)) for a, f in UNUSED]


def flag_args(fields: Any) -> List[str]:
    """The console script's flags for ``fields`` with the values of VALUES."""
    return [item for f in fields for item in (CHUNKING_FLAGS[f], str(VALUES[f]))]


@pytest.mark.parametrize("algorithm,field", UNUSED)
def test_console_script_refuses_a_flag_the_algorithm_does_not_take(
        capsys: pytest.CaptureFixture, algorithm: str, field: str) -> None:
    """A usage error before any call: nothing listens at --server, so a call
    would fail with UNAVAILABLE (exit 1) instead."""
    takes = ", ".join(CHUNKING_FLAGS[f] for f in ALGORITHM_PARAMETERS[algorithm])
    expected = (f"chunkd-client: {CHUNKING_FLAGS[field]} is not a parameter of "
                f"{algorithm} (it takes {takes}) (see chunkd-client COMMAND --help)\n")
    server = f"127.0.0.1:{free_port()}"
    for command in (["chunk"], ["dedup", "--namespace", "ns"]):
        code = main([*command, "--server", server, "--algorithm", algorithm,
                     *flag_args([field]), "/nonexistent/input"], out=io.StringIO())
        err = capsys.readouterr().err
        assert code == 2, (command, err)
        assert err == expected.replace("COMMAND", command[0]), (command, err)


def test_console_script_checks_the_default_algorithm_and_explicit_defaults(
        capsys: pytest.CaptureFixture) -> None:
    server = f"127.0.0.1:{free_port()}"
    code = main(["chunk", "--server", server, "--seq-length", "5", "-"], out=io.StringIO())
    assert code == 2
    assert capsys.readouterr().err.endswith(
        "chunkd-client: --seq-length is not a parameter of fastcdc "
        "(it takes --min, --avg, --max, --level, --seed) (see chunkd-client chunk --help)\n")
    # --seed 0 is the default value, but given: refused like any other.
    code = main(["chunk", "--server", server, "--algorithm", "crc32", "--seed", "0", "-"],
                out=io.StringIO())
    assert code == 2 and "--seed is not a parameter of crc32" in capsys.readouterr().err


def test_console_script_usage_error_as_a_process(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    result = subprocess.run(
        [str(SCRIPT), "dedup", "--server", f"127.0.0.1:{free_port()}", "--namespace", "ns",
         "--algorithm", "fixed", "--min", "4096", "--avg", "4096", str(path)],
        capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and result.stdout == b""
    assert result.stderr.decode().endswith(
        "chunkd-client: --min is not a parameter of fixed (it takes --avg) "
        "(see chunkd-client dedup --help)\n")


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_console_script_sends_only_what_the_algorithm_takes(
        server: ChunkdServer, client: Client, tmp_path: Path, algorithm: str) -> None:
    """With no flag and with every flag the algorithm takes, the console
    script's chunks are the library's (the strict server accepts both)."""
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    takes = ALGORITHM_PARAMETERS[algorithm]
    for fields in ((), takes):
        out = io.StringIO()
        code = main(["chunk", "--server", server.address, "--algorithm", algorithm,
                     *flag_args(fields), str(path)], out=out)
        assert code == 0, fields
        records, _ = client.chunk_all(DATA, algorithm=algorithm,
                                      **{f: VALUES[f] for f in fields})
        assert out.getvalue() == "".join(
            f"{r.offset},{r.length},{r.fingerprint.hex()}\n" for r in records), fields
        out = io.StringIO()
        code = main(["dedup", "--server", server.address, "--namespace", namespace(),
                     "--algorithm", algorithm, *flag_args(fields), str(path)], out=out)
        assert code == 0, fields
        assert out.getvalue().startswith(
            f"{path} bytes={len(DATA)} unique_bytes={len(DATA)} chunks={len(records)} ")
