#!/usr/bin/env bash
# fuzz/run.sh — builds wharf's libFuzzer harnesses with clang and runs them.
#
#   fuzz/run.sh [--smoke] [--build-only] [--gen-seeds] [TARGET...]
#
# Each fuzz/fuzz_<target>.c is linked with the layer sources it exercises (compiled here
# with clang, never the gcc archives in build/lib) into build/fuzz/fuzz_<target>, with
# -fsanitize=fuzzer,address,undefined and UBSan made fatal, so every sanitizer report is
# a crash (FUZZ_JOBS compiles at once, default one per core). Then, per harness, FUZZ_JOBS
# harnesses at once:
#   default   fuzz for FUZZ_SECONDS (60) starting from fuzz/corpus/<target>; new inputs
#             go to build/fuzz/corpus/<target> (the committed seeds stay small)
#   --smoke   replay every committed seed and every fuzz/crashes/<target> reproducer
#             one by one, then fuzz for FUZZ_SMOKE_SECONDS (3): the CI regression check
#   --gen-seeds  rebuild fuzz/gen_seeds and rewrite fuzz/corpus/ (then commit it)
# One line per harness as it ends (executions, crashes, verdict), then "N passed, N failed"; exit
# status non-zero when any harness crashed, leaked, hit a sanitizer or failed to build.
# A crashing input is kept as build/fuzz/artifacts/<target>/crash-*; the log of each run
# is build/fuzz/logs/<target>.log.
set -u
cd "$(dirname "$0")/.."

ALL_TARGETS=(fuse frame tcp ps wal config dn_input be_dpdk)
CC=${FUZZ_CC:-clang}
SECONDS_EACH=${FUZZ_SECONDS:-60}
SMOKE_SECONDS=${FUZZ_SMOKE_SECONDS:-3}
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
OUT=build/fuzz
smoke=0; build_only=0; gen=0; targets=()
for a in "$@"; do
	case "$a" in
	--smoke) smoke=1 ;;
	--build-only) build_only=1 ;;
	--gen-seeds) gen=1 ;;
	-h|--help) sed -n '2,19p' "$0"; exit 0 ;;
	-*) echo "run.sh: unknown option $a" >&2; exit 2 ;;
	*) targets+=("$a") ;;
	esac
done
[ ${#targets[@]} -eq 0 ] && targets=("${ALL_TARGETS[@]}")

if ! command -v "$CC" >/dev/null; then
	echo "run.sh: $CC not found (install clang, or set FUZZ_CC)" >&2; exit 2
fi
DPDK_CFLAGS=$(pkg-config --cflags libdpdk)
DPDK_LIBS="$(pkg-config --libs libdpdk) -lrte_net_vhost" # as the Makefile: dn_port asks net_vhost
BASE_FLAGS="-std=c11 -D_GNU_SOURCE -DALLOW_EXPERIMENTAL_API -I. $DPDK_CFLAGS -g -O1"
SAN="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# The harnesses are ours: warnings are errors. Layer sources keep their gcc -Werror in the
# Makefile; clang's extra warnings on them go to the build log, not to a failed build.
HARNESS_WARN="-Wall -Wextra -Werror"

# Layers (in link order, upper first) and extra objects per target. Each layer's sources
# are compiled into build/fuzz/lib/lib<layer>.a, so a harness pulls in only the objects it
# references: a layer file that needs another layer does not break a harness that
# never calls it. Every layer logs through dpdk_net's dn_log, so dpdk_net comes last in each.
layers_of() {
	case "$1" in
	fuse) echo fuse dpdk_net ;;
	frame|tcp) echo transport dpdk_net ;;
	ps|wal) echo ps_core dpdk_net ;;
	config) echo ps_core fuse transport dpdk_net ;;
	dn_input) echo dpdk_net ;;
	be_dpdk) echo transport dpdk_net ;;
	esac
}
extra_of() {
	case "$1" in dn_input|be_dpdk) echo dpdk_net/tests/dn_testlib.c ;; esac
}
LIBS_ALL="$DPDK_LIBS -lnuma -ljansson -lz -lm -lpthread"

# archive LAYER -> builds build/fuzz/lib/lib<layer>.a when a source or header is newer.
archive() {
	local l=$1 name a f stale=0 objs=()
	name=$(echo "$l" | tr / _)
	a=$OUT/lib/lib$name.a
	mkdir -p "$OUT/lib" "$OUT/obj/$name"
	for f in "$l"/*.c "$l"/*.h transport/tl_wire.h dpdk_net/dn_log.h fuzz/run.sh; do
		[ -e "$f" ] && [ "$f" -nt "$a" ] && stale=1
	done
	[ -f "$a" ] && [ $stale -eq 0 ] && return 0
	# FUZZ_JOBS compiles at once (default: one per core); any that fails fails the archive.
	local pids=() p rc=0
	for f in "$l"/*.c; do
		o="$OUT/obj/$name/$(basename "$f" .c).o"
		$CC $BASE_FLAGS $SAN -c "$f" -o "$o" &
		pids+=($!)
		objs+=("$o")
		if [ ${#pids[@]} -ge "$JOBS" ]; then
			wait "${pids[0]}" || rc=1
			pids=("${pids[@]:1}")
		fi
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	[ $rc -eq 0 ] || return 1
	rm -f "$a"
	ar rcs "$a" "${objs[@]}"
}

# build TARGET -> 0 or non-zero; skips when the binary is newer than every input.
build() {
	local t=$1 bin=$OUT/fuzz_$1 f l stale=0 libs=() objs=()
	mkdir -p "$OUT/obj/$t" "$OUT/logs"
	: >"$OUT/logs/build-$t.log"
	{
		for l in $(layers_of "$t"); do
			archive "$l" || return 1
			libs+=("$OUT/lib/lib$(echo "$l" | tr / _).a")
		done
		for f in fuzz/fuzz_"$t".c fuzz/fuzz_util.h $(extra_of "$t") "${libs[@]}"; do
			[ "$f" -nt "$bin" ] && stale=1
		done
		[ -x "$bin" ] && [ $stale -eq 0 ] && return 0
		$CC $BASE_FLAGS $SAN $HARNESS_WARN -c fuzz/fuzz_"$t".c -o "$OUT/obj/$t/harness.o" || return 1
		objs=("$OUT/obj/$t/harness.o")
		for f in $(extra_of "$t"); do
			$CC $BASE_FLAGS $SAN -c "$f" -o "$OUT/obj/$t/$(basename "$f" .c).o" || return 1
			objs+=("$OUT/obj/$t/$(basename "$f" .c).o")
		done
		# shellcheck disable=SC2086
		$CC $SAN -o "$bin" "${objs[@]}" "${libs[@]}" $LIBS_ALL
	} >>"$OUT/logs/build-$t.log" 2>&1
}

gen_seeds() {
	mkdir -p "$OUT/logs"
	{ archive ps_core && archive fuse && archive dpdk_net &&
		$CC $BASE_FLAGS $SAN $HARNESS_WARN -fsanitize=fuzzer-no-link -c fuzz/gen_seeds.c \
			-o "$OUT/obj/gen_seeds.o" &&
		$CC -fsanitize=address,undefined,fuzzer-no-link -o "$OUT/gen_seeds" "$OUT/obj/gen_seeds.o" \
			"$OUT/lib/libps_core.a" "$OUT/lib/libfuse.a" "$OUT/lib/libdpdk_net.a" $LIBS_ALL; } \
		>"$OUT/logs/build-gen_seeds.log" 2>&1 ||
		{ echo "gen_seeds: build failed, see $OUT/logs/build-gen_seeds.log"; return 1; }
	"$OUT/gen_seeds" fuzz/corpus
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:quarantine_size_mb=64:malloc_context_size=20}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/fuzz/lsan.supp:print_suppressions=0}

# run_one TARGET -> prints the harness line, returns 0 when clean.
run_one() {
	local t=$1 bin=$OUT/fuzz_$1 log=$OUT/logs/$1.log art=$OUT/artifacts/$1/
	local seeds=fuzz/corpus/$1 work=$OUT/corpus/$1 secs=$SECONDS_EACH rc=0 execs=0 n
	local dict=() replay=()
	mkdir -p "$art" "$work" "$seeds"
	[ -f fuzz/dict/"$t".dict ] && dict=(-dict=fuzz/dict/"$t".dict)
	: >"$log"
	local before; before=$(find "$art" -type f | wc -l)
	if [ $smoke -eq 1 ]; then
		secs=$SMOKE_SECONDS
		# CI starts from the committed seeds only, and keeps nothing it finds.
		work=$OUT/corpus/smoke-$t
		rm -rf "$work"; mkdir -p "$work"
		mapfile -t replay < <(find "$seeds" fuzz/crashes/"$t" -type f 2>/dev/null | sort)
		if [ ${#replay[@]} -gt 0 ]; then
			# Files given one by one are each run once: the regression replay.
			timeout --kill-after=10 $((120 + ${#replay[@]} / 10)) "$bin" -timeout=20 \
				-rss_limit_mb=2048 "${replay[@]}" >>"$log" 2>&1 || rc=$?
			n=$(grep -c '^Executed ' "$log")
			execs=$((execs + n))
		fi
	fi
	if [ $rc -eq 0 ]; then
		timeout --kill-after=10 $((secs + 120)) "$bin" -max_total_time="$secs" -timeout=20 \
			-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art" "${dict[@]}" \
			"$work" "$seeds" >>"$log" 2>&1 || rc=$?
		n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
		execs=$((execs + ${n:-0}))
	fi
	[ $smoke -eq 1 ] && rm -rf "$work"
	local crashes; crashes=$(( $(find "$art" -type f | wc -l) - before ))
	[ $rc -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1
	if [ $rc -eq 0 ]; then
		printf 'fuzz %-9s execs %-10s crashes %s  ok\n' "$t" "$execs" "$crashes"
	else
		printf 'fuzz %-9s execs %-10s crashes %s  FAILED (rc=%s, log %s)\n' "$t" "$execs" \
			"$crashes" "$rc" "$log"
		grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|invariant broken' \
			"$log" | sed 's/^/    /'
	fi
	return $rc
}

if [ $gen -eq 1 ]; then
	gen_seeds || exit 1
fi
# The harnesses run FUZZ_JOBS at once, each a single-threaded process with a core of its own,
# so each fuzzes as long and about as fast as alone. The ones that bring EAL up (on lcore 0,
# dpdk_net/tests/dn_testlib.c) never run together: they would share that core.
declare -A RUNNING=()   # pid -> target, of the harnesses running
eal_of() { [ -n "$(extra_of "$1")" ]; }
eal_running() {
	local p
	for p in "${!RUNNING[@]}"; do eal_of "${RUNNING[$p]}" && return 0; done
	return 1
}
# reap: waits for one harness to end, prints its line, counts it.
reap() {
	local pid rc t
	wait -n -p pid "${!RUNNING[@]}"; rc=$?
	t=${RUNNING[$pid]}
	unset "RUNNING[$pid]"
	cat "$OUT/logs/$t.line"
	if [ $rc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

# Every harness is built before any runs: a build beside a running harness would take its core.
passed=0; failed=0; built=()
for t in "${targets[@]}"; do
	if [ ! -f fuzz/fuzz_"$t".c ]; then
		echo "fuzz $t: no harness fuzz/fuzz_$t.c"; failed=$((failed + 1)); continue
	fi
	if ! build "$t"; then
		echo "fuzz $t: build FAILED, see $OUT/logs/build-$t.log"; tail -n 5 "$OUT/logs/build-$t.log"
		failed=$((failed + 1)); continue
	fi
	[ $build_only -eq 1 ] && { echo "fuzz $t: built $OUT/fuzz_$t"; passed=$((passed + 1)); continue; }
	built+=("$t")
done
# next_run: the harness to start now, out of built[] (an EAL one first while none runs: they
# take turns, so they go early), into NEXT; non-zero when none may start.
next_run() {
	local i pick=-1
	for i in "${!built[@]}"; do
		if eal_of "${built[$i]}"; then
			eal_running || { pick=$i; break; }
		elif [ $pick -lt 0 ]; then
			pick=$i
		fi
	done
	[ $pick -ge 0 ] || return 1
	NEXT=${built[$pick]}
	unset "built[$pick]"
}
while [ ${#built[@]} -gt 0 ]; do
	if [ ${#RUNNING[@]} -ge "$JOBS" ] || ! next_run; then reap; continue; fi
	run_one "$NEXT" >"$OUT/logs/$NEXT.line" 2>&1 &
	RUNNING[$!]=$NEXT
done
while [ ${#RUNNING[@]} -gt 0 ]; do reap; done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
