/*
 * dn_port.c — port and per-lcore context set-up.
 *
 * dn_port_create configures whatever ethdev EAL found (a NIC, virtio-user, net_vhost,
 * net_tap, ...): one Rx/Tx queue pair per lcore when the device has that many
 * (DN_QUEUES_PER_LCORE), else one queue they share (a virtio device's other queues read
 * by lcore 0 too, since its peer may send there); RSS with our own symmetric key and
 * redirection table when the device hashes, checksum offloads where offered (dn_ip.c does
 * them in software where not), MTU, Rx interrupts when the idle policy wants to sleep, a
 * mempool per NUMA socket in use sized from the queue depths, and waits for the link.
 * dn_lcore_create then builds the per-lcore context on the lcore that will own a queue.
 * With several lcores, each frame reaches the lcore owning its flow whatever queue the
 * device put it on (flow steering, dn_steer.c), whose rings and eventfds are made here too.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/virtio_net.h>
#include <rte_bus.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eth_vhost.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_thash.h>

#include "dpdk_net/dn_pvt.h"

#define DN_MBUF_CACHE 256
#define DN_UPPER_MBUFS 16384 /* mbufs upper layers may hold (TCP windows, pending replies) */

/*
 * A symmetric Toeplitz key: a 16-bit pattern repeated makes the hash of (a,b) equal the
 * hash of (b,a), so both directions of a flow land on one queue (one lcore owns it).
 */
#define DN_RSS_KEY_2 0x6d, 0x5a
#define DN_RSS_KEY_10 DN_RSS_KEY_2, DN_RSS_KEY_2, DN_RSS_KEY_2, DN_RSS_KEY_2, DN_RSS_KEY_2
static const uint8_t rss_key[DN_RSS_KEY_MAX] = { DN_RSS_KEY_10, DN_RSS_KEY_10, DN_RSS_KEY_10,
						 DN_RSS_KEY_10, DN_RSS_KEY_10, DN_RSS_KEY_10,
						 DN_RSS_KEY_2, DN_RSS_KEY_2 };
_Static_assert(DN_RSS_KEY_MAX == 64, "rss_key is written out for 64 bytes");

void dn_rss_key_fill(uint8_t *key, uint32_t len)
{
	memcpy(key, rss_key, len < DN_RSS_KEY_MAX ? len : DN_RSS_KEY_MAX);
}

uint16_t dn_rss_queue(const struct rte_mbuf *m, uint16_t nb_queues)
{
	const struct rte_ipv4_hdr *ip;
	const uint16_t *ports;
	struct rte_ipv4_tuple t;
	uint32_t ihl, need;

	need = (uint32_t)sizeof(struct rte_ether_hdr) + sizeof(*ip);
	if (nb_queues <= 1 || rte_pktmbuf_data_len(m) < need ||
	    rte_pktmbuf_mtod(m, const struct rte_ether_hdr *)->ether_type !=
		    rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return 0;
	ip = rte_pktmbuf_mtod_offset(m, const struct rte_ipv4_hdr *, sizeof(struct rte_ether_hdr));
	ihl = (ip->version_ihl & 0xfu) * 4u;
	/* A NIC hashes TCP and UDP by their ports, a fragment after the first by its addresses;
	 * anything else (ICMP) by addresses too. */
	t.src_addr = rte_be_to_cpu_32(ip->src_addr);
	t.dst_addr = rte_be_to_cpu_32(ip->dst_addr);
	t.sport = t.dport = 0;
	if ((ip->next_proto_id == IPPROTO_TCP || ip->next_proto_id == IPPROTO_UDP) &&
	    (rte_be_to_cpu_16(ip->fragment_offset) & RTE_IPV4_HDR_OFFSET_MASK) == 0 &&
	    ihl >= sizeof(*ip) && rte_pktmbuf_data_len(m) >= need - sizeof(*ip) + ihl + 4u) {
		ports = rte_pktmbuf_mtod_offset(m, const uint16_t *,
						sizeof(struct rte_ether_hdr) + ihl);
		t.sport = rte_be_to_cpu_16(ports[0]);
		t.dport = rte_be_to_cpu_16(ports[1]);
	}
	return (uint16_t)(rte_softrss((uint32_t *)&t, t.sport || t.dport ? RTE_THASH_V4_L4_LEN :
				      RTE_THASH_V4_L3_LEN, rss_key) % DN_PEER_RETA_SIZE % nb_queues);
}

/* WHARF_PORT_RSS: "peer" (dn.h), or unset. */
static bool peer_rss_env(void)
{
	const char *v = getenv("WHARF_PORT_RSS");

	return v != NULL && strcmp(v, "peer") == 0;
}

/* Queue pairs configured on the device: the lcores' own and the extra ones lcore 0 reads. */
static inline uint16_t dev_queues(const struct dn_port *p)
{
	return (uint16_t)(p->nb_queues + p->nb_rx_extra);
}

static int pools_create(struct dn_port *p, char *err, size_t errlen)
{
	const struct dn_config *c = &p->cfg;
	unsigned lcore, per_socket[RTE_MAX_NUMA_NODES] = {0}, q = 0, s0 = 0;

	/* Context i is served by the i-th enabled lcore (main first): count lcores per socket. */
	RTE_LCORE_FOREACH(lcore) {
		if (q == 0)
			s0 = rte_lcore_to_socket_id(lcore); /* context 0's: it reads the extra queues */
		if (q++ >= p->nb_lcores)
			break;
		per_socket[rte_lcore_to_socket_id(lcore)]++;
	}
	for (unsigned s = 0; s < RTE_MAX_NUMA_NODES; s++) {
		char name[RTE_MEMPOOL_NAMESIZE];
		unsigned n;

		if (per_socket[s] == 0)
			continue;
		n = c->nb_mbufs;
		if (n == 0)
			n = per_socket[s] * (c->nb_rxd + c->nb_txd + 2 * DN_BURST + DN_MBUF_CACHE +
					     DN_PENDING_MAX) + DN_UPPER_MBUFS * per_socket[s] +
			    (s == s0 ? (unsigned)p->nb_rx_extra * c->nb_rxd : 0);
		/* Jumbo frames carry ~6 standard frames each: fewer buffers hold the same bytes. */
		if (c->nb_mbufs == 0 && p->data_room > RTE_MBUF_DEFAULT_BUF_SIZE)
			n = n * RTE_MBUF_DEFAULT_BUF_SIZE / p->data_room + 4096;
		snprintf(name, sizeof(name), "dn_p%u_s%u", p->port_id, s);
		p->pools[s] = rte_pktmbuf_pool_create(name, n, DN_MBUF_CACHE, 0, p->data_room, (int)s);
		if (p->pools[s] == NULL && s != 0)
			p->pools[s] = rte_pktmbuf_pool_create(name, n, DN_MBUF_CACHE, 0, p->data_room,
							      SOCKET_ID_ANY);
		if (p->pools[s] == NULL) {
			snprintf(err, errlen, "mempool of %u mbufs on socket %u: %s", n, s,
				 rte_strerror(rte_errno));
			return -ENOMEM;
		}
	}
	return 0;
}

static struct rte_mempool *pool_for_queue(struct dn_port *p, uint16_t queue)
{
	unsigned lcore, q = 0;

	RTE_LCORE_FOREACH(lcore) {
		if (q++ == queue && p->pools[rte_lcore_to_socket_id(lcore)] != NULL)
			return p->pools[rte_lcore_to_socket_id(lcore)];
	}
	for (unsigned s = 0; s < RTE_MAX_NUMA_NODES; s++)
		if (p->pools[s] != NULL)
			return p->pools[s];
	return NULL;
}

uint16_t dn_tx_seg_max(const struct rte_eth_dev_info *di)
{
	if (!(di->tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS))
		return 1;
	return di->tx_desc_lim.nb_mtu_seg_max != 0 ? di->tx_desc_lim.nb_mtu_seg_max : UINT16_MAX;
}

static void conf_build(struct dn_port *p, const struct rte_eth_dev_info *di,
		       struct rte_eth_conf *conf)
{
	uint64_t want_rx = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM;
	uint64_t want_tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM |
			   RTE_ETH_TX_OFFLOAD_MULTI_SEGS;

	memset(conf, 0, sizeof(*conf));
	/*
	 * TCP checksum offload on devices of a hardware bus and on the virtio pair: virtio-user
	 * and vhost send the checksum partial (NEEDS_CSUM, as between VMs on one host) and mark
	 * such a frame L4_CKSUM_NONE on receipt, "not computed, data intact", so neither end
	 * sums the payload. A vhost port that did not enable the Rx offload (the testbed
	 * switch) completes the sum in its PMD before it forwards or damages the frame. Not on
	 * net_tap: its PMD computes the sum with DPDK 22.11's chain checksum, which is wrong
	 * for odd-length pieces; dn_l4_cksum_sw is ours.
	 */
	const struct rte_bus *bus = di->device != NULL ? rte_dev_bus(di->device) : NULL;
	bool vhost = di->driver_name != NULL && strcmp(di->driver_name, "net_vhost") == 0;
	bool virtio = vhost ||
		      (di->driver_name != NULL && strcmp(di->driver_name, "net_virtio_user") == 0);
	if (!virtio && (bus == NULL || strcmp(rte_bus_name(bus), "pci") != 0))
		want_tx &= ~(uint64_t)RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
	/*
	 * TSO on virtio-user (offered when the vhost side has tso=1), with LRO on Rx so large
	 * frames come in too: a segmented frame crosses the pair whole (relayed by lcore 0 as
	 * it is when lcores share one queue).
	 */
	const char *tso_env = getenv("WHARF_TSO"); /* WHARF_TSO=0 turns it off */
	unsigned tso_v;
	bool tso_ok = tso_env == NULL || !dn_parse_uint(tso_env, 0, 1, &tso_v) || tso_v != 0;
	bool vhost_endpoint = vhost && !p->cfg.no_l3;
	if (virtio && tso_ok && (di->tx_offload_capa & RTE_ETH_TX_OFFLOAD_TCP_TSO) &&
	    (di->rx_offload_capa & RTE_ETH_RX_OFFLOAD_TCP_LRO)) {
		want_tx |= RTE_ETH_TX_OFFLOAD_TCP_TSO;
		want_rx |= RTE_ETH_RX_OFFLOAD_TCP_LRO;
	}
	conf->rxmode.offloads = di->rx_offload_capa & want_rx;
	conf->txmode.offloads = di->tx_offload_capa & want_tx;
	p->tso = (conf->txmode.offloads & RTE_ETH_TX_OFFLOAD_TCP_TSO) &&
		 (conf->txmode.offloads & RTE_ETH_TX_OFFLOAD_TCP_CKSUM);
	/*
	 * net_vhost (22.11) lists no TSO among its Tx capabilities, yet its enqueue hands a
	 * segmentation request to the guest as virtio GSO, which a guest that negotiated
	 * GUEST_TSO4 takes whole (virtio-user with LRO): an endpoint (not the switch's ports)
	 * uses that while its guest says so, from dn_port_tso_refresh. Large frames then go
	 * both ways on the pair, not MSS-sized ones back from the vhost side.
	 */
	p->vhost_tso = vhost_endpoint && tso_ok &&
		       (conf->txmode.offloads & RTE_ETH_TX_OFFLOAD_TCP_CKSUM);
	/*
	 * Large frames come in: a TSO peer's arrive whole (on net_vhost with tso=1 too, which
	 * says so nowhere in its capabilities: every vhost endpoint, never the switch's ports).
	 * Buffers as for 9000-byte frames, so one holds ~6 MSS: the per-buffer costs (a copy
	 * target, a TCP-lite input) would otherwise stay those of MTU 1500.
	 */
	if ((p->tso || vhost_endpoint) && p->data_room < DN_TSO_DATA_ROOM)
		p->data_room = DN_TSO_DATA_ROOM;
	p->rx_ip_csum = conf->rxmode.offloads & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
	p->rx_l4_csum = conf->rxmode.offloads & RTE_ETH_RX_OFFLOAD_TCP_CKSUM;
	p->tx_ip_csum = conf->txmode.offloads & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
	p->tx_l4_csum = conf->txmode.offloads & RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
	/*
	 * Zero-copy sends are chains of a few buffers per frame (many with a jumbo MTU): a
	 * longer chain than the device takes is copied into one buffer (dn_ip_send). A device
	 * without RTE_ETH_TX_OFFLOAD_MULTI_SEGS takes one buffer a frame, virtual ones too:
	 * net_af_xdp (22.11) states none, and chains sent to it never arrived whole (a stream
	 * over it stalled). Hardware PMDs check their limits in rte_eth_tx_prepare too
	 * (i40e and ice refuse more than 8 buffers a frame there, else their queue stalls);
	 * virtio-pci's only rewrites the pseudo-header sum dn_ip_send wrote already.
	 */
	bool hw = bus != NULL && strcmp(rte_bus_name(bus), "vdev") != 0;
	p->tx_seg_max = dn_tx_seg_max(di);
	p->tx_prepare = hw && (di->driver_name == NULL ||
			       strcmp(di->driver_name, "net_virtio") != 0);

	if (p->nb_queues > 1 && (di->flow_type_rss_offloads & RTE_ETH_RSS_IP)) {
		p->rss = true;
		p->rss_key_len = di->hash_key_size ? di->hash_key_size : 40;
		if (p->rss_key_len > DN_RSS_KEY_MAX)
			p->rss_key_len = DN_RSS_KEY_MAX;
		dn_rss_key_fill(p->rss_key, p->rss_key_len);
		conf->rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf->rx_adv_conf.rss_conf.rss_key = p->rss_key;
		conf->rx_adv_conf.rss_conf.rss_key_len = (uint8_t)p->rss_key_len;
		conf->rx_adv_conf.rss_conf.rss_hf = di->flow_type_rss_offloads &
			(RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP);
	} else if (p->nb_queues > 1 && virtio && peer_rss_env()) {
		/* The peer hashes (WHARF_PORT_RSS=peer): the key it uses, the device none. */
		p->rss = p->rss_by_peer = true;
		p->rss_key_len = 40;
		dn_rss_key_fill(p->rss_key, p->rss_key_len);
	}
}

/*
 * Programs the redirection table round-robin over our queues rather than trusting defaults.
 * di is read after rte_eth_dev_configure: the table's size may follow the queue count (bnxt
 * P5: 64 entries per context of up to 64 queues, 0 before; its update takes that size only).
 */
static void reta_program(struct dn_port *p, const struct rte_eth_dev_info *di)
{
	struct rte_eth_rss_reta_entry64 reta[DN_RETA_MAX / RTE_ETH_RETA_GROUP_SIZE];
	uint32_t n = p->rss_by_peer ? DN_PEER_RETA_SIZE : di->reta_size;
	int ret;

	if (!p->rss || n == 0 || n > DN_RETA_MAX)
		return;
	if (p->rss_by_peer) { /* the table the peer applies (dn_rss_queue), not the device's */
		for (uint32_t i = 0; i < n; i++)
			p->reta[i] = (uint16_t)(i % p->nb_queues);
		p->reta_size = n;
		return;
	}
	memset(reta, 0, sizeof(reta));
	for (uint32_t i = 0; i < n; i++) {
		p->reta[i] = (uint16_t)(i % p->nb_queues);
		reta[i / RTE_ETH_RETA_GROUP_SIZE].mask |= 1ull << (i % RTE_ETH_RETA_GROUP_SIZE);
		reta[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE] = p->reta[i];
	}
	ret = rte_eth_dev_rss_reta_update(p->port_id, reta, (uint16_t)n);
	if (ret == 0)
		p->reta_size = n;
	else
		DN_LOG(WARNING, "port %u (%s): redirection table of %u entries: %s; the device's "
		       "own spreads flows, no active open aims at its queue", p->port_id,
		       di->driver_name, n, rte_strerror(-ret));
}

/*
 * Waits up to link_wait_ms for the link. A link still down is not an error: a vhost-user
 * port is down until its peer attaches, a cable may be plugged later; dn_port_link_up
 * tells the app, which may say so.
 */
static void link_wait(struct dn_port *p)
{
	struct rte_eth_link link;
	uint32_t waited = 0;

	for (;;) {
		memset(&link, 0, sizeof(link));
		if (rte_eth_link_get_nowait(p->port_id, &link) == 0 && link.link_status)
			return;
		if (waited >= p->cfg.link_wait_ms)
			return;
		rte_delay_ms(10);
		waited += 10;
	}
}

bool dn_port_link_up(const struct dn_port *p)
{
	struct rte_eth_link link;

	memset(&link, 0, sizeof(link));
	return rte_eth_link_get_nowait(p->port_id, &link) == 0 && link.link_status;
}

static int queues_setup(struct dn_port *p, const struct rte_eth_dev_info *di,
			const struct rte_eth_conf *conf, uint16_t nb_rxd, uint16_t nb_txd,
			char *err, size_t errlen)
{
	int ret;

	for (uint16_t q = 0; q < dev_queues(p); q++) {
		struct rte_mempool *mp = pool_for_queue(p, q);
		struct rte_eth_txconf txc = di->default_txconf;
		int socket = mp->socket_id;

		txc.offloads = conf->txmode.offloads;
		/*
		 * With TSO a zero-copy send is a few large frames, and virtio frees sent mbufs
		 * (releasing the payload they carry) only when fewer than tx_free_thresh ring
		 * entries are left, and has no tx_done_cleanup: free at every burst instead.
		 */
		if (p->tso)
			txc.tx_free_thresh = (uint16_t)(nb_txd - 4u);
		ret = rte_eth_rx_queue_setup(p->port_id, q, nb_rxd, socket, NULL, mp);
		if (ret == 0)
			ret = rte_eth_tx_queue_setup(p->port_id, q, nb_txd, socket, &txc);
		if (ret != 0) {
			snprintf(err, errlen, "port %u queue %u setup: %s", p->port_id, q,
				 rte_strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/*
 * net_vhost, on the vhost thread as its guest enables queues (RTE_ETH_EVENT_QUEUE_STATE): a
 * guest that sends on a queue this port does not have (its queues=N above ours: this side
 * cannot read them, nor can the guest tell) loses what it sends there. Said once per
 * queue; a guest of one lcore enables them too (to read its own extra queues) but sends
 * on queue 0 only, so this cannot be more than a warning.
 */
static int vhost_queue_event(uint16_t pid, enum rte_eth_event_type type, void *arg,
			     void *ret_param)
{
	struct dn_port *p = arg;
	struct rte_eth_vhost_queue_event ev;
	uint16_t have = dev_queues(p);

	(void)type;
	(void)ret_param;
	while (rte_eth_vhost_get_queue_event(pid, &ev) == 0) {
		uint64_t bit = 1ull << (ev.queue_id < 63 ? ev.queue_id : 63);
		if (!ev.enable || !ev.rx || ev.queue_id < have ||
		    (atomic_fetch_or(&p->told_queues, bit) & bit) != 0)
			continue;
		DN_LOG(WARNING, "port %u (net_vhost): the virtio peer enabled its Tx queue %u, "
		       "and this port has %u (queues=%u): what it sends there is lost (a peer "
		       "with more lcores than this port has queues sends there); give both sides "
		       "the same queues=N", pid, ev.queue_id, have, have);
	}
	return 0;
}

int dn_callback_unregister(uint16_t port_id, enum rte_eth_event_type event,
			   rte_eth_dev_cb_fn cb, void *arg)
{
	int rc;

	/* -EAGAIN: the callback is running now, on the interrupt thread; wait it out. */
	while ((rc = rte_eth_dev_callback_unregister(port_id, event, cb, arg)) == -EAGAIN)
		rte_pause();
	return rc;
}

#ifndef AF_XDP
#define AF_XDP 44
#endif

/*
 * The AF_XDP sockets this process has open, as a bit set of fds below DN_XSK_FD_MAX (the
 * sockets net_af_xdp makes are among the first fds a process opens).
 */
#define DN_XSK_FD_MAX 1024
struct dn_fdset {
	uint64_t bits[DN_XSK_FD_MAX / 64];
};

static void xsk_fds(struct dn_fdset *set)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	memset(set, 0, sizeof(*set));
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		unsigned fd;
		int dom;
		socklen_t len = sizeof(dom);

		if (!dn_parse_uint(e->d_name, 0, DN_XSK_FD_MAX - 1, &fd) || (int)fd == dirfd(d))
			continue;
		if (getsockopt((int)fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) == 0 && dom == AF_XDP)
			set->bits[fd / 64] |= 1ull << (fd % 64);
	}
	closedir(d);
}

/*
 * net_af_xdp (22.11) has no Rx interrupt, but its socket is one: epoll reports it readable
 * while its Rx ring holds frames. A one-queue port's socket is the one AF_XDP fd that start-up
 * opened (before: the set before configure); with several queues the fds do not say which
 * queue is whose, and the lcores back off with sleeps instead. -1: none.
 */
static int xsk_rx_sock(const struct dn_port *p, const struct dn_fdset *before)
{
	struct dn_fdset now;
	int found = -1, n = 0;

	if (p->nb_queues != 1 || p->nb_rx_extra != 0)
		return -1;
	xsk_fds(&now);
	for (unsigned w = 0; w < DN_XSK_FD_MAX / 64; w++) {
		uint64_t fresh = now.bits[w] & ~before->bits[w];

		for (; fresh != 0; fresh &= fresh - 1, n++)
			found = (int)(w * 64 + (unsigned)__builtin_ctzll(fresh));
	}
	return n == 1 ? found : -1;
}

static int port_configure(struct dn_port *p, char *err, size_t errlen)
{
	struct dn_fdset xsk_before = {0};
	struct rte_eth_dev_info di;
	struct rte_eth_conf conf;
	uint16_t nb_rxd = p->cfg.nb_rxd, nb_txd = p->cfg.nb_txd;
	uint16_t nq = dev_queues(p); /* the extra ones: Rx only (dn_rx_burst) */
	int ret;

	ret = rte_eth_dev_info_get(p->port_id, &di);
	if (ret != 0) {
		snprintf(err, errlen, "port %u: dev info: %s", p->port_id, rte_strerror(-ret));
		return ret;
	}
	if (nq > di.max_rx_queues || nq > di.max_tx_queues) {
		snprintf(err, errlen, "port %u (%s): %u queues wanted, device has %u rx / %u tx",
			 p->port_id, di.driver_name, nq, di.max_rx_queues, di.max_tx_queues);
		return -EINVAL;
	}
	if (p->cfg.mtu > di.max_mtu || p->cfg.mtu < RTE_ETHER_MIN_MTU) {
		snprintf(err, errlen, "port %u (%s): MTU %u outside the device's %u..%u", p->port_id,
			 di.driver_name, p->cfg.mtu, RTE_ETHER_MIN_MTU, di.max_mtu);
		return -EINVAL;
	}
	bool af_xdp = di.driver_name != NULL && strcmp(di.driver_name, "net_af_xdp") == 0;
	if (af_xdp)
		xsk_fds(&xsk_before);
	conf_build(p, &di, &conf);
	conf.rxmode.mtu = p->cfg.mtu;
	/* net_af_xdp takes the request and has no interrupt to give (its socket stands in). */
	conf.intr_conf.rxq = p->cfg.idle == DN_IDLE_SLEEP && !af_xdp;
	ret = rte_eth_dev_configure(p->port_id, nq, nq, &conf);
	if (ret != 0 && conf.intr_conf.rxq) {
		/* No Rx interrupts on this PMD: the idle loop backs off with sleeps instead. */
		conf.intr_conf.rxq = 0;
		ret = rte_eth_dev_configure(p->port_id, nq, nq, &conf);
	}
	if (ret != 0) {
		snprintf(err, errlen, "port %u (%s): configure: %s", p->port_id, di.driver_name,
			 rte_strerror(-ret));
		return ret;
	}
	p->rx_intr = conf.intr_conf.rxq;
	p->keep_at_exit = p->rx_intr && strcmp(di.driver_name, "net_virtio_user") == 0;
	if (p->cfg.mtu != 1500) {
		ret = rte_eth_dev_set_mtu(p->port_id, p->cfg.mtu);
		/* Virtual devices without an MTU op take any frame the buffers hold. */
		if (ret == -ENOTSUP && p->cfg.mtu <= di.max_mtu)
			ret = 0;
		if (ret != 0) {
			snprintf(err, errlen, "port %u: MTU %u: %s", p->port_id, p->cfg.mtu,
				 rte_strerror(-ret));
			return ret;
		}
	}
	rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id, &nb_rxd, &nb_txd);
	/*
	 * Queue events are one stream per port, taken by whoever reads them: only a port whose
	 * queues dpdk_net picked reads them (an application that asks for a queue count, as
	 * the testbed switch, may read them itself).
	 */
	if (!p->queue_cb && p->auto_queues && strcmp(di.driver_name, "net_vhost") == 0)
		p->queue_cb = rte_eth_dev_callback_register(p->port_id, RTE_ETH_EVENT_QUEUE_STATE,
							    vhost_queue_event, p) == 0;
	ret = pools_create(p, err, errlen);
	if (ret != 0)
		return ret;
	ret = queues_setup(p, &di, &conf, nb_rxd, nb_txd, err, errlen);
	if (ret != 0)
		return ret;
	ret = rte_eth_dev_start(p->port_id);
	if (ret != 0 && p->rx_intr) {
		/*
		 * Rx interrupts refused at start, not at configure (ixgbe past 15 queues, a device
		 * short of MSI-X vectors): configured again without them, the idle loop backs off
		 * with sleeps instead.
		 */
		DN_LOG(WARNING, "port %u (%s): start with Rx interrupts: %s; starting without",
		       p->port_id, di.driver_name, rte_strerror(-ret));
		conf.intr_conf.rxq = 0;
		p->rx_intr = p->keep_at_exit = false;
		ret = rte_eth_dev_configure(p->port_id, nq, nq, &conf);
		if (ret != 0) {
			snprintf(err, errlen, "port %u (%s): configure without Rx interrupts: %s",
				 p->port_id, di.driver_name, rte_strerror(-ret));
			return ret;
		}
		ret = queues_setup(p, &di, &conf, nb_rxd, nb_txd, err, errlen);
		if (ret != 0)
			return ret;
		ret = rte_eth_dev_start(p->port_id);
	}
	if (ret != 0) {
		snprintf(err, errlen, "port %u start: %s", p->port_id, rte_strerror(-ret));
		return ret;
	}
	ret = rte_eth_dev_info_get(p->port_id, &di); /* as configured: reta_size */
	if (ret != 0) {
		snprintf(err, errlen, "port %u: dev info: %s", p->port_id, rte_strerror(-ret));
		return ret;
	}
	reta_program(p, &di);
	if (af_xdp && p->cfg.idle == DN_IDLE_SLEEP)
		p->rx_sock = xsk_rx_sock(p, &xsk_before);
	if (p->cfg.promiscuous)
		rte_eth_promiscuous_enable(p->port_id);
	DN_LOG(DEBUG, "port %u (%s): started, %u queue%s of %u rx / %u tx descriptors, MTU %u, "
	       "rx interrupts %s, TSO %s", p->port_id, di.driver_name, p->nb_queues,
	       p->nb_queues == 1 ? "" : "s", nb_rxd, nb_txd, p->cfg.mtu,
	       p->rx_intr ? "on" : p->rx_sock >= 0 ? "on its AF_XDP socket" : "off",
	       p->tso ? "on" : "off");
	return 0;
}

static void config_defaults(struct dn_config *c)
{
	if (c->mtu == 0)
		c->mtu = 1500;
	if (c->nb_rxd == 0)
		c->nb_rxd = 1024;
	if (c->nb_txd == 0)
		c->nb_txd = 1024;
	if (c->nb_queues == 0 || c->nb_queues == DN_QUEUES_PER_LCORE)
		c->nb_queues = 1;
	if (c->nb_lcores < c->nb_queues)
		c->nb_lcores = c->nb_queues;
	if (c->idle_max_sleep_us == 0)
		c->idle_max_sleep_us = 500;
	if (c->link_wait_ms == 0)
		c->link_wait_ms = 3000;
}

/*
 * DN_QUEUES_PER_LCORE: a queue pair per lcore when the device has as many, else one they
 * share. A virtio-user/vhost pair exactly as many (queues=N on both, N lcores on both): its
 * queue k carries what the peer sent on its queue k. A virtio device of another queue
 * count uses one queue to send, and lcore 0 reads all of them (*extra: the others), since
 * its peer may send on any. WHARF_PORT_QUEUES=1 keeps one shared queue on any device (to
 * compare the two) and leaves the others off: a peer that sends there loses those frames.
 */
static uint16_t queues_per_lcore(uint16_t pid, uint16_t lcores, bool one_queue, uint16_t *extra)
{
	struct rte_eth_dev_info di;
	uint16_t dev_q;
	bool virt;

	*extra = 0;
	if (rte_eth_dev_info_get(pid, &di) != 0)
		return 1;
	virt = di.driver_name != NULL && (strcmp(di.driver_name, "net_vhost") == 0 ||
					  strcmp(di.driver_name, "net_virtio_user") == 0);
	dev_q = RTE_MIN(di.max_rx_queues, di.max_tx_queues);
	if (!virt)
		return lcores > 1 && !one_queue && dev_q >= lcores ? lcores : 1;
	if (lcores > 1 && !one_queue && dev_q == lcores)
		return lcores;
	if (dev_q > 1 && one_queue)
		DN_LOG(WARNING, "port %u (%s): WHARF_PORT_QUEUES=1: one queue of %u is used, and "
		       "a peer sending on the others loses those frames", pid, di.driver_name,
		       dev_q);
	else if (dev_q > 1) {
		*extra = dev_q - 1;
		DN_LOG(INFO, "port %u (%s): queues=%u for %u lcore%s: lcore 0 reads all %u and "
		       "sends on queue 0 (a queue pair per lcore takes queues=N and N lcores on "
		       "both sides)", pid, di.driver_name, dev_q, lcores, lcores == 1 ? "" : "s",
		       dev_q);
	}
	return 1;
}

int dn_port_create(const struct dn_config *cfg, struct dn_port **out, char *err, size_t errlen)
{
	struct dn_port *p;
	uint16_t pid = cfg->port_id;
	const char *q_env = getenv("WHARF_PORT_QUEUES"); /* "1" or unset (see queues_per_lcore) */
	const char *v;
	uint32_t mask;
	int ret;

	/* Before the device is touched: a refused config changes nothing. */
	if (cfg->prefix_len > 32) {
		snprintf(err, errlen, "prefix length %u: expected 0..32", cfg->prefix_len);
		return -EINVAL;
	}
	mask = cfg->prefix_len ? ~0u << (32 - cfg->prefix_len) : 0;
	if (cfg->gateway != 0 && !cfg->no_l3 &&
	    (((cfg->gateway ^ cfg->ip) & mask) != 0 || cfg->gateway == cfg->ip)) {
		snprintf(err, errlen, "gateway %u.%u.%u.%u is not another address of the on-link "
			 "subnet of %u.%u.%u.%u/%u", cfg->gateway >> 24, (cfg->gateway >> 16) & 255,
			 (cfg->gateway >> 8) & 255, cfg->gateway & 255, cfg->ip >> 24,
			 (cfg->ip >> 16) & 255, (cfg->ip >> 8) & 255, cfg->ip & 255, cfg->prefix_len);
		return -EINVAL;
	}
	if (cfg->nb_queues == DN_QUEUES_PER_LCORE && q_env != NULL && *q_env != '\0' &&
	    strcmp(q_env, "1") != 0) {
		snprintf(err, errlen, "WHARF_PORT_QUEUES='%.32s': expected 1 (the lcores share one "
			 "queue) or unset (a queue pair each where the device has them)", q_env);
		return -EINVAL;
	}
	if ((v = getenv("WHARF_TSO")) != NULL && *v != '\0' && !dn_parse_uint(v, 0, 1, NULL)) {
		snprintf(err, errlen, "WHARF_TSO='%.32s': expected 0 (no TCP segmentation offload) "
			 "or 1", v);
		return -EINVAL;
	}
	if ((v = getenv("WHARF_IDLE_SPIN_US")) != NULL && *v != '\0' &&
	    !dn_parse_uint(v, 0, DN_IDLE_SPIN_MAX_US, NULL)) {
		snprintf(err, errlen, "WHARF_IDLE_SPIN_US='%.32s': expected an integer in 0..%u", v,
			 DN_IDLE_SPIN_MAX_US);
		return -EINVAL;
	}
	if (getenv("WHARF_PORT_RSS") != NULL && *getenv("WHARF_PORT_RSS") != '\0' && !peer_rss_env()) {
		snprintf(err, errlen, "WHARF_PORT_RSS='%.32s': expected peer (a virtio port's peer "
			 "spreads frames over its queues by dpdk_net's RSS) or unset",
			 getenv("WHARF_PORT_RSS"));
		return -EINVAL;
	}
	if (pid == DN_PORT_AUTO) {
		RTE_ETH_FOREACH_DEV(pid)
			break;
		if (pid >= RTE_MAX_ETHPORTS) {
			snprintf(err, errlen, "no ethdev port: give EAL a device (-a PCI or --vdev)");
			return -ENODEV;
		}
	}
	if (!rte_eth_dev_is_valid_port(pid)) {
		snprintf(err, errlen, "port %u does not exist", pid);
		return -ENODEV;
	}
	p = rte_zmalloc("dn_port", sizeof(*p), RTE_CACHE_LINE_SIZE);
	if (p == NULL) {
		snprintf(err, errlen, "out of memory for the port");
		return -ENOMEM;
	}
	p->cfg = *cfg;
	p->rx_sock = -1;
	config_defaults(&p->cfg);
	p->auto_queues = cfg->nb_queues == DN_QUEUES_PER_LCORE;
	if (p->auto_queues)
		p->cfg.nb_queues = queues_per_lcore(pid, p->cfg.nb_lcores,
						    q_env != NULL && *q_env != '\0', &p->nb_rx_extra);
	p->port_id = pid;
	p->nb_queues = p->cfg.nb_queues;
	p->nb_lcores = p->cfg.nb_lcores;
	p->ip = cfg->ip;
	/* One frame per buffer: headroom + the largest frame the MTU allows. */
	p->data_room = RTE_MBUF_DEFAULT_BUF_SIZE;
	if (p->cfg.mtu > RTE_ETHER_MTU)
		p->data_room = (uint16_t)RTE_ALIGN_CEIL(RTE_PKTMBUF_HEADROOM + p->cfg.mtu +
							RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + 4, 1024);
	p->netmask = mask;
	p->gateway = cfg->gateway;
	ret = dn_wake_port_init(p, err, errlen);
	if (ret == 0 && (ret = rte_eth_macaddr_get(pid, &p->mac)) != 0)
		snprintf(err, errlen, "port %u: MAC address: %s", pid, rte_strerror(-ret));
	if (ret == 0 && p->nb_lcores > 1)
		ret = dn_steer_port_init(p, err, errlen);
	if (ret == 0)
		ret = port_configure(p, err, errlen);
	if (ret == 0 && !p->cfg.no_l3)
		link_wait(p);
	if (ret != 0) {
		dn_port_destroy(p);
		return ret;
	}
	*out = p;
	return 0;
}

void dn_port_stop(struct dn_port *p)
{
	if (p == NULL || p->stopped)
		return;
	p->stopped = true;
	if (p->keep_at_exit) {
		/* Not stopped (see eal_keep); what its Tx rings hold goes back as it is sent. */
		for (uint16_t q = 0; q < dev_queues(p); q++)
			rte_eth_tx_done_cleanup(p->port_id, q, 0);
	} else {
		rte_eth_dev_stop(p->port_id);
	}
	if (p->sw_steer)
		dn_steer_port_drain(p);
}

/*
 * With Rx interrupts, virtio_user registers a handler on EAL's interrupt thread for its
 * vhost-user socket; stopping or closing the device talks on that socket, which wakes the
 * handler while the close frees what it reads (DPDK 22.11: a crash or rte_panic in the
 * interrupt thread, seen about once in four process exits). Such a port is left to the
 * process's exit, with its pools and EAL's memory (dn_eal_fini then keeps EAL).
 */
static bool eal_keep;

void dn_port_destroy(struct dn_port *p)
{
	if (p == NULL)
		return;
	if (p->keep_at_exit) {
		DN_LOG(DEBUG, "port %u: virtio_user with Rx interrupts: left open until exit",
		       p->port_id);
		eal_keep = true;
		return;
	}
	dn_steer_port_fini(p); /* its flow rules go before the device does */
	rte_eth_dev_stop(p->port_id);
	if (p->queue_cb)
		dn_callback_unregister(p->port_id, RTE_ETH_EVENT_QUEUE_STATE, vhost_queue_event, p);
	rte_eth_dev_close(p->port_id);
	dn_wake_port_fini(p);
	for (unsigned s = 0; s < RTE_MAX_NUMA_NODES; s++)
		rte_mempool_free(p->pools[s]);
	rte_free(p);
}

uint16_t dn_port_id(const struct dn_port *p) { return p->port_id; }
const struct rte_ether_addr *dn_port_mac(const struct dn_port *p) { return &p->mac; }
uint32_t dn_port_ip(const struct dn_port *p) { return p->ip; }
uint16_t dn_port_mtu(const struct dn_port *p) { return p->cfg.mtu; }
bool dn_port_tx_l4_csum(const struct dn_port *p) { return p->tx_l4_csum; }
uint32_t dn_port_tso_max(const struct dn_port *p) { return p->tso ? DN_TSO_MAX : 0; }

void dn_port_tso_refresh(struct dn_port *p)
{
	const uint64_t need = 1ull << VIRTIO_NET_F_GUEST_TSO4 | 1ull << VIRTIO_NET_F_GUEST_CSUM;
	uint64_t features = 0;
	int vid;

	if (!p->vhost_tso)
		return;
	vid = rte_eth_vhost_get_vid_from_port_id(p->port_id);
	p->tso = vid >= 0 && rte_vhost_get_negotiated_features(vid, &features) == 0 &&
		 (features & need) == need;
}
bool dn_port_rx_intr(const struct dn_port *p) { return p->rx_intr || p->rx_sock >= 0; }
bool dn_port_rss(const struct dn_port *p) { return p->rss; }
uint16_t dn_port_nb_lcores(const struct dn_port *p) { return p->nb_lcores; }
bool dn_port_sw_steer(const struct dn_port *p) { return p->sw_steer; }
uint16_t dn_port_nb_queues(const struct dn_port *p) { return p->nb_queues; }

const uint8_t *dn_port_rss_key(const struct dn_port *p, uint32_t *key_len)
{
	*key_len = p->rss ? p->rss_key_len : 0;
	return p->rss ? p->rss_key : NULL;
}

const uint16_t *dn_port_reta(const struct dn_port *p, uint32_t *reta_size)
{
	*reta_size = p->reta_size;
	return p->reta_size ? p->reta : NULL;
}

int dn_lcore_create(struct dn_port *port, uint16_t index, const struct dn_hooks *hooks,
		    struct dn_lcore **out)
{
	struct dn_lcore *lc;
	uint16_t queue = port->sw_steer && !port->mq ? 0 : index;

	if (index >= port->nb_lcores || queue >= port->nb_queues)
		return -EINVAL;
	lc = rte_zmalloc_socket("dn_lcore", sizeof(*lc), RTE_CACHE_LINE_SIZE,
				(int)rte_socket_id());
	if (lc == NULL)
		return -ENOMEM;
	lc->port = port;
	lc->port_id = port->port_id;
	lc->queue = queue;
	lc->index = index;
	lc->pool = pool_for_queue(port, index);
	lc->tx_drain_cycles = rte_get_tsc_hz() / 1000000 * DN_TX_DRAIN_US;
	lc->ip_id = (uint16_t)(index << 12);
	lc->tx_cleanup_ok = true;
	dn_spin_init(&lc->spin, dn_idle_spin_us(&port->cfg), rte_get_tsc_hz() / 1000000);
	if (hooks != NULL)
		lc->hooks = *hooks;
	if (port->sw_steer)
		dn_steer_lcore_init(lc);
	dn_wake_lcore_init(lc);
	if (index == 0)
		lc->rx_extra = port->nb_rx_extra;
	if (port->rx_intr && index == queue) {
		/*
		 * Registers the queue's event fd on this thread's epoll set (RTE_EPOLL_PER_THREAD),
		 * and the extra queues' (lcore 0): any of them wakes it.
		 */
		if (rte_eth_dev_rx_intr_ctl_q(port->port_id, queue, RTE_EPOLL_PER_THREAD,
					      RTE_INTR_EVENT_ADD, NULL) == 0 &&
		    rte_eth_dev_rx_intr_enable(port->port_id, queue) == 0) {
			rte_eth_dev_rx_intr_disable(port->port_id, queue);
			lc->intr_registered = true;
		}
		for (uint16_t q = 1; lc->intr_registered && q <= lc->rx_extra; q++)
			if (rte_eth_dev_rx_intr_ctl_q(port->port_id, q, RTE_EPOLL_PER_THREAD,
						      RTE_INTR_EVENT_ADD, NULL) != 0)
				DN_LOG(WARNING, "port %u: no Rx interrupt for queue %u: frames there "
				       "wait for lcore 0's next look (at most 1 ms asleep)",
				       port->port_id, q);
	}
	if (port->rx_sock >= 0 && index == 0 && queue == 0) {
		/* Level-triggered: readable while the socket's Rx ring holds frames. */
		lc->sock_ev.epdata.event = EPOLLIN;
		lc->sock_registered = rte_epoll_ctl(RTE_EPOLL_PER_THREAD, EPOLL_CTL_ADD,
						    port->rx_sock, &lc->sock_ev) == 0;
		lc->intr_registered = lc->sock_registered;
	}
	*out = lc;
	return 0;
}

bool dn_parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	uint64_t x = 0;

	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9' || (x = x * 10 + (uint64_t)(*s - '0')) > hi)
			return false;
	}
	if (x < lo)
		return false;
	if (out != NULL)
		*out = (unsigned)x;
	return true;
}

uint32_t dn_idle_spin_env_us(void)
{
	const char *v = getenv("WHARF_IDLE_SPIN_US");
	unsigned us;

	/* A bad value is refused where a port or the transport is created; not reached then. */
	if (v == NULL || !dn_parse_uint(v, 0, DN_IDLE_SPIN_MAX_US, &us))
		return DN_IDLE_SPIN_DEFAULT_US;
	return us;
}

uint32_t dn_idle_spin_us(const struct dn_config *cfg)
{
	if (cfg->idle != DN_IDLE_SLEEP || cfg->idle_spin_us != 0)
		return cfg->idle_spin_us;
	return dn_idle_spin_env_us();
}

void dn_lcore_destroy(struct dn_lcore *lc)
{
	if (lc == NULL)
		return;
	dn_obs_unregister(lc);
	dn_tx_flush(lc);
	while (lc->tx_head != lc->tx_tail)
		rte_pktmbuf_free(lc->tx[lc->tx_head++ & (DN_TXQ_SLOTS - 1)]);
	for (unsigned i = 0; i < lc->n_pending; i++)
		rte_pktmbuf_free(lc->pending[i].m);
	rte_pktmbuf_free_bulk(lc->stash, lc->stash_n);
	dn_wake_lcore_fini(lc);
	if (lc->sock_registered)
		rte_epoll_ctl(lc->sock_ev.epfd, EPOLL_CTL_DEL, lc->sock_ev.fd, &lc->sock_ev);
	rte_free(lc);
}

struct dn_port *dn_lcore_port(struct dn_lcore *lc) { return lc->port; }
uint16_t dn_lcore_queue(const struct dn_lcore *lc) { return lc->queue; }
uint16_t dn_lcore_index(const struct dn_lcore *lc) { return lc->index; }
struct rte_mempool *dn_lcore_pool(struct dn_lcore *lc) { return lc->pool; }
const struct dn_stats *dn_lcore_stats(const struct dn_lcore *lc) { return &lc->stats; }
const struct dn_spin *dn_lcore_spin(const struct dn_lcore *lc) { return &lc->spin; }
void dn_lcore_count_drop(struct dn_lcore *lc, enum dn_drop why) { lc->stats.drops[why]++; }

void dn_lcore_set_hooks(struct dn_lcore *lc, const struct dn_hooks *hooks)
{
	lc->hooks = *hooks;
}

void dn_lcore_set_echo_reply(struct dn_lcore *lc, dn_echo_reply_fn fn, void *arg)
{
	lc->echo_fn = fn;
	lc->echo_arg = arg;
}

bool dn_port_keeps_eal(void) { return eal_keep; }
