/*
 * ps_cfg_addr.c — the addresses a node uses, resolved once at start-up, and its data plane:
 * address, prefix and gateway, from the flags/file/environment, the .endpoint_map, or the
 * Linux interface --data-iface names.
 *
 * Call chain: ps_cluster_finalize_with -> ps_cfg_addr_task (a Paddle PSERVER's index by
 * address), then ps_cfg_addr_node -> ps_rlist_resolve (ps_resolve.c), ps_iface_ipv4.
 *
 * Only what this node uses is resolved: its own control endpoint; a worker's servers (control
 * and, where the map names them, data); its data address and gateway. A PS does not wait for
 * the workers' names, which in Kubernetes appear only when their pods start.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ps_core/ps_config_pvt.h"

#define WHAT_LEN (PS_PATH_LEN + 64)

static const char *ipstr(uint32_t ip, char *buf, size_t len)
{
	struct in_addr a = { htonl(ip) };

	return inet_ntop(AF_INET, &a, buf, (socklen_t)len);
}

static int add_list(struct ps_rlist *l, struct ps_cluster *c, enum ps_field f,
		    struct ps_endpoint *ep, unsigned i, char *err, size_t errlen)
{
	char src[WHAT_LEN], what[WHAT_LEN + 16];

	snprintf(what, sizeof(what), "%s[%u]", ps_field_source(c, f, src, sizeof(src)), i);
	if (ps_rlist_add(l, ep, what) != 0)
		return ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	return 0;
}

int ps_cfg_addr_task(struct ps_cluster *c, const struct ps_resolver *r, char *err, size_t errlen)
{
	struct ps_rlist l = { 0 };
	char src[WHAT_LEN], list[WHAT_LEN];
	unsigned i;
	int rc = 0;

	if (!c->task_by_ep)
		return 0;
	for (i = 0; i < c->n_ps && rc == 0; i++)
		rc = add_list(&l, c, PS_F_PS, &c->ps[i], i, err, errlen);
	if (rc == 0 && ps_rlist_add(&l, &c->task_ep, ps_field_source(c, PS_F_TASK_INDEX, src,
								      sizeof(src))) != 0)
		rc = ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	if (rc == 0)
		rc = ps_rlist_resolve(&l, r, c->wait_timeout_s, c->retry_interval_s, err, errlen);
	ps_rlist_free(&l);
	if (rc != 0)
		return rc;
	for (i = 0; i < c->n_ps; i++)
		if (c->ps[i].ip == c->task_ep.ip && c->ps[i].port == c->task_ep.port)
			break;
	if (i == c->n_ps)
		return ps_errf_rc(err, errlen, -EINVAL, "%s %s:%u is not in %s, its names resolved; "
			       "expected one of its entries", src, c->task_ep.host, c->task_ep.port,
			       ps_field_source(c, PS_F_PS, list, sizeof(list)));
	c->task_index = i;
	c->task_by_ep = false;
	return 0;
}

/* Two servers' control endpoints that resolved to the same address and port. */
static int check_same(const struct ps_cluster *c, char *err, size_t errlen)
{
	for (unsigned i = 0; i < c->n_ps; i++)
		for (unsigned j = i + 1; j < c->n_ps; j++)
			if (c->ps[i].resolved && c->ps[j].resolved && c->ps[i].ip == c->ps[j].ip &&
			    c->ps[i].port == c->ps[j].port)
				return ps_errf_rc(err, errlen, -EINVAL, "ps %u (%s:%u) and ps %u (%s:%u) "
					       "resolve to the same endpoint; expected one per node",
					       i, c->ps[i].host, c->ps[i].port, j, c->ps[j].host,
					       c->ps[j].port);
	return 0;
}

/* Every endpoint this node uses, into l. */
static int collect(struct ps_cluster *c, struct ps_rlist *l, char *err, size_t errlen)
{
	bool dpdk = c->protocol == PS_PROTO_DPDK, ps = c->role == PS_ROLE_PS;
	unsigned i, k = c->task_index;
	char src[WHAT_LEN], what[WHAT_LEN + 64];
	const char *map = c->endpoint_map;
	int rc = 0;

	if (ps)
		rc = add_list(l, c, PS_F_PS, &c->ps[k], k, err, errlen);
	else if (k < c->n_worker_addrs)
		rc = add_list(l, c, PS_F_WORKERS, &c->worker[k], k, err, errlen);
	for (i = 0; !ps && i < c->n_ps && rc == 0; i++) {
		rc = add_list(l, c, PS_F_PS, &c->ps[i], i, err, errlen);
		if (rc != 0 || c->ps_data[i].host[0] == '\0')
			continue;
		/* kernel: a copy of the control endpoint; dpdk: the map's line */
		if (dpdk)
			snprintf(what, sizeof(what), "%s, ps %u data address", map, i);
		else
			snprintf(what, sizeof(what), "%s[%u]", ps_field_source(c, PS_F_PS, src,
									       sizeof(src)), i);
		if (ps_rlist_add(l, &c->ps_data[i], what) != 0)
			rc = ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	}
	if (rc == 0 && c->have_self_data) {
		if (ps_has(c, PS_F_DATA_ADDR))
			ps_field_source(c, PS_F_DATA_ADDR, what, sizeof(what));
		else if (dpdk)
			snprintf(what, sizeof(what), "%s, this node's data address", map);
		else
			snprintf(what, sizeof(what), "%s[%u]", ps_field_source(c, ps ? PS_F_PS :
				 PS_F_WORKERS, src, sizeof(src)), k);
		if (ps_rlist_add(l, &c->self_data, what) != 0)
			rc = ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	}
	if (rc == 0 && dpdk && c->data_gateway.host[0] != '\0' &&
	    ps_rlist_add(l, &c->data_gateway, ps_field_source(c, PS_F_DATA_GATEWAY, src,
							       sizeof(src))) != 0)
		rc = ps_errf_rc(err, errlen, -ENOMEM, "out of memory");
	return rc;
}

/* protocol=dpdk: the address (else from the interface), prefix and gateway; checked. */
static int data_plane(struct ps_cluster *c, const struct ps_resolver *r, char *err,
		      size_t errlen)
{
	const struct ps_endpoint *ctl = c->role == PS_ROLE_PS ? &c->ps[c->task_index] :
					c->task_index < c->n_worker_addrs ? &c->worker[c->task_index] :
					NULL;
	uint32_t ip = 0, gw = 0, mask;
	unsigned prefix = 0;
	char src[WHAT_LEN], e[300], a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN];
	bool iface = c->data_iface[0] != '\0';
	int rc;

	if (iface && (rc = ps_iface_ipv4(c->data_iface, &ip, &prefix, &gw, e, sizeof(e))) != 0)
		return ps_errf_rc(err, errlen, rc, "%s: %s; expected a Linux interface with an IPv4 "
			       "address (the data port's)", ps_field_source(c, PS_F_DATA_IFACE, src,
			       sizeof(src)), e);
	if (!c->have_self_data && !iface)
		return ps_errf_rc(err, errlen, -EINVAL, "this node (%s %u) has no data address; "
			       "protocol=dpdk expects a line for it in .endpoint_map, --data-addr "
			       "or --data-iface", ps_role_name(c->role), c->task_index);
	if (!c->have_self_data) {
		memset(&c->self_data, 0, sizeof(c->self_data));
		ipstr(ip, c->self_data.host, sizeof(c->self_data.host));
		c->self_data.port = ctl != NULL ? ctl->port : 0;
		c->self_data.ip = ip;
		c->self_data.resolved = true;
		c->have_self_data = true;
	}
	if (!ps_has(c, PS_F_DATA_PREFIX))
		c->data_prefix = iface ? prefix : PS_DEF_DATA_PREFIX;
	if (!ps_has(c, PS_F_DATA_GATEWAY) && iface && gw != 0) {
		memset(&c->data_gateway, 0, sizeof(c->data_gateway));
		ipstr(gw, c->data_gateway.host, sizeof(c->data_gateway.host));
		c->data_gateway.ip = gw;
		c->data_gateway.resolved = true;
	}
	ip = c->self_data.ip;
	gw = c->data_gateway.resolved ? c->data_gateway.ip : 0;
	mask = ~0u << (32 - c->data_prefix);
	if (gw != 0 && ((gw ^ ip) & mask) != 0)
		return ps_errf_rc(err, errlen, -EINVAL, "data gateway %s (%s) is not on this node's data "
			       "subnet %s/%u; expected an address inside it", c->data_gateway.host,
			       ps_has(c, PS_F_DATA_GATEWAY) ? ps_field_source(c, PS_F_DATA_GATEWAY, src,
			       sizeof(src)) : c->data_iface, ipstr(ip & mask, a, sizeof(a)),
			       c->data_prefix);
	if (gw != 0 && gw == ip)
		return ps_errf_rc(err, errlen, -EINVAL, "data gateway %s is this node's own data address; "
			       "expected the subnet's router", c->data_gateway.host);
	if (iface)
		ps_logf(r, "data plane %s:%u/%u, gateway %s (interface %s from %s)",
			ipstr(ip, a, sizeof(a)), c->self_data.port, c->data_prefix,
			gw != 0 ? ipstr(gw, g, sizeof(g)) : "none", c->data_iface,
			ps_field_source(c, PS_F_DATA_IFACE, src, sizeof(src)));
	return 0;
}

int ps_cfg_addr_node(struct ps_cluster *c, const struct ps_resolver *r, char *err, size_t errlen)
{
	struct ps_rlist l = { 0 };
	int rc;

	rc = collect(c, &l, err, errlen);
	if (rc == 0)
		rc = ps_rlist_resolve(&l, r, c->wait_timeout_s, c->retry_interval_s, err, errlen);
	ps_rlist_free(&l);
	if (rc == 0)
		rc = check_same(c, err, errlen);
	if (rc == 0 && c->protocol == PS_PROTO_DPDK)
		rc = data_plane(c, r, err, errlen);
	return rc;
}
