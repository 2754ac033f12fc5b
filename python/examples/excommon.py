"""What both examples share: the command line (the example's options; every other argument
is a wharf cluster flag, as after `--` on wharf-train), a progress bar and the JSON result."""
import argparse
import json
import os
import sys
import time

import wharf


def parse(doc, defaults):
    """(options, wharf flags): the example's options (defaults: name -> value) and the rest."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0], epilog=(
        "Every other argument is a wharf cluster flag (--role, --task-index, --ps, --workers, "
        "--protocol, --mode, --endpoint-map, ...; see wharf-train -- --help), also read from "
        "TF_CONFIG, Paddle's variables and WHARF_*."))
    ap.add_argument("--eal", default=None,
                    help="EAL arguments of protocol dpdk (default: $WHARF_EAL_ARGS)")
    for name, v in defaults.items():
        ap.add_argument("--" + name.replace("_", "-"), type=type(v), default=v)
    return ap.parse_known_args()


class Progress:
    """A bar per epoch, redrawn on a terminal; otherwise a line EX_PROGRESS_LINES times an
    epoch (4; make demo, which shows both workers' bars, asks for 20)."""

    def __init__(self, epochs, steps, batch):
        self.epochs, self.steps, self.batch = epochs, steps, batch
        self.tty = sys.stdout.isatty()
        self.who = "w%d " % wharf.worker_index()
        try:
            lines = int(os.environ.get("EX_PROGRESS_LINES", "4"))
        except ValueError:
            lines = 4
        self.every = max(1, steps // max(1, lines))

    def start(self):
        self.t0 = time.time()

    def show(self, epoch, done, loss, acc, final=False):
        if not final and not self.tty and (done % self.every != 0 or done == self.steps):
            return
        fill = 30 * done // self.steps if self.steps else 30
        now = time.time()
        if done <= 1:  # timed from the end of the epoch's first step (its barrier lines the
            self.t0 = now  # workers up; the first one waits for the others' start-up)
        sps = (done - 1) * self.batch * wharf.num_workers() / max(now - self.t0, 1e-9)
        end = "\n" if final or not self.tty else ""
        print("%s%sepoch %2d/%d [%s%s] %3d%%  loss %.4f  acc %.4f  %8.0f samples/s" % (
            "\r" if self.tty else "", self.who, epoch, self.epochs, "#" * fill, "." * (30 - fill),
            100 * done // max(self.steps, 1), loss, acc, sps), end=end, flush=True)


def result(**fields):
    """The last line: one JSON object, as wharf-train prints."""
    out = {"role": "worker", "id": wharf.worker_index(), "workers": wharf.num_workers(),
           "mode": wharf.mode(), "protocol": wharf.protocol(), "framework": "pytorch"}
    out.update(fields)
    print(json.dumps(out), flush=True)
