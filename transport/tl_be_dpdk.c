/*
 * tl_be_dpdk.c — protocol=dpdk: the transport backend that binds the TCP-lite core
 * (tl_tcp.h) to one dpdk_net lcore (dn.h).
 *
 * In:  tl_poll -> db_poll -> dn_loop_once -> rx_burst -> eth/ip -> db_l4_input
 *      -> tl_tcp_input (a frame in a chain of buffers: db_input_chain ->
 *      tl_tcp_input_pieces) -> cbs.recv -> tl_conn_input (framing, zero copy: the framer holds
 *      the mbufs) ; dn_loop_once -> hooks.poll -> tl_tcp_timers
 * Out: tl_poll -> tl_flush_dirty -> db_flush -> db_queue: a small message (up to
 *      DB_SMALL_MSG bytes with its header) is copied into the connection's arena and
 *      completed at once; the arena bytes go to the core as one piece (db_arena_push) ahead
 *      of the next large message; a large message's iov pieces are referenced, not copied
 *      -> tl_tcp_send -> ops.emit -> db_emit -> header mbuf + payload mbufs attached to the
 *      caller's memory as external buffers -> dn_ip_send -> tx_burst.
 *      ACK -> the core drops its reference; the PMD frees the mbuf -> shinfo free_cb ->
 *      tl_tcp_sbuf_put -> piece done -> db_piece_done -> tl_tx_done when a message's last
 *      piece is released.
 *
 * Zero copy needs memory the device can reach: with vhost-user that is DPDK memory
 * (hugepages, or memfd with --no-huge), which tl_buf_alloc hands out. Payload in other
 * memory, and small payload pieces (below DB_COPY_MAX, where attaching costs more than
 * copying), are copied into the header mbuf or a fresh one.
 *
 * tl_close ends a connection gracefully: what the core already sends goes on from a copy
 * (tl_tcp_conn_own_payload: the caller's memory is the caller's once its send completes,
 * -ECANCELED, at the next tl_poll as for any close), then the FIN; the core's connection
 * lives on without the tl_conn through FIN_WAIT and TIME_WAIT (db_orphan_cbs).
 * tl_abort, and a connection failed by an error, reset it (RST).
 * Messages whose pieces the PMD still holds in its Tx ring are completed when the ring
 * lets go, never earlier.
 *
 * Several lcores on one port (dpdk_net flow steering, docs/architecture.md "Flow
 * steering"): one instance per lcore, each with its own TCP-lite stack. Every instance that
 * reads a device queue (lcore 0 on a one-queue port, each on a queue per lcore) installs the
 * classifier (db_steer: tl_steer_sw_owner), so every segment reaches the lcore that owns its
 * connection; an active open on lcore i takes its local port from i's slice of the
 * ephemeral range (tl_steer_sw_pick_port), so replies come back to i, and on an RSS port
 * one whose hash puts the replies on i's own queue too (db_rss_elsewhere), so they need no
 * hand-over; a port one lcore alone listens on is claimed by it (dn_steer_claim), so its
 * connections land there; a port every lcore listens on is shared and a SYN is served where
 * the tuple hash sends it.
 * On a one-queue port frames of lcore i leave through lcore 0's Tx queue, so the PMD frees
 * i's attached payload on lcore 0: the release of the send buffer (not thread-safe, it
 * belongs to i's stack) crosses back over an MP/SC ring of completions that i drains in
 * its poll hook.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_lcore.h>
#include <rte_memory.h>
#include <rte_random.h>
#include <rte_ring.h>

#include "dpdk_net/dn.h"
#include "transport/tl_pvt.h"
#include "transport/tl_tcp.h"

#define DB_COPY_MAX 512      /* payload pieces up to this size are copied, not attached */
/*
 * Messages up to this size (header included) are copied into a per-connection arena and
 * completed when copied, as a kernel socket completes a write: tracking each as zero-copy
 * pieces (a descriptor, a completion, a slice per segment for header and body apiece) cost
 * more than the copy. The arena is handed to the core as one piece per flush.
 */
#define DB_SMALL_MSG 512u
#define DB_ARENA_BYTES (64u << 10)
#define DB_EXT_MBUFS 16383   /* mbufs that carry attached payload, per instance */
#define DB_BACKED_UP_BYTES (256u << 10) /* queued to a peer that is not taking it */
#define DB_MAX_HOGS 64u                 /* backed-up connections whose data a low pool drops */
/* Local ports of active opens, split into per-lcore slices under software steering. */
#define DB_PORT_LO 49152u
#define DB_PORT_HI 65535u
#define DB_PICK_TRIES 64     /* ports of our slice tried before an active open gives up */
#define DB_SB_RING 16384     /* completions in flight: above DB_EXT_MBUFS, so never full */
#define DB_SB_BURST 64
#define DB_FINI_WAIT_US 200000 /* teardown: longest wait for the PMD to let go of payload */

/* Private area of an attached-payload mbuf: its shared info and whose send buffer it holds. */
struct db_ext {
	struct rte_mbuf_ext_shared_info sh;
	struct db *d;
	struct tl_tcp_sbuf *sb;
};

/* One message on its way: completes when every piece the core took is released. */
struct db_txrec {
	struct db_txrec *next_free;
	struct db *d;
	struct tl_conn *c;    /* NULL once the connection is gone (orphan) */
	struct tl_tx *tx;
	uint32_t pending;     /* pieces handed to the core, not yet released */
	int status;
	bool queued;          /* every byte of tx handed to the core */
};

struct db {
	struct tl *tl;
	struct dn_lcore *lc;
	struct dn_port *port;       /* owned only in standalone mode */
	bool own_eal;
	struct tl_tcp_stack *stack;
	struct rte_mempool *hdr_pool, *ext_pool;
	uint64_t hz;
	uint64_t ns_mult;           /* TSC ticks to ns: (tsc * ns_mult) >> 32 */
	uint32_t ip;
	unsigned work;
	uint64_t poll_until;        /* TSC at which the running db_poll's wait ends */
	struct db_txrec *recs, *rec_free;
	uint32_t nrecs;
	struct rte_memseg_list *msl; /* last DPDK memseg list a payload piece was found in */
	/*
	 * Receive back-pressure. Received data stays in its mbufs until the application is done
	 * with it, so a peer whose messages are not consumed (a receiver that never reads, a
	 * queue that never drains) would empty the mempool and leave the port unable to refill
	 * its Rx ring: deaf to everyone. Below a quarter of the pool free, delivered bytes no
	 * longer reopen the TCP window of connections whose replies are backed up (below an
	 * eighth, of any connection); above half free, the withheld windows reopen.
	 * Windows already offered can still be filled, so below an eighth free the data
	 * segments of the backed-up connections ("hogs", listed by db_pool_watch) are dropped
	 * on arrival, and below a thirty-second those of every connection (db_drop_data_nomem).
	 */
	bool pool_low, pool_critical, pool_severe;
	uint32_t n_hogs;
	struct tl_tcp_tuple hogs[DB_MAX_HOGS];
	uint32_t conn_pieces_max;   /* send descriptors one connection may hold */
	struct tl_obs *obs;         /* telemetry slot, or NULL */
	/* Software steering: our lcore index of nl sharing the port, our EAL lcore id, where
	 * the next port search of our slice starts, and (index > 0) the completion ring. */
	uint16_t idx, nl;
	unsigned lcore_id;
	uint16_t next_port;
	struct rte_ring *sb_ring;
	uint64_t sb_remote;         /* send buffers released through the ring */
	uint64_t conn_pieces_capped;
	uint32_t withholding;       /* connections with withheld bytes */
	uint64_t next_pool_check;
	uint64_t next_tso_check;    /* a vhost endpoint's TSO follows its guest: re-read 1/ms */
	uint32_t tso_max;           /* the segment size our stack was last given (0: no TSO) */
	struct db_arena *arena_free, *arena_all;
	uint64_t arena_msgs;        /* small messages sent by copy */
};

struct db_conn {
	struct tl_tcp_conn *tc;
	uint32_t withheld;          /* bytes delivered while mbufs ran short or the receiver
				     * paused (tl_conn_rx_pause): window kept shut */
	uint32_t pieces;            /* pieces handed to the core and not yet released */
	struct db_txrec *cur;       /* the message being handed to the core, if partial */
	struct db_arena *arena;     /* where small messages are copied, or NULL */
};

/* A block of copied small messages, in DPDK memory (its pieces are attached like any
 * payload). Referenced by the connection writing into it and by each piece of it the core
 * holds; back on the instance's free list when unreferenced. */
struct db_arena {
	struct db_arena *next_free;
	struct db_arena *next_all;
	struct db *d;
	uint32_t refs;
	uint32_t used;              /* bytes copied in */
	uint32_t pushed;            /* bytes handed to the core */
	bool rte;                   /* from rte_malloc (else malloc) */
	uint8_t data[DB_ARENA_BYTES];
};

struct db_listener {
	struct tl_tcp_listener *tl;
};

static inline struct db *db_of(struct tl *tl) { return tl->be; }

/* The TCP core's clock in ns: a multiply and a shift (a 128-bit division per segment
 * was 3-4% of a small-message stream). */
static inline uint64_t db_tsc_ns(const struct db *d, uint64_t tsc)
{
	return (uint64_t)(((unsigned __int128)tsc * d->ns_mult) >> 32);
}

static inline uint64_t db_now(const struct db *d)
{
	return db_tsc_ns(d, rte_rdtsc());
}

/* ---- packets to and from the core ---------------------------------------------------- */

/*
 * The PMD (or anyone) freed an attached-payload mbuf. On our own lcore the send buffer is
 * released at once; elsewhere (lcore 0 sent it for us) the release is queued to us.
 */
static void db_ext_free(void *addr, void *opaque)
{
	struct db_ext *x = opaque;
	struct db *d = x->d;

	(void)addr;
	if (d->sb_ring == NULL || rte_lcore_id() == d->lcore_id) {
		tl_tcp_sbuf_put(x->sb);
		return;
	}
	/* Cannot fail: the ring holds more than there are attached mbufs (DB_EXT_MBUFS). */
	rte_ring_mp_enqueue(d->sb_ring, x->sb);
	dn_lcore_wake_sleeper(d->lc);
}

/* Releases the send buffers other lcores freed for us (poll hook; teardown). */
static unsigned db_sb_drain(struct db *d)
{
	void *sb[DB_SB_BURST];
	unsigned n, total = 0;

	if (d->sb_ring == NULL)
		return 0;
	do {
		n = rte_ring_sc_dequeue_burst(d->sb_ring, sb, DB_SB_BURST, NULL);
		for (unsigned i = 0; i < n; i++)
			tl_tcp_sbuf_put(sb[i]);
		total += n;
	} while (n == DB_SB_BURST);
	d->sb_remote += total;
	return total;
}

/*
 * The IO address of a payload piece when it lies in DPDK memory within one memory segment
 * (so it is contiguous for the device in IOVA-as-PA mode too), else RTE_BAD_IOVA. The last
 * memseg list found is cached: rte_mem_virt2iova reads /proc/self/pagemap per call, far too
 * slow for every segment.
 */
static rte_iova_t db_payload_iova(struct db *d, const void *p, uint32_t len)
{
	uintptr_t a = (uintptr_t)p;
	const struct rte_memseg *ms;

	if (d->msl == NULL || a < (uintptr_t)d->msl->base_va ||
	    a + len > (uintptr_t)d->msl->base_va + d->msl->len) {
		struct rte_memseg_list *msl = rte_mem_virt2memseg_list(p);
		if (msl == NULL || msl->external)
			return RTE_BAD_IOVA;
		d->msl = msl;
	}
	if (rte_eal_iova_mode() == RTE_IOVA_VA)
		return (rte_iova_t)a;
	ms = rte_mem_virt2memseg(p, d->msl);
	if (ms == NULL || a + len > (uintptr_t)ms->addr + ms->len)
		return RTE_BAD_IOVA;
	return ms->iova + (a - (uintptr_t)ms->addr);
}

/* Appends a payload piece to the chain ending at *last: copied or attached. */
static int db_add_slice(struct db *d, struct rte_mbuf *h, struct rte_mbuf **last,
			const struct tl_tcp_slice *s)
{
	struct rte_mbuf *m;
	uint8_t *dst;

	if (s->len <= DB_COPY_MAX && rte_pktmbuf_tailroom(*last) >= s->len && (*last)->shinfo == NULL) {
		dst = (uint8_t *)rte_pktmbuf_append(h, (uint16_t)s->len);
		if (dst != NULL) {
			memcpy(dst, s->base, s->len);
			return 0;
		}
	}
	rte_iova_t iova = s->len > DB_COPY_MAX ? db_payload_iova(d, s->base, s->len) : RTE_BAD_IOVA;

	if (iova != RTE_BAD_IOVA) {
		struct db_ext *x;

		m = rte_pktmbuf_alloc(d->ext_pool);
		if (m == NULL)
			return -ENOBUFS;
		x = rte_mbuf_to_priv(m);
		x->sh.free_cb = db_ext_free;
		x->sh.fcb_opaque = x;
		x->d = d;
		x->sb = s->sb;
		rte_mbuf_ext_refcnt_set(&x->sh, 1);
		tl_tcp_sbuf_get(s->sb);
		rte_pktmbuf_attach_extbuf(m, (void *)(uintptr_t)s->base, iova, (uint16_t)s->len, &x->sh);
		m->data_len = (uint16_t)s->len;
		m->pkt_len = s->len;
	} else {
		/* Copied, over as many buffers as it takes (a TSO segment's piece can be 64 KiB). */
		for (uint32_t done = 0; done < s->len;) {
			uint16_t n;

			m = rte_pktmbuf_alloc(d->hdr_pool);
			if (m == NULL)
				return -ENOBUFS;
			n = (uint16_t)RTE_MIN(s->len - done, (uint32_t)rte_pktmbuf_tailroom(m));
			memcpy(rte_pktmbuf_append(m, n), s->base + done, n);
			if (rte_pktmbuf_chain(h, m) != 0) {
				rte_pktmbuf_free(m);
				return -EMSGSIZE;
			}
			*last = m;
			done += n;
		}
		return 0;
	}
	if (rte_pktmbuf_chain(h, m) != 0) {
		rte_pktmbuf_free(m);
		return -EMSGSIZE;
	}
	*last = m;
	return 0;
}

static int db_emit(void *ctx, const struct tl_tcp_tx *tx)
{
	struct db *d = ctx;
	struct rte_mbuf *h = rte_pktmbuf_alloc(d->hdr_pool), *last = h;
	uint8_t *p;
	int rc = 0;

	if (h == NULL)
		return -ENOBUFS;
	p = (uint8_t *)rte_pktmbuf_append(h, tx->hdr_len);
	memcpy(p, tx->hdr, tx->hdr_len);
	for (uint16_t i = 0; i < tx->nslices && rc == 0; i++)
		rc = db_add_slice(d, h, &last, &tx->slice[i]);
	if (rc != 0) {
		rte_pktmbuf_free(h); /* attached pieces give their sbuf references back */
		return rc;
	}
	d->work++;
	if (tx->tso_segsz != 0) { /* a segment of several MSS: the device cuts it */
		h->l4_len = tx->hdr_len;
		h->tso_segsz = tx->tso_segsz;
	}
	rc = dn_ip_send(d->lc, h, tx->daddr, IPPROTO_TCP,
			DN_TX_L4_CSUM | (tx->ecn == TL_ECN_ECT0 ? DN_TX_ECT0 : 0) |
				(tx->tso_segsz != 0 ? DN_TX_TSO : 0));
	/* Queued behind ARP counts as sent: the core retransmits if it never leaves. */
	return rc == -EAGAIN ? 0 : rc;
}

/*
 * A reference on a received frame. rte_pktmbuf_free drops one reference from every buffer
 * of a chain (an LRO frame), so a hold takes one on every buffer too.
 */
static void db_mbuf_hold(struct rte_mbuf *m)
{
	for (; m != NULL; m = m->next)
		rte_mbuf_refcnt_update(m, 1);
}

static void db_pkt_hold(void *ctx, void *pkt)
{
	(void)ctx;
	db_mbuf_hold(pkt);
}

static void db_pkt_release(void *ctx, void *pkt)
{
	(void)ctx;
	rte_pktmbuf_free(pkt);
}

static void db_chunk_hold(void *ref) { db_mbuf_hold(ref); }
static void db_chunk_release(void *ref) { rte_pktmbuf_free(ref); }
static const struct tl_chunk_ops db_chunk_ops = { db_chunk_hold, db_chunk_release };

/*
 * Mempool critically low (db_pool_watch): a segment carrying data for a backed-up
 * connection — one whose replies its peer is not taking, so what it receives stays in
 * mbufs — is dropped before TCP sees it, unacknowledged, for the peer to send again; below
 * a thirty-second of the pool free, every connection's data is. Without this, peers that
 * fill the windows they were offered while the application cannot drain them (an echo to
 * a peer that never reads) take every mbuf: the Rx ring cannot refill and the port goes
 * deaf, even to the RSTs and ACKs that would free them. Segments without data (ACKs, RSTs,
 * FINs, window updates) and SYNs always go in. The whole segment goes, not only its
 * payload: a data segment cut down to its header would read as a duplicate ACK.
 */
static bool db_drop_data_nomem(struct db *d, uint32_t saddr, const uint8_t *tcp, uint32_t tcp_len)
{
	uint32_t doff;
	uint16_t sport, dport;
	bool drop;

	if (tcp_len < 20)
		return false; /* TCP-lite refuses it as malformed */
	doff = (uint32_t)(tcp[12] >> 4) * 4u;
	if (doff < 20 || doff >= tcp_len || (tcp[13] & 0x02))
		return false;
	sport = (uint16_t)(tcp[0] << 8 | tcp[1]);
	dport = (uint16_t)(tcp[2] << 8 | tcp[3]);
	drop = d->pool_severe;
	for (uint32_t i = 0; !drop && i < d->n_hogs; i++)
		drop = d->hogs[i].raddr == saddr && d->hogs[i].rport == sport &&
		       d->hogs[i].lport == dport;
	if (!drop)
		return false;
	d->tl->st.rx_dropped_nomem++;
	return true;
}

#define DB_CHAIN_PIECES 64 /* buffers of a chained frame fed piecewise (64 KiB in 2 KiB ones: 33) */

/*
 * A TCP frame in a chain of buffers (an LRO/TSO frame of up to 64 KiB over the virtio pair):
 * its payload goes to TCP-lite a buffer at a time (tl_tcp_input_pieces), every piece under
 * the head mbuf's reference, which keeps the whole chain. False: not fed piecewise (a SYN
 * or RST, a header not in the first buffer, too many buffers), for the caller to linearize.
 */
static bool db_input_chain(struct db *d, struct rte_mbuf *m, struct tl_tcp_rx *rx)
{
	struct tl_tcp_piece p[DB_CHAIN_PIECES];
	const uint8_t *tcp = rx->tcp;
	uint32_t hoff = (uint32_t)(tcp - rte_pktmbuf_mtod(m, const uint8_t *));
	uint32_t doff, off, left, n = 0;
	struct tl_tcp_rx h = *rx;

	if (rx->tcp_len < 20 || hoff + 20u > rte_pktmbuf_data_len(m) || m->nb_segs > DB_CHAIN_PIECES)
		return false;
	doff = (uint32_t)(tcp[12] >> 4) * 4u;
	off = hoff + doff;
	if (doff > rx->tcp_len || off > rte_pktmbuf_data_len(m))
		return false;
	left = rx->tcp_len - doff;
	for (const struct rte_mbuf *s = m; s != NULL && left > 0; s = s->next, off = 0) {
		uint32_t len = RTE_MIN((uint32_t)rte_pktmbuf_data_len(s) - RTE_MIN(off, rte_pktmbuf_data_len(s)), left);
		if (len == 0)
			continue;
		p[n++] = (struct tl_tcp_piece){rte_pktmbuf_mtod_offset(s, const uint8_t *, off), len};
		left -= len;
	}
	h.tcp_len = doff;
	return tl_tcp_input_pieces(d->stack, &h, p, n, db_now(d)) != -EINVAL;
}

/*
 * True when the frame's buffers hold exactly what its head says: pkt_len bytes in nb_segs
 * buffers. A PMD that got this wrong (a driver bug, or a device's bad LRO descriptors) would
 * have the checksum and TCP read past the received bytes, rte_pktmbuf_linearize copy past the
 * head buffer's end, and db_input_chain overrun its piece array; the frame is dropped instead.
 * One compare for a single buffer; a chain is walked, as db_input_chain walks it anyway.
 */
static inline bool db_frame_whole(const struct rte_mbuf *m)
{
	uint32_t sum = 0;
	uint16_t n = 0;

	if (likely(m->next == NULL))
		return m->nb_segs == 1 && m->data_len == m->pkt_len;
	for (const struct rte_mbuf *s = m; s != NULL && n <= m->nb_segs; s = s->next, n++)
		sum += s->data_len;
	return n == m->nb_segs && sum == m->pkt_len;
}

static void db_l4_input(void *arg, struct dn_lcore *lc, struct rte_mbuf *m)
{
	struct db *d = arg;
	struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod(m, struct rte_ipv4_hdr *);
	uint64_t ck = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
	uint16_t ihl = m->l3_len, tot = rte_be_to_cpu_16(ip->total_length);
	struct tl_tcp_rx rx = {0};
	bool chain = m->nb_segs > 1;

	d->work++;
	if (ip->next_proto_id != IPPROTO_TCP) {
		dn_lcore_count_drop(lc, DN_DROP_IP_PROTO);
		rte_pktmbuf_free(m);
		return;
	}
	if (unlikely(!db_frame_whole(m))) {
		dn_lcore_count_drop(lc, DN_DROP_IP_LEN);
		rte_pktmbuf_free(m);
		return;
	}
	/* GOOD: the device verified it; NONE: not computed but the data is intact (a virtio
	 * peer's partial checksum); UNKNOWN: ours to verify. */
	if (ck == RTE_MBUF_F_RX_L4_CKSUM_BAD ||
	    (ck == RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN && tot > ihl &&
	     (chain ? dn_l4_cksum_sw(m, ip, ihl) != 0
		    : !dn_l4_cksum_ok(ip, (const uint8_t *)ip + ihl, (uint32_t)(tot - ihl))))) {
		dn_lcore_count_drop(lc, DN_DROP_L4_CKSUM);
		rte_pktmbuf_free(m);
		return;
	}
	rx.saddr = rte_be_to_cpu_32(ip->src_addr);
	rx.daddr = rte_be_to_cpu_32(ip->dst_addr);
	rx.tcp = (const uint8_t *)ip + ihl;
	rx.tcp_len = (uint32_t)(tot - ihl);
	rx.ecn = ip->type_of_service & 3;
	rx.pkt = m;
	if (__builtin_expect(d->pool_critical, 0) &&
	    (rte_pktmbuf_data_len(m) < ihl + 20u ||
	     db_drop_data_nomem(d, rx.saddr, rx.tcp, rx.tcp_len))) {
		rte_pktmbuf_free(m);
		return;
	}
	if (chain && !db_input_chain(d, m, &rx)) {
		/* A frame TCP-lite cannot take piecewise: made contiguous, if it fits a buffer. */
		if (rte_pktmbuf_linearize(m) != 0) {
			dn_lcore_count_drop(lc, DN_DROP_NO_MBUF);
			rte_pktmbuf_free(m);
			return;
		}
		ip = rte_pktmbuf_mtod(m, struct rte_ipv4_hdr *);
		rx.tcp = (const uint8_t *)ip + ihl;
		chain = false;
	}
	if (!chain)
		tl_tcp_input(d->stack, &rx, db_now(d));
	rte_pktmbuf_free(m); /* our reference; the core and the framer hold their own */
}

static void db_pool_watch(struct db *d, uint64_t now_tsc);

static unsigned db_timers(void *arg, struct dn_lcore *lc, uint64_t now_tsc)
{
	struct db *d = arg;
	unsigned work;

	(void)lc;
	/* Completions first: a released buffer may finish a message and free send space. */
	work = db_sb_drain(d);
	db_pool_watch(d, now_tsc);
	if (now_tsc >= d->next_tso_check) {
		struct dn_port *port = dn_lcore_port(d->lc);
		uint32_t tso_max;
		d->next_tso_check = now_tsc + d->hz / 1000;
		/* Lcore 0 asks the device; every instance follows what the port says. */
		if (d->idx == 0)
			dn_port_tso_refresh(port);
		if ((tso_max = dn_port_tso_max(port)) != d->tso_max) {
			d->tso_max = tso_max;
			tl_tcp_stack_set_tso_max(d->stack, tso_max);
		}
	}
	tl_obs_publish(d->obs, now_tsc);
	/* The round's clock, not another rdtsc (12 ns here, a tenth of an idle round). Input
	 * earlier in the round may have read a later clock; the stack keeps the later one (its
	 * clock only moves forward), so timers never run on a time before it. */
	tl_tcp_timers(d->stack, db_tsc_ns(d, now_tsc));
	return work;
}

/*
 * dn_hooks.due: a sleep ends by the stack's next timer (a delayed ACK is due 200 us after
 * the data; an idle sleep, 1 ms and its 4 ms of slack, would send it up to 5 ms late) and by
 * the end of the running tl_poll's wait.
 */
static uint64_t db_due(void *arg, struct dn_lcore *lc)
{
	const struct db *d = arg;
	uint64_t t = tl_tcp_next_timer(d->stack), due = d->poll_until;

	(void)lc;
	if (t != UINT64_MAX) {
		unsigned __int128 tsc = ((unsigned __int128)t << 32) / d->ns_mult + 1;
		if (tsc < due)
			due = (uint64_t)tsc;
	}
	return due;
}

/* The classifier under flow steering: the lcore owning a TCP segment's flow. */
static uint32_t db_steer(void *arg, const struct dn_flow *f)
{
	const struct db *d = arg;

	int owner;

	if (f->proto != IPPROTO_TCP)
		return 0;
	/* A port one lcore listens on alone (a PS lcore's own data port): that lcore's. */
	owner = dn_steer_owner(dn_lcore_port(d->lc), f->dport);
	if (owner >= 0)
		return (uint32_t)owner;
	return tl_steer_sw_owner(f->saddr, f->daddr, f->sport, f->dport, DB_PORT_LO, DB_PORT_HI,
				 d->nl);
}

/* ---- messages to pieces -------------------------------------------------------------- */

static struct db_txrec *db_rec_get(struct db *d)
{
	struct db_txrec *r = d->rec_free;

	if (r != NULL)
		d->rec_free = r->next_free;
	return r;
}

static void db_rec_put(struct db_txrec *r)
{
	/* A free record belongs to no connection: db_shutdown must never find it. */
	r->c = NULL;
	r->tx = NULL;
	r->next_free = r->d->rec_free;
	r->d->rec_free = r;
}

static void db_rec_finish(struct db_txrec *r)
{
	if (r->c != NULL)
		tl_up_tx_done(r->c, r->tx, r->status);
	db_rec_put(r);
}

static void db_piece_done(void *arg, int status)
{
	struct db_txrec *r = arg;

	if (r->c != NULL) {
		struct tl_conn *c = r->c;
		/* A connection held back by its descriptor cap goes on once pieces come back. */
		if (((struct db_conn *)tl_conn_priv(c))->pieces-- == r->d->conn_pieces_max &&
		    c->state == TL_CS_OPEN && !tl_list_empty(&c->txq))
			tl_conn_mark_dirty(c);
	}
	if (status != 0 && r->status == 0)
		r->status = status;
	if (--r->pending == 0 && r->queued)
		db_rec_finish(r);
}

static void db_arena_unref(struct db_arena *a)
{
	if (--a->refs == 0) {
		a->next_free = a->d->arena_free;
		a->d->arena_free = a;
	}
}

static void db_arena_done(void *arg, int status)
{
	(void)status;
	db_arena_unref(arg);
}

/* Hands the arena bytes not yet given to the core to it (as far as it takes them). */
static int db_arena_push(struct db_conn *dc, uint64_t now)
{
	struct db_arena *a = dc->arena;
	uint32_t n;
	int rc;

	if (a == NULL || a->pushed == a->used)
		return 0;
	n = RTE_MIN(a->used - a->pushed, tl_tcp_send_space(dc->tc));
	if (n == 0)
		return -ENOBUFS;
	rc = tl_tcp_send(dc->tc, a->data + a->pushed, n, db_arena_done, a, now);
	if (rc != 0)
		return rc;
	a->refs++;
	a->pushed += n;
	return a->pushed == a->used ? 0 : -ENOBUFS;
}

/* Where len more bytes go in the connection's arena (a fresh block when it is full). */
static uint8_t *db_arena_room(struct db *d, struct db_conn *dc, uint32_t len, uint64_t now)
{
	struct db_arena *a = dc->arena;

	if (a != NULL && DB_ARENA_BYTES - a->used >= len)
		return a->data + a->used;
	if (a != NULL) {
		if (db_arena_push(dc, now) != 0)
			return NULL;
		db_arena_unref(a);
		dc->arena = NULL;
	}
	a = d->arena_free;
	if (a != NULL) {
		d->arena_free = a->next_free;
	} else {
		bool rte = true;
		a = rte_malloc_socket("wharf_arena", sizeof(*a), RTE_CACHE_LINE_SIZE,
				      (int)rte_socket_id());
		if (a == NULL) {
			rte = false;
			a = malloc(sizeof(*a));
		}
		if (a == NULL)
			return NULL;
		a->d = d;
		a->rte = rte;
		a->next_all = d->arena_all;
		d->arena_all = a;
	}
	a->refs = 1;
	a->used = a->pushed = 0;
	dc->arena = a;
	tl_prefetch_w_open(a->data, a->data + DB_ARENA_BYTES);
	return a->data;
}

/*
 * tl_send_copy with nothing queued ahead: header and body straight into the arena, as
 * db_queue would copy them at the flush, without a tx record or a completion. A full
 * arena goes to the core first with the core corked, so that only queues it (this may run
 * inside the connection's own input); the flush this send is marked for uncorks. When the
 * core cannot take it all, the message queues as usual.
 */
static int db_send_copy(struct tl_conn *c, const struct tl_msg_hdr *h, uint32_t body_len,
			const struct tl_iov *iov, uint32_t iovcnt)
{
	struct db *d = db_of(c->tl);
	struct db_conn *dc = tl_conn_priv(c);
	uint32_t len = TL_MSG_HDR_LEN + body_len;
	struct db_arena *a = dc->arena;
	uint8_t *p;

	if (dc->tc == NULL)
		return -ENOTCONN;
	if (a != NULL && DB_ARENA_BYTES - a->used < len)
		tl_tcp_cork(dc->tc, true, 0); /* the full arena is pushed: queue it, no more */
	p = db_arena_room(d, dc, len, 0);
	if (p == NULL)
		return -ENOBUFS;
	a = dc->arena;
	tl_prefetch_w_ahead(p, a->data + DB_ARENA_BYTES);
	tl_msg_hdr_encode(p, h);
	tl_st32(p + 8, body_len);
	tl_iov_gather(p + TL_MSG_HDR_LEN, iov, iovcnt);
	a->used += len;
	d->arena_msgs++;
	return 0;
}

/*
 * Hands queued messages to the core until it refuses more (-ENOBUFS: cbs.sent resumes).
 * Small messages are copied and moved to *copied, for the caller to complete.
 */
static void db_queue(struct db *d, struct tl_conn *c, struct db_conn *dc, uint64_t now,
		     struct tl_link *copied)
{
	struct tl_link *e;

	for (e = c->txq.next; e != &c->txq;) {
		struct tl_tx *tx = tl_container_of(e, struct tl_tx, link);
		struct db_txrec *r;
		uint64_t off = 0;

		e = e->next; /* tx may complete and leave the queue below */
		if (tx->off == tx->len)
			continue;
		if (tx->off == 0 && tx->len <= DB_SMALL_MSG) {
			uint8_t *p = db_arena_room(d, dc, (uint32_t)tx->len, now);
			if (p == NULL)
				return;
			tl_prefetch_w_ahead(p, dc->arena->data + DB_ARENA_BYTES);
			tl_iov_gather(p, tx->iov, tx->iovcnt);
			dc->arena->used += (uint32_t)tx->len;
			tx->off = tx->len;
			tl_list_del(&tx->link);
			tl_list_add_tail(copied, &tx->link);
			d->arena_msgs++;
			continue;
		}
		if (db_arena_push(dc, now) != 0)
			return; /* what was copied before this message leaves first */
		r = tx->off == 0 ? db_rec_get(d) : dc->cur;
		if (r == NULL)
			return; /* records run out: a sent callback brings us back */
		if (tx->off == 0)
			*r = (struct db_txrec){.d = d, .c = c, .tx = tx};
		for (uint32_t i = 0; i < tx->iovcnt; off += tx->iov[i].len, i++) {
			const struct tl_iov *v = &tx->iov[i];
			if (tx->off >= off + v->len)
				continue;
			uint32_t skip = (uint32_t)(tx->off - off), len = v->len - skip;
			/*
			 * The core's send descriptors are shared by the lcore's connections: one
			 * whose peer does not read must not hold them all and stall the others.
			 */
			int rc = dc->pieces >= d->conn_pieces_max ? -ENOBUFS : 0;
			r->pending++;
			if (rc == 0)
				rc = tl_tcp_send(dc->tc, v->base + skip, len, db_piece_done, r, now);
			else
				d->conn_pieces_capped++;
			if (rc == 0)
				dc->pieces++;
			if (rc != 0) {
				r->pending--;
				if (tx->off == 0)
					db_rec_put(r);
				else
					dc->cur = r;
				return; /* -ENOBUFS: cbs.sent re-queues us; other errors end in closed */
			}
			tx->off += len;
		}
		r->queued = true;
		dc->cur = NULL;
		if (r->pending == 0)
			db_rec_finish(r);
	}
	db_arena_push(dc, now);
}

/*
 * Hands the connection's queued messages to the core, piece by piece, until it is full.
 * The core is corked meanwhile, so a header and its body leave in full segments rather
 * than one segment per piece.
 */
static void db_flush(struct tl_conn *c)
{
	struct db *d = db_of(c->tl);
	struct db_conn *dc = tl_conn_priv(c);
	struct tl_tcp_conn *tc = dc->tc;
	uint64_t now = db_now(d);
	struct tl_link copied;

	if (tc == NULL)
		return;
	tl_list_init(&copied);
	tl_tcp_cork(tc, true, now);
	db_queue(d, c, dc, now, &copied);
	tl_tcp_cork(tc, false, now);
	/* Copied messages are done with the caller's memory: complete them (their callbacks
	 * may send again, which only queues). */
	while (!tl_list_empty(&copied))
		tl_up_tx_done(c, tl_container_of(copied.next, struct tl_tx, link), 0);
}

/* ---- TCP callbacks ------------------------------------------------------------------- */

static void db_recv(void *arg, struct tl_tcp_conn *tc, const uint8_t *data, uint32_t len, void *pkt)
{
	struct tl_conn *c = arg;
	struct db *d = db_of(c->tl);

	if (data == NULL) {
		tl_up_eof(c);
		return;
	}
	/*
	 * The framer holds the mbufs of what it keeps; the window reopens at once and
	 * memory is bounded by the framer's limits (max_held_msgs, max_msg_segs) instead.
	 */
	int rc = tl_up_input(c, data, len, pkt);
	if (rc < 0 && c->state != TL_CS_OPEN)
		return;
	/*
	 * Who waits: a connection its receiver paused (tl_conn_rx_pause); then the connections
	 * whose own replies are backed up (a peer that does not read what we send it must not go
	 * on filling our memory); everyone once the pool is nearly empty.
	 */
	if (c->rx_paused || d->pool_critical ||
	    (d->pool_low && c->tx_bytes >= DB_BACKED_UP_BYTES)) {
		struct db_conn *dc = tl_conn_priv(c);
		d->withholding += dc->withheld == 0;
		dc->withheld += len;
		return;
	}
	tl_tcp_recved(tc, len, db_now(d));
}

/* Gives c's withheld bytes back to its window. */
static void db_reopen(struct db *d, struct tl_conn *c)
{
	struct db_conn *dc = tl_conn_priv(c);

	if (dc->withheld == 0)
		return;
	if (dc->tc != NULL)
		tl_tcp_recved(dc->tc, dc->withheld, db_now(d));
	dc->withheld = 0;
	d->withholding--;
}

/* Resumed by the receiver: the window reopens unless the mempool still holds it shut. */
static void db_rx_pause(struct tl_conn *c)
{
	struct db *d = db_of(c->tl);

	if (!c->rx_paused && !d->pool_low)
		db_reopen(d, c);
}

/* Rechecks the mempool at most every 100 us; reopens withheld windows once it recovered. */
static void db_pool_watch(struct db *d, uint64_t now_tsc)
{
	unsigned avail, size;

	if (now_tsc < d->next_pool_check)
		return;
	d->next_pool_check = now_tsc + d->hz / 10000;
	avail = rte_mempool_avail_count(d->hdr_pool);
	size = d->hdr_pool->size;
	if (!d->pool_low && avail < size / 4)
		d->pool_low = true;
	else if (d->pool_low && avail > size / 2)
		d->pool_low = false;
	d->pool_critical = avail < size / 8;
	d->pool_severe = avail < size / 32;
	d->n_hogs = 0;
	for (struct tl_link *e = d->tl->conns.next; d->pool_critical && e != &d->tl->conns &&
	     d->n_hogs < DB_MAX_HOGS; e = e->next) {
		struct tl_conn *c = tl_container_of(e, struct tl_conn, link);
		struct db_conn *dc = tl_conn_priv(c);

		if (dc->tc != NULL && c->tx_bytes >= DB_BACKED_UP_BYTES)
			tl_tcp_conn_tuple(dc->tc, &d->hogs[d->n_hogs++]);
	}
	if (d->pool_low || d->withholding == 0)
		return;
	for (struct tl_link *e = d->tl->conns.next; e != &d->tl->conns; e = e->next) {
		struct tl_conn *c = tl_container_of(e, struct tl_conn, link);

		if (!c->rx_paused) /* a paused one's window waits for its receiver */
			db_reopen(d, c);
	}
}

static void db_sent(void *arg, struct tl_tcp_conn *tc, uint32_t acked)
{
	struct tl_conn *c = arg;
	struct db_arena *a = ((struct db_conn *)tl_conn_priv(c))->arena;

	(void)tc;
	(void)acked;
	/* Resume what the core refused: queued messages, or arena bytes not yet handed over
	 * (copied messages are complete and off the queue, so the queue alone can be empty). */
	if (!tl_list_empty(&c->txq) || (a != NULL && a->pushed < a->used))
		tl_conn_mark_dirty(c);
}

static const char *db_reason_text(int reason)
{
	switch (reason) {
	case -ECONNRESET: return "reset by peer";
	case -ETIMEDOUT: return "retransmission limit reached";
	case -ECONNREFUSED: return "connection refused";
	case 0: return "closed by peer";
	default: return "connection aborted";
	}
}

static void db_closed(void *arg, struct tl_tcp_conn *tc, int reason)
{
	struct tl_conn *c = arg;
	struct db_conn *dc = tl_conn_priv(c);

	(void)tc;
	dc->tc = NULL;
	if (c->state == TL_CS_CONNECTING)
		tl_up_connected(c, reason != 0 ? reason : -ECONNRESET);
	else if (reason == 0)
		tl_up_eof(c);
	else
		tl_up_fail(c, reason, db_reason_text(reason));
}

static void db_connected(void *arg, struct tl_tcp_conn *tc)
{
	(void)tc;
	tl_up_connected(arg, 0);
}

static const struct tl_tcp_cbs db_conn_cbs = {
	.connected = db_connected, .recv = db_recv, .sent = db_sent, .closed = db_closed,
};

/*
 * A completed passive open. Refused (the peer gets a RST) at max_conns, and while the
 * mempool is critically low (below an eighth free, see db_pool_watch): every mbuf then
 * serves the connections that exist, and a newcomer would only take more of what they need.
 */
static int db_accept(void *arg, struct tl_tcp_conn *tc)
{
	struct tl_listener *l = arg;
	struct tl *tl = l->tl;
	struct db *d = db_of(tl);
	struct tl_conn *c;
	struct db_conn *dc;

	if (d->pool_critical) {
		tl->st.refused_conns_nomem++;
		return -ENOBUFS;
	}
	c = tl_up_new(tl, l->ops, l->ctx); /* NULL at max_conns, as in the kernel backend */
	if (c == NULL) {
		tl->st.refused_conns++;
		return -EMFILE;
	}
	dc = tl_conn_priv(c);
	dc->tc = tc;
	dc->cur = NULL;
	dc->arena = NULL;
	tl_tcp_conn_set_cbs(tc, &db_conn_cbs, c);
	tl_up_accepted(l, c);
	return 0;
}

static const struct tl_tcp_cbs db_listen_cbs = { .accept = db_accept };

/* ---- backend operations -------------------------------------------------------------- */

static int db_listen(struct tl_listener *l, uint32_t ip, uint16_t port)
{
	struct db *d = db_of(l->tl);
	struct db_listener *dl = tl_listener_priv(l);

	int rc;

	if (port == 0)
		return -EINVAL; /* TCP-lite has no ephemeral listening ports */
	l->port = port;
	rc = tl_tcp_listen(d->stack, ip, port, 0, &db_listen_cbs, l, &dl->tl);
	/* Software steering: connections to this port are ours (shared if others listen too). */
	if (rc == 0 && d->nl > 1)
		(void)dn_steer_claim(dn_lcore_port(d->lc), port, d->idx);
	return rc;
}

static void db_unlisten(struct tl_listener *l)
{
	struct db_listener *dl = tl_listener_priv(l);
	struct db *d = db_of(l->tl);

	if (d->nl > 1)
		dn_steer_unclaim(dn_lcore_port(d->lc), l->port, d->idx);
	tl_tcp_unlisten(dl->tl);
	dl->tl = NULL;
}

static void db_wake(struct tl *tl)
{
	dn_lcore_wake(db_of(tl)->lc);
}

/*
 * What a local port must give an active open to (raddr, rport): replies (the peer's frames
 * to us) on our own queue where our port hashes (key), and the frames we send on the peer's
 * queue `peer->queue` where it said it hashes (tl_peer_rss; dn's key, a table round robin
 * over its queues). need_own and need_peer say which of the two the port must meet.
 */
struct db_rss_want {
	const uint8_t *key;
	const uint16_t *reta;
	const struct tl *tl;
	const struct tl_peer_rss *peer;
	uint32_t reta_size, laddr, raddr;
	uint16_t rport, queue;
	bool need_own, need_peer;
};

static bool db_rss_elsewhere(void *arg, uint16_t lport)
{
	const struct db_rss_want *w = arg;

	if (w->need_own && tl_steer_queue(w->key, w->reta, w->reta_size, w->raddr, w->laddr,
					  w->rport, lport) != w->queue)
		return true;
	return w->need_peer && !tl_peer_rss_lands(w->tl, w->peer, w->laddr, lport);
}

/*
 * Active open under flow steering, or to a peer that hashes (tl_peer_rss): a local port
 * from our slice of the ephemeral range, so the classifier steers the replies to us; where
 * our port hashes (a queue per lcore) and where the peer does, one both hashes put on the
 * right queue, else one the peer's does, else one ours does, else any of the slice. A port
 * our stack still uses for this peer (-EADDRINUSE) sends us on to the next one.
 */
static int db_connect_steered(struct db *d, struct tl_conn *c, struct tl_tcp_tuple *t)
{
	struct db_conn *dc = tl_conn_priv(c);
	struct dn_port *port = dn_lcore_port(d->lc);
	struct db_rss_want w = {.laddr = t->laddr, .raddr = t->raddr, .rport = t->rport,
				.queue = dn_lcore_queue(d->lc), .tl = c->tl,
				.peer = tl_peer_rss_find(c->tl, t->raddr, t->rport)};
	/* Both, the peer's, ours, neither: the first the slice has a free port for. */
	static const bool needs[4][2] = {{true, true}, {false, true}, {true, false}, {false, false}};
	uint32_t key_len = 0, nl = d->nl > 1 ? d->nl : 1, idx = d->nl > 1 ? d->idx : 0;
	int rc = -EADDRNOTAVAIL;

	w.key = dn_port_rss_key(port, &key_len);
	w.reta = dn_port_reta(port, &w.reta_size);
	if (dn_port_nb_queues(port) <= 1 || key_len < 40 || w.reta == NULL)
		w.key = NULL;
	for (int i = 0; i < DB_PICK_TRIES; i++) {
		rc = -EADDRNOTAVAIL;
		for (int k = 0; k < 4 && rc == -EADDRNOTAVAIL; k++) {
			w.need_own = needs[k][0];
			w.need_peer = needs[k][1];
			if ((w.need_own && w.key == NULL) || (w.need_peer && w.peer == NULL))
				continue;
			rc = tl_steer_sw_pick_port(idx, nl, DB_PORT_LO, DB_PORT_HI, d->next_port,
						   w.need_own || w.need_peer ? db_rss_elsewhere : NULL,
						   &w, &t->lport);
		}
		if (rc != 0)
			return rc;
		d->next_port = t->lport == DB_PORT_HI ? DB_PORT_LO : (uint16_t)(t->lport + 1u);
		rc = tl_tcp_connect(d->stack, t, &db_conn_cbs, c, db_now(d), &dc->tc);
		if (rc != -EADDRINUSE)
			return rc;
	}
	return rc;
}

/* tl_rss_layout: dn's RSS (its key, a table round robin over the queues), a queue each. */
static int db_rss_layout(struct tl *tl, uint32_t *reta_size, uint16_t *queues, uint16_t *queue)
{
	struct db *d = db_of(tl);
	struct dn_port *port = dn_lcore_port(d->lc);
	uint8_t want[40];
	const uint8_t *key;
	const uint16_t *reta;
	uint32_t key_len = 0, n = 0;
	uint16_t nq = dn_port_nb_queues(port);

	key = dn_port_rss_key(port, &key_len);
	reta = dn_port_reta(port, &n);
	dn_rss_key_fill(want, sizeof(want));
	if (nq <= 1 || key == NULL || key_len < 40 || memcmp(key, want, 40) != 0 || reta == NULL)
		return -ENOTSUP;
	for (uint32_t i = 0; i < n; i++)
		if (reta[i] != i % nq)
			return -ENOTSUP;
	*reta_size = n;
	*queues = nq;
	*queue = dn_lcore_queue(d->lc);
	return 0;
}

static int db_connect(struct tl_conn *c, uint32_t ip, uint16_t port)
{
	struct db *d = db_of(c->tl);
	struct db_conn *dc = tl_conn_priv(c);
	struct tl_tcp_tuple t = {.laddr = d->ip, .raddr = ip, .rport = port};

	dc->cur = NULL;
	dc->arena = NULL;
	if (d->nl > 1 || tl_peer_rss_find(c->tl, ip, port) != NULL)
		return db_connect_steered(d, c, &t);
	return tl_tcp_connect(d->stack, &t, &db_conn_cbs, c, db_now(d), &dc->tc);
}

/* WHARF_TL_STATS=1: a connection's TCP state as it ends, before its FIN or RST (debugging aid). */
static void db_dump_conn(const struct tl_tcp_conn *tc)
{
	struct tl_tcp_conn_stats s;
	const char *e = getenv("WHARF_TL_STATS");

	if (e == NULL || *e != '1')
		return;
	tl_tcp_conn_get_stats(tc, &s);
	TL_LOG(INFO, "tl_conn: seg in/out %lu/%lu acked %lu rcvd %lu retrans %lu srtt %u us "
	       "rttvar %u rto %u cwnd %u ssthresh %u snd_wnd %u rcv_wnd %u rewound %u state %u",
	       s.seg_in, s.seg_out, s.bytes_acked, s.bytes_rcvd, s.retrans, s.srtt_us, s.rttvar_us,
	       s.rto_us, s.cwnd, s.ssthresh, s.snd_wnd, s.rcv_wnd, s.snd_rewound, s.state);
}

/*
 * A core connection that outlived its tl_conn (graceful close): whatever still arrives is
 * read and dropped so that the window stays open and the peer can finish; the core ends
 * it (FIN exchange, TIME_WAIT, or its limits) on its own.
 */
static void db_orphan_recv(void *arg, struct tl_tcp_conn *tc, const uint8_t *data, uint32_t len,
			   void *pkt)
{
	(void)data;
	(void)pkt;
	tl_tcp_recved(tc, len, db_now(arg));
}

static const struct tl_tcp_cbs db_orphan_cbs = { .recv = db_orphan_recv };

/* Messages of c that still have pieces in the core or the PMD complete without c. */
static void db_orphan_recs(struct db *d, struct tl_conn *c)
{
	for (uint32_t i = 0; i < d->nrecs; i++) {
		struct db_txrec *r = &d->recs[i];
		if (r->c != c)
			continue;
		r->c = NULL;
		r->queued = true;
		if (r->pending == 0)
			db_rec_put(r);
	}
}

static void db_shutdown(struct tl_conn *c)
{
	struct db *d = db_of(c->tl);
	struct db_conn *dc = tl_conn_priv(c);
	bool graceful = c->graceful && !c->abort && !c->tl->destroying && dc->tc != NULL;

	db_orphan_recs(d, c);
	dc->cur = NULL;
	if (dc->tc != NULL) {
		struct tl_tcp_conn *tc = dc->tc;
		db_dump_conn(tc);
		dc->tc = NULL;
		if (dc->withheld != 0) {
			d->withholding--;
			dc->withheld = 0;
		}
		tl_tcp_conn_set_cbs(tc, &db_orphan_cbs, d);
		/* The caller's memory is released with the completions tl_api runs next: the
		 * core keeps sending from copies of its own (or, without memory for them, resets). */
		if (graceful && tl_tcp_conn_own_payload(tc) == 0) {
			tl_tcp_cork(tc, false, db_now(d));
			if (tl_tcp_close(tc, db_now(d)) != 0)
				tl_tcp_abort(tc);
		} else {
			tl_tcp_abort(tc);
		}
	}
	if (dc->arena != NULL) { /* its pieces in the core hold their own references */
		db_arena_unref(dc->arena);
		dc->arena = NULL;
	}
}

/* tl_conn_push: what the flush put on the lcore's software Tx queue goes to the device. */
static void db_kick(struct tl *tl)
{
	dn_tx_flush(db_of(tl)->lc);
}

static int db_poll(struct tl *tl, int64_t timeout_us)
{
	struct db *d = db_of(tl);
	uint64_t now = rte_rdtsc(), start = now; /* one clock read a round */
	uint64_t limit = timeout_us < 0 ? UINT64_MAX : (uint64_t)timeout_us * (d->hz / 1000000);

	d->poll_until = limit == UINT64_MAX || start + limit < start ? UINT64_MAX : start + limit;
	for (;;) {
		d->work = 0;
		unsigned n = dn_loop_once(d->lc, now);
		if (n + d->work > 0 || timeout_us == 0)
			return (int)(n + d->work);
		/* tl_wake: the caller has work of its own to pick up; its sleep ends here. */
		if (dn_lcore_take_wake(d->lc) || (now = rte_rdtsc()) - start >= limit)
			return 0;
		dn_lcore_idle_wait(d->lc);
		now = rte_rdtsc();
	}
}

static int db_standalone(struct db *d, const struct tl_config *cfg)
{
	char err[256];
	struct dn_config dc = {.port_id = DN_PORT_AUTO, .ip = cfg->local_ip,
			       .prefix_len = cfg->local_prefix, .gateway = cfg->local_gateway,
			       .idle = DN_IDLE_SLEEP, .mtu = cfg->mtu, .nb_mbufs = cfg->nb_mbufs,
			       .nb_queues = DN_QUEUES_PER_LCORE}; /* one lcore: one queue */
	int rc;

	if (cfg->eal_argc > 0) {
		rc = dn_eal_init(cfg->eal_argc, cfg->eal_argv, err, sizeof(err));
		if (rc < 0) {
			TL_LOG(ERR, "transport: EAL: %s", err);
			return rc;
		}
		d->own_eal = true;
	}
	rc = dn_port_create(&dc, &d->port, err, sizeof(err));
	if (rc != 0) {
		TL_LOG(ERR, "transport: port: %s", err);
		return rc;
	}
	rc = dn_lcore_create(d->port, 0, NULL, &d->lc);
	if (rc != 0)
		return rc;
	/* A standalone instance owns its EAL: expose it to dpdk-telemetry.py and dpdk-dumpcap. */
	if (d->own_eal) {
		dn_obs_init();
		dn_obs_register(d->lc);
	}
	dn_arp_announce(d->lc);
	return 0;
}

/*
 * TCP-lite knobs from the environment (documented in the README): WHARF_TCP_RTO_MIN_US,
 * the retransmission timeout floor (default 1000: a datacenter RTT is tens of microseconds;
 * a shared or oversubscribed host, where a peer can be descheduled for milliseconds, wants
 * more to avoid spurious timeouts).
 */
static void db_cfg_env(struct tl_tcp_cfg *tc)
{
	unsigned x;

	/* Read in their ranges (tl_env_knobs): tl_config_check refused any other value. */
	/* WHARF_TCP_SACK=0: neither offer nor accept SACK (for comparisons and peers' bugs). */
	if (tl_env_get("WHARF_TCP_SACK", &x) && x == 0)
		tc->sack = false;
	/* WHARF_TCP_ECN=0: neither offer nor accept ECN, so no DCTCP reaction (comparisons). */
	if (tl_env_get("WHARF_TCP_ECN", &x) && x == 0)
		tc->ecn = false;
	/* WHARF_TCP_SYNCOOKIES=0: drop SYNs over the backlog instead (for comparisons). */
	if (tl_env_get("WHARF_TCP_SYNCOOKIES", &x) && x == 0)
		tc->syncookies = false;
	/* WHARF_TCP_KEEPALIVE_S=n: probe a connection quiet for n seconds (off by default). */
	if (tl_env_get("WHARF_TCP_KEEPALIVE_S", &x))
		tc->keepalive_ns = (uint64_t)x * 1000000000ull;
	if (tl_env_get("WHARF_TCP_RTO_MIN_US", &x)) {
		tc->rto_min_ns = (uint64_t)x * 1000u;
		if (tc->rto_init_ns < tc->rto_min_ns)
			tc->rto_init_ns = tc->rto_min_ns;
		if (tc->rto_max_ns < tc->rto_min_ns)
			tc->rto_max_ns = tc->rto_min_ns;
	}
}

/* Our place among the lcores sharing the port; the completion ring when not lcore 0. */
static int db_steer_init(struct db *d)
{
	struct dn_port *port = dn_lcore_port(d->lc);
	char name[RTE_RING_NAMESIZE];

	d->idx = dn_lcore_index(d->lc);
	d->nl = dn_port_sw_steer(port) ? dn_port_nb_lcores(port) : 1;
	d->lcore_id = rte_lcore_id();
	d->next_port = DB_PORT_LO;
	if (d->nl <= 1 || d->idx == 0)
		return 0;
	snprintf(name, sizeof(name), "tlsb_%p", (void *)d);
	d->sb_ring = rte_ring_create(name, DB_SB_RING, (int)rte_socket_id(), RING_F_SC_DEQ);
	return d->sb_ring != NULL ? 0 : -ENOMEM;
}

/*
 * Teardown: the PMD may still hold frames of ours (lazily freed in its Tx ring; under
 * software steering also in the ring to lcore 0) whose payload is our send buffers. Wait,
 * bounded, until every attached mbuf came back. True when they did; false means they are
 * still out there and the stack and rings must stay allocated (their release would touch
 * freed memory).
 */
static bool db_fini_wait(struct db *d)
{
	uint64_t start = rte_rdtsc(), per_us = d->hz / 1000000;
	uint64_t end = start + per_us * DB_FINI_WAIT_US, stop_at = start + per_us * DB_FINI_WAIT_US / 4;
	bool stopped = false;

	if (d->ext_pool == NULL)
		return true;
	for (;;) {
		/*
		 * virtio frees sent mbufs lazily: ask for them (and their payload) now. Only the
		 * lcore that owns the device queue (lcore 0 under software steering) reclaims,
		 * and nobody touches the port once it is stopped.
		 */
		if (d->lc != NULL && !stopped) {
			dn_tx_flush(d->lc);
			if (d->idx == 0)
				dn_tx_reclaim(d->lc, rte_rdtsc());
		}
		db_sb_drain(d);
		if (rte_mempool_full(d->ext_pool) && (d->sb_ring == NULL || rte_ring_empty(d->sb_ring)))
			return true;
		/*
		 * A standalone instance owns its port: once the peer had a moment to take the
		 * last frames, stopping the device makes the PMD free every mbuf it holds, sent
		 * or not, while the stack they point into still exists.
		 */
		if (d->port != NULL && !stopped && rte_rdtsc() > stop_at) {
			dn_port_stop(d->port);
			stopped = true;
		}
		if (rte_rdtsc() > end)
			return false;
		rte_delay_us_sleep(100);
	}
}

static struct tl_tcp_conn *db_conn_tcp(struct tl_conn *c)
{
	return ((struct db_conn *)tl_conn_priv(c))->tc;
}

static int db_init(struct tl *tl)
{
	struct db *d = calloc(1, sizeof(*d));
	struct tl_tcp_cfg tc;
	struct tl_tcp_ops ops = {db_emit, db_pkt_hold, db_pkt_release, NULL};
	char name[RTE_MEMPOOL_NAMESIZE];
	int rc;

	if (d == NULL)
		return -ENOMEM;
	tl->be = d;
	d->tl = tl;
	rc = tl->cfg.backend_arg != NULL ? 0 : db_standalone(d, &tl->cfg);
	if (rc != 0)
		return rc;
	d->hz = rte_get_tsc_hz(); /* EAL is up only now in standalone mode */
	d->ns_mult = (uint64_t)(((unsigned __int128)1000000000u << 32) / d->hz);
	if (d->lc == NULL)
		d->lc = tl->cfg.backend_arg;
	d->ip = dn_port_ip(dn_lcore_port(d->lc));
	d->hdr_pool = dn_lcore_pool(d->lc);
	rc = db_steer_init(d);
	if (rc != 0)
		return rc;
	snprintf(name, sizeof(name), "tlx_%p", (void *)d);
	d->ext_pool = rte_pktmbuf_pool_create(name, DB_EXT_MBUFS, 256,
					      RTE_ALIGN(sizeof(struct db_ext), 8),
					      0, (int)rte_socket_id());
	if (d->ext_pool == NULL)
		return -ENOMEM;
	tl_tcp_cfg_default(&tc);
	/*
	 * 2 MiB of receive window: a receiver holding one 1 MiB message while it handles it
	 * still lets the next one stream in. With 1 MiB, a PS took 1 MiB pushes 8 in flight at
	 * 22.7 Gbit/s on the direct pair and with 2 MiB at 27.7 (4 MiB gave no more; the
	 * kernel's autotuned window, 28.2; on a host with both vCPUs in one L3 complex, 4 MiB
	 * gave 1 MiB pushes 6% more and push-pulls 15% less). It covers a 10 Gbit/s path up to
	 * ~1.6 ms of RTT, and every segment of it can wait out of order (a loss must not also
	 * overflow the out-of-order queue and turn into a go-back-N). Received data sits in
	 * mbufs, so this also bounds what one connection holds of the mempool.
	 */
	tc.mss = (uint16_t)(dn_port_mtu(dn_lcore_port(d->lc)) - 40u);
	tc.rcv_buf = 2u << 20;
	tc.ooo_max = tc.rcv_buf / (tc.mss - 12u) + 1u;
	/* The device cuts segments (virtio-user TSO): new data leaves in frames of up to 64 KiB,
	 * as over the kernel's loopback, and arrives as one LRO frame (db_input_chain). */
	tc.tso_max = d->tso_max = dn_port_tso_max(dn_lcore_port(d->lc));
	db_cfg_env(&tc);
	tc.max_conns = tl->cfg.max_conns * 2 + 16; /* TIME_WAIT and embryonic ones too */
	tc.iss_secret = rte_rand();
	d->nrecs = tc.max_sbufs;
	d->conn_pieces_max = tc.max_sbufs / 8;
	d->recs = calloc(d->nrecs, sizeof(*d->recs));
	if (d->recs == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->nrecs; i++) {
		d->recs[i].d = d;
		db_rec_put(&d->recs[i]);
	}
	rc = tl_tcp_stack_create(&tc, &ops, d, db_now(d), &d->stack);
	if (rc != 0)
		return rc;
	tl->chunk_ops = &db_chunk_ops;
	if (tl_obs_create(tl, d->stack, db_conn_tcp, &d->obs) != 0)
		d->obs = NULL; /* more instances than telemetry slots: counters stay reachable by dump */
	d->poll_until = UINT64_MAX;
	dn_lcore_set_hooks(d->lc, &(struct dn_hooks){.l4_input = db_l4_input, .poll = db_timers,
						     .due = db_due,
						     .steer = d->nl > 1 && (d->idx == 0 ||
							     dn_port_nb_queues(dn_lcore_port(d->lc)) > 1)
							     ? db_steer : NULL,
						     .arg = d});
	return 0;
}

/* WHARF_TL_STATS=1 logs the TCP-lite counters at teardown (debugging aid). */
static void db_dump_stats(const struct db *d)
{
	struct tl_tcp_stats s;
	const char *e = getenv("WHARF_TL_STATS");
	char drops[512];
	size_t n = 0;

	if (e == NULL || *e != '1' || d->stack == NULL)
		return;
	tl_tcp_stack_get_stats(d->stack, &s);
	TL_LOG(INFO, "tl_tcp: seg in/out %lu/%lu bytes in/out %lu/%lu retrans %lu fast %lu rto %lu "
	       "spurious %lu probes %lu ooo %lu dup_segs %lu dup_acks %lu sack_rexmits %lu "
	       "challenge_acks %lu rst_in %lu rst_out %lu ce_marks %lu ecn_cuts %lu drops: "
	       "malformed %lu no_conn %lu window %lu bad_ack %lu backlog %lu ooo_full %lu emit %lu",
	       s.seg_in, s.seg_out, s.bytes_in, s.bytes_out, s.retrans, s.fast_retrans, s.rto_fired,
	       s.spurious_rto, s.probes, s.ooo_queued, s.dup_segs, s.dup_acks, s.sack_rexmits,
	       s.challenge_acks, s.rst_in, s.rst_out, s.ce_marks, s.ecn_cuts, s.drop_malformed,
	       s.drop_no_conn, s.drop_window, s.drop_bad_ack, s.drop_backlog, s.drop_ooo_full,
	       s.drop_emit);
	TL_LOG(INFO, "tl: refused_conns %" PRIu64 " refused_conns_nomem %" PRIu64
	       " rx_dropped_nomem %" PRIu64 " refused_streams %" PRIu64 " rejected %" PRIu64
	       " copied_msgs %" PRIu64,
	       d->tl->st.refused_conns, d->tl->st.refused_conns_nomem, d->tl->st.rx_dropped_nomem,
	       d->tl->st.refused_streams, d->tl->st.rejected, d->arena_msgs);
	const struct dn_stats *ds = dn_lcore_stats(d->lc);
	drops[0] = '\0';
	for (int i = 0; i < DN_DROP_MAX && n < sizeof(drops); i++)
		if (ds->drops[i])
			n += (size_t)snprintf(drops + n, sizeof(drops) - n, " %s=%lu",
					      dn_drop_name(i), ds->drops[i]);
	TL_LOG(INFO, "dn: rx %lu tx %lu sleeps %lu intr_wakeups %lu intr_timeouts %lu intr_late %lu "
	       "timed_sleeps %lu spin_caught %lu spin_expired %lu%s", ds->rx_pkts, ds->tx_pkts,
	       ds->idle_sleeps, ds->intr_wakeups, ds->intr_timeouts, ds->intr_late, ds->timed_sleeps,
	       dn_lcore_spin(d->lc)->caught,
	       dn_lcore_spin(d->lc)->expired, drops);
}

static void db_fini(struct tl *tl)
{
	struct db *d = db_of(tl);

	if (d == NULL)
		return;
	db_dump_stats(d);
	tl_obs_destroy(d->obs);
	if (d->lc != NULL)
		dn_lcore_set_hooks(d->lc, &(struct dn_hooks){0});
	if (!db_fini_wait(d)) {
		/* Leaked on purpose: the PMD still points at our buffers (it frees lazily). */
		TL_LOG(WARNING, "transport: lcore %u: %u attached mbufs still out at teardown; "
		       "their stack stays allocated", d->idx,
		       DB_EXT_MBUFS - rte_mempool_avail_count(d->ext_pool));
		tl->be = NULL;
		return;
	}
	rte_ring_free(d->sb_ring);
	tl_tcp_stack_destroy(d->stack);
	if (d->lc != NULL)
		dn_tx_flush(d->lc);
	if (d->port != NULL) {
		dn_lcore_destroy(d->lc);
		dn_port_destroy(d->port);
	}
	rte_mempool_free(d->ext_pool);
	free(d->recs);
	while (d->arena_all != NULL) { /* the stack is gone: nothing references them */
		struct db_arena *a = d->arena_all;
		d->arena_all = a->next_all;
		if (a->rte)
			rte_free(a);
		else
			free(a);
	}
	if (d->own_eal)
		dn_eal_fini();
	free(d);
	tl->be = NULL;
}

static void *db_buf_alloc(struct tl *tl, size_t size)
{
	(void)tl;
	return rte_malloc_socket("tl_buf", size ? size : 1, 64, (int)rte_socket_id());
}

static void db_buf_free(struct tl *tl, void *p)
{
	(void)tl;
	rte_free(p);
}

const struct tl_backend_ops tl_be_dpdk_ops = {
	.name = "dpdk",
	.conn_priv = sizeof(struct db_conn),
	.listener_priv = sizeof(struct db_listener),
	.init = db_init,
	.fini = db_fini,
	.listen = db_listen,
	.unlisten = db_unlisten,
	.connect = db_connect,
	.flush = db_flush,
	.shutdown = db_shutdown,
	.poll = db_poll,
	.kick = db_kick,
	.wake = db_wake,
	.send_copy = db_send_copy,
	.rx_pause = db_rx_pause,
	.buf_alloc = db_buf_alloc,
	.buf_free = db_buf_free,
	.rss_layout = db_rss_layout,
};
