/* SPDX-License-Identifier: MIT */
/* Internal to the WASI layer: the descriptor table, guest memory access
 * (every pointer checked in one place) and the ABI constants of preview1
 * (WebAssembly/WASI phases/snapshot/witx/typenames.witx). */
#ifndef KIS_WASM_WASI_IMPL_H
#define KIS_WASM_WASI_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "wasm/wasi.h"

/* errno (typenames.witx, `errno`): numbered by its position. */
enum {
	W_SUCCESS = 0, W_2BIG = 1, W_ACCES = 2, W_ADDRINUSE = 3, W_ADDRNOTAVAIL = 4,
	W_AFNOSUPPORT = 5, W_AGAIN = 6, W_ALREADY = 7, W_BADF = 8, W_BADMSG = 9, W_BUSY = 10,
	W_CANCELED = 11, W_CHILD = 12, W_CONNABORTED = 13, W_CONNREFUSED = 14, W_CONNRESET = 15,
	W_DEADLK = 16, W_DESTADDRREQ = 17, W_DOM = 18, W_DQUOT = 19, W_EXIST = 20, W_FAULT = 21,
	W_FBIG = 22, W_HOSTUNREACH = 23, W_IDRM = 24, W_ILSEQ = 25, W_INPROGRESS = 26, W_INTR = 27,
	W_INVAL = 28, W_IO = 29, W_ISCONN = 30, W_ISDIR = 31, W_LOOP = 32, W_MFILE = 33,
	W_MLINK = 34, W_MSGSIZE = 35, W_MULTIHOP = 36, W_NAMETOOLONG = 37, W_NETDOWN = 38,
	W_NETRESET = 39, W_NETUNREACH = 40, W_NFILE = 41, W_NOBUFS = 42, W_NODEV = 43,
	W_NOENT = 44, W_NOEXEC = 45, W_NOLCK = 46, W_NOLINK = 47, W_NOMEM = 48, W_NOMSG = 49,
	W_NOPROTOOPT = 50, W_NOSPC = 51, W_NOSYS = 52, W_NOTCONN = 53, W_NOTDIR = 54,
	W_NOTEMPTY = 55, W_NOTRECOVERABLE = 56, W_NOTSOCK = 57, W_NOTSUP = 58, W_NOTTY = 59,
	W_NXIO = 60, W_OVERFLOW = 61, W_OWNERDEAD = 62, W_PERM = 63, W_PIPE = 64, W_PROTO = 65,
	W_PROTONOSUPPORT = 66, W_PROTOTYPE = 67, W_RANGE = 68, W_ROFS = 69, W_SPIPE = 70,
	W_SRCH = 71, W_STALE = 72, W_TIMEDOUT = 73, W_TXTBSY = 74, W_XDEV = 75,
	W_NOTCAPABLE = 76,
};

/* rights (typenames.witx, `rights`): bit n is the n-th flag. */
#define R(n) (1ull << (n))
#define R_FD_DATASYNC R(0)
#define R_FD_READ R(1)
#define R_FD_SEEK R(2)
#define R_FD_FDSTAT_SET_FLAGS R(3)
#define R_FD_SYNC R(4)
#define R_FD_TELL R(5)
#define R_FD_WRITE R(6)
#define R_FD_ADVISE R(7)
#define R_FD_ALLOCATE R(8)
#define R_PATH_CREATE_DIRECTORY R(9)
#define R_PATH_CREATE_FILE R(10)
#define R_PATH_LINK_SOURCE R(11)
#define R_PATH_LINK_TARGET R(12)
#define R_PATH_OPEN R(13)
#define R_FD_READDIR R(14)
#define R_PATH_READLINK R(15)
#define R_PATH_RENAME_SOURCE R(16)
#define R_PATH_RENAME_TARGET R(17)
#define R_PATH_FILESTAT_GET R(18)
#define R_PATH_FILESTAT_SET_SIZE R(19)
#define R_PATH_FILESTAT_SET_TIMES R(20)
#define R_FD_FILESTAT_GET R(21)
#define R_FD_FILESTAT_SET_SIZE R(22)
#define R_FD_FILESTAT_SET_TIMES R(23)
#define R_PATH_SYMLINK R(24)
#define R_PATH_REMOVE_DIRECTORY R(25)
#define R_PATH_UNLINK_FILE R(26)
#define R_POLL_FD_READWRITE R(27)
#define R_SOCK_SHUTDOWN R(28)
#define R_SOCK_ACCEPT R(29)
#define R_ALL (R(30) - 1)

/* What a regular file and a directory can hold at most. */
#define R_FILE_BASE                                                                           \
	(R_FD_DATASYNC | R_FD_READ | R_FD_SEEK | R_FD_FDSTAT_SET_FLAGS | R_FD_SYNC | R_FD_TELL | \
	 R_FD_WRITE | R_FD_ADVISE | R_FD_ALLOCATE | R_FD_FILESTAT_GET | R_FD_FILESTAT_SET_SIZE | \
	 R_FD_FILESTAT_SET_TIMES | R_POLL_FD_READWRITE)
#define R_DIR_BASE                                                                             \
	(R_FD_FDSTAT_SET_FLAGS | R_FD_SYNC | R_FD_ADVISE | R_PATH_CREATE_DIRECTORY |             \
	 R_PATH_CREATE_FILE | R_PATH_LINK_SOURCE | R_PATH_LINK_TARGET | R_PATH_OPEN |            \
	 R_FD_READDIR | R_PATH_READLINK | R_PATH_RENAME_SOURCE | R_PATH_RENAME_TARGET |          \
	 R_PATH_FILESTAT_GET | R_PATH_FILESTAT_SET_SIZE | R_PATH_FILESTAT_SET_TIMES |            \
	 R_FD_FILESTAT_GET | R_FD_FILESTAT_SET_TIMES | R_PATH_SYMLINK | R_PATH_REMOVE_DIRECTORY | \
	 R_PATH_UNLINK_FILE)
/* The rights that change a file or a directory: a read-only preopen and
 * all opened beneath it hold none of them. */
#define R_WRITES                                                                            \
	(R_FD_DATASYNC | R_FD_WRITE | R_FD_ALLOCATE | R_FD_FILESTAT_SET_SIZE |                  \
	 R_FD_FILESTAT_SET_TIMES | R_PATH_CREATE_DIRECTORY | R_PATH_CREATE_FILE |               \
	 R_PATH_LINK_SOURCE | R_PATH_LINK_TARGET | R_PATH_RENAME_SOURCE | R_PATH_RENAME_TARGET | \
	 R_PATH_FILESTAT_SET_SIZE | R_PATH_FILESTAT_SET_TIMES | R_PATH_SYMLINK |                 \
	 R_PATH_REMOVE_DIRECTORY | R_PATH_UNLINK_FILE)
#define R_STDIO_BASE                                                                        \
	(R_FD_READ | R_FD_WRITE | R_FD_FDSTAT_SET_FLAGS | R_FD_FILESTAT_GET | R_POLL_FD_READWRITE)

/* filetype */
enum {
	FT_UNKNOWN = 0, FT_BLOCK_DEVICE, FT_CHARACTER_DEVICE, FT_DIRECTORY, FT_REGULAR_FILE,
	FT_SOCKET_DGRAM, FT_SOCKET_STREAM, FT_SYMBOLIC_LINK,
};
/* fdflags, oflags, lookupflags, fstflags */
#define FDFL_APPEND 1u
#define FDFL_DSYNC 2u
#define FDFL_NONBLOCK 4u
#define FDFL_RSYNC 8u
#define FDFL_SYNC 16u
#define OFL_CREAT 1u
#define OFL_DIRECTORY 2u
#define OFL_EXCL 4u
#define OFL_TRUNC 8u
#define LOOKUP_SYMLINK_FOLLOW 1u
#define FST_ATIM 1u
#define FST_ATIM_NOW 2u
#define FST_MTIM 4u
#define FST_MTIM_NOW 8u

struct wasi_fd {
	bool used;
	int host;          /* host descriptor */
	uint8_t type;      /* FT_* */
	bool preopen;
	const char *name;  /* a preopen's name; NULL: the context's preopen_name */
	bool stdio;        /* fds 0-2: the caller's, never closed by us */
	uint16_t flags;    /* FDFL_* as set */
	uint64_t base, inheriting;
};

struct kis_wasi;
struct wasi_def;
struct wasi_binding {
	struct kis_wasi *w;
	const struct wasi_def *def;
};

struct kis_wasi {
	char *const *argv;
	char *const *envp;
	const char *preopen_name;
	struct wasi_fd *fds; /* nfds entries, mmap'd (fds_bytes) */
	size_t fds_bytes;
	uint32_t nfds;
	bool exited;
	int exit_code;
	struct kis_wasm_instance *inst; /* the instance being run */
	struct kis_wasm_module *mod;    /* freed by kis_wasi_free */
	struct kis_wasm_func *funcs[64];
	struct wasi_binding bindings[64];
	size_t nfuncs;
};

#define TRY_W(expr)                \
	do {                       \
		int w_e_ = (expr); \
		if (w_e_)          \
			return w_e_; \
	} while (0)

/* One host call: the memory as it is now (memory.grow may move it). */
struct wasi_mem {
	uint8_t *base;
	uint64_t size;
};

/* Guest bytes [ptr, ptr+len) or NULL when any of it is outside memory: the
 * only way the WASI layer reaches guest memory. */
static inline uint8_t *gmem(const struct wasi_mem *m, uint64_t ptr, uint64_t len)
{
	if (!m->base || ptr > m->size || len > m->size - ptr)
		return NULL;
	return m->base + ptr;
}

static inline uint32_t ld32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v; /* wasm is little-endian, and so is every host we build for */
}
static inline uint64_t ld64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}
static inline void st16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}
static inline void st32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}
static inline void st64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* A timestamp in WASI's unit (nanoseconds, typenames.witx `timestamp`). */
static inline uint64_t ts_ns(struct timespec t)
{
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Store a u32/u64 result at a guest address: W_FAULT when out of bounds. */
static inline int put32(const struct wasi_mem *m, uint32_t ptr, uint32_t v)
{
	uint8_t *p = gmem(m, ptr, 4);
	if (!p)
		return W_FAULT;
	st32(p, v);
	return W_SUCCESS;
}
static inline int put64(const struct wasi_mem *m, uint32_t ptr, uint64_t v)
{
	uint8_t *p = gmem(m, ptr, 8);
	if (!p)
		return W_FAULT;
	st64(p, v);
	return W_SUCCESS;
}

/* wasi_fd.c: the descriptor table and the host's facts in WASI's words,
 * below both wasi.c and wasi_fs.c. */
/* The table for cfg: stdio at 0-2, the preopens from 3; 0, or -1 when it
 * cannot be mapped. wasi_fds_release closes what the module holds open
 * (never the caller's stdio) and unmaps it. */
KIS_HIDDEN int wasi_fds_init(struct kis_wasi *w, const struct kis_wasi_config *cfg);
KIS_HIDDEN void wasi_fds_release(struct kis_wasi *w);
KIS_HIDDEN int wasi_errno(int e);
KIS_HIDDEN uint8_t wasi_filetype(unsigned mode);
/* The descriptor, or NULL with *werr set (BADF, NOTCAPABLE when `need`
 * rights are missing). */
KIS_HIDDEN struct wasi_fd *wasi_fd_get(struct kis_wasi *w, uint32_t fd, uint64_t need, int *werr);
KIS_HIDDEN int wasi_fd_alloc(struct kis_wasi *w, uint32_t *out);
KIS_HIDDEN void wasi_filestat_put(uint8_t *p, const void *st); /* struct stat */
/* timespec pair for utimensat from WASI (atim, mtim, fstflags); W_* */
KIS_HIDDEN int wasi_times(uint64_t atim, uint64_t mtim, uint32_t fst, void *ts2);

/* wasi_fs.c: the path_* functions and fd_readdir. a[] are the raw args. */
typedef int (*wasi_call_fn)(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a);
KIS_HIDDEN int wasi_path_open(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a);
KIS_HIDDEN int wasi_path_create_directory(struct kis_wasi *w, const struct wasi_mem *m,
					  const uint64_t *a);
KIS_HIDDEN int wasi_path_remove_directory(struct kis_wasi *w, const struct wasi_mem *m,
					  const uint64_t *a);
KIS_HIDDEN int wasi_path_unlink_file(struct kis_wasi *w, const struct wasi_mem *m,
				     const uint64_t *a);
KIS_HIDDEN int wasi_path_rename(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a);
KIS_HIDDEN int wasi_path_link(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a);
KIS_HIDDEN int wasi_path_symlink(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a);
KIS_HIDDEN int wasi_path_readlink(struct kis_wasi *w, const struct wasi_mem *m,
				  const uint64_t *a);
KIS_HIDDEN int wasi_path_filestat_get(struct kis_wasi *w, const struct wasi_mem *m,
				      const uint64_t *a);
KIS_HIDDEN int wasi_path_filestat_set_times(struct kis_wasi *w, const struct wasi_mem *m,
					    const uint64_t *a);
KIS_HIDDEN int wasi_fd_readdir(struct kis_wasi *w, const struct wasi_mem *m, const uint64_t *a);

#endif
