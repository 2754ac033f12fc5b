#!/usr/bin/env bash
# Bounded memory for a PS table under a long-tail key stream, over protocol dpdk (1 PS + 1
# worker on the switch, async). wharf-train's CTR LR model with --ctr-tail 6: six more
# fields of ever-new ids (about 266,000 keys in 2 epochs of 100,000 samples), while the
# model's 26 real fields hold about 2,600 keys. wharf-psd serves the same tables from a model
# file that adds memory policies to the sparse table (its digest is the built-in model's:
# policies are the servers' own). Three runs:
#   bounded  max_bytes 4 MiB, admit_after 2, evict_after 50: the table's bytes (sampled from
#            wharf-ctl status while training runs) never pass 4 MiB, keys seen once are
#            counted and dropped, counters and rows are evicted, the model reaches the AUC of
#            the unbounded run;
#   capped   max_bytes 1 MiB, evict_after 50, no admission: the table fills, keys new to it
#            are refused (-EDQUOT, reported by the trainer, which goes on), existing rows keep
#            being served and trained, the table stays within 1 MiB;
#   plain    no policies: the table grows past 4 MiB (what the policies prevent).
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=48640
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:%d=198.19.0.1:6666\n127.0.0.1:%d=198.19.0.2:5555\n' $B $((B + 1)) >"$MAP"
CL="--ps 127.0.0.1:$B --workers 127.0.0.1:$((B + 1)) --endpoint-map $MAP --protocol dpdk --mode async --wait-timeout 30 --retry-interval 1"
TRAIN="--model lr --ctr-samples 100000 --epochs 2 --ctr-tail 6"
tb_switch 2 || tb_fail "switch"

model() { # FILE POLICIES: the built-in lr model's tables, the sparse one with POLICIES
	printf '{"tables": [\n  {"name": "weights", "dim": 1, "lr": 2, "seed": 42%s},\n' "$2" >"$1"
	printf '  {"name": "bias", "kind": "dense", "rows": 1, "dim": 1, "lr": 2, "seed": 43}\n]}\n' >>"$1"
}

# A field of table 0's line of `wharf-ctl status`.
field() { sed -nE "s/^table +0 sparse .* $1 ([0-9]+).*/\1/p" <<<"$2"; }

# run NAME QUOTA POLICIES: trains against a PS of those policies; samples the table's bytes
# every 0.1 s while the worker runs (MAXB: the largest), keeps the last status in STATUS.
run() {
	local name=$1 quota=$2 st b
	model "$TB_DIR/$name.json" "$3"
	tb_node ps-$name 0 psd $CL --role ps --model-file "$TB_DIR/$name.json"
	tb_wait_log "$TB_DIR/ps-$name.log" "serving" 30 || { cat "$TB_DIR/ps-$name.log" >&2; tb_fail "$name: wharf-psd did not come up"; }
	tb_node w-$name 1 train $CL --role worker --task-index 0 $TRAIN
	MAXB=0
	for _ in $(seq 1 600); do
		kill -0 "${TB_PIDS[w-$name]}" 2>/dev/null || break
		st=$("$TB_BUILD/wharf-ctl" 127.0.0.1:$B status 2>/dev/null)
		b=$(field bytes "$st")
		[ -n "$b" ] && [ "$b" -gt "$MAXB" ] && MAXB=$b
		[ "$quota" = 0 ] || [ "$MAXB" -le "$quota" ] || tb_fail "$name: table 0 holds $MAXB bytes while training, above max_bytes $quota"
		sleep 0.1
	done
	STATUS=$("$TB_BUILD/wharf-ctl" 127.0.0.1:$B status)
	b=$(field bytes "$STATUS")
	[ "$b" -gt "$MAXB" ] && MAXB=$b
	"$TB_BUILD/wharf-ctl" 127.0.0.1:$B shutdown >/dev/null
	tb_wait_log "$TB_DIR/ps-$name.log" "stopped after" 10 || tb_fail "$name: wharf-psd did not stop"
	tb_stop w-$name
	tb_stop ps-$name
	grep -q '"test_auc"' "$TB_DIR/w-$name.out" || { tail -n 8 "$TB_DIR/w-$name.log" "$TB_DIR/ps-$name.log" >&2; tb_fail "$name: the worker did not finish"; }
	grep -E "^table +0 " <<<"$STATUS" >&2
}

auc_ok() { # NAME: the model's AUC within 0.05 of Bayes (t_e2e_ctr's bound)
	local gap
	gap=$(tb_json "$TB_DIR/w-$1.out" auc_gap)
	[ "$(echo "$gap" | awk '{print ($1 <= 0.05)}')" = 1 ] || tb_fail "$1: AUC gap to Bayes $gap > 0.05"
	echo "$gap"
}

Q=4194304
run bounded $Q ', "max_bytes": 4194304, "admit_after": 2, "evict_after": 50'
gap=$(auc_ok bounded)
rows=$(field rows "$STATUS"); cap=$(field rows_cap "$STATUS")
dropped=$(field admission_dropped "$STATUS"); expired=$(field admission_expired "$STATUS")
evicted=$(field evicted "$STATUS"); admitted=$(field admission_admitted "$STATUS")
[ "$rows" -le "$cap" ] || tb_fail "bounded: $rows rows above the cap of $cap"
[ "$dropped" -ge 100000 ] && [ "$expired" -gt 0 ] && [ "$admitted" -gt 0 ] ||
	tb_fail "bounded: admission dropped $dropped key gradients (expected >= 100000), admitted $admitted, expired $expired counters"
tb_pass "bounded: at most $MAXB bytes (max_bytes $Q), $rows rows; admission dropped $dropped key gradients, admitted $admitted keys, expired $expired counters; $evicted rows evicted; AUC gap $gap"

Q1=1048576
run capped $Q1 ', "max_bytes": 1048576, "evict_after": 50'
gap=$(auc_ok capped)
rows=$(field rows "$STATUS"); cap=$(field rows_cap "$STATUS"); refused=$(field rows_refused_cap "$STATUS")
[ "$rows" -le "$cap" ] && [ "$refused" -gt 0 ] || tb_fail "capped: $rows rows (cap $cap), $refused keys refused (expected > 0)"
full=$(grep -c "is at its memory cap on a server" "$TB_DIR/w-capped.log")
[ "$full" -ge 1 ] || { tail -n 5 "$TB_DIR/w-capped.log" >&2; tb_fail "capped: the trainer did not report the full table"; }
grep -q "table 0 shard [0-9]*: at its cap of" "$TB_DIR/ps-capped.log" || tb_fail "capped: the PS did not log the full table"
tb_pass "capped: $rows rows of $cap, $refused keys refused, at most $MAXB bytes (max_bytes $Q1); the trainer reported it and went on; AUC gap $gap"

run plain 0 ''
gap=$(auc_ok plain)
rows=$(field rows "$STATUS")
[ "$MAXB" -gt "$Q" ] || tb_fail "plain: the table took $MAXB bytes, expected more than $Q without policies"
tb_pass "plain (no policies): $rows rows, $MAXB bytes; AUC gap $gap"
