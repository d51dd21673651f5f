/* SPDX-License-Identifier: MIT */
/* WASI preview1 over the interpreter: args, environ, clocks, random, the fd_*
 * functions, poll_oneoff, proc_exit, and the import table. Paths: wasi_fs.c;
 * the descriptor table both use: wasi_fd.c (this file names wasi_fs.c's
 * calls in its table, wasi_fs.c names nothing here).
 * Layouts and numbers follow WebAssembly/WASI phases/snapshot/witx. */
#include "wasm/wasi_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "wasm/internal.h"
#include "wasm/jit_tierup.h"

/* ---- args and environ: an array of pointers, then the NUL-terminated
 * strings one after another (wasi_snapshot_preview1.witx, args_get) ---- */

static int strv_sizes(char *const *v, const struct wasi_mem *m, uint32_t pn, uint32_t psz)
{
	uint64_t n = 0, sz = 0;
	for (; v && v[n]; n++)
		sz += strlen(v[n]) + 1;
	if (n > UINT32_MAX || sz > UINT32_MAX)
		return W_OVERFLOW;
	int e = put32(m, pn, (uint32_t)n);
	return e ? e : put32(m, psz, (uint32_t)sz);
}

static int strv_get(char *const *v, const struct wasi_mem *m, uint32_t pptrs, uint32_t pbuf)
{
	uint64_t off = pbuf;
	for (uint32_t i = 0; v && v[i]; i++) {
		size_t l = strlen(v[i]) + 1;
		uint8_t *d = gmem(m, off, l);
		if (!d)
			return W_FAULT;
		memcpy(d, v[i], l);
		TRY_W(put32(m, pptrs + 4 * i, (uint32_t)off));
		off += l;
	}
	return W_SUCCESS;
}

static int c_args_sizes_get(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	return strv_sizes(w->argv, m, (uint32_t)a[0], (uint32_t)a[1]);
}
static int c_args_get(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	return strv_get(w->argv, m, (uint32_t)a[0], (uint32_t)a[1]);
}
static int c_environ_sizes_get(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	return strv_sizes(w->envp, m, (uint32_t)a[0], (uint32_t)a[1]);
}
static int c_environ_get(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	return strv_get(w->envp, m, (uint32_t)a[0], (uint32_t)a[1]);
}

/* ---- clocks (clockid: realtime, monotonic, process and thread CPU) ---- */

static int clock_of(uint32_t id, clockid_t *c)
{
	static const clockid_t map[] = {CLOCK_REALTIME, CLOCK_MONOTONIC,
					CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID};
	if (id >= ARRAY_SIZE(map))
		return W_INVAL;
	*c = map[id];
	return W_SUCCESS;
}

static int c_clock_res_get(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	clockid_t c;
	struct timespec ts;
	TRY_W(clock_of((uint32_t)a[0], &c));
	if (clock_getres(c, &ts) < 0)
		return wasi_errno(errno);
	return put64(m, (uint32_t)a[1], ts_ns(ts));
}

static int c_clock_time_get(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	clockid_t c;
	struct timespec ts;
	TRY_W(clock_of((uint32_t)a[0], &c));
	if (clock_gettime(c, &ts) < 0)
		return wasi_errno(errno);
	return put64(m, (uint32_t)a[2], ts_ns(ts));
}

static int c_random_get(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	uint8_t *p = gmem(m, (uint32_t)a[0], (uint32_t)a[1]);
	if (!p)
		return W_FAULT;
	size_t n = (uint32_t)a[1];
	while (n > 0) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return wasi_errno(errno);
		}
		p += r;
		n -= (size_t)r;
	}
	return W_SUCCESS;
}

/* ---- descriptors ---- */

/* Gather a guest iovec array (8 bytes each: buf@0 len@4) into host iovecs,
 * checking every buffer against memory. */
#define MAX_IOV 64
static int iovecs(const struct wasi_mem *m, uint32_t ptr, uint32_t n, struct iovec *iov,
		  int *cnt)
{
	if (n > MAX_IOV)
		n = MAX_IOV; /* a short transfer, which the ABI allows */
	const uint8_t *v = gmem(m, ptr, (uint64_t)n * 8);
	if (!v)
		return W_FAULT;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t b = ld32(v + 8 * i), l = ld32(v + 8 * i + 4);
		uint8_t *p = gmem(m, b, l);
		if (!p)
			return W_FAULT;
		iov[i] = (struct iovec){.iov_base = p, .iov_len = l};
	}
	*cnt = (int)n;
	return W_SUCCESS;
}

static int rw(struct kis_wasi *w, const struct wasi_mem *m, uint32_t fd, uint32_t iovp,
	      uint32_t n, bool write, bool positioned, uint64_t off, uint32_t outp)
{
	int e = W_BADF;
	uint64_t need = write ? R_FD_WRITE : R_FD_READ;
	if (positioned)
		need |= R_FD_SEEK;
	/* read(2) and pread(2) of a directory are EISDIR, whatever rights it
	 * holds (a directory never holds fd_read, and the rights check would
	 * answer NOTCAPABLE first). A write to one keeps the rights' answer:
	 * no directory is open for writing, EBADF in read(2)'s terms, which is
	 * what wasi-libc makes of NOTCAPABLE. */
	struct wasi_fd *f = wasi_fd_get(w, fd, 0, &e);
	if (f && !write && f->type == FT_DIRECTORY)
		return W_ISDIR;
	f = f ? wasi_fd_get(w, fd, need, &e) : NULL;
	if (!f)
		return e;
	if (!gmem(m, outp, 4))
		return W_FAULT;
	struct iovec iov[MAX_IOV];
	int cnt = 0;
	TRY_W(iovecs(m, iovp, n, iov, &cnt));
	if (positioned && off > INT64_MAX)
		return W_INVAL;
	ssize_t r;
	if (write)
		r = positioned ? pwritev(f->host, iov, cnt, (off_t)off) : writev(f->host, iov, cnt);
	else
		r = positioned ? preadv(f->host, iov, cnt, (off_t)off) : readv(f->host, iov, cnt);
	if (r < 0)
		return wasi_errno(errno);
	return put32(m, outp, (uint32_t)r);
}

static int c_fd_read(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	return rw(w, m, (uint32_t)a[0], (uint32_t)a[1], (uint32_t)a[2], false, false, 0,
		  (uint32_t)a[3]);
}
static int c_fd_write(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	return rw(w, m, (uint32_t)a[0], (uint32_t)a[1], (uint32_t)a[2], true, false, 0,
		  (uint32_t)a[3]);
}
static int c_fd_pread(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	return rw(w, m, (uint32_t)a[0], (uint32_t)a[1], (uint32_t)a[2], false, true, a[3],
		  (uint32_t)a[4]);
}
static int c_fd_pwrite(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	return rw(w, m, (uint32_t)a[0], (uint32_t)a[1], (uint32_t)a[2], true, true, a[3],
		  (uint32_t)a[4]);
}

static int c_fd_seek(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	uint32_t whence = (uint32_t)a[2];
	int64_t off = (int64_t)a[1];
	/* fd_seek(0, CUR) is how libc asks for the position: fd_tell suffices. */
	uint64_t need = (off == 0 && whence == 1) ? R_FD_TELL : R_FD_SEEK;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], need, &e);
	if (!f && e == W_NOTCAPABLE && need == R_FD_TELL)
		f = wasi_fd_get(w, (uint32_t)a[0], R_FD_SEEK, &e);
	if (!f)
		return e;
	static const int wh[] = {SEEK_SET, SEEK_CUR, SEEK_END};
	if (whence > 2)
		return W_INVAL;
	if (!gmem(m, (uint32_t)a[3], 8))
		return W_FAULT;
	off_t r = lseek(f->host, (off_t)off, wh[whence]);
	if (r < 0)
		return wasi_errno(errno);
	return put64(m, (uint32_t)a[3], (uint64_t)r);
}

static int c_fd_tell(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], R_FD_TELL, &e);
	if (!f)
		return e;
	off_t r = lseek(f->host, 0, SEEK_CUR);
	if (r < 0)
		return wasi_errno(errno);
	return put64(m, (uint32_t)a[1], (uint64_t)r);
}

static int c_fd_close(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], 0, &e);
	if (!f)
		return e;
	/* The table is the module's own: closing the preopen (or stdio)
	 * loses the module's capability and nothing else (the suite's
	 * close_preopen; wasmtime and WAMR do the same). The caller's stdio
	 * descriptors stay open on the host. */
	if (!f->stdio)
		close(f->host);
	memset(f, 0, sizeof(*f));
	return W_SUCCESS;
}

static int c_fd_renumber(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	uint32_t from = (uint32_t)a[0], to = (uint32_t)a[1];
	/* Both must be open (fd_renumber: "atomically replace"); either may be
	 * the preopen, which then moves or is replaced like any other entry
	 * (the suite's overwrite_preopen). */
	struct wasi_fd *f = wasi_fd_get(w, from, 0, &e), *t = wasi_fd_get(w, to, 0, &e);
	if (!f || !t)
		return W_BADF;
	if (from == to)
		return W_SUCCESS;
	if (!t->stdio)
		close(t->host);
	*t = *f;
	memset(f, 0, sizeof(*f));
	return W_SUCCESS;
}

static int c_fd_sync(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], R_FD_SYNC, &e);
	if (!f)
		return e;
	return fsync(f->host) < 0 ? wasi_errno(errno) : W_SUCCESS;
}

static int c_fd_datasync(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], R_FD_DATASYNC, &e);
	if (!f)
		return e;
	return fdatasync(f->host) < 0 ? wasi_errno(errno) : W_SUCCESS;
}

static int c_fd_advise(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], R_FD_ADVISE, &e);
	if (!f)
		return e;
	static const int adv[] = {POSIX_FADV_NORMAL, POSIX_FADV_SEQUENTIAL, POSIX_FADV_RANDOM,
				  POSIX_FADV_WILLNEED, POSIX_FADV_DONTNEED, POSIX_FADV_NOREUSE};
	uint32_t advice = (uint32_t)a[3];
	if (advice >= ARRAY_SIZE(adv) || a[1] > INT64_MAX || a[2] > INT64_MAX)
		return W_INVAL;
	if (f->type == FT_DIRECTORY)
		return W_BADF;
	int r = posix_fadvise(f->host, (off_t)a[1], (off_t)a[2], adv[advice]);
	return r == ESPIPE ? W_SUCCESS : wasi_errno(r); /* advice is advice */
}

static int c_fd_allocate(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], R_FD_ALLOCATE, &e);
	if (!f)
		return e;
	if (a[1] > INT64_MAX || a[2] > INT64_MAX || a[1] + a[2] > INT64_MAX)
		return W_INVAL;
	int r = posix_fallocate(f->host, (off_t)a[1], (off_t)a[2]);
	return wasi_errno(r);
}

/* fdstat (24 bytes): filetype@0 u8, flags@2 u16, rights_base@8,
 * rights_inheriting@16. */
static int c_fd_fdstat_get(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], 0, &e);
	if (!f)
		return e;
	uint8_t *p = gmem(m, (uint32_t)a[1], 24);
	if (!p)
		return W_FAULT;
	int fl = fcntl(f->host, F_GETFL);
	uint16_t flags = 0;
	if (fl >= 0) {
		if (fl & O_APPEND)
			flags |= FDFL_APPEND;
		if (fl & O_NONBLOCK)
			flags |= FDFL_NONBLOCK;
		if ((fl & O_SYNC) == O_SYNC)
			flags |= FDFL_SYNC;
		else if (fl & O_DSYNC)
			flags |= FDFL_DSYNC;
	}
	memset(p, 0, 24);
	p[0] = f->type;
	st16(p + 2, flags);
	st64(p + 8, f->base);
	st64(p + 16, f->inheriting);
	return W_SUCCESS;
}

static int c_fd_fdstat_set_flags(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], R_FD_FDSTAT_SET_FLAGS, &e);
	if (!f)
		return e;
	uint32_t want = (uint32_t)a[1];
	/* fcntl(F_SETFL) changes only O_APPEND and O_NONBLOCK on Linux
	 * (fcntl(2)): the sync flags cannot be set after open. */
	if (want & (FDFL_DSYNC | FDFL_RSYNC | FDFL_SYNC))
		return W_NOTSUP;
	int fl = fcntl(f->host, F_GETFL);
	if (fl < 0)
		return wasi_errno(errno);
	fl &= ~(O_APPEND | O_NONBLOCK);
	if (want & FDFL_APPEND)
		fl |= O_APPEND;
	if (want & FDFL_NONBLOCK)
		fl |= O_NONBLOCK;
	/* The caller's own stdio descriptors are shared with the supervisor's
	 * pipes; changing their flags is harmless there. */
	return fcntl(f->host, F_SETFL, fl) < 0 ? wasi_errno(errno) : W_SUCCESS;
}

static int c_fd_fdstat_set_rights(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], 0, &e);
	if (!f)
		return e;
	/* Rights only narrow (fd_fdstat_set_rights: "can only remove rights"). */
	if ((a[1] & ~f->base) || (a[2] & ~f->inheriting))
		return W_NOTCAPABLE;
	f->base = a[1];
	f->inheriting = a[2];
	return W_SUCCESS;
}

static int c_fd_filestat_get(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], R_FD_FILESTAT_GET, &e);
	if (!f)
		return e;
	uint8_t *p = gmem(m, (uint32_t)a[1], 64);
	if (!p)
		return W_FAULT;
	struct stat st;
	if (fstat(f->host, &st) < 0)
		return wasi_errno(errno);
	wasi_filestat_put(p, &st);
	return W_SUCCESS;
}

static int c_fd_filestat_set_size(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], R_FD_FILESTAT_SET_SIZE, &e);
	if (!f)
		return e;
	if (a[1] > INT64_MAX)
		return W_INVAL;
	return ftruncate(f->host, (off_t)a[1]) < 0 ? wasi_errno(errno) : W_SUCCESS;
}

static int c_fd_filestat_set_times(struct kis_wasi *w, const struct wasi_mem *m,
				   const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], R_FD_FILESTAT_SET_TIMES, &e);
	if (!f)
		return e;
	struct timespec ts[2];
	TRY_W(wasi_times(a[1], a[2], (uint32_t)a[3], ts));
	return futimens(f->host, ts) < 0 ? wasi_errno(errno) : W_SUCCESS;
}

/* prestat (8 bytes): tag@0 (0: dir), name length@4. */
static int c_fd_prestat_get(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], 0, &e);
	if (!f)
		return e;
	if (!f->preopen)
		return W_BADF; /* how libc learns where the preopens end */
	uint8_t *p = gmem(m, (uint32_t)a[1], 8);
	if (!p)
		return W_FAULT;
	memset(p, 0, 8);
	st32(p + 4, (uint32_t)strlen(f->name ? f->name : w->preopen_name));
	return W_SUCCESS;
}

static int c_fd_prestat_dir_name(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	struct wasi_fd *f = wasi_fd_get(w, (uint32_t)a[0], 0, &e);
	if (!f)
		return e;
	if (!f->preopen)
		return W_BADF;
	const char *name = f->name ? f->name : w->preopen_name;
	size_t l = strlen(name);
	if ((uint32_t)a[2] < l)
		return W_NAMETOOLONG;
	uint8_t *p = gmem(m, (uint32_t)a[1], l);
	if (!p)
		return W_FAULT;
	memcpy(p, name, l);
	return W_SUCCESS;
}

/* ---- poll_oneoff: subscription (48 bytes): userdata@0, tag@8, then
 * clock {id@16, timeout@24, precision@32, flags@40} or fd@16; event (32
 * bytes): userdata@0, error@8 u16, type@10 u8, nbytes@16, flags@24 u16. ---- */

#define MAX_SUBS 64
static int c_poll_oneoff(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	uint32_t nsubs = (uint32_t)a[2];
	if (nsubs == 0)
		return W_INVAL;
	if (nsubs > MAX_SUBS)
		return W_NOTSUP;
	const uint8_t *in = gmem(m, (uint32_t)a[0], (uint64_t)nsubs * 48);
	uint8_t *out = gmem(m, (uint32_t)a[1], (uint64_t)nsubs * 32);
	if (!in || !out || !gmem(m, (uint32_t)a[3], 4))
		return W_FAULT;
	struct pollfd pfd[MAX_SUBS];
	int pidx[MAX_SUBS];
	uint16_t perr[MAX_SUBS];
	nfds_t np = 0;
	int64_t timeout_ns = -1; /* -1: no clock, wait forever */
	struct timespec now;
	for (uint32_t i = 0; i < nsubs; i++) {
		const uint8_t *s = in + 48 * i;
		uint8_t tag = s[8];
		pidx[i] = -1;
		perr[i] = 0;
		if (tag == 0) {
			clockid_t c;
			uint64_t t = ld64(s + 24);
			int64_t rel;
			if (clock_of(ld32(s + 16), &c) != W_SUCCESS) {
				perr[i] = W_INVAL;
				timeout_ns = 0;
				continue;
			}
			if (ld32(s + 40) & 1) { /* subclockflags.subscription_clock_abstime */
				clock_gettime(c, &now);
				rel = t > ts_ns(now) ? (int64_t)(t - ts_ns(now)) : 0;
			} else {
				rel = t > INT64_MAX ? INT64_MAX : (int64_t)t;
			}
			if (timeout_ns < 0 || rel < timeout_ns)
				timeout_ns = rel;
		} else if (tag == 1 || tag == 2) {
			int e = W_BADF;
			struct wasi_fd *f = wasi_fd_get(w, ld32(s + 16), R_POLL_FD_READWRITE, &e);
			if (!f) {
				perr[i] = (uint16_t)e;
				timeout_ns = 0;
				continue;
			}
			pidx[i] = (int)np;
			pfd[np++] = (struct pollfd){.fd = f->host,
						    .events = tag == 1 ? POLLIN : POLLOUT};
		} else {
			return W_INVAL;
		}
	}
	struct timespec tmo, *tp = NULL;
	if (timeout_ns >= 0) {
		tmo = (struct timespec){.tv_sec = timeout_ns / 1000000000,
					.tv_nsec = timeout_ns % 1000000000};
		tp = &tmo;
	}
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int pr = ppoll(np ? pfd : NULL, np, tp, NULL);
	if (pr < 0 && errno != EINTR)
		return wasi_errno(errno);
	/* A signal (the deadline's interrupt) ends the wait with no events:
	 * the interpreter then stops the module at its next check. */
	bool interrupted = pr < 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t slept = (int64_t)(ts_ns(now) - ts_ns(t0));
	uint32_t nev = 0;
	for (uint32_t i = 0; i < nsubs && !interrupted; i++) {
		const uint8_t *s = in + 48 * i;
		uint8_t tag = s[8];
		uint8_t *ev = out + 32 * nev;
		bool fire = perr[i] != 0;
		uint64_t nbytes = 0;
		uint16_t flags = 0;
		if (!fire && tag == 0)
			fire = pr == 0 && slept >= timeout_ns;
		else if (!fire && pidx[i] >= 0) {
			short re = pfd[pidx[i]].revents;
			fire = re != 0;
			if (re & POLLHUP)
				flags |= 1; /* eventrwflags.fd_readwrite_hangup */
			if (re & (POLLIN | POLLOUT))
				nbytes = 1; /* at least one byte can move */
		}
		if (!fire)
			continue;
		memset(ev, 0, 32);
		st64(ev, ld64(s));
		st16(ev + 8, perr[i]);
		ev[10] = tag;
		st64(ev + 16, nbytes);
		st16(ev + 24, flags);
		nev++;
	}
	return put32(m, (uint32_t)a[3], nev);
}

static int c_sched_yield(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	sched_yield();
	return W_SUCCESS;
}

/* No signals to raise, no sockets to use: the module holds no capability
 * for either (proc_raise is NOSYS as in the reference implementations;
 * sock_* on a descriptor that is not a socket is NOTSOCK, on none BADF). */
static int c_proc_raise(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	return W_NOSYS;
}

static int c_sock(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	return wasi_fd_get(w, (uint32_t)a[0], 0, &e) ? W_NOTSOCK : e;
}

static int c_sock_accept(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a)
{
	int e = W_BADF;
	return wasi_fd_get(w, (uint32_t)a[0], R_SOCK_ACCEPT, &e) ? W_NOTSOCK : e;
}

/* ---- the import table ---- */

struct wasi_def {
	const char *name;
	const char *params; /* i: i32, I: i64 */
	wasi_call_fn fn;
};

static const struct wasi_def defs[] = {
	{"args_get", "ii", c_args_get},
	{"args_sizes_get", "ii", c_args_sizes_get},
	{"environ_get", "ii", c_environ_get},
	{"environ_sizes_get", "ii", c_environ_sizes_get},
	{"clock_res_get", "ii", c_clock_res_get},
	{"clock_time_get", "iIi", c_clock_time_get},
	{"fd_advise", "iIIi", c_fd_advise},
	{"fd_allocate", "iII", c_fd_allocate},
	{"fd_close", "i", c_fd_close},
	{"fd_datasync", "i", c_fd_datasync},
	{"fd_fdstat_get", "ii", c_fd_fdstat_get},
	{"fd_fdstat_set_flags", "ii", c_fd_fdstat_set_flags},
	{"fd_fdstat_set_rights", "iII", c_fd_fdstat_set_rights},
	{"fd_filestat_get", "ii", c_fd_filestat_get},
	{"fd_filestat_set_size", "iI", c_fd_filestat_set_size},
	{"fd_filestat_set_times", "iIIi", c_fd_filestat_set_times},
	{"fd_pread", "iiiIi", c_fd_pread},
	{"fd_prestat_get", "ii", c_fd_prestat_get},
	{"fd_prestat_dir_name", "iii", c_fd_prestat_dir_name},
	{"fd_pwrite", "iiiIi", c_fd_pwrite},
	{"fd_read", "iiii", c_fd_read},
	{"fd_readdir", "iiiIi", wasi_fd_readdir},
	{"fd_renumber", "ii", c_fd_renumber},
	{"fd_seek", "iIii", c_fd_seek},
	{"fd_sync", "i", c_fd_sync},
	{"fd_tell", "ii", c_fd_tell},
	{"fd_write", "iiii", c_fd_write},
	{"path_create_directory", "iii", wasi_path_create_directory},
	{"path_filestat_get", "iiiii", wasi_path_filestat_get},
	{"path_filestat_set_times", "iiiiIIi", wasi_path_filestat_set_times},
	{"path_link", "iiiiiii", wasi_path_link},
	{"path_open", "iiiiiIIii", wasi_path_open},
	{"path_readlink", "iiiiii", wasi_path_readlink},
	{"path_remove_directory", "iii", wasi_path_remove_directory},
	{"path_rename", "iiiiii", wasi_path_rename},
	{"path_symlink", "iiiii", wasi_path_symlink},
	{"path_unlink_file", "iii", wasi_path_unlink_file},
	{"poll_oneoff", "iiii", c_poll_oneoff},
	{"proc_exit", "i", NULL},
	{"proc_raise", "i", c_proc_raise},
	{"sched_yield", "", c_sched_yield},
	{"random_get", "ii", c_random_get},
	{"sock_accept", "iii", c_sock_accept},
	{"sock_recv", "iiiiii", c_sock},
	{"sock_send", "iiiii", c_sock},
	{"sock_shutdown", "ii", c_sock},
};

_Static_assert(ARRAY_SIZE(defs) <= 64, "the binding table holds 64 functions");

static enum kis_wasm_trap host_call(void *user, struct kis_wasm_instance *caller,
				    const kis_wasm_slot *args, kis_wasm_slot *results)
{
	struct wasi_binding *b = user;
	struct kis_wasi *w = b->w;
	if (!b->def->fn) { /* proc_exit: unwinds the module with a host trap */
		w->exited = true;
		w->exit_code = (int)(uint32_t)args[0];
		return KIS_WASM_TRAP_HOST;
	}
	struct wasi_mem m = {0};
	struct kis_wasm_memory *mem = caller ? kis_wasm_instance_memory(caller) : NULL;
	if (mem)
		m.base = kis_wasm_memory_data(mem, &m.size);
	int e = b->def->fn(w, &m, args);
	results[0] = (uint32_t)e;
	return KIS_WASM_OK;
}

int kis_wasi_bind(struct kis_wasi *w, struct kis_wasm_store *s)
{
	static const uint8_t i32 = KIS_WASM_I32;
	for (size_t i = 0; i < ARRAY_SIZE(defs); i++) {
		uint8_t params[16];
		uint32_t np = 0;
		for (const char *c = defs[i].params; *c; c++)
			params[np++] = *c == 'I' ? KIS_WASM_I64 : KIS_WASM_I32;
		w->bindings[i] = (struct wasi_binding){.w = w, .def = &defs[i]};
		w->funcs[i] = kis_wasm_host_func_new(s, params, np, &i32, defs[i].fn ? 1 : 0,
						     host_call, &w->bindings[i]);
		if (!w->funcs[i])
			return -1;
	}
	w->nfuncs = ARRAY_SIZE(defs);
	return 0;
}

int kis_wasi_resolve(void *user, const char *module, const char *name,
		     enum kis_wasm_extern_kind kind, struct kis_wasm_extern *out)
{
	struct kis_wasi *w = user;
	if (strcmp(module, "wasi_snapshot_preview1") || kind != KIS_WASM_EXTERN_FUNC)
		return -1;
	for (size_t i = 0; i < w->nfuncs; i++)
		if (!strcmp(defs[i].name, name)) {
			out->kind = KIS_WASM_EXTERN_FUNC;
			out->u.func = w->funcs[i];
			return 0;
		}
	return -1;
}

/* ---- context ---- */

struct kis_wasi *kis_wasi_new(const struct kis_wasi_config *cfg)
{
	struct kis_wasi *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	if (wasi_fds_init(w, cfg) < 0) {
		free(w);
		return NULL;
	}
	w->argv = cfg->argv;
	w->envp = cfg->envp;
	w->preopen_name = cfg->preopen_name ? cfg->preopen_name : "/";
	return w;
}

void kis_wasi_free(struct kis_wasi *w)
{
	if (!w)
		return;
	wasi_fds_release(w);
	kis_wasm_module_free(w->mod);
	free(w);
}

bool kis_wasi_is_module(const uint8_t *b, size_t len)
{
	return len >= 4 && !memcmp(b, "\0asm", 4);
}

int kis_wasi_run_module(struct kis_wasi *w, struct kis_wasm_store *s, const uint8_t *bytes,
			size_t len, uint64_t memory_cap, struct kis_wasi_outcome *out)
{
	memset(out, 0, sizeof(*out));
	struct kis_error *err = NULL;
	struct kis_wasm_module *mod = NULL;
	/* machine code from the cache for these bytes: the bodies' validation
	 * waits until something else needs them (internal.h) */
	int loaded = s->compile && s->cached ? wasm_module_load_for_cache(bytes, len, &mod, &err)
					     : kis_wasm_module_load(bytes, len, &mod, &err);
	if (loaded < 0) {
		snprintf(out->message, sizeof(out->message), "%s",
			 err && err->message ? err->message : "cannot load the module");
		kis_error_free(err);
		return -1;
	}
	w->mod = mod;
	struct kis_wasm_instance *inst = NULL;
	enum kis_wasm_trap trap = KIS_WASM_OK;
	int rc = -1;
	if (kis_wasi_bind(w, s) < 0) {
		snprintf(out->message, sizeof(out->message), "out of memory binding WASI");
		goto done;
	}
	if (kis_wasm_instantiate(s, mod, kis_wasi_resolve, w, &inst, &trap, &err) < 0) {
		if (trap != KIS_WASM_OK && !w->exited) {
			out->trap = trap; /* the start function trapped: the module ran */
			rc = 0;
		} else if (w->exited) {
			rc = 0;
		} else {
			snprintf(out->message, sizeof(out->message), "%s",
				 err && err->message ? err->message : "cannot link the module");
		}
		kis_error_free(err);
		goto finish;
	}
	w->inst = inst;
	struct kis_wasm_memory *mem = kis_wasm_instance_memory(inst);
	if (mem && memory_cap) {
		/* Lower the maximum of memory 0: memory.grow past it then returns
		 * -1 (spec 4.4.7.11, growth may fail). The interpreter's limits
		 * live in internal.h (wasm_memory_grow reads lim.max). */
		uint64_t pages = memory_cap / 65536;
		if (!mem->lim.has_max || mem->lim.max > pages) {
			mem->lim.has_max = true;
			mem->lim.max = pages;
		}
		out->memory_cap = memory_cap;
		if (mem->size > memory_cap) {
			out->trap = KIS_WASM_TRAP_HOST;
			snprintf(out->message, sizeof(out->message),
				 "the module's initial memory (%llu bytes) is above limits.memory_bytes",
				 (unsigned long long)mem->size);
			rc = 0;
			goto finish;
		}
	}
	struct kis_wasm_extern ex;
	if (kis_wasm_instance_export(inst, "_start", &ex) < 0 || ex.kind != KIS_WASM_EXTERN_FUNC) {
		snprintf(out->message, sizeof(out->message), "the module exports no _start function");
		goto done;
	}
	const uint8_t *pt, *rt;
	uint32_t np, nr;
	kis_wasm_func_type(ex.u.func, &pt, &np, &rt, &nr);
	if (np || nr) {
		snprintf(out->message, sizeof(out->message), "_start must take and return nothing");
		goto done;
	}
	trap = kis_wasm_call(s, ex.u.func, NULL, NULL);
	/* however the run ended (returned, proc_exit, a trap, interrupted):
	 * the interpreter's profile for tier-up (jit_tierup.h) */
	wasm_instance_profile_out(inst);
	rc = 0;
	if (trap == KIS_WASM_OK) {
		out->exited = true;
		out->exit_code = 0;
	} else {
		out->trap = trap;
	}
finish:
	if (w->exited) {
		out->exited = true;
		out->exit_code = w->exit_code;
		out->trap = KIS_WASM_OK;
	}
	if (inst && (mem = kis_wasm_instance_memory(inst)) != NULL)
		kis_wasm_memory_data(mem, &out->memory_bytes);
done:
	/* The module outlives the store's instances: kis_wasi_free frees it,
	 * after the caller has freed the store. */
	return rc;
}
