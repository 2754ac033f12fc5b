/*
 * wc_psnet_lanes.c — a PS node's serving lanes: NETWORK_PS_CORE_NUMBER network lcores, each
 * with its own transport instance, listener and ps_core handler (the lcore slot that owns
 * shards s with s % lanes == lane), share nothing on the data path (docs/architecture.md, "Threads and the data path").
 *
 * Call chain: wc_psnet_run_server -> wn_lanes_run -> [dpdk: EAL, one port for every lane]
 *   -> lane_main on each lane's thread (lane 0 on the caller's: EAL's main lcore, or the
 *   process's main thread on kernel TCP; the others on EAL worker lcores or pthreads)
 *   -> dn_lcore_create (dpdk), wc_psnet_create, wc_psnet_serve -> all ready
 *   -> wc_psnet_serve_loop -> drain, lane 0 checkpoints while the others keep serving their
 *   rings -> teardown (dpdk: every lane quiet, the device stopped, then the instances go).
 *
 * Steering: on a one-queue DPDK port, lane k > 0 listens on data port + k and claims it
 * (dn_steer_claim), so lcore 0 hands that port's segments to lane k; on kernel TCP lane k
 * listens on a port the kernel picks. Lane 0's health answer names them all and a worker
 * connects to each. A request's keys then never cross lanes; what must cross (the sync
 * barrier, hellos, GEO pulls, the checkpoint cut) goes over ps_core's rings, and the
 * wake hook (wn_wake_slot) wakes a lane sleeping in its network poll.
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

#include <rte_launch.h>
#include <rte_lcore.h>

#include "apps/common/wc_psnet_pvt.h"
#include "dpdk_net/dn.h"

struct wn_group {
	const struct wc_cluster *cl;
	uint32_t lanes;
	struct wc_psnet *n[WN_MAX_LANES];   /* release-stored by each lane before `ready` */
	struct dn_port *port;               /* dpdk: the port every lane shares */
	struct wc_psnet_params np;
	struct ps_server *ps;
	struct ps_handler *h[WN_MAX_LANES];
	const struct ps_server_config *sc;
	const char *ckpt;
	const sigset_t *sigs;
	cpu_set_t cpus;                     /* where lanes may run (pinning) */
	/* Phase counters, each only grows; partners: the acquire loads in wn_group_wait. */
	_Atomic uint32_t ready, failed, drained, quiet;
	_Atomic int stop, saved, stopped;
	int rc[WN_MAX_LANES];
	char err[WN_MAX_LANES][256];
};

bool wn_stopping(const struct wc_psnet *n)
{
	/* acquire: partner, the release store in wn_group_stop. */
	return n->stop || (n->g != NULL && atomic_load_explicit(&n->g->stop, memory_order_acquire));
}

static struct wc_psnet *lane_node(struct wn_group *g, uint32_t k)
{
	/* acquire: partner, the release store in lane_main once the lane's node exists. */
	return __atomic_load_n(&g->n[k], __ATOMIC_ACQUIRE);
}

/* ps_core's wake hook: an op was queued for slot's shards; its lane may sleep in tl_poll. */
static void wn_wake_slot(void *arg, uint32_t slot)
{
	struct wn_group *g = arg;
	struct wc_psnet *n = slot < g->lanes ? lane_node(g, slot) : NULL;

	if (n != NULL)
		tl_wake(n->tl);
}

void wn_group_stop(struct wn_group *g)
{
	/* release: partner, the acquire in wn_stopping. */
	atomic_store_explicit(&g->stop, 1, memory_order_release);
	for (uint32_t k = 0; k < g->lanes; k++)
		wn_wake_slot(g, k);
}

void wn_lanes_drained(struct wc_psnet *n)
{
	struct wn_group *g = n->g;

	atomic_fetch_add_explicit(&g->drained, 1, memory_order_release);
	if (n->lane == 0) /* acquire: partner, the release increment of each lane */
		while (atomic_load_explicit(&g->drained, memory_order_acquire) < g->lanes)
			wn_lane_round(n);
}

void wn_lanes_saved(struct wc_psnet *n)
{
	struct wn_group *g = n->g;

	if (n->lane == 0) {
		/* release: partner, the acquire below on the other lanes. */
		atomic_store_explicit(&g->saved, 1, memory_order_release);
		for (uint32_t k = 1; k < g->lanes; k++)
			wn_wake_slot(g, k);
		return;
	}
	while (!atomic_load_explicit(&g->saved, memory_order_acquire))
		wn_lane_round(n);
}

/* ---- status and telemetry ---------------------------------------------------------------- */

/* The lanes of n's node (one when n runs alone), and lane k's node (NULL while it starts). */
static uint32_t node_lanes(const struct wc_psnet *n)
{
	return n->g != NULL ? n->g->lanes : 1;
}

static const struct wc_psnet *node_lane(const struct wc_psnet *n, uint32_t k)
{
	return n->g != NULL ? lane_node(n->g, k) : n;
}

void wn_lanes_sum(const struct wc_psnet *n, struct wn_lane_sum *out)
{
	struct ps_lcore_stats st;
	uint32_t lanes = node_lanes(n);

	memset(out, 0, sizeof(*out));
	for (uint32_t k = 0; k < lanes; k++) {
		const struct wc_psnet *m = node_lane(n, k);
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

void wn_lanes_status(const struct wc_psnet *n, char *out, size_t len, size_t *off)
{
	uint32_t lanes = node_lanes(n);
	struct ps_lcore_stats st;

	for (uint32_t k = 0; k < lanes && *off < len; k++) {
		const struct wc_psnet *m = node_lane(n, k);
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

void wn_lanes_layout(const struct wc_psnet *n, char *out, size_t len)
{
	uint32_t lanes = node_lanes(n);
	size_t off = (size_t)snprintf(out, len, "lanes %u shards %u ports ", lanes,
				      n->scfg != NULL ? n->scfg->n_shards : 1);

	for (uint32_t k = 0; k < lanes && off < len; k++) {
		const struct wc_psnet *m = node_lane(n, k);
		off += (size_t)snprintf(out + off, len - off, "%s%u", k ? "," : "",
					m != NULL ? m->data_port : 0);
	}
	/* The data address: a worker whose .endpoint_map leaves this PS out connects there. */
	if (off < len && n->cl->self_data.resolved) {
		struct in_addr a = { htonl(n->cl->self_data.ip) };
		char ip[INET_ADDRSTRLEN];
		snprintf(out + off, len - off, " addr %s", inet_ntop(AF_INET, &a, ip, sizeof(ip)));
	}
}

/* ---- lanes --------------------------------------------------------------------------------- */

/* Waits (sleeping 100 us at a time) until *ctr reaches want. */
void wn_group_wait(_Atomic uint32_t *ctr, uint32_t want)
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
void wn_lane_affinity(const struct wc_cluster *cl, bool floating, const cpu_set_t *cpus,
		      uint32_t k)
{
	cpu_set_t set;
	int cpu, seen = 0;

	if (floating) {
		pthread_setaffinity_np(pthread_self(), sizeof(*cpus), cpus);
		return;
	}
	if (cl->protocol != WC_PROTO_KERNEL)
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
	struct wn_group *g;
	pthread_t th;
	_Atomic int stop;
	uint64_t every_us, syncs, errors;
};

static void *wal_syncer_main(void *arg)
{
	struct wal_syncer *y = arg;
	uint64_t next = wn_now_us() + y->every_us;
	struct timespec ts = { 0, 1000000 };
	int rc;

	/* acquire: partner, the release store in wal_syncer_stop. */
	while (!atomic_load_explicit(&y->stop, memory_order_acquire)) {
		if (wn_now_us() < next) {
			nanosleep(&ts, NULL);
			continue;
		}
		next = wn_now_us() + y->every_us;
		if ((rc = ps_server_wal_sync_bg(y->g->ps)) != 0 && y->errors++ == 0)
			WC_LOG(ERR, "%s: log sync: %s", y->g->np.name, strerror(-rc));
		y->syncs++;
	}
	if ((rc = ps_server_wal_sync_bg(y->g->ps)) != 0)
		WC_LOG(ERR, "%s: last log sync: %s", y->g->np.name, strerror(-rc));
	return NULL;
}

struct lane_arg {
	struct wn_group *g;
	uint32_t k;
};

/* Lane k's node: the transport on its lcore, its listener; 0 or -errno in g->err[k]. */
static int lane_setup(struct wn_group *g, uint32_t k, struct dn_lcore **lc, struct wc_psnet **out)
{
	struct wc_psnet_params np = g->np;
	int rc;

	if (g->port != NULL) {
		if ((rc = dn_lcore_create(g->port, (uint16_t)k, NULL, lc)) != 0)
			return wn_errf(g->err[k], sizeof(g->err[k]), rc, "lane %u: dpdk lcore: %s",
				       k, strerror(-rc));
		dn_obs_register(*lc);
		if (k == 0)
			dn_arp_announce(*lc);
	}
	np.lane = k;
	np.lanes = g->lanes;
	np.backend_arg = *lc;
	if ((rc = wc_psnet_create(&np, out, g->err[k], sizeof(g->err[k]))) != 0)
		return rc;
	(*out)->g = g;
	return wc_psnet_serve(*out, g->ps, g->h[k], g->sc, k == 0 ? g->ckpt : NULL, g->err[k],
			      sizeof(g->err[k]));
}

/* DPDK teardown with every lane quiet: the device lets go of every lane's frames first. */
static void lane_quiesce(struct wn_group *g, uint32_t k, struct dn_lcore *lc)
{
	struct timespec ts = { 0, 100000 };

	if (g->port == NULL)
		return;
	if (lc != NULL)
		dn_tx_flush(lc);
	atomic_fetch_add_explicit(&g->quiet, 1, memory_order_release);
	if (k != 0) {
		while (!atomic_load_explicit(&g->stopped, memory_order_acquire))
			nanosleep(&ts, NULL);
		return;
	}
	wn_group_wait(&g->quiet, g->lanes);
	dn_port_stop(g->port);
	if (lc != NULL)
		dn_tx_flush(lc); /* frees what waited in our queue, other lanes' frames included */
	atomic_store_explicit(&g->stopped, 1, memory_order_release);
}

static int lane_main(void *arg)
{
	struct lane_arg *a = arg;
	struct wn_group *g = a->g;
	uint32_t k = a->k;
	struct dn_lcore *lc = NULL;
	struct wc_psnet *n = NULL;
	int rc;

	wn_lane_affinity(g->cl, g->cl->ps_net.disable_pin_cores, &g->cpus, k);
	rc = lane_setup(g, k, &lc, &n);
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
		rc = wc_psnet_serve_loop(n, k == 0 ? g->sigs : NULL);
		if (rc != 0)
			wn_errf(g->err[k], sizeof(g->err[k]), rc, "lane %u: serving stopped: %s", k,
				strerror(-rc));
	}
	wn_group_stop(g);
	lane_quiesce(g, k, lc);
	__atomic_store_n(&g->n[k], NULL, __ATOMIC_RELEASE);
	wc_psnet_destroy(n);
	dn_lcore_destroy(lc);
	g->rc[k] = rc;
	return 0;
}

static void *lane_thread(void *arg)
{
	lane_main(arg);
	return NULL;
}

int wn_lanes_port(const struct wc_cluster *cl, const struct wc_psnet_params *np,
		  const char *knob, uint32_t *lanes, struct dn_port **port, char *err, size_t errlen)
{
	struct dn_config dc = { .port_id = DN_PORT_AUTO, .prefix_len = (uint8_t)cl->data_prefix,
				.idle = DN_IDLE_SLEEP, .mtu = (uint16_t)cl->mtu,
				.gateway = cl->data_gateway.resolved ? cl->data_gateway.ip : 0 };
	int rc;

	if ((rc = wn_endpoint_ip(&cl->self_data, &dc.ip, err, errlen, "data address")) != 0)
		return rc;
	rc = dn_eal_init(np->eal_argc, np->eal_argv, err, errlen);
	if (rc < 0)
		return wn_errf(err, errlen, rc, "cannot start the dpdk transport: %s (check the EAL "
			       "arguments before \"--\")", err);
	if (rte_lcore_count() < *lanes) {
		unsigned have = rte_lcore_count();
		WC_LOG(WARNING, "%s: %s=%u but EAL has %u lcore%s (-l): %u lane%s", np->name, knob,
		       *lanes, have, have == 1 ? "" : "s", have, have == 1 ? "" : "s");
		*lanes = rte_lcore_count();
	}
	dn_obs_init();
	dc.nb_lcores = (uint16_t)*lanes;
	rc = dn_port_create(&dc, port, err, errlen);
	if (rc != 0) {
		dn_eal_fini();
		return rc;
	}
	return 0;
}

void wn_lanes_cpus(const struct dn_port *port, cpu_set_t *cpus)
{
	unsigned lcore;

	CPU_ZERO(cpus);
	if (port == NULL) {
		sched_getaffinity(0, sizeof(*cpus), cpus);
		return;
	}
	RTE_LCORE_FOREACH(lcore) {
		rte_cpuset_t cs = rte_lcore_cpuset(lcore);
		CPU_OR(cpus, cpus, &cs);
	}
}

uint32_t wn_lanes_wanted(const struct wc_cluster *cl)
{
	uint32_t k = cl->ps_net.core_number ? cl->ps_net.core_number : 1;

	return k > WN_MAX_LANES ? WN_MAX_LANES : k;
}

int wn_lanes_start(struct wn_group **out, const struct wc_cluster *cl,
		   const struct wc_psnet_params *np, uint32_t *lanes, char *err, size_t errlen)
{
	struct wn_group *g = calloc(1, sizeof(*g));
	int rc;

	if (g == NULL)
		return wn_errf(err, errlen, -ENOMEM, "out of memory");
	g->cl = cl;
	g->np = *np;
	if (cl->protocol != WC_PROTO_KERNEL &&
	    (rc = wn_lanes_port(cl, np, "NETWORK_PS_CORE_NUMBER", lanes, &g->port, err,
				errlen)) != 0) {
		free(g);
		return rc;
	}
	g->lanes = *lanes;
	wn_lanes_cpus(g->port, &g->cpus);
	*out = g;
	return 0;
}

void wn_lanes_wake_hook(struct wn_group *g, struct ps_server_config *sc)
{
	sc->wake = wn_wake_slot;
	sc->wake_arg = g;
}

int wn_lanes_run(struct wn_group *g, struct ps_server *ps, struct ps_handler **h,
		 const struct ps_server_config *sc, const char *ckpt, const sigset_t *sigs,
		 char *err, size_t errlen)
{
	struct lane_arg args[WN_MAX_LANES];
	pthread_t th[WN_MAX_LANES];
	uint32_t k, started = 1;
	unsigned lcore;
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
			WC_LOG(WARNING, "%s: no log sync thread: records reach the disk with "
				"checkpoints only", g->np.name);
	}
	for (k = 0; k < g->lanes; k++) {
		g->h[k] = h[k];
		args[k] = (struct lane_arg){ g, k };
	}
	if (g->port != NULL) {
		k = 1;
		RTE_LCORE_FOREACH_WORKER(lcore) {
			if (k >= g->lanes)
				break;
			rte_eal_remote_launch(lane_main, &args[k++], lcore);
		}
		lane_main(&args[0]);
		rte_eal_mp_wait_lcore();
	} else {
		for (k = 1; k < g->lanes; k++, started++)
			if (pthread_create(&th[k], NULL, lane_thread, &args[k]) != 0) {
				/* Not started: counted as failed, so the others give up too. */
				snprintf(g->err[k], sizeof(g->err[k]), "lane %u: no thread", k);
				g->rc[k] = -EAGAIN;
				atomic_fetch_add_explicit(&g->failed, g->lanes - k, memory_order_release);
				break;
			}
		lane_main(&args[0]);
		for (k = 1; k < started; k++)
			pthread_join(th[k], NULL);
	}
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

void wn_lanes_fini(struct wn_group *g)
{
	if (g == NULL)
		return;
	if (g->port != NULL) {
		dn_port_destroy(g->port);
		dn_eal_fini();
	}
	free(g);
}
