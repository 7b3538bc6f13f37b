"""Flow API client benchmark: token requests per 1,000 calls, and the client's overhead per call
against a bare `requests` call with a fixed token, to the same sandbox, in one run.

Run: .venv/bin/python tests/benchmarks/bench_client.py
"""

import json
import statistics
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.servers import sandbox  # noqa: E402

from portal.flowapi import build_client  # noqa: E402
from portal.settings import load_settings  # noqa: E402

CALLS = 1000
ROUNDS = 400


def percentile(samples, fraction):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> dict:
    with sandbox(SANDBOX_SEED="20") as url:
        settings = load_settings(
            {
                "FLOW_API_URL": url,
                "FLOW_OIDC_URL": url,
                "FLOW_REALM": "sandbox",
                "FLOW_CLIENT_ID": "demo-client",
                "FLOW_CLIENT_SECRET": "demo-secret",
                "FLOW_SCOPES": "loan-application:create:no",
                "PORTAL_SECRET_KEY": "benchmark-secret-key-0000",
                "PORTAL_INDEX_KEY": "benchmark-index-key-0000",
            }
        )
        client = build_client(settings)
        before = requests.get(f"{url}/sandbox/stats", timeout=5).json()["token_requests"]
        for _ in range(CALLS):
            client.list_flows(limit=10)
        tokens = requests.get(f"{url}/sandbox/stats", timeout=5).json()["token_requests"] - before

        bare = requests.Session()
        token = client.provider.token()
        headers = {"Authorization": f"Bearer {token}"}
        with_client, without = [], []
        for _ in range(ROUNDS):  # interleaved, so both see the same machine load
            started = time.perf_counter()
            client.list_flows(limit=10)
            with_client.append(time.perf_counter() - started)
            started = time.perf_counter()
            answer = bare.get(f"{url}/api/flows", params={"limit": 10}, headers=headers, timeout=10)
            answer.json()
            without.append(time.perf_counter() - started)
    result = {
        "calls": CALLS,
        "token_requests": tokens,
        "token_requests_per_1000_calls": tokens * 1000 / CALLS,
        "client_median_ms": statistics.median(with_client) * 1000,
        "bare_median_ms": statistics.median(without) * 1000,
        "client_p95_ms": percentile(with_client, 0.95) * 1000,
        "bare_p95_ms": percentile(without, 0.95) * 1000,
    }
    result["median_ratio"] = result["client_median_ms"] / result["bare_median_ms"]
    result["p95_ratio"] = result["client_p95_ms"] / result["bare_p95_ms"]
    result["median_overhead_ms"] = result["client_median_ms"] - result["bare_median_ms"]
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
