#!/usr/bin/env bash
# Reserves 2 MB hugepages and mounts hugetlbfs when the machine lets us. Prints which
# mode the testbed will use: "huge" or "no-huge". Never fails: --no-huge is the fallback.
want=${WHARF_HUGEPAGES:-1024} # two tests at a time: up to about 700 MB
nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
if [ -w "$nr" ] && [ "$(cat $nr)" -lt "$want" ]; then
	echo "$want" > "$nr" 2>/dev/null || true
fi
if ! grep -qs ' /dev/hugepages hugetlbfs' /proc/mounts; then
	mkdir -p /dev/hugepages 2>/dev/null && mount -t hugetlbfs nodev /dev/hugepages 2>/dev/null || true
fi
free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
if grep -qs ' /dev/hugepages hugetlbfs' /proc/mounts && [ "${free:-0}" -ge 64 ]; then
	echo huge
else
	echo no-huge
fi
