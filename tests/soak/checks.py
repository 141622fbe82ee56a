"""What the soak checks at the end, from the clients' logs, the index as
Redis holds it, the replicas' metrics and the sampled processes. Each check
returns a dict with "ok" and the figures behind it."""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from typing import Any, Dict, Iterable, List, Sequence, Tuple

from workload import Expected

#: Operations by the gRPC method they call.
METHODS = {"chunk": "Chunk", "dedup": "Dedup", "dedup_shared": "Dedup",
           "find_missing": "FindMissing", "release": "Release", "info": "GetServerInfo"}
#: Resource growth allowed over the last two thirds of a replica's life:
#: resident memory (its peaks, see growth) 16 MiB per 10 minutes (never
#: less than 16 MiB), open file descriptors and threads a fixed slack
#: (connections and gRPC's threads come and go with the load).
RSS_GROWTH_PER_10_MIN = 16 << 20
FD_SLACK = 16
THREAD_SLACK = 8
#: Lives shorter than this are not judged for growth.
MIN_LIFE_SECONDS = 60.0


def model(events: Iterable[Dict[str, Any]], expected: Expected) -> Dict[str, Counter]:
    """Reference counts per namespace: every acknowledged Dedup adds its
    file's chunks, every acknowledged Release takes them away."""
    counts: Dict[str, Counter] = defaultdict(Counter)
    for e in events:
        if not e["ok"] or e["op"] not in ("dedup", "dedup_shared", "release"):
            continue
        sign = -1 if e["op"] == "release" else 1
        for fp in expected.fingerprints(e["params"], e["file"]):
            counts[e["ns"]][fp] += sign
    return counts


def failures(events: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    failed = [e for e in events if not e["ok"]]
    wrong = [e for e in events if e["problems"]]
    by_code = Counter(e["error"].split(":")[0] for e in failed)
    return {"ok": not failed and not wrong, "calls": len(events),
            "failed": len(failed), "failed_by_code": dict(by_code),
            "failed_examples": [f"{e['lane']} {e['op']}: {e['error']}" for e in failed[:10]],
            "wrong_answers": len(wrong),
            "wrong_examples": [p for e in wrong[:10] for p in e["problems"]],
            "replays": sum(e.get("replays", 0) for e in events)}


def new_exactly_once(events: Sequence[Dict[str, Any]], counts: Counter) -> Dict[str, Any]:
    """In the shared namespace (no releases) every fingerprint is new once."""
    shared = [e for e in events if e["op"] == "dedup_shared" and e["ok"]]
    listed = Counter(fp for e in shared for fp in e.get("new_fps", []))
    twice = [fp for fp, n in listed.items() if n > 1]
    reported = sum(listed.values()) + sum(e.get("unique_chunks", 0) for e in shared)
    distinct = sum(1 for n in counts.values() if n > 0)
    return {"ok": not twice and reported == distinct, "distinct_fingerprints": distinct,
            "reported_new": reported, "reported_new_twice": len(twice)}


def counts_exact(held: Dict[str, Dict[bytes, int]], counts: Dict[str, Counter],
                 tainted: Iterable[str]) -> Dict[str, Any]:
    """Redis holds exactly the model's counts: no entry missing, none extra,
    none off by one."""
    result: Dict[str, Any] = {"namespaces": 0, "fingerprints": 0, "missing": 0,
                              "extra": 0, "wrong": 0, "skipped_tainted": sorted(tainted)}
    for ns, want in counts.items():
        if ns in result["skipped_tainted"]:
            continue
        have = {fp.hex(): n for fp, n in held.get(ns, {}).items()}
        want_live = {fp: n for fp, n in want.items() if n > 0}
        result["namespaces"] += 1
        result["fingerprints"] += len(want_live)
        result["missing"] += sum(1 for fp in want_live if fp not in have)
        result["extra"] += sum(1 for fp in have if fp not in want_live)
        result["wrong"] += sum(1 for fp, n in want_live.items() if fp in have and have[fp] != n)
    result["ok"] = not (result["missing"] or result["extra"] or result["wrong"])
    return result


_SAMPLE = re.compile(r'^([a-z_]+)\{([^}]*)\} (\S+)$', re.MULTILINE)


def metric_totals(texts: Iterable[str]) -> Counter:
    """The counters the soak compares, summed over replicas: keyed by
    (name, label=value of interest)."""
    totals: Counter = Counter()
    for text in texts:
        for name, labels, value in _SAMPLE.findall(text):
            label = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            if label.get("grpc_service") == "chunkd.v1.ChunkService" and \
                    name in ("grpc_server_started_total", "grpc_server_handled_total"):
                totals[(name, "")] += float(value)  # in flight: started - handled
                if label.get("grpc_code") == "OK":
                    totals[("handled_ok", label["grpc_method"])] += float(value)
            elif name in ("chunkd_ingest_bytes_total", "chunkd_chunks_total"):
                totals[(name, label["rpc"])] += float(value)
            elif name == "chunkd_duplicate_chunks_total":
                totals[(name, "")] += float(value)
    return totals


def client_totals(events: Iterable[Dict[str, Any]]) -> Counter:
    totals: Counter = Counter()
    for e in events:
        if not e["ok"]:
            continue
        method = METHODS[e["op"]]
        totals[("handled_ok", method)] += 1
        if method in ("Chunk", "Dedup"):
            totals[("chunkd_ingest_bytes_total", method)] += e["bytes"]
            totals[("chunkd_chunks_total", method)] += e["chunks"]
        if method == "Dedup":
            totals[("chunkd_duplicate_chunks_total", "")] += e["dup_chunks"]
    return totals


def metrics_match(windows: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """In each quiet window (no fault, every lane paused at both ends) the
    replicas' counters grew by exactly what the clients counted."""
    mismatches = []
    for w in windows:
        server = Counter({k: v for k, v in (w["after"] - w["before"]).items()
                          if k[0] not in ("grpc_server_started_total",
                                          "grpc_server_handled_total")})
        server = Counter({k: v for k, v in server.items() if v})
        clients = Counter({k: v for k, v in w["clients"].items() if v})
        for key in sorted(set(server) | set(clients)):
            if server[key] != clients[key]:
                mismatches.append(f"window {w['index']}: {key[0]}{{{key[1]}}} server "
                                  f"{server[key]:.0f}, clients {clients[key]:.0f}")
    return {"ok": bool(windows) and not mismatches, "windows": len(windows),
            "calls_compared": sum(sum(v for k, v in w["clients"].items()
                                      if k[0] == "handled_ok") for w in windows),
            "mismatches": mismatches[:20]}


def _median_at(samples: Sequence[List[float]], column: int) -> float:
    return statistics.median(s[column] for s in samples)


def growth(samples: Sequence[List[float]]) -> Tuple[float, float, float, float]:
    """(seconds, rss, threads, fds growth) over the last two thirds of a
    life. Resident memory: the peak of the last third minus the peak of the
    third before, `seconds` (a third of the life) apart. chunkd gives memory
    back to the OS whenever its streams pause, so a median could compare a
    quiet moment with a busy one; a leak raises the peaks. Threads and
    descriptors: the median of the last tenth minus that of the tenth where
    the two thirds begin."""
    third = (samples[-1][0] - samples[0][0]) / 3
    begins = samples[0][0] + third  # where the last two thirds begin
    tail = [s for s in samples if s[0] >= begins]
    middle = [s for s in tail if s[0] < begins + third]
    last = [s for s in tail if s[0] >= begins + third]
    k = max(3, len(tail) // 10)
    return (third,
            max(s[1] for s in last) - max(s[1] for s in middle),
            _median_at(tail[-k:], 2) - _median_at(tail[:k], 2),
            _median_at(tail[-k:], 3) - _median_at(tail[:k], 3))


def _judge(s: Any) -> Dict[str, Any]:
    """One life's growth against the bounds; memory only for chunkd (Redis
    grows with the index, a client with its model)."""
    span, rss, threads, fds = growth(s.samples)
    rss_bound = max(1.0, span / 600) * RSS_GROWTH_PER_10_MIN
    judged_rss = s.role == "chunkd"
    ok = (rss <= rss_bound or not judged_rss) and fds <= FD_SLACK and threads <= THREAD_SLACK
    return {"life": s.life, "role": s.role, "judged": True, "seconds": round(span, 1),
            "rss_growth_mib": round(rss / 2**20, 2),
            "rss_bound_mib": round(rss_bound / 2**20, 2) if judged_rss else None,
            "rss_mib_per_10_min": round(rss / 2**20 * 600 / max(span, 1), 2),
            "peak_rss_mib": round(max(x[1] for x in s.samples) / 2**20, 1),
            "threads_growth": threads, "fds_growth": fds, "ok": ok}


def resources_flat(series: Dict[str, Any]) -> Dict[str, Any]:
    """Every process life of at least MIN_LIFE_SECONDS: threads and open
    descriptors flat; resident memory too for the replicas."""
    lives = []
    for _, s in sorted(series.items()):
        seconds = s.samples[-1][0] - s.samples[0][0] if s.samples else 0.0
        if seconds < MIN_LIFE_SECONDS:
            lives.append({"life": s.life, "role": s.role, "judged": False,
                          "seconds": round(seconds, 1)})
        else:
            lives.append(_judge(s))
    bad = [x["life"] for x in lives if x["judged"] and not x["ok"]]
    return {"ok": not bad and any(x["judged"] and x["role"] == "chunkd" for x in lives),
            "bounds": {"rss_mib_per_10_min": RSS_GROWTH_PER_10_MIN >> 20,
                       "fds": FD_SLACK, "threads": THREAD_SLACK,
                       "min_life_seconds": MIN_LIFE_SECONDS},
            "lives": lives, "failed": bad}
