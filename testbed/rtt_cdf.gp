# RTT distribution of 64 B ping-pong, DPDK (TCP-lite) vs kernel sockets: a CDF per path.
# Called by testbed/bench.sh with out, d (dpdk samples) and k (kernel samples), one RTT
# in microseconds per line.
set terminal pngcairo size 900,500
set output out
set title "64 B ping-pong RTT (one connection)"
set xlabel "RTT (us, log scale)"
set ylabel "fraction of round trips"
set logscale x
set key bottom right
set grid
plot d using 1:(1.0) smooth cnormal title "wharf TCP-lite over DPDK (virtio-user/vhost)" lw 2, \
     k using 1:(1.0) smooth cnormal title "kernel TCP sockets (loopback)" lw 2
