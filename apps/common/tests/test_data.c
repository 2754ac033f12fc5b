/*
 * test_data.c — the IDX/gzip reader: hand-made files (good, bad magic, bad dimensions,
 * truncated, trailing bytes, damaged gzip, count mismatch, bad labels) and the real
 * Fashion-MNIST files from Debian's dataset-fashion-mnist (skipped when not installed;
 * under `make test`, which installs it, a failure).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "apps/common/wc_data.h"
#include "wc_testlib.h"

struct fx {
	char dir[64];
	char err[512];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/wc_idx_XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* Write an IDX file: header (magic + dims), then body_len bytes of body, gzipped. */
static void write_idx(const struct fx *f, const char *name, uint32_t magic, const uint32_t *dims,
		      unsigned nd, const unsigned char *body, size_t body_len)
{
	char path[256];
	unsigned char hdr[16];
	unsigned i;
	gzFile g;

	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	put_be32(hdr, magic);
	for (i = 0; i < nd; i++)
		put_be32(hdr + 4 + 4 * i, dims[i]);
	g = gzopen(path, "wb");
	assert_non_null(g);
	assert_int_equal(gzwrite(g, hdr, 4 + 4 * nd), (int)(4 + 4 * nd));
	if (body_len > 0)
		assert_int_equal(gzwrite(g, body, (unsigned)body_len), (int)body_len);
	assert_int_equal(gzclose(g), Z_OK);
}

/* A 3-sample 28x28 split named "train" in f->dir with pixel value = sample index * 100. */
static void write_split(const struct fx *f, uint32_t n_img, size_t img_bytes, uint32_t n_lab,
			const unsigned char *labels)
{
	static const size_t px = 28 * 28;
	unsigned char *body = calloc(3, px + 1);
	uint32_t di[3] = { n_img, 28, 28 }, dl[1] = { n_lab };
	size_t i;

	assert_non_null(body);
	for (i = 0; i < 3 * px + 1; i++)
		body[i] = (unsigned char)((i / px) * 100);
	body[5] = 255;
	write_idx(f, "train-images-idx3-ubyte.gz", 0x803, di, 3, body, img_bytes);
	write_idx(f, "train-labels-idx1-ubyte.gz", 0x801, dl, 1, labels, n_lab);
	free(body);
}

static void test_data_reads_small_split(void **state)
{
	struct fx *f = *state;
	const unsigned char lab[3] = { 9, 0, 3 };
	struct wc_dataset *d = NULL;

	write_split(f, 3, 3 * 784, 3, lab);
	assert_int_equal(wc_fmnist_load(f->dir, 1, 0, &d, f->err, sizeof(f->err)), 0);
	assert_int_equal(d->n, 3);
	assert_int_equal(d->dim, 784);
	assert_int_equal(d->y[0], 9);
	assert_int_equal(d->y[2], 3);
	assert_true(d->x[5] == 1.0f);
	assert_true(d->x[0] == 0.0f);
	assert_float_equal(d->x[784 + 1], 100.0f / 255.0f, 1e-6);
	wc_dataset_destroy(d);
	/* a limit keeps the first samples */
	assert_int_equal(wc_fmnist_load(f->dir, 1, 2, &d, f->err, sizeof(f->err)), 0);
	assert_int_equal(d->n, 2);
	assert_int_equal(d->y[1], 0);
	wc_dataset_destroy(d);
	wc_dataset_destroy(NULL);
}

static void test_data_refuses_truncated_and_trailing(void **state)
{
	struct fx *f = *state;
	const unsigned char lab[3] = { 1, 2, 3 };
	struct wc_dataset *d = NULL;

	write_split(f, 3, 3 * 784 - 10, 3, lab);
	assert_int_equal(wc_fmnist_load(f->dir, 1, 0, &d, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "truncated"));
	assert_non_null(strstr(f->err, "train-images-idx3-ubyte.gz"));
	assert_null(d);
	write_split(f, 3, 3 * 784 + 1, 3, lab);
	assert_int_equal(wc_fmnist_load(f->dir, 1, 0, &d, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "data after"));
	write_split(f, 3, 3 * 784, 2, lab);
	assert_int_equal(wc_fmnist_load(f->dir, 1, 0, &d, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "same count"));
	assert_null(d);
}

static void test_data_refuses_bad_header_and_labels(void **state)
{
	struct fx *f = *state;
	const unsigned char lab[3] = { 1, 10, 3 };
	const unsigned char body[16] = { 0 };
	uint32_t dims[3] = { 1, 2, 2 };
	struct wc_dataset *d = NULL;
	uint32_t n, r, c;
	float *px;
	char path[256];

	write_split(f, 3, 3 * 784, 3, lab);
	assert_int_equal(wc_fmnist_load(f->dir, 1, 0, &d, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "label 10 of item 1"));

	snprintf(path, sizeof(path), "%s/m.gz", f->dir);
	write_idx(f, "m.gz", 0x801, dims, 1, body, 1); /* a labels file where images are expected */
	assert_int_equal(wc_idx_read_images(path, 0, &n, &r, &c, &px, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "magic 0x00000801; expected 0x00000803"));
	dims[1] = 0;
	write_idx(f, "m.gz", 0x803, dims, 3, body, 0);
	assert_int_equal(wc_idx_read_images(path, 0, &n, &r, &c, &px, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "dimensions 1x0x2"));
	write_idx(f, "m.gz", 0x803, dims, 1, body, 0); /* header itself cut short */
	assert_int_equal(wc_idx_read_images(path, 0, &n, &r, &c, &px, f->err, sizeof(f->err)), -EINVAL);
	assert_non_null(strstr(f->err, "IDX header"));
	assert_int_equal(wc_fmnist_load("/nonexistent", 0, 0, &d, f->err, sizeof(f->err)), -ENOENT);
	assert_non_null(strstr(f->err, "/nonexistent/t10k-images-idx3-ubyte.gz"));
}

static void test_data_refuses_damaged_gzip(void **state)
{
	struct fx *f = *state;
	const unsigned char lab[3] = { 1, 2, 3 };
	char path[256];
	unsigned char *buf;
	long len;
	FILE *fp;
	uint8_t *labels;
	uint32_t n;

	write_split(f, 3, 3 * 784, 3, lab);
	snprintf(path, sizeof(path), "%s/train-labels-idx1-ubyte.gz", f->dir);
	fp = fopen(path, "r+b");
	assert_non_null(fp);
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	buf = malloc((size_t)len);
	assert_non_null(buf);
	fseek(fp, 0, SEEK_SET);
	assert_int_equal(fread(buf, 1, (size_t)len, fp), (size_t)len);
	buf[len - 6] ^= 0xff; /* the CRC32 trailer no longer matches */
	fseek(fp, 0, SEEK_SET);
	assert_int_equal(fwrite(buf, 1, (size_t)len, fp), (size_t)len);
	fclose(fp);
	free(buf);
	assert_int_not_equal(wc_idx_read_labels(path, 0, &n, &labels, f->err, sizeof(f->err)), 0);
	assert_non_null(strstr(f->err, path));
}

static void test_data_reads_real_fashion_mnist(void **state)
{
	struct fx *f = *state;
	struct wc_dataset *tr = NULL, *te = NULL;
	uint32_t counts[10] = { 0 }, i;
	double sum = 0;

	wc_test_need_file(WC_FMNIST_DIR "/t10k-labels-idx1-ubyte.gz", "dataset-fashion-mnist");
	assert_int_equal(wc_fmnist_load(NULL, 0, 0, &te, f->err, sizeof(f->err)), 0);
	assert_int_equal(te->n, 10000);
	for (i = 0; i < te->n; i++)
		counts[te->y[i]]++;
	for (i = 0; i < 10; i++)
		assert_int_equal(counts[i], 1000); /* the test split is balanced */
	for (i = 0; i < 784; i++)
		sum += te->x[i];
	assert_true(sum > 10.0 && sum < 784.0); /* a real image, not blank or saturated */
	assert_int_equal(wc_fmnist_load(NULL, 1, 1000, &tr, f->err, sizeof(f->err)), 0);
	assert_int_equal(tr->n, 1000);
	wc_dataset_destroy(tr);
	wc_dataset_destroy(te);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_data_reads_small_split, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_refuses_truncated_and_trailing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_refuses_bad_header_and_labels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_refuses_damaged_gzip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_reads_real_fashion_mnist, setup, teardown),
	};

	return cmocka_run_group_tests_name("data", tests, NULL, NULL);
}
