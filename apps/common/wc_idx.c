/*
 * wc_idx.c — IDX (MNIST-family) readers over gzip with zlib, and the Fashion-MNIST loader.
 *
 * Call chain: apps/train -> wc_fmnist_load -> wc_idx_read_images / wc_idx_read_labels ->
 * gzread. Start-up only, so plain malloc and stdio-style errors are fine here.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "apps/common/wc_data.h"
#include "apps/common/wc_pvt.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAX_SIDE 1024u

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Read exactly len bytes; a short read is truncation (or corruption, which zlib names). */
static int read_exact(gzFile g, void *buf, size_t len, const char *path, const char *what,
		      char *err, size_t errlen)
{
	size_t done = 0;
	int zerr;

	while (done < len) {
		unsigned chunk = len - done > (1u << 30) ? (1u << 30) : (unsigned)(len - done);
		int got = gzread(g, (char *)buf + done, chunk);
		if (got <= 0) {
			const char *msg = gzerror(g, &zerr);
			if (got < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR))
				return wc_errf(err, errlen, -EIO, "%s: gzip data damaged reading %s: %s",
					       path, what, msg);
			return wc_errf(err, errlen, -EINVAL, "%s: truncated: expected %zu bytes of %s, "
				       "file ends after %zu", path, len, what, done);
		}
		done += (size_t)got;
	}
	return 0;
}

/* Open and check magic and the dimension count; dims[] receives the sizes. */
static int open_idx(const char *path, uint32_t magic, unsigned ndims, uint32_t *dims, gzFile *out,
		    char *err, size_t errlen)
{
	unsigned char hdr[16];
	gzFile g;
	uint32_t m;
	unsigned i;
	int rc;

	g = gzopen(path, "rb");
	if (g == NULL) {
		rc = errno != 0 ? -errno : -ENOMEM;
		return wc_errf(err, errlen, rc, "%s: cannot open: %s", path, strerror(-rc));
	}
	/* Magic first, so a wrong kind of file is named as such rather than as truncated. */
	rc = read_exact(g, hdr, 4, path, "the IDX magic", err, errlen);
	if (rc != 0)
		goto fail;
	m = be32(hdr);
	if (m != magic) {
		rc = wc_errf(err, errlen, -EINVAL, "%s: IDX magic 0x%08x; expected 0x%08x (unsigned "
			     "bytes, %u dimension%s)", path, m, magic, ndims, ndims == 1 ? "" : "s");
		goto fail;
	}
	rc = read_exact(g, hdr + 4, 4 * ndims, path, "the IDX header", err, errlen);
	if (rc != 0)
		goto fail;
	for (i = 0; i < ndims; i++)
		dims[i] = be32(hdr + 4 + 4 * i);
	*out = g;
	return 0;
fail:
	gzclose(g);
	return rc;
}

/* After all announced items were read, nothing may follow. */
static int expect_end(gzFile g, const char *path, char *err, size_t errlen)
{
	char extra;

	if (gzread(g, &extra, 1) != 0)
		return wc_errf(err, errlen, -EINVAL, "%s: data after the announced items; expected the "
			       "file to end", path);
	return 0;
}

int wc_idx_read_images(const char *path, uint32_t limit, uint32_t *n, uint32_t *rows,
		       uint32_t *cols, float **pixels, char *err, size_t errlen)
{
	uint32_t d[3], keep;
	unsigned char *raw = NULL;
	float *px = NULL;
	size_t i, cnt;
	gzFile g;
	int rc;

	rc = open_idx(path, IDX_MAGIC_IMAGES, 3, d, &g, err, errlen);
	if (rc != 0)
		return rc;
	if (d[0] == 0 || d[0] > WC_IDX_MAX_ITEMS || d[1] == 0 || d[1] > IDX_MAX_SIDE || d[2] == 0 ||
	    d[2] > IDX_MAX_SIDE) {
		rc = wc_errf(err, errlen, -EINVAL, "%s: dimensions %ux%ux%u; expected 1..%u images of "
			     "1..%u x 1..%u pixels", path, d[0], d[1], d[2], WC_IDX_MAX_ITEMS,
			     IDX_MAX_SIDE, IDX_MAX_SIDE);
		goto out;
	}
	keep = limit != 0 && limit < d[0] ? limit : d[0];
	cnt = (size_t)keep * d[1] * d[2];
	raw = malloc(cnt);
	px = malloc(cnt * sizeof(float));
	if (raw == NULL || px == NULL) {
		rc = wc_errf(err, errlen, -ENOMEM, "%s: out of memory for %zu pixels", path, cnt);
		goto out;
	}
	rc = read_exact(g, raw, cnt, path, "pixels", err, errlen);
	if (rc == 0 && keep == d[0])
		rc = expect_end(g, path, err, errlen);
	if (rc != 0)
		goto out;
	for (i = 0; i < cnt; i++)
		px[i] = (float)raw[i] * (1.0f / 255.0f);
	*n = keep;
	*rows = d[1];
	*cols = d[2];
	*pixels = px;
	px = NULL;
out:
	free(raw);
	free(px);
	gzclose(g);
	return rc;
}

int wc_idx_read_labels(const char *path, uint32_t limit, uint32_t *n, uint8_t **labels,
		       char *err, size_t errlen)
{
	uint32_t d[1], keep;
	uint8_t *lb = NULL;
	gzFile g;
	int rc;

	rc = open_idx(path, IDX_MAGIC_LABELS, 1, d, &g, err, errlen);
	if (rc != 0)
		return rc;
	if (d[0] == 0 || d[0] > WC_IDX_MAX_ITEMS) {
		rc = wc_errf(err, errlen, -EINVAL, "%s: %u labels; expected 1..%u", path, d[0],
			     WC_IDX_MAX_ITEMS);
		goto out;
	}
	keep = limit != 0 && limit < d[0] ? limit : d[0];
	lb = malloc(keep);
	if (lb == NULL) {
		rc = wc_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	rc = read_exact(g, lb, keep, path, "labels", err, errlen);
	if (rc == 0 && keep == d[0])
		rc = expect_end(g, path, err, errlen);
	if (rc != 0)
		goto out;
	*n = keep;
	*labels = lb;
	lb = NULL;
out:
	free(lb);
	gzclose(g);
	return rc;
}

void wc_dataset_destroy(struct wc_dataset *d)
{
	if (d == NULL)
		return;
	free(d->x);
	free(d->y);
	free(d);
}

static int check_labels(const struct wc_dataset *d, const char *path, char *err, size_t errlen)
{
	uint32_t i;

	for (i = 0; i < d->n; i++)
		if (d->y[i] >= d->n_classes)
			return wc_errf(err, errlen, -EINVAL, "%s: label %u of item %u; expected 0..%u",
				       path, d->y[i], i, d->n_classes - 1);
	return 0;
}

int wc_fmnist_load(const char *dir, int train, uint32_t limit, struct wc_dataset **out,
		   char *err, size_t errlen)
{
	const char *split = train ? "train" : "t10k";
	char ipath[PATH_MAX], lpath[PATH_MAX];
	uint32_t ni, nl, rows, cols;
	struct wc_dataset *d;
	int rc;

	if (dir == NULL)
		dir = WC_FMNIST_DIR;
	snprintf(ipath, sizeof(ipath), "%s/%s-images-idx3-ubyte.gz", dir, split);
	snprintf(lpath, sizeof(lpath), "%s/%s-labels-idx1-ubyte.gz", dir, split);
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return wc_errf(err, errlen, -ENOMEM, "out of memory");
	rc = wc_idx_read_images(ipath, limit, &ni, &rows, &cols, &d->x, err, errlen);
	if (rc == 0)
		rc = wc_idx_read_labels(lpath, limit, &nl, &d->y, err, errlen);
	if (rc == 0 && (rows != 28 || cols != 28))
		rc = wc_errf(err, errlen, -EINVAL, "%s: images are %ux%u; expected 28x28", ipath, rows,
			     cols);
	if (rc == 0 && ni != nl)
		rc = wc_errf(err, errlen, -EINVAL, "%s has %u images but %s has %u labels; expected the "
			     "same count", ipath, ni, lpath, nl);
	d->n = ni;
	d->dim = rows * cols;
	d->n_classes = WC_FMNIST_CLASSES;
	if (rc == 0)
		rc = check_labels(d, lpath, err, errlen);
	if (rc != 0) {
		wc_dataset_destroy(d);
		return rc;
	}
	*out = d;
	return 0;
}
