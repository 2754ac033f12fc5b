#!/bin/sh
# wharf-pod.sh PROGRAM [ARGS...] — how a pod of configs/k8s starts a wharf executable
# (wharf-psd or wharf-train); the image installs it as /usr/local/bin/wharf-pod.
#
#   WHARF_PROTOCOL=kernel: exec PROGRAM -- ARGS (no EAL: any cluster, no special resources).
#   WHARF_PROTOCOL=dpdk:   exec PROGRAM -l CORES -a PCI --file-prefix POD -- --data-addr IP ARGS
#     PCI   the SR-IOV virtual function the device plugin gave the pod: the first address in
#           its PCIDEVICE_<RESOURCE> variable (intel.com/sriov: PCIDEVICE_INTEL_COM_SRIOV);
#     IP    the address the network's IPAM gave that function: the entry of Multus's
#           network-status annotation (mounted by the downward API at WHARF_POD_NETWORK_STATUS,
#           default /etc/podinfo/network-status) whose name is WHARF_POD_NETWORK (the
#           NetworkAttachmentDefinition, "wharf-sriov" or "NAMESPACE/wharf-sriov"). Multus
#           writes the annotation after the pod starts: waited for up to WHARF_POD_WAIT_S (60);
#     CORES WHARF_POD_CORES (default 0-1), hugepages at /dev/hugepages (the pod's
#           hugepages-2Mi emptyDir).
# WHARF_POD_DRY_RUN=1 prints the command instead of running it. Each missing piece is refused
# with one line naming it.
set -eu
prog=${1:?usage: wharf-pod PROGRAM [ARGS...]}
shift
die() { echo "wharf-pod: $*" >&2; exit 2; }
run() {
	if [ "${WHARF_POD_DRY_RUN:-0}" = 1 ]; then echo "$@"; exit 0; fi
	exec "$@"
}

case ${WHARF_PROTOCOL:-kernel} in
kernel) run "$prog" -- "$@" ;;
dpdk) ;;
*) die "WHARF_PROTOCOL=${WHARF_PROTOCOL}: expected kernel or dpdk" ;;
esac

net=${WHARF_POD_NETWORK:-}
[ -n "$net" ] || die "WHARF_POD_NETWORK (the name of the SR-IOV network) is not set"
status=${WHARF_POD_NETWORK_STATUS:-/etc/podinfo/network-status}
wait_s=${WHARF_POD_WAIT_S:-60}
case $wait_s in '' | *[!0-9]*) die "WHARF_POD_WAIT_S=$wait_s: expected seconds" ;; esac
command -v jq >/dev/null || die "jq is not installed (it reads $status)"

pci=$(env | sed -n 's/^PCIDEVICE_[A-Z0-9_]*=\([^,]*\).*/\1/p' | head -n 1)
[ -n "$pci" ] || die "no PCIDEVICE_* variable: the pod got no SR-IOV device (resources.limits)"

ip=
i=0
while :; do
	if [ -s "$status" ]; then
		ip=$(jq -r --arg n "$net" \
			'[.[] | select(.name == $n or (.name | endswith("/" + $n))) | .ips[0] // empty][0] // empty' \
			"$status" 2>/dev/null) || die "$status: not the JSON of a network-status annotation"
		[ -n "$ip" ] && break
	fi
	[ "$i" -ge "$wait_s" ] && die "$status: no address for network $net after ${wait_s}s"
	i=$((i + 1))
	sleep 1
done

run "$prog" -l "${WHARF_POD_CORES:-0-1}" -a "$pci" --file-prefix "${HOSTNAME:-wharf}" \
	--huge-dir /dev/hugepages -- --data-addr "$ip" "$@"
