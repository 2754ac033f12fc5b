/*
 * perf_lcores.c — wharf-perf --lcores N: one transport instance per EAL lcore, share
 * nothing (docs/architecture.md, "Threads and the data path").
 *
 * main -> perf_run_lcores: EAL, one port for N lcores (a one-queue device: dpdk_net's
 *   software steering), rte_eal_remote_launch(lc_main) on every worker lcore, lc_main on
 *   the main lcore too -> per lcore: dn_lcore_create, tl_create(backend_arg = that lcore),
 *   perf_server_run | perf_client_run (its share of the connections) -> teardown
 *   -> main: one JSON line with the sums and per-lcore counts.
 *
 * Order matters because lcore 0 carries everyone's frames (it reads the device and sends
 * the others' Tx): every instance exists before traffic starts (a SYN steered to a lcore
 * without a listener would be reset), everyone keeps polling until all finished their
 * traffic, and the device is stopped (its PMD lets go of everyone's frames) before any
 * instance is destroyed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_launch.h>
#include <rte_lcore.h>

#include "apps/perf/perf.h"
#include "dpdk_net/dn.h"

struct perf_mc {
	const struct perf_opts *o;
	struct dn_port *port;
	unsigned nl;
	_Atomic int stop;
	/* Phase counters; each only grows. Partners: the acquire loads in mc_wait. */
	_Atomic unsigned ready, failed, finished, quiet, stopped;
	struct perf run[PERF_MAX_LCORES];      /* run[i] touched by lcore i until it finished */
	struct dn_stats dstats[PERF_MAX_LCORES]; /* copied by lcore i before its context goes */
	int rc[PERF_MAX_LCORES];
};

struct perf_mc_arg {
	struct perf_mc *mc;
	unsigned idx;
};

/* Polls tl (when there is one) until *ctr reaches want; returns false if failed is set. */
static bool mc_wait(struct perf_mc *mc, struct tl *tl, _Atomic unsigned *ctr, unsigned want)
{
	struct timespec ts = {0, 100000};

	/* acquire: pairs with the release increments in lc_main; what the lcore wrote before
	 * counting itself (its stats, its instance) is visible after. */
	while (atomic_load_explicit(ctr, memory_order_acquire) < want) {
		if (atomic_load_explicit(&mc->failed, memory_order_acquire) != 0 && ctr == &mc->ready)
			return false;
		if (tl != NULL)
			tl_poll(tl, 1000);
		else
			nanosleep(&ts, NULL);
	}
	return true;
}

/* This lcore's share of the client connections: C / N, the first C % N get one more. */
static uint32_t mc_share(const struct perf_opts *o, unsigned idx, unsigned nl)
{
	return o->server ? 0 : o->conns / nl + (idx < o->conns % nl);
}

static int lc_main(void *arg)
{
	struct perf_mc_arg *a = arg;
	struct perf_mc *mc = a->mc;
	struct perf *p = &mc->run[a->idx];
	struct dn_lcore *lc = NULL;
	int rc;

	rc = dn_lcore_create(mc->port, (uint16_t)a->idx, NULL, &lc);
	if (rc == 0) {
		dn_obs_register(lc);
		if (a->idx == 0)
			dn_arp_announce(lc);
		rc = perf_tl_create(mc->o, lc, &p->tl);
	}
	if (rc != 0) {
		fprintf(stderr, "wharf-perf: lcore %u: %s\n", a->idx, strerror(-rc));
		/* release: partner, the acquire in mc_wait */
		atomic_fetch_add_explicit(&mc->failed, 1, memory_order_release);
		dn_lcore_destroy(lc);
		mc->rc[a->idx] = 1;
		return 1;
	}
	atomic_fetch_add_explicit(&mc->ready, 1, memory_order_release);
	if (mc_wait(mc, NULL, &mc->ready, mc->nl))
		mc->rc[a->idx] = mc->o->server ? perf_server_run(p) : perf_client_run(p);
	else
		mc->rc[a->idx] = 1;
	if (!mc->o->server && mc->rc[a->idx] == 0)
		perf_drain(p);
	atomic_fetch_add_explicit(&mc->finished, 1, memory_order_release);
	mc_wait(mc, p->tl, &mc->finished, mc->nl - atomic_load(&mc->failed));
	/*
	 * Teardown. The device is stopped first, with every lcore quiet: its PMD then frees the
	 * frames it kept (lazily freed Tx, with attached payload of every instance), while every
	 * instance still exists to take its buffers back. Only then do the instances go.
	 */
	dn_tx_flush(lc);
	atomic_fetch_add_explicit(&mc->quiet, 1, memory_order_release);
	if (a->idx == 0) {
		mc_wait(mc, NULL, &mc->quiet, mc->nl - atomic_load(&mc->failed));
		dn_port_stop(mc->port);
		dn_tx_flush(lc); /* frees what waited in our queue, others' frames included */
		atomic_fetch_add_explicit(&mc->stopped, 1, memory_order_release);
	} else {
		mc_wait(mc, NULL, &mc->stopped, 1);
	}
	/* Sends cancelled by the teardown are not errors of the run: count those before it. */
	uint64_t errors = p->errors;
	perf_free(p, true); /* RTT samples kept for the report */
	p->errors = errors;
	mc->dstats[a->idx] = *dn_lcore_stats(lc);
	dn_lcore_destroy(lc);
	return 0;
}

/* Appends the per-lcore arrays (from run[] and dstats[]) to buf. */
static void mc_extra(const struct perf_mc *mc, char *buf, size_t len)
{
	size_t at = strlen(buf);
	uint64_t drops = 0;

#define MC_ARRAY(name, expr)                                                                   \
	do {                                                                                   \
		at += (size_t)snprintf(buf + at, len - at, ",\"%s\":[", name);                   \
		for (unsigned i = 0; i < mc->nl && at < len; i++)                                \
			at += (size_t)snprintf(buf + at, len - at, "%s%" PRIu64, i ? "," : "",    \
					       (uint64_t)(expr));                                \
		at += (size_t)snprintf(buf + at, len - at, "]");                                 \
	} while (0)
	at += (size_t)snprintf(buf + at, len - at, ",\"lcores\":%u,\"queues\":%u", mc->nl,
			       dn_port_nb_queues(mc->port));
	MC_ARRAY("rx_queue", mc->dstats[i].rx_queue);
	MC_ARRAY("lcore_msgs", mc->run[i].msgs);
	MC_ARRAY("lcore_conns", mc->o->server ? mc->run[i].accepted : mc->run[i].nconns);
	MC_ARRAY("steered_in", mc->dstats[i].steered_in);
	MC_ARRAY("steered_out", mc->dstats[i].steered_out);
	MC_ARRAY("tx_handoff", mc->dstats[i].tx_handoff);
	MC_ARRAY("idle_sleeps", mc->dstats[i].idle_sleeps);
#undef MC_ARRAY
	for (unsigned i = 0; i < mc->nl; i++)
		drops += mc->dstats[i].drops[DN_DROP_STEER_FULL];
	if (at < len)
		snprintf(buf + at, len - at, ",\"steer_drops\":%" PRIu64 ",\"idle\":\"%s\"", drops,
			 mc->o->poll ? "poll" : "sleep");
}

/* Sums the instances into one for the report; RTT samples merged. */
static int mc_report(struct perf_mc *mc)
{
	struct perf sum;
	char extra[1024] = "";
	uint64_t n = 0;
	int rc = 0;

	memset(&sum, 0, sizeof(sum));
	sum.o = mc->o;
	for (unsigned i = 0; i < mc->nl; i++) {
		struct perf *p = &mc->run[i];
		sum.msgs += p->msgs;
		sum.bytes += p->bytes;
		sum.errors += p->errors;
		sum.corrupt += p->corrupt;
		sum.dropped += p->dropped;
		sum.resets += p->resets;
		sum.secs = p->secs > sum.secs ? p->secs : sum.secs;
		n += p->nrtt < p->rtt_cap ? p->nrtt : p->rtt_cap;
		rc |= mc->rc[i];
	}
	if (mc->o->server) {
		mc_extra(mc, extra, sizeof(extra));
		perf_server_report(&sum, extra);
		return rc;
	}
	sum.rtt_cap = (uint32_t)n;
	sum.rtt_ns = malloc((n ? n : 1) * sizeof(*sum.rtt_ns));
	if (sum.rtt_ns == NULL)
		return 1;
	for (unsigned i = 0; i < mc->nl; i++) {
		struct perf *p = &mc->run[i];
		uint64_t k = p->nrtt < p->rtt_cap ? p->nrtt : p->rtt_cap;
		memcpy(sum.rtt_ns + sum.nrtt, p->rtt_ns, k * sizeof(*sum.rtt_ns));
		sum.nrtt += k;
	}
	if (mc->o->verify)
		snprintf(extra, sizeof(extra), ",\"corrupt\":%" PRIu64, sum.corrupt);
	sum.errors += sum.corrupt;
	mc_extra(mc, extra, sizeof(extra));
	perf_report(&sum, sum.secs > 0 ? sum.secs : 1e-9, extra);
	free(sum.rtt_ns);
	return rc != 0 || sum.errors > 0;
}

static int mc_port(struct perf_mc *mc, const struct perf_opts *o)
{
	char err[256];
	struct dn_config dc = {.port_id = DN_PORT_AUTO, .ip = o->ip, .prefix_len = o->prefix,
			       .idle = DN_IDLE_SLEEP, .mtu = (uint16_t)o->mtu,
			       .nb_lcores = (uint16_t)o->lcores, .nb_queues = DN_QUEUES_PER_LCORE};
	int rc = dn_eal_init(o->eal_argc, o->eal_argv, err, sizeof(err));

	if (rc < 0) {
		fprintf(stderr, "wharf-perf: EAL: %s\n", err);
		return rc;
	}
	if (rte_lcore_count() < o->lcores) {
		fprintf(stderr, "wharf-perf: --lcores %u: EAL has %u lcores (give it -l 0-%u)\n",
			o->lcores, rte_lcore_count(), o->lcores - 1);
		return -EINVAL;
	}
	dn_obs_init();
	rc = dn_port_create(&dc, &mc->port, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "wharf-perf: port: %s\n", err);
	return rc;
}

int perf_run_lcores(const struct perf_opts *o, const sigset_t *sigs)
{
	struct perf_mc_arg args[PERF_MAX_LCORES];
	struct perf_mc *mc = calloc(1, sizeof(*mc));
	unsigned lcore, idx = 1;
	int rc;

	if (mc == NULL)
		return 1;
	mc->o = o;
	mc->nl = o->lcores;
	rc = mc_port(mc, o);
	for (unsigned i = 0; rc == 0 && i < mc->nl; i++) {
		struct perf *p = &mc->run[i];
		p->o = o;
		p->rng = 0x9e3779b97f4a7c15ull + i;
		p->stop = &mc->stop;
		p->sigs = i == 0 ? sigs : NULL;
		p->nconns = mc_share(o, i, mc->nl);
		p->rtt_cap = PERF_RTT_CAP / mc->nl;
		args[i] = (struct perf_mc_arg){mc, i};
	}
	if (rc == 0) {
		RTE_LCORE_FOREACH_WORKER(lcore) {
			if (idx >= mc->nl)
				break;
			rte_eal_remote_launch(lc_main, &args[idx++], lcore);
		}
		lc_main(&args[0]);
		rte_eal_mp_wait_lcore();
		rc = mc_report(mc);
	}
	for (unsigned i = 0; i < mc->nl; i++)
		free(mc->run[i].rtt_ns);
	dn_port_destroy(mc->port);
	dn_eal_fini();
	free(mc);
	return rc != 0 ? 1 : 0;
}
