"""A tiny HTTP client for serve_app.py (standard library only): posts rows
of features as JSON and prints the labels that come back.

    python examples/ray/client.py [URL] [--rows N]     # URL: http://127.0.0.1:8000/classify
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import urllib.error
import urllib.request
from typing import Any

URL = "http://127.0.0.1:8000/classify"


def post(url: str, body: Any, timeout: float = 30.0) -> tuple[int, Any]:
    """POSTs `body` as JSON; returns (HTTP status, decoded JSON answer),
    for error statuses too."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def classify(url: str, features: list[list[float]], timeout: float = 30.0) -> dict[str, Any]:
    """The server's answer for these rows ({"labels", "logits"}); RuntimeError
    with its message when it refuses them."""
    status, answer = post(url, {"features": features}, timeout)
    if status != 200:
        raise RuntimeError(f"{url} answered {status}: {answer}")
    return dict(answer)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", default=URL)
    parser.add_argument("--rows", type=int, default=4)
    args = parser.parse_args(argv)
    rows = [[math.sin(0.37 * i + 1.3 * j) * 2 for j in range(16)] for i in range(args.rows)]
    answer = classify(args.url, rows)
    for i, label in enumerate(answer["labels"]):
        print(f"row {i}: class {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
