#!/usr/bin/env bash
# The short fault soak (make test, ~40 s): 1 PS, 2 "count" workers over wharf-vswitch with
# seeded 1% loss, 1% duplication, 2% reordering, 0.5% corruption. One PS SIGTERM+restore, one
# worker SIGTERM and one worker SIGKILL (each replaced under a fresh worker id), then one PS
# SIGKILL+restore from its last checkpoint; after each fault the servers' state is read from
# outside and every worker's ledger must hold (applied == highest applied sequence: lost 0,
# doubled 0). The worker SIGTERM must be a graceful stop: exit 0 within 5 s (no SIGKILL), its
# stop logged, the servers holding exactly the pushes it had acknowledged. Then a worker restarts under its old id and all its pushes must apply (it
# resumes its sequence with PS_T_HELLO). The driver and what it checks: testbed/soak/soak_run.sh.
# The SIGKILL phase holds because the PS writes every push into its write-ahead log before
# acknowledging it (ps_core/ps_wal.c) and replays the log after the checkpoint on restart;
# SOAK_SKIP_CRASH=1 leaves it out (the test is then skipped, exit 77).
set -u
# 2 s of traffic between faults (~700 pushes per worker, dozens of impaired frames); the workers
# of the last cycle push 4,000 each, so both still run at the PS SIGKILL (about 2,200 and 1,400
# of them pushed by then at ~350/s; with another test running beside this one, the faults
# before took longer and one had pushed 2,468 at the checkpoint, and 3,000 ran out before the
# kill). The SIGKILL comes 2 s after a checkpoint (wharf-ctl save),
# which restarts the periodic ones' clock: at 3 s apart the next is 1 s away, so the log holds
# those 2 s of acknowledged pushes for the restart to replay (at 2 s apart it raced the kill).
export SOAK_CKPT_INTERVAL=${SOAK_CKPT_INTERVAL:-3}
export SOAK_SAME_ID=${SOAK_SAME_ID-1}
export SOAK_PS=${SOAK_PS:-1} SOAK_CYCLES=${SOAK_CYCLES:-1} SOAK_PUSHES=${SOAK_PUSHES:-4000}
export SOAK_DELAY_US=${SOAK_DELAY_US:-2000} SOAK_PHASE_S=${SOAK_PHASE_S:-2}
export SOAK_BASE_PORT=${SOAK_BASE_PORT:-47860}
exec "$(dirname "$0")/../soak/soak_run.sh"
