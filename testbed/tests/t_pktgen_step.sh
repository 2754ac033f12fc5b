#!/usr/bin/env bash
# wharf-pktgen --step, the raw PMD floor that make bench sets beside fusion: over the bench's
# direct virtio-user <-> vhost-user pair, half a second of steps of 70,000 B in 9000-byte
# frames, the same written 71 B at a time by fuse's line writer and by memcpy (--piece 71
# [--plain]), and of 100,003 B in 1514-byte frames (a short last frame). Shown: the sender
# counted as many acknowledged steps as the receiver sent, none of a step's bytes was left
# over, and bad flags (step 0, a frame over the MTU, a piece of 0, a stray argument) are
# refused with exit status 2 before any device is touched.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init

# run_step TAG BYTES MTU [sender args]
run_step() {
	local tag=$1 bytes=$2 mtu=$3 sock=$TB_DIR/pg-$1.sock; shift 3
	"$TB_BUILD/wharf-pktgen" $(tb_eal "pgr$tag" | sed -E "s/^-l [0-9]+/-l $(tb_core 1)/") \
		--vdev=net_vhost0,iface=$sock,queues=1 -- --rx --step "$bytes" --mtu "$mtu" \
		--seconds 0.5 >"$TB_DIR/pgr$tag.out" 2>"$TB_DIR/pgr$tag.log" &
	TB_PIDS[pgr$tag]=$!
	for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
	timeout --kill-after=5 30 "$TB_BUILD/wharf-pktgen" $(tb_eal "pgt$tag") \
		--vdev=virtio_user0,path=$sock,queues=1,queue_size=1024 -- --tx --step "$bytes" \
		--mtu "$mtu" --seconds 0.5 "$@" >"$TB_DIR/pgt$tag.out" 2>"$TB_DIR/pgt$tag.log" \
		|| { tail -n 5 "$TB_DIR/pgt$tag.log" >&2; tb_fail "$tag: sender failed"; }
	timeout 30 tail --pid="${TB_PIDS[pgr$tag]}" -f /dev/null
	unset "TB_PIDS[pgr$tag]"
	local tx=$TB_DIR/pgt$tag.out rx=$TB_DIR/pgr$tag.out
	local steps; steps=$(tb_json "$tx" steps)
	[ "${steps:-0}" -gt 0 ] || tb_fail "$tag: no step acknowledged: $(cat "$tx")"
	[ "$(tb_json "$rx" steps)" = "$steps" ] || tb_fail "$tag: receiver sent $(tb_json "$rx" steps) acknowledgements, sender counted $steps"
	[ "$(tb_json "$rx" left_bytes)" = 0 ] || tb_fail "$tag: $(tb_json "$rx" left_bytes) bytes of a step left over"
	tb_pass "$tag: $steps steps of $bytes B in $(tb_json "$tx" frames_per_step) frames each, $(tb_json "$tx" us_per_step) us per step"
}

run_step jumbo 70000 9000
run_step pieces 70000 9000 --piece 71
run_step pieces_memcpy 70000 9000 --piece 71 --plain
run_step short 100003 1500

bad() { # WHAT ARGS...
	local what=$1 rc; shift
	"$TB_BUILD/wharf-pktgen" --no-huge -m 64 --no-pci --file-prefix "wharf-$TB_ID-pgbad" \
		--log-level=*:error -- "$@" >/dev/null 2>"$TB_DIR/pgbad.log"
	rc=$?
	[ $rc = 2 ] || tb_fail "$what: exit $rc, expected 2"
	grep -q "wharf-pktgen: " "$TB_DIR/pgbad.log" || tb_fail "$what: no reason given"
}
bad "step 0" --tx --step 0
bad "frame over the MTU" --tx --step 1000 --size 2000
bad "frame over 9000" --rx --step 1000 --mtu 9000 --size 9015
bad "piece of 0" --tx --step 1000 --piece 0
bad "stray argument" --rx --step 1000 extra
tb_pass "bad flags refused with a reason"
