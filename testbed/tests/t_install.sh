#!/usr/bin/env bash
# make install as a user of the library gets it, into temporary prefixes (no EAL, a few
# seconds):
#   1. staged (DESTDIR=.../stage PREFIX=/usr/local): exactly the expected files, nothing else
#      (the executables, libwharf.a, libwharf.so.M.m.p with its soname and dev links, the
#      public headers, wharf.pc and wharf-libs.pc naming /usr/local, a man page per
#      executable, the LICENSE); make uninstall leaves no file behind.
#   2. PREFIX=<tmp>/prefix: the shared library's soname and DT_NEEDED (readelf -d); it exports
#      only wharf_ names (nm -D: every other global of the layers is local); libwharf.a holds
#      every library layer's objects; pkg-config --cflags --libs wharf with PKG_CONFIG_PATH
#      there; testbed/extern/hello.c copied outside the tree, built shared and static from
#      pkg-config alone, and run (it calls wharf_version()).
#   3. testbed/extern/two_tables.c built from pkg-config against that prefix trains its own
#      two-table model from four threads per worker over dpdk and kernel (t_api_train's job).
set -u
. "$(dirname "$0")/../cluster/tb.sh"
for t in pkg-config readelf nm ar cc; do
	command -v "$t" >/dev/null || tb_fail "$t is not installed (make deps)"
done
[ -e "$TB_BUILD/lib/libwharf.so" ] || tb_fail "build/lib/libwharf.so is not built: run make all first"
tb_init no-huge

H=$TB_ROOT/include/wharf/wharf.h
ver() { sed -nE "s/^#define WHARF_VERSION_$1 +([0-9]+).*/\\1/p" "$H"; }
MAJOR=$(ver MAJOR); VERSION=$MAJOR.$(ver MINOR).$(ver PATCH)
[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || tb_fail "$H: no WHARF_VERSION_MAJOR/MINOR/PATCH"
APPS=$(cd "$TB_BUILD" && ls wharf-* | sort)
[ -n "$APPS" ] || tb_fail "no build/wharf-* executables"

mk() { # make ARGS..., output in $TB_DIR/make.log
	make -C "$TB_ROOT" --no-print-directory BUILD="$TB_BUILD" "$@" >>"$TB_DIR/make.log" 2>&1 ||
		{ tail -n 20 "$TB_DIR/make.log" >&2; tb_fail "make $*"; }
}
# Every file and link under a directory, relative to it, sorted.
tree_of() { (cd "$1" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort); }

# ---- 1. staged install: the exact file list ------------------------------------------
PY_VER=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_python_version())')
PY_EXT=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
STAGE=$TB_DIR/stage
mk install DESTDIR="$STAGE" PREFIX=/usr/local
want=$( {
	for a in $APPS; do echo "bin/$a"; echo "share/man/man1/$a.1"; done
	(cd "$TB_ROOT/include/wharf" && ls *.h) | sed 's|^|include/wharf/|'
	printf '%s\n' lib/libwharf.a lib/libwharf.so "lib/libwharf.so.$MAJOR" "lib/libwharf.so.$VERSION" \
		lib/pkgconfig/wharf.pc lib/pkgconfig/wharf-libs.pc share/doc/wharf/LICENSE
	# the Python package (make install-python), for Debian's /usr/bin/python3
	for f in __init__.py data.py torch.py "_wharf$PY_EXT" "_data$PY_EXT"; do
		echo "lib/python$PY_VER/dist-packages/wharf/$f"
	done
} | sort)
got=$(tree_of "$STAGE/usr/local")
[ "$got" = "$want" ] || { diff <(echo "$want") <(echo "$got") >&2; tb_fail "staged install: files differ from the expected list (< expected, > installed)"; }
[ -z "$(find "$STAGE" -mindepth 1 -maxdepth 1 ! -name usr)" ] || tb_fail "staged install wrote outside DESTDIR/PREFIX"
L=$STAGE/usr/local/lib
[ "$(readlink "$L/libwharf.so")" = "libwharf.so.$MAJOR" ] && [ "$(readlink "$L/libwharf.so.$MAJOR")" = "libwharf.so.$VERSION" ] ||
	tb_fail "dev links: libwharf.so -> $(readlink "$L/libwharf.so"), libwharf.so.$MAJOR -> $(readlink "$L/libwharf.so.$MAJOR")"
grep -qx 'prefix=/usr/local' "$L/pkgconfig/wharf.pc" && grep -qx "Version: $VERSION" "$L/pkgconfig/wharf.pc" ||
	tb_fail "wharf.pc does not say prefix=/usr/local and Version: $VERSION"
grep -q '^\.TH WHARF-TRAIN "1"' "$STAGE/usr/local/share/man/man1/wharf-train.1" &&
	grep -qF '\-\-role' "$STAGE/usr/local/share/man/man1/wharf-train.1" ||
	tb_fail "wharf-train.1 is not a man page of wharf-train's --help"
cmp -s "$TB_ROOT/LICENSE" "$STAGE/usr/local/share/doc/wharf/LICENSE" || tb_fail "LICENSE not installed"
mk uninstall DESTDIR="$STAGE" PREFIX=/usr/local
left=$(tree_of "$STAGE")
[ -z "$left" ] || { echo "$left" >&2; tb_fail "make uninstall left files (above)"; }
tb_pass "staged install: $(echo "$want" | wc -l) files as expected (version $VERSION), uninstall removes them all"

# ---- 2. a real prefix: the shared library, the archive, pkg-config, a program --------
P=$TB_DIR/prefix
mk install PREFIX="$P"
SO=$P/lib/libwharf.so.$VERSION
dyn=$(readelf -d "$SO")
grep -qF "Library soname: [libwharf.so.$MAJOR]" <<<"$dyn" || tb_fail "soname of $SO is not libwharf.so.$MAJOR"
for n in librte_eal.so librte_ethdev.so librte_net_vhost.so libnuma.so libjansson.so libz.so; do
	grep -q "(NEEDED).*\\[$n" <<<"$dyn" || tb_fail "libwharf.so has no DT_NEEDED $n"
done
tb_pass "libwharf.so.$VERSION: soname libwharf.so.$MAJOR, DPDK, numa, jansson and zlib as DT_NEEDED"

# Exported: the wharf_ API only. The version node (an absolute symbol named after the
# version, WHARF_0.2) is the one other name nm -D shows.
syms=$(nm -D --defined-only "$SO")
api=$(awk '$3 ~ /^wharf_/' <<<"$syms")
leaks=$(awk '$3 !~ /^wharf_/ && !($2 == "A" && $3 ~ /^WHARF_[0-9.]+$/) { print $3 }' <<<"$syms")
[ -z "$leaks" ] || tb_fail "libwharf.so exports $(wc -l <<<"$leaks") names without the wharf_ prefix: $(head -n 8 <<<"$leaks" | paste -sd' ')"
[ -n "$api" ] && grep -q ' T wharf_version@@WHARF_' <<<"$syms" || tb_fail "libwharf.so does not export wharf_version (versioned)"
tb_pass "nm -D: $(wc -l <<<"$api") exported names, all wharf_ (versioned $(sed -nE 's/.*@@(WHARF_[0-9.]+).*/\1/p' <<<"$syms" | sort -u | paste -sd,))"

# libwharf.a: one object per source file of every library layer.
members=$(ar t "$P/lib/libwharf.a" | sort)
nsrc=0
for l in $(sed -nE 's/^LAYERS *:= *//p' "$TB_ROOT/Makefile"); do
	for c in "$TB_ROOT/$l"/*.c; do
		nsrc=$((nsrc + 1))
		o=$(basename "$c" .c).o
		grep -qx "$o" <<<"$members" || tb_fail "libwharf.a has no $o (layer $l)"
	done
done
tb_pass "libwharf.a: $nsrc objects, every library layer"

export PKG_CONFIG_PATH=$P/lib/pkgconfig
[ "$(pkg-config --modversion wharf)" = "$VERSION" ] || tb_fail "pkg-config --modversion wharf: $(pkg-config --modversion wharf 2>&1)"
cflags=$(pkg-config --cflags wharf) && libs=$(pkg-config --libs wharf) || tb_fail "pkg-config wharf failed"
grep -qF -- "-I$P/include" <<<"$cflags" || tb_fail "pkg-config --cflags wharf: no -I$P/include: $cflags"
grep -qF -- "-L$P/lib" <<<"$libs" && grep -qw -- -lwharf <<<"$libs" || tb_fail "pkg-config --libs wharf: $libs"
tb_pass "pkg-config wharf $VERSION: --libs ${libs% }"

# Outside the tree: nothing of it on the include or library path but what pkg-config says.
SRC=$TB_DIR/user
mkdir -p "$SRC" && cp "$TB_ROOT/testbed/extern/hello.c" "$SRC/"
cd "$SRC" || tb_fail "cd $SRC"
CC=${CC:-cc}
$CC -std=c11 -Wall -Wextra -Werror -o hello-shared hello.c $(pkg-config --cflags --libs wharf) 2>"$TB_DIR/cc.log" ||
	{ cat "$TB_DIR/cc.log" >&2; tb_fail "hello.c does not build against the shared libwharf"; }
grep -q "(NEEDED).*\\[libwharf.so.$MAJOR\\]" <(readelf -d hello-shared) || tb_fail "hello-shared does not need libwharf.so.$MAJOR"
[ "$(LD_LIBRARY_PATH=$P/lib ldd ./hello-shared | awk '$1 == "libwharf.so.'"$MAJOR"'" { print $3 }')" = "$P/lib/libwharf.so.$MAJOR" ] ||
	tb_fail "hello-shared does not load $P/lib/libwharf.so.$MAJOR"
out=$(LD_LIBRARY_PATH=$P/lib timeout 20 ./hello-shared 2>&1) && [ "$out" = "wharf $VERSION" ] ||
	tb_fail "hello-shared: $out"
tb_pass "hello.c, shared: $out"

# --no-as-needed first, as toolchains without Debian's default --as-needed link: what keeps
# libwharf.so out of a static link is wharf.pc's own order (libwharf.a, then -lwharf behind
# --as-needed), not the compiler's defaults.
$CC -std=c11 -Wall -Wextra -Werror -o hello-static hello.c -Wl,--no-as-needed \
	$(pkg-config --static --cflags --libs wharf) 2>"$TB_DIR/cc.log" ||
	{ cat "$TB_DIR/cc.log" >&2; tb_fail "hello.c does not build with pkg-config --static"; }
needed=$(readelf -d hello-static | grep -E '\[(libwharf|librte_)' | sed -nE 's/.*\[(.*)\]/\1/p' | paste -sd' ')
[ -z "$needed" ] || tb_fail "hello-static still needs $needed"
out=$(timeout 20 ./hello-static 2>&1) && [ "$out" = "wharf $VERSION" ] || tb_fail "hello-static: $out"
tb_pass "hello.c, static (libwharf.a and DPDK's archives, no libwharf or librte_ DT_NEEDED): $out"
cd "$TB_ROOT" || tb_fail "cd $TB_ROOT"

# ---- 3. training through the installed library ------------------------------------------
# testbed/extern/two_tables.c (its own model: a sparse and a dense table, wharf_model_add)
# built from pkg-config against this prefix, run as t_api_train runs it: a PS and two
# workers of four application threads each, over dpdk (virtio-user through the switch) and
# kernel TCP, each worker to a held-out accuracy of 0.9, every process loading the installed
# libwharf.so.
WHARF_PKG_CONFIG_PATH=$P/lib/pkgconfig LD_LIBRARY_PATH=$P/lib TB_KEEP_LOGS= \
	"$TB_ROOT/testbed/tests/t_api_train.sh" >"$TB_DIR/api_train.log" 2>&1 ||
	{ tail -n 20 "$TB_DIR/api_train.log" >&2; tb_fail "two_tables.c against the installed library (above)"; }
grep -E 'PASS|loads' "$TB_DIR/api_train.log" | sed 's/^\[tb [0-9:]*\] /  /'
tb_pass "two_tables.c built with pkg-config --cflags --libs wharf trained from 4 threads per worker over dpdk and kernel against the installed libwharf.so"

mk uninstall PREFIX="$P"
left=$(tree_of "$P")
[ -z "$left" ] || { echo "$left" >&2; tb_fail "make uninstall PREFIX=$P left files (above)"; }
tb_pass "make uninstall PREFIX=$P: no file left"
