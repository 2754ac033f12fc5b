/*
 * wc_vec.h — the kernels the dense models' forward and backward passes share (wc_dense.c,
 * apps/train/tr_deep.c): axpy and dot eight floats at a time with GCC vector types (gcc at -O2
 * leaves the scalar loops one float at a time), an affine layer and softmax cross-entropy.
 */
#ifndef WHARF_WC_VEC_H
#define WHARF_WC_VEC_H

#include <math.h>
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

/* z = b + sum_k x[k] * W[k][:] (W input-major: in rows of out), over nonzero x only. */
static inline void wc_affine(const float *restrict x, uint32_t in, const float *restrict W,
			     const float *restrict b, uint32_t out, float *restrict z)
{
	memcpy(z, b, out * sizeof(float));
	for (uint32_t k = 0; k < in; k++)
		if (x[k] != 0.0f)
			wc_axpy(z, W + (size_t)k * out, x[k], out);
}

/* In-place softmax of z[0..c); returns -log p[y] and whether argmax == y. */
static inline double wc_softmax_xent(float *z, uint32_t c, uint8_t y, int *hit)
{
	float mx = z[0];
	double sum = 0;
	uint32_t i, arg = 0;

	for (i = 1; i < c; i++)
		if (z[i] > mx) {
			mx = z[i];
			arg = i;
		}
	for (i = 0; i < c; i++) {
		z[i] = expf(z[i] - mx);
		sum += z[i];
	}
	for (i = 0; i < c; i++)
		z[i] = (float)(z[i] / sum);
	*hit = arg == y;
	return -log(z[y] > 1e-30f ? (double)z[y] : 1e-30);
}

#endif
