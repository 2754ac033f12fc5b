/*
 * wc_geo.c — GEO-SGD's worker side (wc_model.h): the send and receive rules of Paddle's
 * GeoCommunicator over a dense array, and a store of sparse rows keyed by id (a wc_keymap
 * for the index, latest and base side by side, a touched flag per row).
 *
 * Call chain: apps/train (tr_dense.c, tr_ctr.c, tr_geo_ledger.c) GEO sync -> wc_geo_send ->
 *   ps_client push; ps_client GEO pull's row callback -> wc_geo_recv.
 *
 * Arithmetic: recv computes latest = row + (latest - base), so a row with no local change
 * takes the server's value bit for bit; send with one worker makes base equal latest.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "apps/common/wc_model.h"

void wc_geo_dense_send(const float *latest, float *base, float *delta, size_t n, uint32_t workers)
{
	size_t i;

	for (i = 0; i < n; i++) {
		delta[i] = workers > 1 ? (latest[i] - base[i]) / (float)workers : latest[i] - base[i];
		base[i] = workers > 1 ? base[i] + delta[i] : latest[i];
	}
}

void wc_geo_dense_recv(float *latest, float *base, const float *server, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		latest[i] = server[i] + (latest[i] - base[i]);
		base[i] = server[i];
	}
}

struct wc_geo {
	struct wc_keymap *map;
	uint32_t dim, workers, capacity;
	float *latest, *base;   /* capacity x dim each, in the map's index order */
	uint8_t *touched;
};

int wc_geo_create(uint32_t capacity, uint32_t dim, uint32_t workers, struct wc_geo **out)
{
	struct wc_geo *g;

	if (capacity == 0 || dim == 0 || workers == 0 || (uint64_t)capacity * dim > (1ull << 32))
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (g == NULL)
		return -ENOMEM;
	g->dim = dim;
	g->workers = workers;
	g->capacity = capacity;
	g->latest = malloc((size_t)capacity * dim * sizeof(float));
	g->base = malloc((size_t)capacity * dim * sizeof(float));
	g->touched = calloc(capacity, 1);
	if (g->latest == NULL || g->base == NULL || g->touched == NULL ||
	    wc_keymap_create(capacity, &g->map) != 0) {
		wc_geo_destroy(g);
		return -ENOMEM;
	}
	*out = g;
	return 0;
}

void wc_geo_destroy(struct wc_geo *g)
{
	if (g == NULL)
		return;
	wc_keymap_destroy(g->map);
	free(g->latest);
	free(g->base);
	free(g->touched);
	free(g);
}

int wc_geo_find(const struct wc_geo *g, uint64_t key, uint32_t *idx)
{
	return wc_keymap_find(g->map, key, idx);
}

int wc_geo_recv(struct wc_geo *g, uint64_t key, const float *row, uint32_t *idx)
{
	uint32_t i, n = wc_keymap_count(g->map);
	size_t off;
	int rc = wc_keymap_get_or_add(g->map, key, &i);

	if (rc != 0)
		return rc;
	off = (size_t)i * g->dim;
	if (i == n) {
		memcpy(g->latest + off, row, g->dim * sizeof(float));
		memcpy(g->base + off, row, g->dim * sizeof(float));
	} else {
		wc_geo_dense_recv(g->latest + off, g->base + off, row, g->dim);
	}
	if (idx != NULL)
		*idx = i;
	return 0;
}

float *wc_geo_latest(struct wc_geo *g, uint32_t idx) { return g->latest + (size_t)idx * g->dim; }
const float *wc_geo_base(const struct wc_geo *g, uint32_t idx)
{
	return g->base + (size_t)idx * g->dim;
}
void wc_geo_touch(struct wc_geo *g, uint32_t idx) { g->touched[idx] = 1; }
uint32_t wc_geo_count(const struct wc_geo *g) { return wc_keymap_count(g->map); }

uint32_t wc_geo_send(struct wc_geo *g, uint64_t *keys, float *deltas)
{
	const uint64_t *k = wc_keymap_keys(g->map);
	uint32_t i, m = 0, n = wc_keymap_count(g->map);

	for (i = 0; i < n; i++) {
		size_t off = (size_t)i * g->dim;
		if (!g->touched[i])
			continue;
		g->touched[i] = 0;
		keys[m] = k[i];
		wc_geo_dense_send(g->latest + off, g->base + off, deltas + (size_t)m * g->dim, g->dim,
				  g->workers);
		m++;
	}
	return m;
}
