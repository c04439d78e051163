"""Secrets are scrubbed in every form a server can quote them in (`toolwire/scrub.py`): each
form below, put in an error as a server would, leaves nothing from which the secret can be read
back (`reveals` decodes every word every way the forms encode it)."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest

from tests.secret_forms import encodings, reveals
from toolwire.scrub import Scrubber

KEY = "sk-proj-Zx81Qa7TmL0p_Rw3Y-bN5cVd2E"
TOKEN = "mcp/tok+en=Zx81Qa7TmL0pRw3Y"  # an MCP credential with characters that get escaped


@pytest.mark.parametrize("secret", [KEY, TOKEN], ids=["upstream key", "MCP token"])
@pytest.mark.parametrize("form", list(encodings(KEY)))
def test_every_form_is_scrubbed(secret: str, form: str) -> None:
    quoted = encodings(secret)[form]
    for shape in (
        "Incorrect API key provided: {}. You can find your key at https://x/keys",
        '{{"error": {{"message": "invalid token", "headers": {{"Authorization": "{}"}}}}}}',
        "Traceback (most recent call last):\n  auth={}\nValueError",
    ):
        text = shape.format(quoted)
        assert reveals(text, secret), f"the test's own check misses {form}"
        scrubbed = Scrubber([KEY, TOKEN]).text(text)
        assert not reveals(scrubbed, secret), (form, scrubbed)
        assert "<redacted>" in scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "a normal sk- error with sk and 1234",
        "request id req_8f14e45fceea167a5a36dedd4bea2543, trace 4bf92f3577b34da6a3ce929d0e0e4736",
        "Basic " + base64.b64encode(b"user:another-secret-entirely").decode(),
        "the model 'Qwen/Qwen2.5-7B-Instruct' is not served here (HTTP 404)",
    ],
)
def test_other_text_is_left_alone(text: str) -> None:
    assert Scrubber([KEY, TOKEN]).text(text) == text


def test_no_secrets_cost_nothing() -> None:
    scrub: Callable[[str], str] = Scrubber([None, "", "short"]).text
    assert scrub(KEY) == KEY
