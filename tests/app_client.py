"""Asking a ProfilerApp (werkzeug test Client) for a route the way the UI does: a 202
("loading") is asked again until the answer is there."""
from __future__ import annotations

import json
import time

P = "/data/plugin/pytorch_profiler/"


def get(client, route: str, expect: int = 200, timeout: float = 60.0):
    """The JSON answer of P + route once it is not 202; asserts its status is expect."""
    end = time.monotonic() + timeout
    while True:
        r = client.get(P + route)
        if r.status_code != 202:
            break
        assert time.monotonic() < end, route
        time.sleep(0.1)
    assert r.status_code == expect, (route, r.status_code, r.get_data()[:300])
    return json.loads(r.get_data())
