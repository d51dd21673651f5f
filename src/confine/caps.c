/* SPDX-License-Identifier: MIT */
/* Process hardening for the child between fork and exec: rlimits, stray
 * descriptors, no_new_privs and every capability dropped. No allocation. */
#include "confine/confine.h"
#include "core/rlimit.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/securebits.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef PR_CAP_AMBIENT_LOWER
#define PR_CAP_AMBIENT_LOWER 3
#endif

int kis_set_rlimits(const struct kis_limits *lim, struct kis_error **err)
{
	static const struct kis_limits zero;
	struct kis_limits l;
	kis_limits_resolve(lim ? lim : &zero, &l);
	if (kis_rlimits_apply(&l) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot set the command's rlimits");
	return 0;
}

static bool is_kept(int fd, const int *keep, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (keep[i] == fd)
			return true;
	return false;
}

/* Mark every fd >= lowfd close-on-exec except those in keep. Marking rather
 * than closing: fds the child still needs before exec (the error socket, a
 * landlock ruleset) keep working and vanish at execve. */
int kis_cloexec_fds_from(int lowfd, const int *keep, size_t n_keep, struct kis_error **err)
{
	/* walk the gaps between kept fds, in ascending order, without sorting
	 * (n_keep is tiny): from `lo`, find the next kept fd >= lo */
	unsigned lo = (unsigned)lowfd;
	for (;;) {
		unsigned next = ~0u;
		for (size_t i = 0; i < n_keep; i++)
			if (keep[i] >= 0 && (unsigned)keep[i] >= lo && (unsigned)keep[i] < next)
				next = (unsigned)keep[i];
		unsigned hi = next == ~0u ? ~0u : next - 1;
		if (next != lo) {
			/* close_range(2) with CLOSE_RANGE_CLOEXEC, Linux 5.11 */
			if (syscall(SYS_close_range, lo, hi, CLOSE_RANGE_CLOEXEC) < 0) {
				if (errno != ENOSYS && errno != EINVAL)
					return kis_error_set(err, KIS_E_INTERNAL, errno,
							     "cannot mark descriptors close-on-exec");
				/* older kernel: one fcntl per possible fd */
				struct rlimit rl;
				unsigned max = 65536;
				if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < max)
					max = (unsigned)rl.rlim_cur;
				for (unsigned fd = lo; fd <= hi && fd < max; fd++)
					if (!is_kept((int)fd, keep, n_keep))
						(void)fcntl((int)fd, F_SETFD, FD_CLOEXEC);
			}
		}
		if (next == ~0u)
			return 0;
		lo = next + 1;
	}
}

/* Highest capability number of this kernel, from cap_last_cap, falling back
 * to probing the bounding set (PR_CAPBSET_READ fails with EINVAL past the
 * last one) where /proc is not mounted. */
static int last_cap(void)
{
	int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char buf[16];
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			int v = 0;
			for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
				v = v * 10 + (buf[i] - '0');
			if (v > 0 && v < 64)
				return v;
		}
	}
	int c = 0;
	while (c < 63 && prctl(PR_CAPBSET_READ, c + 1, 0, 0, 0) >= 0)
		c++;
	return c;
}

/* setgroups/setresgid/setresuid to an unprivileged user. Needs CAP_SETGID
 * and CAP_SETUID in the effective set: call before the capabilities go. */
int kis_switch_user(uid_t uid, gid_t gid, gid_t reach_gid, struct kis_error **err)
{
	if (uid == 0 || gid == 0)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
				     "the sandbox user must not be root (uid %u, gid %u)",
				     (unsigned)uid, (unsigned)gid);
	/* raw syscalls: glibc's wrappers broadcast to every thread through a
	 * signal (setxid), which we neither need (one thread after fork) nor
	 * want between fork and exec */
	if (syscall(SYS_setgroups, reach_gid ? 1 : 0, reach_gid ? &reach_gid : NULL) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot set supplementary groups");
	if (syscall(SYS_setresgid, gid, gid, gid) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot switch to gid %u",
				     (unsigned)gid);
	if (syscall(SYS_setresuid, uid, uid, uid) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot switch to uid %u",
				     (unsigned)uid);
	return 0;
}

static int drop_caps_then(const struct kis_harden_opts *o, struct kis_error **err)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read capabilities");
	bool have_setpcap = data[0].effective & (1u << CAP_SETPCAP);

	/* uid 0 regains a full permitted set at execve (legacy root rule)
	 * unless SECBIT_NOROOT; with an empty bounding set it regains nothing,
	 * but lock NOROOT too where we may, so a bounding-set slip cannot give
	 * root its capabilities back. */
	if (have_setpcap) {
		int bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
			   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
			   SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
		if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot set securebits");
	}
	int last = last_cap();
	for (int c = 0; c <= last; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
			/* EINVAL: cap unknown to this kernel. EPERM without
			 * CAP_SETPCAP: an unprivileged engine cannot empty the
			 * bounding set, and no_new_privs already stops execve
			 * from granting anything. */
			if (errno == EINVAL || (errno == EPERM && !have_setpcap))
				continue;
			return kis_error_set(err, KIS_E_INTERNAL, errno,
					     "cannot drop capability %d from the bounding set", c);
		}
	}
	/* the bounding set is empty now; setuid still has CAP_SETUID in the
	 * effective set (the bounding set only limits what execve may add) */
	if (o && o->set_user)
		TRY(kis_switch_user(o->uid, o->gid, o->reach_gid, err));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot clear ambient capabilities");
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot drop capabilities");
	return 0;
}

int kis_drop_caps(struct kis_error **err)
{
	return drop_caps_then(NULL, err);
}

int kis_drop_cap(int cap, struct kis_error **err)
{
	/* capabilities(7): the bounding set limits what execve may grant
	 * (root's legacy rule grants F(permitted) = all, masked by it), so the
	 * capability goes from there first, then from the ambient, inheritable,
	 * permitted and effective sets. PR_CAPBSET_DROP needs CAP_SETPCAP;
	 * without it (an unprivileged engine) the capability is not ours to
	 * lose, and not in our sets either. */
	if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL && errno != EPERM)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot drop capability %d from the bounding set", cap);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, cap, 0, 0) < 0 && errno != EINVAL)
		return kis_error_set(err, KIS_E_INTERNAL, errno,
				     "cannot lower ambient capability %d", cap);
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot read capabilities");
	unsigned w = (unsigned)cap / 32, bit = 1u << ((unsigned)cap % 32);
	data[w].effective &= ~bit;
	data[w].permitted &= ~bit;
	data[w].inheritable &= ~bit;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot drop capability %d", cap);
	return 0;
}

int kis_harden_self(const struct kis_harden_opts *o, struct kis_error **err)
{
	static const struct kis_harden_opts none;
	if (!o)
		o = &none;
	/* rlimits first: lowering needs nothing, but a clamp of the hard limit
	 * must happen while we still could have raised it */
	if (o->limits)
		TRY(kis_set_rlimits(o->limits, err));
	TRY(kis_cloexec_fds_from(3, o->keep_fds, o->n_keep, err));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot set no_new_privs");
	return drop_caps_then(o, err);
}
