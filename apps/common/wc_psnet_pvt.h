/*
 * wc_psnet_pvt.h — internals of the PS network glue shared by wc_psnet.c (node, buffers,
 * control plane), wc_psnet_srv.c (server) and wc_psnet_cli.c (worker). Not for apps.
 */
#ifndef WHARF_WC_PSNET_PVT_H
#define WHARF_WC_PSNET_PVT_H

#include <pthread.h>
#include <sched.h>

#include "apps/common/wc_psnet.h"
#include "apps/common/wc_psobs.h"
#include "apps/common/wc_pvt.h"
#include "fuse/fz.h"
#include "transport/tl.h"

#define WN_BUF_HEAD 64u     /* struct wn_buf sits in front of the bytes, one cache line */
#define WN_POOL_MAX 512u    /* a worker's buffers; a PS lane's are cl->reply_buffers */
#define WN_TRACK_MAX 1024u  /* completions a worker may have outstanding */
#define WN_MAX_LANES 16u    /* serving lanes (network lcores) of one PS */
/*
 * Shards of every PS, whatever its lane count: shard s belongs to lane s % lanes. Fixed, so
 * a PS restarted with another NETWORK_PS_CORE_NUMBER loads its checkpoint and log with the
 * exactly-once state (kept per shard) intact.
 */
#define WN_PS_SHARDS 16u
#define WN_MAX_DST (WC_MAX_NODES * WN_MAX_LANES) /* a worker's (server, lane) pairs */

struct wc_psnet;

/* A message buffer lent to the transport: from tl_buf_alloc, so dpdk sends it zero copy. */
struct wn_buf {
	struct wc_psnet *n;
	struct wn_buf *next;    /* free list, or a connection's backlog */
	struct tl_msg_hdr hdr;  /* for a backlogged reply */
	union {
		struct wn_conn *owner; /* server: the connection a reply is lent for (out count) */
		struct {               /* worker: who has an encode buffer; pooled when nobody */
			uint16_t keeps; /* ps_client holds the request in it (ps_client_keep) */
			uint16_t sends; /* sends of it not completed */
			bool in_msgs;   /* it is a destination's encode buffer (n->msgs) */
			uint8_t lane;   /* handed to worker lane `lane` (> 0) to send: its
					 * completion comes back over that lane's ring */
		};
	};
	uint8_t *data;          /* header + body */
};
_Static_assert(sizeof(struct wn_buf) <= WN_BUF_HEAD, "buffer head fits its cache line");

enum wn_kind { WN_ACCEPTED = 0, WN_TO_SERVER };

/*
 * A request that found no reply buffer: its bytes stay held (the carrier's hold) and its
 * view is copied, until a buffer is free (wc_psnet_srv.c).
 */
struct wn_defer {
	struct wn_defer *next;
	struct tl_msg *hold;
	struct tl_msg_view v;
	struct tl_iov iov[];    /* v.iov */
};

/*
 * What an accepted connection may carry: a data listener's, PS requests only; a control
 * listener's, control commands only; the one listener of protocol=kernel's lane 0 (data and
 * control share the control endpoint), either, until the first message decides for good.
 */
enum wn_plane { WN_PLANE_EITHER = 0, WN_PLANE_DATA, WN_PLANE_CTL };

struct wn_conn {
	struct wc_psnet *n;
	struct fz_conn *fc;
	enum wn_kind kind;
	enum wn_plane plane;    /* accepted: what it may carry */
	uint32_t id, server, lane, dest; /* to-server: its server, lane and ps_client dest */
	uint32_t oid;           /* a worker lane's to-server connection: the owner's id of it */
	int up;                 /* 0 connecting, 1 up, -1 failed or closed */
	int reason;
	struct wn_buf *backlog, *backlog_tail; /* replies that found the send queue full */
	/* server: requests waiting for a reply buffer, in order; reading paused meanwhile */
	struct wn_defer *defer, *defer_tail;
	uint32_t out;                          /* server: replies lent to the transport */
	bool gone;                             /* freed once the last of them is done */
	struct ps_push_order order;            /* server: ps_handle_ordered's, per connection */
	struct wn_conn *prev, *next;           /* every live connection, for status */
	uint64_t reqs, replies, errors, bytes_in, bytes_out;
};

struct wn_track {
	struct wc_psnet *n;
	uint64_t call;          /* the call it belongs to; stale completions are ignored */
	bool busy;
};

/* What a lane publishes for lane 0's status and telemetry (relaxed stores, each poll). */
struct wn_lane_pub {
	_Atomic uint64_t reqs, errors, dropped, inflight, conns, polls, deferred;
	_Atomic int cpu;        /* where its thread ran at its last poll round */
};

/* Sums over the lanes of a node (wn_lanes_sum). */
struct wn_lane_sum {
	uint64_t reqs, errors, dropped, inflight, deferred, data_ops_remote, ctl_ops_remote;
};

struct wn_group;
struct wn_wl;
struct wn_wl_lane;

/*
 * A worker's view of one destination that another of its lanes carries (wn_wl_*): the
 * connection itself belongs to that lane's thread; the owner knows it by id and state.
 */
enum wn_dst_state { WN_DST_NONE = 0, WN_DST_CONNECTING, WN_DST_UP, WN_DST_FAILED };
struct wn_ldst {
	uint32_t id;            /* the owner's id of the connection; 0: none */
	uint32_t server, lane;  /* for log lines */
	enum wn_dst_state st;
	int reason;             /* WN_DST_FAILED: why */
};

struct wc_psnet {
	const struct wc_cluster *cl;
	char name[32];
	bool is_ps, polling, stop, draining;
	uint32_t lane, lanes;             /* this node's serving lane, and how many it runs */
	struct wn_group *g;               /* the lanes of a multi-lane PS; NULL with one */
	struct wn_wl *wl;                 /* a worker's lanes (wc_psnet_wlanes.c); NULL with one */
	struct wn_wl_lane *wlane;         /* set on the node of a worker's lane k > 0 */
	uint32_t wl_n;                    /* owner: its lanes, itself included (0: no wl) */
	struct wn_lane_pub pub;
	uint16_t data_port;               /* server: where this lane listens for data */
	struct tl *tl, *ctl_tl;           /* ctl_tl == tl with protocol=kernel */
	struct fz_net *fz, *ctl_fz;
	struct fz_config fzc, fzc_ctl;
	struct fz_listener *data_l, *ctl_l;
	uint32_t max_msg, buf_size;
	uint64_t model_digest;            /* server: what health names; worker: what it expects */
	struct wn_buf *pool;              /* free buffers */
	uint32_t pool_total, pool_free, pool_max;
	struct wn_conn *conns;
	uint32_t next_conn_id;
	struct fz_conn_stats fz_gone;     /* fuse counters of the connections already closed */
	uint64_t t0_us, next_ctl_us, next_sig_us;
	/* control plane (lane 0): the token status/save/shutdown need, the file of one we made */
	char ctl_token[WC_CTL_TOKEN_MAX + 1];
	char ctl_token_made[WC_PATH_LEN + 96];
	uint64_t ctl_refused, next_refused_log_us;

	/* server */
	struct ps_server *ps;
	struct ps_handler *h;
	const struct ps_server_config *scfg;
	char ckpt[WC_PATH_LEN];
	uint64_t srv_reqs, srv_errors, srv_dropped, srv_inflight, ctl_reqs;
	/* back-pressure: connections with requests deferred now; requests deferred so far */
	uint32_t srv_deferring, srv_conns; /* srv_conns: accepted connections */
	uint64_t srv_deferred;
	/* sync barrier queries parked until their step is done (wc_psnet_srv.c, wn_srv_bars) */
	struct wn_bar *bars;
	bool bars_due;
	uint64_t next_bars_us, bars_parked;
	struct wc_psobs *obs;              /* telemetry slot (the /wharf/ps commands), lane 0's */
	struct wc_psobs *obs_count;        /* the same slot, counted into by every lane */
	/* tests only (WHARF_TEST_DROP_GEO_REPLY): every geo_drop_every-th GEO-pull reply is not
	 * sent and its connection is closed, as a reply lost with its connection */
	uint32_t geo_drop_every;
	uint64_t geo_replies, geo_dropped;
	/* durability: periodic checkpoints (timer, log size) and log msync, in the serve loop */
	bool wal_on;
	uint64_t ckpt_every_us, next_ckpt_us, wal_max_bytes, next_walchk_us;
	uint64_t sync_every_us, next_sync_us, ckpts, ckpt_errors;
	/* A checkpoint in progress (lane 0: periodic, or asked for by a control save): copied
	 * while serving, written by save_th. save_ctl: the control connection that asked, answered
	 * when it is written (NULL once that connection is gone). */
	struct ps_save_job *save_job;
	const char *save_why;
	char save_path[2 * WC_PATH_LEN + 2];
	struct wn_conn *save_ctl;
	uint64_t save_ctl_req;
	uint32_t test_save_delay_ms;  /* tests only (WHARF_TEST_SAVE_DELAY_MS) */
	pthread_t save_th;
	bool save_th_on;
	_Atomic int save_written;     /* release: save_th's result below is complete */
	int save_rc;
	uint64_t save_rows;
	char save_err[256];

	/* worker */
	struct ps_client *pc;
	struct ps_client_io io;
	struct ps_client_keep keep;          /* ps_client keeps its requests in our buffers */
	struct ps_msgbuf msgs[WN_MAX_DST];   /* encode buffers, per ps_client destination */
	struct wn_conn *dst[WN_MAX_DST];     /* data connections, per destination */
	bool fresh[WN_MAX_DST];              /* connected, not yet resent to (wc_psnet_recover) */
	/* Each server's layout, from its health answer: lanes, shards, each lane's data port. */
	uint32_t lanes_of[WC_MAX_NODES], shards_of[WC_MAX_NODES];
	uint16_t lane_port[WC_MAX_NODES][WN_MAX_LANES];
	bool layout_known[WC_MAX_NODES], layout_set;
	/* A server's data address when the cluster has none for it (its health answer's). */
	uint32_t ps_ip[WC_MAX_NODES];
	bool ps_ip_known[WC_MAX_NODES];
	struct wn_track track[WN_TRACK_MAX];
	uint32_t track_next;
	uint64_t call, call_pending;
	int call_status;
	struct wc_psnet_cli_stats cst;
	uint64_t retries_said, next_retry_say_us; /* refusals for a retry, as last logged */
};

uint64_t wn_now_us(void);
int wn_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
struct wn_buf *wn_buf_get(struct wc_psnet *n);
void wn_buf_put(struct wn_buf *b);
void wn_buf_done(void *arg, int status);
static inline struct wn_buf *wn_buf_of(uint8_t *data)
{
	return (struct wn_buf *)(void *)(data - WN_BUF_HEAD);
}
/* A worker's buffer nobody has any more goes back to the pool. */
void wn_buf_unref(struct wn_buf *b);
/* Sends hdr + body of b on c (zero copy; b goes back to the pool when done), or backlogs it. */
int wn_send_buf(struct wn_conn *c, struct wn_buf *b, const struct tl_msg_hdr *h, bool backlog);
struct wn_conn *wn_conn_new(struct wc_psnet *n, enum wn_kind kind);
void wn_conn_free(struct wn_conn *c);
int wn_endpoint_ip(const struct wc_endpoint *ep, uint32_t *ip, char *err, size_t errlen,
		   const char *what);

/* Control plane, server side: answers one WC_T_CTL message on c. */
void wn_ctl_handle(struct wn_conn *c, const struct tl_msg_view *m);
/* ps requests (wc_psnet_srv.c). carrier: what to hold to keep m's bytes (fz_deliver_fn). */
void wn_srv_handle(struct wn_conn *c, const struct tl_msg_view *m,
		   const struct tl_msg_view *carrier);
/* Serves deferred requests while reply buffers last (each poll round of a PS). */
void wn_srv_deferred(struct wc_psnet *n);
/* Lets go of c's deferred requests and parked barrier queries (it is going away). */
void wn_srv_drop_deferred(struct wn_conn *c);
/* Parked barrier queries asked again when due (all: every one answered now). */
void wn_srv_bars(struct wc_psnet *n, bool all);
void wn_srv_status(struct wc_psnet *n, char *out, size_t len, size_t *off);
/*
 * Starts a checkpoint to path that lane 0 copies while it serves and a thread writes; the
 * control connection c (request req_id) is answered when it is written. -EBUSY while another
 * checkpoint is being written.
 */
int wn_srv_save_start(struct wc_psnet *n, const char *path, struct wn_conn *c, uint64_t req_id,
		      char *err, size_t errlen);
/* A control reply (WC_T_CTL_R) on c. */
int wn_ctl_reply(struct wn_conn *c, uint64_t req_id, const char *text);
/* worker replies (wc_psnet_cli.c). */
void wn_cli_on_msg(struct wn_conn *c, const struct tl_msg_view *m,
		   const struct tl_msg_view *carrier);
/* A data connection to a server is gone: what it owed and will not be resent is let go. */
void wn_cli_lost(struct wn_conn *c);
/* Each poll round of a worker: ps_client_tick (retries, timeouts: stalled connections closed). */
void wn_cli_tick(struct wc_psnet *n);

/* ---- a worker's lanes (wc_psnet_wlanes.c) ---- */

/* Lanes NETWORK_WORKER_CORE_NUMBER asks for, capped at WN_MAX_LANES. */
uint32_t wn_wl_wanted(const struct wc_cluster *cl);
/*
 * Before the owner's (lane 0's) transport exists: dpdk, EAL from np's arguments and one port
 * for every lane, lane 0's lcore on this thread (np->backend_arg gets it); kernel, nothing
 * to set up. *lanes is lowered to EAL's lcore count. 0 or -errno with err.
 */
int wn_wl_prepare(struct wc_psnet_params *np, uint32_t *lanes, struct wn_wl **out, char *err,
		  size_t errlen);
/* With the owner n built: starts lanes 1.. on their threads, each a node of its own. */
int wn_wl_start(struct wn_wl *wl, struct wc_psnet *n, char *err, size_t errlen);
/* Stops and joins the lanes (the owner's node is still whole), then what is left comes back. */
void wn_wl_stop(struct wc_psnet *n);
/* After the owner's transport is gone: lane 0's lcore, the port and EAL. */
void wn_wl_fini(struct wn_wl *wl);
struct wn_ldst *wn_wl_dst(const struct wc_psnet *n, uint32_t d);
/* The lane that carries destination d (0: the owner's own node). */
static inline uint32_t wn_wl_lane_of(const struct wc_psnet *n, uint32_t d)
{
	return n->wl_n > 1 ? d % n->wl_n : 0;
}
/* Owner: hands b (its header at b->data) to the lane of d to send; 0 or -ENOTCONN. */
int wn_wl_send(struct wc_psnet *n, uint32_t d, struct wn_buf *b);
/* Owner: asks d's lane to connect to ip:port (server s, its lane sl); state CONNECTING. */
int wn_wl_open(struct wc_psnet *n, uint32_t d, uint32_t s, uint32_t sl, uint32_t ip,
	       uint16_t port);
/* Owner: lets go of d's connection, whatever its state (NONE after). */
void wn_wl_close(struct wc_psnet *n, uint32_t d);
/* Owner: wakes lanes it handed work to; then takes in what the lanes sent back. */
void wn_wl_kick(struct wc_psnet *n);
void wn_wl_drain(struct wc_psnet *n);
/* Lane side, from the node's callbacks: a reply, a connection's change, a send done. */
void wn_wl_on_reply(struct wn_conn *c, const struct tl_msg_view *m,
		    const struct tl_msg_view *carrier);
void wn_wl_on_conn(struct wn_conn *c, bool up, int reason);
void wn_wl_buf_done(struct wn_buf *b);
/* Owner: one line per lane (status), and the lanes' fuse counters added to out. */
void wn_wl_status(const struct wc_psnet *n, char *out, size_t len, size_t *off);
void wn_wl_fuse_add(const struct wc_psnet *n, struct fz_conn_stats *out);

/* Shared by PS and worker lanes (wc_psnet_lanes.c). */
struct dn_port;
int wn_lanes_port(const struct wc_cluster *cl, const struct wc_psnet_params *np,
		  const char *knob, uint32_t *lanes, struct dn_port **port, char *err,
		  size_t errlen);
void wn_lanes_cpus(const struct dn_port *port, cpu_set_t *cpus);
/* Waits (sleeping 100 us at a time) until *ctr reaches want (acquire). */
void wn_group_wait(_Atomic uint32_t *ctr, uint32_t want);
void wn_lane_affinity(const struct wc_cluster *cl, bool floating, const cpu_set_t *cpus,
		      uint32_t k);

/* Lanes (wc_psnet_lanes.c): the stop flag every lane obeys, sums for status/telemetry. */
bool wn_stopping(const struct wc_psnet *n);
/* Tells every lane to stop, and wakes them. */
void wn_group_stop(struct wn_group *g);
/* Lanes NETWORK_PS_CORE_NUMBER asks for, capped at WN_MAX_LANES. */
uint32_t wn_lanes_wanted(const struct wc_cluster *cl);
/*
 * Prepares *lanes lanes (dpdk: EAL from np's arguments and one port for them all; *lanes
 * lowered to EAL's lcore count). Then the caller builds the server for *lanes lcore slots
 * (with wn_lanes_wake_hook in its config) and a handler per slot, and wn_lanes_run serves
 * until a shutdown or a signal in sigs. wn_lanes_fini releases the port and EAL.
 */
int wn_lanes_start(struct wn_group **out, const struct wc_cluster *cl,
		   const struct wc_psnet_params *np, uint32_t *lanes, char *err, size_t errlen);
void wn_lanes_wake_hook(struct wn_group *g, struct ps_server_config *sc);
int wn_lanes_run(struct wn_group *g, struct ps_server *ps, struct ps_handler **h,
		 const struct ps_server_config *sc, const char *ckpt, const sigset_t *sigs,
		 char *err, size_t errlen);
void wn_lanes_fini(struct wn_group *g);
/* One idle round of a lane: its network poll, then ops other lanes queued for its shards. */
int wn_lane_round(struct wc_psnet *n);
/* Shutdown steps of a lane (wc_psnet_srv.c): drained (lane 0 waits for all), then saved
 * (lane 0 says so; the others keep serving their rings until it does). */
void wn_lanes_drained(struct wc_psnet *n);
void wn_lanes_saved(struct wc_psnet *n);
void wn_lanes_sum(const struct wc_psnet *n, struct wn_lane_sum *out);
/* One line per lane into out (status). */
void wn_lanes_status(const struct wc_psnet *n, char *out, size_t len, size_t *off);
/* "lanes L shards S ports p0,p1,.. addr A.B.C.D" of this PS node (the health answer's tail). */
void wn_lanes_layout(const struct wc_psnet *n, char *out, size_t len);

extern const struct fz_conn_ops wn_conn_ops;
/* Accept callbacks of a data listener, a control listener, and protocol=kernel's shared one. */
void wn_on_accept_data(struct fz_conn *fc, void *ctx);
void wn_on_accept_ctl(struct fz_conn *fc, void *ctx);
void wn_on_accept_either(struct fz_conn *fc, void *ctx);

#endif
