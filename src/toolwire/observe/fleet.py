"""A fleet's per-upstream state in `/metrics`, read from the router when scraped (a gauge
set on every change would cost the hot path; a scrape is rare). One series per configured
upstream: operator configuration bounds the label's values.

- `toolwire_upstream_state{upstream}`: 0 closed (taking calls), 1 half-open (one trial call),
  2 open (taken out);
- `toolwire_upstream_outstanding{upstream}`: model calls in flight to it from this process;
- `toolwire_upstream_error_rate{upstream}`: failed calls over calls, last minute;
- `toolwire_upstream_ttft_average_seconds{upstream}`: moving average time to first token;
- `toolwire_upstream_requests_total{upstream}` / `toolwire_upstream_failures_total{upstream}`:
  model calls sent to it, and those it failed (refused, timed out, 502/503/504, 429, cut).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from toolwire.upstream.fleet.health import STATE_VALUES, CircuitState
from toolwire.upstream.fleet.router import ReplicaStatus

Source = Callable[[], Sequence[ReplicaStatus]]


class FleetCollector(Collector):
    """Collects from the router it watches (the latest `watch_fleet`); none: nothing."""

    def __init__(self) -> None:
        self.source: Source | None = None

    def collect(self) -> Iterable[Metric]:
        source = self.source
        if source is None:
            return []
        rows = source()
        labels = ["upstream"]
        state = GaugeMetricFamily(
            "toolwire_upstream_state",
            "Circuit state of each upstream: 0 closed, 1 half-open, 2 open",
            labels=labels,
        )
        outstanding = GaugeMetricFamily(
            "toolwire_upstream_outstanding", "Model calls in flight to each upstream", labels=labels
        )
        error_rate = GaugeMetricFamily(
            "toolwire_upstream_error_rate",
            "Failed calls over calls of each upstream, last minute",
            labels=labels,
        )
        ttft = GaugeMetricFamily(
            "toolwire_upstream_ttft_average_seconds",
            "Moving average time to first token of each upstream",
            labels=labels,
        )
        requests = CounterMetricFamily(
            "toolwire_upstream_requests", "Model calls sent to each upstream", labels=labels
        )
        failures = CounterMetricFamily(
            "toolwire_upstream_failures",
            "Model calls each upstream failed (refused, timed out, 502/503/504, 429, cut)",
            labels=labels,
        )
        for row in rows:
            name = [row.name]
            state.add_metric(name, STATE_VALUES[CircuitState(row.state)])
            outstanding.add_metric(name, row.outstanding)
            error_rate.add_metric(name, row.error_rate)
            if row.ttft is not None:
                ttft.add_metric(name, row.ttft)
            requests.add_metric(name, row.calls)
            failures.add_metric(name, row.failures)
        return [state, outstanding, error_rate, ttft, requests, failures]


COLLECTOR = FleetCollector()
REGISTRY.register(COLLECTOR)


def watch_fleet(source: Source) -> None:
    """Export the state `source` (a router's `status`) reports from now on."""
    COLLECTOR.source = source


def add_to(registry: CollectorRegistry) -> None:
    """Also into a registry of its own (the multiprocess one: each worker's own view)."""
    registry.register(COLLECTOR)
