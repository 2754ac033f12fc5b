/*
 * wc_psnet_model.c — which PS tables each model of wc_model.h keeps: the one place psd and
 * train agree on table ids, shapes, optimizers and initialisers, so a server started by
 * either serves what the trainer pulls.
 *
 * Call chain: psd/train main -> wc_model_tables_make -> ps_server_create (server) or the
 * trainer's pull/push loop (worker). Start-up only.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "apps/common/wc_data.h"
#include "apps/common/wc_model.h"
#include "apps/common/wc_psnet_pvt.h"

static const char *const model_names[] = { "softmax", "mlp", "lr", "fm", "count" };

int wc_ps_model_parse(const char *s, enum wc_ps_model *out, char *err, size_t errlen)
{
	unsigned i;

	for (i = 0; i < sizeof(model_names) / sizeof(model_names[0]); i++)
		if (strcmp(s, model_names[i]) == 0) {
			*out = (enum wc_ps_model)i;
			return 0;
		}
	return wn_errf(err, errlen, -EINVAL, "--model: expected softmax, mlp, lr, fm or count, "
		       "got '%s'", s);
}

const char *wc_ps_model_name(enum wc_ps_model m)
{
	return (unsigned)m < sizeof(model_names) / sizeof(model_names[0]) ? model_names[m] : "?";
}

static void table(struct ps_table_config *t, uint32_t id, enum ps_table_kind kind, uint32_t dim,
		  uint64_t rows, float lr)
{
	memset(t, 0, sizeof(*t));
	t->id = id;
	t->kind = kind;
	t->dim = dim;
	t->dense_rows = rows;
	t->optim = PS_OPT_SGD;
	t->op.lr = lr;
	t->init = PS_INIT_ZEROS;
	t->seed = 42 + id;
}

static void dense_tables(const struct wc_dense_spec *spec, float lr, struct wc_model_tables *out)
{
	struct wc_tensor_desc d[4];
	unsigned i, n = wc_dense_tensors(spec, d);
	uint32_t body;

	for (i = 0; i < n; i++) {
		table(&out->t[i], i, PS_TABLE_DENSE, d[i].cols, d[i].rows, lr);
		/* Weights as wc_dense_init makes them (He-uniform, fan_in = rows); biases zero. */
		if (spec->kind == WC_DENSE_MLP && d[i].rows > 1) {
			out->t[i].init = PS_INIT_UNIFORM;
			out->t[i].init_b = (float)sqrt(6.0 / d[i].rows);
			out->t[i].init_a = -out->t[i].init_b;
		}
		body = 24 + d[i].rows * d[i].cols * 4;
		if (body > out->max_msg)
			out->max_msg = body;
	}
	out->n = n;
}

int wc_model_tables_make(enum wc_ps_model m, float lr, uint32_t hidden, uint32_t fm_k,
			 uint32_t max_keys, struct wc_model_tables *out, char *err, size_t errlen)
{
	struct wc_dense_spec spec = { WC_DENSE_SOFTMAX, 784, 0, WC_FMNIST_CLASSES };
	uint32_t dim;

	memset(out, 0, sizeof(*out));
	out->model = m;
	if (!(lr > 0) || lr > 100)
		return wn_errf(err, errlen, -EINVAL, "--lr: expected a learning rate in (0, 100]");
	if (max_keys == 0 || max_keys > 65536)
		return wn_errf(err, errlen, -EINVAL, "max keys per request must be 1..65536");
	switch (m) {
	case WC_PSM_MLP:
		spec.kind = WC_DENSE_MLP;
		spec.hidden = hidden;
		/* fall through */
	case WC_PSM_SOFTMAX:
		if (wc_dense_check(&spec) != 0)
			return wn_errf(err, errlen, -EINVAL, "--hidden %u: expected 1..65536", hidden);
		dense_tables(&spec, lr, out);
		return 0;
	case WC_PSM_FM:
	case WC_PSM_LR:
	case WC_PSM_COUNT:
		if (m == WC_PSM_FM && (fm_k == 0 || fm_k > 64))
			return wn_errf(err, errlen, -EINVAL, "--fm-k %u: expected 1..64", fm_k);
		dim = m == WC_PSM_FM ? 1 + fm_k : 1;
		table(&out->t[0], 0, PS_TABLE_SPARSE, dim, 0, m == WC_PSM_COUNT ? 1.0f : lr);
		if (m == WC_PSM_FM) {
			/* Factors must start apart from zero or their gradients stay zero. */
			out->t[0].init = PS_INIT_NORMAL;
			out->t[0].init_a = 0.0f;
			out->t[0].init_b = 0.01f;
		}
		out->n = 1;
		if (m != WC_PSM_COUNT) {
			table(&out->t[1], 1, PS_TABLE_DENSE, 1, 1, lr); /* the bias */
			out->n = 2;
		}
		out->max_msg = 16 + max_keys * (8 + dim * 4);
		return 0;
	}
	return wn_errf(err, errlen, -EINVAL, "unknown model %d", (int)m);
}
