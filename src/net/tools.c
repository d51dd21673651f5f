/* SPDX-License-Identifier: MIT */
/* Egress's helpers, pasta and passt: where their binaries are, whether
 * this host can carry egress, and how either is started (through exec). */
#include "core/util.h"

#include <cpuid.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "core/io.h"
#include "core/record.h"
#include "net/egress_internal.h"

static const char *find(const char *const *cands, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (access(cands[i], X_OK) == 0)
			return cands[i];
	return NULL;
}

const char *egress_pasta_path(void)
{
	static const char *const c[] = {"/usr/bin/pasta", "/bin/pasta", "/usr/local/bin/pasta"};
	return find(c, ARRAY_SIZE(c));
}

const char *egress_passt_path(void)
{
	static const char *const c[] = {"/usr/bin/passt", "/bin/passt", "/usr/local/bin/passt"};
	return find(c, ARRAY_SIZE(c));
}

/* AVX2 usable: CPUID.(7,0):EBX bit 5, and the OS saves the YMM state
 * (CPUID.1:ECX OSXSAVE and AVX, XCR0 bits 1 and 2; Intel SDM vol. 1,
 * 14.3 "Detection of Intel AVX instructions"), as libgcc's
 * __builtin_cpu_supports("avx2") decides. Asked here, only when egress
 * starts a helper: __builtin_cpu_supports links libgcc's constructor,
 * which runs its ~10 CPUID at every start of kis, and a CPUID traps to
 * the hypervisor on a virtual machine (~12 us each on this one). */
static bool cpu_has_avx2(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
		return false;
	unsigned xlo, xhi;
	__asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
	if ((xlo & 0x6) != 0x6)
		return false;
	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2);
}

/* The binary to exec for pasta or passt (argv[0] keeps the name, which
 * picks the mode). On a CPU with AVX2 passt re-execs itself as
 * passt.avx2 at start (its arch.c: a second execve and dynamic link, ~10
 * to 30 ms here); exec'ing that build directly skips it. */
const char *egress_exec_path(const char *tool)
{
	static const char *const c[] = {"/usr/bin/passt.avx2", "/bin/passt.avx2",
					"/usr/local/bin/passt.avx2"};
	const char *avx2 = cpu_has_avx2() ? find(c, ARRAY_SIZE(c)) : NULL;
	return avx2 ? avx2 : tool;
}

const char *kis_egress_unavailable(void)
{
	return kis_egress_unavailable_for(false);
}

const char *kis_egress_unavailable_for(bool vm)
{
	struct stat st;
	if (geteuid() != 0)
		return "egress needs the engine as root (a network namespace and a tun node for "
		       "pasta)";
	if (!egress_pasta_path())
		return "pasta is not installed (Debian package passt)";
	if (vm && !egress_passt_path())
		return "passt is not installed (Debian package passt)";
	if (stat("/dev/net/tun", &st) < 0 || !S_ISCHR(st.st_mode))
		return "this host has no /dev/net/tun";
	return NULL;
}

const char *const egress_tool_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

int egress_clear_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);
	return fl < 0 ? -1 : fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
}


/* Start a helper (pasta, passt): as our child, dying with us, its stdout
 * and stderr out_fd and err_fd; or detached (a session's), both /dev/null.
 * Its pid and a pidfd on it into *pid and *pidfd, and the run's owner
 * notes it, so a sweep ends it if we die (engine/owner.h). */
int egress_spawn_helper(struct kis_spawn *sp, bool die_with_us, int out_fd, int err_fd,
			pid_t *pid, int *pidfd, struct kis_error **err)
{
	pid_t p = -1;
	/* a session's: the creator's until the session is published */
	sp->tethered = !die_with_us;
	if (die_with_us)
		TRY(kis_spawn_start(sp, out_fd, err_fd, &p, err));
	else
		TRY(kis_spawn_detached(sp, &p, err));
	*pid = p;
	*pidfd = (int)syscall(SYS_pidfd_open, p, 0);
	if (kis_owner_active())
		(void)kis_owner_note("pid", "%d %llu", (int)p, kis_proc_starttime(p));
	return 0;
}

