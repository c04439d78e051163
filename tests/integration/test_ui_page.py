"""The `/ui` operator page in Debian's headless Chromium, against a real `toolwire serve` with
keys made by `toolwire keys create` (an operator, two tenants), at 1400×900: the sign-in
screen, the overview's charts (non-blank canvases, checked in the screenshot's pixels too),
the responses list (fits the window, true count, paging, text filter, live refresh), a run
page with its deep link and raw JSON, a conversation's messages, the keys page, and a
tenant's narrower view. `TOOLWIRE_UI_SHOTS=DIR` keeps the screenshots there (the one in
docs/images/ was made so)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.integration.cdp import CHROMIUM, Browser
from tests.integration.conftest import Gateway, running_gateway
from tests.integration.test_observe import LEAKED, corpus_turn, whole_call
from toolwire.testing import Body, Reply

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"
)
WIDTH, HEIGHT = 1400, 900


def make_key(db: Path, name: str, *options: str) -> str:
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolwire",
            "keys",
            "create",
            name,
            "--db",
            f"sqlite:///{db}",
            *options,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return made.stdout.strip()


@dataclass
class Site:
    gateway: Gateway
    base: str
    operator: str
    red: str
    blue: str
    red_ids: list[str]
    repaired: str
    conversation: str

    def post(self, key: str, body: dict[str, object], path: str = "/v1/responses") -> dict:
        answer = httpx.post(
            self.base + path, json=body, headers={"authorization": f"Bearer {key}"}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        return dict(answer.json())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    db = tmp_path_factory.mktemp("ui") / "toolwire.db"
    operator = make_key(db, "ops", "--operator")
    red = make_key(db, "red", "--rpm", "1000", "--tpm", "200000", "--budget", "100000")
    blue = make_key(db, "blue", "--budget", "50000", "--budget-period", "day")
    with running_gateway(db) as gateway:
        base = gateway.base_url.removesuffix("/v1")
        site = Site(gateway, base, operator, red, blue, [], "", "")
        gateway.reset()
        # what toolwire did: a retried 503, a repaired stream, a leaked call asked again
        gateway.upstream.add(
            Body({"error": {"message": "busy"}}, status=503, headers={"retry-after": "0"}),
            corpus_turn("23_lmdeploy_id_churn.json"),
            Reply(text=LEAKED),
            Reply(text="Paris is sunny.", usage={"prompt_tokens": 30, "completion_tokens": 9}),
        )
        site.repaired = str(site.post(red, {"model": "scripted-model", "input": "weather?"})["id"])
        gateway.upstream.add(
            whole_call("get_weather", {"city": "Oslo"}), Reply(text="Oslo is cold.")
        )
        site.post(blue, {"model": "scripted-model", "input": "weather in Oslo"})
        gateway.upstream.default = Reply(
            text="fine", usage={"prompt_tokens": 12, "completion_tokens": 4}
        )
        for i in range(60):
            site.red_ids.append(
                str(site.post(red, {"model": "scripted-model", "input": f"red question {i}"})["id"])
            )
        for i in range(59):
            model = "scripted-model" if i % 3 else "other-model"
            site.post(blue, {"model": model, "input": f"blue question {i}\nmore text"})
        conversation = site.post(
            blue,
            {"items": [{"type": "message", "role": "user", "content": "Plan a trip to Lisbon"}]},
            "/v1/conversations",
        )
        site.conversation = str(conversation["id"])
        site.post(
            blue,
            {"model": "scripted-model", "conversation": site.conversation, "input": "and Porto?"},
        )
        yield site
        gateway.upstream.default = None


@pytest.fixture
def browser() -> Iterator[Browser]:
    browser = Browser()
    browser.send(
        "Emulation.setDeviceMetricsOverride",
        width=WIDTH,
        height=HEIGHT,
        deviceScaleFactor=1,
        mobile=False,
    )
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    kept = os.environ.get("TOOLWIRE_UI_SHOTS")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        return Path(kept)
    return tmp_path_factory.mktemp("shots")


def sign_in(browser: Browser, key: str) -> None:
    browser.wait_for("!document.getElementById('signin').hidden")
    browser.evaluate(
        f"document.getElementById('api-key').value = {json.dumps(key)};"
        "document.getElementById('key-form').requestSubmit(); true"
    )
    browser.wait_for("document.getElementById('signin').hidden")


def fits(browser: Browser) -> None:
    """No sideways scroll at 1400 px: the document is no wider than the window."""
    width = browser.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"the page is {width} px wide in a {WIDTH} px window"


def rect(browser: Browser, selector: str) -> dict[str, float]:
    return dict(
        browser.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; })()"
        )
    )


def inked(image: object, box: dict[str, float]) -> float:
    """The share of a region's pixels that are not (near) white: drawn on."""
    from PIL import Image

    assert isinstance(image, Image.Image)
    x, y = int(box["x"]), int(box["y"])
    region = image.convert("RGB").crop((x, y, x + int(box["w"]), y + int(box["h"])))
    pixels = list(region.get_flattened_data())
    drawn = sum(1 for r, g, b in pixels if min(r, g, b) < 235)
    return drawn / max(len(pixels), 1)


def colored(image: object, box: dict[str, float]) -> int:
    """How many of a region's pixels are saturated colour (chart series, not grey text)."""
    from PIL import Image

    assert isinstance(image, Image.Image)
    x, y = int(box["x"]), int(box["y"])
    region = image.convert("RGB").crop((x, y, x + int(box["w"]), y + int(box["h"])))
    return sum(1 for r, g, b in region.get_flattened_data() if max(r, g, b) - min(r, g, b) > 60)


def screenshot(browser: Browser, path: Path) -> object:
    from PIL import Image

    browser.screenshot(path)
    image = Image.open(path)
    assert image.size == (WIDTH, HEIGHT)
    return image


def test_sign_in_screen_instead_of_an_api_error(site: Site, browser: Browser, shots: Path) -> None:
    browser.navigate(site.base + "/ui")
    browser.wait_for("!document.getElementById('signin').hidden")
    text = browser.evaluate("document.body.innerText")
    assert "Sign in to toolwire" in text
    assert "Authorization" not in text and "Bearer" not in text
    image = screenshot(browser, shots / "signin.png")
    card = rect(browser, "#signin .card")
    assert inked(image, card) > 0.02  # the card's text and field are drawn
    # a wrong key: still the sign-in screen, saying so
    browser.evaluate(
        "document.getElementById('api-key').value = 'tw-wrong';"
        "document.getElementById('key-form').requestSubmit(); true"
    )
    browser.wait_for("document.getElementById('signin-why').textContent.includes('not accepted')")
    assert not browser.evaluate("document.getElementById('signin').hidden")


def test_overview_charts_what_toolwire_fixed(site: Site, browser: Browser, shots: Path) -> None:
    browser.navigate(site.base + "/ui")
    sign_in(browser, site.operator)
    browser.wait_for("document.querySelectorAll('.chart canvas').length === 4")
    browser.wait_for("document.querySelectorAll('#by-model tbody tr').length >= 2")
    stats = browser.evaluate("document.getElementById('stats').innerText")
    assert "stream repairs" in stats and "upstream retries" in stats
    numbers = browser.evaluate(
        "Object.fromEntries([...document.querySelectorAll('.stat')]"
        ".map(s => [s.querySelector('span').textContent, s.querySelector('b').textContent]))"
    )
    assert int(numbers["stream repairs"]) >= 2  # the id churn and the whole-call delta
    assert int(numbers["upstream retries"]) >= 1
    assert int(numbers["leaked calls recovered"]) >= 1
    # every chart canvas has something drawn on it (read back from the canvas itself)
    drawn = browser.evaluate(
        "[...document.querySelectorAll('.chart canvas')].map(c => {"
        " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; })"
    )
    assert all(n > 500 for n in drawn), drawn
    models = browser.evaluate(
        "[...document.querySelectorAll('#by-model tbody tr')].map(r => r.cells[0].textContent)"
    )
    assert set(models) == {"scripted-model", "other-model"}
    fits(browser)
    browser.evaluate("window.scrollTo(0, 0); true")
    # two animation frames: what the page drew is painted before the screenshot
    browser.evaluate(
        "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"
    )
    image = screenshot(browser, shots / "overview.png")
    for chart in ("#chart-fixed", "#chart-runs", "#chart-tokens", "#chart-latency"):
        box = rect(browser, chart)
        assert box["x"] + box["w"] <= WIDTH and box["y"] + box["h"] <= HEIGHT, (chart, box)
        assert colored(image, box) > 150, f"{chart} looks blank in the screenshot"
    docs = Path(__file__).parents[2] / "docs" / "images" / "ui-overview.png"
    if os.environ.get("TOOLWIRE_UI_DOCS_SHOT"):
        from PIL import Image

        assert isinstance(image, Image.Image)
        docs.parent.mkdir(exist_ok=True)
        image.convert("RGB").quantize(64).save(docs, optimize=True)


def test_responses_list_fits_counts_pages_filters_and_refreshes(
    site: Site, browser: Browser, shots: Path
) -> None:
    browser.navigate(site.base + "/ui#/responses")
    sign_in(browser, site.operator)
    browser.wait_for("document.querySelectorAll('#responses tbody tr[data-id]').length === 50")
    info = browser.evaluate("document.getElementById('page-info').textContent")
    total = int(info.split(" of ")[1].split()[0].replace(",", ""))
    assert info.startswith("1–50 of ") and total >= 122, info
    fits(browser)
    # every column, status and tokens included, ends inside the window
    right = browser.evaluate(
        "Math.max(...[...document.querySelectorAll('#responses thead th')]"
        ".filter(th => th.offsetParent).map(th => th.getBoundingClientRect().right))"
    )
    assert right <= WIDTH
    first_input = browser.evaluate(
        "document.querySelector('#responses tbody tr').cells[1].textContent"
    )
    assert first_input.startswith("and Porto?") or "question" in first_input
    image = screenshot(browser, shots / "responses.png")
    assert inked(image, rect(browser, "#responses")) > 0.03
    # paging: the next page, then the last
    browser.evaluate("document.getElementById('next').click(); true")
    browser.wait_for("document.getElementById('page-info').textContent.startsWith('51–100 of')")
    # the text filter
    browser.evaluate(
        "document.getElementById('f-q').value = 'red question 42';"
        "document.getElementById('filters').requestSubmit(); true"
    )
    browser.wait_for("document.getElementById('page-info').textContent === '1–1 of 1 responses'")
    browser.evaluate(
        "document.getElementById('f-q').value = '';"
        "document.getElementById('filters').requestSubmit(); true"
    )
    browser.wait_for(
        f"document.getElementById('page-info').textContent.endsWith('of {total} responses')"
    )
    # live: a response made elsewhere appears without a reload
    made = site.post(site.red, {"model": "scripted-model", "input": "arrived while watching"})
    browser.wait_for(
        f"!!document.querySelector('#responses tr[data-id=\"{made['id']}\"]')", timeout=20
    )
    assert browser.evaluate("document.getElementById('page-info').textContent").endswith(
        f"of {total + 1} responses"
    )


def test_run_page_deep_link_raw_json_and_conversation(
    site: Site, browser: Browser, shots: Path
) -> None:
    browser.navigate(site.base + "/ui")
    sign_in(browser, site.operator)
    browser.navigate(f"{site.base}/ui#/responses/{site.repaired}")
    browser.wait_for("document.querySelectorAll('[data-testid=timeline] li').length > 0")
    kinds = browser.evaluate(
        "[...document.querySelectorAll('[data-testid=timeline] li')].map(li => li.dataset.type)"
    )
    assert {"model_call", "upstream_retry", "repair", "leak", "finished"} <= set(kinds), kinds
    detail = browser.evaluate("document.getElementById('detail').innerText")
    assert "weather?" in detail and "Paris is sunny." in detail and "red" in detail
    link = browser.evaluate("document.querySelector('[data-testid=deep-link]').href")
    assert link.endswith(f"/ui#/responses/{site.repaired}")
    browser.evaluate("[...document.querySelectorAll('.tabs button')][1].click(); true")
    raw = json.loads(browser.evaluate("document.querySelector('[data-testid=raw]').textContent"))
    assert raw["response"]["id"] == site.repaired and raw["timeline"]
    # the raw view replaces the run view (not below it)
    assert browser.evaluate("document.querySelector('.run-grid').offsetParent === null")
    assert browser.evaluate("document.querySelector('[data-testid=raw]').offsetParent !== null")
    fits(browser)
    screenshot(browser, shots / "run.png")
    browser.navigate(f"{site.base}/ui#/conversations/{site.conversation}")
    browser.wait_for("document.querySelectorAll('[data-testid=messages] .item').length >= 3")
    messages = browser.evaluate("document.querySelector('[data-testid=messages]').innerText")
    assert "Plan a trip to Lisbon" in messages and "and Porto?" in messages and "fine" in messages


def test_keys_page_and_a_tenants_narrower_view(site: Site, browser: Browser, shots: Path) -> None:
    browser.navigate(site.base + "/ui#/keys")
    sign_in(browser, site.operator)
    browser.wait_for("document.querySelectorAll('#keys tbody tr').length === 3")
    red = browser.evaluate("document.querySelector('#keys tr[data-key=red]').innerText")
    assert "/ 1,000" in red and "/ 100,000" in red
    screenshot(browser, shots / "keys.png")
    # a tenant: its own responses only, no keys page
    browser.evaluate("sessionStorage.clear(); true")
    browser.navigate(site.base + "/ui#/responses")
    sign_in(browser, site.red)
    browser.wait_for("document.querySelectorAll('#responses tbody tr[data-id]').length > 0")
    assert browser.evaluate("document.getElementById('nav-keys').hidden")
    info = browser.evaluate("document.getElementById('page-info').textContent")
    count = int(info.split(" of ")[1].split()[0])

    def listing(key: str) -> dict:
        headers = {"authorization": f"Bearer {key}"}
        return dict(httpx.get(site.base + "/ui/api/responses?limit=500", headers=headers).json())

    mine, everyone = listing(site.red), listing(site.operator)
    assert count == mine["total"] < everyone["total"]
    assert {row["key_name"] for row in mine["data"]} == {"red"}
    ids = browser.evaluate(
        "[...document.querySelectorAll('#responses tbody tr[data-id]')].map(r => r.dataset.id)"
    )
    assert set(ids) <= {row["id"] for row in mine["data"]}
    assert site.repaired in {row["id"] for row in mine["data"]}
    metrics = httpx.get(site.base + "/metrics", headers={"authorization": f"Bearer {site.red}"})
    assert metrics.status_code == 403
