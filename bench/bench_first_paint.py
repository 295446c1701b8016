"""Cold-cache first paint and transferred bytes of an incident page in Debian's chromium over
a throttled link (CDP Network.emulateNetworkConditions), against a running console.

    .venv/bin/python bench/bench_first_paint.py http://127.0.0.1:8000/incidents/1/ \
        --user admin --password ... [--runs 5] [--down-kbps 1600] [--rtt-ms 150]

Each run is a new browser context (empty cache) carrying only the session cookie of one
unthrottled login. Reported per run: first contentful paint, DOMContentLoaded, load, the time
the rank chart was drawn (`.js-plotly-plot` present; absent without a diagnosis), and the
bytes received on the wire (every response's encodedDataLength, headers included), with the
largest responses.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.browserkit import CHROMIUM, CHROMIUM_ARGS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--down-kbps", type=int, default=1600)
    parser.add_argument("--up-kbps", type=int, default=750)
    parser.add_argument("--rtt-ms", type=int, default=150)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    parts = urlsplit(args.url)
    base = f"{parts.scheme}://{parts.netloc}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        login = browser.new_context()
        page = login.new_page()
        page.goto(f"{base}/login/")
        page.fill("input[name=username]", args.user)
        page.fill("input[name=password]", args.password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")
        state = login.storage_state()
        login.close()
        results = [_run(browser, state, args) for _ in range(args.runs)]
        browser.close()
    for key in ("fcp_ms", "dcl_ms", "load_ms", "chart_ms", "bytes"):
        values = [r[key] for r in results if r[key] is not None]
        if values:
            print(f"{key:9} median {statistics.median(values):>10,.0f}  runs {values}")
    print("largest responses (last run):")
    for url, size in results[-1]["largest"]:
        print(f"  {size:>10,} B  {url}")


def _run(browser, state: dict, args) -> dict:
    context = browser.new_context(storage_state=state, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send(
        "Network.emulateNetworkConditions",
        {
            "offline": False,
            "latency": args.rtt_ms,
            "downloadThroughput": args.down_kbps * 1000 / 8,
            "uploadThroughput": args.up_kbps * 1000 / 8,
        },
    )
    sizes: dict[str, int] = {}
    urls: dict[str, str] = {}
    cdp.on(
        "Network.responseReceived", lambda e: urls.__setitem__(e["requestId"], e["response"]["url"])
    )
    cdp.on(
        "Network.loadingFinished",
        lambda e: sizes.__setitem__(e["requestId"], int(e["encodedDataLength"])),
    )
    started = time.monotonic()
    page.goto(args.url, wait_until="load", timeout=180_000)
    chart_ms = None
    try:
        page.wait_for_selector("#rank-timeline .main-svg", timeout=120_000)
        chart_ms = (time.monotonic() - started) * 1000
    except Exception:  # no diagnosis on the page: no chart to wait for
        chart_ms = None
    page.wait_for_timeout(500)
    timing = page.evaluate(
        """() => {
          const nav = performance.getEntriesByType('navigation')[0];
          const fcp = performance.getEntriesByName('first-contentful-paint')[0];
          return {fcp: fcp ? fcp.startTime : null, dcl: nav.domContentLoadedEventEnd,
                  load: nav.loadEventEnd};
        }"""
    )
    context.close()
    largest = sorted(((urls.get(k, k), v) for k, v in sizes.items()), key=lambda p: -p[1])[:5]
    return {
        "fcp_ms": timing["fcp"],
        "dcl_ms": timing["dcl"],
        "load_ms": timing["load"],
        "chart_ms": chart_ms,
        "bytes": sum(sizes.values()),
        "largest": largest,
    }


if __name__ == "__main__":
    main()
