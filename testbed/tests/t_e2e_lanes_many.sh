#!/usr/bin/env bash
# More lanes than cores, as the lane counts of a NIC host: a PS of 4 lanes
# (NETWORK_PS_CORE_NUMBER=4) and two workers of 3 lanes on this machine's 2 cores (EAL
# --lcores maps two lcores to each core), DPDK over the switch. The PS's switch port has 4
# queue pairs filled by RSS; worker 0's port has 3 (RSS too) and worker 1's one (its 3 lanes
# share it by software steering). The sparse CTR model in async and in sync: it must learn,
# all 4 PS lanes and all 3 lanes of each worker must carry requests, no data op may cross PS
# lanes (data_ops_remote 0), and the PS's lanes may hand each other no more than ARP (at most
# 16 frames): the workers aim each connection at its lane's queue of 4. Then the same job on
# kernel TCP (four epoll threads in the PS, three in each worker, on the same 2 cores).
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=47830
tb_train_cluster $B # the .endpoint_map of a PS and 2 workers; each job names its --protocol
CTL=$TB_TRAIN_CTL
CL="$TB_TRAIN_CL --model lr --ctr-samples 100000 --epochs 2"
WQ=(3 1) # queue pairs of worker 0's and worker 1's switch ports

# EAL arguments of node NAME on switch port IDX: LCORES (EAL --lcores), Q queue pairs.
eal() { # NAME IDX LCORES Q
	echo "--lcores $3 --file-prefix wharf-$TB_ID-$1 --no-pci $(tb_mem_args)" \
		"--log-level=*:warning --log-level=wharf.*:info --log-level=lib.vhost.config:error" \
		"--vdev=virtio_user0,path=$TB_DIR/port$2.sock,queues=$4,queue_size=1024,mac=02:00:00:00:00:0$(($2 + 1))"
}

job() { # NAME MODE PROTO
	local name=$1 mode=$2 proto=$3 i k v n auc remote t s hops=0 env
	[ "$proto" = dpdk ] && { tb_switch 3 --queues "4,${WQ[0]},${WQ[1]}" || tb_fail "switch"; }
	env=(env) && [ "$proto" = dpdk ] && env+=(WHARF_PORT_RSS=peer)
	"${env[@]}" "$TB_BUILD/wharf-train" $(eal "ps-$name" 0 '0@0,1@1,2@0,3@1' 4) -- $CL \
		--protocol "$proto" --mode "$mode" --role ps --ps-cores 4 \
		>"$TB_DIR/ps-$name.out" 2>"$TB_DIR/ps-$name.log" &
	TB_PIDS[ps-$name]=$!
	for i in 0 1; do
		env=(env) && [ "$proto" = dpdk ] && [ "${WQ[$i]}" -gt 1 ] && env+=(WHARF_PORT_RSS=peer)
		"${env[@]}" "$TB_BUILD/wharf-train" $(eal "w$i-$name" $((i + 1)) '0@1,1@0,2@1' "${WQ[$i]}") \
			-- $CL --protocol "$proto" --mode "$mode" --role worker --task-index $i \
			--worker-cores 3 >"$TB_DIR/w$i-$name.out" 2>"$TB_DIR/w$i-$name.log" &
		TB_PIDS[w$i-$name]=$!
	done
	tb_wait_exit 120 "w0-$name" "w1-$name"
	if [ "$proto" = dpdk ]; then
		sleep 0.3 # telemetry is published every 100 ms
		t=$(printf '/wharf/dn/stats,%s\n' 0 1 2 3 | timeout 10 dpdk-telemetry.py -f "wharf-$TB_ID-ps-$name" 2>&1 | tr -d ' \n')
		s=$(echo "$t" | grep -oE '"steered_in":[0-9]+' | cut -d: -f2)
		[ "$(echo $s | wc -w)" = 4 ] || { echo "$t" >&2; tb_fail "$name: no telemetry from the 4 PS lanes"; }
		for v in $s; do hops=$((hops + v)); done
		[ "$hops" -le 16 ] || tb_fail "$name: $hops frames were handed between the PS's lanes"
	fi
	"$TB_BUILD/wharf-ctl" "$CTL" status >"$TB_DIR/$name-status.txt" 2>&1
	"$TB_BUILD/wharf-ctl" "$CTL" shutdown >/dev/null
	for n in w0-$name w1-$name ps-$name; do tb_stop "$n"; done
	[ "$proto" = dpdk ] && tb_stop switch
	for i in 0 1; do
		grep -q "\"mode\":\"$mode\"" "$TB_DIR/w$i-$name.out" || { tail -n 8 "$TB_DIR/w$i-$name.log" "$TB_DIR/ps-$name.log" >&2; tb_fail "$name: worker $i did not finish"; }
	done
	auc=$(tb_json "$(ls -t "$TB_DIR/w0-$name.out" "$TB_DIR/w1-$name.out" | head -n 1)" test_auc)
	[ "$(echo "$auc 0.70" | awk '{print ($1 >= $2)}')" = 1 ] || tb_fail "$name: test_auc $auc < 0.70"
	st=$TB_DIR/$name-status.txt
	grep -q "lanes 4 " "$st" || { cat "$st" >&2; tb_fail "$name: the PS does not serve on 4 lanes"; }
	remote=$(tb_stat_num "$st" "^server " data_ops_remote)
	[ "$remote" = 0 ] || { cat "$st" >&2; tb_fail "$name: ${remote:-no count of} data ops crossed PS lanes"; }
	n=""
	for k in 0 1 2 3; do
		v=$(tb_stat_num "$st" "^lane +$k " requests)
		[ -n "$v" ] && [ "$v" -gt 0 ] || { cat "$st" >&2; tb_fail "$name: PS lane $k carried ${v:-no} requests"; }
		n="$n $v"
	done
	for i in 0 1; do
		for k in 0 1 2; do
			v=$(grep -E "worker wlane +$k " "$TB_DIR/w$i-$name.log" | tail -n 1 | sed -nE 's/.* requests ([0-9]+).*/\1/p')
			[ -n "$v" ] && [ "$v" -gt 0 ] || { grep wlane "$TB_DIR/w$i-$name.log" >&2; tb_fail "$name: worker $i lane $k carried ${v:-no} requests"; }
		done
	done
	tb_pass "$name ($mode, $proto, 4-lane PS, 3-lane workers on 2 cores): test_auc $auc; PS lanes' requests$n, data ops across lanes 0$([ "$proto" = dpdk ] && echo ", frames handed between lanes $hops"); every worker lane carried requests"
}

job async async dpdk
job sync sync dpdk
job kasync async kernel
