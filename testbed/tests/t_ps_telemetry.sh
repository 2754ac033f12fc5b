#!/usr/bin/env bash
# A live PS node's counters through DPDK's own telemetry client: a psd serving the "count"
# model over the switch and one worker making exactly PUSHES pushes (each adds 1 to the
# worker's own key). dpdk-telemetry.py must read, from the running node:
#   /wharf/ps/server       requests >= PUSHES, errors 0
#   /wharf/ps/tables       the model's table id
#   /wharf/ps/table,<id>   pushes >= PUSHES and keys_pushed >= PUSHES, rows >= 1, errors 0
#   /wharf/ps/shard,<i>    pushes counted by the shards (dup_pushes for any resend)
#   /wharf/ps/conns        the worker's connection with its request count (while it runs)
# and a bad parameter (/wharf/ps/table,999999) must be refused without harming the node.
# wharf-ctl status prints the same table rows.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

PUSHES=${PSTEL_PUSHES:-300}
tb_init
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:47770=198.19.4.1:6666\n127.0.0.1:47771=198.19.4.2:5555\n' >"$MAP"
CL="--ps 127.0.0.1:47770 --workers 127.0.0.1:47771 --endpoint-map $MAP --protocol dpdk"
CL="$CL --mode async --retry-interval 1 --wait-timeout 40"

tel() { # COMMAND...: one dpdk-telemetry.py session against the PS node
	printf '%s\n' "$@" | timeout 15 dpdk-telemetry.py -f "wharf-$TB_ID-ps" 2>&1
}
num() { # KEY TEXT: the number after "KEY": in TEXT
	echo "$2" | grep -o "\"$1\": [0-9]*" | head -n 1 | grep -o '[0-9]*$'
}

tb_switch 2 || tb_fail "switch"
tb_node ps 0 psd $CL --role ps --model count
tb_wait_log "$TB_DIR/ps.log" "serving" 20 || { cat "$TB_DIR/ps.log" >&2; tb_fail "ps did not start"; }
tb_node w0 1 train $CL --role worker --task-index 0 --model count --count-pushes "$PUSHES" \
	--count-delay-us 5000
# While the worker runs (PUSHES x 5 ms): its connection is in the table.
for _ in $(seq 1 40); do
	cn=$(tel /wharf/ps/conns)
	echo "$cn" | grep -q 'accepted server=0 up=1 reqs=[1-9]' && break
	sleep 0.25
done
echo "$cn" | grep -q 'accepted server=0 up=1 reqs=[1-9]' || { echo "$cn" >&2; tb_fail "/wharf/ps/conns shows no live connection with requests"; }
tb_pass "/wharf/ps/conns lists the running worker's connection: $(echo "$cn" | grep -o 'accepted[^"]*' | head -n 1)"
for _ in $(seq 1 60); do kill -0 "${TB_PIDS[w0]}" 2>/dev/null || break; sleep 0.5; done
tb_stop w0
grep -q '"exactly_once":true' "$TB_DIR/w0.out" || { tail -n 5 "$TB_DIR/w0.log" >&2; tb_fail "worker ledger: $(tail -n 1 "$TB_DIR/w0.out")"; }
sleep 0.3   # one publish period (100 ms) and then some

srv=$(tel /wharf/ps/server)
echo "$srv" | grep wharf | cut -c1-300
req=$(num requests "$srv"); errs=$(num errors "$srv")
[ "${req:-0}" -ge "$PUSHES" ] || tb_fail "/wharf/ps/server: requests ${req:-missing} < $PUSHES"
[ "${errs:-1}" -eq 0 ] || tb_fail "/wharf/ps/server: errors ${errs:-missing}"
tb_pass "/wharf/ps/server: $req requests, 0 errors"

ids=$(tel /wharf/ps/tables | grep -o '"/wharf/ps/tables": \[[0-9, ]*\]' | grep -o '[0-9][0-9, ]*' | tail -n 1)
tid=${ids%%,*}
[ -n "$tid" ] || tb_fail "/wharf/ps/tables lists no table"
t=$(tel "/wharf/ps/table,$tid")
echo "$t" | grep wharf | cut -c1-300
pushes=$(num pushes "$t"); keys=$(num keys_pushed "$t"); rows=$(num rows "$t"); terr=$(num errors "$t")
[ "${pushes:-0}" -ge "$PUSHES" ] || tb_fail "table $tid: pushes ${pushes:-missing} < $PUSHES"
[ "${keys:-0}" -ge "$PUSHES" ] || tb_fail "table $tid: keys_pushed ${keys:-missing} < $PUSHES"
[ "${rows:-0}" -ge 1 ] || tb_fail "table $tid: rows ${rows:-missing}"
[ "${terr:-1}" -eq 0 ] || tb_fail "table $tid: errors ${terr:-missing}"
tb_pass "/wharf/ps/table,$tid: $pushes pushes, $keys keys pushed, $rows rows, 0 errors"

# The worker's one key lives on one of the n_shards shards: over all of them, its pushes.
nsh=$(num n_shards "$srv")
[ "${nsh:-0}" -ge 1 ] || tb_fail "/wharf/ps/server: n_shards ${nsh:-missing}"
spush=0 sdup=0
for i in $(seq 0 $((nsh - 1))); do
	sh=$(tel "/wharf/ps/shard,$i")
	p=$(num pushes "$sh"); d=$(num dup_pushes "$sh")
	[ -n "$p" ] && [ -n "$d" ] || { echo "$sh" >&2; tb_fail "/wharf/ps/shard,$i: no pushes/dup_pushes"; }
	spush=$((spush + p)) sdup=$((sdup + d))
done
[ $((spush + sdup)) -ge "$PUSHES" ] || tb_fail "shards: pushes $spush + dup $sdup < $PUSHES"
tb_pass "/wharf/ps/shard,0..$((nsh - 1)): $spush pushes applied, $sdup duplicates"

bad=$(tel /wharf/ps/table,999999 /wharf/ps/shard,x /wharf/ps/server)
[ -n "$(num requests "$bad")" ] || { echo "$bad" >&2; tb_fail "node stopped answering after bad parameters"; }
tb_pass "bad telemetry parameters refused, node still answers"

"$TB_BUILD/wharf-ctl" 127.0.0.1:47770 status >"$TB_DIR/status.txt" 2>&1 || tb_fail "wharf-ctl status"
grep -q "table  $tid .*rows $rows" "$TB_DIR/status.txt" || { cat "$TB_DIR/status.txt" >&2; tb_fail "wharf-ctl status disagrees on table $tid rows"; }
tb_pass "wharf-ctl status shows table $tid with the same $rows rows"
"$TB_BUILD/wharf-ctl" 127.0.0.1:47770 shutdown >/dev/null 2>&1
