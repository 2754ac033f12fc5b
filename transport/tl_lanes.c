/*
 * tl_lanes.c — a process's network lanes: the threads that each drive one struct tl over one
 * data port, so the layers above never bring up EAL, a port or an lcore themselves.
 *
 * protocol=dpdk: tl_lanes_create starts EAL from the caller's arguments and one port with a
 * queue per lane (dn_port_create); lane k runs on EAL's k-th lcore (lane 0 on the main one),
 * opens its dpdk_net lcore from its own thread (tl_lanes_open) and hands it to tl_create as
 * backend_arg. Software steering on a one-queue port, or RSS on a multi-queue one, brings
 * each lane its own flows (dpdk_net, tl_steer.c). protocol=kernel: nothing is shared; lane
 * k > 0 is a pthread and tl_create opens its own epoll loop.
 *
 * Call chain: ps_core's lanes (ps_net_lanes.c, ps_net_wlanes.c) -> tl_lanes_create ->
 *   tl_lanes_launch(k, fn) for k > 0 and fn on the caller's thread for lane 0 ->
 *   fn: tl_lanes_open -> tl_create(backend_arg) -> ... -> tl_destroy -> tl_lanes_flush,
 *   tl_lanes_close; the caller: tl_lanes_port_stop once every lane is quiet -> tl_lanes_join
 *   -> tl_lanes_destroy.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_launch.h>
#include <rte_lcore.h>

#include "dpdk_net/dn.h"
#include "transport/tl.h"

struct tl_lanes {
	enum tl_protocol protocol;
	uint32_t lanes;
	struct dn_port *port;                  /* dpdk: the port every lane shares */
	struct dn_lcore *lc[TL_LANES_MAX];     /* dpdk: lane k's lcore, set by lane k */
	pthread_t th[TL_LANES_MAX];            /* kernel: lane k's thread */
	bool th_on[TL_LANES_MAX];
	bool launched;                         /* dpdk: some lane runs on a worker lcore */
	struct tl_lane_run { int (*fn)(void *); void *arg; } run[TL_LANES_MAX]; /* kernel */
};

int tl_lanes_create(const struct tl_lanes_config *cfg, struct tl_lanes **out, char *err,
		    size_t errlen)
{
	struct dn_config dc = { .port_id = DN_PORT_AUTO, .prefix_len = cfg->local_prefix,
				.idle = DN_IDLE_SLEEP, .mtu = cfg->mtu ? cfg->mtu : 1500,
				.gateway = cfg->local_gateway, .ip = cfg->local_ip,
				.nb_queues = DN_QUEUES_PER_LCORE };
	struct tl_lanes *g;
	int rc;

	if (cfg->lanes == 0 || cfg->lanes > TL_LANES_MAX) {
		snprintf(err, errlen, "%u lanes; expected 1..%u", cfg->lanes, TL_LANES_MAX);
		return -EINVAL;
	}
	if ((g = calloc(1, sizeof(*g))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	g->protocol = cfg->protocol;
	g->lanes = cfg->lanes;
	if (cfg->protocol == TL_PROTO_DPDK) {
		rc = dn_eal_init(cfg->eal_argc, cfg->eal_argv, err, errlen);
		if (rc < 0) {
			free(g);
			return rc;
		}
		if (rte_lcore_count() < g->lanes)
			g->lanes = rte_lcore_count(); /* the caller says so, naming its knob */
		dn_obs_init();
		dc.nb_lcores = (uint16_t)g->lanes;
		if ((rc = dn_port_create(&dc, &g->port, err, errlen)) != 0) {
			dn_eal_fini();
			free(g);
			return rc;
		}
	}
	*out = g;
	return 0;
}

uint32_t tl_lanes_count(const struct tl_lanes *g)
{
	return g->lanes;
}

bool tl_lanes_shared_port(const struct tl_lanes *g)
{
	return g->port != NULL;
}

void tl_lanes_destroy(struct tl_lanes *g)
{
	if (g == NULL)
		return;
	for (uint32_t k = 0; k < TL_LANES_MAX; k++)
		dn_lcore_destroy(g->lc[k]);
	if (g->port != NULL) {
		dn_port_destroy(g->port);
		dn_eal_fini();
	}
	free(g);
}

int tl_lanes_open(struct tl_lanes *g, uint32_t k, void **backend_arg)
{
	int rc;

	*backend_arg = NULL;
	if (g->port == NULL)
		return 0;
	if ((rc = dn_lcore_create(g->port, (uint16_t)k, NULL, &g->lc[k])) != 0)
		return rc;
	dn_obs_register(g->lc[k]);
	if (k == 0) /* the peers learn our address from lane 0, which owns the queue's Rx */
		dn_arp_announce(g->lc[k]);
	*backend_arg = g->lc[k];
	return 0;
}

void tl_lanes_flush(struct tl_lanes *g, uint32_t k)
{
	if (g->lc[k] != NULL)
		dn_tx_flush(g->lc[k]);
}

void tl_lanes_close(struct tl_lanes *g, uint32_t k)
{
	dn_lcore_destroy(g->lc[k]);
	g->lc[k] = NULL;
}

void tl_lanes_port_stop(struct tl_lanes *g)
{
	if (g->port != NULL)
		dn_port_stop(g->port);
}

void tl_lanes_cpus(const struct tl_lanes *g, cpu_set_t *cpus)
{
	unsigned lcore;

	CPU_ZERO(cpus);
	if (g->port == NULL) {
		sched_getaffinity(0, sizeof(*cpus), cpus);
		return;
	}
	RTE_LCORE_FOREACH(lcore) {
		rte_cpuset_t cs = rte_lcore_cpuset(lcore);
		CPU_OR(cpus, cpus, &cs);
	}
}

static void *lane_thread(void *arg)
{
	struct tl_lane_run *r = arg;

	r->fn(r->arg);
	return NULL;
}

int tl_lanes_launch(struct tl_lanes *g, uint32_t k, int (*fn)(void *), void *arg)
{
	unsigned lcore, i = 0;

	if (k == 0 || k >= g->lanes)
		return -EINVAL;
	if (g->port != NULL) {
		RTE_LCORE_FOREACH_WORKER(lcore) {
			if (++i < k)
				continue;
			if (rte_eal_remote_launch(fn, arg, lcore) != 0)
				return -EBUSY;
			g->launched = true;
			return 0;
		}
		return -ENODEV;
	}
	g->run[k].fn = fn;
	g->run[k].arg = arg;
	if (pthread_create(&g->th[k], NULL, lane_thread, &g->run[k]) != 0)
		return -EAGAIN;
	g->th_on[k] = true;
	return 0;
}

void tl_lanes_join(struct tl_lanes *g)
{
	if (g->launched) {
		rte_eal_mp_wait_lcore();
		g->launched = false;
	}
	for (uint32_t k = 1; k < TL_LANES_MAX; k++)
		if (g->th_on[k]) {
			pthread_join(g->th[k], NULL);
			g->th_on[k] = false;
		}
}
