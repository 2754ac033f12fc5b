/*
 * wc_keymap.c — u64 key -> dense index, open addressing with linear probing. A trainer uses it
 * to de-duplicate a batch's keys before a pull (cleared per batch, so clear is O(used)), and
 * tests use it as a local stand-in for a PS's sparse table.
 *
 * Call chain: apps/train batch -> wc_keymap_clear, wc_keymap_get_or_add per key -> ps pull of
 * wc_keymap_keys(). Hand-written because rte_hash needs EAL and this must run in plain tests;
 * no allocation after create.
 */
#include <errno.h>
#include <stdlib.h>

#include "apps/common/wc_model.h"

struct wc_keymap {
	uint32_t mask;     /* slots - 1, slots a power of two >= 2 * capacity */
	uint32_t capacity;
	uint32_t count;
	uint32_t *slot;    /* index + 1 per slot, 0 = empty */
	uint64_t *keys;    /* capacity, in index order */
};

int wc_keymap_create(uint32_t capacity, struct wc_keymap **out)
{
	struct wc_keymap *m;
	uint64_t slots = 16;

	if (capacity == 0 || capacity > (1u << 30))
		return -EINVAL;
	while (slots < 2ull * capacity)
		slots <<= 1;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	m->slot = calloc(slots, sizeof(*m->slot));
	m->keys = malloc((size_t)capacity * sizeof(*m->keys));
	if (m->slot == NULL || m->keys == NULL) {
		wc_keymap_destroy(m);
		return -ENOMEM;
	}
	m->mask = (uint32_t)(slots - 1);
	m->capacity = capacity;
	*out = m;
	return 0;
}

void wc_keymap_destroy(struct wc_keymap *m)
{
	if (m == NULL)
		return;
	free(m->slot);
	free(m->keys);
	free(m);
}

static uint32_t home(const struct wc_keymap *m, uint64_t key)
{
	return (uint32_t)wc_mix64(key) & m->mask;
}

void wc_keymap_clear(struct wc_keymap *m)
{
	uint32_t i, h;

	/* Re-walk the used keys instead of wiping every slot: a batch touches few of them. */
	for (i = 0; i < m->count; i++) {
		h = home(m, m->keys[i]);
		while (m->slot[h] != 0) {
			m->slot[h] = 0;
			h = (h + 1) & m->mask;
		}
	}
	m->count = 0;
}

int wc_keymap_find(const struct wc_keymap *m, uint64_t key, uint32_t *idx)
{
	uint32_t h = home(m, key);

	while (m->slot[h] != 0) {
		if (m->keys[m->slot[h] - 1] == key) {
			*idx = m->slot[h] - 1;
			return 0;
		}
		h = (h + 1) & m->mask;
	}
	return -ENOENT;
}

int wc_keymap_get_or_add(struct wc_keymap *m, uint64_t key, uint32_t *idx)
{
	uint32_t h = home(m, key);

	while (m->slot[h] != 0) {
		if (m->keys[m->slot[h] - 1] == key) {
			*idx = m->slot[h] - 1;
			return 0;
		}
		h = (h + 1) & m->mask;
	}
	if (m->count == m->capacity)
		return -ENOSPC;
	m->keys[m->count] = key;
	m->slot[h] = ++m->count;
	*idx = m->count - 1;
	return 0;
}

uint32_t wc_keymap_count(const struct wc_keymap *m)
{
	return m->count;
}

const uint64_t *wc_keymap_keys(const struct wc_keymap *m)
{
	return m->keys;
}
