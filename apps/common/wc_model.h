/*
 * wc_model.h — the models the trainer runs and the PS stores: dense (softmax regression, a
 * one-hidden-layer ReLU MLP) and sparse CTR (logistic regression, factorization machine),
 * a CTR data generator with a planted model, exact AUC, a seeded RNG and a key->row map.
 *
 * Call chain: apps/train step loop -> ps client pull (params / rows) -> wc_dense_loss_grad or
 * wc_{lr,fm}_loss_grad -> ps client push (gradients). The models never allocate per step: the
 * caller creates a workspace once (wc_dense_ws_create, wc_keymap_create).
 *
 * Parameter layout is a flat float array so a PS can hold it as dense tables (row ranges):
 *   softmax: W[in][classes], b[classes]
 *   mlp:     W1[in][hidden], b1[hidden], W2[hidden][classes], b2[classes]
 * (input-major so the inner loops run over contiguous outputs and vectorise without -ffast-math).
 * Sparse rows: LR row = [w] (row_dim 1); FM row = [w, v_0..v_{k-1}] (row_dim 1 + k); the bias
 * is one extra scalar the caller keeps as a 1-element dense table.
 *
 * Gradients are of the MEAN loss over the batch (so learning rates do not depend on batch
 * size), written (not accumulated) into the caller's arrays.
 */
#ifndef WHARF_WC_MODEL_H
#define WHARF_WC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "ps_core/ps_net.h"

/* ---- seeded RNG: splitmix64 seeding a xoshiro256** stream; deterministic per seed ---- */
struct wc_rng {
	uint64_t s[4];
};

void wc_rng_seed(struct wc_rng *r, uint64_t seed);
uint64_t wc_rng_u64(struct wc_rng *r);
double wc_rng_uniform(struct wc_rng *r);      /* [0, 1) with 53 bits */
double wc_rng_normal(struct wc_rng *r);       /* standard normal (Box-Muller) */
uint64_t wc_rng_below(struct wc_rng *r, uint64_t n); /* [0, n), unbiased; n > 0 */
uint64_t wc_mix64(uint64_t x);                /* splitmix64 finaliser: a good 64-bit hash */
/* Fisher-Yates shuffle of idx[0..n). */
void wc_shuffle_u32(struct wc_rng *r, uint32_t *idx, uint32_t n);

/* ---- dense models ---- */
enum wc_dense_kind { WC_DENSE_SOFTMAX = 0, WC_DENSE_MLP };

struct wc_dense_spec {
	enum wc_dense_kind kind;
	uint32_t in_dim;    /* 784 for Fashion-MNIST */
	uint32_t hidden;    /* MLP only */
	uint32_t n_classes; /* 10 */
};

/* One named slice of the flat parameter array (what a PS stores as a dense table). */
struct wc_tensor_desc {
	const char *name;
	size_t offset; /* in floats */
	uint32_t rows;
	uint32_t cols;
};

/* -EINVAL for a zero dimension, a hidden size on softmax, or sizes above 1<<20. */
int wc_dense_check(const struct wc_dense_spec *s);
size_t wc_dense_param_count(const struct wc_dense_spec *s);
/* Fills out[] (up to 4) and returns how many tensors the model has. */
unsigned wc_dense_tensors(const struct wc_dense_spec *s, struct wc_tensor_desc out[4]);
/* Softmax: zeros. MLP: He-uniform weights, zero biases, from seed. */
void wc_dense_init(const struct wc_dense_spec *s, float *params, uint64_t seed);

struct wc_dense_ws; /* per-batch activations; one per trainer thread */
int wc_dense_ws_create(const struct wc_dense_spec *s, uint32_t max_batch, struct wc_dense_ws **out);
void wc_dense_ws_destroy(struct wc_dense_ws *ws);

/*
 * Forward, mean cross-entropy loss and backward for n samples (x row-major n*in_dim, labels y).
 * grad (param_count floats) may be NULL for forward only. correct (may be NULL) receives how
 * many argmax predictions matched. -EINVAL if n > max_batch or a label >= n_classes (nothing
 * written then).
 */
int wc_dense_loss_grad(const struct wc_dense_spec *s, struct wc_dense_ws *ws, const float *params,
		       const float *x, const uint8_t *y, uint32_t n, float *grad, double *loss,
		       uint32_t *correct);
/* Accuracy and mean loss over n samples, in batches of the workspace size. */
int wc_dense_evaluate(const struct wc_dense_spec *s, struct wc_dense_ws *ws, const float *params,
		      const float *x, const uint8_t *y, uint32_t n, double *accuracy, double *loss);
/* params -= lr * grad (the local SGD step; GEO workers and tests use it). */
void wc_sgd_step(float *params, const float *grad, size_t count, float lr);

/* ---- key -> dense index map (open addressing), for batch de-duplication and local stores ---- */
struct wc_keymap;
/* capacity = most distinct keys it will hold; the table sizes itself at >= 2x that. */
int wc_keymap_create(uint32_t capacity, struct wc_keymap **out);
void wc_keymap_destroy(struct wc_keymap *m);
void wc_keymap_clear(struct wc_keymap *m);
/* Index of key (new keys get the next index, 0,1,2..); -ENOSPC when capacity is reached. */
int wc_keymap_get_or_add(struct wc_keymap *m, uint64_t key, uint32_t *idx);
/* -ENOENT if absent. */
int wc_keymap_find(const struct wc_keymap *m, uint64_t key, uint32_t *idx);
uint32_t wc_keymap_count(const struct wc_keymap *m);
/* The keys in index order (count of them). */
const uint64_t *wc_keymap_keys(const struct wc_keymap *m);

/*
 * ---- GEO-SGD on a worker: Paddle's GeoCommunicator rules ----
 * A worker trains local copies (latest) of the parameters it uses and keeps for each one
 * base, the server's value as far as it knows. At a sync it pushes, for what changed,
 * delta = (latest - base) / workers and moves base by that delta at once (the push is
 * recorded before it is sent and resent until acknowledged: applied exactly once); the rest
 * of its change stays local and goes out with later syncs. A value from the server (a GEO
 * pull, a first pull) sets latest = value + (latest - base) and base = value, which keeps
 * local steps not yet pushed and is idempotent: the same value again changes nothing. So
 * workers that all move a row by c from one start move it on the server by c, not by
 * workers x c; a row a worker keeps moving is handed in over time in full.
 */
/* Dense: delta[i] = (latest[i] - base[i]) / workers, base[i] += delta[i]. */
void wc_geo_dense_send(const float *latest, float *base, float *delta, size_t n, uint32_t workers);
/* Dense: server values in: latest[i] = server[i] + (latest[i] - base[i]), base[i] = server[i]. */
void wc_geo_dense_recv(float *latest, float *base, const float *server, size_t n);

/* Sparse: the rows this worker holds, key -> (latest, base, touched since the last send). */
struct wc_geo;
/* capacity: most rows it will hold; dim: floats per row; workers: the job's worker count. */
int wc_geo_create(uint32_t capacity, uint32_t dim, uint32_t workers, struct wc_geo **out);
void wc_geo_destroy(struct wc_geo *g);
/* Index of key's row; -ENOENT when not held. */
int wc_geo_find(const struct wc_geo *g, uint64_t key, uint32_t *idx);
/* The server's row for key (the recv rule; a new key starts with latest = base = row). */
int wc_geo_recv(struct wc_geo *g, uint64_t key, const float *row, uint32_t *idx);
/* A row's local copy (dim floats), to train; wc_geo_touch marks it for the next send. */
float *wc_geo_latest(struct wc_geo *g, uint32_t idx);
/* A row's base: the server's value as far as this worker knows it. */
const float *wc_geo_base(const struct wc_geo *g, uint32_t idx);
void wc_geo_touch(struct wc_geo *g, uint32_t idx);
uint32_t wc_geo_count(const struct wc_geo *g);
/*
 * The deltas of every row touched since the last call into keys[] and deltas[] (dim
 * floats each; room for wc_geo_count rows), base moved by them, touched cleared. Returns
 * how many. Push them before anything else changes base (a recv).
 */
uint32_t wc_geo_send(struct wc_geo *g, uint64_t *keys, float *deltas);

/* ---- CTR generator with a planted logistic model ---- */
#define WC_CTR_FIELDS 26u

struct wc_ctr_spec {
	uint32_t n_fields;      /* 26 */
	uint32_t vocab;         /* ids per field (ranks 0..vocab-1), 2..1<<20 */
	double zipf_s;          /* Zipf exponent over ranks, > 0 (1.1 typical) */
	double weight_sigma;    /* planted per-id weight ~ N(0, sigma^2) */
	double bias;            /* planted bias (sets the base CTR) */
	uint64_t seed;          /* planted weights and the key hash */
};

/*
 * Defaults measured to let plain-SGD LR/FM get within 0.01 AUC of Bayes from ~300k samples
 * (3 epochs, batch 256, lr 2/(1+epoch) for LR, 1/(1+epoch) for FM k=4): 26 fields, vocab 100,
 * Zipf 1.1, sigma 0.3, bias -1.5 (CTR about 0.23), seed 7.
 */
void wc_ctr_spec_default(struct wc_ctr_spec *s);

struct wc_ctr_gen;
int wc_ctr_gen_create(const struct wc_ctr_spec *s, struct wc_ctr_gen **out);
void wc_ctr_gen_destroy(struct wc_ctr_gen *g);
/*
 * n samples: keys[n * n_fields] (u64, hashed from (field, id), distinct across fields),
 * labels[n] in {0,1}, p_true[n] (may be NULL) the planted click probability.
 */
void wc_ctr_gen_sample(const struct wc_ctr_gen *g, struct wc_rng *r, uint32_t n, uint64_t *keys,
		       float *labels, float *p_true);

/* ---- sparse CTR models ---- */

/*
 * A batch as a PS client holds it after de-duplicating keys: slot[i * fields + f] indexes the
 * pulled rows (row_dim floats each, n_unique of them).
 */
struct wc_sparse_batch {
	uint32_t n;
	uint32_t fields;
	const uint32_t *slot;
	const float *label;
	uint32_t n_unique;
};

/*
 * Logistic regression: p = sigmoid(bias + sum_f w[slot]). Writes p_out[n] (may be NULL), mean
 * log loss, and (when row_grad != NULL) d loss / d rows into row_grad[n_unique] (zeroed first)
 * and d loss / d bias into *bias_grad.
 */
int wc_lr_loss_grad(const struct wc_sparse_batch *b, const float *rows, float bias, float *p_out,
		    double *loss, float *row_grad, float *bias_grad);
/* Factorization machine of factor size k: rows are [w, v[k]]; same contract as LR. */
int wc_fm_loss_grad(const struct wc_sparse_batch *b, uint32_t k, const float *rows, float bias,
		    float *p_out, double *loss, float *row_grad, float *bias_grad);

/* Exact ROC AUC (ties count one half) of scores against 0/1 labels; -EDOM if one class only. */
int wc_auc(const float *score, const float *label, uint32_t n, double *out);

/* ---- the PS tables of the built-in models (wc_model_ps.c) ---- */

/* The built-in models of wharf-train. */
enum wc_ps_model { WC_PSM_SOFTMAX = 0, WC_PSM_MLP, WC_PSM_LR, WC_PSM_FM, WC_PSM_COUNT };

/* "softmax" | "mlp" | "lr" | "fm" | "count" -> 0, else -EINVAL naming what was expected. */
int wc_ps_model_parse(const char *s, enum wc_ps_model *out, char *err, size_t errlen);
const char *wc_ps_model_name(enum wc_ps_model m);
/* The learning rate a model's tables get when no --lr is given: lr 2, fm 1, the others 0.1. */
float wc_ps_model_default_lr(enum wc_ps_model m);
/*
 * The tables a model keeps on the PS: dense models one table per tensor (wc_dense_tensors,
 * named as the tensors), CTR models a sparse table "weights" (row dim 1, or 1+fm_k) plus a
 * 1x1 dense "bias", "count" one sparse SGD table "counts" with lr 1 (a pushed gradient of -1
 * adds exactly 1: the exactly-once ledger). hidden: MLP width; max_keys: largest sparse
 * request. out is initialized here (ps_model_tables_free it; nothing to free on failure).
 */
int wc_model_tables_make(enum wc_ps_model m, float lr, uint32_t hidden, uint32_t fm_k,
			 uint32_t max_keys, struct ps_model_tables *out, char *err, size_t errlen);

#endif
