"""`observe/metrics.py`'s in-place updates (what `toolwire serve` turns on): the exposition
they give is prometheus_client's own, value for value, bucket edges included."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import values as prometheus_values

from toolwire.observe import metrics

# bucket edges exactly, between them, zero, past the last bound
VALUES = [0.0, 0.005, 0.0051, 0.01, 0.3, 1, 2.5, 299.9, 300, 301, 1e9, 0.024999]


def counted(in_place: bool) -> bytes:
    registry = CollectorRegistry()
    counter = Counter("calls", "", ["upstream"], registry=registry)
    histogram = Histogram(
        "call_seconds", "", ["upstream"], buckets=metrics._LATENCY, registry=registry
    )
    assert metrics.update_in_place(in_place) is in_place
    try:
        for value in VALUES:
            metrics.add(counter.labels("a"), value)
            metrics.add(counter.labels("b"))
            metrics.observe(histogram.labels("a"), value)
            # a request's three updates at once; one without a first byte
            metrics.request_done(
                counter.labels("r"), histogram.labels("r"), histogram.labels("t"), value, value
            )
            metrics.request_done(
                counter.labels("r"), histogram.labels("r"), histogram.labels("t"), value, None
            )
    finally:
        metrics.update_in_place(False)
    lines = generate_latest(registry).splitlines()
    return b"\n".join(line for line in lines if b"_created" not in line)  # when it was made


def test_in_place_updates_expose_what_prometheus_client_counts() -> None:
    exposed = counted(True)
    assert exposed == counted(False)
    assert b'call_seconds_bucket{le="0.005",upstream="a"} 2.0' in exposed
    assert b'calls_total{upstream="b"} 12.0' in exposed
    assert b'calls_total{upstream="r"} 24.0' in exposed
    assert b'call_seconds_count{upstream="t"} 12.0' in exposed


def test_not_in_place_with_shared_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several workers (`PROMETHEUS_MULTIPROC_DIR`) keep their values in files."""
    monkeypatch.setattr(prometheus_values, "ValueClass", object)
    assert metrics.update_in_place() is False
    assert metrics._in_place is False
