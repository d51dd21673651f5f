/* SPDX-License-Identifier: MIT */
/* The engine <-> agent protocol (docs/protocol.md): frame layout, types,
 * a decoder that never trusts its input, and blocking frame I/O. */
#ifndef KIS_PROTO_H
#define KIS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KIS_PROTO_VERSION 1u
#define KIS_FRAME_HDR 12u
#define KIS_FRAME_MAX (1u << 20) /* largest payload */

enum kis_frame_type {
	KIS_F_HELLO = 1,  /* payload: u32 version; first frame each way */
	KIS_F_EXEC = 2,   /* payload: JSON request; exec id in the header */
	KIS_F_DATA = 3,   /* payload: bytes of stream `stream` */
	KIS_F_EOF = 4,    /* stream `stream` is closed */
	KIS_F_RESIZE = 5, /* payload: u16 rows, u16 cols */
	KIS_F_SIGNAL = 6, /* payload: u32 signal number */
	KIS_F_EXIT = 7,   /* payload: JSON result of the exec */
	KIS_F_ERROR = 8,  /* payload: JSON {"code", "message"} */
	KIS_F_STARTED = 9, /* payload: JSON {"pid"}: the command runs */
	KIS_F__MAX
};

struct kis_frame {
	uint8_t type;
	uint8_t stream;
	uint32_t exec;
	uint32_t len;
	const uint8_t *payload; /* points into the decoded buffer */
};

enum kis_frame_status {
	KIS_FRAME_NEED_MORE = 0,
	KIS_FRAME_OK = 1,
	KIS_FRAME_ERR_OVERSIZED = -1,
	KIS_FRAME_ERR_TYPE = -2,
	KIS_FRAME_ERR_RESERVED = -3,
	KIS_FRAME_ERR_LENGTH = -4, /* a fixed-size payload of the wrong size */
	KIS_FRAME_ERR_IO = -5,     /* read(2) failed: errno */
};

/* Decode one frame from buf[0..n). On KIS_FRAME_OK, *used is the frame's
 * size. Pure: no allocation, any input is safe. */
int kis_frame_decode(const uint8_t *buf, size_t n, struct kis_frame *out, size_t *used);
const char *kis_frame_status_text(int status);
/* Encode a header into hdr[KIS_FRAME_HDR]. */
void kis_frame_encode_hdr(uint8_t *hdr, uint8_t type, uint8_t stream, uint32_t exec,
			  uint32_t len);

/* Write one whole frame (retrying on EINTR and short writes). -1 + errno. */
int kis_frame_write(int fd, uint8_t type, uint8_t stream, uint32_t exec, const void *payload,
		    uint32_t len);

/* A buffered reader of frames from a stream fd. */
struct kis_frame_reader {
	uint8_t *buf;
	size_t len, cap;
	size_t pending; /* size of the frame last handed out, dropped next call */
	bool eof;
};
void kis_frame_reader_init(struct kis_frame_reader *r);
void kis_frame_reader_release(struct kis_frame_reader *r);
/* Read what the fd has (one read(2)). 0 ok, -1 error (errno), sets eof. */
int kis_frame_reader_fill(struct kis_frame_reader *r, int fd);
/* Take the next complete frame out of the buffer (payload valid until the
 * next call). Returns a kis_frame_status. */
int kis_frame_reader_next(struct kis_frame_reader *r, struct kis_frame *f);
/* Blocking: fill until one frame or EOF. 1 frame, 0 EOF, < 0 error. */
int kis_frame_read_blocking(struct kis_frame_reader *r, int fd, struct kis_frame *f);

#endif
