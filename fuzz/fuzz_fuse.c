/*
 * fuzz_fuse.c — libFuzzer harness for fuse's receive side: fz_unpack on arbitrary fused
 * frames, as transport would hand them up (fuse/fz.h).
 *
 * Call chain exercised: (transport reassembly, simulated) -> fz_unpack -> deliver.
 *
 * Input layout (fuzz/gen_seeds.c writes seeds in it):
 *   u8  mode   bits 0..1: pieces - 1 (the body arrives in 1..4 separately allocated
 *              pieces); bit 2: force type FZ_TYPE_FRAME (else the header's own type)
 *   u8  cuts[3]  where the pieces are cut (fractions of the body length)
 *   32  message header (tl_wire.h layout); magic and version are forced valid and
 *       body_len set to the real body length, as transport guarantees both
 *   ... the body
 *
 * Invariants checked besides ASan/UBSan: every delivered view lies inside the frame's
 * pieces and adds up to its body_len; a refused frame delivered nothing and names a
 * reason; an accepted frame delivered exactly key_count sub-messages, none of a fuse type.
 */
#include <errno.h>
#include <stdint.h>

#include "fuse/fz.h"
#include "fuzz/fuzz_util.h"

struct fuse_ctx {
	const struct fh_pieces *ps;
	const struct tl_msg_view *frame;
	uint32_t delivered;
};

static void fuse_deliver(void *arg, const struct tl_msg_view *msg,
			 const struct tl_msg_view *carrier)
{
	struct fuse_ctx *cx = arg;
	uint32_t i;

	FH_CHECK(carrier == cx->frame);
	for (i = 0; i < msg->iovcnt; i++)
		FH_CHECK(fh_pieces_contain(cx->ps, msg->iov[i].base, msg->iov[i].len));
	(void)fh_touch_view(msg);
	if (cx->frame->hdr.type == FZ_TYPE_FRAME) {
		FH_CHECK(msg->hdr.type != 0);
		FH_CHECK(msg->hdr.type < TL_TYPE_FUSE_MIN || msg->hdr.type > TL_TYPE_FUSE_MAX);
		FH_CHECK(msg->hdr.magic == TL_MSG_MAGIC && msg->hdr.version == TL_MSG_VERSION);
	}
	cx->delivered++;
}

static void fuse_check_error(const struct fz_rx_error *err, int rc)
{
	char text[256];
	uint8_t body[512];
	int n;

	FH_CHECK(err->reason != NULL);
	n = fz_rx_error_text(err, text, sizeof(text));
	FH_CHECK(n > 0 && (size_t)n < sizeof(text) && text[n] == '\0');
	n = fz_rx_error_body(err, rc, body, sizeof(body));
	FH_CHECK(n >= 4 && (size_t)n <= sizeof(body));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fh_in in = {data, size};
	uint8_t mode = fh_u8(&in), cuts[3], hb[TL_MSG_HDR_LEN] = {0};
	struct fz_rx_error err = {0};
	struct fuse_ctx cx = {0};
	struct tl_msg_view v;
	struct fh_pieces ps;
	const uint8_t *p;
	struct fz_rx *rx;
	size_t got;
	int rc;

	for (int i = 0; i < 3; i++)
		cuts[i] = fh_u8(&in);
	p = fh_take(&in, TL_MSG_HDR_LEN, &got);
	memcpy(hb, p, got);
	tl_st16(hb, TL_MSG_MAGIC);
	hb[2] = TL_MSG_VERSION;
	if (mode & 4)
		hb[3] = FZ_TYPE_FRAME;
	if (hb[3] == 0)
		hb[3] = FZ_TYPE_FRAME;
	tl_st32(hb + 8, (uint32_t)in.n);
	FH_CHECK(tl_msg_hdr_decode(hb, UINT32_MAX, &v.hdr) == 0);
	if (fh_pieces_make(&ps, in.p, (uint32_t)in.n, (mode & 3u) + 1u, cuts) != 0)
		return 0;
	v.iov = ps.iov;
	v.iovcnt = ps.n;
	if (fz_rx_create(&rx) != 0) {
		fh_pieces_free(&ps);
		return 0;
	}
	cx.ps = &ps;
	cx.frame = &v;
	rc = fz_unpack(rx, &v, fuse_deliver, &cx, &err);
	if (rc == 0) {
		if (v.hdr.type == FZ_TYPE_FRAME) {
			FH_CHECK(cx.delivered == v.hdr.key_count);
			FH_CHECK(fz_rx_stats(rx)->frames == 1);
		} else {
			FH_CHECK(cx.delivered == 1);
		}
	} else {
		FH_CHECK(rc == -EBADMSG || rc == -E2BIG);
		FH_CHECK(cx.delivered == 0);
		if (rc == -EBADMSG) {
			fuse_check_error(&err, rc);
			FH_CHECK(fz_rx_stats(rx)->refused == 1);
		}
	}
	fz_rx_destroy(rx);
	fh_pieces_free(&ps);
	return 0;
}
