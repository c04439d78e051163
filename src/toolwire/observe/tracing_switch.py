"""Whether OpenTelemetry tracing is asked for (`OTEL_*`), answered without importing it: a
serving process with tracing off never loads the SDK (~4 MB and ~100 modules,
benchmarks/STACK.md)."""

from __future__ import annotations

import os


def tracing_requested(env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ) if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    if exporter in ("otlp", "console"):
        return True
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
