/* SPDX-License-Identifier: MIT */
/* kis-runtime: what its files share: the global flags of the OCI runtime
 * command line, the log, the policy over config.json and crun's argv. */
#ifndef KIS_RUNTIME_H
#define KIS_RUNTIME_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "kis/error.h"
#include "core/io.h"

/* Exit status of a refusal or a failure of kis-runtime itself (the
 * kis CLI's "the engine refused or failed"). */
#define KRT_EXIT_REFUSED 125

/* Annotations kis-runtime reads from config.json; any other run.kis.* key
 * is an error (unknown fields are errors, as in a kis profile). */
#define KRT_ANN_PREFIX "run.kis."
#define KRT_ANN_TIER "run.kis.tier"
#define KRT_ANN_NET_HOST "run.kis.allow-net-host"
/* The third named hatch: hooks run on the host as root. */
#define KRT_ANN_HOOKS "run.kis.allow-hooks"

/* The global flags, as runc and crun take them before the verb. */
struct krt_globals {
	const char *root;       /* --root: the runtime's state directory */
	const char *log;        /* --log FILE */
	const char *log_level;  /* --log-level LEVEL (kis's: error, warn, info, debug) */
	bool log_json;          /* --log-format json */
	bool systemd_cgroup;    /* --systemd-cgroup (or --cgroup-manager systemd) */
	bool debug;             /* --debug */
	int pinned_tier;        /* -1, or the tier this binary's name pins
				 * (kis-runtime-host: KRT_TIER_HOST) */
};

/* One verb: argv from the verb on (argv[0] is the verb's name). Returns
 * the exit status, or never returns when it became crun. */
typedef int (*krt_verb_fn)(const struct krt_globals *g, int argc, char **argv,
			   struct kis_error **err);

/* ---- log.c ---- */
/* Report e once: on stderr ("kis-runtime: code: message") and, with
 * --log, as one line of the log in its format ({"level","msg","time"} as
 * runc and crun write it), which is where containerd and conmon look. */
void krt_log_error(const struct krt_globals *g, const struct kis_error *e);
/* The level of kis's diagnostics (kis/log.h): --log-level, else --debug,
 * else $KIS_LOG, else warn; with --log their lines go to that file in
 * its format (a level of their own), else to stderr. g must outlive it. */
int krt_log_setup(const struct krt_globals *g, struct kis_error **err);

/* ---- model.c: config.json read into kis's own model ---- */
/* A host path of the bundle's (root.path, a bind's source): checked, and
 * held from the check to the mount. */
struct krt_hostpath {
	char *path; /* absolute, normal, no symbolic link on the way */
	int fd;     /* O_PATH, close-on-exec; -1: none */
	bool dir;
};
#define KRT_NS_TYPES 8
struct krt_model {
	json_t *doc;                /* the translated config: modelled fields only */
	struct krt_hostpath root;   /* root.path */
	struct krt_hostpath *binds; /* one per mounts[i]; fd -1 for a non-bind */
	size_t n_binds;
	int ns_fd[KRT_NS_TYPES];    /* namespaces joined by path, held */
	char *bundle;               /* the bundle directory, resolved */
	const char *state_root, *store_root; /* refused as host paths too */
};
void krt_model_init(struct krt_model *m);
void krt_model_release(struct krt_model *m);
/* Translate raw (config.json as read) into m: the fields kis models, each
 * checked for its type (any other refused by name), one namespace per
 * type, typed mounts, the host paths resolved (relative: to bundle) with
 * no link followed, checked and held, hooks only with run.kis.allow-hooks.
 * state_root and store_root (either may be NULL) are refused as host
 * paths beside the host's system paths. */
int krt_model_read(json_t *raw, const char *bundle, const char *state_root,
		   const char *store_root, struct krt_model *m, struct kis_error **err);
/* An exec's process (a process.json) translated as config.json's process
 * is: *out a new document of the modelled fields. */
int krt_model_process(json_t *raw, json_t **out, struct kis_error **err);
/* What the model takes, for `features`: every mount option and every
 * namespace type, appended to the two arrays. -1 on allocation failure. */
int krt_model_features(json_t *mount_options, json_t *namespaces);
/* The joined namespaces as /proc/self/fd/N with N >= min_fd, inherited by
 * crun (not close-on-exec; crun closes them in the container). */
int krt_model_hold_fds(struct krt_model *m, int min_fd, struct kis_error **err);
/* In a mount namespace of our own (made here), a tmpfs at stage_dir with
 * each bind's held source bound on it, and the document's sources
 * pointed there: crun binds what was checked, whatever the path names now. */
int krt_model_stage(struct krt_model *m, const char *stage_dir, struct kis_error **err);
/* The held fd of the namespace of this type ("network") joined by path,
 * and its CLONE_NEW* flag in *clone; -1 when none is joined. */
int krt_model_ns_fd(const struct krt_model *m, const char *type, int *clone);

/* ---- policy.c ---- */
enum krt_tier { KRT_TIER_CONTAINER = 0, KRT_TIER_MICROVM, KRT_TIER_HOST };
/* The tier the annotation asks for; the annotations themselves checked.
 * pinned >= 0: the operator's tier (the binary's name), which an
 * annotation may only repeat. */
int krt_policy_tier(json_t *config, int pinned, enum krt_tier *out, struct kis_error **err);
/* "container", "microvm", "host"; and back (-1 when unknown). */
const char *krt_tier_name(enum krt_tier t);
int krt_tier_parse(const char *s);
/* Check a model's document (krt_model_read) against what the container
 * tier enforces and refuse what it cannot; then normalise it in place to
 * kis's defaults (seccomp, masked paths, limits). */
int krt_policy_container(json_t *config, struct kis_error **err);
/* A bind mount of the model's document (its type is "bind"). */
bool krt_mount_is_bind(json_t *m);
/* The process of an exec (a process.json, or the --cap flags). */
int krt_policy_process(json_t *process, const char *where, struct kis_error **err);
int krt_policy_cap(const char *cap, const char *where, struct kis_error **err);
/* The capabilities a container may hold (for `features`). */
extern const char *const krt_allowed_caps[];
extern const size_t krt_n_allowed_caps;

/* ---- crun.c ---- */
/* crun's argv under construction: core's builder (struct kis_argv); a
 * push here fails with the allocation's error, for TRY. */
int krt_argv_push(struct kis_argv *a, const char *s, struct kis_error **err);
/* x, then y unless NULL. */
int krt_argv_push2(struct kis_argv *a, const char *x, const char *y, struct kis_error **err);
/* crun's path, and its global flags from g pushed after argv[0]. */
int krt_crun_begin(struct kis_argv *a, const struct krt_globals *g, struct kis_error **err);
/* A sealed memfd holding doc, for `--config /proc/self/fd/N` (inherited by
 * crun, closed by crun in the container with every fd above
 * --preserve-fds). N is at least min_fd. */
int krt_memfd_json(json_t *doc, int min_fd, struct kis_error **err);
/* Become crun (hidden from the hybrid cgroup v2 mount it refuses).
 * Returns only on failure. */
int krt_crun_exec(struct kis_argv *a, struct kis_error **err);

/* ---- host_plan.c: what of a bundle bubblewrap enforces ---- */
/* The namespaces the host tier's child enters itself before it becomes
 * bwrap, so that the pid create reports (bwrap's own) is in them: a pod's
 * containers join the sandbox's by /proc/PID/ns/X of that pid. */
#define KRT_HOST_MAX_JOIN 3
struct krt_host_plan {
	struct kis_argv bwrap; /* up to and excluding --seccomp/--info-fd */
	int join_fd[KRT_HOST_MAX_JOIN]; /* the model's held fds (borrowed), setns(2) */
	int join_clone[KRT_HOST_MAX_JOIN];
	size_t n_join;
	int unshare;           /* CLONE_NEW* the child makes (ipc, uts, net) */
	bool lo_up;            /* a network namespace of its own: bring lo up */
	const char *hostname;  /* sethostname(2) in its own uts namespace; borrowed */
	bool groups_root;      /* process.user.additionalGids [0]: groups {0}, else none */
	json_t *args;          /* process.args (borrowed from the config) */
	json_t *rlimits;
	bool terminal;
	int oom_score_adj;
	bool has_oom_adj;
	int net;               /* enum kis_net_mode: kis's seccomp filter's */
	struct kis_limits limits; /* linux.resources' limits a cgroup binds (KIS_CGROUP_LIMITS) */
	/* linux.resources.cpu's quota, period (us) and shares, 0 where
	 * unset; linux.cgroupsPath where it begins with '/' (borrowed) */
	uint64_t cpu_quota_us, cpu_period_us, cpu_shares;
	const char *cgroups_path;
};
/* m->doc already through krt_policy_container; had_seccomp: the bundle
 * brought its own linux.seccomp. A field bwrap cannot enforce is refused
 * (profile_unsatisfiable naming it and "run.kis.tier 'host'"). The root
 * and the binds go to bwrap as the model's held fds (--bind-fd). */
int krt_host_plan(const struct krt_model *m, bool had_seccomp, struct krt_host_plan *p,
		  struct kis_error **err);
void krt_host_plan_release(struct krt_host_plan *p);
/* profile_unsatisfiable with the message and "(run.kis.tier 'host')". */
int krt_host_refuse(struct kis_error **err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- cgroup_noted.c: a container's host cgroup leaves, noted ---- */
struct kis_cgroup;
struct kis_cgroup_opts;
struct kis_limits;
/* linux.cgroupsPath where runc's cgroupfs driver takes it as a path from
 * each hierarchy's root (it begins with '/'), borrowed from doc; else
 * NULL (a systemd slice:prefix:name, a relative path: kis's own place) */
const char *krt_cgroups_path(json_t *doc);
/* "krt-<16 random hex digits>": a group's name under kis's own parent,
 * known to the sweep as ours by that name alone */
int krt_cgroup_name(char *out, size_t len, struct kis_error **err);
/* kis_cgroup_create_with, each leaf noted in the state directory dfd's
 * record as it is made (confine/cgroup.c, make_leaf): delete, or the
 * delete after a killed create, removes it (krt_cgroup_sweep_noted) */
int krt_cgroup_make_noted(int dfd, const char *cgname, const struct kis_limits *lim,
			  const struct kis_cgroup_opts *o, struct kis_cgroup **out,
			  struct kis_error **err);
/* Kill what the groups the record in dfd names hold, remove them, and
 * the record */
void krt_cgroup_sweep_noted(int dfd);

/* ---- host.c: run.kis.tier host (bubblewrap) ---- */
struct krt_host_opts {
	const char *pid_file;
	const char *console_socket;
	long preserve_fds;
	bool detach; /* run --detach, exec --detach */
	bool run;    /* run: no start fifo; without detach, wait and delete */
};
/* Is id a host-tier container in g->root? */
bool krt_host_owns(const struct krt_globals *g, const char *id);
/* config already through krt_policy_container; had_seccomp: the bundle
 * brought a linux.seccomp of its own. Returns the exit status for run. */
int krt_host_create(const struct krt_globals *g, const struct krt_model *m, bool had_seccomp,
		    const char *bundle, const char *id, const struct krt_host_opts *o,
		    struct kis_error **err);
/* start, state, kill, delete, ps of a host-tier container. */
int krt_host_verb(const struct krt_globals *g, int argc, char **argv, struct kis_error **err);
/* exec: proc is the process (a process.json, or built from the flags on
 * the container's own process); returns its exit status. */
int krt_host_exec(const struct krt_globals *g, const char *id, json_t *proc,
		  const struct krt_host_opts *o, struct kis_error **err);
/* The container's process object as create recorded it (new reference). */
json_t *krt_host_base_process(const struct krt_globals *g, const char *id);

/* host.c's state helpers, shared with the microvm tier (mvm.c): a
 * container's state directory holds state.json ({id, pid, starttime,
 * bundle, rootfs, created, annotations}) and the marker `started`. */
#include <sys/types.h>
/* mkdir -p of --root (0700 for what it makes) */
int krt_make_root(const char *root, struct kis_error **err);
/* A tier's state under --root (its directory name: kis-host, kis-microvm):
 * the directory (made when create), a container's directory in it (-1:
 * not this tier's), its state.json loaded (not_found), its removal (after
 * before(dfd), when given). One layout for the host and microvm tiers. */
int krt_tier_root(const struct krt_globals *g, const char *dir, bool create,
		  struct kis_error **err);
int krt_tier_container(const struct krt_globals *g, const char *dir, const char *id);
int krt_tier_load(const struct krt_globals *g, const char *dir, const char *id, int *dfd,
		  json_t **st, struct kis_error **err);
void krt_tier_remove(int hfd, const char *id, void (*before)(int dfd));
int krt_tier_make(int hfd, const char *id, bool want_fifo, bool *made, int *dfd, int *fifo,
		  struct kis_error **err);
int krt_tier_start(int dfd, json_t *st, const char *id, struct kis_error **err);
/* create's handshake with the process it forks (child: its setup's
 * outcome, then start's byte; parent: that outcome, named by what[]), the
 * new container on record (state.json with the config's annotations, the
 * pid file; the process killed where that fails; takes st), and run's
 * wait without --detach (1: waited, *status as a shell gives it). */
void krt_child_ready(int sync_fd, int fail, int fifo);
int krt_child_setup(int sync_fd, pid_t pid, const char *const *what, size_t n,
		    struct kis_error **err);
int krt_tier_record(int dfd, json_t *st, json_t *config, const char *pid_file, pid_t pid,
		    struct kis_error **err);
int krt_tier_run_wait(int dfd, const struct krt_host_opts *o, pid_t pid, int *status);
/* now, RFC 3339 UTC with nanoseconds (the state's "created", the log's) */
#define KRT_STAMP_LEN 80
void krt_now(char out[KRT_STAMP_LEN]);
json_t *krt_read_json_at(int dfd, const char *name);
int krt_write_json_at(int dfd, const char *name, json_t *doc, struct kis_error **err);
int krt_proc_stat(pid_t pid, unsigned long long *start, char *st);
/* "created", "running" or "stopped", from the pid's life and `started` */
const char *krt_status_of(int dfd, json_t *st);
int krt_print_state(int dfd, json_t *st);
int krt_console_pty(const char *sock_path, struct kis_error **err);
int krt_take_terminal(int slave);
int krt_write_pid_file(const char *path, pid_t pid, struct kis_error **err);
int krt_parse_signal(const char *s, int *out);
int krt_signal_pid(pid_t pid, int sig);

/* ---- state_check.c: what a state directory gives back, checked ---- */
/* A container's state directory is the runtime's (0700 under --root), yet
 * what is read back from it is taken as a forger's: an id of the kind
 * create wrote, a pid a process could have, never a path. */
/* A container id (the name of its state directory: runc's charset, no
 * leading '.' or '-'); KIS_E_INVALID_ID naming it. */
int krt_valid_id(const char *id, struct kis_error **err);
#define KRT_KIND_CONTAINER 'c' /* a container id (krt_valid_id) */
#define KRT_PID_MAX 4194304    /* PID_MAX_LIMIT, the kernel's bound (threads.h) */
/* doc's k when it is an id of kind ('b', 'w', 's': kis_id_mint's prefix
 * and kis_id_validate; KRT_KIND_CONTAINER), else "" (nothing named). */
const char *krt_state_id(json_t *doc, const char *k, char kind);
/* doc's k when it is an integer pid in 2..KRT_PID_MAX, else 0. */
pid_t krt_state_pid(json_t *doc, const char *k);
struct krt_state_field {
	const char *key;
	char kind;
};
/* state.json st of container id refused (KIS_E_INVALID_ID, naming the
 * field) unless its id is id, its pid and starttime are integers a
 * process can have, and each of fields is absent, "" or an id of its
 * kind. Any "store" it holds (written by older kis-runtimes) is never
 * read: the store is the runtime's own. */
int krt_state_check(json_t *st, const char *id, const struct krt_state_field *fields, size_t n,
		    struct kis_error **err);

/* ---- mvm.c: run.kis.tier microvm (a kis microvm session) ---- */
/* Is id a microvm-tier container in g->root? */
bool krt_mvm_owns(const struct krt_globals *g, const char *id);
/* config: the model's document (krt_model_read), not through
 * krt_policy_container: the guest is the boundary; mvm.c checks what the
 * guest can give. o as for
 * the host tier. Returns the exit status for run. */
int krt_mvm_create(const struct krt_globals *g, const struct krt_model *m, const char *bundle,
		   const char *id, const struct krt_host_opts *o, struct kis_error **err);
/* start, state, kill, delete, ps of a microvm-tier container. */
int krt_mvm_verb(const struct krt_globals *g, int argc, char **argv, struct kis_error **err);
/* exec: proc as for krt_host_exec. */
int krt_mvm_exec(const struct krt_globals *g, const char *id, json_t *proc,
		 const struct krt_host_opts *o, struct kis_error **err);
/* The container's process object as create recorded it (new reference). */
json_t *krt_mvm_base_process(const struct krt_globals *g, const char *id);

/* ---- verbs ---- */
int krt_cmd_create(const struct krt_globals *g, int argc, char **argv, struct kis_error **err);
int krt_cmd_run(const struct krt_globals *g, int argc, char **argv, struct kis_error **err);
int krt_cmd_exec(const struct krt_globals *g, int argc, char **argv, struct kis_error **err);
int krt_cmd_features(const struct krt_globals *g, int argc, char **argv,
		     struct kis_error **err);
int krt_cmd_passthrough(const struct krt_globals *g, int argc, char **argv,
			struct kis_error **err);

/* ---- opts.c: the verbs' flags ---- */
enum krt_opt_act {
	KRT_OPT_PASS = 0, /* handed to crun as given */
	KRT_OPT_BUNDLE,   /* -b/--bundle DIR */
	KRT_OPT_CONFIG,   /* -f/--config FILE (crun's): read instead of config.json */
	KRT_OPT_PROCESS,  /* exec -p/--process FILE */
	KRT_OPT_CAP,      /* exec --cap CAP: checked, then passed */
	KRT_OPT_PRESERVE, /* --preserve-fds N: passed, and remembered */
	KRT_OPT_REFUSE,   /* a flag that weakens the container: refused by name */
};
struct krt_opt {
	const char *name;  /* long name without dashes */
	char shortc;       /* 0: none */
	bool value;        /* takes a value */
	enum krt_opt_act act;
	const char *why;   /* KRT_OPT_REFUSE: the reason */
};
struct krt_parsed {
	const char *bundle;
	const char *config;
	const char *process;
	long preserve_fds;
	struct kis_argv pass;   /* the flags handed on, normalised to --name[ value] */
	struct kis_argv pos;    /* positional arguments */
};
void krt_parsed_release(struct krt_parsed *p);
/* The value of a flag handed on (--name VALUE), NULL when not given. */
const char *krt_parsed_value(const struct krt_parsed *p, const char *name);
/* Was the boolean flag --name given? */
bool krt_parsed_has(const struct krt_parsed *p, const char *name);
/* Parse argv[1..] (argv[0] is the verb) against opts; positional
 * arguments after the first one stop flag parsing (exec's command line). */
int krt_parse(const struct krt_opt *opts, int argc, char **argv, struct krt_parsed *out,
	      struct kis_error **err);

/* The flags of the verbs on an existing container (state, start, kill,
 * delete, ps), as runc and crun take them: delete -f/--force, kill
 * -a/--all, ps -f/--format VALUE. One parser for every tier, so `ps -f
 * json ID` means the same everywhere. */
struct krt_verb_args {
	const char *id, *extra;  /* the container, and kill's signal */
	const char *unknown;     /* the first flag none of the verbs has */
	bool force, all, json;
	bool bad_format;         /* ps --format with neither json nor table */
};
void krt_verb_parse(int argc, char **argv, struct krt_verb_args *out);
/* Refuses unknown flags and a bad --format by name (the host and microvm
 * tiers, which take no flag crun would). */
int krt_verb_check(const char *verb, const struct krt_verb_args *va, struct kis_error **err);

#endif
