/*
 * dn_testlib_link.c — dpdk_net's test scaffolding (dpdk_net/tests/dn_testlib.c: EAL in
 * memory, a net_ring port, frame builders) compiled into transport's tests as well, for
 * those that drive the DPDK backend on a real port. The Makefile links a tests/ folder's
 * helpers only into that folder's tests; this includes the one source rather than copy it.
 */
#include "dpdk_net/tests/dn_testlib.c"
