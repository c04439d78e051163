"""The benchmark report's bound on `--workers 2` when its workers share the machine's cores
with the load (benchmarks/report.py): the figure issue #38's MISSED.md rests on."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import report


def results(*, rps: float, worker_s: float, load_s: float, requests: int, cores: int) -> Any:
    one = {"rps": rps, "requests": requests, "cpu_seconds": worker_s, "load_cpu_seconds": load_s}
    two = {"rps": rps * 1.5, "requests": requests}
    return {
        "machine": {"usable_cpus": cores},
        "settings": {"pinning": {"gateways": [0], "client": [1], "mock": [1], "workers": []}},
        "c": {"64": {"toolwire": one, "toolwire-workers": two}},
    }


def test_two_shared_cores_bound_the_ratio_by_the_loads_share() -> None:
    # one worker: 300 µs a request, saturating its core (1/300 µs = 3333 req/s); the load
    # 100 µs a request besides: two shared cores serve at most 2 / 400 µs = 5000 req/s
    run = results(rps=1e6 / 300, worker_s=3.0, load_s=1.0, requests=10_000, cores=2)
    bound, load_us, worker_us, cores = report.shared_workers_bound(run, "64") or (0, 0, 0, 0)
    assert (load_us, worker_us, cores) == pytest.approx((100, 300, 2))
    assert bound == pytest.approx(1.5)


def test_a_load_that_costs_nothing_leaves_two_workers_their_two_cores() -> None:
    run = results(rps=1e6 / 300, worker_s=3.0, load_s=1e-9, requests=10_000, cores=4)
    bound = report.shared_workers_bound(run, "64")
    assert bound is not None and bound[0] == pytest.approx(2.0)


def test_no_bound_without_the_loads_cpu() -> None:
    run = results(rps=3000, worker_s=3.0, load_s=0.0, requests=10_000, cores=2)
    assert report.shared_workers_bound(run, "64") is None


def test_the_target_row_names_the_bound_when_unpinned() -> None:
    run = results(rps=1e6 / 300, worker_s=3.0, load_s=1.0, requests=10_000, cores=2)
    _, figure, how, met = report.workers_row(run, "64")
    assert (figure, met) == ("1.50×", False)
    assert "**1.50×** what one worker served" in how
    run["settings"]["pinning"]["workers"] = [0, 3]
    assert "2 cores of their own" in report.workers_row(run, "64")[2]
