/*
 * test_optim.c — each server-side optimizer (SGD, Adagrad, Adam, FTRL-Proximal) against
 * straightforward double-precision reference code, over many steps of random gradients,
 * through the whole path (client encode -> ps_handle -> shard apply -> pull -> decode);
 * parameters that make the arithmetic undefined refused at ps_server_create; an update
 * whose result would not be finite refused row by row in every mode, counted, and replayed
 * from the log the same way.
 */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ps_core/ps_pvt.h"
#include "ps_core/tests/pt_util.h"

#define DIM 8
#define KEYS 16
#define STEPS 200

struct ref_row {
	double w[DIM], a[DIM], b[DIM];
	double p1, p2;
};

static void ref_step(const struct ps_table_config *t, struct ref_row *r, const float *gf)
{
	const struct ps_optim_params *o = &t->op;
	int j;

	if (t->optim == PS_OPT_ADAM) {
		r->p1 *= (double)o->beta1;
		r->p2 *= (double)o->beta2;
	}
	for (j = 0; j < DIM; j++) {
		double g = gf[j], lr = o->lr;
		switch (t->optim) {
		case PS_OPT_SGD:
			r->w[j] -= lr * g;
			break;
		case PS_OPT_ADAGRAD:
			r->a[j] += g * g;
			r->w[j] -= lr * g / (sqrt(r->a[j]) + o->eps);
			break;
		case PS_OPT_ADAM: {
			double b1 = o->beta1, b2 = o->beta2;
			r->a[j] = b1 * r->a[j] + (1 - b1) * g;
			r->b[j] = b2 * r->b[j] + (1 - b2) * g * g;
			double mhat = r->a[j] / (1 - r->p1), vhat = r->b[j] / (1 - r->p2);
			/* eps scaled as in the bias-corrected-lr form: eps' = eps * sqrt(1 - b2^t) */
			r->w[j] -= lr * mhat / (sqrt(vhat) + o->eps / sqrt(1 - r->p2));
			break;
		}
		case PS_OPT_FTRL: {
			double n2 = r->b[j] + g * g;
			double sigma = (sqrt(n2) - sqrt(r->b[j])) / lr;
			r->a[j] += g - sigma * r->w[j];
			r->b[j] = n2;
			if (fabs(r->a[j]) <= o->l1)
				r->w[j] = 0;
			else
				r->w[j] = -(r->a[j] - (r->a[j] > 0 ? o->l1 : -o->l1)) /
					  ((o->beta1 + sqrt(n2)) / lr + o->l2);
			break;
		}
		}
	}
}

/*
 * STEPS pushes of KEYS rows through optimizer k, the request bodies cut into pieces of split
 * bytes as received, against the double-precision reference.
 */
static void run_optim(enum ps_optim_kind k, uint32_t split)
{
	struct ps_table_config t = pt_table(9, DIM, k);
	struct pt_cluster *c;
	struct ref_row ref[KEYS];
	uint64_t keys[KEYS];
	float g[KEYS * DIM], out[KEYS * DIM];
	uint32_t i, j, s;
	unsigned seed = 7;

	t.init = PS_INIT_UNIFORM;
	t.init_a = -0.1f;
	t.init_b = 0.1f;
	t.seed = 3;
	assert_int_equal(pt_cluster_create(2, 3, PS_MODE_ASYNC, 1, &t, 1, &c), 0);
	c->split = split;
	for (i = 0; i < KEYS; i++)
		keys[i] = 100 + i * 1001;
	assert_int_equal(pt_pull(c, 0, 9, DIM, keys, KEYS, out), 0);
	memset(ref, 0, sizeof(ref));
	for (i = 0; i < KEYS; i++) {
		ref[i].p1 = ref[i].p2 = 1;
		for (j = 0; j < DIM; j++) {
			ref[i].w[j] = out[i * DIM + j];
			if (k == PS_OPT_ADAGRAD)
				ref[i].a[j] = t.op.init_accum;
		}
	}
	for (s = 0; s < STEPS; s++) {
		for (i = 0; i < KEYS * DIM; i++)
			g[i] = (float)((double)rand_r(&seed) / RAND_MAX - 0.5);
		assert_int_equal(pt_push(c, 0, 9, DIM, keys, KEYS, g), 0);
		for (i = 0; i < KEYS; i++)
			ref_step(&t, &ref[i], g + i * DIM);
	}
	assert_int_equal(pt_pull(c, 0, 9, DIM, keys, KEYS, out), 0);
	for (i = 0; i < KEYS; i++)
		for (j = 0; j < DIM; j++) {
			double want = ref[i].w[j], got = out[i * DIM + j];
			if (fabs(want - got) > 1e-3 * (1 + fabs(want)))
				fail_msg("optim %d key %u dim %u: float %.7g, reference %.7g", k, i, j, got, want);
		}
	assert_int_equal(c->errors, 0);
	pt_cluster_destroy(c);
}

/* Pieces of 13 bytes: floats split between pieces (SGD: put together, the rest in place). */
static void test_optim_sgd_matches_reference(void **s) { (void)s; run_optim(PS_OPT_SGD, 13); }
static void test_optim_adagrad_matches_reference(void **s) { (void)s; run_optim(PS_OPT_ADAGRAD, 13); }
static void test_optim_adam_matches_reference(void **s) { (void)s; run_optim(PS_OPT_ADAM, 13); }
static void test_optim_ftrl_matches_reference(void **s) { (void)s; run_optim(PS_OPT_FTRL, 13); }
/*
 * Pieces of whole floats shorter than a row (12 and 20 bytes against rows of 32): SGD reads
 * each row's gradient in place from the three or four pieces it lies in (ps_sgd_pieces).
 */
static void test_optim_sgd_rows_over_pieces_match_reference(void **s)
{
	(void)s;
	run_optim(PS_OPT_SGD, 12);
	run_optim(PS_OPT_SGD, 20);
}

/* A reference that differs must make the comparison fail: the check has teeth. */
static void test_optim_reference_detects_wrong_lr(void **state)
{
	struct ps_table_config t = pt_table(9, DIM, PS_OPT_SGD);
	struct ref_row r;
	float g[DIM];
	int j;

	(void)state;
	memset(&r, 0, sizeof(r));
	for (j = 0; j < DIM; j++)
		g[j] = 1.0f;
	ref_step(&t, &r, g);
	assert_true(fabs(r.w[0] + 0.1) < 1e-7);
	t.op.lr = 0.2f;
	ref_step(&t, &r, g);
	assert_true(fabs(r.w[0] + 0.3) < 1e-7);
}

/* ---- parameters refused at start */

struct bad_param {
	enum ps_optim_kind optim;
	void (*set)(struct ps_table_config *t);
	const char *words;
};

static void eps0(struct ps_table_config *t) { t->op.eps = 0; t->op.init_accum = 0; }
static void accum_neg(struct ps_table_config *t) { t->op.init_accum = -1; }
static void beta1_one(struct ps_table_config *t) { t->op.beta1 = 1; }
static void beta2_big(struct ps_table_config *t) { t->op.beta2 = 1.5f; }
static void l1_neg(struct ps_table_config *t) { t->op.l1 = -0.1f; }
static void beta_neg(struct ps_table_config *t) { t->op.beta1 = -1; }
static void lr0(struct ps_table_config *t) { t->op.lr = 0; }
static void eps_inf(struct ps_table_config *t) { t->op.eps = INFINITY; }
static void normal_neg(struct ps_table_config *t) { t->init = PS_INIT_NORMAL; t->init_b = -1; }
static void uniform_rev(struct ps_table_config *t)
{
	t->init = PS_INIT_UNIFORM;
	t->init_a = 1;
	t->init_b = 0;
}

static void test_optim_bad_params_refused_at_create(void **state)
{
	static const struct bad_param bad[] = {
		{ PS_OPT_ADAGRAD, eps0, "adagrad: eps must be > 0" },
		{ PS_OPT_ADAGRAD, accum_neg, "init_accum must be >= 0" },
		{ PS_OPT_ADAM, eps0, "adam: eps must be > 0" },
		{ PS_OPT_ADAM, beta1_one, "beta1 and beta2 must be in [0, 1)" },
		{ PS_OPT_ADAM, beta2_big, "beta1 and beta2 must be in [0, 1)" },
		{ PS_OPT_FTRL, l1_neg, "ftrl: beta (beta1), l1 and l2 must be >= 0" },
		{ PS_OPT_FTRL, beta_neg, "ftrl: beta (beta1), l1 and l2 must be >= 0" },
		{ PS_OPT_SGD, lr0, "lr must be > 0" },
		{ PS_OPT_SGD, eps_inf, "must be finite" },
		{ PS_OPT_SGD, normal_neg, "stddev b >= 0" },
		{ PS_OPT_SGD, uniform_rev, "a <= b" },
	};
	struct ps_server_config sc = { .n_servers = 1, .n_shards = 1, .n_lcores = 1, .n_workers = 1,
				       .n_tables = 1 };
	struct ps_table_config t;
	struct ps_server *s = NULL;
	char err[256];

	(void)state;
	sc.tables = &t;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t = pt_table(7, 4, bad[i].optim);
		bad[i].set(&t);
		err[0] = '\0';
		if (ps_server_create(&sc, &s, err, sizeof(err)) != -EINVAL)
			fail_msg("case %zu (%s) was not refused", i, bad[i].words);
		if (!strstr(err, bad[i].words) || !strstr(err, "table 7"))
			fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err, bad[i].words);
	}
	/* The edges that are fine: a zero initial accumulator with eps > 0, betas of 0. */
	t = pt_table(7, 4, PS_OPT_ADAGRAD);
	t.op.init_accum = 0;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), 0);
	ps_server_destroy(s);
	t = pt_table(7, 4, PS_OPT_ADAM);
	t.op.beta1 = t.op.beta2 = 0;
	assert_int_equal(ps_server_create(&sc, &s, err, sizeof(err)), 0);
	ps_server_destroy(s);
}

/* ---- updates whose result would not be finite */

#define BIG 3e38f /* finite; twice it is not */

static uint64_t nonfinite_rows(struct pt_cluster *c)
{
	struct ps_shard_stats st;
	uint64_t n = 0;

	for (uint32_t i = 0; ps_server_shard_stats(c->srv[0], i, &st) == 0; i++)
		n += st.nonfinite_rows;
	return n;
}

/* The last reply pt_deliver handed back: a PS_T_ERROR of kind PS_ERR_NOT_FINITE, -ERANGE. */
static void expect_nonfinite_reply(struct pt_cluster *c)
{
	assert_int_equal(c->last_rc, -ERANGE);
	assert_int_equal(c->rep_buf[3], PS_T_ERROR);
	assert_int_equal(tl_ld32(c->rep_buf + TL_MSG_HDR_LEN + 4), PS_ERR_NOT_FINITE);
}

static char nf_dir[64];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/*
 * SGD checks a row's new values before it writes any: one float that would overflow, in any
 * lane of the four-wide loop or in the tail past it (dims 16, 7, 19), keeps the whole row as it
 * was, while the push's other row is applied exactly (w - lr * g, computed in float). The
 * same with the request received in pieces: of whole floats (12 and 20 bytes: the row read
 * in place from each piece, the overflow in any of them), of 6 bytes (floats split between
 * two put together) and of 3 (dim 19: more parts than PS_SPAN_PIECES, the row copied whole).
 */
static void test_optim_sgd_one_lane_overflow_keeps_row(void **state)
{
	static const uint32_t dims[3] = { 16, 7, 19 }, splits[5] = { 0, 12, 20, 6, 3 };

	(void)state;
	for (uint32_t di = 0; di < 15; di++) {
		uint32_t d = dims[di % 3], split = splits[di / 3];
		for (uint32_t lane = 0; lane < d; lane++) {
			struct ps_table_config t = pt_table(1, d, PS_OPT_SGD);
			uint64_t keys[2] = { 5, 6 };
			float g[2 * 19], w0[2 * 19], out[2 * 19], big[19];
			struct pt_cluster *c;

			t.op.lr = 1;
			assert_int_equal(pt_cluster_create(1, 2, PS_MODE_ASYNC, 1, &t, 1, &c), 0);
			c->split = split;
			for (uint32_t j = 0; j < d; j++)
				big[j] = j == lane ? -BIG : 0.5f;
			assert_int_equal(pt_push(c, 0, 1, d, keys, 1, big), 0);
			assert_int_equal(pt_pull(c, 0, 1, d, keys, 2, w0), 0);
			for (uint32_t j = 0; j < 2 * d; j++)
				g[j] = j == lane ? -BIG : 0.25f * (float)(j + 1);
			assert_int_equal(pt_push(c, 0, 1, d, keys, 2, g), -ERANGE);
			expect_nonfinite_reply(c);
			assert_int_equal(pt_pull(c, 0, 1, d, keys, 2, out), 0);
			assert_memory_equal(out, w0, d * sizeof(float));
			for (uint32_t j = d; j < 2 * d; j++)
				assert_true(out[j] == w0[j] - g[j]);
			assert_int_equal(nonfinite_rows(c), 1);
			pt_cluster_destroy(c);
		}
	}
}

/*
 * Async: the rows whose update would leave a NaN or an infinity keep their values (SGD's
 * weight past FLT_MAX; Adagrad's accumulator, the square of a huge gradient), the push's
 * other rows are applied, the reply is an error naming it, the shard counts it, the push's
 * sequence is recorded (the same push again is a duplicate) and the log replays it to the
 * same state.
 */
static void test_optim_nonfinite_update_refused_row_kept(void **state)
{
	struct ps_table_config t[2] = { pt_table(1, 2, PS_OPT_SGD), pt_table(2, 2, PS_OPT_ADAGRAD) };
	struct ps_recover_stats rs;
	struct pt_cluster *c, *r;
	uint64_t k1[1] = { 1 }, k13[2] = { 1, 3 }, k4[1] = { 4 };
	float g1[2] = { -BIG, -BIG }, g13[4] = { -BIG, -BIG, 1, 1 }, huge[2] = { 1e20f, 1 };
	float out[4], before[4], dup_msg[256];
	struct ps_reply rep;
	struct tl_msg_view v;
	struct tl_iov iov[2];
	uint32_t len;
	char err[256];

	(void)state;
	snprintf(nf_dir, sizeof(nf_dir), "/tmp/ps_optim_test_%d", (int)getpid());
	nftw(nf_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	assert_int_equal(mkdir(nf_dir, 0755), 0);
	t[0].op.lr = 1;
	assert_int_equal(pt_cluster_create_wal(1, 2, PS_MODE_ASYNC, 1, t, 2, nf_dir, 0, &c), 0);
	assert_int_equal(ps_recover(c->h[0], NULL, &rs, err, sizeof(err)), 0);
	assert_int_equal(pt_push(c, 0, 1, 2, k1, 1, g1), 0);          /* w = 3e38 */
	/* key 1 would go to 6e38 = inf: kept; key 3 is applied */
	assert_int_equal(ps_client_push(c->cl[0], 1, 2, k13, 2, g13, NULL, NULL, c->msgs), 0);
	len = c->msgs[0].len;
	assert_true(len <= sizeof(dup_msg));
	memcpy(dup_msg, c->msgs[0].buf, len);
	pt_deliver(c, 0);
	expect_nonfinite_reply(c);
	assert_non_null(strstr((char *)c->rep_buf + TL_MSG_HDR_LEN + 8, "1 of 2 rows"));
	assert_int_equal(pt_pull(c, 0, 1, 2, k13, 2, out), 0);
	assert_true(out[0] == BIG && out[1] == BIG && out[2] == -1 && out[3] == -1);
	assert_int_equal(nonfinite_rows(c), 1);
	/* the same push again (a resend): a duplicate, nothing applied twice */
	pt_view((const uint8_t *)dup_msg, 0, iov, 2, &v);
	rep = (struct ps_reply){ .buf = c->rep_buf, .cap = PT_BUF };
	assert_int_equal(ps_handle(c->h[0], &v, &rep), 0);
	assert_int_equal(rep.buf[3], PS_T_PUSH_R);
	assert_int_equal(tl_ld32(rep.buf + TL_MSG_HDR_LEN + 8), 0);
	assert_int_equal(pt_pull(c, 0, 1, 2, k13, 2, out), 0);
	assert_true(out[2] == -1);
	/* Adagrad: the accumulator would be inf (1e40), the weight would barely move: kept */
	assert_int_equal(pt_pull(c, 0, 2, 2, k4, 1, before), 0);
	assert_int_equal(pt_push(c, 0, 2, 2, k4, 1, huge), -ERANGE);
	expect_nonfinite_reply(c);
	assert_int_equal(pt_pull(c, 0, 2, 2, k4, 1, out), 0);
	assert_memory_equal(out, before, 2 * sizeof(float));
	assert_int_equal(nonfinite_rows(c), 2);
	assert_true(c->srv[0]->shards[ps_key_shard(4, 2)].tables[1].n_rows == 1);
	pt_cluster_destroy(c); /* killed: the log has the refused pushes too */

	assert_int_equal(pt_cluster_create_wal(1, 2, PS_MODE_ASYNC, 1, t, 2, nf_dir, 0, &r), 0);
	if (ps_recover(r->h[0], NULL, &rs, err, sizeof(err)) != 0)
		fail_msg("recovery: %s", err);
	assert_int_equal(rs.records, 4); /* the resend too: logged before a shard saw it was one */
	assert_int_equal(pt_pull(r, 0, 1, 2, k13, 2, out), 0);
	assert_true(out[0] == BIG && out[2] == -1);
	assert_int_equal(nonfinite_rows(r), 2);
	pt_cluster_destroy(r);
	nftw(nf_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * Sync: a push whose addition to the step's sum would overflow is refused (the sum keeps the
 * other worker's part); a step whose sum would take a weight past FLT_MAX leaves that row as
 * it was (counted). GEO: a delta that would overflow the row is refused.
 */
static void test_optim_nonfinite_sync_and_geo(void **state)
{
	struct ps_table_config t = pt_table(1, 1, PS_OPT_SGD);
	struct pt_cluster *c;
	uint64_t k = 5;
	float big = BIG, nbig = -BIG, v;

	(void)state;
	t.op.lr = 1;
	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_SYNC, 2, &t, 1, &c), 0);
	assert_int_equal(pt_push(c, 0, 1, 1, &k, 1, &nbig), 0);
	assert_int_equal(pt_push(c, 1, 1, 1, &k, 1, &nbig), -ERANGE); /* sum would be -6e38 */
	expect_nonfinite_reply(c);
	assert_int_equal(pt_barrier_all(c, 0), 0);
	assert_int_equal(pt_pull(c, 0, 1, 1, &k, 1, &v), 0);
	assert_true(v == BIG);                                        /* 0 - 1 * (-3e38) */
	assert_int_equal(pt_push(c, 0, 1, 1, &k, 1, &nbig), 0);       /* step 1: 3e38 + 3e38 */
	assert_int_equal(pt_barrier_all(c, 1), 0);
	assert_int_equal(pt_pull(c, 0, 1, 1, &k, 1, &v), 0);
	assert_true(v == BIG);                                        /* the step left it */
	assert_int_equal(nonfinite_rows(c), 2);
	pt_cluster_destroy(c);

	assert_int_equal(pt_cluster_create(1, 1, PS_MODE_GEO, 1, &t, 1, &c), 0);
	assert_int_equal(pt_push(c, 0, 1, 1, &k, 1, &big), 0);
	assert_int_equal(pt_push(c, 0, 1, 1, &k, 1, &big), -ERANGE);
	expect_nonfinite_reply(c);
	assert_int_equal(pt_pull(c, 0, 1, 1, &k, 1, &v), 0);
	assert_true(v == BIG);
	assert_int_equal(nonfinite_rows(c), 1);
	pt_cluster_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_optim_sgd_matches_reference),
		cmocka_unit_test(test_optim_adagrad_matches_reference),
		cmocka_unit_test(test_optim_adam_matches_reference),
		cmocka_unit_test(test_optim_ftrl_matches_reference),
		cmocka_unit_test(test_optim_sgd_rows_over_pieces_match_reference),
		cmocka_unit_test(test_optim_reference_detects_wrong_lr),
		cmocka_unit_test(test_optim_bad_params_refused_at_create),
		cmocka_unit_test(test_optim_nonfinite_update_refused_row_kept),
		cmocka_unit_test(test_optim_sgd_one_lane_overflow_keeps_row),
		cmocka_unit_test(test_optim_nonfinite_sync_and_geo),
	};
	return cmocka_run_group_tests_name("ps_optim", tests, NULL, NULL);
}
