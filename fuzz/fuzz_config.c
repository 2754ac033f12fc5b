/*
 * fuzz_config.c — libFuzzer harness for apps/common's configuration parsers
 * (ps_core/ps_config.h): TF_CONFIG JSON, Paddle's variables, DeepRec/wharf knob
 * variables, `.endpoint_map` text, the JSON config file and the command-line flags.
 *
 * Call chain exercised: main() (simulated) -> ps_cfg_env_tfconfig | ps_cfg_env_paddle |
 * ps_cfg_env_knobs | ps_epmap_parse | ps_cfg_file_parse | ps_flags_parse, then, for a
 * source that parsed, ps_cluster_merge and ps_cluster_finalize_with as ps_config_load does,
 * host names resolved by cfg_lookup: a hash of the name in 10.0.0.0/8, never the network
 * (the system's resolver would ask DNS and wait wait_timeout_s for a name that fails).
 *
 * Input layout: u8 selector (mod 6 picks the parser), then the text. For the variable
 * parsers the text is lines, each "<u8 name index><value>": the first byte picks the
 * variable (so the fuzzer needs no names), the rest is its value. For the flags, each
 * line is one argv entry. The endpoint map is looked up at a path that does not exist,
 * so a run never reads the working directory's files.
 *
 * Invariants checked besides ASan/UBSan (ps_config.h promises them): a refused input
 * returns -errno with a non-empty message, and a refused source leaves the caller's
 * struct as it was; every entry of a parsed endpoint map is found by its control key.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "ps_core/ps_config.h"
#include "fuzz/fuzz_util.h"

#define CFG_MAX_LINES 64u

static const char *const cfg_paddle_vars[] = {
	"TRAINING_ROLE", "PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_TRAINERS_NUM",
	"PADDLE_TRAINER_ID", "POD_IP", "PADDLE_PORT", "PADDLE_TRAINER_ENDPOINTS",
};
static const char *const cfg_knob_vars[] = {
	"WHARF_PROTOCOL", "WHARF_MODE", "PS_ENABLE_POLLING", "WORKER_ENABLE_POLLING",
	"PS_DISABLE_PIN_CORES", "WORKER_DISABLE_PIN_CORES", "NETWORK_PS_CORE_NUMBER",
	"NETWORK_WORKER_CORE_NUMBER", "WHARF_TENSOR_FUSE", "WHARF_GEO_K", "WHARF_WAIT_TIMEOUT_S",
	"WHARF_DATA_PREFIX", "WHARF_DATA_GATEWAY", "WHARF_DATA_IFACE", "WHARF_GEO_LOG_MAX",
};

enum cfg_target { CFG_TFCONFIG, CFG_PADDLE, CFG_EPMAP, CFG_FILE, CFG_KNOBS, CFG_FLAGS, CFG_N };

/* Splits text (NUL-terminated, modified in place) at '\n' into at most max lines. */
static unsigned cfg_lines(char *text, char **line, unsigned max)
{
	unsigned n = 0;
	char *p = text, *nl;

	while (n < max) {
		line[n++] = p;
		nl = strchr(p, '\n');
		if (nl == NULL)
			break;
		*nl = '\0';
		p = nl + 1;
	}
	return n;
}

/* Builds envp entries "NAME=value" from lines whose first byte picks NAME. */
static unsigned cfg_env(char *text, const char *const *names, unsigned nnames, char **envp)
{
	char *line[CFG_MAX_LINES];
	unsigned n = cfg_lines(text, line, CFG_MAX_LINES), i, k = 0;

	for (i = 0; i < n; i++) {
		const char *name;
		size_t len;
		if (line[i][0] == '\0')
			continue;
		name = names[(uint8_t)line[i][0] % nnames];
		len = strlen(name) + strlen(line[i] + 1) + 2;
		envp[k] = malloc(len);
		if (envp[k] == NULL)
			break;
		snprintf(envp[k], len, "%s=%s", name, line[i] + 1);
		k++;
	}
	envp[k] = NULL;
	return k;
}

static int cfg_run(enum cfg_target t, char *text, struct ps_cluster *out, char *err, size_t errlen)
{
	char *envp[CFG_MAX_LINES + 1] = {NULL}, *argv[CFG_MAX_LINES + 1];
	unsigned n = 0, i;
	bool help = false;
	int rc = -EINVAL;

	switch (t) {
	case CFG_TFCONFIG:
		n = 1;
		envp[0] = malloc(strlen(text) + sizeof("TF_CONFIG="));
		if (envp[0] == NULL)
			return -ENOMEM;
		sprintf(envp[0], "TF_CONFIG=%s", text);
		rc = ps_cfg_env_tfconfig(envp, out, err, errlen);
		break;
	case CFG_PADDLE:
	case CFG_KNOBS:
		if (t == CFG_PADDLE) {
			n = cfg_env(text, cfg_paddle_vars, 7, envp);
			rc = ps_cfg_env_paddle(envp, out, err, errlen);
		} else {
			n = cfg_env(text, cfg_knob_vars, sizeof(cfg_knob_vars) / sizeof(cfg_knob_vars[0]),
				    envp);
			rc = ps_cfg_env_knobs(envp, out, err, errlen);
		}
		break;
	case CFG_FILE:
		rc = ps_cfg_file_parse(text, "fuzz.json", out, err, errlen);
		break;
	case CFG_FLAGS:
		argv[0] = "wharf-fuzz";
		n = cfg_lines(text, argv + 1, CFG_MAX_LINES - 1) + 1;
		argv[n] = NULL;
		rc = ps_flags_parse((int)n, argv, NULL, out, &help, err, errlen);
		n = 0; /* argv entries point into text: nothing to free */
		break;
	default:
		break;
	}
	for (i = 0; i < n; i++)
		free(envp[i]);
	return rc;
}

/* Every name resolves, to an address its bytes pick (FNV-1a), without the network. */
static int cfg_lookup(void *ctx, const char *name, uint32_t *ip, char *why, size_t whylen)
{
	uint32_t h = 2166136261u;

	(void)ctx;
	(void)why;
	(void)whylen;
	for (const char *p = name; *p != '\0'; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	*ip = 0x0a000000u | (h & 0xffffffu);
	return 0;
}

/* Merges a parsed source into a fresh cluster and finalizes it, as ps_config_load does. */
static void cfg_finalize(const struct ps_cluster *src, enum ps_source kind)
{
	static char *const envp[] = {"TF_SEASTAR_ENDPOINT_MAP_PATH=/nonexistent/wharf-fuzz", NULL};
	static const struct ps_resolver r = {cfg_lookup, NULL, NULL};
	struct ps_cluster *c = malloc(sizeof(*c));
	char err[512] = "";
	int rc;

	if (c != NULL) {
		ps_cluster_init(c);
		ps_cluster_merge(c, src, kind);
		rc = ps_cluster_finalize_with(c, envp, &r, err, sizeof(err));
		/*
		 * Only the message is checked: finalize fills derived fields (core numbers)
		 * before a later step (the map file) can fail, so a refused cluster is not
		 * left as it was. ps_config_load copies out only on success, so no caller
		 * sees it; reported to the lead as a deviation from ps_config.h's wording.
		 */
		if (rc != 0)
			FH_CHECK(rc < 0 && err[0] != '\0');
	}
	free(c);
}

static void cfg_epmap(const char *text)
{
	struct ps_epmap *m = malloc(sizeof(*m));
	char err[512] = "";
	unsigned i;
	int rc;

	if (m == NULL)
		return;
	memset(m, 0, sizeof(*m));
	rc = ps_epmap_parse(text, "fuzz.endpoint_map", m, err, sizeof(err));
	if (rc != 0) {
		FH_CHECK(rc < 0 && err[0] != '\0');
	} else {
		FH_CHECK(m->n <= 2 * PS_MAX_NODES);
		for (i = 0; i < m->n; i++)
			FH_CHECK(ps_epmap_lookup(m, &m->e[i].control) == &m->e[i].data);
	}
	free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum ps_source kinds[CFG_N] = {PS_SRC_TF_CONFIG, PS_SRC_PADDLE, PS_SRC_FILE,
						    PS_SRC_FILE, PS_SRC_ENV_KNOBS, PS_SRC_FLAGS};
	enum cfg_target t;
	struct ps_cluster *c, *before;
	char *text, err[512] = "";
	int rc;

	if (size < 1 || size > 65536)
		return 0;
	t = (enum cfg_target)(data[0] % CFG_N);
	text = malloc(size);
	if (text == NULL)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if (t == CFG_EPMAP) {
		cfg_epmap(text);
		free(text);
		return 0;
	}
	c = malloc(sizeof(*c));
	before = malloc(sizeof(*before));
	if (c != NULL && before != NULL) {
		/* A partial source starts from zero: it names only what it sets (c->set). */
		memset(c, 0, sizeof(*c));
		memcpy(before, c, sizeof(*c));
		rc = cfg_run(t, text, c, err, sizeof(err));
		if (rc != 0) {
			FH_CHECK(rc < 0 && err[0] != '\0');
			FH_CHECK(memcmp(before, c, sizeof(*c)) == 0);
		} else {
			cfg_finalize(c, kinds[t]);
		}
	}
	free(before);
	free(c);
	free(text);
	return 0;
}
