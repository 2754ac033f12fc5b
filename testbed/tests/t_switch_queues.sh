#!/usr/bin/env bash
# The switch's ports of several queues (wharf-vswitch --queues): it spreads what it sends a
# node over the node's queues by dpdk_net's RSS, and a queue the node did not enable gets
# nothing. Port 0: a wharf-perf echo server on 2 lcores and 2 queues (WHARF_PORT_RSS=peer);
# port 1: a client on 1 lcore whose vdev has 2 queues: first as it runs by default, reading
# both (lcore 0 reads a virtio device's every queue), then with WHARF_PORT_QUEUES=1, which
# enables queue 0 alone. Shown: each time 8 connections' 2400 echoes arrive intact (a
# connection whose hash picks queue 1 would lose every frame the switch sent it there), the
# switch redirected frames meant for the second client's queue 1 to queue 0
# (queue_fallback) and failed to send none after the client attached, and the server's two
# lcores each read frames from their own queue with none handed over.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
tb_switch 2 --queues 2,2 || tb_fail switch
TB_QUEUES=2 TB_EAL_CORE=0-1 tb_node srv 0 perf --ip 198.18.0.2/24 --server --port 7000 --echo \
	--lcores 2 --seconds 60
tb_wait_log "$TB_DIR/srv.log" "server on port" 20 || tb_fail "perf server did not come up"
for cli in cli cli1; do
	q1=; [ "$cli" = cli1 ] && q1=1
	WHARF_PORT_QUEUES=$q1 TB_QUEUES=2 TB_EAL_CORE=1 tb_run $cli 1 40 perf --ip 198.18.0.1/24 \
		--peer 198.18.0.2 --port 7000 --connections 8 --count 300 --verify --seconds 30 ||
		{ tail -n 5 "$TB_DIR/$cli.log" >&2; tb_fail "$cli failed"; }
	out=$TB_DIR/$cli.out
	[ "$(tb_json "$out" msgs)" = 2400 ] || tb_fail "$cli: $(tb_json "$out" msgs) echoes of 2400"
	[ "$(tb_json "$out" corrupt)" = 0 ] && [ "$(tb_json "$out" errors)" = 0 ] || tb_fail "$cli: corrupt echoes or errors"
done
grep -q "lcore 0 reads all 2" "$TB_DIR/cli.log" || tb_fail "the 1-lcore client did not say it reads both of its queues"
grep -q "one queue of 2 is used" "$TB_DIR/cli1.log" || tb_fail "the WHARF_PORT_QUEUES=1 client did not say it uses one of its 2 queues"
tb_stop srv
tb_stop switch
sw=$TB_DIR/switch.out
fb=$(tb_json "$sw" queue_fallback) # the last port's: the client's
[ "$fb" -gt 0 ] || tb_fail "the switch sent the client nothing meant for its queue 1: the test shows nothing"
srv=$TB_DIR/srv.out
rxq=$(grep '^{' "$srv" | tail -n 1 | sed -E 's/.*"rx_queue":\[([0-9,]*)\].*/\1/')
for v in ${rxq//,/ }; do [ "$v" -gt 0 ] || tb_fail "a server queue carried no frames: $rxq"; done
[ "$(tb_json "$srv" queues)" = 2 ] || tb_fail "the server uses $(tb_json "$srv" queues) queues"
tb_pass "2400 echoes intact each time; $fb frames for the second client's unused queue 1 sent on queue 0; server frames per queue $rxq"
