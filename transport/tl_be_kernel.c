/*
 * tl_be_kernel.c — protocol=kernel: the transport backend on Linux TCP sockets + epoll.
 *
 * Call chain:  tl_poll (tl_api.c) -> kb_poll -> epoll_wait -> kb_accept | kb_conn_event
 *   -> kb_read -> read() into a pooled receive buffer -> tl_up_input -> framer -> app
 *   tl_poll -> kb_flush -> sendmsg(header + caller iov, no copy in user space) -> done
 *
 * The reference the DPDK backend is measured against, and the fallback where there is
 * no DPDK port. Sockets are nonblocking with TCP_NODELAY (messages are latency-bound;
 * batching is done by queuing several messages into one sendmsg instead). Receive
 * buffers are refcounted: a message views bytes straight in the buffer it was read
 * into, and the buffer returns to the pool when the last message over it is released.
 * Reads append into the current buffer while someone still refers to it, and restart
 * at its beginning when nobody does, so a ping-pong stream keeps one cache-hot buffer.
 * Epoll is level-triggered: a read that did not fill the buffer means the socket is
 * drained; a partial write arms EPOLLOUT until the queue is empty.
 */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "dpdk_net/dn.h"
#include "transport/tl_pvt.h"

#define KB_EVENTS 64
#define KB_READS_PER_EVENT 16
#define KB_ACCEPTS_PER_EVENT 32
#define KB_IOV 64
#define KB_SENDS_PER_FLUSH 32

enum kb_kind { KB_LISTENER, KB_CONN, KB_WAKE };

struct kb;

struct kb_buf {
	struct kb *kb;
	struct kb_buf *next;  /* free list */
	struct kb_buf *all;   /* every buffer, for fini */
	uint32_t refcnt;
	uint8_t data[];
};

/* Every endpoint (and the wake-up eventfd) starts with this: an epoll event leads back to it. */
struct kb_ep {
	enum kb_kind kind;
	int fd;
};

struct kb {
	int epfd;
	struct kb_ep wake_ep;    /* eventfd in the epoll set: tl_wake from another thread */
	uint32_t nbufs;
	struct kb_buf *free, *all;
	struct epoll_event ev[KB_EVENTS];
	struct dn_spin spin;     /* a sleep's adaptive spin after work (ns), as dpdk_net's */
};


struct kb_conn {
	struct kb_ep ep;
	struct kb_buf *cur;   /* buffer reads go into; one reference of ours */
	uint32_t fill;
	bool want_out;
};

static void kb_buf_hold(void *ref)
{
	((struct kb_buf *)ref)->refcnt++;
}

static void kb_buf_release(void *ref)
{
	struct kb_buf *b = ref;

	if (--b->refcnt == 0) {
		b->next = b->kb->free;
		b->kb->free = b;
	}
}

static const struct tl_chunk_ops kb_chunk_ops = { kb_buf_hold, kb_buf_release };

static struct kb_buf *kb_buf_get(struct tl *tl)
{
	struct kb *kb = tl->be;
	struct kb_buf *b = kb->free;

	if (b != NULL) {
		kb->free = b->next;
	} else {
		/* Grows on first need up to rx_max_bufs, recycled after. */
		if (kb->nbufs >= tl->cfg.rx_max_bufs)
			return NULL;
		b = malloc(sizeof(*b) + tl->cfg.rx_buf_size);
		if (b == NULL)
			return NULL;
		b->kb = kb;
		b->all = kb->all;
		kb->all = b;
		kb->nbufs++;
	}
	b->refcnt = 1;
	b->next = NULL;
	return b;
}

static int kb_init(struct tl *tl)
{
	struct kb *kb = calloc(1, sizeof(*kb));

	if (kb == NULL)
		return -ENOMEM;
	kb->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (kb->epfd < 0) {
		int rc = -errno;
		free(kb);
		return rc;
	}
	dn_spin_init(&kb->spin, dn_idle_spin_env_us(), 1000);
	kb->wake_ep.kind = KB_WAKE;
	kb->wake_ep.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (kb->wake_ep.fd < 0 || epoll_ctl(kb->epfd, EPOLL_CTL_ADD, kb->wake_ep.fd,
					    &(struct epoll_event){ .events = EPOLLIN,
								   .data.ptr = &kb->wake_ep }) < 0) {
		int rc = -errno;
		if (kb->wake_ep.fd >= 0)
			close(kb->wake_ep.fd);
		close(kb->epfd);
		free(kb);
		return rc;
	}
	tl->be = kb;
	tl->chunk_ops = &kb_chunk_ops;
	return 0;
}

static void kb_fini(struct tl *tl)
{
	struct kb *kb = tl->be;
	struct kb_buf *b, *next;

	for (b = kb->all; b != NULL; b = next) {
		next = b->all;
		free(b);
	}
	close(kb->wake_ep.fd);
	close(kb->epfd);
	free(kb);
	tl->be = NULL;
}

static void kb_wake(struct tl *tl)
{
	struct kb *kb = tl->be;
	uint64_t one = 1;

	/* A full counter (EAGAIN) means a wake-up is already pending: nothing lost. */
	(void)!write(kb->wake_ep.fd, &one, sizeof(one));
}

static int kb_ctl(struct tl *tl, int op, struct kb_ep *ep, uint32_t events)
{
	struct kb *kb = tl->be;
	struct epoll_event ev = { .events = events, .data.ptr = ep };

	return epoll_ctl(kb->epfd, op, ep->fd, &ev) == 0 ? 0 : -errno;
}

static void kb_addr(struct sockaddr_in *sa, uint32_t ip, uint16_t port)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(ip);
	sa->sin_port = htons(port);
}

static int kb_socket(void)
{
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	/* Messages are latency-bound; batching happens by queuing into one sendmsg. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int kb_listen(struct tl_listener *l, uint32_t ip, uint16_t port)
{
	struct kb_ep *ep = tl_listener_priv(l);
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int one = 1, rc;

	ep->kind = KB_LISTENER;
	ep->fd = kb_socket();
	if (ep->fd < 0)
		return ep->fd;
	setsockopt(ep->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	kb_addr(&sa, ip, port);
	if (bind(ep->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(ep->fd, 1024) != 0 ||
	    getsockname(ep->fd, (struct sockaddr *)&sa, &sl) != 0) {
		rc = -errno;
		goto out_close;
	}
	l->port = ntohs(sa.sin_port);
	rc = kb_ctl(l->tl, EPOLL_CTL_ADD, ep, EPOLLIN);
	if (rc != 0)
		goto out_close;
	return 0;
out_close:
	close(ep->fd);
	ep->fd = -1;
	return rc;
}

static void kb_unlisten(struct tl_listener *l)
{
	struct kb_ep *ep = tl_listener_priv(l);

	close(ep->fd); /* also leaves the epoll set: the fd is not shared */
	ep->fd = -1;
}

/* The kernel's ephemeral range, and whether port p is one of its reserved ports. */
static void kb_port_range(uint32_t *lo, uint32_t *hi)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	*lo = 32768;
	*hi = 60999;
	if (f != NULL) {
		if (fscanf(f, "%u %u", lo, hi) != 2 || *lo == 0 || *hi > 65535 || *hi < *lo) {
			*lo = 32768;
			*hi = 60999;
		}
		fclose(f);
	}
}

static bool kb_port_reserved(const char *list, uint32_t p)
{
	const char *s = list;

	while (*s != '\0') {
		char *end;
		unsigned long a = strtoul(s, &end, 10), b = a;
		if (end == s)
			return false;
		if (*end == '-')
			b = strtoul(end + 1, &end, 10);
		if (p >= a && p <= b)
			return true;
		s = *end == ',' ? end + 1 : end;
		if (*end != ',')
			break;
	}
	return false;
}

/*
 * tl_peer_rss on kernel TCP: binds fd, before its connect to pr's ip:port, to a local port
 * of the kernel's ephemeral range (not a reserved one) whose hash the peer puts on the queue
 * it asked for (tl_peer_rss_lands). The source address is the one the route to ip gives.
 * Best effort: without a free such port in 64 tries the kernel picks one.
 */
static void kb_aim(const struct tl *tl, int fd, const struct tl_peer_rss *pr)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char reserved[512] = "";
	uint32_t lo, hi, saddr, span, start;
	int probe, tries = 0;
	FILE *f;

	probe = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return;
	kb_addr(&sa, pr->ip, pr->port);
	if (connect(probe, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    getsockname(probe, (struct sockaddr *)&sa, &sl) != 0) {
		close(probe);
		return;
	}
	close(probe);
	saddr = ntohl(sa.sin_addr.s_addr);
	if ((f = fopen("/proc/sys/net/ipv4/ip_local_reserved_ports", "r")) != NULL) {
		if (fgets(reserved, sizeof(reserved), f) == NULL)
			reserved[0] = '\0';
		fclose(f);
	}
	kb_port_range(&lo, &hi);
	span = hi - lo + 1u;
	start = (uint32_t)(((uint64_t)fd * 0x9e3779b97f4a7c15ull ^ (uint64_t)clock()) % span);
	for (uint32_t i = 0; i < span && tries < 64; i++) {
		uint32_t p = lo + (start + i) % span;
		if (!tl_peer_rss_lands(tl, pr, saddr, (uint16_t)p) || kb_port_reserved(reserved, p))
			continue;
		tries++;
		kb_addr(&sa, saddr, (uint16_t)p);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return;
		if (errno != EADDRINUSE)
			return;
	}
}

static int kb_connect(struct tl_conn *c, uint32_t ip, uint16_t port)
{
	struct kb_conn *kc = tl_conn_priv(c);
	struct sockaddr_in sa;
	int rc;

	kc->ep.kind = KB_CONN;
	kc->ep.fd = kb_socket();
	if (kc->ep.fd < 0)
		return kc->ep.fd;
	const struct tl_peer_rss *pr = tl_peer_rss_find(c->tl, ip, port);
	if (pr != NULL)
		kb_aim(c->tl, kc->ep.fd, pr);
	kb_addr(&sa, ip, port);
	if (connect(kc->ep.fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
		/* Refused at once (loopback): report it like a late failure, from tl_poll. */
		tl_up_fail(c, -errno, "connect failed");
		return 0;
	}
	rc = kb_ctl(c->tl, EPOLL_CTL_ADD, &kc->ep, EPOLLOUT);
	if (rc != 0) {
		close(kc->ep.fd);
		kc->ep.fd = -1;
	}
	return rc;
}

static void kb_shutdown(struct tl_conn *c)
{
	struct kb_conn *kc = tl_conn_priv(c);

	if (kc->ep.fd >= 0 && c->abort) {
		/* tl_abort: a zero linger time makes close() reset the connection. */
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };
		(void)setsockopt(kc->ep.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	if (kc->ep.fd >= 0)
		close(kc->ep.fd);
	kc->ep.fd = -1;
	if (kc->cur != NULL)
		kb_buf_release(kc->cur);
	kc->cur = NULL;
}

/* The events c waits for: input unless paused (tl_conn_rx_pause), output while want_out. */
static uint32_t kb_conn_events(const struct tl_conn *c, bool out)
{
	return (c->rx_paused ? 0 : EPOLLIN) | (out ? EPOLLOUT : 0);
}

static void kb_want_out(struct tl_conn *c, bool on)
{
	struct kb_conn *kc = tl_conn_priv(c);

	if (kc->want_out == on)
		return;
	if (kb_ctl(c->tl, EPOLL_CTL_MOD, &kc->ep, kb_conn_events(c, on)) == 0)
		kc->want_out = on;
}

/*
 * Paused: EPOLLIN off, so the socket's receive buffer fills and the kernel's window shuts.
 * A hang-up or an error is still reported (epoll always does) and read to its end.
 */
static void kb_rx_pause(struct tl_conn *c)
{
	struct kb_conn *kc = tl_conn_priv(c);

	(void)kb_ctl(c->tl, EPOLL_CTL_MOD, &kc->ep, kb_conn_events(c, kc->want_out));
}

/* Gathers the unsent bytes of c's queue, from the head's offset on, into v. */
static int kb_gather(struct tl_conn *c, struct iovec *v)
{
	struct tl_link *e;
	int n = 0;

	for (e = c->txq.next; e != &c->txq && n < KB_IOV; e = e->next) {
		struct tl_tx *tx = tl_container_of(e, struct tl_tx, link);
		uint64_t skip = tx->off;
		uint32_t i;

		for (i = 0; i < tx->iovcnt && n < KB_IOV; i++) {
			if (skip >= tx->iov[i].len) {
				skip -= tx->iov[i].len;
				continue;
			}
			v[n].iov_base = (void *)(uintptr_t)(tx->iov[i].base + skip);
			v[n].iov_len = tx->iov[i].len - skip;
			skip = 0;
			n++;
		}
	}
	return n;
}

/* Credits n written bytes to the queue head onward; completes what is fully out. */
static void kb_consume(struct tl_conn *c, size_t n)
{
	while (n > 0 && c->state == TL_CS_OPEN && !tl_list_empty(&c->txq)) {
		struct tl_tx *tx = tl_container_of(c->txq.next, struct tl_tx, link);
		uint64_t take = tx->len - tx->off;

		if (take > n)
			take = n;
		tx->off += take;
		n -= take;
		if (tx->off == tx->len)
			tl_up_tx_done(c, tx, 0);
	}
}

static void kb_flush(struct tl_conn *c)
{
	struct kb_conn *kc = tl_conn_priv(c);
	struct iovec v[KB_IOV];
	struct msghdr mh = { .msg_iov = v };
	ssize_t n;
	size_t want;
	int i, rounds;

	/*
	 * Bounded: completions may queue more forever while the peer keeps up. What is
	 * left waits for EPOLLOUT, which fires at once on a writable socket.
	 */
	for (rounds = 0; rounds < KB_SENDS_PER_FLUSH && c->state == TL_CS_OPEN &&
			 !tl_list_empty(&c->txq); rounds++) {
		mh.msg_iovlen = (size_t)kb_gather(c, v);
		for (want = 0, i = 0; i < (int)mh.msg_iovlen; i++)
			want += v[i].iov_len;
		n = sendmsg(kc->ep.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			tl_up_fail(c, -ECONNRESET, "send failed: connection reset");
			return;
		}
		kb_consume(c, (size_t)n);
		if ((size_t)n < want)
			break; /* socket buffer full */
	}
	if (c->state == TL_CS_OPEN)
		kb_want_out(c, !tl_list_empty(&c->txq));
}

/*
 * Reads until the socket is drained (a short read), the per-event budget is spent, or the
 * receiver paused c (unless ending: a hang-up is read to its end).
 */
static void kb_read(struct tl_conn *c, bool ending)
{
	struct kb_conn *kc = tl_conn_priv(c);
	uint32_t size = c->tl->cfg.rx_buf_size, room;
	ssize_t n;
	int i;

	for (i = 0; i < KB_READS_PER_EVENT && c->state == TL_CS_OPEN && (ending || !c->rx_paused);
	     i++) {
		if (kc->cur == NULL) {
			kc->cur = kb_buf_get(c->tl);
			kc->fill = 0;
			if (kc->cur == NULL) {
				c->tl->st.refused_streams++;
				tl_up_fail(c, -ENOBUFS, "receive buffers exhausted (rx_max_bufs)");
				return;
			}
		} else if (kc->cur->refcnt == 1) {
			kc->fill = 0; /* nobody else looks at it: start over, cache-hot */
		}
		room = size - kc->fill;
		n = read(kc->ep.fd, kc->cur->data + kc->fill, room);
		if (n > 0) {
			uint8_t *p = kc->cur->data + kc->fill;
			kc->fill += (uint32_t)n;
			if (tl_up_input(c, p, (uint32_t)n, kc->cur) != 0 || c->state != TL_CS_OPEN)
				return;
			if (kc->fill == size) {
				kb_buf_release(kc->cur);
				kc->cur = NULL;
			}
			if ((uint32_t)n < room)
				return;
		} else if (n == 0) {
			tl_up_eof(c);
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			return;
		} else if (errno != EINTR) {
			tl_up_fail(c, -ECONNRESET, "receive failed: connection reset");
		}
	}
}

static void kb_connect_done(struct tl_conn *c)
{
	struct kb_conn *kc = tl_conn_priv(c);
	int err = 0, rc;
	socklen_t sl = sizeof(err);

	if (getsockopt(kc->ep.fd, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
		err = errno;
	if (err != 0) {
		tl_up_connected(c, -err);
		return;
	}
	rc = kb_ctl(c->tl, EPOLL_CTL_MOD, &kc->ep, kb_conn_events(c, false));
	tl_up_connected(c, rc);
}

static void kb_conn_event(struct tl_conn *c, uint32_t events)
{
	if (c->state == TL_CS_CONNECTING) {
		kb_connect_done(c);
		return;
	}
	if (c->state == TL_CS_OPEN && (events & (EPOLLHUP | EPOLLERR)))
		kb_read(c, true);
	else if (c->state == TL_CS_OPEN && (events & EPOLLIN) && !c->rx_paused)
		kb_read(c, false);
	if (c->state == TL_CS_OPEN && (events & EPOLLOUT))
		kb_flush(c);
}

static void kb_accept(struct tl_listener *l)
{
	struct kb_ep *lep = tl_listener_priv(l);
	struct tl *tl = l->tl;
	int i, fd, one = 1;

	for (i = 0; i < KB_ACCEPTS_PER_EVENT && !l->closing; i++) {
		struct tl_conn *c;
		struct kb_conn *kc;

		fd = accept4(lep->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		c = tl_up_new(tl, l->ops, l->ctx);
		if (c == NULL) {
			tl->st.refused_conns++;
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		kc = tl_conn_priv(c);
		kc->ep.kind = KB_CONN;
		kc->ep.fd = fd;
		if (kb_ctl(tl, EPOLL_CTL_ADD, &kc->ep, EPOLLIN) != 0) {
			close(fd);
			tl_up_drop(c);
			continue;
		}
		tl_up_accepted(l, c);
	}
}

static uint64_t kb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int kb_poll(struct tl *tl, int64_t timeout_us)
{
	struct kb *kb = tl->be;
	unsigned long slack;
	uint64_t left_ns; /* of the timeout, UINT64_MAX for none */
	int ms, n, i, err;

	if (timeout_us < 0)
		ms = -1;
	else if (timeout_us > (int64_t)INT_MAX * 1000)
		ms = INT_MAX;
	else
		ms = (int)((timeout_us + 999) / 1000);
	/*
	 * Before a sleep, the adaptive spin dpdk_net's sleeping lcores do (dn_spin): the same
	 * window and rules, so the two backends' sleeping modes stay comparable.
	 */
	n = 0;
	left_ns = ms > 0 && timeout_us < INT_MAX ? (uint64_t)timeout_us * 1000u : UINT64_MAX;
	if (ms != 0 && kb->spin.win != 0) {
		/* The spin counts against the timeout: a poll never returns later for it. */
		uint64_t now = kb_now_ns(), end = UINT64_MAX;
		if (ms > 0 && timeout_us <= (int64_t)(UINT64_MAX / 2000))
			end = now + (uint64_t)timeout_us * 1000u;
		while ((n = epoll_wait(kb->epfd, kb->ev, KB_EVENTS, 0)) == 0 &&
		       (now = kb_now_ns()) < end && dn_spin_more(&kb->spin, now))
			;
		if (n == 0 && end != UINT64_MAX) { /* what is left of it, rounded up to a ms */
			left_ns = now >= end ? 0 : end - now;
			uint64_t left = (left_ns + 999999) / 1000000;
			ms = left > INT_MAX ? INT_MAX : (int)left;
		}
	}
	if (n == 0 && ms > 0 && left_ns < DN_DUE_NEAR_US * 1000u) {
		/* A poll ending within DN_DUE_NEAR_US (a fused frame's hold): timed exactly, as
		 * dpdk_net times a sleep for a timer that near. */
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)left_ns};
		n = epoll_pwait2(kb->epfd, kb->ev, KB_EVENTS, &ts, NULL);
		err = errno;
		dn_spin_slept(&kb->spin, kb_now_ns(), n > 0);
		errno = err;
	} else if (n == 0) {
		/* A sleep widens the timer slack as dpdk_net's do: no timer reprogrammed per
		 * wake-up. */
		slack = ms > 0 ? dn_sleep_slack_begin() : 0;
		n = epoll_wait(kb->epfd, kb->ev, KB_EVENTS, ms);
		err = errno;
		if (ms > 0)
			dn_sleep_slack_end(slack);
		if (ms != 0)
			dn_spin_slept(&kb->spin, kb_now_ns(), n > 0);
		errno = err;
	}
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	if (n > 0)
		dn_spin_work(&kb->spin);
	for (i = 0; i < n; i++) {
		struct kb_ep *ep = kb->ev[i].data.ptr;

		/* Endpoints closed earlier in this batch are freed only after it (tl_reap). */
		if (ep->kind == KB_WAKE) {
			uint64_t cnt;
			(void)!read(ep->fd, &cnt, sizeof(cnt));
		} else if (ep->kind == KB_LISTENER) {
			struct tl_listener *l = tl_listener_of_priv(ep);
			if (!l->closing)
				kb_accept(l);
		} else {
			kb_conn_event(tl_conn_of_priv(ep), kb->ev[i].events);
		}
	}
	return n;
}

const struct tl_backend_ops tl_be_kernel_ops = {
	.name = "kernel",
	.conn_priv = sizeof(struct kb_conn),
	.listener_priv = sizeof(struct kb_ep),
	.init = kb_init,
	.fini = kb_fini,
	.listen = kb_listen,
	.unlisten = kb_unlisten,
	.connect = kb_connect,
	.flush = kb_flush,
	.shutdown = kb_shutdown,
	.poll = kb_poll,
	.wake = kb_wake,
	.rx_pause = kb_rx_pause,
};
