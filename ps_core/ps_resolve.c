/*
 * ps_resolve.c — addresses as the system knows them: host names through getaddrinfo (IPv4),
 * each distinct name once, logged, and retried while it does not resolve yet (a Kubernetes
 * service's record appears when its pod starts); and a Linux interface's IPv4 configuration
 * (address, prefix, gateway route) for --data-iface.
 *
 * Call chain: ps_cluster_finalize_with -> ps_cfg_addr_* -> ps_rlist_resolve -> r->lookup
 * (ps_resolve_system: getaddrinfo) and ps_iface_ipv4 (getifaddrs, /proc/net/route);
 * wharf-ctl -> ps_endpoint_resolve. Start-up only: it may sleep between retries.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <net/route.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "ps_core/ps_config_pvt.h"

int ps_resolve_system(void *ctx, const char *name, uint32_t *ip, char *why, size_t whylen)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	int rc;

	(void)ctx;
	rc = getaddrinfo(name, NULL, &hints, &res);
	if (rc != 0) {
		snprintf(why, whylen, "%s", rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return rc == EAI_MEMORY ? -ENOMEM : rc == EAI_AGAIN ? -EAGAIN : -ENOENT;
	}
	*ip = ntohl(((const struct sockaddr_in *)(const void *)res->ai_addr)->sin_addr.s_addr);
	freeaddrinfo(res);
	return 0;
}

/* "wharf.ps" at INFO, the process name first as the other wharf.ps lines of the node have it. */
static void log_info(void *ctx, const char *line)
{
	(void)ctx;
	PS_LOG(INFO, "%s: %s", program_invocation_short_name, line);
}

const struct ps_resolver ps_resolver_default = { ps_resolve_system, log_info, NULL };

void ps_logf(const struct ps_resolver *r, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (r->log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	r->log(r->ctx, line);
}

int ps_rlist_add(struct ps_rlist *l, struct ps_endpoint *ep, const char *what)
{
	if (l->n == l->cap) {
		unsigned cap = l->cap ? 2 * l->cap : 16;
		struct ps_rname *v = realloc(l->v, cap * sizeof(*v));
		if (v == NULL)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].ep = ep;
	snprintf(l->v[l->n].what, sizeof(l->v[l->n].what), "%s", what);
	l->n++;
	return 0;
}

void ps_rlist_free(struct ps_rlist *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* An entry resolved before under the same name (DNS names ignore case), or NULL. */
static const struct ps_endpoint *known(const struct ps_rlist *l, unsigned upto, const char *host)
{
	for (unsigned i = 0; i < upto; i++)
		if (l->v[i].ep->resolved && strcasecmp(l->v[i].ep->host, host) == 0)
			return l->v[i].ep;
	return NULL;
}

/* An entry before i under the same name that failed in this pass. */
static bool failed_before(const struct ps_rlist *l, unsigned i)
{
	for (unsigned j = 0; j < i; j++)
		if (!l->v[j].ep->resolved && strcasecmp(l->v[j].ep->host, l->v[i].ep->host) == 0)
			return true;
	return false;
}

/* One pass: every entry not yet resolved. Returns how many still fail; the first's reason. */
static unsigned pass(struct ps_rlist *l, const struct ps_resolver *r, unsigned *first,
		     char *why, size_t whylen)
{
	unsigned failed = 0;

	for (unsigned i = 0; i < l->n; i++) {
		struct ps_endpoint *ep = l->v[i].ep;
		const struct ps_endpoint *k;
		struct in_addr a;
		char w[256], txt[INET_ADDRSTRLEN];

		if (ep->resolved)
			continue;
		if (inet_pton(AF_INET, ep->host, &a) == 1) {
			ep->ip = ntohl(a.s_addr);
			ep->resolved = true;
		} else if ((k = known(l, l->n, ep->host)) != NULL) {
			ep->ip = k->ip;
			ep->resolved = true;
		} else if (failed_before(l, i)) {
			failed++;
		} else if (r->lookup(r->ctx, ep->host, &ep->ip, w, sizeof(w)) == 0) {
			ep->resolved = true;
			a.s_addr = htonl(ep->ip);
			ps_logf(r, "resolved %s -> %s (%s)", ep->host,
				inet_ntop(AF_INET, &a, txt, sizeof(txt)), l->v[i].what);
		} else {
			if (failed++ == 0) {
				*first = i;
				snprintf(why, whylen, "%s", w);
			}
		}
	}
	return failed;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void list_failed(const struct ps_rlist *l, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < l->n && off < len; i++) {
		const struct ps_rname *e = &l->v[i];
		if (e->ep->resolved || failed_before(l, i))
			continue;
		off += (size_t)snprintf(buf + off, len - off, "%s'%s' (%s)", off ? ", " : "",
					e->ep->host, e->what);
	}
}

int ps_rlist_resolve(struct ps_rlist *l, const struct ps_resolver *r, unsigned wait_s,
		     unsigned retry_s, char *err, size_t errlen)
{
	uint64_t t0 = now_ms(), deadline = t0 + (uint64_t)wait_s * 1000u;
	unsigned first = 0, failed;
	char why[256], names[512];

	for (;;) {
		failed = pass(l, r, &first, why, sizeof(why));
		if (failed == 0)
			return 0;
		uint64_t now = now_ms();
		if (now >= deadline)
			break;
		list_failed(l, names, sizeof(names));
		ps_logf(r, "host name%s not resolved yet (%s), wait %u sec to retry: %s",
			failed == 1 ? "" : "s", why, retry_s, names);
		uint64_t sleep_ms = (uint64_t)retry_s * 1000u;
		if (sleep_ms > deadline - now)
			sleep_ms = deadline - now;
		struct timespec ts = { (time_t)(sleep_ms / 1000u), (long)(sleep_ms % 1000u) * 1000000L };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	return ps_errf_rc(err, errlen, -EHOSTUNREACH, "%s: host name '%s' does not resolve (%s)%s; "
		       "expected an IPv4 address or a name the resolver knows", l->v[first].what,
		       l->v[first].ep->host, why, wait_s > 0 ? ", gave up after wait_timeout_s" : "");
}

int ps_endpoint_resolve(struct ps_endpoint *ep, const struct ps_resolver *r, const char *what,
			char *err, size_t errlen)
{
	struct ps_rlist l = { 0 };
	int rc;

	if (r == NULL)
		r = &ps_resolver_default;
	ep->resolved = false;
	rc = ps_rlist_add(&l, ep, what);
	if (rc != 0)
		return ps_errf_rc(err, errlen, rc, "%s: out of memory", what);
	rc = ps_rlist_resolve(&l, r, 0, 0, err, errlen);
	ps_rlist_free(&l);
	return rc;
}

/* The gateway of name's routes: the default route's, else the lowest metric's; 0 = none. */
static uint32_t route_gateway(const char *name)
{
	FILE *f = fopen("/proc/net/route", "r");
	char line[512], ifn[64];
	unsigned long dst, gw, flags, metric, best_metric = ~0ul;
	uint32_t best = 0;
	bool best_default = false;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		/* Iface Destination Gateway Flags RefCnt Use Metric Mask ...: hex in network order */
		if (sscanf(line, "%63s %lx %lx %lx %*u %*u %lu", ifn, &dst, &gw, &flags, &metric) != 5)
			continue;
		if (strcmp(ifn, name) != 0 || (flags & (RTF_UP | RTF_GATEWAY)) != (RTF_UP | RTF_GATEWAY))
			continue;
		if (best_default && dst != 0)
			continue;
		if ((dst == 0 && !best_default) || metric < best_metric) {
			best = ntohl((uint32_t)gw);
			best_metric = metric;
			best_default = dst == 0;
		}
	}
	fclose(f);
	return best;
}

int ps_iface_ipv4(const char *name, uint32_t *ip, unsigned *prefix, uint32_t *gateway,
		  char *err, size_t errlen)
{
	struct ifaddrs *all, *i;
	bool seen = false;
	uint32_t mask = 0;
	int rc = -EADDRNOTAVAIL;

	if (getifaddrs(&all) != 0)
		return ps_errf_rc(err, errlen, -errno, "interface %s: cannot list interfaces: %s", name,
			       strerror(errno));
	for (i = all; i != NULL; i = i->ifa_next) {
		if (strcmp(i->ifa_name, name) != 0)
			continue;
		seen = true;
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET || i->ifa_netmask == NULL)
			continue;
		*ip = ntohl(((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr.s_addr);
		mask = ntohl(((const struct sockaddr_in *)(const void *)i->ifa_netmask)->sin_addr.s_addr);
		rc = 0;
		break;
	}
	freeifaddrs(all);
	if (!seen && if_nametoindex(name) == 0)
		return ps_errf_rc(err, errlen, -ENODEV, "interface %s: no such interface", name);
	if (rc != 0)
		return ps_errf_rc(err, errlen, rc, "interface %s: has no IPv4 address", name);
	*prefix = (unsigned)__builtin_popcount(mask);
	if (*prefix == 0 || mask != ~0u << (32 - *prefix))
		return ps_errf_rc(err, errlen, -EINVAL, "interface %s: netmask %08x is not a prefix", name,
			       mask);
	*gateway = route_gateway(name);
	return 0;
}
