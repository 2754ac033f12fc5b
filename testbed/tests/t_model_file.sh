#!/usr/bin/env bash
# User-defined tables end to end, over kernel TCP on 127.0.0.1 (seconds, no switch):
# wharf-psd --model-file configs/model_30.json serves 30 tables (sparse and dense, every
# optimizer); its health answer names the model's digest (the one it logged at start);
# wharf-ps-bench, a worker of the same file, pulls and pushes one of its sparse tables
# (table 12, an Adam table of dim 8) and the server's status counts them on that table; a
# worker of another model (wharf-train --model softmax, and ps-bench with one learning rate
# of the file changed) is refused at once, naming both digests; a malformed model file is
# refused by wharf-psd with exit status 2, its line and the reason. Then wharf-psd --model
# mlp against wharf-train --model softmax: refused too.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=48500
MODEL=$TB_ROOT/configs/model_30.json
CL="--protocol kernel --ps 127.0.0.1:$B --num-workers 1 --mode async --wait-timeout 20 --retry-interval 1"

# A malformed file: refused before anything starts, with its line and reason.
printf '{"tables": [\n  {"name": "a", "dim": 4},\n  {"name": "b", "dim": 4,}\n]}\n' >"$TB_DIR/bad.json"
"$TB_BUILD/wharf-psd" -- $CL --role ps --model-file "$TB_DIR/bad.json" >/dev/null 2>"$TB_DIR/bad.log"
rc=$?
[ $rc = 2 ] && grep -q "bad.json:3:.*expected" "$TB_DIR/bad.log" ||
	{ cat "$TB_DIR/bad.log" >&2; tb_fail "malformed model file: exit $rc, expected 2 naming line 3"; }
printf '{"tables": [{"name": "a", "optimizer": "adam", "beta2": 1.5}]}\n' >"$TB_DIR/range.json"
"$TB_BUILD/wharf-psd" -- $CL --role ps --model-file "$TB_DIR/range.json" >/dev/null 2>"$TB_DIR/range.log"
rc=$?
[ $rc = 2 ] && grep -q "table 0 'a': beta2 (adam): 1.5 outside \[0, 1)" "$TB_DIR/range.log" ||
	{ cat "$TB_DIR/range.log" >&2; tb_fail "out-of-range beta2: exit $rc, expected 2 naming the table and field"; }
tb_pass "malformed model files refused: $(sed 's/^wharf-psd: //' "$TB_DIR/bad.log"); $(sed 's/^wharf-psd: //' "$TB_DIR/range.log")"

tb_node ps 0 psd $CL --role ps --model-file "$MODEL"
tb_wait_log "$TB_DIR/ps.log" "serving" 20 || { cat "$TB_DIR/ps.log" >&2; tb_fail "wharf-psd did not come up"; }
logged=$(sed -nE 's/.*model .*: 30 tables, digest ([0-9a-f]{16}).*/\1/p' "$TB_DIR/ps.log")
health=$("$TB_BUILD/wharf-ctl" 127.0.0.1:$B health)
served=$(sed -nE 's/.* model ([0-9a-f]{16})$/\1/p' <<<"$health")
[ -n "$logged" ] && [ "$served" = "$logged" ] ||
	tb_fail "health '$health' does not name the digest logged at start ($logged)"
tb_pass "wharf-psd serves 30 tables; health: $health"

# A worker of the same model file: pulls and pushes table 12 (field_10, adam, dim 8).
T=field_10
timeout 60 "$TB_BUILD/wharf-ps-bench" -- $CL --role worker --model-file "$MODEL" --table $T \
	--seconds 1 --batch 200 --keys 100000 >"$TB_DIR/w.out" 2>"$TB_DIR/w.log" ||
	{ cat "$TB_DIR/w.log" >&2; tb_fail "ps-bench worker of the same model failed"; }
[ "$(tb_json "$TB_DIR/w.out" table)" = 12 ] && [ "$(tb_json "$TB_DIR/w.out" dim)" = 8 ] ||
	{ cat "$TB_DIR/w.out" >&2; tb_fail "ps-bench did not bench table 12 of dim 8"; }
for k in pull_keys_per_s push_keys_per_s; do
	v=$(tb_json "$TB_DIR/w.out" "$k")
	[ "$(echo "$v" | awk '{print ($1 > 0)}')" = 1 ] || tb_fail "ps-bench $k = $v, expected > 0"
done
status=$("$TB_BUILD/wharf-ctl" 127.0.0.1:$B status)
grep -qE "^table +12 sparse +dim 8 +rows [1-9]" <<<"$status" ||
	{ echo "$status" >&2; tb_fail "the server's status shows no rows in table 12"; }
tb_pass "a worker of the same file on table $T: pull $(tb_json "$TB_DIR/w.out" pull_keys_per_s) keys/s, push $(tb_json "$TB_DIR/w.out" push_keys_per_s) keys/s; $(grep -E '^table +12 ' <<<"$status")"

# Workers of other models: refused at once (no waiting out --wait-timeout), both digests named.
sed 's/"lr": 0.001, "beta1": 0.9/"lr": 0.002, "beta1": 0.9/' "$MODEL" >"$TB_DIR/other.json"
cmp -s "$MODEL" "$TB_DIR/other.json" && tb_fail "other.json is the same model"
refused() { # NAME CMD... : exits non-zero within 10 s naming the server's digest
	local name=$1 t0=$SECONDS rc; shift
	timeout 30 "$@" >"$TB_DIR/$name.out" 2>"$TB_DIR/$name.log"
	rc=$?
	[ $rc -ne 0 ] && [ $((SECONDS - t0)) -le 10 ] && grep -q "serves model $logged, this worker trains model [0-9a-f]\{16\}" "$TB_DIR/$name.log" ||
		{ cat "$TB_DIR/$name.log" >&2; tb_fail "$name: exit $rc after $((SECONDS - t0)) s, expected a refusal naming $logged"; }
}
refused other "$TB_BUILD/wharf-ps-bench" -- $CL --role worker --model-file "$TB_DIR/other.json" \
	--table $T --seconds 1 --batch 200
refused softmax "$TB_BUILD/wharf-train" -- $CL --role worker --model softmax --epochs 1
tb_pass "other models refused: $(grep -m1 'serves model' "$TB_DIR/softmax.log" | sed 's/^wharf-train: //')"
"$TB_BUILD/wharf-ctl" 127.0.0.1:$B shutdown >/dev/null || tb_fail "shutdown"
tb_wait_log "$TB_DIR/ps.log" "stopped after" 10 || tb_fail "wharf-psd did not stop"
tb_stop ps

# The built-in models check the same way: a PS of mlp, a worker of softmax.
tb_node ps2 0 psd $CL --role ps --model mlp
tb_wait_log "$TB_DIR/ps2.log" "serving" 20 || { cat "$TB_DIR/ps2.log" >&2; tb_fail "wharf-psd --model mlp did not come up"; }
logged=$(sed -nE 's/.*model mlp: 4 tables, digest ([0-9a-f]{16}).*/\1/p' "$TB_DIR/ps2.log")
refused mlp-softmax "$TB_BUILD/wharf-train" -- $CL --role worker --model softmax --epochs 1
tb_pass "wharf-psd --model mlp refuses wharf-train --model softmax: $(grep -m1 'serves model' "$TB_DIR/mlp-softmax.log" | sed 's/^wharf-train: //')"
