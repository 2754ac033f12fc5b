/*
 * ps_net_lanes.c — a PS node's serving lanes: NETWORK_PS_CORE_NUMBER network lcores, each
 * with its own transport instance, listener and ps_core handler (the lcore slot that owns
 * shards s with s % lanes == lane), share nothing on the data path (docs/architecture.md, "Threads and the data path").
 *
 * Call chain: ps_net_run_server -> ps_net_lanes_run -> [dpdk: EAL, one port for every lane]
 *   -> lane_main on each lane's thread (lane 0 on the caller's: EAL's main lcore, or the
 *   process's main thread on kernel TCP; the others on EAL worker lcores or pthreads)
 *   -> tl_lanes_open (dpdk: the lane's lcore), ps_net_create, ps_net_serve -> all ready
 *   -> ps_net_serve_loop -> drain, lane 0 checkpoints while the others keep serving their
 *   rings -> teardown (dpdk: every lane quiet, the device stopped, then the instances go).
 *
 * Steering: on a one-queue DPDK port, lane k > 0 listens on data port + k and claims it
 * (transport's steering claims it), so lcore 0 hands that port's segments to lane k; on kernel TCP lane k
 * listens on a port the kernel picks. Lane 0's health answer names them all and a worker
 * connects to each. A request's keys then never cross lanes; what must cross (the sync
 * barrier, hellos, GEO pulls, the checkpoint cut) goes over ps_core's rings, and the
 * wake hook (ps_net_wake_slot) wakes a lane sleeping in its network poll.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ps_core/ps_net_pvt.h"

struct ps_net_group {
	const struct ps_cluster *cl;
	uint32_t lanes;
	struct ps_net *n[PS_NET_MAX_LANES];   /* release-stored by each lane before `ready` */
	struct tl_lanes *tl_lanes;          /* the lanes' threads (dpdk: EAL, the shared port) */
	struct ps_net_params np;
	struct ps_server *ps;
	struct ps_handler *h[PS_NET_MAX_LANES];
	const struct ps_server_config *sc;
	const char *ckpt;
	const sigset_t *sigs;
	cpu_set_t cpus;                     /* where lanes may run (pinning) */
	/* Phase counters, each only grows; partners: the acquire loads in ps_net_group_wait. */
	_Atomic uint32_t ready, failed, drained, quiet;
	_Atomic int stop, saved, stopped;
	int rc[PS_NET_MAX_LANES];
	char err[PS_NET_MAX_LANES][256];
};

bool ps_net_stop_asked(const struct ps_net *n)
{
	/* acquire: partner, the release store in ps_net_group_stop. */
	return n->stop || (n->g != NULL && atomic_load_explicit(&n->g->stop, memory_order_acquire));
}

static struct ps_net *lane_node(struct ps_net_group *g, uint32_t k)
{
	/* acquire: partner, the release store in lane_main once the lane's node exists. */
	return __atomic_load_n(&g->n[k], __ATOMIC_ACQUIRE);
}

/* ps_core's wake hook: an op was queued for slot's shards; its lane may sleep in tl_poll. */
static void ps_net_wake_slot(void *arg, uint32_t slot)
{
	struct ps_net_group *g = arg;
	struct ps_net *n = slot < g->lanes ? lane_node(g, slot) : NULL;

	if (n != NULL)
		tl_wake(n->tl);
}

void ps_net_group_stop(struct ps_net_group *g)
{
	/* release: partner, the acquire in ps_net_stop_asked. */
	atomic_store_explicit(&g->stop, 1, memory_order_release);
	for (uint32_t k = 0; k < g->lanes; k++)
		ps_net_wake_slot(g, k);
}

void ps_net_lanes_drained(struct ps_net *n)
{
	struct ps_net_group *g = n->g;

	atomic_fetch_add_explicit(&g->drained, 1, memory_order_release);
	if (n->lane == 0) /* acquire: partner, the release increment of each lane */
		while (atomic_load_explicit(&g->drained, memory_order_acquire) < g->lanes)
			ps_net_lane_round(n);
}

void ps_net_lanes_saved(struct ps_net *n)
{
	struct ps_net_group *g = n->g;

	if (n->lane == 0) {
		/* release: partner, the acquire below on the other lanes. */
		atomic_store_explicit(&g->saved, 1, memory_order_release);
		for (uint32_t k = 1; k < g->lanes; k++)
			ps_net_wake_slot(g, k);
		return;
	}
	while (!atomic_load_explicit(&g->saved, memory_order_acquire))
		ps_net_lane_round(n);
}

/* ---- status and telemetry ---------------------------------------------------------------- */

/* The lanes of n's node (one when n runs alone), and lane k's node (NULL while it starts). */
static uint32_t node_lanes(const struct ps_net *n)
{
	return n->g != NULL ? n->g->lanes : 1;
}

static const struct ps_net *node_lane(const struct ps_net *n, uint32_t k)
{
	return n->g != NULL ? lane_node(n->g, k) : n;
}

void ps_net_lanes_sum(const struct ps_net *n, struct ps_net_lane_sum *out)
{
	struct ps_lcore_stats st;
	uint32_t lanes = node_lanes(n);

	memset(out, 0, sizeof(*out));
	for (uint32_t k = 0; k < lanes; k++) {
		const struct ps_net *m = node_lane(n, k);
		if (m == NULL)
			continue;
		out->reqs += atomic_load_explicit(&m->pub.reqs, memory_order_relaxed);
		out->errors += atomic_load_explicit(&m->pub.errors, memory_order_relaxed);
		out->dropped += atomic_load_explicit(&m->pub.dropped, memory_order_relaxed);
		out->inflight += atomic_load_explicit(&m->pub.inflight, memory_order_relaxed);
		out->deferred += atomic_load_explicit(&m->pub.deferred, memory_order_relaxed);
		if (n->ps != NULL && ps_server_lcore_stats(n->ps, k, &st) == 0) {
			out->data_ops_remote += st.data_ops_remote;
			out->ctl_ops_remote += st.ctl_ops_remote;
		}
	}
}

void ps_net_lanes_status(const struct ps_net *n, char *out, size_t len, size_t *off)
{
	uint32_t lanes = node_lanes(n);
	struct ps_lcore_stats st;

	for (uint32_t k = 0; k < lanes && *off < len; k++) {
		const struct ps_net *m = node_lane(n, k);
		if (m == NULL || n->ps == NULL || ps_server_lcore_stats(n->ps, k, &st) != 0)
			continue;
		*off += (size_t)snprintf(out + *off, len - *off, "lane   %u  port %u  requests %" PRIu64
			"  errors %" PRIu64 "  data_ops_remote %" PRIu64 "  ctl_ops_remote %" PRIu64
			"  ops_served %" PRIu64 "  cpu %d %s  polls %" PRIu64 "\n", k, m->data_port,
			atomic_load_explicit(&m->pub.reqs, memory_order_relaxed),
			atomic_load_explicit(&m->pub.errors, memory_order_relaxed), st.data_ops_remote,
			st.ctl_ops_remote, st.ops_served,
			atomic_load_explicit(&m->pub.cpu, memory_order_relaxed),
			n->cl->ps_net.disable_pin_cores ? "floating" : "pinned",
			atomic_load_explicit(&m->pub.polls, memory_order_relaxed));
	}
}

void ps_net_lanes_layout(const struct ps_net *n, char *out, size_t len)
{
	uint32_t lanes = node_lanes(n);
	size_t off = (size_t)snprintf(out, len, "lanes %u shards %u ports ", lanes,
				      n->scfg != NULL ? n->scfg->n_shards : 1);

	for (uint32_t k = 0; k < lanes && off < len; k++) {
		const struct ps_net *m = node_lane(n, k);
		off += (size_t)snprintf(out + off, len - off, "%s%u", k ? "," : "",
					m != NULL ? m->data_port : 0);
	}
	/* Lane k reads queue k of a port hashed by dn's RSS: a worker can aim at it. */
	uint32_t reta_size = 0, r;
	uint16_t nq, q;
	for (uint32_t k = 0; lanes > 1 && k < lanes; k++) {
		const struct ps_net *m = node_lane(n, k);
		if (m == NULL || tl_rss_layout(m->tl, &r, &nq, &q) != 0 || nq != lanes || q != k ||
		    (k > 0 && r != reta_size)) {
			reta_size = 0;
			break;
		}
		reta_size = r;
	}
	if (reta_size != 0 && off < len)
		off += (size_t)snprintf(out + off, len - off, " rss %u", reta_size);
	/* The data address: a worker whose .endpoint_map leaves this PS out connects there. */
	if (off < len && n->cl->self_data.resolved) {
		struct in_addr a = { htonl(n->cl->self_data.ip) };
		char ip[INET_ADDRSTRLEN];
		snprintf(out + off, len - off, " addr %s", inet_ntop(AF_INET, &a, ip, sizeof(ip)));
	}
}

/* ---- lanes --------------------------------------------------------------------------------- */

/* Waits (sleeping 100 us at a time) until *ctr reaches want. */
void ps_net_group_wait(_Atomic uint32_t *ctr, uint32_t want)
{
	struct timespec ts = { 0, 100000 };

	/* acquire: partner, the release increments; what a lane did before counting is seen. */
	while (atomic_load_explicit(ctr, memory_order_acquire) < want)
		nanosleep(&ts, NULL);
}

/*
 * {PS,WORKER}_DISABLE_PIN_CORES: pinned (False), lane k runs on the k-th CPU it may use (EAL
 * has already pinned a DPDK lcore to its -l core); floating (True, as DeepRec), every lane
 * may run on any CPU of the set.
 */
void ps_net_lane_affinity(const struct ps_cluster *cl, bool floating, const cpu_set_t *cpus,
		      uint32_t k)
{
	cpu_set_t set;
	int cpu, seen = 0;

	if (floating) {
		pthread_setaffinity_np(pthread_self(), sizeof(*cpus), cpus);
		return;
	}
	if (cl->protocol != PS_PROTO_KERNEL)
		return;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, cpus) && (uint32_t)seen++ == k % (uint32_t)CPU_COUNT(cpus))
			break;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/*
 * The write-ahead log's sync thread: every wal_sync_ms, fdatasync of every lane's segment
 * (ps_server_wal_sync_bg), so no lane waits for the disk; once more when the lanes stop.
 */
struct wal_syncer {
	struct ps_net_group *g;
	pthread_t th;
	_Atomic int stop;
	uint64_t every_us, syncs, errors;
};

static void *wal_syncer_main(void *arg)
{
	struct wal_syncer *y = arg;
	uint64_t next = ps_net_now_us() + y->every_us;
	struct timespec ts = { 0, 1000000 };
	int rc;

	/* acquire: partner, the release store in wal_syncer_stop. */
	while (!atomic_load_explicit(&y->stop, memory_order_acquire)) {
		if (ps_net_now_us() < next) {
			nanosleep(&ts, NULL);
			continue;
		}
		next = ps_net_now_us() + y->every_us;
		if ((rc = ps_server_wal_sync_bg(y->g->ps)) != 0 && y->errors++ == 0)
			PS_LOG(ERR, "%s: log sync: %s", y->g->np.name, strerror(-rc));
		y->syncs++;
	}
	if ((rc = ps_server_wal_sync_bg(y->g->ps)) != 0)
		PS_LOG(ERR, "%s: last log sync: %s", y->g->np.name, strerror(-rc));
	return NULL;
}

struct lane_arg {
	struct ps_net_group *g;
	uint32_t k;
};

/* Lane k's node: the transport on its lcore, its listener; 0 or -errno in g->err[k]. */
static int lane_setup(struct ps_net_group *g, uint32_t k, struct ps_net **out)
{
	struct ps_net_params np = g->np;
	int rc;

	if ((rc = tl_lanes_open(g->tl_lanes, k, &np.backend_arg)) != 0)
		return ps_errf_rc(g->err[k], sizeof(g->err[k]), rc, "lane %u: dpdk lcore: %s",
				   k, strerror(-rc));
	np.lane = k;
	np.lanes = g->lanes;
	if ((rc = ps_net_create(&np, out, g->err[k], sizeof(g->err[k]))) != 0)
		return rc;
	(*out)->g = g;
	return ps_net_serve(*out, g->ps, g->h[k], g->sc, k == 0 ? g->ckpt : NULL, g->err[k],
			    sizeof(g->err[k]));
}

/* DPDK teardown with every lane quiet: the device lets go of every lane's frames first. */
static void lane_quiesce(struct ps_net_group *g, uint32_t k)
{
	struct timespec ts = { 0, 100000 };

	if (!tl_lanes_shared_port(g->tl_lanes))
		return;
	tl_lanes_flush(g->tl_lanes, k);
	atomic_fetch_add_explicit(&g->quiet, 1, memory_order_release);
	if (k != 0) {
		while (!atomic_load_explicit(&g->stopped, memory_order_acquire))
			nanosleep(&ts, NULL);
		return;
	}
	ps_net_group_wait(&g->quiet, g->lanes);
	tl_lanes_port_stop(g->tl_lanes);
	tl_lanes_flush(g->tl_lanes, k); /* frees what waited in our queue, other lanes' too */
	atomic_store_explicit(&g->stopped, 1, memory_order_release);
}

static int lane_main(void *arg)
{
	struct lane_arg *a = arg;
	struct ps_net_group *g = a->g;
	uint32_t k = a->k;
	struct ps_net *n = NULL;
	int rc;

	ps_net_lane_affinity(g->cl, g->cl->ps_net.disable_pin_cores, &g->cpus, k);
	rc = lane_setup(g, k, &n);
	if (rc == 0) {
		atomic_store_explicit(&n->pub.cpu, sched_getcpu(), memory_order_relaxed);
		__atomic_store_n(&g->n[k], n, __ATOMIC_RELEASE);
		atomic_fetch_add_explicit(&g->ready, 1, memory_order_release);
	} else {
		atomic_fetch_add_explicit(&g->failed, 1, memory_order_release);
	}
	/* Every lane listens before any serves: a worker told lane k's port finds it. */
	while (atomic_load_explicit(&g->ready, memory_order_acquire) +
	       atomic_load_explicit(&g->failed, memory_order_acquire) < g->lanes) {
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	if (rc == 0 && atomic_load_explicit(&g->failed, memory_order_acquire) == 0) {
		n->obs_count = lane_node(g, 0)->obs; /* lane 0 made the telemetry slot */
		rc = ps_net_serve_loop(n, k == 0 ? g->sigs : NULL);
		if (rc != 0)
			ps_errf_rc(g->err[k], sizeof(g->err[k]), rc, "lane %u: serving stopped: %s", k,
				strerror(-rc));
	}
	ps_net_group_stop(g);
	lane_quiesce(g, k);
	__atomic_store_n(&g->n[k], NULL, __ATOMIC_RELEASE);
	ps_net_destroy(n);
	tl_lanes_close(g->tl_lanes, k);
	g->rc[k] = rc;
	return 0;
}

int ps_net_lanes_open(const struct ps_cluster *cl, const struct ps_net_params *np,
		      const char *knob, uint32_t *lanes, struct tl_lanes **out, char *err,
		      size_t errlen)
{
	struct tl_lanes_config lc = {
		.protocol = cl->protocol == PS_PROTO_KERNEL ? TL_PROTO_KERNEL : TL_PROTO_DPDK,
		.lanes = *lanes, .eal_argc = np->eal_argc, .eal_argv = np->eal_argv,
		.local_prefix = (uint8_t)cl->data_prefix, .mtu = (uint16_t)cl->mtu,
		.local_gateway = cl->data_gateway.resolved ? cl->data_gateway.ip : 0 };
	int rc;

	if (lc.protocol == TL_PROTO_DPDK &&
	    (rc = ps_net_endpoint_ip(&cl->self_data, &lc.local_ip, err, errlen, "data address")) != 0)
		return rc;
	char why[256];

	if ((rc = tl_lanes_create(&lc, out, why, sizeof(why))) != 0)
		return ps_errf_rc(err, errlen, rc, "cannot start the %s transport: %s%s",
				   lc.protocol == TL_PROTO_DPDK ? "dpdk" : "kernel", why,
				   lc.protocol == TL_PROTO_DPDK ?
				   " (check the EAL arguments before \"--\")" : "");
	if (tl_lanes_count(*out) < *lanes) {
		unsigned have = tl_lanes_count(*out);
		PS_LOG(WARNING, "%s: %s=%u but EAL has %u lcore%s (-l): %u lane%s", np->name, knob,
		       *lanes, have, have == 1 ? "" : "s", have, have == 1 ? "" : "s");
		*lanes = have;
	}
	return 0;
}

uint32_t ps_net_lanes_wanted(const struct ps_cluster *cl)
{
	uint32_t k = cl->ps_net.core_number ? cl->ps_net.core_number : 1;

	return k > PS_NET_MAX_LANES ? PS_NET_MAX_LANES : k;
}

int ps_net_lanes_start(struct ps_net_group **out, const struct ps_cluster *cl,
		   const struct ps_net_params *np, uint32_t *lanes, char *err, size_t errlen)
{
	struct ps_net_group *g = calloc(1, sizeof(*g));
	int rc;

	if (g == NULL)
		return ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	g->cl = cl;
	g->np = *np;
	rc = ps_net_lanes_open(cl, np, "NETWORK_PS_CORE_NUMBER", lanes, &g->tl_lanes, err, errlen);
	if (rc != 0) {
		free(g);
		return rc;
	}
	g->lanes = *lanes;
	tl_lanes_cpus(g->tl_lanes, &g->cpus);
	*out = g;
	return 0;
}

void ps_net_lanes_wake_hook(struct ps_net_group *g, struct ps_server_config *sc)
{
	sc->wake = ps_net_wake_slot;
	sc->wake_arg = g;
}

int ps_net_lanes_run(struct ps_net_group *g, struct ps_server *ps, struct ps_handler **h,
		 const struct ps_server_config *sc, const char *ckpt, const sigset_t *sigs,
		 char *err, size_t errlen)
{
	struct lane_arg args[PS_NET_MAX_LANES];
	uint32_t k;
	int rc = 0;

	struct wal_syncer y = { .g = g, .every_us = (uint64_t)g->cl->wal_sync_ms * 1000u };
	bool syncer = false;

	g->ps = ps;
	g->sc = sc;
	g->ckpt = ckpt;
	g->sigs = sigs;
	if (sc->wal_bg_sync) {
		atomic_init(&y.stop, 0);
		syncer = pthread_create(&y.th, NULL, wal_syncer_main, &y) == 0;
		if (!syncer) /* the lanes then do without: each segment still syncs as it fills */
			PS_LOG(WARNING, "%s: no log sync thread: records reach the disk with "
				"checkpoints only", g->np.name);
	}
	for (k = 0; k < g->lanes; k++) {
		g->h[k] = h[k];
		args[k] = (struct lane_arg){ g, k };
	}
	for (k = 1; k < g->lanes; k++)
		if ((rc = tl_lanes_launch(g->tl_lanes, k, lane_main, &args[k])) != 0) {
			/* Not started: counted as failed, so the others give up too. */
			snprintf(g->err[k], sizeof(g->err[k]), "lane %u: no thread: %s", k,
				 strerror(-rc));
			g->rc[k] = rc;
			atomic_fetch_add_explicit(&g->failed, g->lanes - k, memory_order_release);
			rc = 0;
			break;
		}
	lane_main(&args[0]);
	tl_lanes_join(g->tl_lanes);
	if (syncer) {
		/* release: partner, the acquire in wal_syncer_main. */
		atomic_store_explicit(&y.stop, 1, memory_order_release);
		pthread_join(y.th, NULL);
	}
	for (k = 0; k < g->lanes; k++)
		if (g->rc[k] != 0 && rc == 0) {
			rc = g->rc[k];
			snprintf(err, errlen, "%s", g->err[k]);
		}
	return rc;
}

void ps_net_lanes_fini(struct ps_net_group *g)
{
	if (g == NULL)
		return;
	tl_lanes_destroy(g->tl_lanes);
	free(g);
}
