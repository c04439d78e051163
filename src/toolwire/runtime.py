"""What every door runs on, composed once (`server/main.py` `compose`) and handed to each wing of
the server: the upstream stack, the driver on it, the store, the codecs, the loop settings, the
server-side tools. A wing takes what it needs from here and never reaches into another wing's
service for it; shutting the runtime down closes what it opened, in order."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from toolwire.config import McpServerConfig, WebSearchConfig
from toolwire.loop.approvals import ApprovalSigner
from toolwire.loop.compaction import CompactionCodec
from toolwire.loop.driver import LoopDriver
from toolwire.loop.state import LoopSettings
from toolwire.store.database import Store
from toolwire.store.timelines import TimelineStore
from toolwire.tools.base import Tool
from toolwire.tools.mcp.pool import McpPool
from toolwire.upstream.base import Upstream

log = logging.getLogger("toolwire.server")

Closer = Callable[[], Awaitable[None]]


@dataclass(slots=True, eq=False)
class Runtime:
    store: Store
    upstream: Upstream
    """The stack every model call of every door goes through: the adapter, wrapped by the
    per-key quota reservation."""
    driver: LoopDriver
    signer: ApprovalSigner
    """Approval requests issued here, verified when a later request answers them."""
    compaction: CompactionCodec
    """Sealed `compaction` items (`loop/compaction.py`)."""
    timelines: TimelineStore
    """Run timelines for `/ui`, written in a response's final transaction."""
    loop_settings: LoopSettings = field(default_factory=LoopSettings)
    default_model: str | None = None
    server_tools: list[Tool] = field(default_factory=list)
    mcp_pool: McpPool = field(default_factory=McpPool)
    mcp_servers: list[McpServerConfig] = field(default_factory=list)
    mcp_call_timeout: float = 60.0
    web_search: WebSearchConfig | None = None
    closers: list[Closer] = field(default_factory=list)
    """Run by `aclose`, in order, after the MCP pool and the upstream stack."""
    _closed: bool = False

    async def aclose(self) -> None:
        """Close what the runtime holds, once: MCP sessions, the upstream stack (the quota
        wrapper waits for pending settlements first), then the `closers` (the store, the local
        model, the exporters). One failing does not keep the others open."""
        if self._closed:
            return
        self._closed = True
        for close in (self.mcp_pool.close, self.upstream.aclose, *self.closers):
            try:
                await close()
            except Exception:
                log.warning("shutting down: %r failed", close, exc_info=True)
