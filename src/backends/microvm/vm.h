/* SPDX-License-Identifier: MIT */
/* Internal to the microvm backend: the guest's assets (kernel, initramfs),
 * QEMU's argv and start, its control port and QMP, snapshots, the
 * workspace disk and its copy back to the host. */
#ifndef KIS_BACKENDS_MICROVM_VM_H
#define KIS_BACKENDS_MICROVM_VM_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "kis/error.h"
#include "kis/backend.h"

/* Agent ports per VM (kis.0 .. kis.11): one per process running at once
 * (mux.c), and a kis-vm pod's every container holds one for its life
 * (src/runtime/mvm_pod.c): 8 is a pod of a few containers and their execs.
 * Each port costs the guest RAM (the virtio console's receive buffers and
 * a relay process): with 12, a VM of --memory 128M, the least the tier
 * takes, never answered its configuration (at 192M it did; test_matrix's
 * microvm exec cells); with 8 it does. Within KIS_MVM_MAX_FDS with the
 * disks, ctl, qmp, net and memory. */
#define KIS_MVM_PORTS 8
/* The version of QEMU's device set (argv of kis_mvm_spawn), part of the
 * stamp that names snapshots: a snapshot restores only into the device set
 * it was saved with. Bump it with any change there. */
#define KIS_MVM_DEVSET 9
/* The profile's mounts (issue 21): a fixed number of slots, always in the
 * device set (a snapshot restores only into the devices it was saved
 * with), two read-only disks each: its lower layer (a base's image) and
 * its delta (an overlay workspace's own changes). An unused slot holds the
 * empty image. A read-write mount's writes go to the rw disk, m<i>/upper.
 * A kis-vm pod's VM mounts none at its start: its app containers' roots
 * are swapped into the lower disks while it runs (slot.c, QMP). */
#define KIS_MVM_MOUNTS 4
#define KIS_MVM_MOUNT_DISKS (2 * KIS_MVM_MOUNTS)
/* Every guest disk has this virtual size (sparse), whatever it holds: the
 * guest reads disk sizes at boot, so one snapshot serves every workspace. */
#define KIS_MVM_DEV_BYTES (256ull << 30)
/* The writable layer's filesystem is limits.disk_bytes large (what a VM may
 * write; sparse on the host), never less than this: ext4's journal and
 * metadata need room. */
#define KIS_MVM_RW_FS_MIN_BYTES (16ull << 20)

/* The guest cache: $KIS_MICROVM_GUEST_DIR, else <store>/cache/guest, filled
 * by scripts/guest/fetch-kernel.sh; the engine adds the initramfs, the
 * accelerator verdict and the snapshots. */
struct kis_mvm_guest {
	const struct kis_ctx *ctx; /* the command's, for its progress */
	char *dir;
	char *kernel;   /* dir/vmlinuz */
	char *restore_kernel; /* its boot header alone, for restores (vm.c), or NULL */
	char *initrd;   /* dir/initramfs-<agent stamp>.cpio */
	char *stamp;    /* identifies kernel + initramfs, for snapshot names */
};

/* KIS_MICROVM_TRACE=1: phase times on stderr (ms since the first), for
 * the benchmarks (bench/microvm.sh, bench/microvm-density.sh) only
 * (trace.c: below vm.c and jail.c, which both trace) */
void kis_mvm_trace(const char *what);
/* Tell the command's caller what a slow step is doing (kis_ctx.progress). */
void kis_mvm_progress(const struct kis_mvm_guest *g, const char *what);
/* Is a guest kernel there (cheap: no build)? why receives what is missing. */
char *kis_mvm_guest_dir(const struct kis_ctx *ctx);
bool kis_mvm_guest_present(const struct kis_ctx *ctx, char *why, size_t n);
/* Does the guest cache hold the guest's network driver (virtio_net; a
 * cache fetched before egress did not)? */
bool kis_mvm_guest_has_net(const struct kis_ctx *ctx);
/* Find the cache and build the initramfs if it is missing or older than the agent. */
int kis_mvm_guest_open(const struct kis_ctx *ctx, struct kis_mvm_guest *g, struct kis_error **err);
void kis_mvm_guest_release(struct kis_mvm_guest *g);
const char *kis_mvm_qemu_path(void);

/* One VM's start. Sockets are listening fds the backend made; disks are
 * opened by the engine and passed as fds (the jailed VMM opens no host path). */
struct kis_mvm_cfg {
	const char *accel;     /* "kvm" or "tcg" */
	unsigned mem_mib, vcpus;
	const char *disk[3];   /* raw ext4 images: base (ro), delta (ro), rw */
	/* the mounts' slots, read-only: lower and delta of mount i at 2i and
	 * 2i+1 (NULL: disk[1], for a VM whose guest mounts none of them) */
	const char *mdisk[KIS_MVM_MOUNT_DISKS];
	int ctl_fd, qmp_fd;
	int agent_fd[KIS_MVM_PORTS];
	int snap_fd;           /* -incoming fd:N (restore), or -1 */
	/* The guest's virtio-net device is always there (one snapshot serves
	 * every network mode); its backend is this connected stream socket
	 * (passt's peer, egress) or, when -1, a hub port with no other port:
	 * frames the guest sends go nowhere. */
	int net_fd;
	int log_fd;            /* QEMU's stderr (and the guest console when debugging), or -1 */
	bool detach;           /* a session: leave our session and parentage */
	const char *vm_dir;    /* the VM's private directory: the jail is built there */
	const char *mem_file;  /* guest RAM backed by this file (NULL: anonymous) */
	int mem_fd;            /* or by this open file (a restore's sealed memfd), or -1 */
	bool mem_share;        /* share=on (making a snapshot) or a private copy-on-write map */
	bool ignore_shared;    /* the x-ignore-shared migration capability */
	bool stand_in;         /* honour KIS_MICROVM_VMM (tests): never for snapshots */
};

/* ---- the VMM's jail (jail.c) ----
 * Every VMM runs as uid = gid = KIS_MVM_UID_BASE + its host pid: unique
 * among live VMs, owning no file (its disks, sockets and snapshot are fds
 * the engine opened), so a reused uid after the VM's end inherits nothing.
 * The range [KIS_MVM_UID_BASE, + 2^22 (PID_MAX_LIMIT)) must hold no user. */
#define KIS_MVM_UID_BASE 1600000000u
#define KIS_MVM_VMM_PIDS 256u          /* pids.max and RLIMIT_NPROC of a VMM */
/* The memory cgroup's limit is guest RAM plus this: QEMU's own heap, TCG's
 * translation buffer (-accel tcg,tb-size) and page tables, measured at
 * under 100 MiB for an idle 1 GiB guest (bench/microvm.sh). */
#define KIS_MVM_VMM_OVERHEAD_MIB 384u
#define KIS_MVM_MAX_FDS 32
#define KIS_MVM_TB_MIB 128u            /* -accel tcg,tb-size */

/* Rootless (no cgroup): RLIMIT_AS of the VMM is guest RAM, the overhead
 * above and the TCG buffer, plus this for QEMU's thread stacks, libraries
 * and glib's arenas, which are address space but mostly never touched. */
#define KIS_MVM_VMM_AS_SLACK (2048ull << 20)

struct kis_cgroup;
struct kis_mvm_jail {
	struct kis_cgroup *cg;    /* NULL rootless */
	int seccomp_fd;
	/* an ordinary user's engine: the jail in a user namespace of its own,
	 * the user's ids mapped onto themselves, rlimits for the cgroup */
	bool rootless;
	uid_t host_uid;
	gid_t host_gid;
	uint64_t as_bytes;
	/* the VMM's own files bound read-only at the same path in the jail:
	 * its binary, its shared libraries and loader, QEMU's modules and
	 * firmware; src[i] the host file (links resolved), dst[i] its path */
	char **src, **dst;
	size_t nfiles;
};
struct kis_mvm_jail_cfg {
	const char *dir;           /* an empty "jail" directory is made in here */
	const char *vmm;           /* the binary, a host path */
	bool vmm_outside_usr;      /* bound at /vm/vmm (else at its own path) */
	const char *cache_dir;     /* where the VMM's file list is kept */
	char *const *argv;
	const char *kernel, *initrd; /* bound at /vm/vmlinuz, /vm/initrd */
	const char *mem_file;      /* bound at /vm/mem, or NULL */
	bool proc;                 /* a pids-only /proc of the VM's pid namespace */
	bool mem_rw;
	bool kvm;                  /* /dev/kvm in the jail */
	unsigned mem_mib;
	const int *fds;            /* land at 3 .. 3+nfds-1 in the VMM */
	int nfds;
	int log_fd;                /* the VMM's stdout and stderr, or -1 (/dev/null) */
	bool detach;
	bool no_seccomp;           /* the stand-in VMM only: probes test the jail, not the filter */
};
/* Before fork: the cgroup (memory and pids limits) and the seccomp filter.
 * A host where they cannot be made is tier_unavailable, naming what. */
int kis_mvm_jail_prepare(struct kis_mvm_jail *j, const struct kis_mvm_jail_cfg *c,
			 struct kis_error **err);
void kis_mvm_jail_release(struct kis_mvm_jail *j);
/* Can this host make the jail (cheap: for probe)? why names what is missing. */
bool kis_mvm_jail_possible(char *why, size_t n);
/* The engine is an ordinary user: the jail is built in a user namespace
 * of its own, without a cgroup (jail.c, top). */
bool kis_mvm_jail_rootless(void);
/* The VMM's cgroup, named in dir/vmm.cgroup: saved at the start, removed
 * (members killed) at the VM's end. */
int kis_mvm_cgroup_save(const char *dir, const struct kis_cgroup *cg, struct kis_error **err);
void kis_mvm_cgroup_drop(const char *dir);
/* Move pid into the VMM's cgroup recorded in dir (egress's pasta and
 * passt: charged to the VM, killed with it). */
int kis_mvm_cgroup_join(const char *dir, pid_t pid, struct kis_error **err);
/* Start the VMM in its jail, with a fixed environment and only c->fds
 * (and its standard streams) open. A session's VMM (detach) leaves our
 * session and parentage. */
int kis_mvm_jail_spawn(const struct kis_mvm_jail *j, const struct kis_mvm_jail_cfg *c,
		       pid_t *pid, struct kis_error **err);

int kis_mvm_spawn(const struct kis_mvm_guest *g, const struct kis_mvm_cfg *c, pid_t *pid,
		  struct kis_error **err);

/* The benchmark's unjailed restore (bench_unjailed.c): present only in the
 * build/bench/kis-unjailed binary, compiled with KIS_MVM_BENCH_UNJAILED;
 * every other build refuses the variable (kis_mvm_spawn). */
#define KIS_MVM_BENCH_UNJAILED_ENV "KIS_MICROVM_BENCH_UNJAILED"
#ifdef KIS_MVM_BENCH_UNJAILED
bool kis_mvm_bench_unjailed(const struct kis_mvm_jail_cfg *c);
int kis_mvm_bench_spawn(const struct kis_mvm_jail_cfg *c, pid_t *pid, struct kis_error **err);
#endif

/* A listening unix socket NAME in the directory dfd (path-length safe). */
int kis_mvm_listen_at(int dfd, const char *name, struct kis_error **err);
int kis_mvm_connect_at(int dfd, const char *name);

/* The control port: send one line, read one reply line, within ms. */
int kis_mvm_ctl(int fd, const char *line, char *reply, size_t n, int ms);
/* Connect to ctl and repeat "ping" until "pong" or the deadline. */
int kis_mvm_ctl_wait(int dfd, int ms, pid_t pid);

/* QMP: connect, negotiate, then one command and its "return". */
int kis_mvm_qmp_open(int dfd, const char *name, int ms);
int kis_mvm_qmp_cmd(int fd, const char *json, int send_fd, char **reply, int ms);

/* Restore a VM started with -incoming defer: x-ignore-shared on, the
 * snapshot's device state from snap_fd (its RAM is the memory backend's). */
int kis_mvm_incoming(int dfd, int snap_fd, struct kis_error **err);
int kis_mvm_ignore_shared(int qmp);

/* The accelerator that runs our guest here, measured once and cached. */
const char *kis_mvm_accel_cached(const char *guest_dir);
int kis_mvm_accel(const struct kis_mvm_guest *g, char out[8], struct kis_error **err);

/* The snapshot of a booted guest with this memory and vCPUs (and the
 * standard three disks): made on first use (cold boot to the agent's ready
 * point, QEMU migration to a file). Returns an fd open on it, or -1 with err. */
int kis_mvm_snapshot(const struct kis_mvm_guest *g, const char *accel, unsigned mem_mib,
		     unsigned vcpus, struct kis_error **err);

/* The snapshot's RAM (ram_path, made with the snapshot) as a sealed memfd
 * that VMs map privately: the one live VMs of it map (*filler -1), else a
 * new one that a child (*filler) fills and seals while the VMM starts:
 * the restore waits for it (kis_mvm_snapshot_ram_ready), a start given up
 * ends it (kis_mvm_snapshot_ram_abort). */
int kis_mvm_snapshot_ram(const char *ram_path, pid_t *filler, struct kis_error **err);
/* Wait for the filler; 0 once memfd is whole and sealed. */
int kis_mvm_snapshot_ram_ready(pid_t *filler, int memfd, struct kis_error **err);
void kis_mvm_snapshot_ram_abort(pid_t *filler);
/* Path of the RAM file of the snapshot with these parameters. */
char *kis_mvm_snapshot_ram_path(const struct kis_mvm_guest *g, const char *accel,
				unsigned mem_mib, unsigned vcpus);

/* The three disks of one VM (microvm/disk.c): files in vm_dir, the base's
 * image in cache (an overlay workspace's lower, upper and the base's cache
 * directory given) or of the whole workspace ws (not an overlay clone). */
struct kis_mvm_disks {
	char *base, *delta, *rw;
	bool cow; /* base image cached, delta of the workspace's own changes */
	char *m[KIS_MVM_MOUNT_DISKS]; /* the mounts' slots (kis_mvm_mount_disks_make) */
};
int kis_mvm_disks_make(const struct kis_mvm_guest *g, const char *vm_dir, const char *ws,
		       const char *lower, const char *upper, const char *cache, uint64_t rw_bytes,
		       struct kis_mvm_disks *d, struct kis_error **err);
void kis_mvm_disks_free(struct kis_mvm_disks *d);
/* The mounts' slots of d (after kis_mvm_disks_make): for mount i, its
 * lower layer (a base's cached image, an overlay workspace's base's, or
 * an image of a whole workspace that is no overlay clone, made for this
 * VM) and its delta (an overlay workspace's changes, or the empty image);
 * every other slot the empty image. At most KIS_MVM_MOUNTS. */
int kis_mvm_mount_disks_make(const struct kis_mvm_guest *g, const char *vm_dir,
			     const struct kis_mount_src *m, size_t n, struct kis_mvm_disks *d,
			     struct kis_error **err);
/* A base's image (its tree as the read-only ext4 of a mount slot), made
 * once and kept in its cache directory; *out malloc'ed. */
int kis_mvm_base_image(const char *cache, const char *tree, char **out, struct kis_error **err);
/* Swap mount slot `slot`'s lower disk of the running VM whose QMP socket
 * is dfd's qmp.sock for the image at img (slot.c). */
int kis_mvm_slot_attach(int dfd, int slot, const char *img, struct kis_error **err);
/* Apply the guest's upper layer on the rw image (the directory layer in
 * it: "/upper" for the workspace, "/m<i>/upper" for mount i) to the host
 * directory dst_dir. */
int kis_mvm_disk_sync_back(const char *rw_img, const char *layer, const char *dst_dir,
			   struct kis_error **err);

/* Make a private 0700 directory for one run's sockets and disk. */
int kis_mvm_tmpdir(char **path, struct kis_error **err);

#endif
