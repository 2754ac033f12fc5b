/*
 * fz_config.c — fuse's knobs: defaults, parsing one knob from text, validation.
 *
 * Called at startup by apps (via apps/common's config sources: flags, TF_CONFIG-style
 * "tensor_fuse", a JSON file) and by fz_peer_create, which refuses a config that does not
 * validate. A bad value is an error with a sentence for a human, never a silent clamp.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuse/fz.h"

void fz_config_defaults(struct fz_config *cfg)
{
	cfg->tensor_fuse = false;
	cfg->fuse_max_bytes = FZ_DEFAULT_MAX_BYTES;
	cfg->fuse_threshold_bytes = FZ_DEFAULT_THRESHOLD_BYTES;
	cfg->fuse_max_delay_us = FZ_DEFAULT_MAX_DELAY_US;
	cfg->fuse_max_msgs = FZ_DEFAULT_MAX_MSGS;
	cfg->fuse_frames = FZ_DEFAULT_FRAMES;
}

static int fz_fail(char *err, size_t errlen, const char *what)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", what);
	return -EINVAL;
}

int fz_config_validate(const struct fz_config *cfg, char *err, size_t errlen)
{
	char msg[160];

	if (cfg->fuse_max_bytes < FZ_MIN_MAX_BYTES || cfg->fuse_max_bytes > FZ_MAX_MAX_BYTES) {
		snprintf(msg, sizeof(msg), "fuse_max_bytes %u is outside %u..%u",
			 cfg->fuse_max_bytes, FZ_MIN_MAX_BYTES, FZ_MAX_MAX_BYTES);
		return fz_fail(err, errlen, msg);
	}
	/* A message at the threshold must fit one frame together with its sub-header. */
	if (cfg->fuse_threshold_bytes < 1 ||
	    cfg->fuse_threshold_bytes > cfg->fuse_max_bytes - FZ_SUB_HDR_MAX) {
		snprintf(msg, sizeof(msg),
			 "fuse_threshold_bytes %u is outside 1..%u (fuse_max_bytes - %u)",
			 cfg->fuse_threshold_bytes, cfg->fuse_max_bytes - FZ_SUB_HDR_MAX,
			 FZ_SUB_HDR_MAX);
		return fz_fail(err, errlen, msg);
	}
	if (cfg->fuse_max_delay_us < 1 || cfg->fuse_max_delay_us > FZ_MAX_MAX_DELAY_US) {
		snprintf(msg, sizeof(msg), "fuse_max_delay_us %u is outside 1..%u",
			 cfg->fuse_max_delay_us, FZ_MAX_MAX_DELAY_US);
		return fz_fail(err, errlen, msg);
	}
	if (cfg->fuse_max_msgs < 1 || cfg->fuse_max_msgs > FZ_MAX_MAX_MSGS) {
		snprintf(msg, sizeof(msg), "fuse_max_msgs %u is outside 1..%u",
			 cfg->fuse_max_msgs, FZ_MAX_MAX_MSGS);
		return fz_fail(err, errlen, msg);
	}
	if (cfg->fuse_frames < FZ_MIN_FRAMES || cfg->fuse_frames > FZ_MAX_FRAMES) {
		snprintf(msg, sizeof(msg), "fuse_frames %u is outside %u..%u",
			 cfg->fuse_frames, FZ_MIN_FRAMES, FZ_MAX_FRAMES);
		return fz_fail(err, errlen, msg);
	}
	return 0;
}

/* Strict decimal u32: digits only, no sign, no spaces, no overflow. */
static int fz_parse_u32(const char *s, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end != '\0' || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int fz_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "on", "true", "1", "yes" };
	static const char *const no[] = { "off", "false", "0", "no" };
	size_t i;

	if (!s)
		return -EINVAL;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

struct fz_knob {
	const char *key;
	size_t off;
	uint32_t lo, hi;
};

static const struct fz_knob fz_knobs[] = {
	{ "fuse_max_bytes", offsetof(struct fz_config, fuse_max_bytes),
	  FZ_MIN_MAX_BYTES, FZ_MAX_MAX_BYTES },
	{ "fuse_threshold_bytes", offsetof(struct fz_config, fuse_threshold_bytes),
	  1, FZ_MAX_MAX_BYTES - FZ_SUB_HDR_MAX },
	{ "fuse_max_delay_us", offsetof(struct fz_config, fuse_max_delay_us),
	  1, FZ_MAX_MAX_DELAY_US },
	{ "fuse_max_msgs", offsetof(struct fz_config, fuse_max_msgs), 1, FZ_MAX_MAX_MSGS },
	{ "fuse_frames", offsetof(struct fz_config, fuse_frames), FZ_MIN_FRAMES, FZ_MAX_FRAMES },
};

int fz_config_set(struct fz_config *cfg, const char *key, const char *value, char *err,
		  size_t errlen)
{
	char msg[200];
	uint32_t v;
	size_t i;

	if (!cfg || !key)
		return fz_fail(err, errlen, "fuse: no config or key");
	if (strcmp(key, "tensor_fuse") == 0) {
		bool b;
		if (fz_parse_bool(value, &b) != 0) {
			snprintf(msg, sizeof(msg),
				 "tensor_fuse: \"%.40s\" is not on/off/true/false/1/0",
				 value ? value : "(null)");
			return fz_fail(err, errlen, msg);
		}
		cfg->tensor_fuse = b;
		return 0;
	}
	for (i = 0; i < sizeof(fz_knobs) / sizeof(fz_knobs[0]); i++) {
		const struct fz_knob *k = &fz_knobs[i];
		if (strcmp(key, k->key) != 0)
			continue;
		if (fz_parse_u32(value, &v) != 0 || v < k->lo || v > k->hi) {
			snprintf(msg, sizeof(msg), "%s: \"%.40s\" is not a whole number in %u..%u",
				 k->key, value ? value : "(null)", k->lo, k->hi);
			return fz_fail(err, errlen, msg);
		}
		memcpy((char *)cfg + k->off, &v, sizeof(v));
		return 0;
	}
	return -ENOENT;
}
