#!/usr/bin/env bash
# The short fault soak (make test, ~60-90 s): 1 PS, 2 "count" workers over wharf-vswitch with
# seeded 1% loss, 1% duplication, 2% reordering, 0.5% corruption. One PS SIGTERM+restore, one
# worker SIGTERM and one worker SIGKILL (each replaced under a fresh worker id), then one PS
# SIGKILL+restore from its last checkpoint; after each fault the servers' state is read from
# outside and every worker's ledger must hold (applied == highest applied sequence: lost 0,
# doubled 0). Then a worker restarts under its old id and all its pushes must apply (it
# resumes its sequence with PS_T_HELLO). The driver and what it checks: testbed/soak/soak_run.sh.
# The SIGKILL phase holds because the PS writes every push into its write-ahead log before
# acknowledging it (ps_core/ps_wal.c) and replays the log after the checkpoint on restart;
# SOAK_SKIP_CRASH=1 leaves it out (the test is then skipped, exit 77).
set -u
export SOAK_SAME_ID=${SOAK_SAME_ID-1}
export SOAK_PS=${SOAK_PS:-1} SOAK_CYCLES=${SOAK_CYCLES:-1} SOAK_PUSHES=${SOAK_PUSHES:-4000}
export SOAK_DELAY_US=${SOAK_DELAY_US:-2000} SOAK_PHASE_S=${SOAK_PHASE_S:-3}
export SOAK_BASE_PORT=${SOAK_BASE_PORT:-47860}
exec "$(dirname "$0")/../soak/soak_run.sh"
