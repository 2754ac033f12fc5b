/*
 * wharf-train — the example trainer. As Paddle's fleet example, one binary: the role comes
 * from the environment or flags (ps_config_load: flags, TF_CONFIG, Paddle variables, JSON,
 * .endpoint_map); as a server it serves the model's tables, as a worker it trains the model
 * against the servers and prints one JSON line last.
 *
 *   wharf-train [EAL args] -- [cluster flags] [--model mlp|softmax|lr|fm|count] [--epochs N]
 *               [--batch B] [--lr X] ...   (see --help)
 *
 * Call chain: main -> ps_split_eal -> ps_config_load -> ps_net_run_server (server) |
 *   tr_net_open -> tr_dense_run | tr_ctr_run | tr_count_run (worker).
 * SIGINT/SIGTERM: a server drains, checkpoints and exits; a worker stops at its next step,
 * push or round boundary (tr_net_stop_asked), prints its JSON line with "stopped", logs
 * "worker N stopped on SIGTERM ...", closes its connections and exits 0.
 * Exit status: 0 done (or stopped by a signal or a shutdown command), 1 run-time failure,
 * 2 bad configuration.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/train/tr.h"

extern char **environ;

enum {
	O_MODEL = 1000, O_EPOCHS, O_BATCH, O_LR, O_HIDDEN, O_FMK, O_TRAIN_LIMIT, O_TEST_LIMIT,
	O_CTR_SAMPLES, O_DECAY, O_COUNT, O_COUNT_DELAY, O_SEED, O_CKPT, O_RESTORE, O_DATA_DIR,
	O_CTR_TAIL, O_LAYERS,
};

static const struct option tr_longopts[] = {
	{ "model", required_argument, NULL, O_MODEL },
	{ "epochs", required_argument, NULL, O_EPOCHS },
	{ "batch", required_argument, NULL, O_BATCH },
	{ "lr", required_argument, NULL, O_LR },
	{ "hidden", required_argument, NULL, O_HIDDEN },
	{ "layers", required_argument, NULL, O_LAYERS },
	{ "fm-k", required_argument, NULL, O_FMK },
	{ "train-limit", required_argument, NULL, O_TRAIN_LIMIT },
	{ "test-limit", required_argument, NULL, O_TEST_LIMIT },
	{ "ctr-samples", required_argument, NULL, O_CTR_SAMPLES },
	{ "ctr-tail", required_argument, NULL, O_CTR_TAIL },
	{ "decay-epochs", required_argument, NULL, O_DECAY },
	{ "count-pushes", required_argument, NULL, O_COUNT },
	{ "count-delay-us", required_argument, NULL, O_COUNT_DELAY },
	{ "seed", required_argument, NULL, O_SEED },
	{ "ckpt", required_argument, NULL, O_CKPT },
	{ "restore", required_argument, NULL, O_RESTORE },
	{ "data-dir", required_argument, NULL, O_DATA_DIR },
	{ NULL, 0, NULL, 0 },
};

static const char tr_usage[] =
	"trainer options:\n"
	"  --model M          mlp (default) | softmax (Fashion-MNIST) | lr | fm (CTR) | count\n"
	"                     (count: exactly-once ledger, each push adds 1 to this worker's key;\n"
	"                     sync: one push per step, checked against the sum after each step)\n"
	"  --epochs N         passes over this worker's data (default 10; CTR 3)\n"
	"  --batch B          samples per step per worker (default 64; CTR 256)\n"
	"  --lr X             server SGD learning rate (default 0.1; lr 2, fm 1; deep MLP 0.05)\n"
	"  --hidden H         MLP hidden units (default 128; 16 with --layers 2 and more)\n"
	"  --layers L         mlp: hidden layers (default 1: 784-H-10); 2..64: the deep MLP,\n"
	"                     residual, each layer's weight and bias a table of its own (2 L + 2\n"
	"                     small tensors a step: the case --tensor-fuse is for; wharf-train\n"
	"                     --role ps serves it)\n"
	"  --fm-k K           FM factor size (default 4)\n"
	"  --train-limit N    use the first N training images (default all 60000)\n"
	"  --test-limit N     use the first N test images (default all 10000)\n"
	"  --ctr-samples N    CTR training samples over all workers (default 300000)\n"
	"  --ctr-tail N       CTR: N more fields of ever-new ids, a long tail that grows as long\n"
	"                     as training runs (field k's id changes every 4^k samples; 0..8,\n"
	"                     default 0; not in GEO mode)\n"
	"  --decay-epochs N   dense: last N epochs at 0.3x the learning rate (default 2)\n"
	"  --count-pushes N   count: pushes (sync: steps; GEO: rounds) per worker (default\n"
	"                     1000)\n"
	"  --count-delay-us U count: pause after each push (default 2000)\n"
	"  --seed S           data order and CTR sampling seed (default 1)\n"

	"  --data-dir DIR     Fashion-MNIST IDX files (default " WC_FMNIST_DIR ")\n"
	"  --ckpt PATH        server role: checkpoint (shutdown, periodic; log in PATH.wal)\n"
	"  --restore PATH     server role: start from this checkpoint plus the log after it\n"
	"SIGINT/SIGTERM (or wharf-ctl shutdown): a worker stops at its next step, push or round,\n"
	"prints its JSON line with \"stopped\", closes its connections and exits 0; a server\n"
	"drains, writes its checkpoint and exits 0.\n";

static int tr_on_opt(void *ctx, int val, const char *arg, char *err, size_t errlen)
{
	struct tr_opts *o = ctx;
	char *end;

	switch (val) {
	case O_MODEL: return wc_ps_model_parse(arg, &o->model, err, errlen);
	case O_EPOCHS: return ps_parse_uint(arg, 1, 1000, &o->epochs, "--epochs", err, errlen);
	case O_BATCH: return ps_parse_uint(arg, 1, 4096, &o->batch, "--batch", err, errlen);
	case O_HIDDEN: return ps_parse_uint(arg, 1, 4096, &o->hidden, "--hidden", err, errlen);
	case O_LAYERS: return ps_parse_uint(arg, 1, TR_DEEP_MAX_LAYERS, &o->layers, "--layers", err, errlen);
	case O_FMK: return ps_parse_uint(arg, 1, 64, &o->fm_k, "--fm-k", err, errlen);
	case O_TRAIN_LIMIT: return ps_parse_uint(arg, 1, 60000, &o->train_limit, "--train-limit", err, errlen);
	case O_TEST_LIMIT: return ps_parse_uint(arg, 1, 10000, &o->test_limit, "--test-limit", err, errlen);
	case O_CTR_SAMPLES: return ps_parse_uint(arg, 1000, 10000000, &o->ctr_samples, "--ctr-samples", err, errlen);
	case O_CTR_TAIL: return ps_parse_uint(arg, 0, 8, &o->ctr_tail, "--ctr-tail", err, errlen);
	case O_DECAY: return ps_parse_uint(arg, 0, 1000, &o->decay_epochs, "--decay-epochs", err, errlen);
	case O_COUNT: return ps_parse_uint(arg, 1, 10000000, &o->count_pushes, "--count-pushes", err, errlen);
	case O_COUNT_DELAY: return ps_parse_uint(arg, 0, 1000000, &o->count_delay_us, "--count-delay-us", err, errlen);
	case O_SEED: return ps_parse_uint(arg, 0, 1u << 30, &o->seed, "--seed", err, errlen);
	case O_CKPT: o->ckpt = arg; return 0;
	case O_RESTORE: o->restore = arg; return 0;
	case O_DATA_DIR: o->data_dir = arg; return 0;
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

static void tr_defaults(struct tr_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->model = WC_PSM_MLP;
	o->layers = 1;
	o->fm_k = 4;
	o->ctr_samples = 300000;
	o->decay_epochs = 2;
	o->count_pushes = 1000;
	o->count_delay_us = 2000;
	o->seed = 1;
}

/* Model-dependent defaults for what the flags left unset. */
static void tr_model_defaults(struct tr_opts *o)
{
	bool ctr = o->model == WC_PSM_LR || o->model == WC_PSM_FM;

	if (o->epochs == 0)
		o->epochs = ctr ? 3 : 10;
	if (o->batch == 0)
		o->batch = ctr ? 256 : 64;
	if (o->hidden == 0)
		o->hidden = o->layers > 1 ? 16 : 128;
	/* The deep MLP: sync sums two workers' gradients, so 0.05 steps as 0.1 on their mean
	 * (single-process SGD, 2 epochs: 0.1 reached 0.83 test accuracy, 0.2 only 0.81). */
	if (o->lr == 0)
		o->lr = o->layers > 1 ? 0.05f : wc_ps_model_default_lr(o->model);
}

static int tr_worker(struct ps_cluster *cl, struct tr_opts *o, const struct ps_model_tables *mt,
		     int eal_argc, char **eal_argv, const sigset_t *sigs)
{
	struct tr_net t;
	int rc;

	if (tr_net_open(&t, cl, o, mt, eal_argc, eal_argv, sigs) != 0) {
		if (tr_net_stop_name(&t) != NULL) { /* asked to stop while it waited: a clean end */
			fprintf(stderr, "wharf-train: worker %u stopped on %s while waiting for its "
				"servers\n", cl->task_index, tr_net_stop_name(&t));
			return 0;
		}
		fprintf(stderr, "wharf-train: %s\n", t.err);
		return 1;
	}
	if (o->model == WC_PSM_COUNT)
		rc = tr_count_run(&t);
	else if (o->model == WC_PSM_LR || o->model == WC_PSM_FM)
		rc = tr_ctr_run(&t, mt);
	else
		rc = tr_dense_run(&t, mt);
	tr_net_close(&t);
	if (tr_net_stopped(&t, rc)) {
		/* Asked to stop: a clean end, exit status 0. */
		fprintf(stderr, "wharf-train: worker %u stopped on %s%s%s%s%s%s; connections closed "
			"%.0f ms after the stop was seen\n", cl->task_index, tr_net_stop_name(&t),
			t.stop_at[0] ? " " : "", t.stop_at, t.given_up ? "; " : "",
			t.given_up ? t.given_up : "", t.given_up ? " given up" : "",
			(tr_now() - t.stop_t) * 1e3);
		return 0;
	}
	return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	static struct ps_cluster cl; /* large (endpoint tables); main's, not shared */
	static struct ps_eal eal;
	struct ps_model_tables mt;
	struct tr_opts o;
	struct ps_app_opts app = { tr_longopts, tr_usage, tr_on_opt, &o };
	char err[1024];
	int app_argc = argc, eal_argc, rc;
	char **app_argv = argv;
	bool help = false;
	sigset_t sigs;

	tr_defaults(&o);
	ps_split_eal(&app_argc, &app_argv, &eal_argc);
	rc = ps_config_load(app_argc, app_argv, &app, environ, &cl, &help, err, sizeof(err));
	if (help) {
		printf("usage: wharf-train [EAL args] -- [options]\n%s%s", ps_flags_usage(), tr_usage);
		return 0;
	}
	if (rc != 0) {
		fprintf(stderr, "wharf-train: %s\n", err);
		return 2;
	}
	tr_model_defaults(&o);
	if (o.layers > 1 && o.model != WC_PSM_MLP) {
		fprintf(stderr, "wharf-train: --layers %u: only the mlp model has layers\n", o.layers);
		return 2;
	}
	if (o.layers > 1 ? tr_deep_tables(o.hidden, o.layers, o.lr, &mt, err, sizeof(err)) != 0 :
	    wc_model_tables_make(o.model, o.lr, o.hidden, o.fm_k, o.batch * WC_CTR_FIELDS, &mt, err,
				 sizeof(err)) != 0) {
		fprintf(stderr, "wharf-train: %s\n", err);
		return 2;
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	ps_eal_pick(&cl, eal_argc, argv, &eal);
	if (cl.role == PS_ROLE_PS) {
		rc = ps_net_run_server(&cl, &mt, eal.argc, eal.argv, "wharf-train", o.ckpt,
					 o.restore, &sigs, err, sizeof(err));
		if (rc != 0)
			fprintf(stderr, "wharf-train: %s\n", err);
	} else {
		rc = tr_worker(&cl, &o, &mt, eal.argc, eal.argv, &sigs);
	}
	ps_model_tables_free(&mt);
	return rc == 0 ? 0 : 1;
}
