"""api_rtt.py: one request at a time through the Python binding, timed per call.

Run as the PS (--role ps) and as one worker (--role worker --task-index 0) with the same
cluster flags; the worker prints one JSON line: p50 and p99 in microseconds of a small dense
push and pull (one 128-float row: one frame each way) and of a large one (98 x 1024 floats).
The small pair is what shows the network thread's wake-ups: a request handed to a sleeping
network thread must go out at once, not when its poll's timeout ends (1 ms).
"""
import argparse
import json
import sys
import time

import numpy as np
import wharf


def timed(fn, n):
    for _ in range(20):
        fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return round(ts[len(ts) // 2] * 1e6, 1), round(ts[int(len(ts) * 0.99)] * 1e6, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eal", help="EAL arguments (dpdk)")
    ap.add_argument("--n", type=int, default=300, help="timed calls per operation")
    o, flags = ap.parse_known_args()
    if o.n < 10:
        ap.error("--n: at least 10")
    wharf.init(flags, eal=o.eal)
    big = wharf.dense_table("big", rows=98, dim=1024, lr=0.01)
    small = wharf.dense_table("small", rows=1, dim=128, lr=0.01)
    if wharf.is_server():
        wharf.run_server()
        wharf.stop()
        return 0
    g = np.zeros((98, 1024), np.float32)
    out = np.zeros((98, 1024), np.float32)
    gs = np.zeros((1, 128), np.float32)
    outs = np.zeros((1, 128), np.float32)
    res = {"protocol": wharf.protocol(), "calls": o.n}
    for name, fn in (("push_big", lambda: big.push(g)),
                     ("pull_big", lambda: big.pull(out=out)),
                     ("push_small", lambda: small.push(gs)),
                     ("pull_small", lambda: small.pull(out=outs))):
        res[name + "_p50_us"], res[name + "_p99_us"] = timed(fn, o.n)
    print(json.dumps(res), flush=True)
    wharf.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
