/* SPDX-License-Identifier: MIT */
/* The WASI descriptor table (its making, lookup, allocation and release)
 * and the host facts both halves of WASI turn into WASI's words (errno,
 * file type, filestat, times): wasi.c and wasi_fs.c stand on this file.
 * Layouts and numbers follow WebAssembly/WASI phases/snapshot/witx. */
#include "wasm/wasi_impl.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int wasi_errno(int e)
{
	switch (e) {
	case 0: return W_SUCCESS;
	case E2BIG: return W_2BIG;
	case EACCES: return W_ACCES;
	case EAGAIN: return W_AGAIN;
	case EBADF: return W_BADF;
	case EBUSY: return W_BUSY;
	case EDQUOT: return W_DQUOT;
	case EEXIST: return W_EXIST;
	case EFAULT: return W_FAULT;
	case EFBIG: return W_FBIG;
	case EINTR: return W_INTR;
	case EINVAL: return W_INVAL;
	case EIO: return W_IO;
	case EISDIR: return W_ISDIR;
	case ELOOP: return W_LOOP;
	case EMFILE: return W_MFILE;
	case EMLINK: return W_MLINK;
	case ENAMETOOLONG: return W_NAMETOOLONG;
	case ENFILE: return W_NFILE;
	case ENODEV: return W_NODEV;
	case ENOENT: return W_NOENT;
	case ENOMEM: return W_NOMEM;
	case ENOSPC: return W_NOSPC;
	case ENOSYS: return W_NOSYS;
	case ENOTDIR: return W_NOTDIR;
	case ENOTEMPTY: return W_NOTEMPTY;
	case ENOTSUP: return W_NOTSUP;
	case ENOTTY: return W_NOTTY;
	case ENXIO: return W_NXIO;
	case EOVERFLOW: return W_OVERFLOW;
	case EPERM: return W_PERM;
	case EPIPE: return W_PIPE;
	case ERANGE: return W_RANGE;
	case EROFS: return W_ROFS;
	case ESPIPE: return W_SPIPE;
	case ETXTBSY: return W_TXTBSY;
	/* openat2(2): RESOLVE_BENEATH reports an escape as EXDEV. */
	case EXDEV: return W_NOTCAPABLE;
	default: return W_IO;
	}
}

uint8_t wasi_filetype(unsigned mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return FT_REGULAR_FILE;
	case S_IFDIR: return FT_DIRECTORY;
	case S_IFLNK: return FT_SYMBOLIC_LINK;
	case S_IFCHR: return FT_CHARACTER_DEVICE;
	case S_IFBLK: return FT_BLOCK_DEVICE;
	case S_IFSOCK: return FT_SOCKET_STREAM;
	default: return FT_UNKNOWN; /* FIFOs have no WASI type */
	}
}

struct wasi_fd *wasi_fd_get(struct kis_wasi *w, uint32_t fd, uint64_t need, int *werr)
{
	if (fd >= w->nfds || !w->fds[fd].used) {
		*werr = W_BADF;
		return NULL;
	}
	struct wasi_fd *f = &w->fds[fd];
	if ((f->base & need) != need) {
		*werr = W_NOTCAPABLE;
		return NULL;
	}
	return f;
}

int wasi_fd_alloc(struct kis_wasi *w, uint32_t *out)
{
	for (uint32_t i = 3; i < w->nfds; i++)
		if (!w->fds[i].used) {
			*out = i;
			return W_SUCCESS;
		}
	return W_MFILE;
}

/* filestat (64 bytes): dev@0 ino@8 filetype@16 nlink@24 size@32 atim@40
 * mtim@48 ctim@56. */
void wasi_filestat_put(uint8_t *p, const void *stp)
{
	const struct stat *st = stp;
	memset(p, 0, 64);
	st64(p, (uint64_t)st->st_dev);
	st64(p + 8, (uint64_t)st->st_ino);
	p[16] = wasi_filetype(st->st_mode);
	st64(p + 24, (uint64_t)st->st_nlink);
	st64(p + 32, (uint64_t)st->st_size);
	st64(p + 40, ts_ns(st->st_atim));
	st64(p + 48, ts_ns(st->st_mtim));
	st64(p + 56, ts_ns(st->st_ctim));
}

int wasi_times(uint64_t atim, uint64_t mtim, uint32_t fst, void *ts2)
{
	struct timespec *ts = ts2;
	if (((fst & FST_ATIM) && (fst & FST_ATIM_NOW)) || ((fst & FST_MTIM) && (fst & FST_MTIM_NOW)) ||
	    (fst & ~0xfu))
		return W_INVAL;
	ts[0] = (struct timespec){.tv_sec = (time_t)(atim / 1000000000ull),
				  .tv_nsec = (long)(atim % 1000000000ull)};
	ts[1] = (struct timespec){.tv_sec = (time_t)(mtim / 1000000000ull),
				  .tv_nsec = (long)(mtim % 1000000000ull)};
	if (fst & FST_ATIM_NOW)
		ts[0].tv_nsec = UTIME_NOW;
	else if (!(fst & FST_ATIM))
		ts[0].tv_nsec = UTIME_OMIT;
	if (fst & FST_MTIM_NOW)
		ts[1].tv_nsec = UTIME_NOW;
	else if (!(fst & FST_MTIM))
		ts[1].tv_nsec = UTIME_OMIT;
	return W_SUCCESS;
}

/* ---- the table's life ---- */

static void init_stdio(struct wasi_fd *f, int host, uint64_t rights)
{
	struct stat st;
	f->used = true;
	f->stdio = true;
	f->host = host;
	f->type = fstat(host, &st) == 0 ? wasi_filetype(st.st_mode) : FT_UNKNOWN;
	f->base = rights;
	if (f->type == FT_REGULAR_FILE)
		f->base |= R_FD_SEEK | R_FD_TELL;
	f->inheriting = 0;
}

int wasi_fds_init(struct kis_wasi *w, const struct kis_wasi_config *cfg)
{
	w->nfds = cfg->max_fds < 4 + cfg->n_extra ? 4 + (uint32_t)cfg->n_extra : cfg->max_fds;
	/* A mapping of its own, zero already (mmap(2)): calloc memset the
	 * whole table (1024 descriptors: 12 pages, each a fault here, ~12 us
	 * under this hypervisor), of which a module uses the first entries */
	w->fds_bytes = (size_t)w->nfds * sizeof(*w->fds);
	w->fds = mmap(NULL, w->fds_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (w->fds == MAP_FAILED) {
		w->fds = NULL;
		return -1;
	}
	init_stdio(&w->fds[0], cfg->stdin_fd, R_STDIO_BASE & ~R_FD_WRITE);
	init_stdio(&w->fds[1], cfg->stdout_fd, R_STDIO_BASE & ~R_FD_READ);
	init_stdio(&w->fds[2], cfg->stderr_fd, R_STDIO_BASE & ~R_FD_READ);
	if (cfg->preopen_fd >= 0) {
		struct wasi_fd *p = &w->fds[3];
		p->used = true;
		p->preopen = true;
		p->host = cfg->preopen_fd;
		p->type = FT_DIRECTORY;
		p->base = R_DIR_BASE;
		p->inheriting = R_DIR_BASE | R_FILE_BASE;
	}
	for (size_t i = 0; cfg->preopen_fd >= 0 && i < cfg->n_extra; i++) {
		struct wasi_fd *p = &w->fds[4 + i];
		uint64_t drop = cfg->extra[i].ro ? R_WRITES : 0;
		p->used = true;
		p->preopen = true;
		p->name = cfg->extra[i].name;
		p->host = cfg->extra[i].fd;
		p->type = FT_DIRECTORY;
		p->base = R_DIR_BASE & ~drop;
		p->inheriting = (R_DIR_BASE | R_FILE_BASE) & ~drop;
	}
	return 0;
}

void wasi_fds_release(struct kis_wasi *w)
{
	for (uint32_t i = 0; i < w->nfds; i++)
		if (w->fds[i].used && !w->fds[i].stdio)
			close(w->fds[i].host);
	munmap(w->fds, w->fds_bytes);
}
