#!/usr/bin/python3
"""bench_docs.py [REPORT] — the benchmark tables of the docs, from the last `make bench`.

Rewrites the region between `<!-- bench:table:begin -->` and `<!-- bench:table:end -->` in
docs/benchmarks.md (every figure with what it is compared against), the one between
`<!-- bench:psbytes:begin -->` and `<!-- bench:psbytes:end -->` there (every PS bytes phase,
each placement's goodput and latency, and its ratio to the DPDK stream), and the one between
`<!-- bench:summary:begin -->` and `<!-- bench:summary:end -->` in README.md (the headline
ratios), from REPORT (default build/bench/report.json, written by testbed/bench_report.py).
Each table says when and on what machine its figures were measured; a figure the report
lacks shows as "n/a". testbed/bench.sh runs this last, so a figure in the docs is always
one that `make bench` printed. Exit 1 when the report or a marker is missing.
"""
import datetime
import json
import math
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
REPORT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "bench", "report.json")


def get(d, *path):
    for p in path:
        if not isinstance(d, dict) or d.get(p) is None:
            return None
        d = d[p]
    return d


def num(v, unit=""):
    """3 significant digits, k or M for thousands and millions, then the unit."""
    if v is None:
        return "n/a"
    pre = ""
    for d, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(v) >= d:
            v, pre = v / d, suffix
            break
    digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    s = f"{v:.{digits}f}"
    if pre and unit.startswith("/"):
        return f"{s} {pre}{unit}"
    return " ".join(x for x in (s, pre, unit) if x)


def lat(us):
    """A latency in µs below a millisecond, else in ms."""
    return num(us, "µs") if us is None or us < 1000 else num(us / 1000, "ms")


def ratio(v):
    if v is None:
        return "n/a"
    return f"{v:.3f}" if abs(v) < 0.1 else f"{v:.2f}"


def div(a, b):
    return None if a is None or not b else a / b


def median(xs):
    """The median of the values that are there (the upper middle for an even count)."""
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def geomean(*xs):
    if any(x is None or x <= 0 for x in xs):
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def target(rep, key):
    t, met = get(rep, "targets", key), get(rep, "met", key)
    if t is None:
        return ""
    op, val = t.split()
    val = float(val)
    shown = f"{val / 1e6:g} M" if val >= 1e6 else f"{val:g}"
    return f"{'≤' if op == '<=' else '≥'} {shown}: " + ("n/a" if met is None else
                                                        "met" if met else "missed")


def rows(rep):
    """(figure, DPDK or "on" side, baseline side, ratio, headline key) for the full table."""
    p, h = rep.get("parts") or {}, rep.get("headline") or {}
    fuse, fk = p.get("fuse") or {}, p.get("fuse_kernel") or {}
    ps, pd, tr = p.get("ps") or {}, p.get("ps_direct") or {}, p.get("train") or {}
    tf = p.get("train_fuse") or {}
    us = lambda part, k: num(get(p, part, k), "µs")
    out = [(f"64 B ping-pong RTT {q}, both {mode}", us(dpdk, f"rtt_{q}_us"),
            us(kernel, f"rtt_{q}_us"), h.get(f"rtt_{q}_ratio_dpdk_over_kernel{sfx}"),
            f"rtt_{q}_ratio_dpdk_over_kernel{sfx}")
           for mode, sfx, dpdk, kernel in (
               ("polling", "", "dpdk_pingpong", "kernel_pingpong"),
               ("sleeping", "_sleeping", "dpdk_pingpong_sleep", "kernel_pingpong_sleep"),
               ("sleeping, no spin", "_sleeping_nospin", "dpdk_pingpong_nospin",
                "kernel_pingpong_nospin"))
           for q in ("p50", "p99")]
    out += [
        ("64 B ping-pong RTT, raw PMD floor (one frame each way, no protocol), both polling",
         us("pmd_pingpong", "us_per_step"), us("kernel_pingpong", "rtt_p50_us"),
         h.get("rtt_p50_ratio_raw_pmd_over_kernel"), None),
        ("64 B ping-pong RTT p50, both polling / raw PMD floor", us("dpdk_pingpong", "rtt_p50_us"),
         us("pmd_pingpong", "us_per_step"), h.get("rtt_p50_ratio_dpdk_over_raw_pmd"), None),
        ("64 B message rate (stream)", num(get(p, "dpdk_rate", "msgs_per_s"), "msg/s"),
         num(get(p, "kernel_rate", "msgs_per_s"), "msg/s"),
         h.get("msg_rate_ratio_dpdk_over_kernel"), "msg_rate_ratio_dpdk_over_kernel"),
        ("1 MiB message stream, MTU 1500 (TSO)", num(get(p, "dpdk_stream", "gbit_per_s"), "Gbit/s"),
         num(get(p, "kernel_stream", "gbit_per_s"), "Gbit/s"),
         h.get("stream_ratio_dpdk_over_kernel"), "stream_ratio_dpdk_over_kernel"),
        ("1 MiB message stream, MTU 9000", num(get(p, "dpdk_stream_jumbo", "gbit_per_s"), "Gbit/s"),
         num(get(p, "kernel_stream", "gbit_per_s"), "Gbit/s"),
         h.get("stream_ratio_dpdk_jumbo_over_kernel"), None),
        ("raw PMD rate, 64 B frames (no protocol)", num(get(p, "pmd_rx", "mpps"), "Mpps"), "", None,
         None),
        ("64 B messages per raw PMD frame time", num(get(p, "dpdk_rate", "msgs_per_s"), "msg/s"),
         num((get(p, "pmd_rx", "mpps") or 0) * 1e6 or None, "frame/s"),
         h.get("dpdk_64b_msg_rate_over_raw_pmd_pps"), None),
        ("fusion on / off: step of 1000 × 64 B",
         num(get(fuse, "step_1000x64B", "on", "steps_per_s"), "step/s"),
         num(get(fuse, "step_1000x64B", "off", "steps_per_s"), "step/s"),
         h.get("fuse_steps_ratio_on_over_off"), "fuse_steps_ratio_on_over_off"),
        ("fusion on / off: step of 1000 × 16 B–4 KiB",
         num(get(fuse, "step_mix_16B_4KiB", "on", "steps_per_s"), "step/s"),
         num(get(fuse, "step_mix_16B_4KiB", "off", "steps_per_s"), "step/s"),
         get(fuse, "fuse_steps_ratio_mix_on_over_off"), None),
        ("fusion on / off: 1000 × 64 B, kernel backend",
         num(get(fk, "step_1000x64B", "on", "steps_per_s"), "step/s"),
         num(get(fk, "step_1000x64B", "off", "steps_per_s"), "step/s"),
         h.get("fuse_steps_ratio_on_over_off_kernel"), None),
        ("fusion on / off: lone 64 B message RTT p50",
         num(get(fuse, "lone_64B", "on", "rtt_p50_us"), "µs"),
         num(get(fuse, "lone_64B", "off", "rtt_p50_us"), "µs"),
         h.get("fuse_lone_latency_ratio_on_over_off"), "fuse_lone_latency_ratio_on_over_off"),
        ("raw PMD floor under the 64 B step / unfused step",
         num(get(p, "fuse_pmd_step", "steps_per_s"), "step/s"),
         num(get(fuse, "step_1000x64B", "off", "steps_per_s"), "step/s"),
         h.get("fuse_steps_ceiling_raw_pmd_over_off"), None),
        ("the floor written 71 B at a time / unfused step",
         num(get(p, "fuse_pmd_step_pieces", "steps_per_s"), "step/s"),
         num(get(fuse, "step_1000x64B", "off", "steps_per_s"), "step/s"),
         h.get("fuse_steps_ceiling_raw_pmd_pieces_over_off"), None),
        ("fused 64 B step / raw PMD floor",
         num(get(fuse, "step_1000x64B", "on", "steps_per_s"), "step/s"),
         num(get(p, "fuse_pmd_step", "steps_per_s"), "step/s"),
         h.get("fuse_steps_on_over_raw_pmd"), None),
        ("71 B pieces: line writer / memcpy",
         num(get(p, "fuse_pmd_step_pieces", "steps_per_s"), "step/s"),
         num(get(p, "fuse_pmd_step_pieces_plain", "steps_per_s"), "step/s"),
         h.get("raw_pmd_step_71b_pieces_lines_over_memcpy"), None),
        ("shard key updates/s, dim 16 SGD, one lcore",
         num(h.get("shard_key_updates_per_s_dim16_sgd"), "/s"), "", None,
         "shard_key_updates_per_s_dim16_sgd"),
    ]
    runs = ps.get("runs") or {}
    for nw in (1, 2):
        for op in ("pull", "push"):
            out.append((f"PS {op} keys/s, {nw} worker{'s' if nw > 1 else ''}, via the switch",
                        num(get(runs, f"dpdk_{nw}w", f"{op}_keys_per_s"), "key/s"),
                        num(get(runs, f"kernel_{nw}w", f"{op}_keys_per_s"), "key/s"),
                        ps.get(f"{op}_keys_per_s_ratio_dpdk_over_kernel_{nw}w"), None))
    out.append(("PS keys/s via the switch (geometric mean of the 4)", "", "",
                h.get("ps_keys_per_s_ratio_dpdk_over_kernel"),
                "ps_keys_per_s_ratio_dpdk_over_kernel"))
    for nw in (1, 2):
        for op in ("pull", "push"):
            out.append((f"PS {op} keys/s, {nw} worker{'s' if nw > 1 else ''}, switch / kernel "
                        "over a bridge",
                        num(get(runs, f"dpdk_{nw}w", f"{op}_keys_per_s"), "key/s"),
                        num(get(runs, f"kernel_bridge_{nw}w", f"{op}_keys_per_s"), "key/s"),
                        ps.get(f"{op}_keys_per_s_ratio_dpdk_over_kernel_bridge_{nw}w"), None))
    out.append(("PS keys/s, switch / kernel over a bridge (geometric mean of the 4)", "", "",
                h.get("ps_keys_per_s_ratio_dpdk_over_kernel_bridge"), None))
    druns = pd.get("runs") or {}
    for mode in ("sleeping", "polling", "sleeping_nospin"):
        what = mode.replace("_nospin", ", no spin")
        for op in ("pull", "push"):
            out.append((f"PS {op} keys/s, 1 worker, direct pair, {what}",
                        num(get(druns, f"dpdk_{mode}", f"{op}_keys_per_s"), "key/s"),
                        num(get(druns, f"kernel_{mode}", f"{op}_keys_per_s"), "key/s"),
                        pd.get(f"{op}_keys_per_s_ratio_dpdk_over_kernel_{mode}"), None))
            if mode == "sleeping_nospin":
                continue
            out.append((f"PS {op} keys/s, 1 worker, direct pair / kernel over a bridge, {mode}",
                        num(get(druns, f"dpdk_{mode}", f"{op}_keys_per_s"), "key/s"),
                        num(get(druns, f"kernel_bridge_{mode}", f"{op}_keys_per_s"), "key/s"),
                        pd.get(f"{op}_keys_per_s_ratio_dpdk_over_kernel_bridge_{mode}"), None))
        out.append((f"PS keys/s, 1 worker, direct pair, {what} (geometric mean of pull and push)",
                    "", "", h.get(f"ps_direct_keys_per_s_ratio_dpdk_over_kernel_{mode}"),
                    f"ps_direct_keys_per_s_ratio_dpdk_over_kernel_{mode}"))
    for label, what in (("dpdk_over_kernel_loopback", "DPDK / kernel over loopback"),
                        ("dpdk_over_kernel_bridge", "DPDK / kernel over a bridge"),
                        ("ps_virtio_over_ps_vhost", "PS on the virtio side / on the vhost side")):
        out.append((f"PS bytes goodput, {what} (geometric mean of the phases)", "", "",
                    h.get(f"ps_bytes_ratio_{label}"), None))
    pl = p.get("ps_lanes") or {}
    lruns = pl.get("runs") or {}
    for lanes in (1, 2):
        out.append((f"PS keys/s, {lanes} lane{'s' if lanes > 1 else ''}, 2 workers, via the switch",
                    num(get(lruns, f"dpdk_{lanes}lane", "keys_per_s"), "key/s"),
                    num(get(lruns, f"kernel_{lanes}lane", "keys_per_s"), "key/s"),
                    pl.get(f"ps_keys_per_s_ratio_dpdk_over_kernel_{lanes}lane"), None))
        out.append((f"PS keys per PS CPU-second, {lanes} lane{'s' if lanes > 1 else ''}",
                    num(get(lruns, f"dpdk_{lanes}lane", "keys_per_ps_cpu_s"), "key/s"),
                    num(get(lruns, f"kernel_{lanes}lane", "keys_per_ps_cpu_s"), "key/s"),
                    h.get(f"ps_keys_per_cpu_s_ratio_dpdk_over_kernel_{lanes}lane"),
                    f"ps_keys_per_cpu_s_ratio_dpdk_over_kernel_{lanes}lane"))
    dl = p.get("ps_direct_lanes") or {}
    dlr = dl.get("runs") or {}
    for op in ("pull", "push"):
        mq = get(dlr, "dpdk_queue_each", f"{op}_keys_per_s")
        for other, what in (("dpdk_shared", "a queue pair per lane / one shared queue"),
                            ("kernel", "a queue pair per lane / kernel loopback")):
            o = get(dlr, other, f"{op}_keys_per_s")
            out.append((f"PS {op} keys/s, 2-lane PS and worker, direct pair, {what}",
                        num(mq, "key/s"), num(o, "key/s"), div(mq, o), None))
    for proto in ("dpdk", "kernel"):
        out.append((f"PS keys/s, 2 lanes / 1 lane, {proto}",
                    num(get(lruns, f"{proto}_2lane", "keys_per_s"), "key/s"),
                    num(get(lruns, f"{proto}_1lane", "keys_per_s"), "key/s"),
                    h.get(f"ps_lanes_keys_per_s_ratio_2_over_1_{proto}"), None))
    truns = tr.get("runs") or {}
    out += [
        ("MLP training samples/s, 2 workers, fusion off",
         num(get(truns, "dpdk_fuse_off", "samples_per_s"), "sample/s"),
         num(get(truns, "kernel_fuse_off", "samples_per_s"), "sample/s"),
         h.get("train_samples_ratio_dpdk_over_kernel"), "train_samples_ratio_dpdk_over_kernel"),
        ("MLP training samples/s, fusion off, kernel over the bridge",
         num(get(truns, "dpdk_fuse_off", "samples_per_s"), "sample/s"),
         num(get(truns, "bridge_fuse_off", "samples_per_s"), "sample/s"),
         h.get("train_samples_ratio_dpdk_over_kernel_bridge"), None),
        ("MLP training samples/s, DPDK, fusion on / off",
         num(get(truns, "dpdk_fuse_on", "samples_per_s"), "sample/s"),
         num(get(truns, "dpdk_fuse_off", "samples_per_s"), "sample/s"),
         h.get("train_samples_ratio_fuse_on_over_off"), "train_samples_ratio_fuse_on_over_off"),
    ]
    out += direct_rows(p, h, "train_direct", "MLP")
    for part, where in (("train_fuse", ""), ("train_fuse_direct", ", 1 worker, direct pair")):
        fruns = (p.get(part) or {}).get("runs") or {}
        for proto, sfx in (("dpdk", ""), ("kernel", "_kernel")):
            on = [get(fruns, f"{proto}_fuse_on_{i}", "samples_per_s") for i in range(1, 10)]
            off = [get(fruns, f"{proto}_fuse_off_{i}", "samples_per_s") for i in range(1, 10)]
            out.append((f"Deep MLP (24 layers, 100 small tensors a step){where} samples/s, "
                        f"{proto}, fusion on / off (median of rounds)", num(median(on), "sample/s"),
                        num(median(off), "sample/s"),
                        h.get(f"{part}_samples_ratio_fuse_on_over_off{sfx}"),
                        f"{part}_samples_ratio_fuse_on_over_off{sfx}"
                        if not sfx and part == "train_fuse" else None))
    pruns = (p.get("train_torch") or {}).get("runs") or {}
    out += [
        ("PyTorch MLP samples/s (make demo's job), fusion off",
         num(get(pruns, "dpdk_fuse_off", "samples_per_s"), "sample/s"),
         num(get(pruns, "kernel_fuse_off", "samples_per_s"), "sample/s"),
         h.get("train_torch_samples_ratio_dpdk_over_kernel"), None),
        ("PyTorch MLP samples/s, fusion off, kernel over the bridge",
         num(get(pruns, "dpdk_fuse_off", "samples_per_s"), "sample/s"),
         num(get(pruns, "bridge_fuse_off", "samples_per_s"), "sample/s"),
         h.get("train_torch_samples_ratio_dpdk_over_kernel_bridge"), None),
        ("PyTorch MLP samples/s, DPDK, fusion on / off",
         num(get(pruns, "dpdk_fuse_on", "samples_per_s"), "sample/s"),
         num(get(pruns, "dpdk_fuse_off", "samples_per_s"), "sample/s"),
         h.get("train_torch_samples_ratio_fuse_on_over_off"), None),
    ]
    out += direct_rows(p, h, "train_torch_direct", "PyTorch MLP")
    return out


def direct_rows(p, h, part, what):
    """Rows of a training part over the direct pair: both sleeping, both polling, each against
    the kernel over loopback and over a bridge (the loopback ones carry the target)."""
    runs = (p.get(part) or {}).get("runs") or {}
    return [
        (f"{what} training samples/s, 1 worker, direct pair, both {mode} / kernel over {via}",
         num(get(runs, "dpdk" + poll, "samples_per_s"), "sample/s"),
         num(get(runs, run + poll, "samples_per_s"), "sample/s"),
         h.get(f"{part}_samples_ratio_dpdk_over_kernel{sfx}{poll}"),
         f"{part}_samples_ratio_dpdk_over_kernel{sfx}{poll}")
        for mode, poll in (("sleeping", ""), ("polling", "_polling"))
        for via, run, sfx in (("loopback", "kernel", ""), ("a bridge", "kernel_bridge", "_bridge"))]


def summary_rows(rep):
    h = rep.get("headline") or {}
    return [
        ("64 B ping-pong RTT p50, DPDK / kernel, both polling",
         ratio(h.get("rtt_p50_ratio_dpdk_over_kernel")),
         target(rep, "rtt_p50_ratio_dpdk_over_kernel")),
        ("64 B ping-pong RTT p50, raw PMD floor / kernel, both polling (the least any stack "
         "could have here)", ratio(h.get("rtt_p50_ratio_raw_pmd_over_kernel")), ""),
        ("64 B ping-pong RTT p50, DPDK / kernel, both sleeping",
         ratio(h.get("rtt_p50_ratio_dpdk_over_kernel_sleeping")),
         target(rep, "rtt_p50_ratio_dpdk_over_kernel_sleeping")),
        ("64 B message rate, DPDK / kernel", ratio(h.get("msg_rate_ratio_dpdk_over_kernel")),
         target(rep, "msg_rate_ratio_dpdk_over_kernel")),
        ("1 MiB stream throughput, DPDK / kernel", ratio(h.get("stream_ratio_dpdk_over_kernel")),
         target(rep, "stream_ratio_dpdk_over_kernel")),
        ("steps/s with fusion on / off, 1000 × 64 B", ratio(h.get("fuse_steps_ratio_on_over_off")),
         target(rep, "fuse_steps_ratio_on_over_off")),
        ("lone message latency, fusion on / off",
         ratio(h.get("fuse_lone_latency_ratio_on_over_off")),
         target(rep, "fuse_lone_latency_ratio_on_over_off")),
        ("shard key updates/s, one lcore", num(h.get("shard_key_updates_per_s_dim16_sgd"), "/s"),
         target(rep, "shard_key_updates_per_s_dim16_sgd")),
        ("PS keys/s, DPDK / kernel, via the switch",
         ratio(h.get("ps_keys_per_s_ratio_dpdk_over_kernel")),
         target(rep, "ps_keys_per_s_ratio_dpdk_over_kernel")),
        ("PS keys/s, DPDK / kernel, direct pair, both sleeping",
         ratio(h.get("ps_direct_keys_per_s_ratio_dpdk_over_kernel_sleeping")),
         target(rep, "ps_direct_keys_per_s_ratio_dpdk_over_kernel_sleeping")),
        ("PS keys/s, DPDK / kernel, direct pair, both polling",
         ratio(h.get("ps_direct_keys_per_s_ratio_dpdk_over_kernel_polling")),
         target(rep, "ps_direct_keys_per_s_ratio_dpdk_over_kernel_polling")),
        ("PS keys/s, DPDK / kernel over a bridge: switch; direct pair sleeping / polling",
         ratio(h.get("ps_keys_per_s_ratio_dpdk_over_kernel_bridge")) + "; " +
         ratio(h.get("ps_direct_keys_per_s_ratio_dpdk_over_kernel_bridge_sleeping")) + " / " +
         ratio(h.get("ps_direct_keys_per_s_ratio_dpdk_over_kernel_bridge_polling")), ""),
        ("PS 1 MiB pull goodput / DPDK stream (sparse, 8 in flight)",
         ratio(h.get("ps_bytes_pull_1MiB_over_stream")), target(rep, "ps_bytes_pull_1MiB_over_stream")),
        ("PS 1 MiB push goodput / DPDK stream (sparse, 8 in flight)",
         ratio(h.get("ps_bytes_push_1MiB_over_stream")), target(rep, "ps_bytes_push_1MiB_over_stream")),
        ("PS 64 KiB pull goodput / DPDK stream (sparse, 8 in flight)",
         ratio(h.get("ps_bytes_pull_64KiB_over_stream")), target(rep, "ps_bytes_pull_64KiB_over_stream")),
        ("PS 64 KiB push goodput / DPDK stream (sparse, 8 in flight)",
         ratio(h.get("ps_bytes_push_64KiB_over_stream")), target(rep, "ps_bytes_push_64KiB_over_stream")),
        ("PS bytes goodput, DPDK / kernel over loopback / over a bridge",
         ratio(h.get("ps_bytes_ratio_dpdk_over_kernel_loopback")) + " / " +
         ratio(h.get("ps_bytes_ratio_dpdk_over_kernel_bridge")), ""),
        ("PS keys per PS CPU-second, DPDK / kernel, 1 / 2 lanes",
         ratio(h.get("ps_keys_per_cpu_s_ratio_dpdk_over_kernel_1lane")) + " / " +
         ratio(h.get("ps_keys_per_cpu_s_ratio_dpdk_over_kernel_2lane")),
         target(rep, "ps_keys_per_cpu_s_ratio_dpdk_over_kernel_1lane")),
        ("PS keys/s, 2-lane PS and worker on the direct pair: a queue pair per lane / one "
         "shared queue; DPDK (a queue pair per lane) / kernel",
         ratio(h.get("ps_direct_lanes_keys_per_s_ratio_queue_each_over_shared")) + "; " +
         ratio(h.get("ps_direct_lanes_keys_per_s_ratio_dpdk_over_kernel")), ""),
        ("PS keys/s on 2 lanes / 1 lane, DPDK / kernel",
         ratio(h.get("ps_lanes_keys_per_s_ratio_2_over_1_dpdk")) + " / " +
         ratio(h.get("ps_lanes_keys_per_s_ratio_2_over_1_kernel")), ""),
        ("MLP training samples/s, DPDK / kernel (loopback; bridge)",
         ratio(h.get("train_samples_ratio_dpdk_over_kernel")) + "; " +
         ratio(h.get("train_samples_ratio_dpdk_over_kernel_bridge")),
         target(rep, "train_samples_ratio_dpdk_over_kernel")),
        ("MLP training samples/s, 1 worker, direct pair, DPDK / kernel, both sleeping "
         "(loopback; bridge)",
         ratio(h.get("train_direct_samples_ratio_dpdk_over_kernel")) + "; " +
         ratio(h.get("train_direct_samples_ratio_dpdk_over_kernel_bridge")),
         target(rep, "train_direct_samples_ratio_dpdk_over_kernel")),
        ("MLP training samples/s, 1 worker, direct pair, DPDK / kernel, both polling "
         "(loopback; bridge)",
         ratio(h.get("train_direct_samples_ratio_dpdk_over_kernel_polling")) + "; " +
         ratio(h.get("train_direct_samples_ratio_dpdk_over_kernel_bridge_polling")),
         target(rep, "train_direct_samples_ratio_dpdk_over_kernel_polling")),
        ("MLP training samples/s, fusion on / off",
         ratio(h.get("train_samples_ratio_fuse_on_over_off")),
         target(rep, "train_samples_ratio_fuse_on_over_off")),
        ("Deep MLP (100 small tensors a step) samples/s, fusion on / off, DPDK / kernel",
         ratio(h.get("train_fuse_samples_ratio_fuse_on_over_off")) + " / " +
         ratio(h.get("train_fuse_samples_ratio_fuse_on_over_off_kernel")),
         target(rep, "train_fuse_samples_ratio_fuse_on_over_off")),
        ("Deep MLP, 1 worker, direct pair, fusion on / off, DPDK / kernel; share of the DPDK "
         "step (fusion off) in pull, push and barrier",
         ratio(h.get("train_fuse_direct_samples_ratio_fuse_on_over_off")) + " / " +
         ratio(h.get("train_fuse_direct_samples_ratio_fuse_on_over_off_kernel")) + "; " +
         ratio(h.get("train_fuse_direct_network_share_dpdk")), ""),
        ("PyTorch MLP training samples/s, DPDK / kernel; fusion on / off",
         ratio(h.get("train_torch_samples_ratio_dpdk_over_kernel")) + "; " +
         ratio(h.get("train_torch_samples_ratio_fuse_on_over_off")), ""),
        ("PyTorch MLP training samples/s, 1 worker, direct pair, DPDK / kernel, both sleeping / "
         "both polling",
         ratio(h.get("train_torch_direct_samples_ratio_dpdk_over_kernel")) + " / " +
         ratio(h.get("train_torch_direct_samples_ratio_dpdk_over_kernel_polling")),
         target(rep, "train_torch_direct_samples_ratio_dpdk_over_kernel")),
    ]


def provenance(rep):
    run = rep.get("run") or {}
    m = run.get("machine") or {}
    dates = sorted(d for d in (run.get("parts_date") or {}).values() if d)
    minute = lambda d: d[:16].replace("T", " ")
    first, last = (dates[0], dates[-1]) if dates else (run.get("date", "?"),) * 2
    if minute(first) == minute(last):
        when = minute(first)
    elif first[:10] == last[:10]:
        when = f"{minute(first)}–{last[11:16]}"
    else:
        when = f"{minute(first)} – {minute(last)}"
    when += " UTC"
    return (f"Measured {when} on {m.get('nproc', '?')} cores of {m.get('cpu') or '?'}, "
            f"Linux {m.get('kernel', '?')}, commit {run.get('commit') or '?'} "
            f"(`build/bench/report.json`).")


def table(rep):
    lines = [provenance(rep), "",
             "| figure | DPDK (or on) | baseline (kernel, off) | ratio | target |",
             "|---|---:|---:|---:|---|"]
    for fig, a, b, r, key in rows(rep):
        lines.append(f"| {fig} | {a} | {b} | {ratio(r) if r is not None else ''} | "
                     f"{target(rep, key) if key else ''} |")
    return "\n".join(lines)


def ps_bytes_table(rep):
    """Every PS bytes phase: each run's Gbit/s (p50 / p99), the DPDK ones over the stream."""
    p = rep.get("parts") or {}
    pb, over = p.get("ps_bytes") or {}, rep.get("ps_bytes_over_stream") or {}
    stream = get(p, "dpdk_stream", "gbit_per_s")
    lines = [provenance(rep), "",
             f"Goodput in Gbit/s, then p50 / p99 per request; "
             f"÷ stream: over the DPDK 1 MiB stream of the same run ({num(stream, 'Gbit/s')}).",
             "", "| kind | op | size | in flight | PS on vhost | ÷ stream | PS on virtio | "
             "÷ stream | kernel, loopback | kernel, bridge | DPDK (vhost) / bridge |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    if not pb.get("phases"):
        why = get(rep, "notes", "ps_bytes") or "; ".join((pb.get("notes") or {}).values())
        return "\n".join(lines + [f"| n/a ({why or 'not run'}) | | | | | | | | | | |"])

    def cell(e, n):
        r = e.get(n)
        if not r:
            return "n/a"
        return f"{num(r['gbit_per_s'])} ({lat(r['p50_us'])} / {lat(r['p99_us'])})"

    for k, e in pb["phases"].items():
        size = e["value_bytes"]
        size = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        o = over.get(k) or {}
        lines.append(f"| {e['kind']} | {e['op']} | {size} | {e['inflight']} | "
                     f"{cell(e, 'dpdk_ps_vhost')} | {ratio(o.get('dpdk_ps_vhost'))} | "
                     f"{cell(e, 'dpdk_ps_virtio')} | {ratio(o.get('dpdk_ps_virtio'))} | "
                     f"{cell(e, 'kernel_loopback')} | {cell(e, 'kernel_bridge')} | "
                     f"{ratio(e.get('ratio_dpdk_over_kernel_bridge'))} |")
    return "\n".join(lines)


def summary(rep):
    lines = [provenance(rep), "", "| figure | ratio | target |", "|---|---:|---|"]
    lines += [f"| {f} | {v} | {t} |" for f, v, t in summary_rows(rep)]
    return "\n".join(lines)


def rewrite(path, name, body):
    begin, end = f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"
    with open(path) as f:
        text = f.read()
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        sys.exit(f"bench_docs: {os.path.relpath(path, ROOT)} has no {begin} ... {end} region")
    new = text[:i + len(begin)] + "\n" + body + "\n" + text[j:]
    if new != text:
        with open(path, "w") as f:
            f.write(new)


def main():
    try:
        with open(REPORT) as f:
            rep = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"bench_docs: cannot read {REPORT}: {e}")
    if "run" not in rep:  # a report from before bench_report.py recorded its run
        t = datetime.datetime.fromtimestamp(os.path.getmtime(REPORT), datetime.timezone.utc)
        rep["run"] = {"date": t.strftime("%Y-%m-%dT%H:%M:%SZ")}
    rewrite(os.path.join(ROOT, "docs", "benchmarks.md"), "table", table(rep))
    rewrite(os.path.join(ROOT, "docs", "benchmarks.md"), "psbytes", ps_bytes_table(rep))
    rewrite(os.path.join(ROOT, "README.md"), "summary", summary(rep))
    print("bench_docs: docs/benchmarks.md and README.md tables from " + os.path.relpath(REPORT))


main()
