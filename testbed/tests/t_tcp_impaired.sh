#!/usr/bin/env bash
# TCP-lite integrity over an impaired switch: two wharf nodes over wharf-vswitch with
# --loss 0.05 --reorder 0.05 --dup 0.02 --corrupt 0.01; the client (wharf-xfer) sends
# WHARF_IMPAIRED_COUNT (1,000 in make test; the full check is WHARF_IMPAIRED_COUNT=10000) messages of log-uniform random sizes from 1 B to 1 MiB,
# the server (wharf-xfer --verify) checks that each arrives exactly once, in order and
# intact. Prints what the switch did to the frames (lost, corrupted, duplicated,
# reordered per port) and the receiver's verdict.
#
# Knobs (environment): WHARF_IMPAIRED_COUNT (messages), WHARF_IMPAIRED_MAX (largest body),
# WHARF_IMPAIRED_SEED (switch and generator seed), WHARF_IMPAIRED_SECS (time bound of the
# transfer; the whole test stays under it plus ~20 s).
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
COUNT=${WHARF_IMPAIRED_COUNT:-1000}
MAX=${WHARF_IMPAIRED_MAX:-1048576}
SEED=${WHARF_IMPAIRED_SEED:-42}
SECS=${WHARF_IMPAIRED_SECS:-170}

tb_switch 2 --loss 0.05 --reorder 0.05 --dup 0.02 --corrupt 0.01 --seed "$SEED" || tb_fail "switch"
tb_node srv 1 xfer --ip 198.18.0.2/24 --port 7200 --server --verify "$SEED" --count "$COUNT" \
	--min-size 1 --max-size "$MAX" --seconds $((SECS + 10))
tb_wait_log "$TB_DIR/srv.log" "server on port" 20 || { cat "$TB_DIR/srv.log"; tb_fail "server did not come up"; }
tb_run cli 0 $((SECS + 5)) xfer --ip 198.18.0.1/24 --peer 198.18.0.2 --port 7200 --count "$COUNT" \
	--seed "$SEED" --min-size 1 --max-size "$MAX" --seconds "$SECS"
crc=$?
# The server exits by itself once --count arrived (or at its --seconds); give it a moment.
for _ in $(seq 1 50); do kill -0 "${TB_PIDS[srv]}" 2>/dev/null || break; sleep 0.1; done
# Its own exit status too: a teardown that frees what the PMD still holds dies here (139).
src=0
if ! kill -0 "${TB_PIDS[srv]}" 2>/dev/null; then wait "${TB_PIDS[srv]}"; src=$?; unset "TB_PIDS[srv]"; fi
tb_stop srv
tb_stop switch
echo "client:  $(grep '^{' "$TB_DIR/cli.out" | tail -n 1)"
echo "server:  $(grep '^{' "$TB_DIR/srv.out" | tail -n 1)"
echo "switch:  $(grep '^{' "$TB_DIR/switch.out" | tail -n 1)"
grep -v TELEMETRY "$TB_DIR/cli.log" "$TB_DIR/srv.log" >&2
sw=$TB_DIR/switch.out
for k in lost corrupted duplicated reordered; do
	printf 'switch %-11s' "$k"; grep -o "\"$k\":[0-9]*" "$sw" | cut -d: -f2 | tr '\n' ' '; echo
done
ok=$(grep '^{' "$TB_DIR/srv.out" | tail -n 1 | grep -o '"ok":[a-z]*' | cut -d: -f2)
got=$(tb_json "$TB_DIR/srv.out" ok_msgs)
[ "$crc" -eq 0 ] || tb_fail "client exited $crc (see its JSON line and log above)"
[ "$src" -lt 128 ] || tb_fail "server died with signal $((src - 128)) after its run"
[ "$ok" = true ] && [ "$got" = "$COUNT" ] \
	|| tb_fail "receiver verdict: ok=$ok, $got of $COUNT messages exactly once, in order, intact"
tb_pass "$COUNT messages (1 B..$MAX B) exactly once, in order, intact through loss/reorder/dup/corrupt"
