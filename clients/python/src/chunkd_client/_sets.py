"""The parameter sets of an Estimate: the set syntax every command-line
client takes (``--set fastcdc:min=4096,avg=16384,max=65536``, docs/cli.md)
and the sets ``Client.estimate`` takes, as EstimateSet messages.

The keys are the parameters' flag names in chunkd's table (``_tables``,
generated from proto/chunkd/v1/tables.json), plus ``preset``. Only the
syntax is checked here, as chunkctl and chunkd-go check it; the ranges are
the server's (INVALID_ARGUMENT naming the set).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from chunkd_client import _tables
from chunkd_client._convert import FINGERPRINTS, ChunkingParams, chunking_message, enum_value
from chunkd_client._proto.chunkd.v1 import chunkd_pb2 as pb

#: Most parameter sets one Estimate takes.
MAX_SETS = 16
#: The ChunkingParams field of each key of the set syntax (the flag names
#: without their dashes).
SET_KEYS: Mapping[str, str] = {
    flag[2:]: field for field, flag in _tables.PARAMETER_FLAGS.items()
}

#: One parameter set as ``Client.estimate`` takes it: a SPEC of the set
#: syntax, or a label with the chunking.
SetSpec = Union[str, Tuple[str, ChunkingParams]]

_DECIMAL = re.compile(r"[0-9]+")
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")

_FIELD_BITS = {
    field.name: 64 if field.type == field.TYPE_UINT64 else 32
    for field in pb.ChunkingParams.DESCRIPTOR.fields
}


def _key_list(algorithm: str) -> str:
    """The keys ``algorithm`` takes, as a message lists them."""
    keys = [_tables.PARAMETER_FLAGS[f][2:] for f in _tables.RANGES[algorithm]]
    return ", ".join([*keys, "preset"])


def _value(spec: str, key: str, text: str) -> Any:
    """The value of ``key`` in ``spec``: a name for seq-mode, else an
    integer as the flags take it (decimal, 0x hex) that fits the field."""
    field = SET_KEYS[key]
    names = _tables.PARAMETER_NAMES.get(field)
    if names is not None:
        if text not in names:
            raise ValueError(f"set {spec!r}: bad value {text!r} for {key} (expected "
                             f"{' or '.join(names)})")
        return text
    # Exactly what chunkctl's flags take: decimal digits, or 0x and hex
    # digits (no sign, spaces, underscores, 0o or 0b).
    if _DECIMAL.fullmatch(text):
        value = int(text, 10)
    elif _HEX.fullmatch(text):
        value = int(text[2:], 16)
    else:
        value = -1
    if not 0 <= value < 1 << _FIELD_BITS[field]:
        raise ValueError(f"set {spec!r}: bad value {text!r} for {key} (expected an "
                         f"integer in 0..{(1 << _FIELD_BITS[field]) - 1}, decimal "
                         "or 0x hex)")
    return value


def _preset(spec: str, algorithm: str, name: str) -> Dict[str, Any]:
    """The fields of the preset ``name``, which must be one of ``algorithm``."""
    preset = _tables.PRESETS.get(name)
    if preset is None:
        raise ValueError(f"set {spec!r}: unknown preset {name!r} (expected one of "
                         f"{', '.join(_tables.PRESETS)})")
    if preset["algorithm"] != algorithm:
        raise ValueError(f"set {spec!r}: preset {name!r} is a {preset['algorithm']} "
                         f"preset, not {algorithm}")
    return {k: v for k, v in preset.items() if k != "algorithm"}


def _pairs(spec: str, text: str) -> Iterable[Tuple[str, str]]:
    """The ``KEY=VALUE`` pairs of ``text``, each key once."""
    seen = set()
    for item in text.split(","):
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise ValueError(f"set {spec!r}: expected KEY=VALUE, got {item!r}")
        if key in seen:
            raise ValueError(f"set {spec!r}: {key} given twice")
        seen.add(key)
        yield key, value


def parse_set(spec: str) -> Tuple[str, ChunkingParams]:
    """The label and chunking of one parameter set written as ``ALGO`` or
    ``ALGO:KEY=VALUE[,KEY=VALUE...]`` (docs/cli.md, "estimate")::

        parse_set("fastcdc:min=4096,avg=16384,max=65536")
        parse_set("seqcdc:preset=seqcdc-16k,skip-size=256")

    KEY is a parameter's flag name (``min``, ``avg``, ``max``, ``level``,
    ``seed``, ``seq-mode``, ``seq-length``, ``skip-trigger``, ``skip-size``,
    ``horizon``, ``polynomial``) or ``preset``, whose values the explicit
    keys override. The label is ``spec`` as given. ValueError, naming the
    set, for an unknown algorithm, key or preset, a key the algorithm does
    not take, a key given twice, a bad value or a preset of another
    algorithm. Ranges are left to the server.
    """
    if not isinstance(spec, str):
        raise TypeError(f"a set is a string, not {type(spec).__name__}")
    algorithm, colon, rest = spec.partition(":")
    if algorithm not in _tables.RANGES:
        raise ValueError(f"set {spec!r}: unknown algorithm {algorithm!r} (expected "
                         f"one of {', '.join(_tables.RANGES)})")
    explicit: Dict[str, Any] = {}
    preset: Dict[str, Any] = {}
    for key, text in _pairs(spec, rest) if colon else ():
        if key == "preset":
            preset = _preset(spec, algorithm, text)
            continue
        if key not in SET_KEYS:
            raise ValueError(f"set {spec!r}: unknown key {key!r} (expected one of "
                             f"{_key_list(algorithm)})")
        if SET_KEYS[key] not in _tables.RANGES[algorithm]:
            raise ValueError(f"set {spec!r}: {algorithm} takes no {key} (it takes "
                             f"{_key_list(algorithm)})")
        explicit[SET_KEYS[key]] = _value(spec, key, text)
    return spec, ChunkingParams(algorithm, **{**preset, **explicit})


def estimate_sets(sets: Sequence[SetSpec]) -> List[pb.EstimateSet]:
    """The EstimateSet messages of ``sets``: 1..MAX_SETS set-syntax strings
    (``parse_set``) or ``(label, ChunkingParams)`` pairs. ValueError for
    too few or too many sets or a bad one; TypeError for anything else."""
    if isinstance(sets, (str, bytes)) or not isinstance(sets, Sequence):
        raise TypeError("sets must be a sequence of set strings or (label, "
                        f"ChunkingParams) pairs, not {type(sets).__name__}")
    if not 1 <= len(sets) <= MAX_SETS:
        raise ValueError(f"an estimate takes 1 to {MAX_SETS} parameter sets, got "
                         f"{len(sets)}")
    messages = []
    for item in sets:
        if isinstance(item, str):
            label, params = parse_set(item)
        elif (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
              and isinstance(item[1], ChunkingParams)):
            label, params = item
        else:
            raise TypeError("a set is a set string or a (label, ChunkingParams) "
                            f"pair, not {item!r}")
        messages.append(pb.EstimateSet(label=label, chunking=chunking_message(params)))
    return messages


#: The largest sampling rate: 1 distinct chunk in 2^20.
MAX_SAMPLE_RATE = 1 << 20


def estimate_params(sets: Sequence[SetSpec], sample_rate: int,
                    namespace: Optional[str], fingerprint: Union[str, int, None]
                    ) -> pb.EstimateParams:
    """The first Estimate request's params; ValueError or TypeError for a
    bad argument, before any call."""
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int):
        raise TypeError(f"sample_rate must be an int, not {type(sample_rate).__name__}")
    if not 1 <= sample_rate <= MAX_SAMPLE_RATE:
        raise ValueError(f"sample_rate must be in 1..{MAX_SAMPLE_RATE} (1 in N distinct "
                         f"chunks; 1: exact), got {sample_rate}")
    message = pb.EstimateParams(sets=estimate_sets(sets), sample_rate=sample_rate,
                                namespace=namespace or "")
    if fingerprint is not None:
        message.fingerprint = enum_value("fingerprint", fingerprint, FINGERPRINTS)
    return message
