/* SPDX-License-Identifier: MIT */
/* The matrix's violator (tests/integration/test_matrix.py): one static
 * program that breaks one limit on request, so every backend, the microvm's
 * guest included, runs the same attempt. Run only inside a sandbox.
 *
 *   violate burn N SECS      N processes each burn SECS of CPU (a '.' per 10 ms)
 *   violate mem BYTES        allocate and touch BYTES
 *   violate childmem BYTES   a child allocates BYTES; the parent exits 0 after
 *   violate fork N           N processes at once, each holding on; prints how many forks failed
 *   violate fsize BYTES      write a file of BYTES in the cwd
 *   violate nofile N         open N descriptors; prints how many opened
 *   violate out BYTES        write BYTES to stdout
 *   violate sleep SECS
 *   violate raise            try to raise RLIMIT_NOFILE and RLIMIT_FSIZE past their hard limits
 *   violate leave            try to move itself to the root of each cgroup hierarchy
 *   violate net              connect to 127.0.0.1:9 and to 192.0.2.1:9 (TEST-NET-1);
 *                            prints the errno name of each ("0" connected, "INPROGRESS")
 *   violate env NAME         prints NAME's value or "unset"
 *   violate peek PATH        exits 10 if PATH opens for reading, 0 if not
 *   violate nproc            prints the number of online CPUs
 * Prints one line "violate: WHAT RESULT" on stderr. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Burn secs of CPU, writing one '.' to stdout per 10 ms burnt: the dots
 * of all the processes count the CPU they got before the limit ended them,
 * whatever the load on the machine. */
static void burn(double secs)
{
	volatile unsigned long x = 0;
	double t0 = cpu_now(), mark = t0;
	while (cpu_now() - t0 < secs) {
		for (int i = 0; i < 20000; i++)
			x += (unsigned long)i;
		if (cpu_now() - mark >= 0.01) {
			mark += 0.01;
			if (write(1, ".", 1) < 0)
				_exit(7);
		}
	}
}

static void touch(size_t n)
{
	char *p = malloc(n);
	if (!p) {
		fprintf(stderr, "violate: mem malloc-failed\n");
		exit(3);
	}
	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	fprintf(stderr, "violate: mem touched %zu\n", n);
}

static int leave(void)
{
	static const char *const procs[] = {
		"/sys/fs/cgroup/cgroup.procs",        "/sys/fs/cgroup/unified/cgroup.procs",
		"/sys/fs/cgroup/pids/cgroup.procs",   "/sys/fs/cgroup/memory/cgroup.procs",
		"/sys/fs/cgroup/cpuacct/cgroup.procs",
	};
	char self[32];
	snprintf(self, sizeof(self), "%d\n", (int)getpid());
	int moved = 0;
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		int fd = open(procs[i], O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (write(fd, self, strlen(self)) > 0) {
			fprintf(stderr, "violate: leave moved %s\n", procs[i]);
			moved++;
		}
		close(fd);
	}
	fprintf(stderr, "violate: leave %s\n", moved ? "ESCAPED" : "refused");
	return moved ? 10 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	const char *what = argv[1];
	unsigned long long a = argc > 2 ? strtoull(argv[2], NULL, 0) : 0;
	double b = argc > 3 ? atof(argv[3]) : 0;
	if (!strcmp(what, "burn")) {
		for (unsigned long long i = 1; i < a; i++)
			if (fork() == 0) {
				burn(b);
				_exit(0);
			}
		burn(b);
		while (wait(NULL) > 0)
			;
		fprintf(stderr, "violate: burn done\n");
		return 0;
	}
	if (!strcmp(what, "mem")) {
		touch((size_t)a);
		return 0;
	}
	if (!strcmp(what, "childmem")) {
		pid_t p = fork();
		if (p == 0) {
			touch((size_t)a);
			_exit(0);
		}
		int st = 0;
		waitpid(p, &st, 0);
		fprintf(stderr, "violate: childmem child %s %d\n",
			WIFSIGNALED(st) ? "signaled" : "exited",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		return 0;
	}
	if (!strcmp(what, "fork")) {
		int failed = 0;
		for (unsigned long long i = 0; i < a; i++) {
			pid_t p = fork();
			if (p == 0) {
				pause();
				_exit(0);
			}
			if (p < 0)
				failed++;
		}
		fprintf(stderr, "violate: fork failed %d\n", failed);
		kill(0, SIGKILL);
		return failed ? 4 : 0;
	}
	if (!strcmp(what, "fsize")) {
		/* SIGXFSZ left at its default: the cut ends us, as any program */
		int fd = open("violate.out", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0) {
			fprintf(stderr, "violate: fsize open %s\n", strerror(errno));
			return 3;
		}
		char buf[65536];
		memset(buf, 'x', sizeof(buf));
		unsigned long long done = 0;
		while (done < a) {
			size_t n = a - done < sizeof(buf) ? (size_t)(a - done) : sizeof(buf);
			ssize_t w = write(fd, buf, n);
			if (w <= 0) {
				fprintf(stderr, "violate: fsize cut %llu %s\n", done, strerror(errno));
				unlink("violate.out");
				return 5;
			}
			done += (unsigned long long)w;
		}
		unlink("violate.out");
		fprintf(stderr, "violate: fsize wrote %llu\n", done);
		return 0;
	}
	if (!strcmp(what, "nofile")) {
		unsigned long long n = 0;
		for (; n < a; n++)
			if (open("/dev/null", O_RDONLY) < 0)
				break;
		fprintf(stderr, "violate: nofile opened %llu of %llu\n", n, a);
		return n < a ? 6 : 0;
	}
	if (!strcmp(what, "out")) {
		char buf[4096];
		memset(buf, 'o', sizeof(buf));
		for (unsigned long long done = 0; done < a;) {
			size_t n = a - done < sizeof(buf) ? (size_t)(a - done) : sizeof(buf);
			if (write(1, buf, n) <= 0)
				return 7;
			done += n;
		}
		return 0;
	}
	if (!strcmp(what, "sleep")) {
		sleep((unsigned)a);
		return 0;
	}
	if (!strcmp(what, "raise")) {
		int raised = 0;
		int res[2] = {RLIMIT_NOFILE, RLIMIT_FSIZE};
		for (int i = 0; i < 2; i++) {
			struct rlimit rl;
			getrlimit(res[i], &rl);
			if (rl.rlim_max == RLIM_INFINITY)
				continue;
			struct rlimit up = {.rlim_cur = rl.rlim_max * 2, .rlim_max = rl.rlim_max * 2};
			if (setrlimit(res[i], &up) == 0) {
				raised++;
				fprintf(stderr, "violate: raise %d from %llu\n", res[i],
					(unsigned long long)rl.rlim_max);
			}
		}
		fprintf(stderr, "violate: raise %s\n", raised ? "ESCAPED" : "refused");
		return raised ? 10 : 0;
	}
	if (!strcmp(what, "leave"))
		return leave();
	if (!strcmp(what, "net")) {
		const char *dst[2] = {"127.0.0.1", "192.0.2.1"};
		for (int i = 0; i < 2; i++) {
			int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
			const char *r;
			if (fd < 0) {
				r = errno == EPERM ? "EPERM" : errno == EACCES ? "EACCES" : "ESOCKET";
			} else {
				struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9)};
				inet_pton(AF_INET, dst[i], &sa.sin_addr);
				int c = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
				int e = errno;
				if (c == 0)
					r = "0";
				else if (e == EINPROGRESS) {
					/* the loopback answers at once: wait for it */
					struct timespec ts = {0, 200 * 1000 * 1000};
					nanosleep(&ts, NULL);
					int soe = 0;
					socklen_t l = sizeof(soe);
					getsockopt(fd, SOL_SOCKET, SO_ERROR, &soe, &l);
					r = soe == ECONNREFUSED ? "ECONNREFUSED" : soe ? "EOTHER" : "INPROGRESS";
				} else
					r = e == ECONNREFUSED ? "ECONNREFUSED" : e == ENETUNREACH ? "ENETUNREACH" :
					    e == EPERM ? "EPERM" : e == EACCES ? "EACCES" :
					    e == EHOSTUNREACH ? "EHOSTUNREACH" : "EOTHER";
				close(fd);
			}
			printf("%s=%s\n", i ? "ext" : "lo", r);
		}
		return 0;
	}
	if (!strcmp(what, "env")) {
		const char *v = argc > 2 ? getenv(argv[2]) : NULL;
		printf("%s\n", v ? v : "unset");
		return 0;
	}
	if (!strcmp(what, "nproc")) {
		printf("%ld\n", sysconf(_SC_NPROCESSORS_ONLN));
		return 0;
	}
	if (!strcmp(what, "mount")) {
		/* the matrix's mounts row: argv[2] a read-only mount, argv[3] a
		 * read-write one (seen before: a session's earlier exec wrote it) */
		const char *ro = argc > 3 ? argv[2] : "/data", *rw = argc > 3 ? argv[3] : "/rw";
		char p[512];
		struct stat st;
		printf("ro_read=%s\n", stat(ro, &st) == 0 && S_ISDIR(st.st_mode) ? "yes" : "no");
		snprintf(p, sizeof(p), "%s/kis-matrix-w", ro);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e = errno;
		printf("ro_write=%s\n", fd >= 0 ? "ok" : e == EROFS ? "EROFS" : e == EACCES ? "EACCES" :
#ifdef ENOTCAPABLE
		       e == ENOTCAPABLE ? "ENOTCAPABLE" :
#endif
		       e == EPERM ? "EPERM" : "EOTHER");
		snprintf(p, sizeof(p), "%s/kis-matrix-m.txt", rw);
		printf("rw_seen=%s\n", stat(p, &st) == 0 ? "yes" : "no");
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		printf("rw_write=%s\n", fd >= 0 && write(fd, "m\n", 2) == 2 && close(fd) == 0 ? "ok" : "no");
		return 0;
	}
	if (!strcmp(what, "peek")) {
		int fd = argc > 2 ? open(argv[2], O_RDONLY | O_CLOEXEC) : -1;
		printf("%s\n", fd >= 0 ? "READABLE" : "absent");
		return fd >= 0 ? 10 : 0;
	}
	return 2;
}
