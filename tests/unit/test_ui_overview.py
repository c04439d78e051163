"""The `/ui` overview's arithmetic (`server/operator/ui/overview.py`) on hand-made timelines."""

from __future__ import annotations

from typing import Any

from toolwire.server.operator.ui.overview import bucket_width, overview, percentile
from toolwire.server.operator.ui.routes import without_server


def run(created_at: int, *entries: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {
        "id": f"resp_{created_at}",
        "created_at": created_at,
        "status": status,
        "owner": None,
        "model": "m",
        "usage": {"input_tokens": 10, "output_tokens": 5},
        "entries": list(entries),
    }


def finished(t: float, reason: str = "answered", code: str | None = None) -> dict[str, Any]:
    return {"type": "finished", "t": t, "reason": reason, "code": code}


def test_leaks_recovered_given_up_and_limits_are_not_upstream_failures() -> None:
    runs = [
        # asked again twice, then the model called properly: one recovery
        run(
            0,
            {"type": "leak", "action": "retry"},
            {"type": "leak", "action": "retry"},
            finished(1.0),
        ),
        run(60, {"type": "leak", "action": "salvaged"}, finished(2.0)),
        run(
            120,
            {"type": "leak", "action": "retry"},
            {"type": "leak", "action": "gave_up"},
            finished(3.0),
        ),
        run(180, {"type": "repair", "kind": "id_churn"}, {"type": "tool_rejected"}, finished(4.0)),
        run(240, finished(0.1, "upstream_error", "rate_limit_exceeded"), status="failed"),
        run(
            300,
            {"type": "upstream_retry", "cause": "http_503"},
            finished(5.0, "upstream_error"),
            status="failed",
        ),
    ]
    summary = overview(runs, 0, 3600, "gpu")
    total = summary["total"]
    assert total["leaks_recovered"] == 2 and total["leaks_given_up"] == 1
    assert total["repairs_by_kind"] == {"id_churn": 1} and total["malformed_refused"] == 1
    assert total["retries_by_cause"] == {"http_503": 1}
    assert total["upstream_failures"] == 1 and total["refused_by_limits"] == 1
    assert total["failed"] == 2 and total["input_tokens"] == 60
    assert total["latency_p50"] == 2.0 and total["latency_p95"] == 5.0
    assert summary["by_model"][0]["upstream"] == "gpu"
    assert summary["bucket_seconds"] == 60
    assert summary["series"]["responses"][:6] == [1, 1, 1, 1, 1, 1]


def test_percentiles_and_bucket_widths() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([float(n) for n in range(1, 101)], 0.95) == 95.0
    assert bucket_width(0, 3600) == 60
    assert bucket_width(0, 86400) == 3600
    assert bucket_width(0, 30 * 86400) == 86400
    # found by schemathesis: since=0, until=2**62 asked for 7.6 billion weekly buckets
    huge = overview([run(5)], 0, 2**62 - 1, "gpu")
    assert len(huge["series"]["t"]) <= 61 and huge["total"]["responses"] == 1


def test_a_tenant_is_not_told_which_model_server_of_the_fleet_served_it() -> None:
    served = run(5, {"type": "model_call", "upstream": "10.0.0.5:8000", "routed": "session"})
    runs = [served]
    for_operator = overview(runs, 0, 3600, "fleet")["by_model"]
    for_tenant = overview(runs, 0, 3600, "fleet", servers=False)["by_model"]
    assert [row["upstream"] for row in for_operator] == ["10.0.0.5:8000"]
    assert [row["upstream"] for row in for_tenant] == ["fleet"]
    entries = [without_server(entry) for entry in served["entries"]]
    assert entries == [{"type": "model_call", "routed": "session"}]
