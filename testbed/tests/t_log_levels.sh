#!/usr/bin/env bash
# Log levels set from outside, on both protocols (dpdk_net/dn_log.h). A kernel-protocol PS (no
# EAL) shows ps_core's DEBUG lines with WHARF_LOG_LEVEL=wharf.ps:debug and none without it; a
# DPDK PS shows them with the EAL option --log-level=wharf.ps:debug, and dpdk_net's port line
# with --log-level=wharf.dn:debug. Each wharf line on stderr reads "<UTC time, ms> <LEVEL>
# wharf.<layer>: ...", the PS network side's too ("... INFO wharf.ps: wharf-psd: ps 0 serving ...");
# nothing of the log reaches stdout. A bad WHARF_LOG_LEVEL is refused by the PS, named.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:47800=198.19.0.1:6666\n' >"$MAP"
KCL="--role ps --ps 127.0.0.1:47801 --num-workers 1 --protocol kernel --model count"
DCL="--role ps --ps 127.0.0.1:47800 --num-workers 1 --endpoint-map $MAP --protocol dpdk --model count"
TS='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'

# run_ps NAME CTL ARGS...: a PS whose stderr is NAME.log; saves once through CTL (beside its
# --ckpt: save PATH writes only under the checkpoint's directory), then stops.
run_ps() {
	local name=$1 ctl=$2; shift 2
	"$@" --ckpt "$TB_DIR/$name.ckpt" >"$TB_DIR/$name.out" 2>"$TB_DIR/$name.log" &
	TB_PIDS[$name]=$!
	for _ in $(seq 1 200); do
		grep -q "serving" "$TB_DIR/$name.log" && break
		kill -0 "${TB_PIDS[$name]}" 2>/dev/null || break
		sleep 0.1
	done
	grep -q "serving" "$TB_DIR/$name.log" || { cat "$TB_DIR/$name.log" >&2; tb_fail "$name did not start"; }
	"$TB_BUILD/wharf-ctl" "$ctl" save "$TB_DIR/$name-save.ckpt" >/dev/null || tb_fail "$name: save"
	"$TB_BUILD/wharf-ctl" "$ctl" shutdown >/dev/null
	for _ in $(seq 1 100); do kill -0 "${TB_PIDS[$name]}" 2>/dev/null || break; sleep 0.1; done
	tb_stop "$name"
}

saved() { # NAME: ps_core's DEBUG line for the wharf-ctl save
	grep -qE "^$TS DEBUG wharf\.ps: ps_save: checkpoint $TB_DIR/$1-save\.ckpt written: generation [0-9]+, 0 rows, [0-9]+ bytes$" \
		"$TB_DIR/$1.log"
}

run_ps k-info 127.0.0.1:47801 "$TB_BUILD/wharf-psd" -- $KCL
grep -q ' DEBUG ' "$TB_DIR/k-info.log" && { cat "$TB_DIR/k-info.log" >&2; tb_fail "DEBUG lines at the default level"; }
WHARF_LOG_LEVEL=wharf.ps:debug run_ps k-debug 127.0.0.1:47801 "$TB_BUILD/wharf-psd" -- $KCL
saved k-debug || { cat "$TB_DIR/k-debug.log" >&2; tb_fail "kernel PS: no DEBUG checkpoint line with WHARF_LOG_LEVEL=wharf.ps:debug"; }
tb_pass "kernel PS: $(grep -m1 'DEBUG wharf.ps' "$TB_DIR/k-debug.log")"
grep -qE "^$TS INFO wharf\.ps: wharf-psd: ps 0 serving 1 table" "$TB_DIR/k-info.log" ||
	{ cat "$TB_DIR/k-info.log" >&2; tb_fail "kernel PS: no INFO wharf.ps serving line"; }
WHARF_LOG_LEVEL=wharf.ps:loud timeout 20 "$TB_BUILD/wharf-psd" -- $KCL >/dev/null 2>"$TB_DIR/bad.log"
rc=$?
[ $rc -eq 2 ] && grep -q "^wharf-psd: WHARF_LOG_LEVEL: 'wharf.ps:loud' is not pattern:level" "$TB_DIR/bad.log" ||
	{ cat "$TB_DIR/bad.log" >&2; tb_fail "WHARF_LOG_LEVEL=wharf.ps:loud: exit $rc, not refused with its name"; }
tb_pass "WHARF_LOG_LEVEL=wharf.ps:loud refused: $(tail -n 1 "$TB_DIR/bad.log" | cut -c1-80)..."

tb_switch 2 || tb_fail "switch"
run_ps d-debug 127.0.0.1:47800 "$TB_BUILD/wharf-psd" $(tb_eal psd 0) --log-level=wharf.ps:debug \
	--log-level=wharf.dn:debug -- $DCL
saved d-debug || { cat "$TB_DIR/d-debug.log" >&2; tb_fail "DPDK PS: no DEBUG checkpoint line with --log-level=wharf.ps:debug"; }
grep -qE "^$TS DEBUG wharf\.dn: port 0 \(net_virtio_user\): started" "$TB_DIR/d-debug.log" ||
	{ cat "$TB_DIR/d-debug.log" >&2; tb_fail "DPDK PS: no port line with --log-level=wharf.dn:debug"; }
tb_pass "DPDK PS: $(grep -m1 'DEBUG wharf.dn' "$TB_DIR/d-debug.log")"

bad=$(cat "$TB_DIR"/*.log | grep -E ' wharf\.[a-z]+: ' | grep -vcE "^$TS (EMERG|ALERT|CRIT|ERROR|WARNING|NOTICE|INFO|DEBUG) wharf\.[a-z]+: ")
[ "$bad" -eq 0 ] || tb_fail "$bad wharf lines without the time and level prefix"
grep -lE 'wharf\.[a-z]+: |EAL: ' "$TB_DIR"/*.out && tb_fail "log lines on stdout"
tb_pass "every wharf line has its UTC time, level and type; stdout has no log line"
