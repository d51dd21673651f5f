/* SPDX-License-Identifier: MIT */
/* kis-runtime create and run: read the bundle's config.json, choose the
 * tier from its annotation, check and normalise it, hand it to crun. */
#include "core/util.h"

#include <fcntl.h>
#include <limits.h>
#include <string.h>

#include "kis/store.h"
#include "runtime/runtime.h"

/* runc's and crun's flags of create and run (runc create --help, crun
 * create --help). --no-pivot makes crun chroot(2) instead of
 * pivot_root(2): the old root stays reachable from the container. */
static const struct krt_opt create_opts[] = {
	{"bundle", 'b', true, KRT_OPT_BUNDLE, NULL},
	{"config", 'f', true, KRT_OPT_CONFIG, NULL},
	{"console-socket", 0, true, KRT_OPT_PASS, NULL},
	{"pid-file", 0, true, KRT_OPT_PASS, NULL},
	{"preserve-fds", 0, true, KRT_OPT_PRESERVE, NULL},
	{"no-new-keyring", 0, false, KRT_OPT_PASS, NULL},
	{"no-subreaper", 0, false, KRT_OPT_PASS, NULL},
	{"detach", 'd', false, KRT_OPT_PASS, NULL},
	{"keep", 0, false, KRT_OPT_PASS, NULL},
	{"no-pivot", 0, false, KRT_OPT_REFUSE,
	 "chroot instead of pivot_root leaves the host's root reachable"},
	{NULL, 0, false, KRT_OPT_PASS, NULL},
};

static int load_config(const struct krt_parsed *p, json_t **out, struct kis_error **err)
{
	const char *bundle = p->bundle ? p->bundle : ".";
	_cleanup_free_ char *path = NULL;
	const char *cfg = p->config ? p->config : "config.json";
	if (asprintf(&path, "%s%s%s", cfg[0] == '/' ? "" : bundle, cfg[0] == '/' ? "" : "/",
		     cfg) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "config path");
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, errno, "cannot open '%s'", path);
	json_error_t je;
	json_t *doc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
	if (!doc)
		return kis_error_set(err, KIS_E_INVALID_PROFILE, 0, "'%s' line %d: %s", path,
				     je.line, je.text);
	*out = doc;
	return 0;
}

static int create_like(const struct krt_globals *g, int argc, char **argv,
		       struct kis_error **err)
{
	struct krt_parsed p;
	int r = krt_parse(create_opts, argc, argv, &p, err);
	struct kis_argv a = {0};
	json_t *raw = NULL;
	struct krt_model m;
	krt_model_init(&m);
	_cleanup_free_ char *stage = NULL, *store = NULL;
	if (r < 0)
		goto out;
	r = -1;
	if (p.pos.n != 1) {
		kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "%s takes one container id",
			      argv[0]);
		goto out;
	}
	if (krt_valid_id(p.pos.v[0], err) < 0 || load_config(&p, &raw, err) < 0)
		goto out;
	/* kis's store, refused as a host path of a bundle's: the store's own
	 * rule for which one a command opens */
	if (kis_store_default_root(&store, err) < 0)
		goto out;
	enum krt_tier tier;
	if (krt_policy_tier(raw, g->pinned_tier, &tier, err) < 0)
		goto out;
	const char *bundle = p.bundle ? p.bundle : ".";
	/* from here on only the model: what it does not hold reaches no tier */
	bool had_seccomp = json_object_get(json_object_get(raw, "linux"), "seccomp") != NULL;
	if (krt_model_read(raw, bundle, g->root, store, &m, err) < 0)
		goto out;
	struct krt_host_opts ho = {
		.pid_file = krt_parsed_value(&p, "pid-file"),
		.console_socket = krt_parsed_value(&p, "console-socket"),
		.preserve_fds = p.preserve_fds,
		.detach = krt_parsed_has(&p, "detach"),
		.run = strcmp(argv[0], "run") == 0,
	};
	switch (tier) {
	case KRT_TIER_MICROVM:
		/* a guest of its own (mvm.c): what it cannot give is refused there */
		r = krt_mvm_create(g, &m, bundle, p.pos.v[0], &ho, err);
		goto out;
	case KRT_TIER_HOST:
		/* the same refusals and defaults as the container tier, then
		 * what bubblewrap can do (host.c) */
		if (krt_policy_container(m.doc, err) < 0)
			goto out;
		r = krt_host_create(g, &m, had_seccomp, bundle, p.pos.v[0], &ho, err);
		goto out;
	case KRT_TIER_CONTAINER:
	default:
		break;
	}
	r = -1;
	if (krt_policy_container(m.doc, err) < 0 || krt_make_root(g->root, err) < 0)
		goto out;
	/* the binds' sources staged (a directory of the state root's that ids
	 * cannot name: they never begin with '.'), the joined namespaces held */
	if (asprintf(&stage, "%s/.kis-stage", g->root) < 0) {
		stage = NULL;
		kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "stage");
		goto out;
	}
	if (krt_model_stage(&m, stage, err) < 0 ||
	    krt_model_hold_fds(&m, 3 + (int)p.preserve_fds, err) < 0)
		goto out;
	int cfd = krt_memfd_json(m.doc, 3 + (int)p.preserve_fds, err);
	if (cfd < 0)
		goto out;
	char cfgpath[64];
	snprintf(cfgpath, sizeof(cfgpath), "/proc/self/fd/%d", cfd);
	if (krt_crun_begin(&a, g, err) < 0 || krt_argv_push(&a, argv[0], err) < 0)
		goto out;
	for (size_t i = 0; i < p.pass.n; i++)
		if (krt_argv_push(&a, p.pass.v[i], err) < 0)
			goto out;
	if (krt_argv_push(&a, "--bundle", err) < 0 || krt_argv_push(&a, bundle, err) < 0 ||
	    krt_argv_push(&a, "--config", err) < 0 || krt_argv_push(&a, cfgpath, err) < 0 ||
	    krt_argv_push(&a, "--", err) < 0 || krt_argv_push(&a, p.pos.v[0], err) < 0)
		goto out;
	r = krt_crun_exec(&a, err);
out:
	json_decref(raw);
	krt_model_release(&m);
	kis_argv_release(&a);
	krt_parsed_release(&p);
	return r < 0 ? -1 : r;
}

int krt_cmd_create(const struct krt_globals *g, int argc, char **argv, struct kis_error **err)
{
	return create_like(g, argc, argv, err);
}

int krt_cmd_run(const struct krt_globals *g, int argc, char **argv, struct kis_error **err)
{
	return create_like(g, argc, argv, err);
}
