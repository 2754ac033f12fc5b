/*
 * tl_obs.c — TCP-lite's counters through DPDK telemetry: per instance (one per lcore) the
 * stack counters and a table of its connections, readable with dpdk-telemetry.py:
 *
 *   /wharf/tl/instances        indexes of live instances
 *   /wharf/tl/stats,<i>        stack counters of instance i, with its message and refusal counts
 *   /wharf/tl/conns,<i>        one line per connection (up to TL_OBS_CONNS)
 *
 * Call chain: tl_be_dpdk.c's poll hook -> tl_obs_publish (at most every 100 ms, on the
 * instance's lcore) -> snapshot into its slot; telemetry thread -> obs_*_cmd -> copy out.
 *
 * The lcore never waits for the telemetry thread and vice versa: each slot is a seqlock
 * (tl_seqlock.h).
 * Slots are static storage because DPDK 22.11 telemetry handlers take no argument and can
 * never be unregistered: a slot outlives its instance, marked free.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_telemetry.h>

#include "transport/tl_pvt.h"
#include "transport/tl_seqlock.h"
#include "transport/tl_tcp.h"

#define TL_OBS_SLOTS 16
#define TL_OBS_CONNS 64

struct obs_conn {
	struct tl_tcp_tuple t;
	struct tl_tcp_conn_stats s;
};

struct obs_snap {
	struct tl_tcp_stats st;
	struct tl_stats ts;
	uint32_t nconns, shown;
	struct obs_conn c[TL_OBS_CONNS];
};

struct tl_obs {
	_Atomic uint32_t seq;
	_Atomic int in_use;
	struct tl *tl;
	struct tl_tcp_stack *stack;
	struct tl_tcp_conn *(*conn_tcp)(struct tl_conn *c);
	uint64_t next_tsc;
	struct obs_snap snap;
};

static struct tl_obs obs_slots[TL_OBS_SLOTS];
static _Atomic int obs_registered;

/* Copies slot i's snapshot; -ENOENT for a free slot. */
static int obs_read(long i, struct obs_snap *out)
{
	struct tl_obs *o;

	if (i < 0 || i >= TL_OBS_SLOTS)
		return -EINVAL;
	o = &obs_slots[i];
	return tl_seq_read(&o->seq, &o->in_use, out, &o->snap, sizeof(*out));
}

static long obs_index(const char *params)
{
	char *end;
	long i;

	if (params == NULL || *params == '\0')
		return -1;
	i = strtol(params, &end, 10);
	return *end == '\0' ? i : -1;
}

static int obs_instances_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
	for (int i = 0; i < TL_OBS_SLOTS; i++)
		if (atomic_load_explicit(&obs_slots[i].in_use, memory_order_relaxed))
			rte_tel_data_add_array_int(d, i);
	return 0;
}

static int obs_stats_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct obs_snap *s = malloc(sizeof(*s));
	int rc;

	(void)cmd;
	if (s == NULL)
		return -ENOMEM;
	rc = obs_read(obs_index(params), s);
	if (rc == 0) {
		const struct tl_tcp_stats *t = &s->st;
		rte_tel_data_start_dict(d);
#define OBS_U64(f) rte_tel_data_add_dict_u64(d, #f, t->f)
		OBS_U64(seg_in); OBS_U64(seg_out); OBS_U64(bytes_in); OBS_U64(bytes_out);
		OBS_U64(retrans); OBS_U64(fast_retrans); OBS_U64(rto_fired); OBS_U64(spurious_rto);
		OBS_U64(probes); OBS_U64(ooo_queued); OBS_U64(dup_segs); OBS_U64(dup_acks);
		OBS_U64(sack_rexmits); OBS_U64(sack_walks);
		OBS_U64(challenge_acks); OBS_U64(rst_in); OBS_U64(rst_out);
		OBS_U64(drop_malformed); OBS_U64(drop_no_conn); OBS_U64(drop_window);
		OBS_U64(drop_bad_ack); OBS_U64(drop_backlog); OBS_U64(drop_ooo_full);
		OBS_U64(drop_emit); OBS_U64(ce_marks); OBS_U64(ecn_cuts); OBS_U64(conns_opened); OBS_U64(conns_reset);
		OBS_U64(conns_timedout); OBS_U64(syncookies_sent); OBS_U64(syncookies_ok);
		OBS_U64(syncookies_bad);
#undef OBS_U64
		rte_tel_data_add_dict_u64(d, "connections", s->nconns);
		rte_tel_data_add_dict_u64(d, "msgs_in", s->ts.msgs_in);
		rte_tel_data_add_dict_u64(d, "msgs_out", s->ts.msgs_out);
		rte_tel_data_add_dict_u64(d, "refused_conns", s->ts.refused_conns);
		rte_tel_data_add_dict_u64(d, "refused_conns_nomem", s->ts.refused_conns_nomem);
		rte_tel_data_add_dict_u64(d, "rx_dropped_nomem", s->ts.rx_dropped_nomem);
		rte_tel_data_add_dict_u64(d, "refused_streams", s->ts.refused_streams);
	}
	free(s);
	return rc;
}

static int obs_conns_cmd(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct obs_snap *s = malloc(sizeof(*s));
	int rc;

	(void)cmd;
	if (s == NULL)
		return -ENOMEM;
	rc = obs_read(obs_index(params), s);
	if (rc == 0) {
		rte_tel_data_start_dict(d);
		for (uint32_t k = 0; k < s->shown; k++) {
			const struct obs_conn *c = &s->c[k];
			char name[64], v[RTE_TEL_MAX_STRING_LEN];

			/* Telemetry names allow only letters, digits and _-/.: the peer goes in the value. */
			snprintf(name, sizeof(name), "conn%u", k);
			snprintf(v, sizeof(v), "peer=%u.%u.%u.%u:%u lport=%u state=%u seg_in=%" PRIu64
				 " seg_out=%" PRIu64 " retrans=%" PRIu64 " srtt_us=%u rto_us=%u cwnd=%u"
				 " sack=%d", c->t.raddr >> 24, (c->t.raddr >> 16) & 255,
				 (c->t.raddr >> 8) & 255, c->t.raddr & 255, c->t.rport, c->t.lport,
				 c->s.state, c->s.seg_in, c->s.seg_out, c->s.retrans, c->s.srtt_us,
				 c->s.rto_us, c->s.cwnd, c->s.sack);
			rte_tel_data_add_dict_string(d, name, v);
		}
	}
	free(s);
	return rc;
}

int tl_obs_create(struct tl *tl, struct tl_tcp_stack *stack,
		  struct tl_tcp_conn *(*conn_tcp)(struct tl_conn *c), struct tl_obs **out)
{
	int expected = 0;

	/* Once per process; a failure only means no telemetry (e.g. --no-telemetry). */
	if (atomic_compare_exchange_strong(&obs_registered, &expected, 1)) {
		rte_telemetry_register_cmd("/wharf/tl/instances", obs_instances_cmd,
					   "Indexes of wharf TCP-lite instances. No parameters");
		rte_telemetry_register_cmd("/wharf/tl/stats", obs_stats_cmd,
					   "TCP-lite stack counters of an instance. Parameter: index");
		rte_telemetry_register_cmd("/wharf/tl/conns", obs_conns_cmd,
					   "TCP-lite connections of an instance. Parameter: index");
	}
	for (int i = 0; i < TL_OBS_SLOTS; i++) {
		int free_slot = 0;
		struct tl_obs *o = &obs_slots[i];

		if (!atomic_compare_exchange_strong(&o->in_use, &free_slot, 1))
			continue;
		o->tl = tl;
		o->stack = stack;
		o->conn_tcp = conn_tcp;
		o->next_tsc = 0;
		*out = o;
		return 0;
	}
	return -ENOSPC;
}

void tl_obs_publish(struct tl_obs *o, uint64_t now_tsc)
{
	uint32_t seq, n = 0, shown = 0;

	if (o == NULL || now_tsc < o->next_tsc)
		return;
	o->next_tsc = now_tsc + rte_get_tsc_hz() / 10;
	seq = tl_seq_write_begin(&o->seq);
	tl_tcp_stack_get_stats(o->stack, &o->snap.st);
	tl_stats_get(o->tl, &o->snap.ts);
	for (struct tl_link *e = o->tl->conns.next; e != &o->tl->conns; e = e->next) {
		struct tl_tcp_conn *tc = o->conn_tcp(tl_container_of(e, struct tl_conn, link));

		n++;
		if (tc == NULL || shown == TL_OBS_CONNS)
			continue;
		tl_tcp_conn_tuple(tc, &o->snap.c[shown].t);
		tl_tcp_conn_get_stats(tc, &o->snap.c[shown].s);
		shown++;
	}
	o->snap.nconns = n;
	o->snap.shown = shown;
	tl_seq_write_end(&o->seq, seq);
}

void tl_obs_destroy(struct tl_obs *o)
{
	if (o != NULL)
		atomic_store_explicit(&o->in_use, 0, memory_order_release);
}
