# EAL preset: a host with a real NIC bound to vfio-pci (hugepages reserved, e.g. by
# `make hugepages`). Replace the PCI address with `dpdk-devbind.py --status`'s. Lcores: one
# main + NETWORK_PS_CORE_NUMBER / NETWORK_WORKER_CORE_NUMBER network lcores.
#   . configs/eal_nic.sh && build/wharf-psd $WHARF_EAL -- --config configs/cluster.json --role ps
WHARF_NIC_PCI=${WHARF_NIC_PCI:-0000:3b:00.0}
WHARF_EAL="-l 0-2 -n 4 -a $WHARF_NIC_PCI --socket-mem 1024 --file-prefix wharf-${USER:-u}-nic"
