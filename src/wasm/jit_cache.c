/* SPDX-License-Identifier: MIT */
/* The store's cache of compiled WebAssembly: <store>/cache/wasm-code/<h>.o,
 * one file per module, written by the engine, read only where it trusts it.
 *
 * A file holds "KISJIT2\n", the tier the code was made at (a u32:
 * WASM_JIT_TIER_OPT, _FAST or _MIXED, jit.h), the compiler's id (kis_wasm_compiler_id: this
 * compiler's and LLVM's versions and the CPU), the module's bytes and the
 * object code, each after its length. The name is a 64-bit FNV-1a hash
 * (over 8-byte words) of id and module, only to find the file: a hit is the exact id and module
 * bytes compared, so a collision is a miss, never another module's code.
 * Trust: the engine opened the store (which refuses one another user may
 * change); here the directory and the file must be the engine's own user's,
 * not group or world writable, and reached without a symlink. Writes go to
 * a temporary file renamed into place, so a reader sees a whole file.
 *
 * A background compile (tier-up, jit_tierup.c) claims a module first:
 * <h>.pending holds the module's bytes, locked with flock(2) by whoever
 * compiles it, so two runs that race compile it once. The cache is bounded
 * (WASM_CODE_CACHE_MAX bytes of objects): each write evicts the entries
 * used least recently (docs/wasm.md, "Tier-up"). */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/io.h"
#include "wasm/jit.h"
#include "wasm/jit_cache.h"
#include "kis/wasm.h"

static const char MAGIC[8] = "KISJIT2\n";

/* FNV-1a's step over 8 bytes at a time (a byte at a time was 0.2 ms for
 * a 42 KB module here): only to name the file, a hit compares the bytes. */
static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h ^= w;
		h *= 0x100000001b3ull;
	}
	for (; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static bool trusted(int fd, bool dir)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return false;
	if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return false;
	return st.st_uid == geteuid() && !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* The cache directory, made (0700) when asked; -1 if absent or untrusted. */
static int open_dir(const char *store_root, bool make)
{
	char path[4096];
	int n = snprintf(path, sizeof(path), "%s/cache", store_root);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -1;
	if (make && mkdir(path, 0700) < 0 && errno != EEXIST)
		return -1;
	int parent = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (parent < 0)
		return -1;
	if (make && mkdirat(parent, "wasm-code", 0700) < 0 && errno != EEXIST) {
		close(parent);
		return -1;
	}
	int fd = openat(parent, "wasm-code", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(parent);
	if (fd >= 0 && !trusted(fd, true)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int file_name(const uint8_t *mod, size_t len, char *id, size_t idlen, char name[32])
{
	if (kis_wasm_compiler_id(id, idlen) < 0)
		return -1;
	uint64_t h = fnv1a(0xcbf29ce484222325ull, (const uint8_t *)id, strlen(id));
	h = fnv1a(h, mod, len);
	snprintf(name, 32, "%016llx.o", (unsigned long long)h);
	return 0;
}

int wasm_code_cache_name(const uint8_t *mod, size_t len, char name[32])
{
	char id[1024];
	return file_name(mod, len, id, sizeof(id), name);
}

/* "<h>.pending" beside "<h>.o" */
static void pending_name(const char name[32], char out[40])
{
	snprintf(out, 40, "%.16s.pending", name);
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	for (size_t put = 0; put < len;) {
		ssize_t r = write(fd, p + put, len - put);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		put += (size_t)r;
	}
	return 0;
}

int wasm_code_cache_get(const char *store_root, const uint8_t *mod, size_t len, uint8_t **obj,
			size_t *objlen)
{
	unsigned tier;
	return wasm_code_cache_get_tier(store_root, mod, len, obj, objlen, &tier);
}

static int get(const char *store_root, const uint8_t *mod, size_t len, uint8_t **obj,
	       size_t *objlen, unsigned *tier, struct wasm_jit_module **pre);

int wasm_code_cache_get_tier(const char *store_root, const uint8_t *mod, size_t len,
			     uint8_t **obj, size_t *objlen, unsigned *tier)
{
	return get(store_root, mod, len, obj, objlen, tier, NULL);
}

int wasm_code_cache_get_linked(const char *store_root, const uint8_t *mod, size_t len,
			       uint8_t **obj, size_t *objlen, unsigned *tier,
			       struct wasm_jit_module **pre)
{
	return get(store_root, mod, len, obj, objlen, tier, pre);
}

static int get(const char *store_root, const uint8_t *mod, size_t len, uint8_t **obj,
	       size_t *objlen, unsigned *tier, struct wasm_jit_module **pre)
{
	if (pre)
		*pre = NULL;
	char id[1024], name[32];
	*obj = NULL;
	*objlen = 0;
	if (!store_root || file_name(mod, len, id, sizeof(id), name) < 0)
		return -1;
	int dfd = open_dir(store_root, false);
	if (dfd < 0)
		return -1;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return -1;
	int rc = -1;
	uint8_t *buf = NULL;
	size_t size = 0, map = 0;
	struct stat st;
	if (!trusted(fd, false) || fstat(fd, &st) < 0 || st.st_size < 8 + 4 + 4 + 8 + 8 ||
	    (uint64_t)st.st_size > SIZE_MAX / 2)
		goto out;
	size = (size_t)st.st_size;
	/* The file read into a private anonymous mapping made present in
	 * one call, from 512 KiB on in huge pages (kis_map_populated), and
	 * compared and checked where it lies (the object is never moved to
	 * the front). Under this machine's hypervisor (a PVM guest) each 4 KiB
	 * page a process first touches costs a fault in the host too: a
	 * mapping of the file (the previous way, itself cheaper than a read
	 * into malloc's small pages) had SQLite's 3.5 MB cost ~850 of them
	 * in the compare and the link; the kernel's copy into two huge pages
	 * costs less. Our own copy: what is compared and linked is what this
	 * process read, whatever happens to the file after. */
	buf = kis_map_populated(size, &map);
	if (buf == MAP_FAILED) {
		buf = NULL;
		goto out;
	}
	if (kis_read_all(fd, buf, size) < 0)
		goto out;
	/* magic, tier, id, module, object: each length checked against
	 * what is left */
	size_t at = 8;
	uint32_t idn, t;
	uint64_t mn, on;
	if (memcmp(buf, MAGIC, 8))
		goto out;
	memcpy(&t, buf + at, 4);
	at += 4;
	if (t != WASM_JIT_TIER_OPT && t != WASM_JIT_TIER_FAST && t != WASM_JIT_TIER_MIXED)
		goto out;
	memcpy(&idn, buf + at, 4);
	at += 4;
	if (idn != strlen(id) || idn > size - at || memcmp(buf + at, id, idn))
		goto out;
	at += idn;
	if (size - at < 8)
		goto out;
	memcpy(&mn, buf + at, 8);
	at += 8;
	if (mn != len || mn > size - at || memcmp(buf + at, mod, len))
		goto out;
	at += mn;
	if (size - at < 8)
		goto out;
	memcpy(&on, buf + at, 8);
	at += 8;
	if (on == 0 || on != size - at)
		goto out;
	/* the whole link, in read-write memory only: a file that our loader
	 * refuses is a miss (the run compiles and replaces it), never a
	 * failure of the run that finds it */
	struct wasm_jit_module *none = NULL;
	if (pre ? wasm_jit_elf_prelink(&wasm_jit_rt_externals, buf + at, on, UINT32_MAX, pre, NULL, 0) < 0
		: wasm_jit_elf_load(&wasm_jit_rt_externals, buf + at, on, UINT32_MAX, false, &none, NULL, 0) < 0)
		goto out;
	/* keep the object's pages only: the header and the module's copy
	 * before it, and the mapping's slack after the file's last page,
	 * are unmapped now, the rest by wasm_code_cache_free (from the page
	 * that holds the object's start to its end) */
	size_t head = at & ~(size_t)4095, end = (size + 4095) & ~(size_t)4095;
	if (head)
		munmap(buf, head);
	if (map > end)
		munmap(buf + end, map - end);
	*obj = buf + at;
	buf = NULL;
	*objlen = on;
	*tier = t;
	rc = 0;
out:
	if (buf)
		munmap(buf, map);
	close(fd);
	return rc;
}

void wasm_code_cache_free(uint8_t *obj, size_t objlen)
{
	/* the mapping begins at the page that holds the object's start */
	if (obj) {
		uintptr_t start = (uintptr_t)obj & ~(uintptr_t)4095;
		munmap((void *)start, (size_t)((uintptr_t)obj - start) + objlen);
	}
}

void wasm_code_cache_drop(const char *store_root, const uint8_t *mod, size_t len)
{
	char id[1024], name[32];
	if (!store_root || file_name(mod, len, id, sizeof(id), name) < 0)
		return;
	int dfd = open_dir(store_root, false);
	if (dfd < 0)
		return;
	unlinkat(dfd, name, 0);
	close(dfd);
}

/* The cache's bound: the objects' total size after a write, least
 * recently used first out. "Used" is the later of the file's atime and
 * mtime: a hit reads the file, and under relatime (the default mount
 * option) the kernel moves atime forward on a read once it is a day old,
 * so a module used daily stays; on a noatime mount the order is the age
 * of the write. Leftovers of a writer that died (temporary files, pending
 * claims nobody holds) older than an hour go too. */
static time_t last_use(const struct stat *st)
{
	return st->st_atime > st->st_mtime ? st->st_atime : st->st_mtime;
}

struct entry {
	char name[64];
	time_t used;
	off_t size;
};

static int by_use(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return x->used < y->used ? -1 : x->used > y->used;
}

static void evict(int dfd, const char *keep, uint64_t max)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct entry *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	time_t now = time(NULL);
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t nl = strlen(de->d_name);
		struct stat st;
		if (nl >= sizeof(v->name) || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		bool obj = nl > 2 && !strcmp(de->d_name + nl - 2, ".o");
		bool stale = now - st.st_mtime > 3600;
		if (!obj) {
			/* a temporary file of a writer that died, or a claim
			 * whose compile died: removed once old, and a claim only
			 * if nobody holds it */
			bool tmp = nl > 4 && !strcmp(de->d_name + nl - 4, ".tmp");
			bool pend = nl > 8 && !strcmp(de->d_name + nl - 8, ".pending");
			if (stale && tmp)
				unlinkat(dfd, de->d_name, 0);
			if (stale && pend) {
				int pfd = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
				if (pfd >= 0 && flock(pfd, LOCK_EX | LOCK_NB) == 0)
					unlinkat(dfd, de->d_name, 0);
				if (pfd >= 0)
					close(pfd);
			}
			continue;
		}
		total += (uint64_t)st.st_size;
		if (!strcmp(de->d_name, keep))
			continue; /* the one just written stays */
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 64;
			struct entry *nv = realloc(v, nc * sizeof(*v));
			if (!nv)
				break;
			v = nv;
			cap = nc;
		}
		/* the cache's own names are short: a longer one is none of ours */
		size_t len = strlen(de->d_name);
		if (len >= sizeof(v[n].name))
			continue;
		memcpy(v[n].name, de->d_name, len + 1);
		v[n].used = last_use(&st);
		v[n].size = st.st_size;
		n++;
	}
	closedir(d);
	if (total > max && n) {
		qsort(v, n, sizeof(*v), by_use);
		for (size_t i = 0; i < n && total > max; i++)
			if (unlinkat(dfd, v[i].name, 0) == 0)
				total -= (uint64_t)v[i].size;
	}
	free(v);
}

int wasm_code_cache_claim(const char *store_root, const uint8_t *mod, size_t len, int *out)
{
	char name[32], pend[40];
	*out = -1;
	if (!store_root || wasm_code_cache_name(mod, len, name) < 0)
		return -1;
	pending_name(name, pend);
	int dfd = open_dir(store_root, true);
	if (dfd < 0)
		return -1;
	int fd = openat(dfd, pend, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	close(dfd);
	if (fd < 0)
		return -1;
	if (!trusted(fd, false)) {
		close(fd);
		return -1;
	}
	/* flock(2): the lock belongs to this open file description, which
	 * the compile inherits; the kernel drops it when the last descriptor
	 * closes, so a compile that was killed leaves no lock behind */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		close(fd);
		return e == EWOULDBLOCK ? 1 : -1;
	}
	/* held: what a dead claimant left is replaced by this module */
	if (ftruncate(fd, 0) < 0 || write_all(fd, mod, len) < 0) {
		close(fd);
		return -1;
	}
	*out = fd;
	return 0;
}

void wasm_code_cache_unclaim(const char *store_root, const char name[32], int fd)
{
	char pend[40];
	pending_name(name, pend);
	/* removed while the lock is held: a run that opened the file before
	 * finds it locked (its run stays interpreted, the next one links),
	 * one that opens it after makes a new one, and its compile finds
	 * the code cached (wasm-tierup looks before it compiles) */
	int dfd = store_root ? open_dir(store_root, false) : -1;
	if (dfd >= 0) {
		unlinkat(dfd, pend, 0);
		close(dfd);
	}
	if (fd >= 0)
		close(fd);
}

int wasm_code_cache_put(const char *store_root, const uint8_t *mod, size_t len, const uint8_t *obj,
			size_t objlen)
{
	return wasm_code_cache_put_tier(store_root, mod, len, obj, objlen, WASM_JIT_TIER_OPT);
}

int wasm_code_cache_put_tier(const char *store_root, const uint8_t *mod, size_t len,
			     const uint8_t *obj, size_t objlen, unsigned tier)
{
	char id[1024], name[32], tmp[64];
	if (!store_root || !objlen || file_name(mod, len, id, sizeof(id), name) < 0)
		return -1;
	int dfd = open_dir(store_root, true);
	if (dfd < 0)
		return -1;
	snprintf(tmp, sizeof(tmp), ".%s.%ld.tmp", name, (long)getpid());
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		close(dfd);
		return -1;
	}
	uint32_t idn = (uint32_t)strlen(id);
	uint64_t mn = len, on = objlen;
	uint32_t t = tier;
	int rc = write_all(fd, MAGIC, 8) < 0 || write_all(fd, &t, 4) < 0 || write_all(fd, &idn, 4) < 0 ||
		 write_all(fd, id, idn) < 0 || write_all(fd, &mn, 8) < 0 ||
		 write_all(fd, mod, len) < 0 || write_all(fd, &on, 8) < 0 ||
		 write_all(fd, obj, objlen) < 0 || fsync(fd) < 0 ? -1 : 0;
	if (close(fd) < 0)
		rc = -1;
	if (rc == 0 && renameat(dfd, tmp, dfd, name) < 0)
		rc = -1;
	if (rc < 0)
		unlinkat(dfd, tmp, 0);
	if (rc == 0)
		evict(dfd, name, WASM_CODE_CACHE_MAX);
	close(dfd);
	return rc;
}
