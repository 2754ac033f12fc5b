/*
 * wc_model_ps.c — which PS tables each model of wc_model.h keeps: the one place psd and
 * train agree on table ids, shapes, optimizers and initialisers, so a server started by
 * either serves what the trainer pulls.
 *
 * Call chain: psd/train main -> wc_model_tables_make -> ps_model_tables_add -> ps_server_create
 * (server) or the trainer's pull/push loop (worker). Start-up only.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "apps/common/wc_data.h"
#include "apps/common/wc_model.h"
#include "apps/common/wc_pvt.h"
#include "ps_core/ps_net.h"

static const char *const model_names[] = { "softmax", "mlp", "lr", "fm", "count" };

int wc_ps_model_parse(const char *s, enum wc_ps_model *out, char *err, size_t errlen)
{
	unsigned i;

	for (i = 0; i < sizeof(model_names) / sizeof(model_names[0]); i++)
		if (strcmp(s, model_names[i]) == 0) {
			*out = (enum wc_ps_model)i;
			return 0;
		}
	return wc_errf(err, errlen, -EINVAL, "--model: expected softmax, mlp, lr, fm or count, "
		       "got '%s'", s);
}

const char *wc_ps_model_name(enum wc_ps_model m)
{
	return (unsigned)m < sizeof(model_names) / sizeof(model_names[0]) ? model_names[m] : "?";
}

float wc_ps_model_default_lr(enum wc_ps_model m)
{
	return m == WC_PSM_LR ? 2.0f : m == WC_PSM_FM ? 1.0f : 0.1f;
}

/* A table of a built-in model: SGD at lr, zeros, seed 42 + its id. */
static int table(struct ps_model_tables *out, const char *name, enum ps_table_kind kind,
		 uint32_t dim, uint64_t rows, float lr, enum ps_init_kind init, float a, float b,
		 char *err, size_t errlen)
{
	struct ps_table_config t;

	ps_model_table_defaults(&t);
	t.kind = kind;
	t.dim = dim;
	t.dense_rows = rows;
	t.op.lr = lr;
	t.init = init;
	t.init_a = a;
	t.init_b = b;
	t.seed = 42 + out->n;
	return ps_model_tables_add(out, &t, name, err, errlen);
}

static int dense_tables(const struct wc_dense_spec *spec, float lr, struct ps_model_tables *out,
			char *err, size_t errlen)
{
	struct wc_tensor_desc d[4];
	unsigned i, n = wc_dense_tensors(spec, d);
	int rc = 0;

	for (i = 0; i < n && rc == 0; i++) {
		/* Weights as wc_dense_init makes them (He-uniform, fan_in = rows); biases zero. */
		float b = (float)sqrt(6.0 / d[i].rows);
		if (spec->kind == WC_DENSE_MLP && d[i].rows > 1)
			rc = table(out, d[i].name, PS_TABLE_DENSE, d[i].cols, d[i].rows, lr,
				   PS_INIT_UNIFORM, -b, b, err, errlen);
		else
			rc = table(out, d[i].name, PS_TABLE_DENSE, d[i].cols, d[i].rows, lr,
				   PS_INIT_ZEROS, 0, 0, err, errlen);
	}
	return rc;
}

static int make(enum wc_ps_model m, float lr, uint32_t hidden, uint32_t fm_k,
		uint32_t max_keys, struct ps_model_tables *out, char *err, size_t errlen)
{
	struct wc_dense_spec spec = { WC_DENSE_SOFTMAX, 784, 0, WC_FMNIST_CLASSES };
	int rc;

	if (!(lr > 0) || lr > 100)
		return wc_errf(err, errlen, -EINVAL, "--lr: expected a learning rate in (0, 100]");
	if ((rc = ps_model_tables_set_max_keys(out, max_keys, err, errlen)) != 0)
		return rc;
	switch (m) {
	case WC_PSM_MLP:
		spec.kind = WC_DENSE_MLP;
		spec.hidden = hidden;
		/* fall through */
	case WC_PSM_SOFTMAX:
		if (wc_dense_check(&spec) != 0)
			return wc_errf(err, errlen, -EINVAL, "--hidden %u: expected 1..65536", hidden);
		return dense_tables(&spec, lr, out, err, errlen);
	case WC_PSM_COUNT:
		return table(out, "counts", PS_TABLE_SPARSE, 1, 0, 1.0f, PS_INIT_ZEROS, 0, 0, err,
			     errlen);
	case WC_PSM_LR:
		if ((rc = table(out, "weights", PS_TABLE_SPARSE, 1, 0, lr, PS_INIT_ZEROS, 0, 0, err,
				errlen)) != 0)
			return rc;
		return table(out, "bias", PS_TABLE_DENSE, 1, 1, lr, PS_INIT_ZEROS, 0, 0, err, errlen);
	case WC_PSM_FM:
		if (fm_k == 0 || fm_k > 64)
			return wc_errf(err, errlen, -EINVAL, "--fm-k %u: expected 1..64", fm_k);
		/* Factors must start apart from zero or their gradients stay zero. */
		if ((rc = table(out, "weights", PS_TABLE_SPARSE, 1 + fm_k, 0, lr, PS_INIT_NORMAL,
				0.0f, 0.01f, err, errlen)) != 0)
			return rc;
		return table(out, "bias", PS_TABLE_DENSE, 1, 1, lr, PS_INIT_ZEROS, 0, 0, err, errlen);
	}
	return wc_errf(err, errlen, -EINVAL, "unknown model %d", (int)m);
}

int wc_model_tables_make(enum wc_ps_model m, float lr, uint32_t hidden, uint32_t fm_k,
			 uint32_t max_keys, struct ps_model_tables *out, char *err, size_t errlen)
{
	int rc;

	ps_model_tables_init(out);
	rc = make(m, lr, hidden, fm_k, max_keys, out, err, errlen);
	if (rc != 0)
		ps_model_tables_free(out);
	return rc;
}
