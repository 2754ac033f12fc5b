/*
 * tr_deep.c — the deep MLP of wharf-train (--layers L, L >= 2): many small tensors, the
 * shape Send/Recv fusion is for. Fashion-MNIST in, L hidden layers of width H, 10 classes:
 *
 *   h1 = relu(W1 x + b1)                      784 -> H
 *   hl = h(l-1) + relu(Wl h(l-1) + bl)        l = 2..L, H -> H (residual, so depth trains)
 *   p  = softmax(Wout hL + bout)              H -> 10
 *
 * Every weight and every bias is a dense PS table of its own (2 L + 2 tables, in that
 * order), so a step pulls and pushes 2 L + 2 tensors, all but W1 a few KiB or less. The
 * residual branches start at 1/L of He's scale, so the activations keep their size over
 * the whole depth (at He's scale they double each layer; at 1/sqrt(L) of it, 24 layers of
 * width 16 reached 0.72 test accuracy in 2 epochs where 1/L reaches 0.84).
 *
 * Call chain: main -> tr_deep_tables (both roles: the PS's tables) ; tr_dense_run ->
 * tr_deep_create -> dense_step -> tr_deep_loss_grad ; evaluation -> tr_deep_evaluate.
 * Weights are stored input-major (W[k][j], k the input), as wc_dense.c stores them.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/common/wc_vec.h"
#include "apps/train/tr.h"

#define TR_FMNIST_PIXELS 784u  /* 28 x 28: what wc_fmnist_load gives each image */

struct tr_deep {
	uint32_t in, hid, layers, classes, max_batch;
	struct wc_tensor_desc *td;  /* 2 layers + 2 */
	char (*names)[8];
	size_t np;
	float *r;                   /* max_batch x layers x hid: relu(z_l) */
	float *h;                   /* max_batch x layers x hid: h_l */
	float *p;                   /* max_batch x classes */
	float *dz, *dh, *dr;
};

/* The tensors of the model in table order, with names stored in names. Returns their count. */
static unsigned deep_layout(uint32_t in, uint32_t hid, uint32_t layers, uint32_t classes,
			    struct wc_tensor_desc *td, char (*names)[8], size_t *np)
{
	size_t off = 0;
	unsigned n = 0;

	for (uint32_t l = 1; l <= layers; l++) {
		uint32_t rows = l == 1 ? in : hid;
		snprintf(names[n], sizeof(names[n]), "W%u", l);
		td[n] = (struct wc_tensor_desc){ names[n], off, rows, hid };
		off += (size_t)rows * hid;
		n++;
		snprintf(names[n], sizeof(names[n]), "b%u", l);
		td[n] = (struct wc_tensor_desc){ names[n], off, 1, hid };
		off += hid;
		n++;
	}
	snprintf(names[n], sizeof(names[n]), "Wout");
	td[n] = (struct wc_tensor_desc){ names[n], off, hid, classes };
	off += (size_t)hid * classes;
	n++;
	snprintf(names[n], sizeof(names[n]), "bout");
	td[n] = (struct wc_tensor_desc){ names[n], off, 1, classes };
	off += classes;
	n++;
	*np = off;
	return n;
}

int tr_deep_create(uint32_t in, uint32_t hid, uint32_t layers, uint32_t classes,
		   uint32_t max_batch, struct tr_deep **out)
{
	struct tr_deep *m;
	unsigned nt = 2 * layers + 2;
	size_t act = (size_t)max_batch * layers * hid;

	if (in == 0 || hid == 0 || layers < 2 || layers > TR_DEEP_MAX_LAYERS || classes < 2 ||
	    max_batch == 0)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	*m = (struct tr_deep){ in, hid, layers, classes, max_batch, NULL, NULL, 0, NULL, NULL,
			       NULL, NULL, NULL, NULL };
	m->td = calloc(nt, sizeof(*m->td));
	m->names = calloc(nt, sizeof(*m->names));
	m->r = malloc(act * sizeof(float));
	m->h = malloc(act * sizeof(float));
	m->p = malloc((size_t)max_batch * classes * sizeof(float));
	m->dz = malloc(classes * sizeof(float));
	m->dh = malloc(hid * sizeof(float));
	m->dr = malloc(hid * sizeof(float));
	if (!m->td || !m->names || !m->r || !m->h || !m->p || !m->dz || !m->dh || !m->dr) {
		tr_deep_destroy(m);
		return -ENOMEM;
	}
	deep_layout(in, hid, layers, classes, m->td, m->names, &m->np);
	*out = m;
	return 0;
}

void tr_deep_destroy(struct tr_deep *m)
{
	if (m == NULL)
		return;
	free(m->td);
	free(m->names);
	free(m->r);
	free(m->h);
	free(m->p);
	free(m->dz);
	free(m->dh);
	free(m->dr);
	free(m);
}

unsigned tr_deep_tensors(const struct tr_deep *m, const struct wc_tensor_desc **td)
{
	*td = m->td;
	return 2 * m->layers + 2;
}

size_t tr_deep_param_count(const struct tr_deep *m) { return m->np; }

/* Sample i's forward pass into r, h and p; its loss, and whether its argmax is y. */
static double forward(struct tr_deep *m, const float *params, const float *x, uint8_t y,
		      uint32_t i, int *hit)
{
	const uint32_t H = m->hid, C = m->classes;
	float *r = m->r + (size_t)i * m->layers * H, *h = m->h + (size_t)i * m->layers * H;
	float *p = m->p + (size_t)i * C;
	uint32_t l, j;

	for (l = 0; l < m->layers; l++) {
		const struct wc_tensor_desc *W = &m->td[2 * l], *b = &m->td[2 * l + 1];
		float *rl = r + (size_t)l * H, *hl = h + (size_t)l * H;
		wc_affine(l == 0 ? x : hl - H, W->rows, params + W->offset, params + b->offset, H, rl);
		for (j = 0; j < H; j++) {
			rl[j] = rl[j] > 0.0f ? rl[j] : 0.0f;
			hl[j] = l == 0 ? rl[j] : (hl - H)[j] + rl[j];
		}
	}
	wc_affine(h + (size_t)(m->layers - 1) * H, H, params + m->td[2 * m->layers].offset,
	       params + m->td[2 * m->layers + 1].offset, C, p);
	return wc_softmax_xent(p, C, y, hit);
}

/* Sample i's gradient (m->dz already holds dloss/dlogits, scaled by 1/n) into grad. */
static void backward(struct tr_deep *m, const float *params, const float *x, uint32_t i,
		     float *grad)
{
	const uint32_t H = m->hid, C = m->classes, L = m->layers;
	const float *r = m->r + (size_t)i * L * H, *h = m->h + (size_t)i * L * H;
	const struct wc_tensor_desc *Wo = &m->td[2 * L], *bo = &m->td[2 * L + 1];
	float *dh = m->dh, *dr = m->dr;
	uint32_t l, k, j;

	for (k = 0; k < H; k++) {
		wc_axpy(grad + Wo->offset + (size_t)k * C, m->dz, h[(size_t)(L - 1) * H + k], C);
		dh[k] = wc_dot(params + Wo->offset + (size_t)k * C, m->dz, C);
	}
	wc_axpy(grad + bo->offset, m->dz, 1.0f, C);
	for (l = L; l-- > 0;) {
		const struct wc_tensor_desc *W = &m->td[2 * l], *b = &m->td[2 * l + 1];
		const float *rl = r + (size_t)l * H, *in = l == 0 ? x : h + (size_t)(l - 1) * H;
		for (j = 0; j < H; j++)
			dr[j] = rl[j] > 0.0f ? dh[j] : 0.0f;
		wc_axpy(grad + b->offset, dr, 1.0f, H);
		for (k = 0; k < W->rows; k++)
			if (in[k] != 0.0f)
				wc_axpy(grad + W->offset + (size_t)k * H, dr, in[k], H);
		if (l == 0)
			break;
		/* dh(l-1) = dh(l) through the skip, plus W dr through the branch. */
		for (k = 0; k < H; k++)
			dh[k] += wc_dot(params + W->offset + (size_t)k * H, dr, H);
	}
}

int tr_deep_loss_grad(struct tr_deep *m, const float *params, const float *x, const uint8_t *y,
		      uint32_t n, float *grad, double *loss, uint32_t *correct)
{
	double total = 0;
	uint32_t i, c, hits = 0;
	int hit;

	if (n == 0 || n > m->max_batch)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (y[i] >= m->classes)
			return -EINVAL;
	for (i = 0; i < n; i++) {
		total += forward(m, params, x + (size_t)i * m->in, y[i], i, &hit);
		hits += (uint32_t)hit;
	}
	if (grad != NULL) {
		memset(grad, 0, m->np * sizeof(float));
		for (i = 0; i < n; i++) {
			const float *p = m->p + (size_t)i * m->classes;
			for (c = 0; c < m->classes; c++)
				m->dz[c] = (p[c] - (c == y[i] ? 1.0f : 0.0f)) / (float)n;
			backward(m, params, x + (size_t)i * m->in, i, grad);
		}
	}
	if (loss != NULL)
		*loss = total / n;
	if (correct != NULL)
		*correct = hits;
	return 0;
}

int tr_deep_evaluate(struct tr_deep *m, const float *params, const float *x, const uint8_t *y,
		     uint32_t n, double *accuracy, double *loss)
{
	double total = 0, l;
	uint32_t i, b, hits = 0, h;
	int rc;

	if (n == 0)
		return -EINVAL;
	for (i = 0; i < n; i += b) {
		b = n - i < m->max_batch ? n - i : m->max_batch;
		rc = tr_deep_loss_grad(m, params, x + (size_t)i * m->in, y + i, b, NULL, &l, &h);
		if (rc != 0)
			return rc;
		total += l * b;
		hits += h;
	}
	*accuracy = (double)hits / n;
	*loss = total / n;
	return 0;
}

int tr_deep_tables(uint32_t hid, uint32_t layers, float lr, struct ps_model_tables *out,
		   char *err, size_t errlen)
{
	struct wc_tensor_desc td[2 * TR_DEEP_MAX_LAYERS + 2];
	char names[2 * TR_DEEP_MAX_LAYERS + 2][8];
	struct ps_table_config t;
	unsigned n, i;
	size_t np;
	int rc;

	if (layers < 2 || layers > TR_DEEP_MAX_LAYERS) {
		snprintf(err, errlen, "--layers %u: the deep MLP has 2..%u layers", layers,
			 TR_DEEP_MAX_LAYERS);
		return -EINVAL;
	}
	ps_model_tables_init(out);
	n = deep_layout(TR_FMNIST_PIXELS, hid, layers, WC_FMNIST_CLASSES, td, names, &np);
	for (i = 0; i < n; i++) {
		double lim = sqrt(6.0 / td[i].rows);  /* He-uniform, fan_in = rows */
		ps_model_table_defaults(&t);
		t.kind = PS_TABLE_DENSE;
		t.dim = td[i].cols;
		t.dense_rows = td[i].rows;
		t.op.lr = lr;
		t.seed = 42 + i;
		if (td[i].rows > 1) {  /* weights; biases start at zero */
			if (i >= 2 && i < n - 2)
				lim /= layers;  /* a residual branch */
			t.init = PS_INIT_UNIFORM;
			t.init_a = (float)-lim;
			t.init_b = (float)lim;
		}
		if ((rc = ps_model_tables_add(out, &t, td[i].name, err, errlen)) != 0) {
			ps_model_tables_free(out);
			return rc;
		}
	}
	return 0;
}
