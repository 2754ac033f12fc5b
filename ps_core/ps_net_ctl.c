/*
 * ps_net_ctl.c — the control plane's client side: one command to one node's control
 * endpoint over kernel TCP (a private kernel transport instance per request: the control
 * plane is rare, so simplicity wins over reuse).
 *
 * Call chain: wharf-ctl main | ps_net_cli.c readiness check -> ps_ctl_request -> tl_create
 *   (kernel) -> tl_connect -> tl_send(PS_T_CTL) -> tl_poll until PS_T_CTL_R -> tl_destroy.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ps_core/ps_net_pvt.h"

struct ctl_req {
	int up;        /* 0 connecting, 1 up, -1 failed/closed */
	int reason;
	bool answered;
	char *out;
	size_t outlen;
};

static void ctl_connected(struct tl_conn *c, int status)
{
	struct ctl_req *r = tl_conn_ctx(c);

	r->up = status == 0 ? 1 : -1;
	r->reason = status;
}

static void ctl_msg(struct tl_conn *c, const struct tl_msg_view *m)
{
	struct ctl_req *r = tl_conn_ctx(c);
	uint32_t n = m->hdr.body_len;

	if (r->outlen == 0)
		return;
	if (m->hdr.type != PS_T_CTL_R) {
		snprintf(r->out, r->outlen, "error the node answered message type %u, not a "
			 "control reply", m->hdr.type);
	} else {
		if (n >= r->outlen)
			n = (uint32_t)r->outlen - 1;
		tl_view_copy(m, 0, r->out, n);
		r->out[n] = '\0';
	}
	r->answered = true;
}

static void ctl_closed(struct tl_conn *c, int reason)
{
	struct ctl_req *r = tl_conn_ctx(c);

	r->up = -1;
	r->reason = reason;
}

static const struct tl_conn_ops ctl_ops = { ctl_connected, ctl_msg, ctl_closed };

int ps_ctl_request(const struct ps_endpoint *ep, const char *token, const char *cmd,
		   int timeout_ms, char *out, size_t outlen, char *err, size_t errlen)
{
	struct ctl_req r = { .out = out, .outlen = outlen };
	struct tl_msg_hdr h = { .type = PS_T_CTL, .req_id = 1 };
	char line[PS_CTL_TOKEN_MAX + PS_PATH_LEN + 32];
	struct tl_iov iov = { (const uint8_t *)line, 0 };
	uint64_t deadline = ps_net_now_us() + (uint64_t)timeout_ms * 1000u;
	struct tl_config cfg;
	struct tl_conn *c = NULL;
	struct tl *tl;
	uint32_t ip;
	int rc;

	if (outlen > 0)
		out[0] = '\0';
	if ((rc = ps_net_endpoint_ip(ep, &ip, err, errlen, "control endpoint")) != 0)
		return rc;
	rc = token != NULL && token[0] != '\0' ?
	     snprintf(line, sizeof(line), "token %s\n%s", token, cmd) :
	     snprintf(line, sizeof(line), "%s", cmd);
	if (rc < 0 || (size_t)rc >= sizeof(line))
		return ps_errf_rc(err, errlen, -E2BIG, "control command longer than %zu bytes",
			       sizeof(line) - 1);
	iov.len = (uint32_t)rc;
	rc = 0;
	tl_config_default(&cfg);
	cfg.protocol = TL_PROTO_KERNEL;
	cfg.max_body = PS_CTL_MAX;
	if ((rc = tl_create(&cfg, &tl)) != 0)
		return ps_errf_rc(err, errlen, rc, "kernel transport: %s", strerror(-rc));
	rc = tl_connect(tl, ip, ep->port, &ctl_ops, &r, &c);
	while (rc == 0 && r.up == 0 && ps_net_now_us() < deadline)
		tl_poll(tl, 10000);
	if (rc == 0 && r.up == 1)
		rc = tl_send(c, &h, &iov, iov.len > 0, NULL, NULL);
	else if (rc == 0)
		rc = r.up == 0 ? -ETIMEDOUT : (r.reason ? r.reason : -ECONNREFUSED);
	while (rc == 0 && !r.answered && r.up == 1 && ps_net_now_us() < deadline)
		tl_poll(tl, 10000);
	if (rc == 0 && !r.answered)
		rc = r.up == 1 ? -ETIMEDOUT : -ECONNRESET;
	if (rc != 0)
		ps_errf_rc(err, errlen, rc, "control endpoint %s:%u: %s", ep->host, ep->port,
			strerror(-rc));
	tl_destroy(tl);
	return rc;
}
