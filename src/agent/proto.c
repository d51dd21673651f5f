/* SPDX-License-Identifier: MIT */
/* Frame encoding and decoding of the agent protocol. The decoder is the
 * part that faces a possibly hostile peer: it checks every field before it
 * believes it, and has a libFuzzer target (tests/fuzz/fuzz_frame.c). */
#include "core/util.h"

#include <string.h>
#include <sys/uio.h>

#include "agent/proto.h"

/* Header, little-endian: u32 len | u8 type | u8 stream | u16 reserved (0) | u32 exec */
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

void kis_frame_encode_hdr(uint8_t *hdr, uint8_t type, uint8_t stream, uint32_t exec, uint32_t len)
{
	put32(hdr, len);
	hdr[4] = type;
	hdr[5] = stream;
	hdr[6] = hdr[7] = 0;
	put32(hdr + 8, exec);
}

int kis_frame_decode(const uint8_t *buf, size_t n, struct kis_frame *out, size_t *used)
{
	if (n < KIS_FRAME_HDR)
		return KIS_FRAME_NEED_MORE;
	uint32_t len = get32(buf);
	uint8_t type = buf[4];
	if (len > KIS_FRAME_MAX)
		return KIS_FRAME_ERR_OVERSIZED;
	if (type == 0 || type >= KIS_F__MAX)
		return KIS_FRAME_ERR_TYPE;
	if (buf[6] || buf[7] || (type != KIS_F_DATA && type != KIS_F_EOF && buf[5]) || buf[5] > 2)
		return KIS_FRAME_ERR_RESERVED;
	if ((type == KIS_F_HELLO && len != 4) || (type == KIS_F_RESIZE && len != 4) ||
	    (type == KIS_F_SIGNAL && len != 4) || (type == KIS_F_EOF && len != 0))
		return KIS_FRAME_ERR_LENGTH;
	if (n - KIS_FRAME_HDR < len)
		return KIS_FRAME_NEED_MORE;
	out->len = len;
	out->type = type;
	out->stream = buf[5];
	out->exec = get32(buf + 8);
	out->payload = buf + KIS_FRAME_HDR;
	*used = KIS_FRAME_HDR + len;
	return KIS_FRAME_OK;
}

const char *kis_frame_status_text(int status)
{
	switch (status) {
	case KIS_FRAME_ERR_OVERSIZED:
		return "frame larger than 1 MiB";
	case KIS_FRAME_ERR_TYPE:
		return "unknown frame type";
	case KIS_FRAME_ERR_RESERVED:
		return "reserved header bits set";
	case KIS_FRAME_ERR_LENGTH:
		return "wrong payload size for the frame type";
	case KIS_FRAME_ERR_IO:
		return "cannot read the channel";
	default:
		return "frame error";
	}
}

int kis_frame_write(int fd, uint8_t type, uint8_t stream, uint32_t exec, const void *payload,
		    uint32_t len)
{
	uint8_t hdr[KIS_FRAME_HDR];
	kis_frame_encode_hdr(hdr, type, stream, exec, len);
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)payload, len}};
	int cnt = len ? 2 : 1;
	size_t total = sizeof(hdr) + len, done = 0;
	while (done < total) {
		ssize_t w = writev(fd, iov, cnt);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		done += (size_t)w;
		/* advance the iovecs past what was written */
		size_t adv = (size_t)w;
		for (int i = 0; i < cnt && adv; i++) {
			size_t take = adv < iov[i].iov_len ? adv : iov[i].iov_len;
			iov[i].iov_base = (char *)iov[i].iov_base + take;
			iov[i].iov_len -= take;
			adv -= take;
		}
	}
	return 0;
}

void kis_frame_reader_init(struct kis_frame_reader *r)
{
	memset(r, 0, sizeof(*r));
}

void kis_frame_reader_release(struct kis_frame_reader *r)
{
	free(r->buf);
	kis_frame_reader_init(r);
}

int kis_frame_reader_fill(struct kis_frame_reader *r, int fd)
{
	/* Room for a whole largest frame plus a read's worth, and no more: a
	 * peer cannot make the buffer grow without bound. */
	const size_t want = KIS_FRAME_MAX + KIS_FRAME_HDR + 65536;
	if (r->cap < want && r->cap - r->len < 65536) {
		size_t cap = r->cap ? r->cap * 2 : 131072;
		if (cap > want)
			cap = want;
		uint8_t *g = realloc(r->buf, cap);
		if (!g)
			return -1;
		r->buf = g;
		r->cap = cap;
	}
	if (r->cap == r->len) {
		errno = ENOBUFS;
		return -1;
	}
	ssize_t n = RETRY_EINTR(read(fd, r->buf + r->len, r->cap - r->len));
	if (n < 0)
		return (errno == EAGAIN) ? 0 : -1;
	if (n == 0)
		r->eof = true;
	r->len += (size_t)n;
	return 0;
}

int kis_frame_reader_next(struct kis_frame_reader *r, struct kis_frame *f)
{
	/* Drop the frame handed out by the previous call. */
	if (r->pending) {
		memmove(r->buf, r->buf + r->pending, r->len - r->pending);
		r->len -= r->pending;
		r->pending = 0;
	}
	size_t used = 0;
	int st = kis_frame_decode(r->buf, r->len, f, &used);
	if (st == KIS_FRAME_OK)
		r->pending = used;
	return st;
}

int kis_frame_read_blocking(struct kis_frame_reader *r, int fd, struct kis_frame *f)
{
	for (;;) {
		int st = kis_frame_reader_next(r, f);
		if (st != KIS_FRAME_NEED_MORE)
			return st == KIS_FRAME_OK ? 1 : st;
		if (r->eof)
			return 0;
		if (kis_frame_reader_fill(r, fd) < 0)
			return KIS_FRAME_ERR_IO;
	}
}
