/* SPDX-License-Identifier: MIT */
/* Unit tests of egress's input side: network.allow's strict grammar (every
 * value that reaches an nft rule passes here first) and the ruleset built
 * from the parsed values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <net/route.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "kis/profile.h"
#include "net/egress.h"

static void expect_dest(const char *s, uint32_t addr, unsigned prefix, unsigned lo, unsigned hi)
{
	struct kis_net_dest d;
	char why[160];
	if (kis_net_dest_parse(s, &d, why, sizeof(why)) < 0)
		fail_msg("'%s' refused: %s", s, why);
	assert_int_equal(d.addr, addr);
	assert_int_equal(d.prefix, prefix);
	assert_int_equal(d.port_lo, lo);
	assert_int_equal(d.port_hi, hi);
}

static void test_good_destinations(void **state)
{
	(void)state;
	expect_dest("203.0.113.10", 0xcb00710au, 32, 0, 0);
	expect_dest("203.0.113.0/24", 0xcb007100u, 24, 0, 0);
	expect_dest("203.0.113.0/24:443", 0xcb007100u, 24, 443, 443);
	expect_dest("198.51.100.7:1000-2000", 0xc6336407u, 32, 1000, 2000);
	expect_dest("0.0.0.0/0", 0, 0, 0, 0);
	expect_dest("10.20.0.0/16:65535", 0x0a140000u, 16, 65535, 65535);
}

static void test_bad_destinations_are_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.4/", "1.2.3.4/33",
		"1.2.3.4/08", "10.0.0.1/8", "1.2.3.4:", "1.2.3.4:0", "1.2.3.4:65536",
		"1.2.3.4:99999999999", "1.2.3.4:9-3", "1.2.3.4:1-", "1.2.3.4:-1", "-1.2.3.4",
		"+1.2.3.4", " 1.2.3.4", "1.2.3.4 ", "1.2.3.4\n", "1.2.3.4;", "1.2.3.4; flush ruleset",
		"1.2.3.4 accept", "1.2.3.4/24 } accept", "::1", "fe80::1", "[::1]:80", "::ffff:1.2.3.4",
		"example.com", "0x7f.0.0.1", "1.2.3.4:80:81", "1.2.3.4/32/32", "1.2.3.4:08",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct kis_net_dest d;
		char why[160] = "";
		if (kis_net_dest_parse(bad[i], &d, why, sizeof(why)) == 0)
			fail_msg("'%s' was accepted", bad[i]);
		assert_true(why[0] != '\0');
	}
}

static void test_format_round_trips(void **state)
{
	(void)state;
	static const char *const forms[] = {"203.0.113.0/24", "203.0.113.10/32:7",
					    "198.51.100.0/24:1000-2000"};
	for (size_t i = 0; i < 3; i++) {
		struct kis_net_dest d;
		char why[160], out[48];
		assert_int_equal(kis_net_dest_parse(forms[i], &d, why, sizeof(why)), 0);
		kis_net_dest_format(&d, out, sizeof(out));
		assert_string_equal(out, forms[i]);
	}
}

static size_t find(const char *hay, const char *needle)
{
	const char *p = strstr(hay, needle);
	if (!p)
		fail_msg("ruleset lacks '%s':\n%s", needle, hay);
	return (size_t)(p - hay);
}

static void test_ruleset_order(void **state)
{
	(void)state;
	struct kis_net_dest allow[2];
	char why[160];
	assert_int_equal(kis_net_dest_parse("10.20.0.0/16", &allow[0], why, sizeof(why)), 0);
	assert_int_equal(kis_net_dest_parse("203.0.113.10:7", &allow[1], why, sizeof(why)), 0);
	char *r = kis_egress_ruleset(allow, 2, true);
	assert_non_null(r);
	size_t dns = find(r, "ip daddr 10.0.2.3 udp dport 53 accept");
	size_t meta = find(r, "ip daddr 169.254.0.0/16 reject");
	size_t lo = find(r, "ip daddr 127.0.0.0/8 reject");
	size_t priv_ok = find(r, "ip daddr 10.20.0.0/16 accept");
	size_t priv_no = find(r, "ip daddr 10.0.0.0/8 reject");
	size_t pub = find(r, "ip daddr 203.0.113.10/32 meta l4proto { tcp, udp } th dport 7-7 accept");
	assert_true(dns < meta && meta < priv_ok && lo < priv_ok && priv_ok < priv_no &&
		    priv_no < pub);
	/* an allow list leaves no blanket accept */
	assert_null(strstr(r, "\t\taccept\n"));
	find(r, "policy drop");
	find(r, "chain input");
	free(r);
	/* no list: every public destination, after the refusals */
	r = kis_egress_ruleset(NULL, 0, false);
	assert_non_null(r);
	assert_true(find(r, "ip daddr 192.168.0.0/16 reject") < find(r, "\t\taccept\n"));
	free(r);
}

static void test_profile_field(void **state)
{
	(void)state;
	struct kis_profile p;
	kis_profile_init(&p);
	struct kis_error *e = NULL;
	const char *j = "{\"network\": {\"mode\": \"egress\", \"allow\": [\"203.0.113.0/24:443\"]}}";
	assert_int_equal(kis_profile_merge_json(&p, j, strlen(j), &e), 0);
	assert_true(p.net_allow_set);
	assert_int_equal(p.n_net_allow, 1);
	assert_int_equal(kis_profile_check_hatches(&p, &e), 0);
	kis_profile_release(&p);
	kis_profile_init(&p);
	const char *bad = "{\"network\": {\"mode\": \"egress\", \"allow\": [\"1.2.3.4\", 7]}}";
	assert_int_equal(kis_profile_merge_json(&p, bad, strlen(bad), &e), -1);
	assert_int_equal(e->code, KIS_E_INVALID_PROFILE);
	assert_non_null(strstr(e->message, "network.allow[1]"));
	kis_error_free(e);
	e = NULL;
	kis_profile_release(&p);
	kis_profile_init(&p);
	assert_int_equal(kis_profile_set(&p, "network.allow", "1.2.3.4", &e), 0);
	assert_int_equal(kis_profile_check_hatches(&p, &e), -1); /* mode is off */
	assert_int_equal(e->code, KIS_E_INVALID_PROFILE);
	kis_error_free(e);
	kis_profile_release(&p);
}

/* ---- a pod's link (kis_pod_link_read) ----
 * A network namespace of the test's own (unshare, then back), so no host
 * interface or route is touched; root only (skipped otherwise). */

static int own_netns(int *home)
{
	*home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (*home < 0 || unshare(CLONE_NEWNET) < 0)
		return -1;
	return open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
}

static void back_home(int home)
{
	assert_int_equal(setns(home, CLONE_NEWNET), 0);
	close(home);
}

static ino_t ns_ino(void)
{
	struct stat st;
	assert_int_equal(stat("/proc/thread-self/ns/net", &st), 0);
	return st.st_ino;
}

static void sin_set(struct sockaddr *sa, const char *ip)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)(void *)sa;
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, ip, &sin->sin_addr), 1);
}

static void test_pod_link_without_an_interface_is_none(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	ino_t before = ns_ino();
	int home, ns = own_netns(&home);
	if (ns < 0)
		skip();
	back_home(home);
	struct kis_pod_link l;
	struct kis_error *err = NULL;
	/* lo only: nothing to give the guest, which keeps its loopback */
	assert_int_equal(kis_pod_link_read(ns, &l, &err), 1);
	assert_null(err);
	assert_string_equal(l.addr, "");
	/* the thread is back in its own namespace */
	assert_int_equal(ns_ino(), before);
	close(ns);
}

static void test_pod_link_reads_address_prefix_gateway_mtu(void **state)
{
	(void)state;
	if (geteuid() != 0 || access("/dev/net/tun", R_OK | W_OK) < 0)
		skip();
	int home, ns = own_netns(&home);
	if (ns < 0)
		skip();
	/* a tun in the test's namespace: 10.88.9.7/24, MTU 1400, up, a
	 * default route through 10.88.9.1 (netdevice(7), route(4)) */
	int tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "kispod0");
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok = tun >= 0 && s >= 0 && ioctl(tun, TUNSETIFF, &ifr) == 0;
	sin_set(&ifr.ifr_addr, "10.88.9.7");
	ok = ok && ioctl(s, SIOCSIFADDR, &ifr) == 0;
	sin_set(&ifr.ifr_netmask, "255.255.255.0");
	ok = ok && ioctl(s, SIOCSIFNETMASK, &ifr) == 0;
	ifr.ifr_mtu = 1400;
	ok = ok && ioctl(s, SIOCSIFMTU, &ifr) == 0;
	ok = ok && ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
	ifr.ifr_flags |= IFF_UP;
	ok = ok && ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
	struct rtentry rt = {0};
	sin_set(&rt.rt_dst, "0.0.0.0");
	sin_set(&rt.rt_genmask, "0.0.0.0");
	sin_set(&rt.rt_gateway, "10.88.9.1");
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	rt.rt_dev = (char *)"kispod0";
	ok = ok && ioctl(s, SIOCADDRT, &rt) == 0;
	if (s >= 0)
		close(s);
	back_home(home);
	assert_true(ok);
	struct kis_pod_link l;
	struct kis_error *err = NULL;
	assert_int_equal(kis_pod_link_read(ns, &l, &err), 0);
	assert_string_equal(l.addr, "10.88.9.7");
	assert_int_equal(l.prefix, 24);
	assert_string_equal(l.gateway, "10.88.9.1");
	assert_int_equal(l.mtu, 1400);
	assert_string_equal(l.ifname, "kispod0");
	close(tun);
	close(ns);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_destinations),
		cmocka_unit_test(test_bad_destinations_are_refused),
		cmocka_unit_test(test_format_round_trips),
		cmocka_unit_test(test_ruleset_order),
		cmocka_unit_test(test_profile_field),
		cmocka_unit_test(test_pod_link_without_an_interface_is_none),
		cmocka_unit_test(test_pod_link_reads_address_prefix_gateway_mtu),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
