#!/usr/bin/env python3
"""soak_report.py — the fault soak's final accounting (testbed/soak/soak_run.sh calls it last).

    soak_report.py TB_DIR FAILED_CHECKS SECONDS WORKER...
      WORKER = name:id:pushes:finished   (finished 1 = every one of pushes was acknowledged: the
                                          process printed its read-back line, or stopped on
                                          SIGTERM with that many acknowledged)

Reads the ledger snapshots the driver left in TB_DIR (ledger.<tag>, one JSON line each from
ckpt_ledger.py, ledger.final last), the switch's counters (switch.out) and the workers' logs
(resends), and prints per worker id and in total: pushes numbered (acknowledged, or applied
before the sender died), applied, lost, doubled. For worker id w:
  numbered = max(highest applied sequence in any snapshot, pushes of a worker that ran to the
             end or stopped on SIGTERM — each of those was acknowledged before the next was
             sent)
  applied  = the value the servers hold at the end
  lost     = numbered - applied when positive; doubled = applied - numbered when positive.
A sequence that was applied once counts in numbered even if its sender died before the
acknowledgement: the server applied it, and no later push can apply it again.
Exit status 1 when anything was lost or doubled (or a failed check was passed in).
"""
import glob
import json
import os
import re
import sys


def load_snapshots(d):
    snaps = {}
    for p in sorted(glob.glob(os.path.join(d, "ledger.*")), key=os.path.getmtime):
        try:
            snaps[os.path.basename(p)[len("ledger."):]] = json.load(open(p))["workers"]
        except (OSError, ValueError, KeyError) as e:
            print(f"soak: snapshot {p} unreadable: {e}", file=sys.stderr)
    return snaps


def switch_counters(d):
    sw = {}
    try:
        line = [x for x in open(os.path.join(d, "switch.out")) if x.startswith("{")][-1]
        for p in json.loads(line)["ports"]:
            for k in ("rx", "tx", "lost", "corrupted", "duplicated", "reordered"):
                sw[k] = sw.get(k, 0) + int(p.get(k, 0))
    except (OSError, IndexError, ValueError, KeyError) as e:
        print(f"soak: switch counters unreadable: {e}", file=sys.stderr)
    return sw


def resends(d, names):
    resent = reconn = 0
    for n in names:
        try:
            text = open(os.path.join(d, n + ".log"), errors="replace").read()
        except OSError:
            continue
        for m in re.finditer(r"resent (\d+) unacknowledged", text):
            resent += int(m.group(1))
            reconn += 1
    return resent, reconn


def main(argv):
    d, fails, secs = argv[1], int(argv[2]), int(argv[3])
    workers = [w.split(":") for w in argv[4:]]
    snaps = load_snapshots(d)
    final = snaps.get("final", {})
    numbered = {}
    for tag, led in snaps.items():
        for w, e in led.items():
            numbered[w] = max(numbered.get(w, 0), e["last_seq"])
    for _name, wid, pushes, finished in workers:
        if finished == "1":
            numbered[wid] = max(numbered.get(wid, 0), int(pushes))
    tot = {"numbered": 0, "applied": 0, "lost": 0, "doubled": 0}
    for w in sorted(numbered, key=int):
        applied = final.get(w, {"value": 0})["value"]
        lost, doubled = max(0, numbered[w] - applied), max(0, applied - numbered[w])
        print(f"soak: worker id {w}: pushes numbered {numbered[w]}, applied {applied}, "
              f"lost {lost}, doubled {doubled}", file=sys.stderr)
        for k, v in (("numbered", numbered[w]), ("applied", applied), ("lost", lost),
                     ("doubled", doubled)):
            tot[k] += v
    sw = switch_counters(d)
    resent, reconn = resends(d, [w[0] for w in workers])
    out = {"soak": "wharf", "seconds": secs, "worker_processes": len(workers),
           "pushes_numbered": tot["numbered"], "applied": tot["applied"], "lost": tot["lost"],
           "doubled": tot["doubled"], "resent": resent, "reconnects": reconn, "switch": sw,
           "failed_checks": fails}
    print(json.dumps(out, separators=(",", ":")))
    print(f"soak: pushes numbered {tot['numbered']}, applied {tot['applied']}, lost "
          f"{tot['lost']}, doubled {tot['doubled']}; resent {resent} over {reconn} reconnects; "
          f"switch: {sw.get('lost', '?')} lost, {sw.get('corrupted', '?')} corrupted, "
          f"{sw.get('duplicated', '?')} duplicated, {sw.get('reordered', '?')} reordered of "
          f"{sw.get('rx', '?')} frames; {secs} s", file=sys.stderr)
    return 1 if tot["lost"] or tot["doubled"] or fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
