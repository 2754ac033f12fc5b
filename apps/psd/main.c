/*
 * wharf-psd — a parameter server. Cluster from ps_config_load (flags, TF_CONFIG, Paddle
 * variables, JSON, .endpoint_map); tables from --model (the shapes wharf-train pulls: see
 * wc_model_tables_make) or any model from --model-file (docs/api.md, "Model files");
 * serves until `wharf-ctl HOST:PORT shutdown` or SIGINT/SIGTERM, then drains and writes
 * --ckpt.
 *
 *   wharf-psd [EAL args] -- --role ps [cluster flags] [--model M] [--lr X] [--hidden H]
 *             [--fm-k K] [--model-file F] [--max-keys N] [--ckpt PATH] [--restore PATH]
 *
 * Call chain: main -> ps_config_load -> wc_model_tables_make | ps_model_file_load ->
 *   ps_net_run_server.
 * Exit status: 0 stopped cleanly, 1 run-time failure, 2 bad configuration.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/common/wc.h"
#include "ps_core/ps_net.h"

extern char **environ;

enum { O_MODEL = 1000, O_LR, O_HIDDEN, O_FMK, O_MAX_KEYS, O_CKPT, O_RESTORE, O_MODEL_FILE };

struct psd_opts {
	enum wc_ps_model model;
	float lr;
	unsigned hidden, fm_k, max_keys;
	const char *ckpt, *restore, *model_file;
	bool builtin_set;      /* --model, --lr, --hidden or --fm-k given */
};

static const struct option psd_longopts[] = {
	{ "model", required_argument, NULL, O_MODEL },  { "lr", required_argument, NULL, O_LR },
	{ "hidden", required_argument, NULL, O_HIDDEN }, { "fm-k", required_argument, NULL, O_FMK },
	{ "max-keys", required_argument, NULL, O_MAX_KEYS },
	{ "ckpt", required_argument, NULL, O_CKPT },     { "restore", required_argument, NULL, O_RESTORE },
	{ "model-file", required_argument, NULL, O_MODEL_FILE },
	{ NULL, 0, NULL, 0 },
};

static const char psd_usage[] =
	"server options:\n"
	"  --model M       tables of: mlp (default) | softmax | lr | fm | count\n"
	"  --lr X          SGD learning rate of every table (default as wharf-train's: lr 2,\n"
	"                  fm 1, the others 0.1; count: 1)\n"
	"  --hidden H      MLP hidden units (default 128)\n"
	"  --fm-k K        FM factor size (default 4)\n"
	"  --model-file F  serve the tables of JSON model file F instead (docs/api.md,\n"
	"                  \"Model files\"); table ids are their places in the file\n"
	"  --max-keys N    largest sparse request in keys (default 6656 = 256 x 26)\n"
	"  --ckpt PATH     checkpoint written at shutdown, every --ckpt-interval s and by\n"
	"                  `wharf-ctl ... save`; pushes between checkpoints go to the\n"
	"                  write-ahead log PATH.wal (see --wal-dir) before they are acknowledged\n"
	"  --restore PATH  start from this checkpoint (plus the log after it)\n";

static int psd_on_opt(void *ctx, int val, const char *arg, char *err, size_t errlen)
{
	struct psd_opts *o = ctx;
	char *end;

	if (val == O_MODEL || val == O_LR || val == O_HIDDEN || val == O_FMK)
		o->builtin_set = true;
	switch (val) {
	case O_MODEL_FILE: o->model_file = arg; return 0;
	case O_MODEL: return wc_ps_model_parse(arg, &o->model, err, errlen);
	case O_HIDDEN: return ps_parse_uint(arg, 1, 4096, &o->hidden, "--hidden", err, errlen);
	case O_FMK: return ps_parse_uint(arg, 1, 64, &o->fm_k, "--fm-k", err, errlen);
	case O_MAX_KEYS: return ps_parse_uint(arg, 1, 65536, &o->max_keys, "--max-keys", err, errlen);
	case O_CKPT: o->ckpt = arg; return 0;
	case O_RESTORE: o->restore = arg; return 0;
	case O_LR:
		errno = 0;
		o->lr = strtof(arg, &end);
		if (errno || end == arg || *end || !(o->lr > 0) || o->lr > 100) {
			snprintf(err, errlen, "--lr: expected a learning rate in (0, 100], got '%s'", arg);
			return -EINVAL;
		}
		return 0;
	}
	snprintf(err, errlen, "unknown option %d", val);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	static struct ps_cluster cl; /* large; main's alone */
	static struct ps_eal eal;
	struct psd_opts o = { WC_PSM_MLP, 0.0f, 128, 4, 256 * WC_CTR_FIELDS, NULL, NULL, NULL, false };
	struct ps_app_opts app = { psd_longopts, psd_usage, psd_on_opt, &o };
	struct ps_model_tables mt;
	char err[1024];
	bool help = false;
	int eal_argc, app_argc = argc, rc;
	char **app_argv = argv;
	sigset_t sigs;

	ps_split_eal(&app_argc, &app_argv, &eal_argc);
	rc = ps_config_load(app_argc, app_argv, &app, environ, &cl, &help, err, sizeof(err));
	if (help) {
		printf("usage: wharf-psd [EAL args] -- [options]\n%s%s", ps_flags_usage(), psd_usage);
		return 0;
	}
	if (rc == 0 && cl.role != PS_ROLE_PS)
		rc = snprintf(err, sizeof(err), "the role is %s; wharf-psd runs only as ps "
			      "(--role ps, TRAINING_ROLE=PSERVER, TF_CONFIG task.type ps)",
			      ps_role_name(cl.role)) > 0 ? -EINVAL : -EINVAL;
	if (rc == 0 && o.model_file != NULL && o.builtin_set)
		rc = snprintf(err, sizeof(err), "--model-file defines every table: --model, --lr, "
			      "--hidden and --fm-k do not go with it") > 0 ? -EINVAL : -EINVAL;
	if (rc == 0 && o.model_file != NULL) {
		rc = ps_model_file_load(o.model_file, &mt, err, sizeof(err));
		if (rc == 0 && (rc = ps_model_tables_set_max_keys(&mt, o.max_keys, err,
								  sizeof(err))) != 0)
			ps_model_tables_free(&mt);
	} else if (rc == 0) {
		if (o.lr == 0)
			o.lr = wc_ps_model_default_lr(o.model);
		rc = wc_model_tables_make(o.model, o.lr, o.hidden, o.fm_k, o.max_keys, &mt, err,
					  sizeof(err));
	}
	if (rc != 0) {
		fprintf(stderr, "wharf-psd: %s\n", err);
		return 2;
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	fprintf(stderr, "wharf-psd: model %s: %u table%s, digest %016" PRIx64 "\n",
		o.model_file != NULL ? o.model_file : wc_ps_model_name(o.model), mt.n,
		mt.n == 1 ? "" : "s", ps_model_digest(&mt));
	ps_eal_pick(&cl, eal_argc, argv, &eal);
	rc = ps_net_run_server(&cl, &mt, eal.argc, eal.argv, "wharf-psd", o.ckpt, o.restore, &sigs,
				 err, sizeof(err));
	ps_model_tables_free(&mt);
	if (rc != 0)
		fprintf(stderr, "wharf-psd: %s\n", err);
	return rc == 0 ? 0 : 1;
}
