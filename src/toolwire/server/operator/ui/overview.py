"""What toolwire did, over a time range, aggregated from the stored runs and their timelines
(`observe/timeline.py` entries): repairs by kind, leaked calls recovered and given up,
malformed calls refused, upstream retries and failures, tokens, latency percentiles; in
total, per model and upstream, and per time bucket for the charts.

Read from the database, not from this process's Prometheus counters, so every replica's runs
count and a restart loses nothing. A pure function of the rows: the store reads them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from toolwire.store.records import UiRun

#: A run refused by its key's limits at a model call (server/gate/quotas.py): not the upstream's
#: failure.
LIMIT_CODES = frozenset({"rate_limit_exceeded", "insufficient_quota"})
#: How many points a chart gets at most.
BUCKETS = 60
#: Bucket widths the range is cut into (seconds): the smallest giving at most BUCKETS.
WIDTHS = (60, 300, 900, 3600, 3 * 3600, 6 * 3600, 86400, 7 * 86400)


def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) by the nearest-rank method; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return round(ordered[rank - 1], 6)


def bucket_width(since: int, until: int) -> int:
    """The smallest of WIDTHS giving at most BUCKETS buckets; beyond them, span / BUCKETS
    (a range of years still draws BUCKETS points)."""
    span = max(until - since, 1)
    return next((w for w in WIDTHS if span / w <= BUCKETS), math.ceil(span / BUCKETS))


class _Tally:
    """The counts of one group (everything, a model and upstream, or a time bucket)."""

    __slots__ = (
        "failed",
        "given_up",
        "input_tokens",
        "latency",
        "limited",
        "output_tokens",
        "recovered",
        "refused",
        "repairs",
        "responses",
        "retries",
        "ttft",
        "upstream_failures",
    )

    def __init__(self) -> None:
        self.responses = 0
        self.failed = 0
        self.upstream_failures = 0
        self.limited = 0
        self.repairs: Counter[str] = Counter()
        self.recovered = 0
        self.given_up = 0
        self.refused = 0
        self.retries: Counter[str] = Counter()
        self.input_tokens = 0
        self.output_tokens = 0
        self.latency: list[float] = []
        self.ttft: list[float] = []

    def add(self, run: UiRun) -> None:
        self.responses += 1
        if run["status"] == "failed":
            self.failed += 1
        usage = run["usage"]
        if usage is not None:
            self.input_tokens += int(usage.get("input_tokens") or 0)
            self.output_tokens += int(usage.get("output_tokens") or 0)
        leaks = gave_up = 0
        for entry in run["entries"]:
            kind = entry.get("type")
            if kind == "repair":
                self.repairs[str(entry.get("kind"))] += 1
            elif kind == "arguments_repaired":  # a call made to fit its tool's schema
                self.repairs[f"arguments_{entry.get('kind')}"] += 1
            elif kind == "arguments_misfit" and entry.get("action") == "retry":
                self.repairs["arguments_reasked"] += 1
            elif kind == "leak":
                if entry.get("action") == "gave_up":
                    gave_up += 1
                elif entry.get("action") == "salvaged":
                    self.recovered += 1
                else:
                    leaks += 1
            elif kind == "tool_rejected":
                self.refused += 1
            elif kind == "upstream_retry":
                self.retries[str(entry.get("cause"))] += 1
            elif kind == "model_call" and isinstance(entry.get("ttft"), int | float):
                self.ttft.append(float(entry["ttft"]))
            elif kind == "finished":
                if isinstance(entry.get("t"), int | float):
                    self.latency.append(float(entry["t"]))
                if entry.get("reason") == "upstream_error":
                    if entry.get("code") in LIMIT_CODES:
                        self.limited += 1
                    else:
                        self.upstream_failures += 1
        self.given_up += gave_up
        if leaks and not gave_up:
            self.recovered += 1  # asked again, and the model then called the tool properly

    def summary(self) -> dict[str, Any]:
        return {
            "responses": self.responses,
            "failed": self.failed,
            "upstream_failures": self.upstream_failures,
            "refused_by_limits": self.limited,
            "repairs": sum(self.repairs.values()),
            "repairs_by_kind": dict(self.repairs.most_common()),
            "leaks_recovered": self.recovered,
            "leaks_given_up": self.given_up,
            "malformed_refused": self.refused,
            "retries": sum(self.retries.values()),
            "retries_by_cause": dict(self.retries.most_common()),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "latency_p50": percentile(self.latency, 0.5),
            "latency_p95": percentile(self.latency, 0.95),
            "latency_p99": percentile(self.latency, 0.99),
            "ttft_p50": percentile(self.ttft, 0.5),
            "ttft_p95": percentile(self.ttft, 0.95),
        }


def overview(
    runs: Iterable[UiRun], since: int, until: int, upstream: str, *, servers: bool = True
) -> dict[str, Any]:
    """The totals, the per model and upstream table, and the time series of the range.
    `upstream`: the name of the upstream this server calls, for runs whose timeline names
    none (a fleet's runs name the model server of their last model call). `servers`: name
    those model servers (operators); else every run counts under `upstream` (a tenant is not
    told the fleet's servers)."""
    width = bucket_width(since, until)
    first = since // width * width
    total = _Tally()
    groups: dict[tuple[str, str], _Tally] = {}
    buckets: dict[int, _Tally] = {}
    for run in runs:
        total.add(run)
        model = str(run.get("model") or "?")
        served = (_served_by(run) if servers else None) or upstream
        groups.setdefault((model, served), _Tally()).add(run)
        start = run["created_at"] // width * width
        buckets.setdefault(start, _Tally()).add(run)
    series_at = list(range(first, until + 1, width))
    empty = _Tally().summary()
    points = [buckets[t].summary() if t in buckets else empty for t in series_at]
    return {
        "since": since,
        "until": until,
        "bucket_seconds": width,
        "total": total.summary(),
        "by_model": [
            {"model": model, "upstream": name, **tally.summary()}
            for (model, name), tally in sorted(groups.items(), key=lambda g: -g[1].responses)
        ],
        "series": {
            "t": series_at,
            **{
                name: [p[name] for p in points]
                for name in (
                    "responses",
                    "failed",
                    "repairs",
                    "leaks_recovered",
                    "leaks_given_up",
                    "malformed_refused",
                    "retries",
                    "input_tokens",
                    "output_tokens",
                    "latency_p50",
                    "latency_p95",
                )
            },
        },
    }


def _served_by(run: UiRun) -> str | None:
    """The model server of the run's last model call, when a fleet's router named it."""
    for entry in reversed(run["entries"]):
        if entry.get("type") == "model_call" and entry.get("upstream"):
            return str(entry["upstream"])
    return None
