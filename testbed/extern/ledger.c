/*
 * ledger.c — the exactly-once ledger through libwharf's public API, for fault tests: a sparse
 * table "counts" (dim 1, SGD, lr 1, zeros) where a pushed gradient of -1 adds exactly 1.
 * Built outside the tree like two_tables.c. One binary, either role:
 *
 *   ledger [cluster flags] [-- CKPT]     ps: serves until SIGINT/SIGTERM, with the checkpoint
 *                                        and its write-ahead log at CKPT (restored from it
 *                                        when the file exists)
 *   ledger [cluster flags] [-- ROUNDS [PIPE]]
 *                                        worker: four threads push -1 to 100 keys each (25
 *                                        shared by the worker's threads, 75 their own) ROUNDS
 *                                        times, blocking and asynchronous calls mixed; with
 *                                        PIPE > 1, PIPE asynchronous pushes in flight at once
 *                                        per round; then pulls every key and checks it holds
 *                                        exactly what was pushed. Workers' keys are disjoint.
 *
 * Exits 0 when the ledger is exact; prints the first key that is not.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <wharf/wharf.h>

#define THREADS 4u
#define KEYS 100u
#define SHARED 25u

#define PIPE_MAX 64u

struct job {
	struct wharf_client *cl;
	unsigned worker, id, rounds, pipe;
	int rc;
};

static uint64_t key_of(unsigned worker, unsigned thread, unsigned i)
{
	return ((uint64_t)worker << 40) + (i < SHARED ? i : 1000000ull * (thread + 1) + i);
}

/* PIPE pushes in flight at once, then their completions. */
static int push_pipelined(struct job *jb, const uint64_t *keys, const float *g)
{
	struct wharf_req *q[PIPE_MAX];
	unsigned i, n;
	int rc = 0;

	for (n = 0; n < jb->pipe && rc == 0; n++)
		if ((rc = wharf_push_async(jb->cl, 0, keys, KEYS, g, NULL, NULL, &q[n])) != 0)
			break;
	for (i = 0; i < n; i++) {
		int r = wharf_wait(q[i]);
		if (r != 0 && rc == 0)
			rc = r;
	}
	return rc;
}

static void *push_rounds(void *arg)
{
	struct job *jb = arg;
	uint64_t keys[KEYS];
	float g[KEYS];
	unsigned i, r;

	for (i = 0; i < KEYS; i++) {
		keys[i] = key_of(jb->worker, jb->id, i);
		g[i] = -1.0f;
	}
	for (r = 0; r < jb->rounds && jb->rc == 0; r++) {
		struct wharf_req *q;
		if (jb->pipe > 1)
			jb->rc = push_pipelined(jb, keys, g);
		else if (r % 3 != 0)
			jb->rc = wharf_push(jb->cl, 0, keys, KEYS, g);
		else if ((jb->rc = wharf_push_async(jb->cl, 0, keys, KEYS, g, NULL, NULL, &q)) == 0)
			jb->rc = wharf_wait(q);
		if (jb->rc != 0)
			fprintf(stderr, "ledger: thread %u round %u: %s\n", jb->id, r, wharf_errmsg());
	}
	return NULL;
}

static int check(struct wharf_client *cl, unsigned worker, unsigned rounds)
{
	uint64_t keys[KEYS];
	float v[KEYS];
	unsigned t, i;

	for (t = 0; t < THREADS; t++) {
		for (i = 0; i < KEYS; i++)
			keys[i] = key_of(worker, t, i);
		if (wharf_pull(cl, 0, keys, KEYS, v) != 0) {
			fprintf(stderr, "ledger: pull: %s\n", wharf_errmsg());
			return 1;
		}
		for (i = 0; i < KEYS; i++) {
			float want = (float)(i < SHARED ? THREADS * rounds : rounds);
			if (v[i] != want) {
				printf("ledger: NOT exact: key %llu holds %.0f, %.0f were pushed\n",
				       (unsigned long long)keys[i], v[i], want);
				return 1;
			}
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct wharf_config *c;
	struct wharf_model *m;
	struct wharf_table t;
	struct wharf_client *cl;
	struct wharf_client_stats st;
	struct job jb[THREADS];
	pthread_t th[THREADS];
	const char *extra = NULL;
	unsigned pipe = 1;
	int nflags = argc - 1, i, rc = 0;

	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			nflags = i - 1;
			extra = i + 1 < argc ? argv[i + 1] : NULL;
			if (i + 2 < argc)
				pipe = (unsigned)atoi(argv[i + 2]);
			break;
		}
	if (pipe < 1 || pipe > PIPE_MAX) {
		fprintf(stderr, "ledger: PIPE %u: expected 1..%u\n", pipe, PIPE_MAX);
		return 2;
	}
	if (wharf_config_load(nflags, (const char *const *)argv + 1, NULL, &c) != 0 ||
	    wharf_model_new(&m) != 0) {
		fprintf(stderr, "ledger: %s\n", wharf_errmsg());
		return 2;
	}
	wharf_table_defaults(&t, "counts");
	t.lr = 1.0f;
	if (wharf_model_add(m, &t, NULL) != 0) {
		fprintf(stderr, "ledger: %s\n", wharf_errmsg());
		return 2;
	}
	if (wharf_config_role(c) == WHARF_ROLE_SERVER) {
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, SIGINT);
		sigaddset(&s, SIGTERM);
		pthread_sigmask(SIG_BLOCK, &s, NULL);
		if (wharf_server_run(c, m, extra, extra != NULL && access(extra, F_OK) == 0 ?
				     extra : NULL) != 0) {
			fprintf(stderr, "ledger: server: %s\n", wharf_errmsg());
			return 1;
		}
		return 0;
	}
	if (wharf_client_open(c, m, NULL, &cl) != 0) {
		fprintf(stderr, "ledger: client: %s\n", wharf_errmsg());
		return 1;
	}
	for (i = 0; i < (int)THREADS; i++) {
		jb[i] = (struct job){ cl, wharf_config_index(c), (unsigned)i,
				      extra != NULL ? (unsigned)atoi(extra) : 200, pipe, 0 };
		pthread_create(&th[i], NULL, push_rounds, &jb[i]);
	}
	for (i = 0; i < (int)THREADS; i++) {
		pthread_join(th[i], NULL);
		rc |= jb[i].rc;
	}
	if (rc == 0)
		rc = check(cl, wharf_config_index(c), jb[0].rounds * pipe);
	wharf_client_stats(cl, &st);
	printf("ledger: worker %u: %u threads x %u rounds x %u in flight, %llu calls, %llu "
	       "reconnects, %llu pushes resent: %s\n", wharf_config_index(c), THREADS, jb[0].rounds,
	       pipe,
	       (unsigned long long)st.calls, (unsigned long long)st.reconnects,
	       (unsigned long long)st.resent, rc == 0 ? "exact" : "FAILED");
	wharf_client_close(cl);
	wharf_model_free(m);
	wharf_config_free(c);
	return rc == 0 ? 0 : 1;
}
