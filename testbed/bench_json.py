"""A benchmark part's result file: what testbed/bench.sh, bench_e2e.sh and bench_report.py read.

A part writes one JSON object, or a log whose last line starting with "{" is its result.
"""
import json


def read_result(path):
    """The file's one JSON object, else its last JSON line; None when there is neither."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    lines = [l for l in text.splitlines() if l.startswith("{")]
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
