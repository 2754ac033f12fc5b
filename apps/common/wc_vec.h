/*
 * wc_vec.h — the two vector kernels the models' forward and backward passes share, eight
 * floats at a time with GCC vector types (gcc at -O2 leaves the scalar loops one float at a
 * time).
 */
#ifndef WHARF_WC_VEC_H
#define WHARF_WC_VEC_H

#include <stdint.h>
#include <string.h>

typedef float wc_v8 __attribute__((vector_size(32)));

/* y[0..n) += a * x[0..n) */
static inline void wc_axpy(float *restrict y, const float *restrict x, float a, uint32_t n)
{
	uint32_t i = 0;
	wc_v8 vy, vx;

	for (; i + 8 <= n; i += 8) {
		memcpy(&vy, y + i, sizeof(vy));
		memcpy(&vx, x + i, sizeof(vx));
		vy += a * vx;
		memcpy(y + i, &vy, sizeof(vy));
	}
	for (; i < n; i++)
		y[i] += a * x[i];
}

/* x[0..n) . y[0..n) */
static inline float wc_dot(const float *restrict x, const float *restrict y, uint32_t n)
{
	wc_v8 acc = { 0 }, vx, vy;
	uint32_t i = 0;
	float s = 0.0f;

	for (; i + 8 <= n; i += 8) {
		memcpy(&vx, x + i, sizeof(vx));
		memcpy(&vy, y + i, sizeof(vy));
		acc += vx * vy;
	}
	for (; i < n; i++)
		s += x[i] * y[i];
	for (uint32_t j = 0; j < 8; j++)
		s += acc[j];
	return s;
}

#endif
