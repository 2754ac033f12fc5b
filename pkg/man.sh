#!/usr/bin/env bash
# man.sh EXE VERSION OUT — the man page (section 1) of a wharf executable, made by help2man
# from the program's own --help; make install puts it in share/man/man1.
# The NAME line is the first sentence of the program's main.c header comment
# ("wharf-x — what it does."). A DPDK program's own options follow "--" (its plain --help is
# EAL's usage), so, as docs_check.py asks: `EXE --help`, and `EXE -- --help` when that fails
# or answers with EAL's usage.
set -eu
exe=$1 version=$2 out=$3
name=$(basename "$exe")
app=${name#wharf-}
command -v help2man >/dev/null ||
	{ echo "man.sh: help2man is not installed (make deps, or apt-get install help2man)" >&2; exit 1; }

src=
for d in apps testbed; do [ -f "$d/$app/main.c" ] && src=$d/$app/main.c; done
[ -n "$src" ] || { echo "man.sh: $name: no apps/$app/main.c or testbed/$app/main.c" >&2; exit 1; }
# The header's first paragraph, joined; its first sentence (to ". ", ": " or ";") after "—".
desc=$(awk 'NR == 1 { next } /^ \*\/|^ \*$/ { exit } { sub(/^ \* ?/, ""); printf "%s ", $0 }' "$src" |
	sed -nE "s/^$name +— +//p" | sed -E 's/(: |\. |; ).*//; s/[. ]+$//')
[ -n "$desc" ] || { echo "man.sh: $src does not open with \"$name — what it does\"" >&2; exit 1; }

opt=--help
if ! text=$(timeout 20 "$exe" --help 2>&1 </dev/null) || grep -q 'EAL common options' <<<"$text"; then
	opt='-- --help'
fi
mkdir -p "$(dirname "$out")"
timeout 60 help2man --no-info --no-discard-stderr --section=1 --manual="wharf" \
	--source="wharf $version" --version-string="$version" --help-option="$opt" \
	--name="$desc" --output="$out.tmp" "$exe" </dev/null
mv "$out.tmp" "$out"
