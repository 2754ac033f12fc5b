#!/usr/bin/env bash
# The documentation names only what exists: testbed/docs_check.py reads README.md, docs/*.md
# and every other Markdown file of the tree and checks each repo path, make target, --flag
# (against the executables' --help output), environment variable, function or counter name,
# telemetry command, test name and link they mention; and that nothing points outside the
# repository or numbers rounds of work. Each missing name is printed as FILE:LINE.
# First the checker itself: a document of wrong names (a flag, a variable, a target, a
# path, ...) must be refused with each of them reported. Needs the executables built (make
# integ and make test build first); no EAL, no network, a few seconds.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
[ -x "$TB_BUILD/wharf-train" ] || tb_fail "build/wharf-train is not built: run make all first"
check() { timeout 60 /usr/bin/python3 "$TB_ROOT/testbed/docs_check.py" "$@" "$TB_ROOT" 2>&1; }

tmp=$(mktemp -d /tmp/wharf-docs.XXXX)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/wrong.md" <<'DOC'
Run `build/wharf-train -- --no-such-flag`, then `make nosuch`, with `WHARF_NO_SUCH=1`;
see `apps/nosuch.c`, `fz_no_such_call()`, `t_no_such`, `/wharf/ps/nosuch` and [a](nope.md).

| flag | JSON key |
|---|---|
| --seconds | fuse.no_such_key |
DOC
out=$(check --extra "$tmp/wrong.md") && { echo "$out"; tb_fail "docs_check accepted wrong names"; }
for n in "flag '--no-such-flag'" "make target 'nosuch'" "name 'WHARF_NO_SUCH'" \
	"path 'apps/nosuch.c'" "identifier 'fz_no_such_call'" "test 't_no_such'" \
	"telemetry command '/wharf/ps/nosuch'" "link 'nope.md'" "flag '--seconds'" \
	"JSON key 'fuse.no_such_key'"; do
	grep -qF "wrong.md:" <<<"$(grep -F "$n" <<<"$out")" || { echo "$out"; tb_fail "docs_check did not report $n"; }
done
tb_pass "docs_check reports each of 10 wrong names with its file and line"

out=$(check)
rc=$?
echo "$out"
[ $rc -eq 0 ] || tb_fail "the docs name things the tree does not have (above)"
tb_pass "${out##*$'\n'}"
