/*
 * ps_net_pvt.h — internals of the PS's network side shared by ps_net.c (node, buffers,
 * control plane), ps_net_srv.c (server) and ps_net_cli.c (worker). Not for apps.
 */
#ifndef WHARF_PS_NET_PVT_H
#define WHARF_PS_NET_PVT_H

#include <pthread.h>
#include <sched.h>

#include "ps_core/ps_net.h"
#include "ps_core/ps_obs.h"
#include "ps_core/ps_config_pvt.h"
#include "fuse/fz.h"
#include "transport/tl.h"

#define PS_NET_BUF_HEAD 64u     /* struct ps_net_buf sits in front of the bytes, one cache line */
#define PS_NET_POOL_MAX 512u    /* a worker's buffers; a PS lane's are cl->reply_buffers */
#define PS_NET_TRACK_MAX 1024u  /* completions a worker may have outstanding */
#define PS_NET_MAX_LANES 16u    /* serving lanes (network lcores) of one PS */
/*
 * Shards of every PS, whatever its lane count: shard s belongs to lane s % lanes. Fixed, so
 * a PS restarted with another NETWORK_PS_CORE_NUMBER loads its checkpoint and log with the
 * exactly-once state (kept per shard) intact.
 */
#define PS_NET_PS_SHARDS 16u
#define PS_NET_MAX_DST (PS_MAX_NODES * PS_NET_MAX_LANES) /* a worker's (server, lane) pairs */

struct ps_net;

/* A message buffer lent to the transport: from tl_buf_alloc, so dpdk sends it zero copy. */
struct ps_net_buf {
	struct ps_net *n;
	struct ps_net_buf *next;    /* free list, or a connection's backlog */
	struct tl_msg_hdr hdr;  /* for a backlogged reply */
	union {
		struct ps_net_conn *owner; /* server: the connection a reply is lent for (out count) */
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
_Static_assert(sizeof(struct ps_net_buf) <= PS_NET_BUF_HEAD, "buffer head fits its cache line");

enum ps_net_kind { PS_NET_ACCEPTED = 0, PS_NET_TO_SERVER };

/*
 * A request that found no reply buffer: its bytes stay held (the carrier's hold) and its
 * view is copied, until a buffer is free (ps_net_srv.c).
 */
struct ps_net_defer {
	struct ps_net_defer *next;
	struct tl_msg *hold;
	struct tl_msg_view v;
	struct tl_iov iov[];    /* v.iov */
};

/*
 * What an accepted connection may carry: a data listener's, PS requests only; a control
 * listener's, control commands only; the one listener of protocol=kernel's lane 0 (data and
 * control share the control endpoint), either, until the first message decides for good.
 */
enum ps_net_plane { PS_NET_PLANE_EITHER = 0, PS_NET_PLANE_DATA, PS_NET_PLANE_CTL };

struct ps_net_conn {
	struct ps_net *n;
	struct fz_conn *fc;
	enum ps_net_kind kind;
	enum ps_net_plane plane;    /* accepted: what it may carry */
	uint32_t id, server, lane, dest; /* to-server: its server, lane and ps_client dest */
	uint32_t oid;           /* a worker lane's to-server connection: the owner's id of it */
	int up;                 /* 0 connecting, 1 up, -1 failed or closed */
	int reason;
	struct ps_net_buf *backlog, *backlog_tail; /* replies that found the send queue full */
	/* server: requests waiting for a reply buffer, in order; reading paused meanwhile */
	struct ps_net_defer *defer, *defer_tail;
	uint32_t out;                          /* server: replies lent to the transport */
	bool gone;                             /* freed once the last of them is done */
	struct ps_push_order order;            /* server: ps_handle_ordered's, per connection */
	struct ps_net_conn *prev, *next;           /* every live connection, for status */
	uint64_t reqs, replies, errors, bytes_in, bytes_out;
};

struct ps_net_track {
	struct ps_net *n;
	uint64_t call;          /* the call it belongs to; stale completions are ignored */
	bool busy;
};

/* What a lane publishes for lane 0's status and telemetry (relaxed stores, each poll). */
struct ps_net_lane_pub {
	_Atomic uint64_t reqs, errors, dropped, inflight, conns, polls, deferred;
	_Atomic int cpu;        /* where its thread ran at its last poll round */
	_Atomic uint64_t cpu_us; /* a worker lane's thread CPU time (every 20 ms) */
};

/* Sums over the lanes of a node (ps_net_lanes_sum). */
struct ps_net_lane_sum {
	uint64_t reqs, errors, dropped, inflight, deferred, data_ops_remote, ctl_ops_remote;
};

struct ps_net_group;
struct ps_net_wl;
struct ps_net_wl_lane;

/*
 * A worker's view of one destination that another of its lanes carries (ps_net_wl_*): the
 * connection itself belongs to that lane's thread; the owner knows it by id and state.
 */
enum ps_net_dst_state { PS_NET_DST_NONE = 0, PS_NET_DST_CONNECTING, PS_NET_DST_UP, PS_NET_DST_FAILED };
struct ps_net_ldst {
	uint32_t id;            /* the owner's id of the connection; 0: none */
	uint32_t server, lane;  /* for log lines */
	enum ps_net_dst_state st;
	int reason;             /* PS_NET_DST_FAILED: why */
};

struct ps_net {
	const struct ps_cluster *cl;
	char name[32];
	bool is_ps, polling, stop, draining;
	uint32_t lane, lanes;             /* this node's serving lane, and how many it runs */
	struct ps_net_group *g;               /* the lanes of a multi-lane PS; NULL with one */
	struct ps_net_wl *wl;                 /* a worker's lanes (ps_net_wlanes.c); NULL with one */
	struct ps_net_wl_lane *wlane;         /* set on the node of a worker's lane k > 0 */
	uint32_t wl_n;                    /* owner: its lanes, itself included (0: no wl) */
	struct ps_net_lane_pub pub;
	uint16_t data_port;               /* server: where this lane listens for data */
	struct tl *tl, *ctl_tl;           /* ctl_tl == tl with protocol=kernel */
	struct fz_net *fz, *ctl_fz;
	struct fz_config fzc, fzc_ctl;
	struct fz_listener *data_l, *ctl_l;
	uint32_t max_msg, buf_size;
	uint64_t model_digest;            /* server: what health names; worker: what it expects */
	struct ps_net_buf *pool;              /* free buffers */
	uint32_t pool_total, pool_free, pool_max;
	struct ps_net_conn *conns;
	uint32_t next_conn_id;
	struct fz_conn_stats fz_gone;     /* fuse counters of the connections already closed */
	uint64_t t0_us, next_ctl_us, next_sig_us;
	const sigset_t *stop_sigs;   /* a worker's waits for its servers end on these too */
	const _Atomic int *stop_flag; /* ... and when this becomes nonzero (ps_net_stop_flag) */
	bool stop_flagged;           /* the flag ended one */
	int stop_sig;                /* the signal ps_net_signalled took, 0: none */
	/* control plane (lane 0): the token status/save/shutdown need, the file of one we made */
	char ctl_token[PS_CTL_TOKEN_MAX + 1];
	char ctl_token_made[PS_PATH_LEN + 96];
	uint64_t ctl_refused, next_refused_log_us;

	/* server */
	struct ps_server *ps;
	struct ps_handler *h;
	const struct ps_server_config *scfg;
	char ckpt[PS_PATH_LEN];
	uint64_t srv_reqs, srv_errors, srv_dropped, srv_inflight, ctl_reqs;
	/* back-pressure: connections with requests deferred now; requests deferred so far */
	uint32_t srv_deferring, srv_conns; /* srv_conns: accepted connections */
	uint64_t srv_deferred;
	/* sync barrier queries parked until their step is done (ps_net_srv.c, ps_net_srv_bars) */
	struct ps_net_bar *bars;
	bool bars_due;
	uint64_t next_bars_us, bars_parked;
	struct ps_obs *obs;              /* telemetry slot (the /wharf/ps commands), lane 0's */
	struct ps_obs *obs_count;        /* the same slot, counted into by every lane */
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
	char save_path[2 * PS_PATH_LEN + 2];
	struct ps_net_conn *save_ctl;
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
	struct ps_msgbuf msgs[PS_NET_MAX_DST];   /* encode buffers, per ps_client destination */
	struct ps_net_conn *dst[PS_NET_MAX_DST];     /* data connections, per destination */
	bool fresh[PS_NET_MAX_DST];              /* connected, not yet resent to (ps_net_recover) */
	/* Each server's layout, from its health answer: lanes, shards, each lane's data port. */
	uint32_t lanes_of[PS_MAX_NODES], shards_of[PS_MAX_NODES];
	uint16_t lane_port[PS_MAX_NODES][PS_NET_MAX_LANES];
	uint32_t rss_of[PS_MAX_NODES];    /* a server's " rss R" (0: none): its lanes' queues */
	bool layout_known[PS_MAX_NODES], layout_set;
	/* A server's data address when the cluster has none for it (its health answer's). */
	uint32_t ps_ip[PS_MAX_NODES];
	bool ps_ip_known[PS_MAX_NODES];
	struct ps_net_track track[PS_NET_TRACK_MAX];
	uint32_t track_next;
	uint64_t call, call_pending;
	int call_status;
	struct ps_net_cli_stats cst;
	uint64_t retries_said, next_retry_say_us; /* refusals for a retry, as last logged */
};

uint64_t ps_net_now_us(void);
struct ps_net_buf *ps_net_buf_get(struct ps_net *n);
void ps_net_buf_put(struct ps_net_buf *b);
void ps_net_buf_done(void *arg, int status);
static inline struct ps_net_buf *ps_net_buf_of(uint8_t *data)
{
	return (struct ps_net_buf *)(void *)(data - PS_NET_BUF_HEAD);
}
/* A worker's buffer nobody has any more goes back to the pool. */
void ps_net_buf_unref(struct ps_net_buf *b);
/* Sends hdr + body of b on c (zero copy; b goes back to the pool when done), or backlogs it. */
int ps_net_send_buf(struct ps_net_conn *c, struct ps_net_buf *b, const struct tl_msg_hdr *h, bool backlog);
struct ps_net_conn *ps_net_conn_new(struct ps_net *n, enum ps_net_kind kind);
void ps_net_conn_free(struct ps_net_conn *c);
int ps_net_endpoint_ip(const struct ps_endpoint *ep, uint32_t *ip, char *err, size_t errlen,
		   const char *what);

/* Control plane, server side: answers one PS_T_CTL message on c. */
void ps_net_ctl_handle(struct ps_net_conn *c, const struct tl_msg_view *m);
/* ps requests (ps_net_srv.c). carrier: what to hold to keep m's bytes (fz_deliver_fn). */
void ps_net_srv_handle(struct ps_net_conn *c, const struct tl_msg_view *m,
		   const struct tl_msg_view *carrier);
/* Serves deferred requests while reply buffers last (each poll round of a PS). */
void ps_net_srv_deferred(struct ps_net *n);
/* Lets go of c's deferred requests and parked barrier queries (it is going away). */
void ps_net_srv_drop_deferred(struct ps_net_conn *c);
/* Parked barrier queries asked again when due (all: every one answered now). */
void ps_net_srv_bars(struct ps_net *n, bool all);
void ps_net_srv_status(struct ps_net *n, char *out, size_t len, size_t *off);
/*
 * Starts a checkpoint to path that lane 0 copies while it serves and a thread writes; the
 * control connection c (request req_id) is answered when it is written. -EBUSY while another
 * checkpoint is being written.
 */
int ps_net_srv_save_start(struct ps_net *n, const char *path, struct ps_net_conn *c, uint64_t req_id,
		      char *err, size_t errlen);
/* A control reply (PS_T_CTL_R) on c. */
int ps_net_ctl_reply(struct ps_net_conn *c, uint64_t req_id, const char *text);
/* worker replies (ps_net_cli.c). */
void ps_net_cli_on_msg(struct ps_net_conn *c, const struct tl_msg_view *m,
		   const struct tl_msg_view *carrier);
/* A data connection to a server is gone: what it owed and will not be resent is let go. */
void ps_net_cli_lost(struct ps_net_conn *c);
/* Each poll round of a worker: ps_client_tick (retries, timeouts: stalled connections closed). */
void ps_net_cli_tick(struct ps_net *n);

/* ---- a worker's lanes (ps_net_wlanes.c) ---- */

/* Lanes NETWORK_WORKER_CORE_NUMBER asks for, capped at PS_NET_MAX_LANES. */
uint32_t ps_net_wl_wanted(const struct ps_cluster *cl);
/*
 * Before the owner's (lane 0's) transport exists: dpdk, EAL from np's arguments and one port
 * for every lane, lane 0's lcore on this thread (np->backend_arg gets it); kernel, nothing
 * to set up. *lanes is lowered to EAL's lcore count. 0 or -errno with err.
 */
int ps_net_wl_prepare(struct ps_net_params *np, uint32_t *lanes, struct ps_net_wl **out, char *err,
		  size_t errlen);
/* With the owner n built: starts lanes 1.. on their threads, each a node of its own. */
int ps_net_wl_start(struct ps_net_wl *wl, struct ps_net *n, char *err, size_t errlen);
/* Stops and joins the lanes (the owner's node is still whole), then what is left comes back. */
void ps_net_wl_stop(struct ps_net *n);
/* After the owner's transport is gone: lane 0's lcore, the port and EAL. */
void ps_net_wl_fini(struct ps_net_wl *wl);
struct ps_net_ldst *ps_net_wl_dst(const struct ps_net *n, uint32_t d);
/* The lane that carries destination d (0: the owner's own node). */
static inline uint32_t ps_net_wl_lane_of(const struct ps_net *n, uint32_t d)
{
	return n->wl_n > 1 ? d % n->wl_n : 0;
}
/* Owner: hands b (its header at b->data) to the lane of d to send; 0 or -ENOTCONN. */
int ps_net_wl_send(struct ps_net *n, uint32_t d, struct ps_net_buf *b);
/* Owner: asks d's lane to connect to ip:port (server s, its lane sl); state CONNECTING. */
/*
 * Before tn's transport opens server s's lane `lane` at ip:port: where the server's health
 * answer gave " rss R" (its lane k reads queue k of a port hashed by dn's RSS), the
 * connection takes a source port that lands it on that queue (tl_peer_rss). owner is the
 * worker's lane 0 (the layout's keeper); tn the node whose transport connects.
 */
void ps_net_aim(struct ps_net *tn, const struct ps_net *owner, uint32_t s, uint32_t lane,
		uint32_t ip, uint16_t port);
int ps_net_wl_open(struct ps_net *n, uint32_t d, uint32_t s, uint32_t sl, uint32_t ip,
	       uint16_t port);
/* Owner: lets go of d's connection, whatever its state (NONE after). */
void ps_net_wl_close(struct ps_net *n, uint32_t d);
/* Owner: wakes lanes it handed work to; then takes in what the lanes sent back. */
void ps_net_wl_kick(struct ps_net *n);
void ps_net_wl_drain(struct ps_net *n);
/* Lane side, from the node's callbacks: a reply, a connection's change, a send done. */
void ps_net_wl_on_reply(struct ps_net_conn *c, const struct tl_msg_view *m,
		    const struct tl_msg_view *carrier);
void ps_net_wl_on_conn(struct ps_net_conn *c, bool up, int reason);
void ps_net_wl_buf_done(struct ps_net_buf *b);
/* Owner: one line per lane (status), and the lanes' fuse counters added to out. */
void ps_net_wl_status(const struct ps_net *n, char *out, size_t len, size_t *off);
void ps_net_wl_fuse_add(const struct ps_net *n, struct fz_conn_stats *out);

/*
 * Shared by PS and worker lanes (ps_net_lanes.c): the lanes of protocol cl->protocol, *lanes
 * wanted (fewer when EAL has fewer lcores: logged naming knob, *lanes lowered).
 */
int ps_net_lanes_open(const struct ps_cluster *cl, const struct ps_net_params *np,
		      const char *knob, uint32_t *lanes, struct tl_lanes **out, char *err,
		      size_t errlen);
/* Waits (sleeping 100 us at a time) until *ctr reaches want (acquire). */
void ps_net_group_wait(_Atomic uint32_t *ctr, uint32_t want);
void ps_net_lane_affinity(const struct ps_cluster *cl, bool floating, const cpu_set_t *cpus,
		      uint32_t k);

/* Lanes (ps_net_lanes.c): the stop flag every lane obeys, sums for status/telemetry. */
bool ps_net_stop_asked(const struct ps_net *n);
/* Tells every lane to stop, and wakes them. */
void ps_net_group_stop(struct ps_net_group *g);
/* Lanes NETWORK_PS_CORE_NUMBER asks for, capped at PS_NET_MAX_LANES. */
uint32_t ps_net_lanes_wanted(const struct ps_cluster *cl);
/*
 * Prepares *lanes lanes (dpdk: EAL from np's arguments and one port for them all; *lanes
 * lowered to EAL's lcore count). Then the caller builds the server for *lanes lcore slots
 * (with ps_net_lanes_wake_hook in its config) and a handler per slot, and ps_net_lanes_run serves
 * until a shutdown or a signal in sigs. ps_net_lanes_fini releases the port and EAL.
 */
int ps_net_lanes_start(struct ps_net_group **out, const struct ps_cluster *cl,
		   const struct ps_net_params *np, uint32_t *lanes, char *err, size_t errlen);
void ps_net_lanes_wake_hook(struct ps_net_group *g, struct ps_server_config *sc);
int ps_net_lanes_run(struct ps_net_group *g, struct ps_server *ps, struct ps_handler **h,
		 const struct ps_server_config *sc, const char *ckpt, const sigset_t *sigs,
		 char *err, size_t errlen);
void ps_net_lanes_fini(struct ps_net_group *g);
/* One idle round of a lane: its network poll, then ops other lanes queued for its shards. */
int ps_net_lane_round(struct ps_net *n);
/* Shutdown steps of a lane (ps_net_srv.c): drained (lane 0 waits for all), then saved
 * (lane 0 says so; the others keep serving their rings until it does). */
void ps_net_lanes_drained(struct ps_net *n);
void ps_net_lanes_saved(struct ps_net *n);
void ps_net_lanes_sum(const struct ps_net *n, struct ps_net_lane_sum *out);
/* One line per lane into out (status). */
void ps_net_lanes_status(const struct ps_net *n, char *out, size_t len, size_t *off);
/* "lanes L shards S ports p0,p1,.. addr A.B.C.D" of this PS node (the health answer's tail). */
void ps_net_lanes_layout(const struct ps_net *n, char *out, size_t len);

extern const struct fz_conn_ops ps_net_conn_ops;
/* Accept callbacks of a data listener, a control listener, and protocol=kernel's shared one. */
void ps_net_on_accept_data(struct fz_conn *fc, void *ctx);
void ps_net_on_accept_ctl(struct fz_conn *fc, void *ctx);
void ps_net_on_accept_either(struct fz_conn *fc, void *ctx);

#endif
