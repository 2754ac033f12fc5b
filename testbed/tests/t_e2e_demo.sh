#!/usr/bin/env bash
# A short `make demo` (the PyTorch MLP, 1 epoch on 6000 images): both runs (dpdk over the switch, then kernel)
# finish, the comparison table is printed, and the last line is the one JSON object with both
# protocols' accuracy and samples/s.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp /tmp/wharf-demo-test.XXXX)
trap 'rm -f "$out"' EXIT
DEMO_EPOCHS=1 DEMO_TRAIN_LIMIT=6000 DEMO_TIMEOUT=120 "$ROOT/testbed/demo.sh" >"$out" 2>&1
rc=$?
tail -n 12 "$out"
[ $rc -eq 0 ] || { echo "FAIL: demo exited $rc"; exit 1; }
last=$(tail -n 1 "$out")
python3 - "$last" <<'PY' || { echo "FAIL: last line is not the expected JSON: $last"; exit 1; }
import json, sys
d = json.loads(sys.argv[1])
for p in ("dpdk", "kernel"):
    assert d[p]["test_accuracy"] > 0.6, (p, d[p])
    assert d[p]["samples_per_s"] > 0, (p, d[p])
PY
grep -q "PyTorch MLP" "$out" || { echo "FAIL: the demo did not run the PyTorch example"; exit 1; }
grep -q '^protocol  *test_accuracy' "$out" || { echo "FAIL: no comparison table"; exit 1; }
for w in w0 w1; do
	grep -q "^$w epoch  1/1 \[#*\] 100%" "$out" || { echo "FAIL: no progress bar of $w"; exit 1; }
done
grep -q '^ *test accuracy 0\.[0-9]*' "$out" || { echo "FAIL: no per-epoch test accuracy"; exit 1; }
echo "PASS: demo (short): $last"
