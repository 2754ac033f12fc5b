/*
 * gen_seeds.c — writes the seed corpora of the fuzz harnesses (fuzz/corpus/<target>/),
 * in each harness's input layout (see the comment at the top of fuzz/fuzz_<target>.c).
 * Built and run by `fuzz/run.sh --gen-seeds`; its output is committed.
 *
 * Valid messages come from the real encoders, so a seed is what the product sends:
 * fused frames from fuse's packer (fz_peer_send/flush), PS requests from ps_core's client
 * (ps_client_*). TCP segments, frames and configuration texts are built here by hand,
 * one per state or source, plus a few near misses (truncations, wrong lengths).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuse/fz.h"
#include "ps_core/ps.h"
#include "transport/tl_wire.h"

#define GS_BUF (1u << 20)

struct gs_buf {
	uint8_t *b;
	size_t n;
};

static const char *gs_dir;

static void gs_put(struct gs_buf *o, const void *p, size_t n)
{
	if (o->n + n > GS_BUF) {
		fprintf(stderr, "gen_seeds: seed too large\n");
		exit(1);
	}
	memcpy(o->b + o->n, p, n);
	o->n += n;
}

static void gs_u8(struct gs_buf *o, uint8_t v) { gs_put(o, &v, 1); }
static void gs_u16(struct gs_buf *o, uint16_t v) { uint8_t b[2]; tl_st16(b, v); gs_put(o, b, 2); }
static void gs_u32(struct gs_buf *o, uint32_t v) { uint8_t b[4]; tl_st32(b, v); gs_put(o, b, 4); }

static void gs_write(const char *target, const char *name, const struct gs_buf *o)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", gs_dir, target);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", gs_dir, target, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(o->b, 1, o->n, f) != o->n || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* ---- fuse: fused frames from the real packer --------------------------------------- */

struct gs_frames {
	struct gs_buf msg[16];  /* header + body of each output */
	uint32_t n;
};

static int gs_fz_output(void *arg, const struct fz_out *out)
{
	struct gs_frames *fr = arg;
	struct gs_buf *m = &fr->msg[fr->n++];
	struct tl_msg_hdr h = out->hdr;
	uint8_t hb[TL_MSG_HDR_LEN];

	m->b = malloc(GS_BUF);
	m->n = 0;
	tl_msg_hdr_encode(hb, &h);
	gs_put(m, hb, sizeof(hb));
	for (uint32_t i = 0; i < out->iovcnt; i++)
		gs_put(m, out->iov[i].base, out->iov[i].len);
	if (out->done)
		out->done(out->done_arg, 0);
	return 0;
}

static bool gs_busy(void *arg) { (void)arg; return true; }

static void gs_fuse(struct gs_buf *o)
{
	struct gs_frames fr = {0};
	struct fz_peer_ops ops = { .output = gs_fz_output, .wire_busy = gs_busy, .arg = &fr };
	struct fz_config cfg;
	struct fz_peer *p;
	uint8_t body[300];
	char name[64];

	fz_config_defaults(&cfg);
	cfg.tensor_fuse = true;
	if (fz_peer_create(&cfg, &ops, &p) != 0)
		exit(1);
	for (uint32_t i = 0; i < sizeof(body); i++)
		body[i] = (uint8_t)i;
	/* Frame 1: a mix of header fields; frame 2: one empty sub-message; then alone. */
	for (uint32_t k = 0; k < 5; k++) {
		struct tl_iov iov = {body, 16u * k + 4u};
		struct fz_msg m = {.hdr = {.type = (uint8_t)(PS_T_PULL + 2 * (k % 3)), .flags = (uint16_t)k,
					   .aux = k & 1 ? PS_ELEM_F32 : 0, .body_len = iov.len,
					   .table_id = k, .req_id = 100 + k, .key_count = k * 3, .dim = 4},
				   .iov = &iov, .iovcnt = 1};
		fz_peer_send(p, &m, 0);
	}
	fz_peer_flush(p, 0);
	{
		struct fz_msg m = {.hdr = {.type = PS_T_BARRIER, .req_id = 7}, .iov = NULL, .iovcnt = 0};
		fz_peer_send(p, &m, 0);
		fz_peer_flush(p, 0);
	}
	for (uint32_t f = 0; f < fr.n; f++)
		for (uint8_t mode = 0; mode < 8; mode += 3) {
			o->n = 0;
			gs_u8(o, mode);
			gs_u8(o, 60);
			gs_u8(o, 130);
			gs_u8(o, 200);
			gs_put(o, fr.msg[f].b, fr.msg[f].n);
			snprintf(name, sizeof(name), "frame%u-mode%u", f, mode);
			gs_write("fuse", name, o);
			/* The same frame cut one byte short: a truncated last sub-message. */
			o->n--;
			snprintf(name, sizeof(name), "frame%u-mode%u-short", f, mode);
			gs_write("fuse", name, o);
		}
	for (uint32_t f = 0; f < fr.n; f++)
		free(fr.msg[f].b);
	fz_peer_destroy(p);
}

/* ---- frame: message streams --------------------------------------------------------- */

static void gs_msg(struct gs_buf *o, uint8_t type, uint8_t version, uint32_t body_len, uint64_t req)
{
	struct tl_msg_hdr h = {.type = type, .body_len = body_len, .req_id = req, .key_count = 1};
	uint8_t hb[TL_MSG_HDR_LEN];

	tl_msg_hdr_encode(hb, &h);
	hb[2] = version;
	gs_put(o, hb, sizeof(hb));
	for (uint32_t i = 0; i < body_len; i++)
		gs_u8(o, (uint8_t)(req + i));
}

static void gs_frame(struct gs_buf *o)
{
	static const uint8_t chunks[] = {0, 3, 40, 0xff};
	static const uint8_t flags[] = {0x31, 0x0e, 0x70, 0xf1};
	char name[64];

	for (uint32_t i = 0; i < sizeof(chunks); i++) {
		o->n = 0;
		gs_u8(o, (uint8_t)(i * 17));
		gs_u8(o, chunks[i]);
		gs_u8(o, flags[i]);
		gs_u8(o, i == 3 ? 4 : 0);
		gs_msg(o, PS_T_PULL, TL_MSG_VERSION, 24, 1);
		gs_msg(o, TL_TYPE_ERROR, TL_MSG_VERSION, 12, 2);
		gs_msg(o, 2, TL_MSG_VERSION, 5, 3);               /* unknown transport type */
		gs_msg(o, PS_T_PUSH, 2, 9, 4);                    /* unknown version */
		gs_msg(o, FZ_TYPE_FRAME, TL_MSG_VERSION, 0, 5);
		gs_msg(o, PS_T_DENSE_PULL, TL_MSG_VERSION, 300, 6);
		if (i == 2)
			gs_msg(o, PS_T_PULL, TL_MSG_VERSION, 70000, 7); /* above 64 KiB */
		snprintf(name, sizeof(name), "stream%u", i);
		gs_write("frame", name, o);
	}
}

/* ---- ps: requests from the real client ----------------------------------------------- */

static void gs_ps_rec(struct gs_buf *o, const struct ps_msgbuf *mb, uint8_t pieces)
{
	if (mb->len == 0 || mb->len > 0xffff)
		return;
	gs_u8(o, pieces);
	gs_u8(o, 37);
	gs_u8(o, 101);
	gs_u8(o, 222);
	gs_u16(o, (uint16_t)mb->len);
	gs_put(o, mb->buf, mb->len);
}

static void gs_done(void *arg, int status) { (void)arg; (void)status; }
static void gs_geo_row(void *arg, uint64_t key, const float *row, uint32_t dim)
{
	(void)arg; (void)key; (void)row; (void)dim;
}

/* Encodes request kind k with client c into mb; 0 or -errno. */
static int gs_ps_encode(struct ps_client *c, uint32_t k, struct ps_msgbuf *mb)
{
	static uint64_t keys[6] = {1, 2, 3, 99, 1ull << 40, 7};
	static float grads[6 * 4], out[6 * 4];
	static bool done_flag;

	for (uint32_t i = 0; i < 24; i++)
		grads[i] = 0.01f * (float)i - 0.1f;
	mb->len = 0;
	switch (k) {
	case 0: return ps_client_pull(c, 1, 4, keys, 6, out, gs_done, NULL, mb);
	case 1: return ps_client_push(c, 1, 4, keys, 6, grads, gs_done, NULL, mb);
	case 2: return ps_client_push_pull(c, 1, 4, keys, 3, grads, out, gs_done, NULL, mb);
	case 3: return ps_client_dense_pull(c, 2, 3, 16, 2, 5, out, gs_done, NULL, mb);
	case 4: return ps_client_dense_push(c, 2, 3, 16, 0, 4, grads, gs_done, NULL, mb);
	case 5: return ps_client_barrier(c, 0, &done_flag, gs_done, NULL, mb);
	case 6: return ps_client_geo_pull(c, 1, 4, gs_geo_row, NULL, &done_flag, gs_done, NULL, mb);
	default: return ps_client_hello(c, gs_done, NULL, mb);
	}
}

static void gs_ps(struct gs_buf *o)
{
	static const char *const kinds[8] = {"pull", "push", "push_pull", "dense_pull",
					     "dense_push", "barrier", "geo_pull", "hello"};
	struct ps_client_config cc = {.worker_id = 1, .n_servers = 1};
	struct ps_msgbuf mb = {.buf = malloc(GS_BUF), .cap = GS_BUF};
	struct ps_client *c;
	char name[64];

	for (uint8_t mode = 0; mode < 3; mode++) {
		uint8_t sel = (uint8_t)(mode | (mode + 1) % 4 << 2 | (mode + 2) % 4 << 4);
		struct gs_buf all = {malloc(GS_BUF), 0};
		if (ps_client_create(&cc, &c) != 0)
			exit(1);
		gs_u8(&all, sel);
		for (uint32_t k = 0; k < 8; k++) {
			if (gs_ps_encode(c, k, &mb) != 0)
				continue;
			o->n = 0;
			gs_u8(o, sel);
			gs_ps_rec(o, &mb, (uint8_t)k);
			snprintf(name, sizeof(name), "%s-mode%u", kinds[k], mode);
			gs_write("ps", name, o);
			gs_ps_rec(&all, &mb, (uint8_t)(k + mode));
			gs_ps_rec(&all, &mb, 0); /* the same again: a duplicate push */
		}
		snprintf(name, sizeof(name), "all-mode%u", mode);
		gs_write("ps", name, &all);
		all.b[0] |= 0x80; /* the same on a sparse table with memory policies */
		snprintf(name, sizeof(name), "all-policed-mode%u", mode);
		gs_write("ps", name, &all);
		free(all.b);
		ps_client_destroy(c);
	}
	free(mb.buf);
}

/* Client mode of fuzz_ps.c: one well-formed reply per outstanding request kind. */
static void gs_ps_replies(struct gs_buf *o)
{
	/* kind: reply type, key_count, dim, body bytes */
	static const uint32_t r[8][4] = {
		{PS_T_PULL_R, 6, 4, 96}, {PS_T_PUSH_R, 6, 4, 16}, {PS_T_PUSH_PULL_R, 3, 4, 48},
		{PS_T_DENSE_PULL_R, 5, 3, 60}, {PS_T_DENSE_PUSH_R, 4, 3, 16},
		{PS_T_BARRIER_R, 0, 0, 24}, {PS_T_GEO_PULL_R, 2, 4, 56},
		{PS_T_HELLO_R, 0, 0, PS_HELLO_R_BODY}};
	uint8_t hb[TL_MSG_HDR_LEN];

	o->n = 0;
	gs_u8(o, 0x40);
	for (uint32_t k = 0; k < 8; k++) {
		struct tl_msg_hdr h = {.type = (uint8_t)r[k][0], .aux = PS_ELEM_F32,
				       .body_len = r[k][3], .table_id = k == 3 || k == 4 ? 2 : 1,
				       .req_id = k, .key_count = r[k][1], .dim = r[k][2]};
		gs_u8(o, (uint8_t)(4 | (k & 3)));
		gs_u8(o, 50);
		gs_u8(o, 100);
		gs_u8(o, 150);
		gs_u16(o, (uint16_t)(TL_MSG_HDR_LEN + r[k][3]));
		tl_msg_hdr_encode(hb, &h);
		gs_put(o, hb, sizeof(hb));
		for (uint32_t i = 0; i < r[k][3]; i += 4)
			gs_u32(o, 0x3f800000u); /* 1.0f; also a fine u32/u64 field */
	}
	gs_write("ps", "client-replies", o);
}

/* ---- tcp: a few peer moves per state ---------------------------------------------------- */

/* A structured segment record of fuzz_tcp.c (op 0). */
static void gs_tcp_seg(struct gs_buf *o, uint8_t ctl, uint8_t flags, uint32_t word, uint16_t plen)
{
	gs_u8(o, 0);
	gs_u8(o, ctl);
	gs_u8(o, flags);
	gs_u16(o, 65535);
	gs_u32(o, word);
	gs_u8(o, 0);
	gs_u16(o, plen);
	for (uint16_t i = 0; i < plen; i++)
		gs_u8(o, (uint8_t)i);
}

static void gs_tcp(struct gs_buf *o)
{
	char name[64];

	for (uint8_t st = 0; st < 12; st++)
		for (uint8_t cfg = 0; cfg < 2; cfg++) {
			uint8_t c = cfg ? 0x07 | 0x08 | 0x60 : 0x00; /* ts/ws/ecn, read, ISS near wrap */
			uint8_t ts = cfg ? 0x20 : 0;
			o->n = 0;
			gs_u8(o, st);
			gs_u8(o, c);
			gs_tcp_seg(o, 0x80 | ts, 0x18, 0, 100);           /* in-order data */
			gs_tcp_seg(o, 0x80 | ts | 0x01, 0x10, 50, 30);    /* out of order */
			gs_tcp_seg(o, ts | 0x04, 0x10, 0x300, 0);         /* ACK beyond snd_max */
			gs_u8(o, 6);                                      /* app: send 500 */
			gs_u8(o, 0);
			gs_u16(o, 499);
			gs_u8(o, 7);                                      /* time: RTOs */
			gs_u8(o, 200);
			gs_u8(o, 5);
			gs_tcp_seg(o, ts, 0x10, 0, 0);                    /* pure ACK */
			gs_tcp_seg(o, 0x80 | ts, 0x11, 0, 0);             /* FIN */
			gs_tcp_seg(o, ts | 0x01, 0x04, 3, 0);             /* RST near the window */
			gs_tcp_seg(o, 0, 0x02, 0, 0);                     /* SYN in window */
			gs_tcp_seg(o, 0x10, 0x10, 0xdead0000u, 10);       /* bad checksum */
			snprintf(name, sizeof(name), "state%u-cfg%u", st, cfg);
			gs_write("tcp", name, o);
		}
}

/* ---- config texts --------------------------------------------------------------------- */

static void gs_text(struct gs_buf *o, const char *name, uint8_t sel, const char *text)
{
	o->n = 0;
	gs_u8(o, sel);
	gs_put(o, text, strlen(text));
	gs_write("config", name, o);
}

static void gs_config(struct gs_buf *o)
{
	/* Selectors: 0 TF_CONFIG, 1 Paddle, 2 .endpoint_map, 3 JSON file, 4 knobs, 5 flags.
	 * Variable lines start with the index of the name in fuzz_config.c's tables. */
	gs_text(o, "tfconfig", 0, "{\"cluster\":{\"chief\":[\"h0:2000\"],\"worker\":[\"h1:2000\","
		"\"h2:2000\"],\"ps\":[\"10.0.0.1:3000\",\"p1:3000\"]},\"task\":{\"type\":\"worker\","
		"\"index\":1}}");
	gs_text(o, "tfconfig-ps", 0, "{\"cluster\":{\"ps\":[\"p0:3000\"],\"worker\":[\"w:1\"]},"
		"\"task\":{\"type\":\"ps\",\"index\":0}}");
	gs_text(o, "tfconfig-bad", 0, "{\"cluster\":{\"ps\":[\"p0:3000\"],}");
	gs_text(o, "paddle-trainer", 1, "\x01" "10.0.0.1:36000,10.0.0.2:36000\n\x00TRAINER\n"
		"\x02" "4\n\x03" "1\n\x06" "10.0.0.5:1,10.0.0.6:1,10.0.0.7:1,10.0.0.8:1");
	gs_text(o, "paddle-pserver", 1, "\x01" "10.0.0.1:36000,10.0.0.2:36000\n\x00PSERVER\n"
		"\x02" "2\n\x04" "10.0.0.2\n\x05" "36000");
	gs_text(o, "epmap", 2, "127.0.0.1:3333=10.1.0.2:5555\n# comment\n\n"
		"127.0.0.1:3334=10.1.0.3:5555\n  10.0.0.1:1 = 10.1.0.9\n");
	gs_text(o, "epmap-dup", 2, "a:1=b:2\n\na:1=c:3\n");
	gs_text(o, "file", 3, "{\n  \"cluster\": {\"ps\": [\"10.0.0.1:4444\"], \"worker\": "
		"[\"10.0.0.2:3333\"]},\n  \"task\": {\"type\": \"ps\", \"index\": 0},\n"
		"  \"protocol\": \"kernel\",\n  \"tensor_fuse\": true, \"fuse\": {\"max_bytes\": 4096,"
		" \"max_msgs\": 8, \"flush_us\": 5},\n  \"mode\": \"async\", \"geo_k\": 3, "
		"\"wait_timeout_s\": 9, \"retry_interval_s\": 2,\n  \"endpoint_map\": \"/nonexistent\","
		"\n  \"net\": {\"ps\": {\"core_number\": 2, \"enable_polling\": \"True\"}, \"worker\": "
		"{\"disable_pin_cores\": false}}\n}\n");
	gs_text(o, "file-bad", 3, "{\n  \"protocol\": \"kernel\",\n  \"mode\" \"sync\"\n}\n");
	gs_text(o, "knobs", 4, "\x00kernel\n\x01geo\n\x02True\n\x03" "0\n\x04" "false\n\x05" "1\n"
		"\x06" "4\n\x07" "2\n\x08true\n\x09" "20\n\x0a" "30");
	gs_text(o, "flags", 5, "--role=ps\n--ps=a:1,b:1,c:1\n--num-workers=12\n--protocol=kernel\n"
		"--mode=sync\n--tensor-fuse=1\n--fuse-max-bytes=4096\n--ps-cores=2\n--data-addr=10.0.0.9");
	gs_text(o, "flags-worker", 5, "--role\nworker\n--task-index\n1\n--ps\n10.0.0.1:1\n--workers"
		"\n10.0.0.2:2,10.0.0.3:2\n--endpoint-map=/nonexistent\n--wait-timeout=5");
}

/* ---- dn_input: frames --------------------------------------------------------------------- */

static void gs_dn_frame(struct gs_buf *o, uint8_t fix, const uint8_t *f, uint16_t len)
{
	gs_u8(o, fix);
	gs_u16(o, len);
	gs_put(o, f, len);
}

static void gs_dn(struct gs_buf *o)
{
	uint8_t f[200] = {0};
	uint8_t *ip = f + 14, *l4 = f + 34;

	/* Ethernet: destination fixed by the harness, source 02:00:00:00:00:99. */
	f[6] = 0x02;
	f[11] = 0x99;
	ip[0] = 0x45;
	ip[3] = 20 + 8 + 32;               /* total length */
	ip[6] = 0x40;                      /* DF */
	ip[8] = 64;
	ip[9] = 1;                         /* ICMP */
	ip[12] = 198; ip[13] = 18; ip[14] = 0; ip[15] = 2;
	l4[0] = 8;                         /* echo request */
	l4[4] = 0x12; l4[5] = 0x34; l4[7] = 1;
	for (int i = 0; i < 32; i++)
		l4[8 + i] = (uint8_t)i;
	o->n = 0;
	gs_dn_frame(o, 0x01 | 0x04 | 0x10 | 0x20, f, 14 + 60);  /* echo request */
	ip[9] = 6;                                              /* TCP to the l4 hook */
	gs_dn_frame(o, 0x01 | 0x04 | 0x10, f, 14 + 60);
	ip[9] = 17;                                             /* UDP */
	gs_dn_frame(o, 0x01 | 0x04 | 0x10, f, 14 + 60);
	gs_dn_frame(o, 0x01 | 0x04 | 0x10, f, 30);              /* truncated IPv4 */
	ip[6] = 0x20;                                           /* a fragment */
	gs_dn_frame(o, 0x01 | 0x04 | 0x10, f, 14 + 60);
	gs_write("dn_input", "ip-mix", o);
	/* ARP request for our address and a reply to us. */
	memset(l4 - 20, 0, 28);
	ip[1] = 1; ip[2] = 8; ip[4] = 6; ip[5] = 4; ip[7] = 1;     /* Ethernet/IPv4, request */
	ip[8] = 0x02; ip[13] = 0x99;                              /* sender MAC */
	ip[14] = 198; ip[15] = 18; ip[16] = 0; ip[17] = 2;        /* sender IP */
	o->n = 0;
	gs_dn_frame(o, 0x02 | 0x08 | 0x10, f, 14 + 28);
	ip[7] = 2;
	gs_dn_frame(o, 0x01 | 0x08 | 0x10, f, 14 + 28);
	gs_dn_frame(o, 0x01 | 0x08 | 0x10, f, 14 + 20);          /* short ARP */
	gs_write("dn_input", "arp", o);
}

/* ---- be_dpdk: peer segments to the DPDK backend ---------------------------------------- */

/* Frame trailer of fuzz_be_dpdk.c: offload flags, buffer layout, the lie, the cuts. */
static void gs_bd_tail(struct gs_buf *o, uint8_t ol, uint8_t layout, uint8_t lie, const uint8_t *cuts)
{
	gs_u8(o, ol);
	gs_u8(o, layout);
	if (layout & 0x30)
		gs_u8(o, lie);
	for (uint32_t i = 0; i < (layout & 0xfu); i++)
		gs_u8(o, cuts[i]);
}

/* A built segment (kind 0): sequence and ack relative to the harness's peer model. */
static void gs_bd_seg(struct gs_buf *o, uint8_t op, uint8_t flags, uint8_t fix, int16_t seq_d,
		      const struct gs_buf *pay, uint8_t ol, uint8_t layout, uint8_t lie,
		      const uint8_t *cuts)
{
	gs_u8(o, op);
	gs_u8(o, flags);
	gs_u8(o, fix | 0x03);
	gs_u16(o, (uint16_t)seq_d);
	gs_u16(o, 0);
	gs_u16(o, 65535);
	gs_u8(o, 0);
	gs_u16(o, pay != NULL ? (uint16_t)pay->n : 0);
	if (pay != NULL)
		gs_put(o, pay->b, pay->n);
	gs_u8(o, 0);
	gs_bd_tail(o, ol, layout, lie, cuts);
}

static void gs_be_dpdk(struct gs_buf *o)
{
	static const uint8_t cuts[15] = {20, 60, 61, 90, 120, 128, 140, 160, 170, 180, 200, 220,
					 230, 240, 254};
	struct gs_buf m1 = {malloc(8192), 0}, m2 = {malloc(8192), 0}, m3 = {malloc(8192), 0};
	uint8_t raw[80] = {0};

	gs_msg(&m1, 32, 1, 100, 1);
	gs_msg(&m2, 33, 1, 1000, 2);
	gs_msg(&m2, 34, 1, 2000, 3);
	gs_msg(&m3, 35, 1, 400, 4);
	/* Passive connection with timestamps: messages whole, over LRO chains, out of order. */
	o->n = 0;
	gs_u8(o, 0x05);
	gs_bd_seg(o, 0x08, 0x18, 0x0c, 0, &m1, 0x00, 0x00, 0, cuts);       /* one buffer */
	gs_bd_seg(o, 0x08, 0x18, 0x0c, 0, &m2, 0x18, 0x03, 0, cuts + 1);   /* LRO, L4 good */
	gs_bd_seg(o, 0x08, 0x18, 0x0c, 0, &m3, 0x00, 0x02, 0, cuts + 13);  /* chain, sw csum */
	gs_bd_seg(o, 0x00, 0x18, 0x04, 2000, &m3, 0x08, 0x01, 0, cuts + 5); /* out of order */
	gs_bd_seg(o, 0x08, 0x18, 0x0c, 0, &m1, 0x00, 0x13, 40, cuts);      /* pkt_len too long */
	gs_u8(o, 0x03);                                                    /* app: send 3000 */
	gs_u8(o, 3);
	gs_u16(o, 3000);
	gs_u8(o, 0x03);                                                    /* app: timers */
	gs_u8(o, 1);
	gs_u8(o, 2);
	gs_bd_seg(o, 0x08, 0x10, 0x04, 0, NULL, 0x00, 0x00, 0, cuts);      /* ACK all */
	gs_bd_seg(o, 0x08, 0x11, 0x0c, 0, NULL, 0x00, 0x00, 0, cuts);      /* FIN */
	gs_write("be_dpdk", "passive-ts", o);
	/* Both connections, window scaling, held messages: chains with lies and odd headroom. */
	o->n = 0;
	gs_u8(o, 0x1b);
	gs_bd_seg(o, 0x0c, 0x18, 0x08, 0, &m2, 0x1c, 0x0f, 0, cuts);       /* 16 buffers */
	gs_bd_seg(o, 0x00, 0x18, 0x08, 0, &m1, 0x00, 0x61, 7, cuts);       /* pkt_len long */
	gs_bd_seg(o, 0x04, 0x18, 0x08, 0, &m3, 0x08, 0xa3, 9, cuts);       /* pkt_len short */
	gs_bd_seg(o, 0x08, 0x18, 0x08, 0, &m3, 0x0c, 0xf2, 30, cuts + 4);  /* data_len long */
	gs_bd_seg(o, 0x0c, 0x02, 0x08, 0, NULL, 0x08, 0x01, 0, cuts);      /* SYN in a chain */
	gs_u8(o, 0x07);                                                    /* app: send copy */
	gs_u8(o, 2);
	gs_u8(o, 100);
	gs_u8(o, 0x03);                                                    /* app: close */
	gs_u8(o, 4);
	gs_u8(o, 0x07);                                                    /* app: release */
	gs_u8(o, 8);
	gs_bd_seg(o, 0x0c, 0x14, 0x08, 0, NULL, 0x00, 0x00, 0, cuts);      /* RST */
	gs_write("be_dpdk", "both-lro", o);
	/* Listener only: a SYN, then raw frames fixed up to reach TCP. */
	o->n = 0;
	gs_u8(o, 0x00);
	gs_bd_seg(o, 0x08, 0x02, 0x08, 0, NULL, 0x00, 0x00, 0, cuts);
	gs_bd_seg(o, 0x08, 0x10, 0x08, 0, NULL, 0x00, 0x00, 0, cuts);
	raw[14 + 3] = 60;
	raw[14 + 8] = 64;
	raw[34 + 12] = 0x50;
	raw[34 + 13] = 0x18;
	gs_u8(o, 0x0a);
	gs_u8(o, 0x0f);
	gs_u16(o, sizeof(raw));
	gs_put(o, raw, sizeof(raw));
	gs_bd_tail(o, 0x00, 0x01, 0, cuts + 3);
	gs_u8(o, 0x0a);
	gs_u8(o, 0x07);
	gs_u16(o, 40);
	gs_put(o, raw, 40);
	gs_bd_tail(o, 0x03, 0x00, 0, cuts);
	gs_write("be_dpdk", "listen-raw", o);
	free(m1.b);
	free(m2.b);
	free(m3.b);
}

int main(int argc, char **argv)
{
	struct gs_buf o = {malloc(GS_BUF), 0};

	gs_dir = argc > 1 ? argv[1] : "fuzz/corpus";
	mkdir(gs_dir, 0755);
	gs_fuse(&o);
	gs_frame(&o);
	gs_ps(&o);
	gs_ps_replies(&o);
	gs_tcp(&o);
	gs_config(&o);
	gs_dn(&o);
	gs_be_dpdk(&o);
	free(o.b);
	printf("gen_seeds: corpora written under %s\n", gs_dir);
	return 0;
}
