/* SPDX-License-Identifier: MIT */
/* One exec over an agent channel, the engine's side: handshake, request,
 * stdin and signals and resizes out, streams and the exit back. The peer is
 * not trusted to frame well: the decoder refuses, the call fails. */
#include "core/util.h"

#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>

#include "agent/client.h"
#include "exec/exec.h"
#include "exec/exec.h"
#include "agent/proto.h"
#include "core/record.h"
#include "core/io.h"

#define EXEC_ID 1u /* one exec per connection */

static void put_u32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}

static void send_signal(int conn, uint32_t sig)
{
	uint8_t b[4];
	put_u32(b, sig);
	kis_frame_write(conn, KIS_F_SIGNAL, 0, EXEC_ID, b, 4);
}

static void send_resize(int conn, const struct kis_call *c)
{
	unsigned rows = c->rows, cols = c->cols;
	struct winsize ws;
	if (c->tty_fd >= 0 && ioctl(c->tty_fd, TIOCGWINSZ, &ws) == 0) {
		rows = ws.ws_row;
		cols = ws.ws_col;
	}
	uint8_t b[4] = {(uint8_t)rows, (uint8_t)(rows >> 8), (uint8_t)cols, (uint8_t)(cols >> 8)};
	kis_frame_write(conn, KIS_F_RESIZE, 0, EXEC_ID, b, 4);
}

/* One DATA frame of stdout or stderr: counted, cut at the host's limit. */
static int take_output(int conn, const struct kis_call *c, const struct kis_frame *f,
		       struct kis_result *res, struct kis_call_out *out, struct kis_error **err)
{
	struct kis_stream *s = &res->streams[f->stream - 1];
	uint32_t take = f->len;
	if (c->output_limit) {
		uint64_t used = res->streams[0].bytes + res->streams[1].bytes;
		uint64_t room = used < c->output_limit ? c->output_limit - used : 0;
		if (take > room) {
			take = (uint32_t)room;
			s->truncated = true;
			if (!out->output_cut) {
				out->output_cut = true;
				send_signal(conn, SIGKILL);
			}
		}
	}
	s->bytes += take;
	if (c->io.capture) {
		if (kis_stream_append(s, f->payload, take) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot keep the output");
	} else {
		(void)kis_write_all(f->stream == 1 ? c->io.stdout_fd : c->io.stderr_fd, f->payload,
				    take);
	}
	return 0;
}

/* What a pipelined request may be: well below a socket's buffer
 * (net.core.wmem_default, 208 KiB on Linux), frames included. */
#define PIPELINE_MAX (32u * 1024u)

int kis_call_agent(int conn, const struct kis_call *c, struct kis_result *res,
		   struct kis_call_out *out, struct kis_error **err)
{
	memset(out, 0, sizeof(*out));
	const char *peer = c->peer ? c->peer : "the agent";
	struct kis_frame_reader rd;
	kis_frame_reader_init(&rd);
	struct kis_frame f;
	int r = -1;
	_cleanup_free_ char *body = NULL;
	int own_cpu = -1; /* the accounting file opened from cpu_path */
	uint8_t v[4];
	put_u32(v, KIS_PROTO_VERSION);
	if (c->hello_timeout_s) {
		struct timeval tv = {.tv_sec = c->hello_timeout_s};
		setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	/* Pipelined: the agent reads its frames in order (HELLO, then EXEC,
	 * then stdin), so the request can wait in the socket's buffer. Only
	 * what surely fits there, so that these writes never block on an
	 * agent that is not reading yet. */
	bool piped = false;
	if (c->pipeline) {
		body = kis_exec_req_to_json(c->req);
		piped = body && strlen(body) <= PIPELINE_MAX;
	}
	if (kis_frame_write(conn, KIS_F_HELLO, 0, 0, v, 4) < 0 ||
	    (piped && (kis_frame_write(conn, KIS_F_EXEC, 0, EXEC_ID, body, (uint32_t)strlen(body)) < 0 ||
		       (c->io.stdin_fd < 0 && kis_frame_write(conn, KIS_F_EOF, 0, EXEC_ID, NULL, 0) < 0)))) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "%s did not answer", peer);
		goto out;
	}
	/* The answer may take a while (crun starting the container, a VM's
	 * agent busy): wait for it and for a cancel together, so a signal
	 * during the handshake ends the run at once instead of after it. */
	kis_test_pause("handshake");
	for (;;) {
		struct pollfd hp[2] = {{.fd = conn, .events = POLLIN},
				       {.fd = c->cancel_fd, .events = POLLIN}};
		int hn = poll(hp, c->cancel_fd >= 0 ? 2 : 1,
			      c->hello_timeout_s ? (int)c->hello_timeout_s * 1000 : -1);
		if (hn < 0 && errno == EINTR)
			continue;
		if (hn > 0 && c->cancel_fd >= 0 && (hp[1].revents & POLLIN)) {
			uint8_t junk[16];
			(void)!read(c->cancel_fd, junk, sizeof(junk));
			out->cancelled = true;
			out->end = KIS_CALL_CANCELLED;
			r = 0;
			goto out;
		}
		break; /* readable, closed, or timed out: the read below says which */
	}
	if (kis_frame_read_blocking(&rd, conn, &f) != 1 || f.type != KIS_F_HELLO) {
		kis_error_set(err, KIS_E_INTERNAL, errno, "%s did not answer", peer);
		goto out;
	}
	if (c->hello_timeout_s) {
		struct timeval tv = {0};
		setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	if (c->on_hello && c->on_hello(c->hello_ctx, err) < 0) {
		out->sent = piped;
		goto out;
	}
	if (!piped) {
		free(body);
		body = kis_exec_req_to_json(c->req);
		if (!body ||
		    kis_frame_write(conn, KIS_F_EXEC, 0, EXEC_ID, body, (uint32_t)strlen(body)) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "cannot send the request to %s", peer);
			goto out;
		}
	}
	out->sent = true;
	uint64_t cpu0 = 0;
	/* a container's group exists once its runtime started it: by now */
	if (!c->has_cpu && c->cpu_path)
		own_cpu = open(c->cpu_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int cpu_fd = c->has_cpu ? c->cpu_fd : own_cpu;
	bool cpu_on = cpu_fd >= 0 && c->cpu_limit_ms && kis_cpuacct_read_ms(cpu_fd, &cpu0) == 0;
	int in_fd = c->io.stdin_fd;
	if (in_fd < 0 && !piped)
		kis_frame_write(conn, KIS_F_EOF, 0, EXEC_ID, NULL, 0);
	/* the read of the HELLO may have taken later frames with it (the
	 * agent answers a pipelined EXEC at once): look at them before
	 * waiting for more */
	bool buffered = rd.len > rd.pending || rd.eof;
	bool watching = c->watch != NULL; /* its fd may change (-1: no more) */
	for (;;) {
		struct pollfd pfd[6];
		int n = 0, i_in = -1, i_sig = -1, i_cancel = -1, i_rsz = -1, i_watch = -1;
		pfd[n++] = (struct pollfd){.fd = conn, .events = POLLIN};
		if (in_fd >= 0) {
			i_in = n;
			pfd[n++] = (struct pollfd){.fd = in_fd, .events = POLLIN};
		}
		if (c->signal_fd >= 0) {
			i_sig = n;
			pfd[n++] = (struct pollfd){.fd = c->signal_fd, .events = POLLIN};
		}
		if (c->cancel_fd >= 0 && !out->cancelled) {
			i_cancel = n;
			pfd[n++] = (struct pollfd){.fd = c->cancel_fd, .events = POLLIN};
		}
		if (c->resize_fd >= 0) {
			i_rsz = n;
			pfd[n++] = (struct pollfd){.fd = c->resize_fd, .events = POLLIN};
		}
		if (watching && c->watch->fd >= 0) {
			i_watch = n;
			pfd[n++] = (struct pollfd){.fd = c->watch->fd, .events = POLLIN};
		}
		int timeout = -1;
		if (c->deadline_ms) {
			uint64_t t = kis_monotonic_ms();
			if (t >= c->deadline_ms) {
				out->end = KIS_CALL_TIMEOUT;
				r = 0;
				goto out;
			}
			timeout = (int)(c->deadline_ms - t);
		}
		if (cpu_on && !out->cpu_cut) {
			/* sampled as the supervisor does its clocks: every 20 ms,
			 * more often as the budget runs out */
			uint64_t used = 0;
			if (kis_cpuacct_read_ms(cpu_fd, &used) == 0 && used >= cpu0)
				used -= cpu0;
			else
				used = 0;
			if (used >= c->cpu_limit_ms) {
				out->cpu_cut = true;
				send_signal(conn, SIGKILL);
			}
			int look = kis_cpu_next_look_ms(used, c->cpu_limit_ms, 20);
			if (timeout < 0 || timeout > look)
				timeout = look;
		}
		if (buffered)
			timeout = 0;
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			kis_error_set(err, KIS_E_INTERNAL, errno, "poll");
			goto out;
		}
		if (i_in >= 0 && pfd[i_in].revents) {
			uint8_t buf[32768];
			ssize_t k = RETRY_EINTR(read(in_fd, buf, sizeof(buf)));
			if (k > 0) {
				kis_frame_write(conn, KIS_F_DATA, 0, EXEC_ID, buf, (uint32_t)k);
			} else {
				kis_frame_write(conn, KIS_F_EOF, 0, EXEC_ID, NULL, 0);
				in_fd = -1;
			}
		}
		if (i_sig >= 0 && pfd[i_sig].revents) {
			uint8_t s;
			if (read(c->signal_fd, &s, 1) == 1)
				send_signal(conn, s);
		}
		if (i_cancel >= 0 && (pfd[i_cancel].revents & POLLIN)) {
			uint8_t junk[16];
			(void)!read(c->cancel_fd, junk, sizeof(junk));
			out->cancelled = true;
			send_signal(conn, SIGKILL);
		}
		if (i_rsz >= 0 && pfd[i_rsz].revents) {
			uint8_t junk[64];
			(void)!read(c->resize_fd, junk, sizeof(junk));
			send_resize(conn, c);
		}
		if (i_watch >= 0 && pfd[i_watch].revents) {
			int w = c->watch->on_ready(c->watch->ctx, c->watch->fd);
			if (w != 0)
				watching = false;
			if (w < 0 && !out->cancelled) {
				out->cancelled = true;
				send_signal(conn, SIGKILL);
			}
		}
		if (!pfd[0].revents && !buffered)
			continue;
		buffered = false;
		if (pfd[0].revents && kis_frame_reader_fill(&rd, conn) < 0) {
			kis_error_set(err, KIS_E_INTERNAL, errno, "lost %s", peer);
			goto out;
		}
		int st;
		while ((st = kis_frame_reader_next(&rd, &f)) == KIS_FRAME_OK) {
			if (f.type == KIS_F_DATA && (f.stream == 1 || f.stream == 2)) {
				if (take_output(conn, c, &f, res, out, err) < 0)
					goto out;
			} else if (f.type == KIS_F_EXIT) {
				if (kis_exit_from_json((const char *)f.payload, f.len, res, err) < 0)
					goto out;
				out->end = KIS_CALL_EXIT;
				r = 0;
				goto out;
			} else if (f.type == KIS_F_ERROR) {
				json_error_t je;
				json_t *e = json_loadb((const char *)f.payload, f.len, 0, &je);
				const char *msg = json_string_value(json_object_get(e, "message"));
				kis_error_set(err, KIS_E_INTERNAL, 0, "%s: %s", peer,
					      msg ? msg : "unknown error");
				json_decref(e);
				goto out;
			}
		}
		if (st < 0) {
			kis_error_set(err, KIS_E_PROTOCOL, 0, "%s sent a bad frame: %s", peer,
				      kis_frame_status_text(st));
			goto out;
		}
		if (rd.eof) {
			out->end = KIS_CALL_EOF;
			r = 0;
			goto out;
		}
	}
out:
	kis_closep(&own_cpu);
	kis_frame_reader_release(&rd);
	return r;
}
