#!/usr/bin/python3
"""Composes build/bench/report.json and report.md from the parts testbed/bench.sh wrote.

Every headline figure is a ratio of two measurements from the same run (or, for the raw
PMD rate and the shard rate, a figure reported beside its baseline). A figure whose parts
are missing or failed is null, with the reason under "headline_notes" (and each part's under
"notes"); a figure made with a fallback says so there too. "headline_run_at" gives the time
of the run behind each figure (bench.sh's run_at.json): with BENCH_PARTS, parts not rerun
keep their earlier time, and report.md marks those figures. "run" says when the report was
composed and where: the machine (cores, CPU model, kernel) and the commit the tree was at.
"ps_bytes_over_stream" has every PS bytes phase's goodput over the same run's DPDK 1 MiB
stream goodput, for each placement of the PS on the direct pair.
"""
import datetime
import json
import os
import platform
import subprocess
import sys

from bench_json import read_result

out = sys.argv[1]


def load(name):
    """A part's result (bench_json.read_result), None when it has none."""
    return read_result(os.path.join(out, name + ".json"))


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


parts = {n: load(n) for n in ("pmd_rx", "pmd_tx", "pmd_pingpong", "dpdk_pingpong", "kernel_pingpong",
                              "dpdk_pingpong_sleep", "kernel_pingpong_sleep",
                              "dpdk_pingpong_nospin", "kernel_pingpong_nospin", "dpdk_rate",
                              "kernel_rate", "dpdk_stream", "dpdk_stream_jumbo", "kernel_stream", "fuse", "fuse_kernel", "fuse_pmd_step_bytes", "fuse_pmd_step", "fuse_pmd_step_pieces", "fuse_pmd_step_pieces_plain", "shard",
                              "ps", "ps_direct", "ps_bytes", "ps_lanes", "ps_direct_lanes",
                              "train", "train_direct",
                              "train_fuse", "train_fuse_direct",
                              "train_torch", "train_torch_direct")}


def why_not(n, v):
    """Why part n has no figures (None when it has them): its own reason when it gave one."""
    if v is None:
        return "no result" if n in run_at else "not run"
    if not isinstance(v, dict):
        return "result is not a JSON object"
    if "missing" in v or "failed" in v:
        return str(v.get("failed") or v.get("missing"))
    return None


run_at = load("run_at") or {}
notes = {n: why_not(n, v) for n, v in parts.items() if why_not(n, v)}
# This make bench's start (bench.sh exports it); run alone, the latest time in run_at.json.
this_run = os.environ.get("BENCH_RUN_AT") or max(run_at.values(), default=None)
# The raw-PMD steps ran with a stand-in byte count when the fused step's was not there.
step_fallback = get(parts["fuse_pmd_step_bytes"], "fallback")
if step_fallback:
    notes["fuse_pmd_step_bytes"] = "fallback: " + step_fallback
headline, sources = {}, {}  # figure -> value, figure -> the parts it is made of


def fig(name, value, *srcs):
    headline[name] = value
    sources[name] = srcs


fuse = parts["fuse"] or {}
shard = parts["shard"] or {}
STEP_BYTES = "fuse_pmd_step_bytes"  # the byte count the raw-PMD steps ran with
# 64 B ping-pong RTT p50 and p99, DPDK over kernel: both polling (no suffix), both sleeping
# (each spinning WHARF_IDLE_SPIN_US after work first, as by default), both sleeping at once.
for sfx, dpdk, kernel in (("", "dpdk_pingpong", "kernel_pingpong"),
                          ("_sleeping", "dpdk_pingpong_sleep", "kernel_pingpong_sleep"),
                          ("_sleeping_nospin", "dpdk_pingpong_nospin", "kernel_pingpong_nospin")):
    for q in ("p50", "p99"):
        fig(f"rtt_{q}_ratio_dpdk_over_kernel{sfx}", ratio(get(parts[dpdk], f"rtt_{q}_us"),
                                                         get(parts[kernel], f"rtt_{q}_us")),
            dpdk, kernel)
# The sleeping DPDK ping-pong's tail against its own median: a sleep whose timeout timer is
# armed without the widened timer slack (dn_sleep_slack_begin) reprograms the CPU's timer,
# a hypervisor exit, and put a third of the round trips at 5x the median.
fig("rtt_p99_over_p50_dpdk_sleeping", ratio(get(parts["dpdk_pingpong_sleep"], "rtt_p99_us"),
                                           get(parts["dpdk_pingpong_sleep"], "rtt_p50_us")),
    "dpdk_pingpong_sleep")
# The raw PMD's ping-pong (one frame each way, no protocol): the least RTT any stack has on
# this link, and so the least RTT ratio against the kernel any stack could report here.
raw_rtt = get(parts["pmd_pingpong"], "us_per_step")
fig("raw_pmd_rtt_us", raw_rtt, "pmd_pingpong")
fig("rtt_p50_ratio_raw_pmd_over_kernel", ratio(raw_rtt, get(parts["kernel_pingpong"], "rtt_p50_us")),
    "pmd_pingpong", "kernel_pingpong")
fig("rtt_p50_ratio_dpdk_over_raw_pmd", ratio(get(parts["dpdk_pingpong"], "rtt_p50_us"), raw_rtt),
    "dpdk_pingpong", "pmd_pingpong")
fig("msg_rate_ratio_dpdk_over_kernel", ratio(get(parts["dpdk_rate"], "msgs_per_s"),
                                             get(parts["kernel_rate"], "msgs_per_s")),
    "dpdk_rate", "kernel_rate")
fig("stream_ratio_dpdk_over_kernel", ratio(get(parts["dpdk_stream"], "gbit_per_s"),
                                           get(parts["kernel_stream"], "gbit_per_s")),
    "dpdk_stream", "kernel_stream")
fig("stream_ratio_dpdk_jumbo_over_kernel", ratio(get(parts["dpdk_stream_jumbo"], "gbit_per_s"),
                                                 get(parts["kernel_stream"], "gbit_per_s")),
    "dpdk_stream_jumbo", "kernel_stream")
fig("raw_pmd_mpps", get(parts["pmd_rx"], "mpps"), "pmd_rx")
fig("dpdk_64b_msg_rate_over_raw_pmd_pps", ratio(get(parts["dpdk_rate"], "msgs_per_s"),
                                                (get(parts["pmd_rx"], "mpps") or 0) * 1e6),
    "dpdk_rate", "pmd_rx")
fig("fuse_steps_ratio_on_over_off", fuse.get("fuse_steps_ratio_on_over_off"), "fuse")
fig("fuse_lone_latency_ratio_on_over_off", fuse.get("fuse_lone_latency_ratio_on_over_off"), "fuse")
fig("fuse_steps_ratio_on_over_off_kernel",
    get(parts["fuse_kernel"], "fuse_steps_ratio_on_over_off"), "fuse_kernel")
# The same step's bytes with no protocol at all (wharf-pktgen --step) over the unfused
# step: the most any fusion could give on this link. And how near the fused step is to it.
fig("fuse_steps_ceiling_raw_pmd_over_off", ratio(get(parts["fuse_pmd_step"], "steps_per_s"),
                                                 get(fuse, "step_1000x64B", "off", "steps_per_s")),
    "fuse_pmd_step", "fuse", STEP_BYTES)
fig("fuse_steps_on_over_raw_pmd", ratio(get(fuse, "step_1000x64B", "on", "steps_per_s"),
                                        get(parts["fuse_pmd_step"], "steps_per_s")),
    "fuse", "fuse_pmd_step", STEP_BYTES)
# The same floor with the step written 71 B at a time, as a packer copies 64 B tensors
# with their sub-headers: the most any fusion that copies could give here, before any
# protocol, parsing or delivery. The 5x target needs the fused step within 5 / this.
fig("fuse_steps_ceiling_raw_pmd_pieces_over_off", ratio(
    get(parts["fuse_pmd_step_pieces"], "steps_per_s"),
    get(fuse, "step_1000x64B", "off", "steps_per_s")),
    "fuse_pmd_step_pieces", "fuse", STEP_BYTES)
# That step written 71 B at a time, as the packer does: the line writer over memcpy.
fig("raw_pmd_step_71b_pieces_lines_over_memcpy", ratio(
    get(parts["fuse_pmd_step_pieces"], "steps_per_s"),
    get(parts["fuse_pmd_step_pieces_plain"], "steps_per_s")),
    "fuse_pmd_step_pieces", "fuse_pmd_step_pieces_plain", STEP_BYTES)
fig("shard_key_updates_per_s_dim16_sgd",
    get(shard, "headline", "ps_dim16_sgd_push_key_updates_per_s_per_lcore"), "shard")
fig("ps_keys_per_s_ratio_dpdk_over_kernel",
    get(parts["ps"], "ps_keys_per_s_ratio_dpdk_over_kernel"), "ps")
# 1 PS + 1 worker without the switch (each node a core, as on NIC hosts).
fig("ps_direct_keys_per_s_ratio_dpdk_over_kernel_sleeping",
    get(parts["ps_direct"], "ps_direct_keys_per_s_ratio_dpdk_over_kernel_sleeping"), "ps_direct")
fig("ps_direct_keys_per_s_ratio_dpdk_over_kernel_polling",
    get(parts["ps_direct"], "ps_direct_keys_per_s_ratio_dpdk_over_kernel_polling"), "ps_direct")
# The same sleeping with no spin after work on either side (WHARF_IDLE_SPIN_US=0): no target.
fig("ps_direct_keys_per_s_ratio_dpdk_over_kernel_sleeping_nospin",
    get(parts["ps_direct"], "ps_direct_keys_per_s_ratio_dpdk_over_kernel_sleeping_nospin"),
    "ps_direct")
# The kernel baseline over a Linux bridge between network namespaces (containers, hosts).
fig("ps_keys_per_s_ratio_dpdk_over_kernel_bridge",
    get(parts["ps"], "ps_keys_per_s_ratio_dpdk_over_kernel_bridge"), "ps")
for mode in ("sleeping", "polling"):
    fig(f"ps_direct_keys_per_s_ratio_dpdk_over_kernel_bridge_{mode}",
        get(parts["ps_direct"], f"ps_direct_keys_per_s_ratio_dpdk_over_kernel_bridge_{mode}"),
        "ps_direct")
# PS bytes: every phase's goodput over the same run's DPDK 1 MiB stream (MTU 1500, one way,
# both polling, as the PS runs), for both placements of the PS on the direct pair.
PB_DPDK = ("dpdk_ps_vhost", "dpdk_ps_virtio")
stream = get(parts["dpdk_stream"], "gbit_per_s")
ps_bytes_over_stream = {
    k: {n: ratio(get(e, n, "gbit_per_s"), stream) for n in PB_DPDK}
    for k, e in (get(parts["ps_bytes"], "phases") or {}).items()}
# Headlines: sparse, 8 in flight, the PS on the vhost side (where the PS runs in the other
# direct-pair figures); report.json has every phase and placement.
for op in ("pull", "push", "push_pull"):
    for size in ("1MiB", "64KiB"):
        fig(f"ps_bytes_{op}_{size}_over_stream",
            get(ps_bytes_over_stream, f"sparse_{op}_{size}_if8", "dpdk_ps_vhost"),
            "ps_bytes", "dpdk_stream")
for label in ("dpdk_over_kernel_loopback", "dpdk_over_kernel_bridge", "ps_virtio_over_ps_vhost"):
    fig(f"ps_bytes_ratio_{label}", get(parts["ps_bytes"], f"ps_bytes_ratio_{label}"), "ps_bytes")
# The PS on 2 lanes against 1 (this 2-core VM also runs the switch and 2 workers), and the
# PS's work per CPU-second, the figure that carries over to a host with cores to spare.
for proto in ("dpdk", "kernel"):
    fig(f"ps_lanes_keys_per_s_ratio_2_over_1_{proto}",
        get(parts["ps_lanes"], f"ps_lanes_keys_per_s_ratio_2_over_1_{proto}"), "ps_lanes")
for lanes in (1, 2):
    fig(f"ps_keys_per_cpu_s_ratio_dpdk_over_kernel_{lanes}lane",
        get(parts["ps_lanes"], f"ps_keys_per_cpu_s_ratio_dpdk_over_kernel_{lanes}lane"), "ps_lanes")
# A 2-lane PS and worker over the direct pair: a queue pair per lane against one shared queue
# (software steering), and against the kernel's two threads a node.
for label in ("queue_each_over_shared", "dpdk_over_kernel"):
    fig(f"ps_direct_lanes_keys_per_s_ratio_{label}",
        get(parts["ps_direct_lanes"], f"ps_direct_lanes_keys_per_s_ratio_{label}"), "ps_direct_lanes")
fig("train_samples_ratio_dpdk_over_kernel",
    get(parts["train"], "train_samples_ratio_dpdk_over_kernel"), "train")
fig("train_samples_ratio_dpdk_over_kernel_bridge",
    get(parts["train"], "train_samples_ratio_dpdk_over_kernel_bridge"), "train")
fig("train_samples_ratio_fuse_on_over_off",
    get(parts["train"], "train_samples_ratio_fuse_on_over_off"), "train")
for part in ("train_direct", "train_torch_direct"):
    for sfx in ("", "_bridge", "_polling", "_bridge_polling"):
        fig(f"{part}_samples_ratio_dpdk_over_kernel{sfx}",
            get(parts[part], f"{part}_samples_ratio_dpdk_over_kernel{sfx}"), part)
# Fusion on the many-small-tensors model (medians over interleaved rounds), both protocols.
for part in ("train_fuse", "train_fuse_direct"):
    for sfx in ("", "_kernel"):
        fig(f"{part}_samples_ratio_fuse_on_over_off{sfx}",
            get(parts[part], f"{part}_samples_ratio_fuse_on_over_off{sfx}"), part)
# The share of the direct pair's DPDK step (fusion off) spent pulling, pushing and in the
# barrier: the most any transport or fusion could take off it.
fig("train_fuse_direct_network_share_dpdk",
    get(parts["train_fuse_direct"], "train_fuse_direct_step_us_dpdk", "off", "pull_push_barrier_share"),
    "train_fuse_direct")
fig("train_torch_samples_ratio_dpdk_over_kernel",
    get(parts["train_torch"], "train_torch_samples_ratio_dpdk_over_kernel"), "train_torch")
fig("train_torch_samples_ratio_dpdk_over_kernel_bridge",
    get(parts["train_torch"], "train_torch_samples_ratio_dpdk_over_kernel_bridge"), "train_torch")
fig("train_torch_samples_ratio_fuse_on_over_off",
    get(parts["train_torch"], "train_torch_samples_ratio_fuse_on_over_off"), "train_torch")

# Per figure: the time(s) of the run(s) it comes from, and why it is null or what it stands on.
headline_run_at, headline_notes = {}, {}
for k, srcs in sources.items():
    times = sorted({run_at.get(n) or ("not run" if parts[n] is None else "unknown") for n in srcs})
    headline_run_at[k] = times[0] if len(times) == 1 else times
    why = []
    if headline[k] is None:
        for n in srcs:
            if n in notes and n != STEP_BYTES:
                why.append(f"{n}: {notes[n]}")
            elif get(parts[n], "notes"):  # bench_e2e's runs that failed, with their reasons
                why.append(f"{n}: " + "; ".join(f"{a}: {b}" for a, b in parts[n]["notes"].items()))
        why = why or ["its inputs have no such field"]
    if step_fallback and STEP_BYTES in srcs:
        why.append("fallback step size: " + step_fallback)
    if why:
        headline_notes[k] = "; ".join(why)

targets = {
    "rtt_p50_ratio_dpdk_over_kernel": ("<=", 0.15),
    "rtt_p50_ratio_dpdk_over_kernel_sleeping": ("<=", 0.5),
    "rtt_p99_over_p50_dpdk_sleeping": ("<=", 3.0),
    "msg_rate_ratio_dpdk_over_kernel": (">=", 5.0),
    "stream_ratio_dpdk_over_kernel": (">=", 1.0),
    "fuse_steps_ratio_on_over_off": (">=", 5.0),
    "fuse_lone_latency_ratio_on_over_off": ("<=", 1.1),
    "ps_keys_per_cpu_s_ratio_dpdk_over_kernel_1lane": (">=", 2.0),
    "ps_keys_per_cpu_s_ratio_dpdk_over_kernel_2lane": (">=", 2.0),
    "shard_key_updates_per_s_dim16_sgd": (">=", 30e6),
    "ps_direct_keys_per_s_ratio_dpdk_over_kernel_polling": (">=", 2.0),
    "ps_direct_keys_per_s_ratio_dpdk_over_kernel_sleeping": (">=", 1.5),
    "ps_keys_per_s_ratio_dpdk_over_kernel": (">=", 1.2),
    "ps_bytes_pull_1MiB_over_stream": (">=", 0.7),
    "ps_bytes_push_1MiB_over_stream": (">=", 0.7),
    "ps_bytes_pull_64KiB_over_stream": (">=", 0.5),
    "ps_bytes_push_64KiB_over_stream": (">=", 0.5),
    "train_samples_ratio_dpdk_over_kernel": (">=", 1.2),
    "train_direct_samples_ratio_dpdk_over_kernel": (">=", 1.2),
    "train_direct_samples_ratio_dpdk_over_kernel_polling": (">=", 1.2),
    "train_torch_direct_samples_ratio_dpdk_over_kernel": (">=", 1.2),
    "train_torch_direct_samples_ratio_dpdk_over_kernel_polling": (">=", 1.2),
    "train_samples_ratio_fuse_on_over_off": (">=", 1.0),
    "train_fuse_samples_ratio_fuse_on_over_off": (">=", 1.3),
}
verdicts = {}
for k, (op, t) in targets.items():
    v = headline.get(k)
    verdicts[k] = None if v is None else (v <= t if op == "<=" else v >= t)

run = {"date": iso(datetime.datetime.now().timestamp()),
       "machine": {"nproc": os.cpu_count(), "cpu": cpu_model(), "kernel": platform.release()},
       "commit": commit(),
       "parts_date": {n: part_time(n) for n in parts}}
report = {"run": run, "headline": headline, "headline_run_at": headline_run_at,
          "headline_notes": headline_notes,
          "targets": {k: f"{op} {t}" for k, (op, t) in targets.items()},
          "met": verdicts, "ps_bytes_over_stream": ps_bytes_over_stream, "parts": parts,
          "parts_run_at": run_at, "notes": notes}
with open(os.path.join(out, "report.json"), "w") as f:
    json.dump(report, f, indent=1)


def when(k):
    """The run time(s) of a figure; marked when not all of it comes from the latest run."""
    t = headline_run_at[k]
    ts = t if isinstance(t, list) else [t]
    old = [x for x in ts if x not in (this_run, "not run")]
    return " + ".join(ts) + (" (earlier run)" if old else "")


rows = [f"Latest run: {this_run}. Each figure carries the time of the run(s) it comes from.", "",
        "| figure | value | target | met | run (UTC) |", "|---|---|---|---|---|"]
for k, v in headline.items():
    t = targets.get(k)
    m = verdicts.get(k)
    val = "null" if v is None else str(v)
    if k in headline_notes:
        val += f" ({headline_notes[k]})"
    rows.append(f"| {k} | {val} | {t[0] + ' ' + str(t[1]) if t else ''} | "
                f"{'' if m is None else ('yes' if m else 'NO')} | {when(k)} |")
rows += ["", "| run | rtt p50 us | rtt p99 us | msgs/s | Gbit/s | run (UTC) |",
         "|---|---|---|---|---|---|"]
for n in ("dpdk_pingpong", "kernel_pingpong", "dpdk_pingpong_sleep", "kernel_pingpong_sleep",
          "dpdk_pingpong_nospin", "kernel_pingpong_nospin", "dpdk_rate", "kernel_rate", "dpdk_stream", "dpdk_stream_jumbo", "kernel_stream"):
    p = parts[n] or {}
    rows.append(f"| {n}{' (failed: ' + notes[n] + ')' if n in notes else ''} | {p.get('rtt_p50_us')} | "
                f"{p.get('rtt_p99_us')} | {p.get('msgs_per_s')} | {p.get('gbit_per_s')} | "
                f"{run_at.get(n) or ('not run' if parts[n] is None else 'unknown')} |")
with open(os.path.join(out, "report.md"), "w") as f:
    f.write("# wharf bench\n\n" + "\n".join(rows) + "\n")
