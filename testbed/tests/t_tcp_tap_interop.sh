#!/usr/bin/env bash
# TCP interop with Linux over a TAP device: wharf's TCP-lite (wharf-xfer on net_tap) on one
# side, Linux's own TCP (testbed/interop/xfer_peer.py) on the other.
#   1. Linux client -> wharf echo server: WHARF_INTEROP_BYTES (64 MiB) of random bytes in
#      framed messages each way; SHA-256 of the bodies sent equals that of those echoed,
#      and the echoed stream is byte for byte the one sent.
#   2. WHARF_INTEROP_CONNS (100) concurrent Linux connections to the wharf echo server, each
#      echoing 256 KiB of messages intact (0: the step is skipped, and the test with it).
#   3. wharf client (wharf-xfer --send-file) -> Linux raw echo server: 64 MiB, sha256sum
#      of the file sent equals that of the file received.
#   4. A capture of all of it (dumpcap on the TAP, port filter), read back by tshark with
#      IP and TCP checksum validation on: no malformed packets, no expert errors, no bad
#      checksums (counts printed per direction; Linux's RFC 1624 0xffff apart, see there);
#      and the wharf echo server answers each Linux client's close with a FIN, never a RST
#      (each client shuts its side and reads that FIN before it exits, so the server is
#      stopped only once every close was answered);
#      in 3 the wharf client closes gracefully: the Linux server reads end-of-file.
# The TAP is created persistent (multi_queue, as net_tap opens it) so the Linux address
# and the capture survive the wharf processes coming and going. Everything is bounded by
# timeout and torn down on exit, the TAP device included.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
IF=wxt$$
LNX=198.18.7.1; WH=198.18.7.2
PORT=7100; LPORT=7101
PY=/usr/bin/python3
PEER="$TB_ROOT/testbed/interop/xfer_peer.py"
BYTES=${WHARF_INTEROP_BYTES:-$((64 << 20))}
STEP_SECS=${WHARF_INTEROP_SECS:-60}
CAP=$TB_DIR/interop.pcapng

t_cleanup() {
	local rc=$?
	tb_stop cap
	ip link del "$IF" 2>/dev/null
	(exit $rc)
	tb_cleanup exit
}
trap t_cleanup EXIT
trap 'exit 130' INT TERM

tap_eal() { # NAME
	echo "-l 0 --file-prefix wharf-$TB_ID-$1 --no-pci $(tb_mem_args) --log-level=*:warning" \
		"--log-level=wharf.*:info" \
		"--log-level=pmd.net.tap:error --vdev=net_tap0,iface=$IF"
}

# Starts wharf-xfer on the TAP in the background as NAME: tap_node NAME [xfer args..]
tap_node() {
	local name=$1; shift
	timeout --kill-after=5 $((STEP_SECS * 2)) "$TB_BUILD/wharf-xfer" $(tap_eal "$name") -- "$@" \
		>"$TB_DIR/$name.out" 2>"$TB_DIR/$name.log" &
	TB_PIDS[$name]=$!
}

ip tuntap add dev "$IF" mode tap multi_queue || tb_fail "cannot create TAP $IF"
ip addr add $LNX/24 dev "$IF" && ip link set "$IF" up || tb_fail "cannot configure $IF"
dumpcap -q -i "$IF" -B 64 -f "tcp port $PORT or tcp port $LPORT" -w "$CAP" \
	>"$TB_DIR/cap.log" 2>&1 &
TB_PIDS[cap]=$!
tb_wait_log "$TB_DIR/cap.log" "Capturing on" 10 || { cat "$TB_DIR/cap.log"; tb_fail "dumpcap did not start"; }

# ---- 1 and 2: Linux clients -> wharf echo server ---------------------------------------
tap_node srv --ip $WH/24 --port $PORT --server --echo
tb_wait_log "$TB_DIR/srv.log" "server on port" 20 || { cat "$TB_DIR/srv.log"; tb_fail "wharf echo server did not come up"; }
ping -c 1 -W 5 -I "$IF" $WH >/dev/null || tb_fail "wharf node does not answer ping on $IF"

timeout --kill-after=5 "$STEP_SECS" $PY "$PEER" client --host $WH --port $PORT --bytes "$BYTES" \
	--seed 3 --seconds $((STEP_SECS - 5)) >"$TB_DIR/lnx1.out" 2>"$TB_DIR/lnx1.log"
rc1=$?
cat "$TB_DIR/lnx1.out"
# 100 concurrent connections (WHARF_INTEROP_CONNS=0 leaves the step out). Each sends 256 KiB
# in messages of up to 64 KiB while reading the echoes; net_tap reads the TAP's several
# queues, so Linux's segments reach TCP-lite reordered and its RTOs fire spuriously.
CONNS=${WHARF_INTEROP_CONNS:-100}
rc100=0
if [ "$CONNS" -gt 0 ]; then
	timeout --kill-after=5 "$STEP_SECS" $PY "$PEER" client --host $WH --port $PORT --connections "$CONNS" \
		--bytes 262144 --max-size 65536 --seed 4 --seconds $((STEP_SECS - 5)) \
		>"$TB_DIR/lnx100.out" 2>"$TB_DIR/lnx100.log"
	rc100=$?
	cat "$TB_DIR/lnx100.out"
else
	tb_skip "the concurrent-connection step" "WHARF_INTEROP_CONNS=0 leaves it out"
fi
tb_stop srv
cat "$TB_DIR/srv.out"; grep -v TELEMETRY "$TB_DIR/srv.log" >&2

# ---- 3: wharf client -> Linux echo server ------------------------------------------------
head -c "$BYTES" /dev/urandom >"$TB_DIR/send.bin"
timeout --kill-after=5 $((STEP_SECS * 2)) $PY "$PEER" echo --bind 0.0.0.0 --port $LPORT \
	--seconds $((STEP_SECS * 2)) >"$TB_DIR/echo.out" 2>"$TB_DIR/echo.log" &
TB_PIDS[echo]=$!
tb_wait_log "$TB_DIR/echo.log" "echo server on" 10 || tb_fail "Linux echo server did not start"
tap_node cli --ip $WH/24 --peer $LNX --port $LPORT --send-file "$TB_DIR/send.bin" \
	--recv-file "$TB_DIR/recv.bin" --seed 5 --seconds "$STEP_SECS"
wait "${TB_PIDS[cli]}"
rc3=$?
unset "TB_PIDS[cli]"
cat "$TB_DIR/cli.out"; grep -v TELEMETRY "$TB_DIR/cli.log" >&2
tb_stop echo
sum_sent=$(sha256sum <"$TB_DIR/send.bin" | cut -d' ' -f1)
sum_recv=$(sha256sum <"$TB_DIR/recv.bin" 2>/dev/null | cut -d' ' -f1)
echo "wharf -> Linux echo: sha256 sent $sum_sent, received $sum_recv"

# ---- 4: the capture, checked by tshark ---------------------------------------------------
tb_stop cap
# One pass; per frame: source, malformed, expert severities, TCP and IP checksum status
# (0 bad, 1 good, 2 unverified). Error severity is 0x00800000 (PI_ERROR).
# Linux writes 0xffff where the checksum folds to 0x0000 (skb_checksum_help's
# CSUM_MANGLED_0, meant for UDP): the same one's complement zero, accepted by every receiver,
# but Wireshark marks it bad (tcp.checksum.ffff, RFC 1624). From Linux it is counted apart
# (tcp_cksum_ffff); from wharf it still counts as bad.
# The payload is random bytes in wharf's framing: decode it as plain data (heuristic dissectors
# take random bytes for SMPP or Thrift and call them malformed), and do not reassemble streams
# (a legal retransmission overlapping old data is a reassembly "error", not a TCP one).
timeout --kill-after=5 300 tshark -n -r "$CAP" -o tcp.check_checksum:TRUE -o ip.check_checksum:TRUE \
	-o tcp.desegment_tcp_streams:FALSE -d "tcp.port==$PORT,data" -d "tcp.port==$LPORT,data" \
	-T fields -E separator='|' -e ip.src -e _ws.malformed -e _ws.expert.severity \
	-e tcp.checksum.status -e ip.checksum.status -e tcp.checksum.ffff \
	-e tcp.flags.reset -e tcp.flags.fin -e tcp.srcport 2>"$TB_DIR/tshark.log" |
	awk -F'|' -v wh=$WH -v port=$PORT '
	{ d = ($1 == wh) ? "wharf" : "linux"; frames[d]++
	  if (d == "wharf" && $9 == port && ($7 == "1" || $7 == "True")) srv_rst++
	  if (d == "wharf" && $9 == port && ($8 == "1" || $8 == "True")) srv_fin++
	  if ($2 != "") malformed[d]++
	  if ($3 ~ /8388608|0x00800000/) experr[d]++
	  if ($4 == "0" && $6 != "" && d == "linux") tcpffff[d]++
	  else if ($4 == "0") tcpbad[d]++
	  if ($4 == "2") tcpunv[d]++
	  if ($5 == "0") ipbad[d]++ }
	END { for (k = 0; k < 2; k++) { d = k ? "linux" : "wharf"
	        printf "%s frames=%d malformed=%d expert_errors=%d tcp_cksum_bad=%d tcp_cksum_unverified=%d ip_cksum_bad=%d tcp_cksum_ffff=%d\n",
	          d, frames[d], malformed[d], experr[d], tcpbad[d], tcpunv[d], ipbad[d], tcpffff[d] }
	      printf "server_close fin=%d rst=%d\n", srv_fin, srv_rst >"/dev/stderr" }' \
	>"$TB_DIR/tshark.counts" 2>"$TB_DIR/tshark.close"
cat "$TB_DIR/tshark.counts" "$TB_DIR/tshark.close"

# ---- verdicts ------------------------------------------------------------------------------
fail=0
[ $rc1 -eq 0 ] && grep -q '"ok": true' "$TB_DIR/lnx1.out" \
	&& tb_pass "Linux -> wharf echo: $BYTES bytes each way, SHA-256 equal" \
	|| { tb_log "FAIL: Linux -> wharf echo (rc $rc1): $(tail -n 3 "$TB_DIR/lnx1.log")"; fail=1; }
if [ "$CONNS" -gt 0 ]; then
	[ $rc100 -eq 0 ] && grep -q '"ok": true' "$TB_DIR/lnx100.out" \
		&& tb_pass "$CONNS concurrent Linux connections echoed intact" \
		|| { tb_log "FAIL: $CONNS connections (rc $rc100)"; fail=1; }
	# Each client shut its side and read wharf's FIN before it exited (xfer_peer.py,
	# close_gracefully), so the server was stopped with every close answered.
	grep -q "\"closed_by_fin\": $CONNS, \"reset_at_close\": 0" "$TB_DIR/lnx100.out" \
		&& tb_pass "each of the $CONNS Linux clients read wharf's FIN after its own" \
		|| { tb_log "FAIL: closes: $(grep -o '"closed_by_fin[^}]*' "$TB_DIR/lnx100.out")"; fail=1; }
fi
[ $rc3 -eq 0 ] && [ "$sum_sent" = "$sum_recv" ] \
	&& tb_pass "wharf -> Linux echo: $BYTES bytes, sha256sum equal" \
	|| { tb_log "FAIL: wharf client -> Linux echo (rc $rc3, sha256 $sum_sent vs $sum_recv)"; fail=1; }
frames=$(awk '{ split($2, a, "="); n += a[2] } END { print n + 0 }' "$TB_DIR/tshark.counts")
badsum=$(awk '{ for (i = 3; i <= NF; i++) if ($i !~ /unverified|ffff/) { split($i, a, "="); n += a[2] } }
	END { print n + 0 }' "$TB_DIR/tshark.counts")
[ "$frames" -gt 0 ] && [ "$badsum" -eq 0 ] \
	&& tb_pass "capture: $frames frames, none malformed, no expert errors, no bad checksums" \
	|| { tb_log "FAIL: capture: $frames frames, $badsum malformed/error/bad-checksum counts"; fail=1; }
# The wharf client closes its connection once every echo is back: the Linux echo server
# reads every byte (the sums above) and then end-of-file, not a reset.
grep -q '"eof": 1, "reset": 0' "$TB_DIR/echo.out" \
	&& tb_pass "Linux echo server: wharf's close read as end-of-file after the last byte" \
	|| { tb_log "FAIL: Linux echo server's end of stream: $(cat "$TB_DIR/echo.out")"; fail=1; }
# The wharf echo server ends each connection its Linux client closed with a FIN of its
# own (graceful close), never a RST.
read -r srv_fin srv_rst < <(sed -n 's/^server_close fin=\([0-9]*\) rst=\([0-9]*\)$/\1 \2/p' "$TB_DIR/tshark.close")
[ "${srv_fin:-0}" -gt 0 ] && [ "${srv_rst:-1}" -eq 0 ] \
	&& tb_pass "echo server: $srv_fin FINs, no RST at the Linux clients' close" \
	|| { tb_log "FAIL: echo server closes: ${srv_fin:-?} FINs, ${srv_rst:-?} RSTs"; fail=1; }
[ $fail -eq 0 ] || exit 1
