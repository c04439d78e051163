"""`toolwire serve --workers N`: N server processes on one port and one database.

Why processes: one Python process serves on one core; a gateway on a many-core machine needs
several. Each worker is a whole server (its own event loop, upstream pool, database pool) and a
replica for the durability leases (server/responses/durable.py), exactly as separate `toolwire
serve` processes on the same database would be. They share the port with `SO_REUSEPORT` (the kernel
spreads new connections over the workers) and their metrics with `prometheus_client`'s multiprocess
mode (`PROMETHEUS_MULTIPROC_DIR`): `/metrics` on any worker sums all of them.

This parent process only prepares the database (migrations, shared secrets: once, not raced by
N workers), starts the workers (spawned: fresh interpreters that read the metrics directory at
import), restarts one that dies, and stops them all on SIGINT / SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import time
from multiprocessing.process import BaseProcess
from typing import Any

from toolwire.config import ServerConfig
from toolwire.errors import ConfigError

log = logging.getLogger("toolwire.server")

#: A worker that exits this soon after it started failed to start: restarting would loop.
_START_GRACE_SECONDS = 10.0


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A listening socket other workers can bind too (the kernel balances connections)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only when the
    # socket's proto says TCP (else Nagle delays small SSE writes behind delayed ACKs).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


async def _prepare(config: ServerConfig) -> None:
    from toolwire.store.database import Store

    store = await Store.open(config.db, migrate=config.migrate)
    try:
        await store.secret("approval_requests")
    finally:
        await store.close()


def _worker(config: ServerConfig, metrics_dir: str, target: str) -> None:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir  # before prometheus_client is imported
    module, _, name = target.partition(":")
    run = getattr(importlib.import_module(module), name)
    with contextlib.suppress(KeyboardInterrupt):
        run(config, reuse_port=True)


def run_workers(config: ServerConfig, target: str) -> None:
    """Supervise `config.workers` processes, each running `target` ("module:function", called
    as `function(config, reuse_port=True)`). As uvicorn's supervisor is handed its app, this
    one is handed what to run by name: imported in the worker, after the metrics directory is
    set, and with no import back into the module that started it."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise ConfigError("--workers needs SO_REUSEPORT (Linux, macOS, BSD)")
    if not config.upstream:
        raise ConfigError("--workers needs --upstream: the managed local model runs in one process")
    asyncio.run(_prepare(config))
    # Held (bound, never listening: it gets no connections) so that port 0 picks one port for
    # every worker and nothing else takes it between workers.
    holder = reuse_port_socket(config.host, config.port)
    config = config.model_copy(update={"port": holder.getsockname()[1], "migrate": False})
    own_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR") is None
    metrics_dir = (
        tempfile.mkdtemp(prefix="toolwire-metrics-")
        if own_dir
        else os.environ["PROMETHEUS_MULTIPROC_DIR"]
    )
    context = multiprocessing.get_context("spawn")
    workers: dict[int, tuple[BaseProcess, float]] = {}

    def start(slot: int) -> None:
        process = context.Process(
            target=_worker, args=(config, metrics_dir, target), name=f"toolwire-worker-{slot}"
        )
        process.start()
        workers[slot] = (process, time.monotonic())

    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for slot in range(config.workers):
            start(slot)
        log.warning(
            "toolwire serving on http://%s:%d with %d workers",
            config.host,
            config.port,
            config.workers,
        )
        while not stopping:
            time.sleep(0.2)
            for slot, (process, started) in list(workers.items()):
                if process.is_alive() or stopping:
                    continue
                _mark_dead(process.pid, metrics_dir)
                if time.monotonic() - started < _START_GRACE_SECONDS:
                    raise ConfigError(
                        f"worker {slot} exited with {process.exitcode} while starting"
                    )
                log.warning("worker %d exited with %s: restarting it", slot, process.exitcode)
                start(slot)
    finally:
        for process, _ in workers.values():
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        for process, _ in workers.values():
            process.join(15)
            if process.is_alive():
                process.kill()
                process.join(5)
            _mark_dead(process.pid, metrics_dir)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        holder.close()
        if own_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _mark_dead(pid: int | None, metrics_dir: str) -> None:
    """Drop a dead worker's live gauges (counters and histograms keep its counts)."""
    if pid is None:
        return
    from prometheus_client import multiprocess

    with contextlib.suppress(OSError):
        multiprocess.mark_process_dead(pid, metrics_dir)  # type: ignore[no-untyped-call]
