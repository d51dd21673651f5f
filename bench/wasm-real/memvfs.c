/* SPDX-License-Identifier: MIT */
/* A VFS for SQLITE_OS_OTHER builds that need no file system: every file it
 * opens (the temporary ones VACUUM and sorting ask for) lives in memory
 * and vanishes when closed. The same file is built natively and to
 * wasm32-wasi, so both run the same SQLite. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sqlite3.h"

struct mfile {
	sqlite3_file base;
	unsigned char *data;
	sqlite3_int64 size, cap;
};

static int mf_close(sqlite3_file *f)
{
	free(((struct mfile *)f)->data);
	return SQLITE_OK;
}
static int mf_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
	struct mfile *m = (struct mfile *)f;
	if (off >= m->size) {
		memset(buf, 0, (size_t)n);
		return SQLITE_IOERR_SHORT_READ;
	}
	sqlite3_int64 k = m->size - off < n ? m->size - off : n;
	memcpy(buf, m->data + off, (size_t)k);
	if (k < n) {
		memset((char *)buf + k, 0, (size_t)(n - k));
		return SQLITE_IOERR_SHORT_READ;
	}
	return SQLITE_OK;
}
static int mf_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
	struct mfile *m = (struct mfile *)f;
	if (off + n > m->cap) {
		sqlite3_int64 c = m->cap ? m->cap : 65536;
		while (c < off + n)
			c *= 2;
		unsigned char *d = realloc(m->data, (size_t)c);
		if (!d)
			return SQLITE_NOMEM;
		m->data = d;
		m->cap = c;
	}
	if (off > m->size)
		memset(m->data + m->size, 0, (size_t)(off - m->size));
	memcpy(m->data + off, buf, (size_t)n);
	if (off + n > m->size)
		m->size = off + n;
	return SQLITE_OK;
}
static int mf_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	struct mfile *m = (struct mfile *)f;
	if (size < m->size)
		m->size = size;
	return SQLITE_OK;
}
static int mf_sync(sqlite3_file *f, int fl) { (void)f; (void)fl; return SQLITE_OK; }
static int mf_size(sqlite3_file *f, sqlite3_int64 *out)
{
	*out = ((struct mfile *)f)->size;
	return SQLITE_OK;
}
static int mf_lock(sqlite3_file *f, int l) { (void)f; (void)l; return SQLITE_OK; }
static int mf_reserved(sqlite3_file *f, int *out) { (void)f; *out = 0; return SQLITE_OK; }
static int mf_fcntl(sqlite3_file *f, int op, void *arg) { (void)f; (void)op; (void)arg; return SQLITE_NOTFOUND; }
static int mf_sector(sqlite3_file *f) { (void)f; return 512; }
static int mf_caps(sqlite3_file *f) { (void)f; return 0; }

static const sqlite3_io_methods mfile_methods = {
	1, mf_close, mf_read, mf_write, mf_truncate, mf_sync, mf_size, mf_lock, mf_lock,
	mf_reserved, mf_fcntl, mf_sector, mf_caps,
};

static int mv_open(sqlite3_vfs *v, const char *n, sqlite3_file *f, int fl, int *out)
{
	(void)v; (void)n;
	struct mfile *m = (struct mfile *)f;
	memset(m, 0, sizeof(*m));
	m->base.pMethods = &mfile_methods;
	if (out)
		*out = fl;
	return SQLITE_OK;
}
static int mv_delete(sqlite3_vfs *v, const char *n, int s) { (void)v; (void)n; (void)s; return SQLITE_OK; }
static int mv_access(sqlite3_vfs *v, const char *n, int fl, int *out)
{
	(void)v; (void)n; (void)fl;
	*out = 0;
	return SQLITE_OK;
}
static int mv_full(sqlite3_vfs *v, const char *n, int len, char *out)
{
	(void)v;
	sqlite3_snprintf(len, out, "%s", n);
	return SQLITE_OK;
}
static int mv_random(sqlite3_vfs *v, int n, char *out)
{
	(void)v;
	for (int i = 0; i < n; i++)
		out[i] = (char)(i * 131 + 7); /* deterministic: the same run everywhere */
	return n;
}
static int mv_sleep(sqlite3_vfs *v, int us) { (void)v; return us; }
static int mv_time64(sqlite3_vfs *v, sqlite3_int64 *t)
{
	(void)v;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	*t = (sqlite3_int64)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + 210866760000000LL;
	return SQLITE_OK;
}
static int mv_time(sqlite3_vfs *v, double *t)
{
	sqlite3_int64 i;
	mv_time64(v, &i);
	*t = (double)i / 86400000.0;
	return SQLITE_OK;
}
static int mv_err(sqlite3_vfs *v, int n, char *s) { (void)v; (void)n; (void)s; return 0; }

static sqlite3_vfs memvfs = {
	2, sizeof(struct mfile), 512, 0, "memvfs", 0, mv_open, mv_delete, mv_access, mv_full,
	0, 0, 0, 0, mv_random, mv_sleep, mv_time, mv_err, mv_time64,
};

int sqlite3_os_init(void) { return sqlite3_vfs_register(&memvfs, 1); }
int sqlite3_os_end(void) { return SQLITE_OK; }
