"""Helpers for the metrics tests: scraping an endpoint and reading samples from the text format."""

import re
import urllib.request

import ddptest

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$")


def scrape(port, host="127.0.0.1", timeout=5):
    """The text a GET /metrics returns (fails the test on a non-200 answer)."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout) as reply:
        ddptest.check(reply.status == 200, f"/metrics answered {reply.status}")
        return reply.read().decode()


def samples(text):
    """{'name{labels}': value} of every sample line."""
    out = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            out[match.group(1)] = float(match.group(2))
    return out


def wait_for_sample(port, series, predicate, timeout=30):
    """Scrapes until predicate(value of series) holds; returns the last samples."""
    last = {}

    def ready():
        nonlocal last
        try:
            last = samples(scrape(port))
        except OSError:
            return False
        return series in last and predicate(last[series])

    if not ddptest.wait_until(ready, timeout, interval=0.1):
        ddptest.fail(f"{series} never satisfied the check within {timeout}s; last: "
                     f"{last.get(series)}")
    return last
