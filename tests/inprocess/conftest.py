from __future__ import annotations

import pytest

from tests.inprocess_gateway import AppGateway


@pytest.fixture
def gw(gateway_in_process: AppGateway) -> AppGateway:
    """The in-process gateway under the name the integration tests use for theirs."""
    return gateway_in_process
