# EAL preset: a wharf node on a Linux TAP device (net_tap), Linux sockets on the other side;
# for interop checks against the kernel's TCP. Needs CAP_NET_ADMIN. Give the kernel side an
# address in the same subnet: ip addr add 10.78.0.1/24 dev wharf0 && ip link set wharf0 up
#   . configs/eal_tap.sh && build/wharf-psd $WHARF_EAL -- --role ps --ps 127.0.0.1:4444 \
#       --num-workers 1 --data-addr 10.78.0.2:6666
WHARF_TAP_IF=${WHARF_TAP_IF:-wharf0}
WHARF_EAL="-l 0 --no-pci --no-huge -m 512 --file-prefix wharf-${USER:-u}-tap --vdev=net_tap0,iface=$WHARF_TAP_IF"
