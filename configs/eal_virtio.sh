# EAL preset: CI fabric. Each node attaches a virtio-user port to the testbed vswitch's
# vhost-user socket port<N>.sock (testbed/cluster/tb.sh starts the switch). No PCI, no
# hugepages needed (--no-huge); with hugepages add --single-file-segments instead. Node N runs
# on core N mod the machine's cores.
#   . configs/eal_virtio.sh 1 && build/wharf-train $WHARF_EAL -- --config configs/cluster.json
WHARF_PORT_IDX=${1:-0}
WHARF_SOCK_DIR=${WHARF_SOCK_DIR:-/tmp/wharf-tb}
WHARF_EAL="-l $((WHARF_PORT_IDX % $(nproc))) --no-pci --no-huge -m 512 --file-prefix wharf-${USER:-u}-v$WHARF_PORT_IDX \
 --vdev=virtio_user0,path=$WHARF_SOCK_DIR/port$WHARF_PORT_IDX.sock,queues=1,queue_size=1024,mac=02:00:00:00:00:$(printf %02x $((WHARF_PORT_IDX + 1)))"
