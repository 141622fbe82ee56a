"""The chunking flags of ``chunkd-client``: what each algorithm takes, the
ranges checked before any call, the presets and the namespace rule, all from
chunkd's table (``_tables``, generated from proto/chunkd/v1/tables.json, as
the server and the other clients have them); and the ChunkingParams the
flags make."""

from __future__ import annotations

import argparse
import re
from typing import Any, Dict, Mapping, Tuple

from chunkd_client import _tables
from chunkd_client._convert import ALGORITHM_PARAMETERS, ChunkingParams

#: The flag of each chunking parameter, in the order of ``--help``.
CHUNKING_FLAGS: Mapping[str, str] = _tables.PARAMETER_FLAGS

#: The values chunkd accepts per algorithm and chunking field, so that a
#: value out of range is a usage error before any call, as chunkctl and
#: chunkd-go find it. Rules between fields (min <= avg <= max, a power of
#: two, an irreducible polynomial) are left to the server, whose
#: INVALID_ARGUMENT exits 2 as well. seq_mode is a choice of names instead.
RANGES: Dict[str, Dict[str, Tuple[int, int]]] = {
    algorithm: {field: (low, high) for field, (low, high, _) in ranges.items()
                if field not in _tables.PARAMETER_NAMES}
    for algorithm, ranges in _tables.RANGES.items()
}

#: What chunkd takes as a namespace.
NAMESPACE = re.compile(
    f"[{_tables.NAME_CHARACTERS}]{{1,{_tables.NAMESPACE_MAX_LENGTH}}}")

#: The named parameter sets of ``--preset`` (chunkctl's, the server's
#: chunking library's): the algorithm and its parameters. Flags given beside
#: a preset override its values.
PRESETS: Mapping[str, Mapping[str, Any]] = _tables.PRESETS


class UsageError(Exception):
    """A usage error or a bad parameter: exit status 2, with the hint to
    ``prog``'s help."""

    def __init__(self, message: str, prog: str = "") -> None:
        super().__init__(message)
        self.prog = prog


def chunking_fields(args: argparse.Namespace) -> Dict[str, Any]:
    """The ChunkingParams fields the flags give: the preset's, overridden by
    the flags given; the algorithm fastcdc when neither says."""
    fields: Dict[str, Any] = dict(PRESETS[args.preset]) if args.preset else {}
    if args.algorithm is not None:
        if args.preset and args.algorithm != fields["algorithm"]:
            raise UsageError(f"--preset {args.preset} is a {fields['algorithm']} "
                              f"preset, not {args.algorithm}", args.prog)
        fields["algorithm"] = args.algorithm
    fields.setdefault("algorithm", "fastcdc")
    for field, flag in CHUNKING_FLAGS.items():
        if getattr(args, field) is not None:
            fields[field] = getattr(args, field)
    return fields


def check_chunking_flags(args: argparse.Namespace, fields: Dict[str, Any]) -> None:
    """Refuses, before any call, a chunking flag the algorithm does not take
    (the server would refuse its field), a value out of its RANGES, and a
    zero message size."""
    algorithm = fields["algorithm"]
    takes = ALGORITHM_PARAMETERS[algorithm]
    for field, flag in CHUNKING_FLAGS.items():
        if getattr(args, field) is not None and field not in takes:
            raise UsageError(
                f"{flag} is not a parameter of {algorithm} (it takes "
                f"{', '.join(CHUNKING_FLAGS[f] for f in takes)})", args.prog
            )
    for field, (low, high) in RANGES[algorithm].items():
        value = getattr(args, field)
        if value is not None and not low <= value <= high:
            raise UsageError(f"{CHUNKING_FLAGS[field]} {value} is out of range for "
                              f"{algorithm}: {low}..{high}", args.prog)
    if args.message_size < 1:
        raise UsageError("--message-size must be at least 1", args.prog)


def chunking_kwargs(args: argparse.Namespace) -> Dict[str, Any]:
    """The keywords of ``chunk`` and ``dedup`` the flags give: the
    ChunkingParams, the fingerprint and the message size."""
    fields = chunking_fields(args)
    check_chunking_flags(args, fields)
    if fields.get("seed") is None:
        fields["seed"] = 0
    return dict(
        params=ChunkingParams(**fields),
        fingerprint=args.fingerprint,
        message_size=args.message_size,
    )
