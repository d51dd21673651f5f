/* SPDX-License-Identifier: MIT */
/* What wasi-libc (Debian 12, 2022-05) leaves out and the benchmark
 * programs link against without calling on their measured path: Lua's
 * os.execute and io.tmpfile, bzip2's copying of a file's owner and mode
 * (unused with -c on stdin). Each fails as an unsupported call would. */
#include <errno.h>
#include <stdio.h>
#include <sys/types.h>

int system(const char *cmd);
int fchmod(int fd, mode_t mode);
int fchown(int fd, uid_t uid, gid_t gid);

int system(const char *cmd)
{
	(void)cmd;
	return -1; /* no shell: os.execute() reports failure */
}

FILE *tmpfile(void)
{
	errno = ENOTSUP;
	return NULL;
}

int fchmod(int fd, mode_t mode)
{
	(void)fd;
	(void)mode;
	errno = ENOTSUP;
	return -1;
}

int fchown(int fd, uid_t uid, gid_t gid)
{
	(void)fd;
	(void)uid;
	(void)gid;
	errno = ENOTSUP;
	return -1;
}
