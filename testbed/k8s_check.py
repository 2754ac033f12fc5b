#!/usr/bin/python3
"""k8s_check.py ROOT [FILE.yaml...] — the Kubeflow configs of configs/k8s are what they claim.

Each file (default: every configs/k8s/*.yaml) must parse (python3-yaml) and be a TFJob or a
PaddleJob of kubeflow.org/v1 whose replicas the training operator accepts (its replica types,
container and port names), and:
  - every container runs `wharf-pod wharf-X` with wharf-X an executable of the tree, and
    every --flag of its args is in that executable's own --help;
  - every WHARF_/PADDLE_/TRAINING_ variable it sets is read by the sources (wharf-pod.sh
    included);
  - WHARF_CTL_TOKEN_FILE points into a mounted Secret volume;
  - a Paddle PS list names the Master's service (JOB-master-0) and its port;
  - WHARF_PROTOCOL=dpdk pods: hugepages-2Mi and one extended (SR-IOV) resource requested and
    limited alike, a HugePages-2Mi emptyDir at /dev/hugepages, the Multus networks annotation
    naming WHARF_POD_NETWORK, network-status through the downward API where wharf-pod reads it;
    kernel pods ask for none of these.
Prints one line per problem (FILE: replica: what) and exits 1 if any; else one line per file.

k8s_check.py ROOT --local FILE.yaml OUTDIR PORT [ARG...] — writes OUTDIR/<type>-<index>.sh for
every pod of the job: the pod's container as the training operator starts it, on this host:
its command, args (a wharf-train's plus ARG...) and env; TF_CONFIG as the operator writes it
(a PaddleJob: the Master's service in the PS list) with the services spelled localhost, a
host name resolved as a service's is, on ports PORT, PORT+1..; the pod's address 127.0.0.1;
each volume under OUTDIR/mnt/<volume> (the caller writes a Secret's keys there).
t_k8s_configs.sh runs them.
"""
import json
import os
import re
import shlex
import subprocess
import sys

import yaml

ROOT = os.path.abspath(sys.argv[1])
FILES = sys.argv[2:] or sorted(os.path.join(ROOT, "configs/k8s", f)
                               for f in os.listdir(os.path.join(ROOT, "configs/k8s"))
                               if f.endswith(".yaml"))
OPERATOR = {  # kind: (replica-spec key, replica types, container name, port name)
    "TFJob": ("tfReplicaSpecs", {"PS", "Worker", "Chief", "Master", "Evaluator"}, "tensorflow",
              "tfjob-port"),
    "PaddleJob": ("paddleReplicaSpecs", {"Master", "Worker"}, "paddle", "master"),
}
TOKEN_VAR = "WHARF_CTL_TOKEN_FILE"
STATUS_DEFAULT = "/etc/podinfo/network-status"  # wharf-pod.sh's WHARF_POD_NETWORK_STATUS
problems = []
_help = {}


def sources():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "--cached", "--others",
                          "--exclude-standard"], capture_output=True, text=True).stdout.split()
    text = []
    for f in out:
        if f.endswith((".c", ".h", ".sh")) and not f.startswith("testbed/tests/"):
            with open(os.path.join(ROOT, f), errors="replace") as fh:
                text.append(fh.read())
    return "\n".join(text)


SOURCE = sources()


def help_of(prog):
    if prog not in _help:
        exe = os.path.join(ROOT, "build", prog)
        r = subprocess.run([exe, "--", "--help"], capture_output=True, text=True, timeout=20,
                           stdin=subprocess.DEVNULL)
        _help[prog] = r.stdout + r.stderr
    return _help[prog]


def check_container(where, job, c, port_name, volumes):
    def bad(msg):
        problems.append(f"{where}: {msg}")

    cmd = c.get("command") or []
    if len(cmd) != 2 or cmd[0] != "wharf-pod" or not re.fullmatch(r"wharf-[a-z-]+", cmd[1]):
        return bad(f"command {cmd}: expected [wharf-pod, wharf-X]")
    if not os.access(os.path.join(ROOT, "build", cmd[1]), os.X_OK):
        return bad(f"{cmd[1]} is not an executable of the tree (build/{cmd[1]})")
    text = help_of(cmd[1])
    for a in c.get("args") or []:
        if not isinstance(a, str):
            bad(f"argument {a!r} is not a string (quote numbers)")
        elif a.startswith("--") and not re.search(r"(?<![A-Za-z0-9-])" + re.escape(a.split("=")[0])
                                                  + r"(?![A-Za-z0-9-])", text):
            bad(f"{a}: not an option of {cmd[1]} (its -- --help)")
    env = {e["name"]: e for e in c.get("env") or []}
    for n in env:
        if re.match(r"(WHARF|PADDLE|TRAINING)_", n) and \
                not re.search(r"\b" + n + r"\b", SOURCE):
            bad(f"env {n}: no source reads it")
    mounts = {m["name"]: m for m in c.get("volumeMounts") or []}
    tok = env.get(TOKEN_VAR, {}).get("value")
    if not tok:
        bad(f"no {TOKEN_VAR}")
    else:
        hits = [m for n, m in mounts.items() if "secret" in volumes.get(n, {})
                and tok.startswith(m["mountPath"].rstrip("/") + "/")]
        if not hits:
            bad(f"{TOKEN_VAR}={tok} is not inside a mounted Secret volume")
    proto = env.get("WHARF_PROTOCOL", {}).get("value")
    res = c.get("resources") or {}
    req, lim = res.get("requests") or {}, res.get("limits") or {}
    ext = sorted(k for k in set(req) | set(lim) if "/" in k)
    ports = [p.get("name") for p in c.get("ports") or []]
    if port_name not in ports:
        bad(f"no port named {port_name} (the operator's service port)")
    if proto == "kernel":
        if ext or "hugepages-2Mi" in req or "hugepages-2Mi" in lim:
            bad("kernel protocol, yet hugepages or an extended resource requested")
    elif proto == "dpdk":
        if not req.get("hugepages-2Mi") or req.get("hugepages-2Mi") != lim.get("hugepages-2Mi"):
            bad("dpdk: hugepages-2Mi not requested and limited alike")
        if len(ext) != 1 or req.get(ext[0]) != lim.get(ext[0]) or str(req.get(ext[0])) != "1":
            bad(f"dpdk: expected one SR-IOV resource, 1 requested and limited, got {ext}")
        hp = [m for n, m in mounts.items()
              if (volumes.get(n, {}).get("emptyDir") or {}).get("medium") == "HugePages-2Mi"]
        if not hp or hp[0]["mountPath"] != "/dev/hugepages":
            bad("dpdk: no HugePages-2Mi emptyDir mounted at /dev/hugepages")
        net = env.get("WHARF_POD_NETWORK", {}).get("value")
        nets = job.get("annotations", {}).get("k8s.v1.cni.cncf.io/networks", "")
        if not net or net not in [n.strip().split("@")[0] for n in nets.split(",")]:
            bad(f"dpdk: WHARF_POD_NETWORK={net} not in the networks annotation '{nets}'")
        status = env.get("WHARF_POD_NETWORK_STATUS", {}).get("value", STATUS_DEFAULT)
        ok = False
        for n, m in mounts.items():
            for it in (volumes.get(n, {}).get("downwardAPI") or {}).get("items", []):
                fp = (it.get("fieldRef") or {}).get("fieldPath", "")
                if os.path.join(m["mountPath"], it["path"]) == status and \
                        "k8s.v1.cni.cncf.io/network-status" in fp:
                    ok = True
        if not ok:
            bad(f"dpdk: Multus's network-status is not mounted at {status}")
    else:
        bad(f"WHARF_PROTOCOL={proto}: expected kernel or dpdk")
    return env


def check(path):
    rel = os.path.relpath(path, ROOT)
    try:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        problems.append(f"{rel}: does not parse: {' '.join(str(e).split())}")
        return
    for d in docs:
        kind = d.get("kind")
        if d.get("apiVersion") != "kubeflow.org/v1" or kind not in OPERATOR:
            problems.append(f"{rel}: {d.get('apiVersion')}/{kind}: expected a kubeflow.org/v1 "
                            "TFJob or PaddleJob")
            continue
        key, types, cname, pname = OPERATOR[kind]
        name = d["metadata"]["name"]
        specs = d["spec"].get(key) or {}
        if not specs or set(specs) - types:
            problems.append(f"{rel}: {key} {sorted(specs)}: the operator knows {sorted(types)}")
        for rtype, spec in specs.items():
            where = f"{rel}: {rtype}"
            tmpl = spec["template"]
            meta = tmpl.get("metadata") or {}
            volumes = {v["name"]: v for v in tmpl["spec"].get("volumes") or []}
            cs = [c for c in tmpl["spec"]["containers"] if c["name"] == cname]
            if not cs:
                problems.append(f"{where}: no container named {cname}")
                continue
            env = check_container(where, meta, cs[0], pname, volumes) or {}
            pl = env.get("PADDLE_PSERVERS_IP_PORT_LIST", {}).get("value")
            if kind == "PaddleJob" and pl is not None:
                port = [p["containerPort"] for p in specs["Master"]["template"]["spec"]["containers"][0]["ports"]
                        if p["name"] == pname]
                if pl != f"{name}-master-0:{port[0] if port else '?'}":
                    problems.append(f"{where}: PADDLE_PSERVERS_IP_PORT_LIST={pl}, the operator's "
                                    f"service is {name}-master-0:{port}")
        counts = ", ".join(f"{t} x{s.get('replicas')}" for t, s in specs.items())
        print(f"k8s_check: {rel}: {kind} {name}, {counts}")


def local(path, outdir, port, extra):
    with open(path) as f:
        job = yaml.safe_load(f)
    key, _, cname, pname = OPERATOR[job["kind"]]
    name, specs = job["metadata"]["name"], job["spec"][key]
    order = sorted(specs, key=lambda t: (t not in ("PS", "Master"), t))
    addr, p = {}, port
    for t in order:
        for i in range(specs[t]["replicas"]):
            addr[(t, i)] = f"localhost:{p}"
            p += 1
    cluster = {}
    for (t, i), a in addr.items():
        cluster.setdefault(t.lower(), []).append(a)
    for (t, i), a in addr.items():
        c = [c for c in specs[t]["template"]["spec"]["containers"] if c["name"] == cname][0]
        mnt = {m["mountPath"].rstrip("/"): os.path.join(outdir, "mnt", m["name"])
               for m in c.get("volumeMounts") or []}

        def where(v):
            for mp, d in mnt.items():
                if v == mp or v.startswith(mp + "/"):
                    return d + v[len(mp):]
            return v

        env = {"PATH": os.environ["PATH"], "HOME": outdir, "HOSTNAME": f"{name}-{t.lower()}-{i}"}
        for k in ("WHARF_TCP_RTO_MIN_US",):
            if k in os.environ:
                env[k] = os.environ[k]
        for e in c.get("env") or []:
            if "value" in e:
                env[e["name"]] = where(e["value"])
            else:
                fp = e["valueFrom"]["fieldRef"]["fieldPath"]
                env[e["name"]] = "127.0.0.1" if fp == "status.podIP" else str(i)
        if job["kind"] == "TFJob":
            env["TF_CONFIG"] = json.dumps({"cluster": cluster,
                                           "task": {"type": t.lower(), "index": i}})
        else:
            master = addr[("Master", 0)]
            env["PADDLE_PSERVERS_IP_PORT_LIST"] = master
            env["PADDLE_PORT"] = master.split(":")[1]
        for d in mnt.values():
            os.makedirs(d, exist_ok=True)
        argv = list(c["command"]) + [where(a) for a in c.get("args") or []]
        argv += extra if "wharf-train" in c["command"] else []
        with open(os.path.join(outdir, f"{t.lower()}-{i}.sh"), "w") as f:
            f.write("exec env -i " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
                    + " " + " ".join(shlex.quote(a) for a in argv) + "\n")


if len(sys.argv) > 2 and sys.argv[2] == "--local":
    local(os.path.abspath(sys.argv[3]), os.path.abspath(sys.argv[4]), int(sys.argv[5]),
          sys.argv[6:])
    sys.exit(0)
for f in FILES:
    check(f)
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
