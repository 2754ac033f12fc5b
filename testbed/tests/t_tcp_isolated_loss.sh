#!/usr/bin/env bash
# Loss recovery between two wharf stacks: two nodes over wharf-vswitch with isolated
# losses (--loss 0.002 of the frames, TSO off so that a frame is a segment, nothing else),
# traffic both ways (wharf-xfer client sending
# messages of up to 256 KiB to an echoing server, every echo checked). With data both ways
# the receivers' SACK blocks ride on their data segments; each isolated loss must be
# repaired by fast retransmit, not wait for a retransmission timeout.
# Pass: every echo intact; the TCP-lite counters of both nodes (WHARF_TL_STATS=1) show
# fast retransmits, and timeouts at most a quarter of them (a loss at a message's very end,
# with nothing behind it to draw duplicate ACKs, still takes an RTO; on a loaded 2-core
# machine a late ACK sometimes outlives the RTO: seen 4-6 timeouts for ~30 fast retransmits
# under load, 2 alone), plus one per frame the switch dropped for want of room (tx_fail:
# bursts, not the isolated losses this test injects).
#
# Knobs (environment): WHARF_ISOLOSS_COUNT (messages, 400), WHARF_ISOLOSS_SEED (42).
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
COUNT=${WHARF_ISOLOSS_COUNT:-400}
SEED=${WHARF_ISOLOSS_SEED:-42}
SECS=90
MIN=${WHARF_ISOLOSS_MIN:-1}
MAX=${WHARF_ISOLOSS_MAX:-262144}
export WHARF_TL_STATS=1
# One frame one segment: a lost 64 KiB TSO frame is a burst of ~45 segments, no isolated loss.
export WHARF_TSO=0

tb_switch 2 --loss 0.002 --seed "$SEED" || tb_fail "switch"
tb_node srv 1 xfer --ip 198.18.0.2/24 --port 7210 --server --echo --seconds $((SECS + 10))
tb_wait_log "$TB_DIR/srv.log" "server on port" 20 || { cat "$TB_DIR/srv.log"; tb_fail "server did not come up"; }
tb_run cli 0 $((SECS + 5)) xfer --ip 198.18.0.1/24 --peer 198.18.0.2 --port 7210 --count "$COUNT" \
	--echo --seed "$SEED" --min-size "$MIN" --max-size "$MAX" --seconds "$SECS"
crc=$?
tb_stop srv
tb_stop switch
echo "client:  $(grep '^{' "$TB_DIR/cli.out" | tail -n 1)"
echo "switch:  $(grep '^{' "$TB_DIR/switch.out" | tail -n 1)"
# "<time> INFO wharf.tl: tl_tcp: ... retrans R fast F rto T ..." from each node at teardown.
read -r retr fast rto < <(cat "$TB_DIR/cli.log" "$TB_DIR/srv.log" | sed -n \
	's/^.* wharf\.tl: tl_tcp: .* retrans \([0-9]*\) fast \([0-9]*\) rto \([0-9]*\) .*/\1 \2 \3/p' |
	awk '{ r += $1; f += $2; t += $3 } END { print r + 0, f + 0, t + 0 }')
lost=$(grep -o '"lost":[0-9]*' "$TB_DIR/switch.out" | cut -d: -f2 | awk '{ n += $1 } END { print n + 0 }')
txfail=$(grep -o '"tx_fail":[0-9]*' "$TB_DIR/switch.out" | cut -d: -f2 | awk '{ n += $1 } END { print n + 0 }')
echo "switch lost $lost frames (tx_fail $txfail); both nodes: retrans $retr, fast retransmits $fast, timeouts $rto"
fail=0
[ $crc -eq 0 ] && grep -q '"ok": *true' "$TB_DIR/cli.out" \
	&& tb_pass "$COUNT messages echoed intact over isolated losses" \
	|| { tb_log "FAIL: client (rc $crc)"; fail=1; }
[ "$fast" -gt 0 ] && [ $(((rto - txfail) * 4)) -le "$fast" ] \
	&& tb_pass "losses repaired by fast retransmit: $fast fast retransmits, $rto timeouts ($txfail switch tx_fail)" \
	|| { tb_log "FAIL: $fast fast retransmits, $rto timeouts for $lost lost frames ($txfail switch tx_fail)"; fail=1; }
[ $fail -eq 0 ] || exit 1
