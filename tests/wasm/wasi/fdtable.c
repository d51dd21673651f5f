/* SPDX-License-Identifier: MIT */
/* The module's own descriptor table (wasm32-wasi, raw WASI calls): closing
 * or renumbering over the preopen, fd 3, acts on the module's table only,
 * and a descriptor that later takes number 3 holds its own rights, never
 * the closed preopen's. `fdtable.wasm close|renumber-onto|renumber-away`. */
#include <stdio.h>
#include <string.h>
#include <wasi/api.h>

static const __wasi_rights_t DIR_RIGHTS =
	__WASI_RIGHTS_PATH_OPEN | __WASI_RIGHTS_PATH_CREATE_FILE | __WASI_RIGHTS_FD_READDIR |
	__WASI_RIGHTS_PATH_FILESTAT_GET;
static const __wasi_rights_t FILE_RIGHTS = __WASI_RIGHTS_FD_READ | __WASI_RIGHTS_FD_WRITE;

static int open_dir(__wasi_fd_t at, const char *name, __wasi_fd_t *out)
{
	return __wasi_path_open(at, 0, name, __WASI_OFLAGS_DIRECTORY, DIR_RIGHTS,
				DIR_RIGHTS | FILE_RIGHTS, 0, out);
}

static int create(__wasi_fd_t at, const char *name, __wasi_fd_t *out)
{
	return __wasi_path_open(at, 0, name, __WASI_OFLAGS_CREAT, FILE_RIGHTS, 0, 0, out);
}

static int put(__wasi_fd_t fd, const char *s)
{
	__wasi_ciovec_t v = {(const uint8_t *)s, strlen(s)};
	__wasi_size_t n;
	return __wasi_fd_write(fd, &v, 1, &n);
}

/* "type" of an fd: its filetype number, or the error as "e<errno>". */
static void show(const char *key, __wasi_fd_t fd)
{
	__wasi_fdstat_t st;
	__wasi_prestat_t ps;
	int e = __wasi_fd_fdstat_get(fd, &st);
	int p = __wasi_fd_prestat_get(fd, &ps);
	if (e)
		printf("%s=e%d prestat=%d\n", key, e, p);
	else
		printf("%s=type%d prestat=%d\n", key, st.fs_filetype, p);
}

/* fd_close(3), then a new descriptor takes number 3. */
static int cmd_close(void)
{
	__wasi_fd_t sub = 99, f = 99, g = 99;
	printf("mkdir=%d\n", __wasi_path_create_directory(3, "sub"));
	printf("open_sub=%d\n", open_dir(3, "sub", &sub));
	printf("close3=%d\n", __wasi_fd_close(3));
	show("fd3_closed", 3);
	printf("open_via_closed=%d\n", create(3, "gone.txt", &g));
	printf("close3_again=%d\n", __wasi_fd_close(3));
	show("sub", sub);
	printf("create_in_sub=%d fd=%u\n", create(sub, "inner.txt", &f), f);
	show("fd3_now", 3);
	/* the new fd 3 is a file: no path calls, no preopen, no stale rights */
	printf("open_via_new3=%d\n", create(3, "x.txt", &g));
	printf("write_new3=%d\n", put(f, "via the new fd 3\n"));
	return 0;
}

/* fd_renumber(sub, 3): fd 3 becomes sub, the preopen is gone. */
static int cmd_renumber_onto(void)
{
	__wasi_fd_t sub = 99, f = 99;
	printf("mkdir=%d\n", __wasi_path_create_directory(3, "sub"));
	printf("open_sub=%d\n", open_dir(3, "sub", &sub));
	printf("renumber=%d\n", __wasi_fd_renumber(sub, 3));
	show("fd3", 3);
	show("old_sub", sub);
	printf("renumber_closed_from=%d\n", __wasi_fd_renumber(sub, 3));
	printf("renumber_closed_to=%d\n", __wasi_fd_renumber(3, 99));
	printf("create_via3=%d\n", create(3, "inner.txt", &f));
	printf("write=%d\n", put(f, "in sub\n"));
	return 0;
}

/* fd_renumber(3, sub): the preopen moves to sub's number, sub is closed. */
static int cmd_renumber_away(void)
{
	__wasi_fd_t sub = 99, f = 99;
	printf("mkdir=%d\n", __wasi_path_create_directory(3, "sub"));
	printf("open_sub=%d\n", open_dir(3, "sub", &sub));
	printf("renumber=%d\n", __wasi_fd_renumber(3, sub));
	show("fd3", 3);
	show("moved", sub);
	printf("create_via_moved=%d\n", create(sub, "top.txt", &f));
	printf("write=%d\n", put(f, "at the top\n"));
	return 0;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	if (!strcmp(c, "close"))
		return cmd_close();
	if (!strcmp(c, "renumber-onto"))
		return cmd_renumber_onto();
	if (!strcmp(c, "renumber-away"))
		return cmd_renumber_away();
	fprintf(stderr, "usage: fdtable.wasm close|renumber-onto|renumber-away\n");
	return 2;
}
