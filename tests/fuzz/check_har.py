"""Every answer of a schemathesis HAR checked against OpenAI's document (with the deviations in
tests/openai_schemas.py), one line per kind of violation with its count: schemathesis' own
report truncates bodies and names only the outer `oneOf`; this names the field.

    PYTHONPATH=src python -m tests.fuzz.check_har /tmp/…/test_openai_document0/run.har
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from typing import Any
from urllib.parse import urlparse

from tests.openai_schemas import document, violations


def bodies(text: str, media: str) -> list[Any]:
    """The JSON body, or each `data:` of an event stream."""
    if media != "text/event-stream":
        return [json.loads(text)]
    data = (line[5:].strip() for line in text.splitlines() if line.startswith("data:"))
    return [json.loads(value) for value in data if value not in ("", "[DONE]")]


def check(har: dict[str, Any]) -> Counter[tuple[str, str, str]]:
    paths = document()["paths"]
    patterns = [
        (re.compile("^/v1" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"), path) for path in paths
    ]
    found: Counter[tuple[str, str, str]] = Counter()
    for entry in har["log"]["entries"]:
        request, response = entry["request"], entry["response"]
        url_path, method = urlparse(request["url"]).path, request["method"].lower()
        path = next((p for pattern, p in patterns if pattern.match(url_path)), None)
        media = response["content"].get("mimeType", "").split(";")[0]
        status = str(response["status"])
        documented = paths.get(path, {}).get(method, {}).get("responses", {}).get(status, {})
        if media not in documented.get("content", {}) or path is None:
            continue
        for body in bodies(response["content"].get("text") or "", media):
            for violation in violations(body, method, path, int(status), media):
                where, _, message = violation.partition(": ")
                found[(f"{method.upper()} {path}", re.sub(r"/\d+", "/N", where), message)] += 1
    return found


if __name__ == "__main__":
    with open(sys.argv[1]) as source:
        for (operation, where, message), count in check(json.load(source)).most_common():
            print(f"{count:5} {operation} {where}: {message[:160]}")
