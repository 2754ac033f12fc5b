#!/usr/bin/env bash
# The long fault soak (make soak; minutes, bounded): 2 PS, 2 running "count" workers over
# wharf-vswitch with seeded loss, duplication, reordering and corruption; SOAK_CYCLES rounds of
# PS SIGTERM+restore (alternating servers) and worker SIGTERM/SIGKILL (replaced under fresh
# ids; each worker SIGTERM a graceful stop: exit 0 within 5 s, exactly its acknowledged pushes
# on the servers), then a PS SIGKILL+restore from its last checkpoint plus its write-ahead log,
# and a worker restarted under its old id. Ledger checked from outside after every fault.
# Driver: testbed/soak/soak_run.sh.
# Every knob is an environment variable (see soak_run.sh); the defaults below take ~5 min
# (bounded by SOAK_TIMEOUT, 900 s). The SIGKILL phase and the same-id restart are pass/fail
# checks (the PS write-ahead log and the workers' PS_T_HELLO make them hold).
set -u
export SOAK_PS=${SOAK_PS:-2} SOAK_CYCLES=${SOAK_CYCLES:-5} SOAK_PUSHES=${SOAK_PUSHES:-20000}
export SOAK_DELAY_US=${SOAK_DELAY_US:-1000} SOAK_PHASE_S=${SOAK_PHASE_S:-6}
export SOAK_LOSS=${SOAK_LOSS:-0.02} SOAK_DUP=${SOAK_DUP:-0.02} SOAK_REORDER=${SOAK_REORDER:-0.05}
export SOAK_CORRUPT=${SOAK_CORRUPT:-0.01} SOAK_SAME_ID=${SOAK_SAME_ID-1}
export SOAK_BASE_PORT=${SOAK_BASE_PORT:-47900}
exec timeout --kill-after=20 "${SOAK_TIMEOUT:-900}" "$(dirname "$0")/soak/soak_run.sh"
