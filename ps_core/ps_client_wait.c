/*
 * ps_client_wait.c — blocking forms of the client calls (ps_client_*_wait), built on the
 * asynchronous ones in ps_client.c: encode, hand each message to the network side's send, then
 * poll until the completion callback has run. Called by a trainer's main loop; the glue
 * (transport) is reached only through struct ps_client_io.
 */
#include <errno.h>
#include <stdbool.h>

#include "ps_core/ps_pvt.h"

struct waiter {
	bool done;
	int status;
};

static void wake(void *arg, int status)
{
	struct waiter *w = arg;

	w->status = status;
	w->done = true;
}

static int send_all(const struct ps_client_io *io, uint32_t n_dests)
{
	uint32_t s;
	int rc;

	for (s = 0; s < n_dests; s++) {
		if (!io->msgs[s].len)
			continue;
		rc = io->send(io->ctx, s, io->msgs[s].buf, io->msgs[s].len);
		io->msgs[s].len = 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Sends what the call encoded and polls until *w is done; on give-up, detaches w. */
static int finish(struct ps_client *c, const struct ps_client_io *io, struct waiter *w, int rc)
{
	if (rc < 0)
		return rc;
	rc = send_all(io, ps_client_dests(c));
	while (rc == 0 && !w->done)
		rc = io->poll(io->ctx) < 0 ? -ETIMEDOUT : 0;
	if (!w->done) {
		/* w lives on our stack: the request must not call back into it later. */
		ps_client_detach(c, w);
		return rc < 0 ? rc : -EIO;
	}
	return w->status;
}

int ps_client_pull_wait(struct ps_client *c, const struct ps_client_io *io, uint32_t table,
			uint32_t dim, const uint64_t *keys, uint32_t n, float *out)
{
	struct waiter w = { 0 };

	return finish(c, io, &w, ps_client_pull(c, table, dim, keys, n, out, wake, &w, io->msgs));
}

int ps_client_push_wait(struct ps_client *c, const struct ps_client_io *io, uint32_t table,
			uint32_t dim, const uint64_t *keys, uint32_t n, const float *grads)
{
	struct waiter w = { 0 };

	return finish(c, io, &w, ps_client_push(c, table, dim, keys, n, grads, wake, &w, io->msgs));
}

int ps_client_hello_wait(struct ps_client *c, const struct ps_client_io *io)
{
	struct waiter w = { 0 };

	return finish(c, io, &w, ps_client_hello(c, wake, &w, io->msgs));
}

int ps_client_barrier_wait(struct ps_client *c, const struct ps_client_io *io, uint64_t step)
{
	for (;;) {
		struct waiter w = { 0 };
		bool all = false;
		int rc = finish(c, io, &w, ps_client_barrier(c, step, &all, wake, &w, io->msgs));
		if (rc < 0 || all)
			return rc;
		/* Not everyone is there yet: let the transport breathe, then ask again. */
		if (io->poll(io->ctx) < 0)
			return -ETIMEDOUT;
	}
}
