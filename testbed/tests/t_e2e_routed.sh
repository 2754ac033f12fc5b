#!/usr/bin/env bash
# Two subnets through a router: network namespaces, the PS in one, its worker in another, a
# Linux router namespace between them (ip_forward). Each node's data port is net_af_packet on
# a veth (d0) whose kernel side holds the data address and a route to the other subnet, as a
# CNI configures an SR-IOV VF; an nftables ingress rule keeps the kernel from answering what
# DPDK owns (af_packet sees frames before it). Control endpoints sit on a second veth (c0) on
# two more routed subnets.
#   PS      d0 198.18.1.2/24 via 198.18.1.1   c0 198.18.3.2/24
#   worker  d0 198.18.2.2/24 via 198.18.2.1   c0 198.18.4.2/24
# 1. dpdk, --data-iface d0 only: each node's address, prefix and gateway come from d0; the
#    worker has no .endpoint_map and takes the PS's data address from its health answer.
# 2. dpdk, the explicit knobs: the PS by flags (--data-addr, --data-prefix, --data-gateway),
#    the worker by WHARF_DATA_PREFIX / WHARF_DATA_GATEWAY and an .endpoint_map.
# 3. kernel TCP between the control subnets, through the same router.
# Each trains a softmax well above chance; the worker's frames reached the PS through the
# router (its forwarding counter grew). Namespaces are deleted at exit.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

TRAIN="--model softmax --epochs 1 --train-limit 3000 --test-limit 1000 --wait-timeout 30 --retry-interval 1"
tb_init
NS=wr$$
NSA=${NS}a; NSB=${NS}b; NSR=${NS}r
# At exit: the nodes stopped, then their namespaces deleted, then tb_cleanup with the status.
ns_cleanup() {
	local rc=$? n
	for n in "${!TB_PIDS[@]}"; do tb_stop "$n"; done
	for n in "$NSA" "$NSB" "$NSR"; do ip netns del "$n" 2>/dev/null; done
	(exit $rc)
	tb_cleanup exit
}
trap ns_cleanup EXIT

ip netns add "$NSR" 2>/dev/null || { tb_skip routed "cannot create network namespaces"; exit 0; }
ip netns add "$NSA" && ip netns add "$NSB" || tb_fail "netns"
# one node's namespace: data veth d0 (DPDK's port, the kernel keeps its configuration),
# control veth c0; their router ends rd<i>, rc<i>
node_ns() { # NS IDX DATA_NET CTL_NET   (nets as 198.18.N)
	local ns=$1 i=$2 d=$3 c=$4
	ip link add d0 netns "$ns" type veth peer name "rd$i" netns "$NSR" &&
	ip link add c0 netns "$ns" type veth peer name "rc$i" netns "$NSR" || return 1
	ip -n "$NSR" addr add "$d.1/24" dev "rd$i" && ip -n "$NSR" addr add "$c.1/24" dev "rc$i" &&
	ip -n "$NSR" link set "rd$i" up && ip -n "$NSR" link set "rc$i" up || return 1
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.d0.disable_ipv6=1 2>/dev/null
	ip -n "$ns" link set lo up && ip -n "$ns" link set d0 up && ip -n "$ns" link set c0 up &&
	ip -n "$ns" addr add "$d.2/24" dev d0 && ip -n "$ns" addr add "$c.2/24" dev c0 &&
	ip -n "$ns" route add default via "$c.1" dev c0 || return 1
	# the kernel sees nothing arriving on d0; af_packet (DPDK) sees all of it first
	ip netns exec "$ns" nft -f - <<NFT
table netdev wharf {
	chain in { type filter hook ingress device d0 priority 0; policy drop; }
}
NFT
}
node_ns "$NSA" 0 198.18.1 198.18.3 || { tb_skip routed "cannot build the veth/nftables topology"; exit 0; }
node_ns "$NSB" 1 198.18.2 198.18.4 || tb_fail "worker namespace"
# the data route a CNI would add: the other data subnet through this one's router
ip -n "$NSA" route add 198.18.2.0/24 via 198.18.1.1 dev d0 || tb_fail "route"
ip -n "$NSB" route add 198.18.1.0/24 via 198.18.2.1 dev d0 || tb_fail "route"
ip -n "$NSR" link set lo up
ip netns exec "$NSR" sysctl -qw net.ipv4.ip_forward=1 || tb_fail "ip_forward"
ip netns exec "$NSB" ping -c 1 -W 2 198.18.3.2 >/dev/null || tb_fail "control subnets not routed"

ns_eal() { # NAME CORE
	echo "-l $2 --file-prefix wharf-$TB_ID-$1 --no-pci $(tb_mem_args) --log-level=*:warning --log-level=wharf.*:info --vdev=net_af_packet0,iface=d0"
}
fwd() { ip netns exec "$NSR" cat /proc/net/snmp | awk '/^Ip: [0-9]/ {print $7}'; } # ForwDatagrams
CL="--ps 198.18.3.2:47910 --workers 198.18.4.2:47911"

run() { # NAME PROTOCOL "ps args" "worker env" "worker args"
	local name=$1 proto=$2 f0 f1
	f0=$(fwd)
	(cd "$TB_DIR" && exec ip netns exec "$NSA" "$TB_BUILD/wharf-train" $(ns_eal "ps-$name" 0) -- \
		--role ps $CL --protocol "$proto" --model softmax $3) \
		>"$TB_DIR/ps-$name.out" 2>"$TB_DIR/ps-$name.log" &
	TB_PIDS[ps-$name]=$!
	(cd "$TB_DIR" && exec env $4 timeout 60 ip netns exec "$NSB" "$TB_BUILD/wharf-train" \
		$(ns_eal "w-$name" 1) -- --role worker $CL --protocol "$proto" $TRAIN $5) \
		>"$TB_DIR/w-$name.out" 2>"$TB_DIR/w-$name.log" ||
		{ tail -n 8 "$TB_DIR/w-$name.log" "$TB_DIR/ps-$name.log" >&2; tb_fail "$name: worker failed"; }
	ip netns exec "$NSB" "$TB_BUILD/wharf-ctl" 198.18.3.2:47910 shutdown >/dev/null || tb_fail "$name: ctl shutdown"
	tb_stop "ps-$name"
	local out=$TB_DIR/w-$name.out acc
	grep -q "\"protocol\":\"$proto\"" "$out" || { tail -n 5 "$TB_DIR/w-$name.log" "$out" >&2; tb_fail "$name: no result line"; }
	acc=$(tb_json "$out" test_accuracy)
	[ "$(echo "$acc > 0.6" | bc)" = 1 ] || tb_fail "$name: test accuracy $acc, expected > 0.6"
	[ $(( $(fwd) - f0 )) -gt 100 ] || tb_fail "$name: the router forwarded $(( $(fwd) - f0 )) packets"
	tb_pass "$name ($proto): test accuracy $acc, $(( $(fwd) - f0 )) packets routed"
}

# 1. everything from the interface; the PS's data address from its health answer
run iface dpdk "--data-iface d0" "WHARF_X=1" "--data-iface d0"
grep -qF "data plane 198.18.1.2:47910/24, gateway 198.18.1.1 (interface d0 from --data-iface)" "$TB_DIR/ps-iface.log" ||
	{ cat "$TB_DIR/ps-iface.log" >&2; tb_fail "iface: the PS did not take d0's configuration"; }
grep -qF "ps 0 data address 198.18.1.2:47910 (from its health answer)" "$TB_DIR/w-iface.log" ||
	{ cat "$TB_DIR/w-iface.log" >&2; tb_fail "iface: the worker did not learn the PS's data address"; }
tb_pass "iface: address, /24 and gateway from d0; the PS's address from its health answer"

# 2. the knobs: flags on the PS, variables and a map on the worker
printf '198.18.3.2:47910=198.18.1.2:6666\n198.18.4.2:47911=198.18.2.2:5555\n' >"$TB_DIR/map"
run knobs dpdk "--data-addr 198.18.1.2:6666 --data-prefix 24 --data-gateway 198.18.1.1" \
	"WHARF_DATA_PREFIX=24 WHARF_DATA_GATEWAY=198.18.2.1" "--endpoint-map $TB_DIR/map"

# 3. kernel TCP over the routed control subnets
run kernel kernel "" "WHARF_X=1" ""
