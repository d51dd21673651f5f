/* SPDX-License-Identifier: MIT */
/* Landlock: ABI probe, a ruleset using every right the ABI offers (system
 * directories read-only, the workspace read-write), and restrict_self. */
#include "confine/confine.h"
#include "confine/sysview.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The build host's <linux/landlock.h> (Debian 12's, kernel 6.1) stops at
 * ABI 2. The values below are the kernel's UAPI, fixed once released; the
 * struct is ours so the fields of ABI 4 and 6 exist whatever the header. A
 * kernel of an older ABI accepts the larger struct as long as the fields it
 * does not know are zero (copy_struct_from_user), so we zero them there. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;             /* ABI 6 */
};

struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define FS_V1                                                                              \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                      \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |                      \
	 LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                  \
	 LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |                      \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                      \
	 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |                    \
	 LANDLOCK_ACCESS_FS_MAKE_SYM)

/* Rights that apply to a file (not a directory): a rule on a file may hold
 * only these (landlock_add_rule fails with EINVAL otherwise). */
#define FS_FILE_RIGHTS                                                                     \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                      \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |                      \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)

#define R_RO (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define R_RX (R_RO | LANDLOCK_ACCESS_FS_EXECUTE)
/* Opening with O_TRUNC needs TRUNCATE (ABI 3): `cmd > /dev/null` does. */
#define R_DEV_RW                                                                           \
	(LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |                    \
	 LANDLOCK_ACCESS_FS_TRUNCATE)
/* Terminals: the agent allocates PTYs inside the sandbox (TIOCGPTN,
 * TIOCSWINSZ are device ioctls, ABI 5 checks them at open time). */
#define R_TTY (R_DEV_RW | LANDLOCK_ACCESS_FS_IOCTL_DEV | LANDLOCK_ACCESS_FS_READ_DIR)
/* The workspace: everything but device nodes and device ioctls. */
#define R_WORKSPACE                                                                        \
	((FS_V1 | LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE) &                \
	 ~(LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK))

struct path_rule {
	const char *path;
	uint64_t rights;
};

/* The system directories (src/confine/sysview.c), read and execute; /etc
 * apart (add_etc). Missing ones are skipped. Besides them, what a command
 * needs of /sys and /dev: */
static const struct path_rule system_rules[] = {
	/* sysconf(_SC_NPROCESSORS_ONLN) reads .../cpu/online */
	{"/sys/devices/system/cpu", R_RO},
	{"/dev/null", R_DEV_RW}, {"/dev/zero", R_DEV_RW}, {"/dev/full", R_DEV_RW},
	{"/dev/random", LANDLOCK_ACCESS_FS_READ_FILE},
	{"/dev/urandom", LANDLOCK_ACCESS_FS_READ_FILE},
	{"/dev/tty", R_TTY}, {"/dev/ptmx", R_TTY}, {"/dev/pts", R_TTY},
};

/* The engine runs as root on many hosts and the command keeps uid 0 (only
 * its capabilities are gone): owner permission bits still let it read
 * root's 0600/0640 files. So /etc is granted entry by entry, leaving out
 * kis_sysview_etc_hidden (a path with '/' hides a nested entry). */
#define etc_hidden kis_sysview_etc_hidden

static int ll_create(const struct ll_ruleset_attr *a, size_t size, uint32_t flags)
{
	return (int)syscall(SYS_landlock_create_ruleset, a, size, flags);
}

int kis_landlock_abi(void)
{
	int v = ll_create(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	/* ENOSYS: not built in; EOPNOTSUPP: built in but not enabled (lsm=) */
	return v < 0 ? 0 : v;
}

const char *kis_landlock_feature_name(unsigned bit)
{
	switch (bit) {
	case KIS_LL_REFER: return "refer";
	case KIS_LL_TRUNCATE: return "truncate";
	case KIS_LL_NET_TCP: return "net_tcp";
	case KIS_LL_IOCTL_DEV: return "ioctl_dev";
	case KIS_LL_SCOPE_ABSTRACT_UNIX: return "scope_abstract_unix_socket";
	case KIS_LL_SCOPE_SIGNAL: return "scope_signal";
	default: return "unknown";
	}
}

static unsigned features_of_abi(int abi)
{
	unsigned f = 0;
	if (abi >= 2)
		f |= KIS_LL_REFER;
	if (abi >= 3)
		f |= KIS_LL_TRUNCATE;
	if (abi >= 4)
		f |= KIS_LL_NET_TCP;
	if (abi >= 5)
		f |= KIS_LL_IOCTL_DEV;
	if (abi >= 6)
		f |= KIS_LL_SCOPE_ABSTRACT_UNIX | KIS_LL_SCOPE_SIGNAL;
	return f;
}

void kis_landlock_probe(struct kis_landlock_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->abi = kis_landlock_abi();
	if (rep->abi > 0) {
		rep->enforced = features_of_abi(rep->abi);
		rep->missing = KIS_LL__ALL & ~rep->enforced;
	} else {
		rep->missing = KIS_LL__ALL;
	}
}

static uint64_t fs_rights_of_abi(int abi)
{
	uint64_t r = FS_V1;
	if (abi >= 2)
		r |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		r |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return r;
}

/* Add a path-beneath rule for an fd, trimming rights to what the ruleset
 * handles and to file rights when fd is not a directory. */
static int add_fd_rule_mode(int rs, int fd, mode_t mode, uint64_t rights, uint64_t handled,
			    const char *what, struct kis_error **err)
{
	rights &= handled;
	if (!S_ISDIR(mode))
		rights &= FS_FILE_RIGHTS;
	if (!rights)
		return 0;
	struct ll_path_beneath pb = {.allowed_access = rights, .parent_fd = fd};
	if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot add landlock rule for '%s'", what);
	return 0;
}

static int add_fd_rule(int rs, int fd, uint64_t rights, uint64_t handled, const char *what,
		       struct kis_error **err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot stat '%s'", what);
	return add_fd_rule_mode(rs, fd, st.st_mode, rights, handled, what, err);
}

static int add_path_rule(int rs, const char *path, uint64_t rights, uint64_t handled,
			 bool must_exist, struct kis_error **err)
{
	_cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		if (!must_exist && (errno == ENOENT || errno == ENOTDIR))
			return 0;
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", path);
	}
	return add_fd_rule(rs, fd, rights, handled, path, err);
}

/* Is rel hidden, or an ancestor of a hidden entry (then *ancestor)? */
static bool etc_is_hidden(const char *rel, bool *ancestor)
{
	size_t n = strlen(rel);
	*ancestor = false;
	for (size_t i = 0; i < kis_sysview_n_etc_hidden; i++) {
		if (strcmp(etc_hidden[i], rel) == 0)
			return true;
		if (strncmp(etc_hidden[i], rel, n) == 0 && etc_hidden[i][n] == '/')
			*ancestor = true;
	}
	return false;
}

/* Grant rights on every entry of dirfd except the hidden ones, recursing
 * into directories that hold a hidden entry. Symlinks are skipped: a rule
 * on a followed link would grant its target wherever it points, and a
 * link to a path inside /etc is covered by that path's own rule. */
static int add_dir_except(int rs, int dirfd, const char *prefix, uint64_t rights,
			  uint64_t handled, int depth, struct kis_error **err)
{
	int dupfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (dupfd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot duplicate fd of '/etc/%s'",
				     prefix);
	DIR *d = fdopendir(dupfd);
	if (!d) {
		int e = errno;
		close(dupfd);
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot read '/etc/%s'", prefix);
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char rel[512];
		int n = snprintf(rel, sizeof(rel), "%s%s", prefix, de->d_name);
		if (n < 0 || (size_t)n >= sizeof(rel))
			continue; /* too long to be a hidden path: skipped, not granted */
		bool ancestor;
		if (etc_is_hidden(rel, &ancestor))
			continue;
		/* a link is skipped below anyway: readdir's type spares its
		 * open, fstat and close (a third of /etc's syscalls, each dear
		 * in a PVM guest; issue 19). An entry whose type is not known
		 * or changes meanwhile is still decided by the fstat. */
		if (de->d_type == DT_LNK)
			continue;
		_cleanup_close_ int fd =
			openat(dirfd, de->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue; /* vanished since readdir */
		/* The type: readdir's, for a name with nothing hidden beneath it
		 * (whatever is there now is granted with no more than the rights
		 * of that type: a directory where a file was read gets file
		 * rights, a file where a directory was read is refused by
		 * landlock_add_rule, EINVAL: closed, never wider); the fd's own
		 * for an ancestor of a hidden entry, or an unknown type. */
		struct stat st = {.st_mode = de->d_type == DT_DIR ? S_IFDIR : S_IFREG};
		if ((ancestor || de->d_type == DT_UNKNOWN) && fstat(fd, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode))
			continue;
		if (ancestor && S_ISDIR(st.st_mode) && depth < 4) {
			_cleanup_close_ int sub =
				openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
								 O_CLOEXEC);
			if (sub < 0)
				continue;
			char pre[520];
			snprintf(pre, sizeof(pre), "%s/", rel);
			r = add_dir_except(rs, sub, pre, rights, handled, depth + 1, err);
			continue;
		}
		char what[530];
		snprintf(what, sizeof(what), "/etc/%s", rel);
		/* the mode of the fd itself, already read: no second fstat */
		r = add_fd_rule_mode(rs, fd, st.st_mode, rights, handled, what, err);
	}
	closedir(d);
	return r;
}

static int add_etc(int rs, uint64_t handled, struct kis_error **err)
{
	_cleanup_close_ int fd = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : kis_error_set(err, KIS_E_INTERNAL, errno,
							  "cannot open '/etc'");
	/* listing /etc (names only) is harmless and `ls /etc` expects it */
	TRY(add_fd_rule(rs, fd, LANDLOCK_ACCESS_FS_READ_DIR, handled, "/etc", err));
	return add_dir_except(rs, fd, "", R_RO, handled, 0, err);
}

static int add_list(int rs, const char *const *list, uint64_t rights, uint64_t handled,
		    struct kis_error **err)
{
	for (size_t i = 0; list && list[i]; i++) {
		if (list[i][0] != '/')
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "landlock path '%s' is not absolute", list[i]);
		TRY(add_path_rule(rs, list[i], rights, handled, true, err));
	}
	return 0;
}

int kis_landlock_prepare(const struct kis_landlock_opts *o, int *fd_out,
			 struct kis_landlock_report *rep, struct kis_error **err)
{
	struct kis_landlock_report local;
	if (!rep)
		rep = &local;
	kis_landlock_probe(rep);
	if (rep->abi <= 0)
		return kis_error_set(err, KIS_E_TIER_UNAVAILABLE, 0,
				     "landlock is not available on this kernel");
	unsigned have = features_of_abi(rep->abi);

	/* Landlock restricts TCP bind/connect by port only: it cannot say
	 * "loopback only" or "these hosts". */
	if (o->net == KIS_NET_LOOPBACK || o->net == KIS_NET_EGRESS)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "network.mode '%s' cannot be enforced by landlock: use "
				     "'off' or another backend",
				     o->net == KIS_NET_LOOPBACK ? "loopback" : "egress");
	unsigned lacking = o->required & rep->missing;
	if (lacking) {
		unsigned bit = lacking & -lacking;
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "landlock ABI %d lacks '%s' which this profile needs",
				     rep->abi, kis_landlock_feature_name(bit));
	}

	struct ll_ruleset_attr attr = {.handled_access_fs = fs_rights_of_abi(rep->abi)};
	size_t attr_size = sizeof(attr);
	if (rep->abi >= 4 && o->net == KIS_NET_OFF)
		attr.handled_access_net =
			LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
	if (rep->abi >= 6)
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	if (rep->abi < 4)
		attr_size = sizeof(attr.handled_access_fs); /* ABI 1-3 kernels */
	_cleanup_close_ int rs = ll_create(&attr, attr_size, 0);
	if (rs < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot create landlock ruleset");
	rep->enforced = have & ~(unsigned)KIS_LL_NET_TCP;
	if (attr.handled_access_net)
		rep->enforced |= KIS_LL_NET_TCP;

	uint64_t h = attr.handled_access_fs;
	for (size_t i = 0; !o->bare && i < kis_sysview_n_dirs; i++)
		if (strcmp(kis_sysview_dirs[i], "/etc"))
			TRY(add_path_rule(rs, kis_sysview_dirs[i], R_RX, h, false, err));
	for (size_t i = 0; !o->bare && i < ARRAY_SIZE(system_rules); i++)
		TRY(add_path_rule(rs, system_rules[i].path, system_rules[i].rights, h, false, err));
	if (!o->bare)
		TRY(add_etc(rs, h, err));
	if (o->allow_proc)
		TRY(add_path_rule(rs, "/proc", R_RO, h, false, err));
	TRY(add_list(rs, o->extra_ro, R_RX, h, err));
	TRY(add_list(rs, o->extra_rw, R_WORKSPACE, h, err));
	if (o->workspace_by_fd) {
		TRY(add_fd_rule(rs, o->workspace_fd, R_WORKSPACE, h,
				o->workspace ? o->workspace : "workspace", err));
	} else if (o->workspace) {
		const char *ws[] = {o->workspace, NULL};
		TRY(add_list(rs, ws, R_WORKSPACE, h, err));
	}
	/* No network rules: with TCP handled, every bind and connect is denied. */
	*fd_out = steal_fd(&rs);
	return 0;
}

int kis_landlock_enforce(int ruleset_fd, struct kis_error **err)
{
	/* landlock_restrict_self needs no_new_privs unless the caller has
	 * CAP_SYS_ADMIN; we want it in every case. */
	int r = 0, e = 0;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0) {
		e = errno;
		r = -1;
	}
	close(ruleset_fd);
	if (r < 0)
		return kis_error_set(err, KIS_E_INTERNAL, e, "cannot enforce landlock ruleset");
	return 0;
}
