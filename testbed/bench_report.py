#!/usr/bin/python3
"""Composes build/bench/report.json and report.md from the parts testbed/bench.sh wrote.

Every headline figure is a ratio of two measurements from the same run (or, for the raw
PMD rate and the shard rate, a figure reported beside its baseline). A figure whose parts
are missing is null, with the reason under "notes". "run" says when and where: the time
the report was composed, each part's time (its file's; BENCH_PARTS reruns only some), the
machine (cores, CPU model, kernel) and the commit the tree was at.
"""
import datetime
import json
import os
import platform
import subprocess
import sys

out = sys.argv[1]


def load(name):
    """A part's result: the whole file as one JSON object, else its last JSON line."""
    try:
        with open(os.path.join(out, name + ".json")) as f:
            text = f.read()
    except OSError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        lines = [l for l in text.splitlines() if l.startswith("{")]
        try:
            return json.loads(lines[-1]) if lines else None
        except ValueError:
            return None


def get(d, *path):
    for p in path:
        if not isinstance(d, dict) or d.get(p) is None:
            return None
        d = d[p]
    return d


def ratio(a, b):
    return None if a is None or b in (None, 0) else round(a / b, 4)


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def commit():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    try:
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def part_time(name):
    try:
        return iso(os.path.getmtime(os.path.join(out, name + ".json")))
    except OSError:
        return None


parts = {n: load(n) for n in ("pmd_rx", "pmd_tx", "dpdk_pingpong", "kernel_pingpong", "dpdk_rate",
                              "kernel_rate", "dpdk_stream", "dpdk_stream_jumbo", "kernel_stream", "fuse", "fuse_kernel", "fuse_pmd_step", "fuse_pmd_step_pieces", "fuse_pmd_step_pieces_plain", "shard",
                              "ps", "ps_direct", "train")}
notes = {n: "missing or failed" for n, v in parts.items() if v is None or "missing" in v or "failed" in v}

fuse = parts["fuse"] or {}
shard = parts["shard"] or {}
headline = {
    "rtt_p50_ratio_dpdk_over_kernel": ratio(get(parts["dpdk_pingpong"], "rtt_p50_us"),
                                            get(parts["kernel_pingpong"], "rtt_p50_us")),
    "rtt_p99_ratio_dpdk_over_kernel": ratio(get(parts["dpdk_pingpong"], "rtt_p99_us"),
                                            get(parts["kernel_pingpong"], "rtt_p99_us")),
    "msg_rate_ratio_dpdk_over_kernel": ratio(get(parts["dpdk_rate"], "msgs_per_s"),
                                             get(parts["kernel_rate"], "msgs_per_s")),
    "stream_ratio_dpdk_over_kernel": ratio(get(parts["dpdk_stream"], "gbit_per_s"),
                                           get(parts["kernel_stream"], "gbit_per_s")),
    "stream_ratio_dpdk_jumbo_over_kernel": ratio(get(parts["dpdk_stream_jumbo"], "gbit_per_s"),
                                                 get(parts["kernel_stream"], "gbit_per_s")),
    "raw_pmd_mpps": get(parts["pmd_rx"], "mpps"),
    "dpdk_64b_msg_rate_over_raw_pmd_pps": ratio(get(parts["dpdk_rate"], "msgs_per_s"),
                                                (get(parts["pmd_rx"], "mpps") or 0) * 1e6),
    "fuse_steps_ratio_on_over_off": fuse.get("fuse_steps_ratio_on_over_off"),
    "fuse_lone_latency_ratio_on_over_off": fuse.get("fuse_lone_latency_ratio_on_over_off"),
    "fuse_steps_ratio_on_over_off_kernel": get(parts["fuse_kernel"], "fuse_steps_ratio_on_over_off"),
    # The same step's bytes with no protocol at all (wharf-pktgen --step) over the unfused
    # step: the most any fusion could give on this link. And how near the fused step is to it.
    "fuse_steps_ceiling_raw_pmd_over_off": ratio(get(parts["fuse_pmd_step"], "steps_per_s"),
                                                 get(fuse, "step_1000x64B", "off", "steps_per_s")),
    "fuse_steps_on_over_raw_pmd": ratio(get(fuse, "step_1000x64B", "on", "steps_per_s"),
                                        get(parts["fuse_pmd_step"], "steps_per_s")),
    # The same floor with the step written 71 B at a time, as a packer copies 64 B tensors
    # with their sub-headers: the most any fusion that copies could give here, before any
    # protocol, parsing or delivery. The 5x target needs the fused step within 5 / this.
    "fuse_steps_ceiling_raw_pmd_pieces_over_off": ratio(
        get(parts["fuse_pmd_step_pieces"], "steps_per_s"),
        get(fuse, "step_1000x64B", "off", "steps_per_s")),
    # That step written 71 B at a time, as the packer does: the line writer over memcpy.
    "raw_pmd_step_71b_pieces_lines_over_memcpy": ratio(
        get(parts["fuse_pmd_step_pieces"], "steps_per_s"),
        get(parts["fuse_pmd_step_pieces_plain"], "steps_per_s")),
    "shard_key_updates_per_s_dim16_sgd": get(shard, "headline", "ps_dim16_sgd_push_key_updates_per_s_per_lcore"),
    "ps_keys_per_s_ratio_dpdk_over_kernel": get(parts["ps"], "ps_keys_per_s_ratio_dpdk_over_kernel"),
    # 1 PS + 1 worker without the switch (each node a core, as on NIC hosts).
    "ps_direct_keys_per_s_ratio_dpdk_over_kernel_sleeping": get(
        parts["ps_direct"], "ps_direct_keys_per_s_ratio_dpdk_over_kernel_sleeping"),
    "ps_direct_keys_per_s_ratio_dpdk_over_kernel_polling": get(
        parts["ps_direct"], "ps_direct_keys_per_s_ratio_dpdk_over_kernel_polling"),
    "train_samples_ratio_dpdk_over_kernel": get(parts["train"], "train_samples_ratio_dpdk_over_kernel"),
    "train_samples_ratio_fuse_on_over_off": get(parts["train"], "train_samples_ratio_fuse_on_over_off"),
}
targets = {
    "rtt_p50_ratio_dpdk_over_kernel": ("<=", 0.2),
    "msg_rate_ratio_dpdk_over_kernel": (">=", 5.0),
    "stream_ratio_dpdk_over_kernel": (">=", 1.0),
    "fuse_steps_ratio_on_over_off": (">=", 5.0),
    "fuse_lone_latency_ratio_on_over_off": ("<=", 1.1),
    "shard_key_updates_per_s_dim16_sgd": (">=", 10e6),
}
verdicts = {}
for k, (op, t) in targets.items():
    v = headline.get(k)
    verdicts[k] = None if v is None else (v <= t if op == "<=" else v >= t)

run = {"date": iso(datetime.datetime.now().timestamp()),
       "machine": {"nproc": os.cpu_count(), "cpu": cpu_model(), "kernel": platform.release()},
       "commit": commit(),
       "parts_date": {n: part_time(n) for n in parts}}
report = {"run": run, "headline": headline,
          "targets": {k: f"{op} {t}" for k, (op, t) in targets.items()},
          "met": verdicts, "parts": parts, "notes": notes}
with open(os.path.join(out, "report.json"), "w") as f:
    json.dump(report, f, indent=1)

rows = ["| figure | value | target | met |", "|---|---|---|---|"]
for k, v in headline.items():
    t = targets.get(k)
    m = verdicts.get(k)
    rows.append(f"| {k} | {v if v is not None else 'n/a'} | {t[0] + ' ' + str(t[1]) if t else ''} | "
                f"{'' if m is None else ('yes' if m else 'NO')} |")
rows += ["", "| run | rtt p50 us | rtt p99 us | msgs/s | Gbit/s |", "|---|---|---|---|---|"]
for n in ("dpdk_pingpong", "kernel_pingpong", "dpdk_rate", "kernel_rate", "dpdk_stream", "dpdk_stream_jumbo",
          "kernel_stream"):
    p = parts[n] or {}
    rows.append(f"| {n} | {p.get('rtt_p50_us')} | {p.get('rtt_p99_us')} | {p.get('msgs_per_s')} | "
                f"{p.get('gbit_per_s')} |")
with open(os.path.join(out, "report.md"), "w") as f:
    f.write("# wharf bench\n\n" + "\n".join(rows) + "\n")
