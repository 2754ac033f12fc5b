#!/usr/bin/env bash
# The Kubeflow configs of configs/k8s (no cluster here; a few seconds, no EAL):
#   1. testbed/k8s_check.py: every YAML parses and is a TFJob or PaddleJob the training
#      operator accepts, running wharf-pod with options the executables have, the control
#      token from a Secret, and (dpdk variants) hugepages, one SR-IOV resource, the Multus
#      network and its status where wharf-pod reads them; also after render.sh set every
#      parameter. First the checker itself: broken configs are refused, each named.
#   2. wharf-pod.sh builds the EAL and wharf arguments from a Multus network-status and the
#      device plugin's PCIDEVICE_ variable (dry run), and refuses what is missing.
#   3. Both kernel jobs run here as the operator would start their pods (k8s_check.py --local:
#      the containers' commands, args and env, TF_CONFIG or Paddle's variables naming the
#      services localhost, resolved at start as a cluster's service names are):
#      the PS and two workers train the MLP (a short run); the PS answers status with the
#      Secret's token only; it checkpoints on SIGTERM.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
K=$TB_ROOT/configs/k8s
tb_init no-huge

if ! /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
	[ -n "${WHARF_TEST_DEPS:-}" ] && tb_fail "python3-yaml is not installed (make deps installs it)"
	tb_skip "configs/k8s parsed" "python3-yaml is not installed (make deps)"
	exit 0
fi
command -v jq >/dev/null || tb_fail "jq is not installed (make deps): wharf-pod.sh needs it"
for x in wharf-psd wharf-train; do [ -x "$TB_BUILD/$x" ] || tb_fail "build/$x is not built"; done
check() { timeout 60 /usr/bin/python3 "$TB_ROOT/testbed/k8s_check.py" "$TB_ROOT" "$@" 2>&1; }

# ---- 1. the checker refuses broken configs; the configs pass, rendered or not ----------
B=$TB_DIR/broken; mkdir -p "$B"
printf 'apiVersion: kubeflow.org/v1\nkind: TFJob\n metadata:\n  name: x\n' >"$B/indent.yaml"
sed 's/hugepages-2Mi: 1Gi, //' "$K/tfjob-dpdk.yaml" >"$B/nohuge.yaml"
sed 's/--epochs, "3"/--no-such-flag, "3"/' "$K/tfjob-kernel.yaml" >"$B/flag.yaml"
sed 's|value: /etc/wharf-ctl/token|value: /tmp/token|' "$K/paddlejob-kernel.yaml" >"$B/token.yaml"
sed 's|wharf-paddle-master-0:36543|wharf-paddle-ps-0:36543|' "$K/paddlejob-kernel.yaml" >"$B/pslist.yaml"
sed 's|name: tensorflow|name: tf|' "$K/tfjob-kernel.yaml" >"$B/container.yaml"
out=$(check "$B"/*.yaml) && { echo "$out"; tb_fail "k8s_check accepted broken configs"; }
for w in "indent.yaml: does not parse" "nohuge.yaml: PS: dpdk: hugepages-2Mi" \
	"flag.yaml: Worker: --no-such-flag: not an option of wharf-train" \
	"token.yaml: Master: WHARF_CTL_TOKEN_FILE=/tmp/token is not inside a mounted Secret" \
	"pslist.yaml: Worker: PADDLE_PSERVERS_IP_PORT_LIST" "container.yaml: PS: no container named tensorflow"; do
	grep -qF "$w" <<<"$out" || { echo "$out"; tb_fail "k8s_check did not report: $w"; }
done
tb_pass "k8s_check refuses 6 broken configs, each named"

out=$(check) || { echo "$out"; tb_fail "configs/k8s: see above"; }
echo "$out"
n=$(ls "$K"/*.yaml | wc -l)
[ "$n" -ge 4 ] && [ "$(grep -c '^k8s_check: ' <<<"$out")" -eq "$n" ] || tb_fail "k8s_check checked $(grep -c '^k8s_check: ' <<<"$out") of $n files"
R=$TB_DIR/rendered; mkdir -p "$R"
for f in "$K"/*.yaml; do
	"$K/render.sh" IMAGE=registry.example:5000/ml/wharf:test SRIOV_RESOURCE=nvidia.com/mlnx_sriov \
		SRIOV_NETWORK=rdma-a TOKEN_SECRET=job-token "$f" >"$R/$(basename "$f")" || tb_fail "render.sh $f"
done
out=$(check "$R"/*.yaml) || { echo "$out"; tb_fail "rendered configs: see above"; }
grep -l 'intel.com/sriov\|wharf-sriov\|wharf-ctl-token\|image: wharf:' "$R"/*.yaml && tb_fail "render.sh left a default (files above)"
grep -q 'nvidia.com/mlnx_sriov: "1"' "$R/tfjob-dpdk.yaml" && grep -q 'networks: rdma-a' "$R/paddlejob-dpdk.yaml" ||
	tb_fail "render.sh did not set the SR-IOV resource and network"
"$K/render.sh" SRIOV_RESOURCE=sriov "$K/tfjob-dpdk.yaml" >/dev/null 2>"$TB_DIR/render.err" && tb_fail "render.sh took SRIOV_RESOURCE=sriov"
grep -q 'SRIOV_RESOURCE=sriov: expected DOMAIN/NAME' "$TB_DIR/render.err" || tb_fail "render.sh: $(cat "$TB_DIR/render.err")"
tb_pass "$n configs parse and check out (python3-yaml), also rendered with every parameter changed"

# ---- 2. wharf-pod.sh ---------------------------------------------------------------
cat >"$TB_DIR/network-status" <<'JSON'
[{"name": "cbr0", "interface": "eth0", "ips": ["10.244.1.73"], "default": true},
 {"name": "default/wharf-sriov", "interface": "net1", "ips": ["10.56.217.171"],
  "device-info": {"type": "pci", "version": "1.0.0", "pci": {"pci-address": "0000:18:02.5"}}}]
JSON
pod() { env -i PATH="$PATH" HOSTNAME=wharf-tf-ps-0 WHARF_POD_DRY_RUN=1 WHARF_POD_WAIT_S=1 "$@" 2>&1; }
dpdk=(WHARF_PROTOCOL=dpdk WHARF_POD_NETWORK=wharf-sriov WHARF_POD_NETWORK_STATUS=$TB_DIR/network-status)
got=$(pod "${dpdk[@]}" PCIDEVICE_INTEL_COM_SRIOV=0000:18:02.5 "$K/wharf-pod.sh" wharf-psd --model mlp)
want="wharf-psd -l 0-1 -a 0000:18:02.5 --file-prefix wharf-tf-ps-0 --huge-dir /dev/hugepages -- --data-addr 10.56.217.171 --model mlp"
[ "$got" = "$want" ] || tb_fail "wharf-pod (dpdk): $got"
got=$(pod WHARF_PROTOCOL=kernel "$K/wharf-pod.sh" wharf-train --epochs 3)
[ "$got" = "wharf-train -- --epochs 3" ] || tb_fail "wharf-pod (kernel): $got"
expect_refusal() { # WHAT CMD...
	local what=$1 out; shift
	out=$(pod "$@") && tb_fail "wharf-pod accepted $what: $out"
	[ "$(wc -l <<<"$out")" -eq 1 ] && grep -q '^wharf-pod: ' <<<"$out" || tb_fail "wharf-pod, $what: $out"
	echo "  refused ($what): $out"
}
expect_refusal "no PCIDEVICE_" "${dpdk[@]}" "$K/wharf-pod.sh" wharf-psd
expect_refusal "another network" "${dpdk[@]/wharf-sriov/other}" PCIDEVICE_X=0000:18:02.5 "$K/wharf-pod.sh" wharf-psd
expect_refusal "no status file" "${dpdk[@]/$TB_DIR\/network-status/$TB_DIR/none}" PCIDEVICE_X=0000:18:02.5 "$K/wharf-pod.sh" wharf-psd
echo garbage >"$TB_DIR/bad-status"
expect_refusal "a status that is not JSON" "${dpdk[@]/$TB_DIR\/network-status/$TB_DIR/bad-status}" PCIDEVICE_X=1 "$K/wharf-pod.sh" wharf-psd
expect_refusal "protocol rdma" WHARF_PROTOCOL=rdma "$K/wharf-pod.sh" wharf-psd
tb_pass "wharf-pod: EAL -a from PCIDEVICE_, --data-addr from network-status; 5 refusals, one line each"

# ---- 3. the kernel jobs, started here as the operator starts their pods -------------------
mkdir -p "$TB_DIR/bin"
ln -s "$K/wharf-pod.sh" "$TB_DIR/bin/wharf-pod"
ln -s "$TB_BUILD/wharf-psd" "$TB_BUILD/wharf-train" "$TB_DIR/bin/"
run_job() { # FILE PORT PSTYPE
	local f=$1 port=$2 ps=$3 d=$TB_DIR/$(basename "$1" .yaml) i acc
	mkdir -p "$d"
	PATH=$TB_DIR/bin:$PATH check --local "$K/$f" "$d" "$port" --epochs 1 --train-limit 2000 \
		--test-limit 500 --wait-timeout 30 --retry-interval 1 || tb_fail "$f: k8s_check --local"
	echo secret-of-the-test >"$d/mnt/ctl-token/token"
	sh "$d/$ps-0.sh" >"$d/ps.out" 2>"$d/ps.log" &
	TB_PIDS[$f-ps]=$!
	tb_wait_log "$d/ps.log" 'serving' 20 || { cat "$d/ps.log" >&2; tb_fail "$f: the PS did not start"; }
	local pids=()
	for i in 0 1; do
		timeout 60 sh "$d/worker-$i.sh" >"$d/w$i.out" 2>"$d/w$i.log" &
		pids+=($!)
	done
	wait "${pids[@]}"
	for i in 0 1; do
		grep -q '"protocol":"kernel"' "$d/w$i.out" ||
			{ tail -n 5 "$d/w$i.log" "$d/ps.log" >&2; tb_fail "$f: worker $i did not finish"; }
		acc=$(tb_json "$d/w$i.out" test_accuracy)
		[ "$(echo "$acc > 0.5" | bc)" = 1 ] || tb_fail "$f: worker $i test accuracy $acc"
	done
	grep -q 'resolved localhost -> 127.0.0.1' "$d/w0.log" ||
		{ tail -n 5 "$d/w0.log" >&2; tb_fail "$f: worker 0 did not resolve the service name"; }
	# The PS holds the Secret's token: status with it answers, without it is refused.
	env -u WHARF_CTL_TOKEN -u WHARF_CTL_TOKEN_FILE "$TB_BUILD/wharf-ctl" \
		--ctl-token-file "$d/mnt/ctl-token/token" "127.0.0.1:$port" status >"$d/status.out" 2>&1 ||
		{ cat "$d/status.out" >&2; tb_fail "$f: status with the Secret's token refused"; }
	env -u WHARF_CTL_TOKEN -u WHARF_CTL_TOKEN_FILE WHARF_RUNTIME_DIR="$d/run" \
		"$TB_BUILD/wharf-ctl" "127.0.0.1:$port" status >"$d/status-none.out" 2>&1 &&
		tb_fail "$f: status without the token answered"
	tb_stop "$f-ps"
	grep -q "checkpoint $d/mnt/state/ps.ckpt: [0-9]* rows" "$d/ps.log" ||
		{ tail -n 3 "$d/ps.log" >&2; tb_fail "$f: the PS wrote no checkpoint on SIGTERM"; }
	tb_pass "$f run here as its pods: 2 workers trained the MLP over kernel TCP (test accuracy $acc), the control token from the Secret enforced, the PS checkpointed on SIGTERM"
}
run_job tfjob-kernel.yaml 47860 ps
run_job paddlejob-kernel.yaml 47870 master
