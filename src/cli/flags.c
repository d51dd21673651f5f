/* SPDX-License-Identifier: MIT */
/* The flags of every verb that takes a profile or a part of one (run,
 * create, exec, shell): one table, each flag with the verbs that accept it,
 * each mapping onto one profile field (DESIGN.md, The command line);
 * `--flag value` and `--flag=value` alike. --profile FILE is read first and
 * the flags then override it field by field, in order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "flags.h"
#include "kis/backend.h"
#include "kis/profile.h"

struct flag {
	const char *name;
	const char *field; /* NULL for the CLI's own options */
	bool takes_value;
	unsigned verbs;    /* CLI_V_* */
	const char *help;
	/* the values an enum flag takes, '|'-joined or a {key} of choices():
	 * a mistyped one gets a "did you mean" */
	const char *values;
};

#define RC (CLI_V_RUN | CLI_V_CREATE)
#define ALL (CLI_V_RUN | CLI_V_CREATE | CLI_V_EXEC | CLI_V_SHELL)
/* An exec's limits are its command's: the ones the agent applies to one
 * command (clock, CPU, output, rlimits); memory and pids belong to the
 * session's cgroup and are set at create. */
#define PER_EXEC ALL

static const struct flag flags[] = {
	{"--profile", NULL, true, RC, "FILE  read the profile (JSON) from FILE first", NULL},
	{"--tier", "tier", true, RC, "{tiers}  the tier (default auto)", "{tiers}"},
	{"--backend", "backend", true, RC, "{backends}  pin a backend inside the tier", "{backends}"},
	{"--base", "base", true, RC, "ID  clone a fresh workspace from this base", NULL},
	{"--workspace", "workspace", true, RC, "ID  use this existing workspace", NULL},
	{"--keep", "keep", false, RC, "keep the workspace a --base run cloned", NULL},
	{"--root", "root", true, RC, "host|workspace  system view, or the workspace as /",
	 "host|workspace"},
	{"--net", "network.mode", true, RC, "{nets}  (default off)", "{nets}"},
	{"--net-allow", "network.allow", true, RC,
	 "DEST  egress only to A.B.C.D[/N][:PORT[-PORT]] (repeatable)", NULL},
#define LIMIT_FLAG(f, B, k, d, lo, m, pe, fl, h) {fl, "limits." #f, true, (pe) ? PER_EXEC : RC, h, NULL},
	KIS_LIMITS(LIMIT_FLAG)
#undef LIMIT_FLAG
	{"--env", "env", true, ALL, "K=V  set an environment variable (repeatable)", NULL},
	{"--cwd", "cwd", true, ALL, "DIR  working directory inside the sandbox", NULL},
	{"--mount", "mounts", true, RC,
	 "ID:TARGET[:ro]  a base (read-only) or workspace at TARGET (repeatable)", NULL},
	{"--tty", "tty.enabled", false, ALL, "a real terminal for the command", NULL},
	{"--accel", "microvm.accel", true, RC, "A  auto|kvm|tcg: the microvm's accelerator",
	 "auto|kvm|tcg"},
	{"--vcpus", "microvm.vcpus", true, RC, "N  the microvm's virtual CPUs (1 to 64, default 1)", NULL},
	{"--wasm-engine", "wasm.engine", true, RC,
	 "E  auto|interpreter|compiler: what runs a WebAssembly module", "auto|interpreter|compiler"},
	{"--preopen", "wasm.preopen", true, RC,
	 "P  workspace|none: a WASI module's directory (fd 3), default workspace", "workspace|none"},
	{"--allow-process-tier", "escape_hatch.allow_process_tier", false, RC,
	 "escape hatch: allow the unconfined process tier", NULL},
	{"--allow-net-host", "escape_hatch.allow_net_host", false, RC,
	 "escape hatch: allow host networking", NULL},
	/* main takes --json=pretty and --quiet out before a verb parses */
	{"--json", NULL, false, CLI_V_RUN | CLI_V_EXEC | CLI_V_SHELL,
	 "print the result as one line of JSON (streams captured); --json=pretty indents", NULL},
	{"--json", NULL, false, CLI_V_CREATE,
	 "print {\"id\"} as one line of JSON; --json=pretty indents", NULL},
	{"--quiet", NULL, false, ALL, "no progress lines on stderr", NULL},
	{"--dry-run", NULL, false, RC, "print the plan and run nothing", NULL},
	{"--store-root", NULL, true, ALL,
	 "DIR  the store (default $KIS_SANDBOX_ROOT, else /var/lib/kis/sandbox as root, "
	 "$XDG_STATE_HOME/kis/sandbox otherwise)", NULL},
};

/* The choices a help text names by {tiers}, {nets} or {backends}, joined
 * by '|': read from the library's own tables (the tier and network names
 * of core/names.c through the public kis_tier_name and kis_net_mode_name,
 * the backends' registry), never written here; the bash completion reads
 * them back from this help (scripts/completion/kis.bash, _kis_choices). */
static void add_choice(char *out, size_t len, size_t *l, const char *name)
{
	if (*l + 1 >= len)
		return;
	int k = snprintf(out + *l, len - *l, "%s%s", *l ? "|" : "", name);
	*l = k < 0 ? *l : *l + (size_t)k >= len ? len - 1 : *l + (size_t)k;
}

static void choices(const char *key, char *out, size_t len)
{
	size_t l = 0;
	out[0] = '\0';
	if (!strcmp(key, "tiers")) {
		for (int t = 0; t < KIS_TIER__COUNT; t++)
			add_choice(out, len, &l, kis_tier_name((enum kis_tier)t));
	} else if (!strcmp(key, "nets")) {
		for (int m = 0; m < KIS_NET__COUNT; m++)
			add_choice(out, len, &l, kis_net_mode_name((enum kis_net_mode)m));
	} else if (!strcmp(key, "backends")) {
		size_t n = 0;
		const struct kis_backend *const *b = kis_backends(&n);
		for (size_t i = 0; i < n; i++)
			add_choice(out, len, &l, b[i]->name);
	}
}

/* h with each {key} replaced by its choices. */
static void expand(const char *h, char *out, size_t len)
{
	size_t l = 0;
	while (*h && l + 1 < len) {
		const char *end = *h == '{' ? strchr(h, '}') : NULL;
		/* a {key} is lower-case letters: {"id"} is text */
		if (end && end - h < 16 && end > h + 1 &&
		    strspn(h + 1, "abcdefghijklmnopqrstuvwxyz") == (size_t)(end - h - 1)) {
			char key[16], list[256];
			snprintf(key, sizeof(key), "%.*s", (int)(end - h - 1), h + 1);
			choices(key, list, sizeof(list));
			for (const char *c = list; *c && l + 1 < len; c++)
				out[l++] = *c;
			h = end + 1;
			continue;
		}
		out[l++] = *h++;
	}
	out[l < len ? l : len - 1] = '\0';
}

void cli_flags_help(FILE *f, unsigned verb)
{
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (!(flags[i].verbs & verb))
			continue;
		char text[512];
		expand(flags[i].help, text, sizeof(text));
		const char *h = text;
		const char *sp = flags[i].takes_value ? strchr(h, ' ') : NULL;
		char left[64];
		if (sp)
			snprintf(left, sizeof(left), "%s %.*s", flags[i].name, (int)(sp - h), h);
		else
			snprintf(left, sizeof(left), "%s", flags[i].name);
		fprintf(f, "  %-30s %s\n", left, sp ? sp + 2 : h);
	}
}

void cli_profile_flags_help(FILE *f)
{
	cli_flags_help(f, CLI_V_RUN);
}

/* The entry of that name for this verb, else any of that name (to say
 * it is not this verb's). */
static const struct flag *lookup(const char *arg, size_t len, unsigned vbit)
{
	const struct flag *any = NULL;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (strlen(flags[i].name) == len && !strncmp(flags[i].name, arg, len)) {
			if (flags[i].verbs & vbit)
				return &flags[i];
			any = any ? any : &flags[i];
		}
	return any;
}

static int unknown_flag(const char *verb, unsigned vbit, const char *arg)
{
	const char *known[sizeof(flags) / sizeof(flags[0]) + 1];
	size_t n = 0;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (flags[i].verbs & vbit)
			known[n++] = flags[i].name;
	known[n] = NULL;
	return cli_unknown_option(verb, arg, known);
}

/* The rule (README, Errors): a value wrong for a profile field is
 * invalid_profile whether a flag or a --profile file gave it, as the
 * library's kis_profile_set says; from a flag the message names the flag
 * first, then the field ("--tier: tier: expected ..."), and an enum gets a
 * "did you mean". invalid_argument is for the command line's own shape. */
static int bad_value(const char *verb, const struct flag *f, const char *val,
		     struct kis_error *err)
{
	/* one line, as every refusal of a profile: a second only for a
	 * "did you mean" (the message already says what to write) */
	char hint[160] = "";
	if (f->values) {
		char list[512], buf[512];
		expand(f->values, list, sizeof(list));
		const char *best = cli_suggest_list(val, list, buf, sizeof(buf));
		if (best)
			snprintf(hint, sizeof(hint), "Did you mean '%s'? Try 'kis sandbox %s --help'.",
				 best, verb);
	}
	kis_error_wrap(&err, "%s", f->name);
	return cli_fail_hint(err, hint[0] ? hint : NULL);
}

/* A duration flag's value must name its unit: the profile's fields are in
 * milliseconds (limits.wall_ms), so a bare number is taken as that, and
 * `--timeout 5` would allow 5 ms where seconds were meant. A profile file
 * or kis_profile_set keeps the bare number: there the field names it. */
static bool unitless_duration(const struct flag *f, const char *val)
{
	bool duration = false; /* a limit of kind KIS_LK_MS, by the one table */
	for (unsigned i = 0; i < KIS_LIMIT__COUNT; i++)
		if (!strcmp(kis_limit_table[i].flag, f->name))
			duration = kis_limit_table[i].kind == KIS_LK_MS;
	size_t n = strlen(val);
	/* all digits, and not all zeros: 0 is 0 in any unit */
	return duration && n && strspn(val, "0123456789") == n && strspn(val, "0") != n;
}

int cli_parse_flags(const char *verb, unsigned vbit, int argc, char **argv, struct cli_opts *o)
{
	struct kis_error *err = NULL;
	int end = argc;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			end = i;
			break;
		}
	/* Pass 1: --profile, so that flags override it wherever they stand. */
	for (int i = 1; i < end && (vbit & RC); i++) {
		const char *a = argv[i];
		const char *val = NULL;
		if (!strcmp(a, "--profile") && i + 1 < end)
			val = argv[i + 1];
		else if (!strncmp(a, "--profile=", 10))
			val = a + 10;
		if (val && kis_profile_merge_file(&o->profile, val, &err) < 0)
			return cli_fail(err);
	}
	for (int i = 1; i < end; i++) {
		const char *a = argv[i];
		if (strncmp(a, "--", 2)) {
			/* exec and shell name their session first */
			if ((vbit & (CLI_V_EXEC | CLI_V_SHELL)) && !o->id && a[0] != '-') {
				o->id = a;
				continue;
			}
			if (a[0] == '-' && a[1]) /* -q: an option, not a command */
				return unknown_flag(verb, vbit, a);
			return cli_usage_error(verb, "unexpected argument '%s' (the command goes after '--')", a);
		}
		const char *eq = strchr(a, '=');
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		const struct flag *f = lookup(a, len, vbit);
		if (!f)
			return unknown_flag(verb, vbit, a);
		if (!(f->verbs & vbit))
			return cli_usage_error(verb, "option '%s' is not for %s%s", f->name, verb,
					       (vbit & (CLI_V_EXEC | CLI_V_SHELL)) &&
							       (f->verbs & CLI_V_CREATE) ?
						       ": it is the session's, set at create" :
						       "");
		const char *val = "true";
		if (f->takes_value) {
			if (eq)
				val = eq + 1;
			else if (i + 1 < end)
				val = argv[++i];
			else
				return cli_usage_error(verb, "option '%s' needs a value", f->name);
		} else if (eq) {
			return cli_usage_error(verb, "option '%s' takes no value", f->name);
		}
		if (unitless_duration(f, val)) {
			kis_error_set(&err, KIS_E_INVALID_PROFILE, 0,
				      "'%s' has no unit: write %ss for seconds or %sms for "
				      "milliseconds (%s)",
				      val, val, val, f->field);
			return bad_value(verb, f, val, err);
		}
		if (f->field) {
			if (kis_profile_set(&o->profile, f->field, val, &err) < 0)
				return bad_value(verb, f, val, err);
		} else if (!strcmp(f->name, "--json")) {
			o->json = true;
		} else if (!strcmp(f->name, "--dry-run")) {
			o->dry_run = true;
		} else if (!strcmp(f->name, "--store-root")) {
			o->store_root = val;
		}
	}
	o->cmd_index = end < argc ? end + 1 : argc;
	return 0;
}

int cli_parse_profile_flags(const char *verb, int argc, char **argv, struct cli_opts *o)
{
	return cli_parse_flags(verb, !strcmp(verb, "create") ? CLI_V_CREATE : CLI_V_RUN, argc, argv,
			       o);
}
