#!/usr/bin/env bash
# The documentation names only what exists: testbed/docs_check.py reads README.md, docs/*.md
# and every other Markdown file of the tree and checks each repo path, make target, --flag
# (against the executables' --help output), environment variable, function or counter name,
# telemetry command, test name and link they mention; and that nothing points outside the
# repository or numbers rounds of work. Each missing name is printed as FILE:LINE. Needs the
# executables built (make all runs first in make integ and make test); no EAL, no network,
# a few seconds.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
[ -x "$TB_BUILD/wharf-train" ] || tb_fail "build/wharf-train is not built: run make all first"
out=$(timeout 60 /usr/bin/python3 "$TB_ROOT/testbed/docs_check.py" "$TB_ROOT" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || tb_fail "the docs name things the tree does not have (above)"
tb_pass "${out##*$'\n'}"
