/* dn_testlib.h — test scaffolding for dpdk_net (see dn_testlib.c). */
#ifndef WHARF_DN_TESTLIB_H
#define WHARF_DN_TESTLIB_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_arp.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "dpdk_net/dn_pvt.h"

#define DT_OUR_IP  0xC6120001u /* 198.18.0.1 */
#define DT_PEER_IP 0xC6120002u /* 198.18.0.2 */

struct dt_env {
	struct dn_port *port;
	struct dn_lcore *lc;
	struct rte_mempool *pool;
};

extern const struct rte_ether_addr dt_peer_mac;

int dt_eal_init(void);
void dt_eal_remove_runtime_dir(void);
int dt_port_up(struct dt_env *e);
void dt_port_down(struct dt_env *e);
/* Flushes Tx and reads back what the port sent (net_ring loops Tx to Rx). */
uint16_t dt_sent(struct dt_env *e, struct rte_mbuf **out, uint16_t max);
void dt_drain(struct dt_env *e);
/* True when every mbuf is back in the pool: nothing leaked, nothing held. */
bool dt_pool_full(struct dt_env *e);
struct rte_mbuf *dt_frame(struct dt_env *e, const void *bytes, uint16_t len);
/* The same from any pool (ports a test builds itself); NULL when the pool is empty. */
struct rte_mbuf *dt_frame_in(struct rte_mempool *pool, const void *bytes, uint16_t len);
uint16_t dt_build_arp(uint8_t *b, const struct rte_ether_addr *our_mac, uint16_t op,
		      uint32_t sip, uint32_t tip);
uint16_t dt_build_ipv4(uint8_t *b, const struct rte_ether_addr *our_mac, uint8_t proto,
		       uint32_t src, uint32_t dst, const void *l4, uint16_t l4_len);
uint16_t dt_build_echo(uint8_t *b, const struct rte_ether_addr *our_mac, uint8_t type,
		       uint16_t payload_len);
struct rte_ipv4_hdr *dt_ip(uint8_t *frame);
void dt_ip_recsum(uint8_t *frame);
/* A flow steering classifier (dn_hooks.steer) by destination port parity: a TCP segment to
 * an odd port belongs to lcore 1, everything else to lcore 0. */
uint32_t dt_steer_by_parity(void *arg, const struct dn_flow *f);

#endif
