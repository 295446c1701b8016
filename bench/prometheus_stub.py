"""A loopback stand-in for a cluster's Prometheus: answers `query_range` POSTs with made-up DCGM
series (one per GPU of each named host, a point every step of the asked window), for the
tests that compare verdicts and for bench_gpu_metrics. Only what the console asks is served."""

from __future__ import annotations

import json
import multiprocessing
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

# (host, gpu index, metric, unix time) -> the value, or None for no series.
Value = Callable[[str, int, str, float], float | None]


def answer(query: str, start: float, end: float, step: float, hosts: dict[str, int],
           value: Value) -> dict:  # fmt: skip
    """The matrix the console's query asks for: `METRIC{Hostname=~"a|b"}`, or that inside
    `max_over_time(...[Ns])` (read here as the value at each step)."""
    metric, matcher = re.fullmatch(
        r'(?:max_over_time\()?(\w+)\{Hostname=~"(.*)"\}(?:\[\d+s\]\))?', query
    ).groups()
    asked = {
        re.sub(r"\\(.)", r"\1", h) for h in re.split(r"(?<!\\)\|", matcher.replace("\\\\", "\\"))
    }
    times = [start + i * step for i in range(int((end - start) // step) + 1)]
    result = []
    for host in sorted(asked & set(hosts)):
        for gpu in range(hosts[host]):
            values = [
                [t, f"{v:g}"] for t in times if (v := value(host, gpu, metric, t)) is not None
            ]
            if values:
                labels = {"__name__": metric, "Hostname": host, "gpu": str(gpu),
                          "UUID": f"GPU-{abs(hash(host)) % 10**8:08d}-{gpu:04d}"}  # fmt: skip
                result.append({"metric": labels, "values": values})
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


@contextmanager
def serving(hosts: dict[str, int], value: Value, *, apart: bool = False) -> Iterator[str]:
    """A Prometheus on 127.0.0.1 (an ephemeral port) for the block: its base URL. `apart`: in
    a forked process of its own (its CPU not the measured process's; stopped by its pid)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            body = json.dumps(
                answer(form["query"][0], float(form["start"][0]), float(form["end"][0]),
                       float(form["step"][0]), hosts, value)
            ).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    if apart:
        child = multiprocessing.get_context("fork").Process(target=server.serve_forever)
        child.start()
        server.server_close()  # the child holds the listening socket
        try:
            yield url
        finally:
            child.terminate()
            child.join()
        return
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
