/* SPDX-License-Identifier: MIT */
/* `kis sandbox backends`: the matrix of what this build and this host can
 * enforce, probed now (never written down). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "kis/store.h"
#include "kis/wasm.h"

static void net_modes(unsigned bits, char *buf, size_t n)
{
	buf[0] = '\0';
	for (unsigned m = 0; m < KIS_NET__COUNT; m++)
		if (bits & (1u << m)) {
			size_t o = strlen(buf);
			snprintf(buf + o, n - o, "%s%s", o ? "," : "", kis_net_mode_name(m));
		}
	if (!buf[0])
		snprintf(buf, n, "-");
}

/* Whether the escape hatch h opens something of backend b (its tier, or a
 * network mode it offers): the hatch must be named to use that. */
static bool hatch_concerns(const struct kis_escape_hatch *h, const struct kis_backend *b,
			   unsigned net_modes)
{
	return (h->tier != KIS_TIER__COUNT && b->tier == h->tier) ||
	       (h->net != KIS_NET__COUNT && (net_modes & (1u << h->net)));
}

/* The named escape hatches (README, Security), each with what it
 * weakens and the backends it opens something of. */
static void print_hatches(const struct kis_backend *const *b, const unsigned *net_modes, size_t n)
{
	size_t nh;
	const struct kis_escape_hatch *h = kis_escape_hatches(&nh);
	printf("\nescape hatches (refused as escape_hatch_forbidden unless named):\n");
	for (size_t k = 0; k < nh; k++) {
		printf("  %-22s %-34s %s; concerns:", h[k].flag, h[k].field, h[k].weakens);
		bool any = false;
		for (size_t i = 0; i < n; i++)
			if (hatch_concerns(&h[k], b[i], net_modes[i])) {
				printf("%s %s", any ? "," : "", b[i]->name);
				any = true;
			}
		printf("%s\n", any ? "" : " no backend of this build");
	}
}

static const char *yes_no(bool b)
{
	return b ? "yes" : "-";
}

int cmd_backends(int argc, char **argv)
{
	bool json = false;
	const char *root = NULL;
	for (int i = 1; i < argc; i++) {
		int t = cli_store_flag("backends", argc, argv, &i, &root);
		if (t < 0)
			return -t;
		if (t)
			continue;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			puts("Usage: kis sandbox backends [--json] [--store-root DIR]\n\n"
			     "Probe this host and print, for each backend compiled in, the tier it\n"
			     "serves and what it can enforce here: copy-on-write workspaces, durable\n"
			     "shells, native binaries, network modes, seccomp, snapshots, terminals,\n"
			     "the accelerator (microvm), and why a backend is absent.");
			return 0;
		}
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (argv[i][0] == '-')
			return cli_unknown_option("backends", argv[i],
						  (const char *const[]){"--store-root", NULL});
		else
			return cli_usage_error("backends", "unexpected argument '%s'", argv[i]);
	}
	/* CoW is the store's: every backend runs on a workspace it clones. */
	const char *strategy = "copy";
	bool cow = false, quota_binds_root = false;
	int quota = 0; /* limits.disk_bytes by the store's project quotas */
	char quota_why[200] = "";
	const char *disk_how = "quota";
	struct kis_store *st = NULL;
	struct kis_error *err = NULL;
	if (kis_store_open(root, &st, &err) == 0) {
		cow = kis_store_cow_strategy(st, &strategy) == 1;
		quota = kis_store_disk_quota(st, &quota_binds_root, quota_why, sizeof(quota_why));
		if (quota == 1 && kis_store_disk_how(st))
			disk_how = kis_store_disk_how(st);
		kis_store_free(st);
	}
	kis_error_free(err);
	/* where the microvm's guest is read: the engine's lookup, for this
	 * store (--store-root, else KIS_SANDBOX_ROOT or the default) */
	struct kis_guest_info guest = {0};
	if (kis_guest_locate(root, false, &guest, &err) < 0) {
		kis_error_free(err);
		err = NULL;
	}
	size_t n;
	const struct kis_backend *const *b = kis_backends(&n);
	unsigned hatch_nets[16] = {0}; /* each backend's network modes, for the hatches */
	const size_t max_nets = sizeof(hatch_nets) / sizeof(hatch_nets[0]);
	json_t *arr = json_array();
	char wasm_engines[sizeof(((struct kis_caps *)0)->engines)] = "";
	char vmm_jail[sizeof(((struct kis_caps *)0)->jail)] = "";
	char defaults[8][sizeof(((struct kis_caps *)0)->default_limits) + 16];
	size_t n_defaults = 0;
	if (!json)
		printf("%-12s %-10s %-4s %-6s %-7s %-24s %-8s %-9s %-4s %-6s %-6s %-6s %s\n",
		       "BACKEND", "TIERS", "CoW", "SHELL", "NATIVE", "NETWORK", "SECCOMP", "SNAPSHOT",
		       "TTY", "MOUNTS", "DISK", "ACCEL", "STATUS");
	for (size_t i = 0; i < n; i++) {
		struct kis_caps c;
		kis_backend_probe(b[i], root, true, &c);
		c.cow = cow;
		/* an ordinary user's overlay clone lives in a namespace of its
		 * own: only a backend that joins its layers gets one, the others
		 * a copy (engine/workspace.c) */
		bool copied = geteuid() != 0 && !strcmp(strategy, "overlay") &&
			      !b[i]->own_workspace_view && !b[i]->rootless_layers;
		if (copied)
			c.cow = false;
		/* disk: the microvm bounds its own layer; elsewhere the store's
		 * quotas, which ext4 lets root with its capabilities pass (the
		 * process tier as root) */
		if (quota == 1 && !(c.limits & KIS_LIMIT_DISK) &&
		    (b[i]->tier != KIS_TIER_PROCESS || geteuid() != 0 || quota_binds_root))
			c.limits |= KIS_LIMIT_DISK;
		if (b[i]->tier == KIS_TIER_WASM && c.present)
			snprintf(wasm_engines, sizeof(wasm_engines), "%s", c.engines);
		if (b[i]->tier == KIS_TIER_MICROVM && c.present)
			snprintf(vmm_jail, sizeof(vmm_jail), "%s", c.jail);
		char net[64];
		net_modes(c.present ? c.net_modes : 0, net, sizeof(net));
		if (i < max_nets)
			hatch_nets[i] = c.present ? c.net_modes : 0;
		if (json) {
			/* lists are arrays, absent values null (README, JSON output) */
			json_t *na = json_array();
			for (unsigned m = 0; m < KIS_NET__COUNT; m++)
				if (c.present && (c.net_modes & (1u << m)))
					json_array_append_new(na, json_string(kis_net_mode_name(m)));
			json_t *o = json_pack(
				"{s:s, s:[s], s:b, s:b, s:b, s:b, s:o, s:b, s:b, s:b, s:s?}", "backend",
				b[i]->name, "tiers", kis_tier_name(b[i]->tier), "available", c.present,
				"cow", c.present && c.cow, "shell", c.present && c.shell, "native",
				c.present && c.native, "network", na, "seccomp",
				c.present && c.seccomp, "snapshot", c.present && c.snapshot, "tty",
				c.present && c.tty, "accel", c.accel[0] ? c.accel : NULL);
			json_object_set_new(o, "clone_strategy", json_string(copied ? "copy" : strategy));
			json_object_set_new(o, "mounts", json_boolean(c.present && c.mounts));
			json_t *la = json_array();
			for (unsigned k = 0; k < KIS_LIMIT__COUNT; k++)
				if (c.present && (c.limits & kis_limit_table[k].bit))
					json_array_append_new(la, json_string(kis_limit_table[k].name));
			json_object_set_new(o, "limits", la);
			json_t *ea = NULL; /* the wasm tier's alone */
			if (b[i]->tier == KIS_TIER_WASM) {
				/* the engines that can run a module, best first */
				ea = json_array();
				char eng[sizeof(c.engines)];
				snprintf(eng, sizeof(eng), "%s", c.present ? c.engines : "");
				for (char *sv = NULL, *t = strtok_r(eng, " ", &sv); t;
				     t = strtok_r(NULL, " ", &sv))
					json_array_append_new(ea, json_string(t));
			}
			json_object_set_new(o, "engines", ea ? ea : json_null());
			json_object_set_new(o, "default_limits",
					    c.present && c.default_limits[0] ?
						    json_string(c.default_limits) : json_null());
			json_object_set_new(o, "why_absent",
					    c.present ? json_null() : json_string(c.why_absent));
			json_object_set_new(o, "vmm_jail", c.present && c.jail[0] ?
							   json_string(c.jail) : json_null());
			json_object_set_new(
				o, "guest",
				b[i]->tier == KIS_TIER_MICROVM && guest.assets ?
					json_pack("{s:s, s:s, s:s}", "source",
						  kis_guest_source_name(guest.source), "path",
						  guest.assets, "cache", guest.cache) :
					json_null());
			/* the named escape hatches this backend needs for a tier or
			 * a network mode (kis_escape_hatches) */
			json_t *ha = json_array();
			size_t nh;
			const struct kis_escape_hatch *h = kis_escape_hatches(&nh);
			for (size_t k = 0; k < nh; k++) {
				if (!hatch_concerns(&h[k], b[i], c.present ? c.net_modes : 0))
					continue;
				json_array_append_new(ha, json_pack("{s:s, s:s, s:s, s:s}", "name",
								    h[k].name, "flag", h[k].flag, "field",
								    h[k].field, "weakens", h[k].weakens));
			}
			json_object_set_new(o, "escape_hatches", ha);
			json_array_append_new(arr, o);
			continue;
		}
		/* how limits.disk_bytes binds: the VM's layer, the store's quota or
		 * disk image, or not */
		const char *disk = !c.present || !(c.limits & KIS_LIMIT_DISK) ? "-" :
				   b[i]->tier == KIS_TIER_MICROVM ? "layer" : disk_how;
		printf("%-12s %-10s %-4s %-6s %-7s %-24s %-8s %-9s %-4s %-6s %-6s %-6s %s\n",
		       b[i]->name, kis_tier_name(b[i]->tier), yes_no(c.present && c.cow),
		       yes_no(c.present && c.shell), yes_no(c.present && c.native), net,
		       yes_no(c.present && c.seccomp), yes_no(c.present && c.snapshot),
		       yes_no(c.present && c.tty), yes_no(c.present && c.mounts), disk,
		       c.accel[0] ? c.accel : "-", c.present ? "available" : c.why_absent);
		if (c.present && c.default_limits[0] && n_defaults < sizeof(defaults) / sizeof(defaults[0]))
			snprintf(defaults[n_defaults++], sizeof(defaults[0]), "%s: %s", b[i]->name,
				 c.default_limits);
	}
	if (!json && n_defaults) {
		/* an ordinary user's run: no cgroup binds memory and pids */
		printf("\ndefault memory and pids limits without a cgroup:\n");
		for (size_t k = 0; k < n_defaults; k++)
			printf("  %s\n", defaults[k]);
	}
	if (!json && wasm_engines[0] && !strncmp(wasm_engines, "compiler", 8))
		printf("\nwasm engines: %s (wasm.engine auto: the compiler for a module whose code "
		       "the store has cached, or of at most %u KiB, compiled on its first run; a "
		       "larger one runs interpreted while a background compile fills the cache "
		       "for its next run)\n",
		       wasm_engines, KIS_WASM_AUTO_COMPILE_MAX >> 10);
	else if (!json && wasm_engines[0])
		printf("\nwasm engines: %s (wasm.engine auto takes the first)\n", wasm_engines);
	if (!json && strstr(wasm_engines, "compiler"))
		printf("wasm compiler memory checks: %s\n", kis_wasm_compiler_memory_mode());
	if (!json && guest.assets)
		printf("\nmicrovm guest: %s (%s%s)\n", guest.assets, kis_guest_source_name(guest.source),
		       guest.source == KIS_GUEST_NONE ? ": nothing there; 'kis sandbox guest fetch'" :
							 "");
	if (!json && vmm_jail[0])
		printf("microvm VMM jail: %s\n", vmm_jail);
	if (!json)
		print_hatches(b, hatch_nets, n < max_nets ? n : max_nets);
	kis_guest_info_release(&guest);
	if (json)
		return cli_print_json(arr);
	json_decref(arr);
	return 0;
}
