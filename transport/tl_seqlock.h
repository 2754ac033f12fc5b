/*
 * tl_seqlock.h — a one-writer seqlock for telemetry snapshots: the thread that owns some
 * counters publishes a copy now and then, a reader on another thread (DPDK's telemetry
 * thread) copies it out, and neither ever waits for the other. Used by transport/tl_obs.c
 * and ps_core/ps_obs.c.
 *
 * The writer makes the sequence odd (relaxed) and fences (release) before it writes the
 * snapshot, then publishes the next even sequence (release). A reader loads the sequence
 * (acquire), copies, fences (acquire) and loads it again: an odd or changed sequence means
 * a torn copy, retried. Sequence 0 means nothing was published yet.
 */
#ifndef WHARF_TL_SEQLOCK_H
#define WHARF_TL_SEQLOCK_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Writer: returns the sequence to hand to tl_seq_write_end. */
static inline uint32_t tl_seq_write_begin(_Atomic uint32_t *seq)
{
	uint32_t s = atomic_load_explicit(seq, memory_order_relaxed);

	atomic_store_explicit(seq, s + 1, memory_order_relaxed);
	/* release: the odd sequence is visible before any byte of the new snapshot. */
	atomic_thread_fence(memory_order_release);
	return s;
}

static inline void tl_seq_write_end(_Atomic uint32_t *seq, uint32_t s)
{
	/* release: pairs with the acquire load in tl_seq_read. */
	atomic_store_explicit(seq, s + 2, memory_order_release);
}

/*
 * Reader: copies len bytes of src (the snapshot) into dst. 0, -ENOENT when *live is 0
 * (the slot is free) or nothing was published yet, -EAGAIN after 1000 torn copies.
 */
static inline int tl_seq_read(_Atomic uint32_t *seq, _Atomic int *live, void *dst,
			      const void *src, size_t len)
{
	for (int tries = 0; tries < 1000; tries++) {
		/* acquire: pairs with the release store in tl_seq_write_end. */
		uint32_t s1 = atomic_load_explicit(seq, memory_order_acquire);

		if (!atomic_load_explicit(live, memory_order_relaxed) || s1 == 0)
			return -ENOENT;
		if (s1 & 1)
			continue;
		memcpy(dst, src, len);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(seq, memory_order_relaxed) == s1)
			return 0;
	}
	return -EAGAIN;
}

#endif /* WHARF_TL_SEQLOCK_H */
