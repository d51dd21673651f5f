/* SPDX-License-Identifier: MIT */
/* The network probe of tests/integration/test_egress.py for sandboxes with
 * no Python (the microvm guest): the same targets and verdicts as the
 * test's Python PROBE. Static, so it runs from a workspace in any root.
 *
 *   netprobe TARGET...   TARGET: tcp:ADDR:PORT | udp:ADDR:PORT | dns:NAME:PORT,
 *     or tcp6:ADDR:PORT | udp6:ADDR:PORT with an IPv6 ADDR
 *     prints one JSON object, TARGET -> "reached" | "blocked: WHY" | the
 *     name's first A record (dns: asked of resolv.conf's first nameserver,
 *     RFC 1035 4.1, as the C library would)
 *   netprobe listen PORT  listens on 0.0.0.0:PORT, says "ready", then
 *     "escaped: connected from A" or "not escaped" after 6 s
 *   netprobe bench N MIB [ADDR]  for bench/egress.py: the median of N
 *     connects to ADDR:7 (203.0.113.10) and MIB MiB sent to its sink, as
 *     {"connect_ms", "mib_s"} (the Python client's measure) */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int r = poll(&p, 1, ms);
	if (r == 0)
		errno = ETIMEDOUT;
	return r > 0 ? 0 : -1;
}

static int addr_of(const char *a, int port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, a, &sa->sin_addr) == 1 ? 0 : -1;
}

/* An IPv6 address and port (tcp6, udp6 targets) */
static int addr6_of(const char *a, int port, struct sockaddr_in6 *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin6_family = AF_INET6;
	sa->sin6_port = htons((uint16_t)port);
	return inet_pton(AF_INET6, a, &sa->sin6_addr) == 1 ? 0 : -1;
}

/* "reached" when the echo comes back, else why not, in verdict; v6: a
 * target of tcp6 or udp6 */
static void echo(int type, bool v6, const char *a, int port, char *verdict, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t sl = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	char buf[16];
	int s = socket(v6 ? AF_INET6 : AF_INET, type | SOCK_CLOEXEC, 0);
	if (s < 0 || (v6 ? addr6_of(a, port, (struct sockaddr_in6 *)&ss) :
			   addr_of(a, port, (struct sockaddr_in *)&ss)) < 0) {
		snprintf(verdict, n, "blocked: %s", strerror(errno));
		if (s >= 0)
			close(s);
		return;
	}
	if (type == SOCK_STREAM) {
		/* a connect bounded at 2 s (a refused flow of the microvm times out:
		 * passt does not turn the refusal into a reset) */
		struct timeval tv = {2, 0};
		setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	ssize_t k = -1;
	/* UDP: asked again each 700 ms, as a resolver does (the first
	 * datagram to a new neighbour may be lost while it is resolved) */
	int tries = type == SOCK_STREAM ? 1 : 3;
	if (connect(s, (struct sockaddr *)&ss, sl) == 0)
		for (int t = 0; t < tries && k < 0; t++)
			if (send(s, "ping", 4, 0) == 4 &&
			    wait_fd(s, POLLIN, type == SOCK_STREAM ? 3000 : 700) == 0)
				k = recv(s, buf, sizeof(buf), 0);
	int e = errno;
	close(s);
	if (k == 4 && !memcmp(buf, "ping", 4))
		snprintf(verdict, n, "reached");
	else if (k >= 0)
		snprintf(verdict, n, "no echo");
	else
		snprintf(verdict, n, "blocked: %s", strerror(e));
}

static int nameserver(char *out, size_t n)
{
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[256];
	int r = -1;
	while (f && r < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "nameserver %63s", out) == 1 && strlen(out) < n)
			r = 0;
	if (f)
		fclose(f);
	return r;
}

static void dns(const char *name, char *verdict, size_t n)
{
	char ns[64];
	unsigned char q[512], a[512];
	if (nameserver(ns, sizeof(ns)) < 0) {
		snprintf(verdict, n, "blocked: no nameserver");
		return;
	}
	/* header: id, RD, one question; then the name's labels, type A, class IN */
	size_t len = 12;
	memset(q, 0, sizeof(q));
	q[0] = 0x4b;
	q[1] = 0x49;
	q[2] = 0x01;
	q[5] = 1;
	for (const char *p = name; *p && len < 400;) {
		size_t l = strcspn(p, ".");
		q[len++] = (unsigned char)l;
		memcpy(q + len, p, l);
		len += l;
		p += l + (p[l] == '.');
	}
	q[len++] = 0;
	q[len++] = 0, q[len++] = 1, q[len++] = 0, q[len++] = 1;
	struct sockaddr_in sa;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ssize_t k = -1;
	for (int t = 0; s >= 0 && t < 3 && k < 0; t++)
		if (addr_of(ns, 53, &sa) == 0 &&
		    sendto(s, q, len, 0, (struct sockaddr *)&sa, sizeof(sa)) == (ssize_t)len &&
		    wait_fd(s, POLLIN, 1000) == 0)
			k = recv(s, a, sizeof(a), 0);
	int e = errno;
	if (s >= 0)
		close(s);
	if (k < (ssize_t)len || a[0] != q[0] || a[1] != q[1] || (a[3] & 0x0f) || !(a[6] | a[7])) {
		snprintf(verdict, n, "blocked: %s", k < 0 ? strerror(e) : "no answer");
		return;
	}
	/* the first answer after our question: a compressed name, type, class,
	 * ttl, rdlength 4, the address */
	size_t i = len;
	if (i + 16 <= (size_t)k && (a[i] & 0xc0) == 0xc0 && a[i + 3] == 1 && a[i + 11] == 4) {
		snprintf(verdict, n, "%u.%u.%u.%u", a[i + 12], a[i + 13], a[i + 14], a[i + 15]);
		return;
	}
	snprintf(verdict, n, "blocked: no A record");
}

static int listen_mode(int port)
{
	struct sockaddr_in sa;
	int one = 1, s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || addr_of("0.0.0.0", port, &sa) < 0 ||
	    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 4) < 0) {
		printf("cannot listen: %s\n", strerror(errno));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	if (wait_fd(s, POLLIN, 6000) < 0) {
		printf("not escaped\n");
		return 0;
	}
	socklen_t sl = sizeof(sa);
	int c = accept(s, (struct sockaddr *)&sa, &sl);
	char from[32] = "?";
	if (c >= 0)
		inet_ntop(AF_INET, &sa.sin_addr, from, sizeof(from));
	printf("escaped: connected from %s\n", from);
	return 0;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int bench(int n, int mib, const char *to)
{
	struct sockaddr_in sa;
	static double lat[10000];
	static char buf[1 << 20];
	if (n < 1 || n > 10000 || mib < 1 || addr_of(to, 7, &sa) < 0)
		return 2;
	for (int i = 0; i < n; i++) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		double t = now_ms();
		if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			perror("netprobe: connect");
			return 1;
		}
		lat[i] = now_ms() - t;
		close(s);
	}
	qsort(lat, (size_t)n, sizeof(lat[0]), cmp_double);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("netprobe: connect");
		return 1;
	}
	memset(buf, 'x', sizeof(buf));
	memcpy(buf, "sink", 4);
	double t = now_ms();
	for (int i = 0; i < mib; i++)
		for (size_t off = 0; off < sizeof(buf);) {
			ssize_t k = send(s, buf + off, sizeof(buf) - off, MSG_NOSIGNAL);
			if (k <= 0) {
				perror("netprobe: send");
				return 1;
			}
			off += (size_t)k;
		}
	shutdown(s, SHUT_WR);
	while (recv(s, buf, sizeof(buf), 0) > 0)
		;
	double dt = (now_ms() - t) / 1e3;
	close(s);
	printf("{\"connect_ms\": %.3f, \"mib_s\": %.1f}\n",
	       n % 2 ? lat[n / 2] : (lat[n / 2 - 1] + lat[n / 2]) / 2, mib / dt);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "bench"))
		return bench(atoi(argv[2]), atoi(argv[3]), argc == 5 ? argv[4] : "203.0.113.10");
	if (argc == 3 && !strcmp(argv[1], "listen"))
		return listen_mode(atoi(argv[2]));
	printf("{");
	for (int i = 1; i < argc; i++) {
		/* KIND:ADDR:PORT, the port after the last colon (an IPv6 ADDR has
		 * colons of its own) */
		char kind[8], addr[256], verdict[300];
		int port = 0;
		const char *last = strrchr(argv[i], ':');
		if (sscanf(argv[i], "%7[a-z0-9]:%255s", kind, addr) != 2 || !last ||
		    sscanf(last + 1, "%d", &port) != 1 || strlen(addr) <= strlen(last)) {
			fprintf(stderr, "netprobe: bad target '%s'\n", argv[i]);
			return 2;
		}
		addr[strlen(addr) - strlen(last)] = '\0';
		bool v6 = !strcmp(kind, "tcp6") || !strcmp(kind, "udp6");
		if (!strcmp(kind, "tcp") || !strcmp(kind, "tcp6"))
			echo(SOCK_STREAM, v6, addr, port, verdict, sizeof(verdict));
		else if (!strcmp(kind, "udp") || !strcmp(kind, "udp6"))
			echo(SOCK_DGRAM, v6, addr, port, verdict, sizeof(verdict));
		else
			dns(addr, verdict, sizeof(verdict));
		printf("%s\"%s\": \"%s\"", i > 1 ? ", " : "", argv[i], verdict);
	}
	printf("}\n");
	return 0;
}
