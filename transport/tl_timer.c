/*
 * tl_timer.c — TCP-lite time: a hashed timer wheel per stack and what each connection
 * does when its time comes (retransmission timeout, delayed ACK, zero-window probe,
 * TIME_WAIT and FIN_WAIT_2 expiry).
 *
 * Call chain: lcore loop -> tl_tcp_timers(stack, now) -> tl_tw_expire -> conn_fire ->
 * tl_out_* / tl_conn_drop. Input and the API re-arm through tl_timer_update.
 *
 * Why a wheel of our own and not rte_timer: rte_timer needs EAL (tests run without it)
 * and keeps a skiplist per lcore with a per-call TSC read; a connection here only ever
 * needs one entry, re-armed for its earliest deadline, which the wheel does in O(1)
 * without any clock read (the caller passes now).
 */
#include <errno.h>
#include <stdlib.h>

#include "tl_tcp_pvt.h"

/* Peer that never sends its FIN while we sit in FIN_WAIT_2 (Linux: tcp_fin_timeout). */
#define TL_FIN_WAIT_2_NS (60ull * 1000000000ull)

int tl_tw_init(struct tl_tw *tw, uint64_t tick_ns, uint32_t nslots, uint64_t now)
{
	if (tick_ns == 0 || nslots == 0 || (nslots & (nslots - 1)) != 0)
		return -EINVAL;
	tw->slots = calloc(nslots, sizeof(*tw->slots));
	if (!tw->slots)
		return -ENOMEM;
	tw->nslots = nslots;
	tw->tick_ns = tick_ns;
	tw->cur_tick = now / tick_ns;
	tw->armed = 0;
	return 0;
}

void tl_tw_fini(struct tl_tw *tw)
{
	free(tw->slots);
	tw->slots = NULL;
}

void tl_tw_cancel(struct tl_tw *tw, struct tl_tw_entry *e)
{
	if (!e->pprev)
		return;
	*e->pprev = e->next;
	if (e->next)
		e->next->pprev = e->pprev;
	e->next = NULL;
	e->pprev = NULL;
	tw->armed--;
}

void tl_tw_arm(struct tl_tw *tw, struct tl_tw_entry *e, uint64_t deadline)
{
	uint64_t tick = (deadline + tw->tick_ns - 1) / tw->tick_ns;
	struct tl_tw_entry **head;

	tl_tw_cancel(tw, e);
	/* A deadline in a slot already run would wait a whole revolution: run it next. */
	if (tick < tw->cur_tick)
		tick = tw->cur_tick;
	head = &tw->slots[tick & (tw->nslots - 1)];
	e->deadline = deadline;
	e->next = *head;
	if (e->next)
		e->next->pprev = &e->next;
	e->pprev = head;
	*head = e;
	tw->armed++;
}

static void tw_run_slot(struct tl_tw *tw, uint32_t slot, uint64_t now,
			void (*fire)(void *arg, struct tl_tw_entry *e), void *arg)
{
	struct tl_tw_entry *e = tw->slots[slot];

	while (e) {
		struct tl_tw_entry *next = e->next;
		if (e->deadline <= now) {
			tl_tw_cancel(tw, e);
			/* fire may re-arm e or cancel next's owner: restart the slot then. */
			fire(arg, e);
			e = tw->slots[slot];
			continue;
		}
		e = next;
	}
}

void tl_tw_expire(struct tl_tw *tw, uint64_t now, void (*fire)(void *arg, struct tl_tw_entry *e),
		  void *arg)
{
	uint64_t now_tick, n;

	/* Called every poll: within the tick already run there is nothing to do, and the
	 * test needs no division. */
	if (now < tw->cur_tick * tw->tick_ns)
		return;
	now_tick = now / tw->tick_ns;
	if (tw->armed == 0) {
		tw->cur_tick = now_tick + 1;
		return;
	}
	/* One revolution visits every slot; a longer jump needs no more than that. */
	n = now_tick + 1 - tw->cur_tick;
	if (now_tick + 1 < tw->cur_tick)
		return;
	if (n > tw->nslots)
		n = tw->nslots;
	for (uint64_t i = 0; i < n; i++)
		tw_run_slot(tw, (uint32_t)((now_tick - n + 1 + i) & (tw->nslots - 1)), now, fire, arg);
	tw->cur_tick = now_tick + 1;
}

static uint64_t min_deadline(uint64_t a, uint64_t b)
{
	if (a == 0)
		return b;
	if (b == 0)
		return a;
	return a < b ? a : b;
}

void tl_timer_update(struct tl_tcp_conn *c)
{
	struct tl_tcp_stack *s = c->stack;
	uint64_t d = min_deadline(min_deadline(min_deadline(c->rto_at, c->delack_at),
					       min_deadline(c->persist_at, c->close_at)), c->ka_at);

	if (d == 0)
		tl_tw_cancel(&s->tw, &c->tw);
	else if (!c->tw.pprev || c->tw.deadline != d)
		tl_tw_arm(&s->tw, &c->tw, d);
}

void tl_timer_rto_restart(struct tl_tcp_conn *c)
{
	c->rto_at = c->stack->now + (c->rto_ns << (c->backoff < 16 ? c->backoff : 16));
	if (c->rto_at > c->stack->now + c->stack->cfg.rto_max_ns)
		c->rto_at = c->stack->now + c->stack->cfg.rto_max_ns;
	tl_timer_update(c);
}

/* The peer stopped answering: tell it (it may only have lost its way back) and end. An
 * unanswered SYN-ACK ends silently: its SYN was most likely spoofed (no backscatter). */
static void conn_timed_out(struct tl_tcp_conn *c)
{
	c->stack->st.conns_timedout++;
	if (c->state != TL_TCP_SYN_SENT && c->state != TL_TCP_SYN_RCVD)
		tl_out_rst(c);
	tl_conn_drop(c, -ETIMEDOUT);
}

static void conn_rto(struct tl_tcp_conn *c)
{
	struct tl_tcp_stack *s = c->stack;

	s->st.rto_fired++;
	if (c->backoff >= s->cfg.max_retrans) {
		conn_timed_out(c);
		return;
	}
	if (c->backoff == 0 && c->ts_ok && c->state != TL_TCP_SYN_SENT && c->state != TL_TCP_SYN_RCVD) {
		c->eifel_armed = true;
		c->eifel_tsval = tl_out_tsval(s);
		c->eifel_cwnd = c->cwnd;
		c->eifel_ssthresh = c->ssthresh;
	}
	c->backoff++;
	c->rtt_start = 0; /* Karn: no sample from a retransmitted segment */
	if (c->state == TL_TCP_SYN_SENT || c->state == TL_TCP_SYN_RCVD) {
		tl_out_syn(c, c->state == TL_TCP_SYN_RCVD);
		tl_timer_rto_restart(c);
		return;
	}
	tl_cc_on_rto(c);
	/* Go back N: everything past snd_una is presumed lost and resent as cwnd allows. */
	c->snd_nxt = c->snd_una;
	tl_out_retransmit(c);
	tl_timer_rto_restart(c);
}

/*
 * Zero-window probe. The RTO is off meanwhile, so the probes carry the retransmission
 * limit: RFC 9293 3.8.6.1 forbids giving up on a peer that answers them (any acceptable
 * ACK resets probes_out), not on one that vanished holding its window shut.
 */
static void conn_persist(struct tl_tcp_conn *c)
{
	struct tl_tcp_stack *s = c->stack;

	if (c->probes_out >= s->cfg.max_retrans) {
		conn_timed_out(c);
		return;
	}
	c->probes_out++;
	tl_out_probe(c);
	c->persist_backoff = c->persist_backoff ? c->persist_backoff * 2 : c->rto_ns * 2;
	if (c->persist_backoff > s->cfg.rto_max_ns)
		c->persist_backoff = s->cfg.rto_max_ns;
	c->persist_at = s->now + c->persist_backoff;
}

/*
 * Keepalive (RFC 1122 4.2.3.6, off by default): after keepalive_ns without a segment
 * from the peer and with nothing of ours outstanding (the RTO or the probes watch that),
 * probe every keepalive_intvl_ns; keepalive_probes unanswered ones end the connection,
 * so a PS notices a worker host that died silently.
 */
static void conn_keepalive(struct tl_tcp_conn *c)
{
	struct tl_tcp_stack *s = c->stack;
	const struct tl_tcp_cfg *cfg = &s->cfg;

	if (c->state == TL_TCP_TIME_WAIT)
		return;
	if (s->now - c->last_rx < cfg->keepalive_ns) {
		c->ka_at = c->last_rx + cfg->keepalive_ns;
		return;
	}
	if (c->snd_una != c->snd_max || c->persist_at) {
		c->ka_at = s->now + cfg->keepalive_ns;
		return;
	}
	if (c->probes_out >= cfg->keepalive_probes) {
		conn_timed_out(c);
		return;
	}
	c->probes_out++;
	tl_out_probe(c);
	c->ka_at = s->now + cfg->keepalive_intvl_ns;
}

static void conn_fire(void *arg, struct tl_tw_entry *e)
{
	struct tl_tcp_stack *s = arg;
	struct tl_tcp_conn *c = (struct tl_tcp_conn *)((char *)e - offsetof(struct tl_tcp_conn, tw));
	uint64_t now = s->now;

	c->busy++;
	if (c->close_at && c->close_at <= now) {
		c->close_at = 0;
		tl_conn_drop(c, c->state == TL_TCP_TIME_WAIT ? 0 : -ETIMEDOUT);
		goto out;
	}
	if (c->delack_at && c->delack_at <= now) {
		c->delack_at = 0;
		tl_out_ack(c);
	}
	if (c->rto_at && c->rto_at <= now) {
		c->rto_at = 0;
		conn_rto(c);
		if (c->dead)
			goto out;
	}
	if (c->persist_at && c->persist_at <= now) {
		c->persist_at = 0;
		conn_persist(c);
		if (c->dead)
			goto out;
	}
	if (c->ka_at && c->ka_at <= now) {
		c->ka_at = 0;
		conn_keepalive(c);
		if (c->dead)
			goto out;
	}
	tl_timer_update(c);
out:
	tl_conn_put(c);
}

void tl_conn_enter_time_wait(struct tl_tcp_conn *c)
{
	c->state = TL_TCP_TIME_WAIT;
	c->rto_at = 0;
	c->persist_at = 0;
	c->ka_at = 0;
	c->close_at = c->stack->now + c->stack->cfg.time_wait_ns;
	if (c->close_at == c->stack->now)
		c->close_at++;
	tl_conn_app_closed(c, 0);
	tl_timer_update(c);
}

/* FIN_WAIT_2 with our FIN acknowledged: bound how long we wait for the peer's. */
void tl_timer_fin_wait_2(struct tl_tcp_conn *c)
{
	c->close_at = c->stack->now + TL_FIN_WAIT_2_NS;
	tl_timer_update(c);
}

void tl_tcp_timers(struct tl_tcp_stack *s, uint64_t now)
{
	if (now > s->now)
		s->now = now;
	tl_tw_expire(&s->tw, s->now, conn_fire, s);
}

uint64_t tl_tcp_next_timer(const struct tl_tcp_stack *s)
{
	const struct tl_tw *tw = &s->tw;
	uint64_t best = UINT64_MAX;

	if (tw->armed == 0)
		return best;
	/* Walk slots in time order. An entry due in this revolution sits in the slot of
	 * ceil(deadline / tick), so once best is below a slot's earliest possible
	 * deadline no later slot can beat it; later-revolution entries only bound best. */
	for (uint32_t i = 0; i < tw->nslots; i++) {
		uint64_t tick = tw->cur_tick + i;
		if (i > 0 && best <= (tick - 1u) * tw->tick_ns)
			break;
		for (const struct tl_tw_entry *e = tw->slots[tick & (tw->nslots - 1)]; e; e = e->next)
			if (e->deadline < best)
				best = e->deadline;
	}
	/* It runs when tl_tcp_timers reaches its slot: the tick it rounds up to, or the next
	 * tick to run for one already behind (tl_tw_arm). */
	uint64_t tick = (best + tw->tick_ns - 1) / tw->tick_ns;
	return (tick > tw->cur_tick ? tick : tw->cur_tick) * tw->tick_ns;
}
