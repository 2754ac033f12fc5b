/*
 * perf.h — wharf-perf internals shared by main.c (options, the client and server loops on
 * one transport instance) and perf_lcores.c (one instance per lcore with --lcores N).
 */
#ifndef WHARF_PERF_H
#define WHARF_PERF_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "transport/tl.h"

#define PERF_TYPE 200 /* a ps_core-range type nobody else interprets */
#define PERF_MAX_CONNS 1024
#define PERF_MAX_LCORES 16
#define PERF_RTT_CAP (1u << 21)
#define PERF_STREAM_BYTES (4u << 20) /* in flight per connection in stream mode */

enum perf_mode { PERF_PINGPONG, PERF_STREAM };

struct perf_opts {
	bool server, echo, have_ip, have_peer;
	bool poll;          /* busy-poll: never sleep in tl_poll */
	bool verify;        /* client: every echo must carry the bytes and request id sent */
	uint32_t mtu;       /* dpdk: port MTU (0 = 1500) */
	uint32_t max_conns; /* 0: the transport's default */
	uint32_t nb_mbufs;  /* dpdk: port mempool size, 0: dpdk_net's sizing */
	const char *hist;   /* client: write RTT samples (us, one per line) here */
	uint32_t ip, peer, size, conns;
	uint32_t lcores;    /* dpdk: transport instances, one per EAL lcore (1 = standalone) */
	uint32_t count;     /* client: echoes per connection, then stop (0 = run for seconds) */
	uint8_t prefix;
	uint16_t port;
	enum tl_protocol proto;
	enum perf_mode mode;
	double seconds;
	int eal_argc;
	char **eal_argv;
	/* The clock (perf_clock_init): TSC ticks from tsc0, ns per tick. Read-only after. */
	uint64_t tsc0;
	double ns_per_tick;
};

struct perf;

struct perf_conn {
	struct perf *p;
	struct tl_conn *c;
	uint32_t inflight;
	uint32_t echoed;   /* echoes received (--count) */
	uint64_t last_id;  /* request id of the message in flight (pingpong --verify) */
	int up;            /* 1 connected, -1 failed or closed */
	int status;
};

/* One transport instance's run: on one lcore (or the only thread). */
struct perf {
	const struct perf_opts *o;
	struct tl *tl;
	struct perf_conn *pc;
	uint32_t nconns;    /* client connections of this instance */
	uint32_t finished;  /* connections that got their --count echoes */
	uint8_t *payload;
	uint32_t window;
	bool copy;      /* stream without echoes of small messages: tl_send_copy, counted sent */
	bool running;   /* sends allowed */
	bool counting;  /* inside the measured interval */
	uint64_t msgs, bytes, errors, dropped, resets, corrupt, accepted;
	uint32_t *rtt_ns;
	uint32_t rtt_cap;
	uint64_t nrtt;
	uint64_t rng;
	double secs;    /* client: measured interval */
	/*
	 * Stopping: the instance that owns the signal mask (sigs != NULL: the only one, or
	 * lcore 0's) turns SIGINT/SIGTERM or --seconds into *stop; the others read it.
	 */
	const sigset_t *sigs;
	_Atomic int *stop;
};

int perf_tl_create(const struct perf_opts *o, void *backend_arg, struct tl **tl);
/* The measurement clock (TSC, calibrated in main): ns and seconds since the start. */
uint64_t perf_now_ns(const struct perf_opts *o);
double perf_now_s(const struct perf_opts *o);
/* Server loop until stopped; no report. 0 or 1. */
int perf_server_run(struct perf *p);
void perf_server_report(const struct perf *p, const char *extra);
/* Client: connect, measure, drain; no report. 0 or 1 (setup failed). */
int perf_client_run(struct perf *p);
/* Prints the client's JSON line; extra (may be "") is inserted before the closing brace. */
void perf_report(struct perf *p, double secs, const char *extra);
/* Prints the client's JSON line (perf_report, plus "corrupt" with --verify). */
void perf_client_report(struct perf *p);
/* Waits (bounded) for echoes still in flight, so the close is orderly. */
void perf_drain(struct perf *p);
/* Destroys the instance and frees what perf_client_run allocated (but the RTT samples
 * when keep_rtt: a multi-lcore report merges them later). */
void perf_free(struct perf *p, bool keep_rtt);

/* --lcores N: runs everything on N lcores; the process's exit status. */
int perf_run_lcores(const struct perf_opts *o, const sigset_t *sigs);

#endif /* WHARF_PERF_H */
