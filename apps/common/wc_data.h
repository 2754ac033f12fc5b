/*
 * wc_data.h — Fashion-MNIST from the IDX files Debian's dataset-fashion-mnist installs
 * (/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz).
 *
 * Call chain: apps/train main() -> wc_fmnist_load -> wc_idx_read_images / wc_idx_read_labels
 * (zlib). Start-up only; the returned arrays are then read by the models in wc_model.h.
 *
 * IDX: big-endian u32 magic (0x00000803 images, 0x00000801 labels: unsigned bytes, 3 or 1
 * dimensions), then one big-endian u32 per dimension, then the bytes. Everything is checked:
 * magic, dimensions (28x28, count limits), image/label count agreement, truncation, trailing
 * data, label range; every error names the file and what was expected.
 */
#ifndef WHARF_WC_DATA_H
#define WHARF_WC_DATA_H

#include <stddef.h>
#include <stdint.h>

#define WC_FMNIST_DIR "/usr/share/datasets/fashion-mnist"
#define WC_FMNIST_CLASSES 10u
#define WC_IDX_MAX_ITEMS 1000000u

/* A labelled dense dataset: n rows of dim floats in [0,1], labels in [0, n_classes). */
struct wc_dataset {
	uint32_t n;
	uint32_t dim;
	uint32_t n_classes;
	float *x;   /* n * dim, row-major; owned by the dataset */
	uint8_t *y; /* n */
};

/*
 * Load the train (train != 0) or test split from dir (NULL = WC_FMNIST_DIR). limit > 0 keeps
 * only the first limit samples. On success *out is the caller's (wc_dataset_destroy).
 */
int wc_fmnist_load(const char *dir, int train, uint32_t limit, struct wc_dataset **out,
		   char *err, size_t errlen);
void wc_dataset_destroy(struct wc_dataset *d);

/* The two readers under it; limit as above. Outputs are malloc'd and the caller's on success. */
int wc_idx_read_images(const char *path, uint32_t limit, uint32_t *n, uint32_t *rows,
		       uint32_t *cols, float **pixels, char *err, size_t errlen);
int wc_idx_read_labels(const char *path, uint32_t limit, uint32_t *n, uint8_t **labels,
		       char *err, size_t errlen);

#endif
