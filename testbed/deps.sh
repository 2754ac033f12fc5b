#!/usr/bin/env bash
# Installs what wharf needs from Debian, once; a quick no-op when all is there.
set -eu
pkgs=(dpdk dpdk-dev libdpdk-dev libnuma-dev numactl libcmocka-dev libjansson-dev pkg-config
      gcc make clang iproute2 iputils-ping tshark gnuplot-nox dataset-fashion-mnist procps
      python3-pyelftools zlib1g-dev python3-scapy nftables
      help2man libsystemd-dev python3-yaml jq
      python3-dev python3-numpy python3-torch python3-pytest libopenblas0-pthread)
# help2man: make install's man pages. libsystemd-dev: a static link against DPDK's archives
# (pkg-config --static --libs wharf: libpcap's dbus asks for -lsystemd). python3-yaml: the
# Kubernetes configs parsed (t_k8s_configs). jq: configs/k8s/wharf-pod.sh reads Multus's
# network-status with it. python3-dev, -numpy, -torch, -pytest: the Python package and its
# tests; libopenblas0-pthread: PyTorch's BLAS (the reference one is 15x slower).
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
testbed/hugepages.sh || true
