/* SPDX-License-Identifier: MIT */
/* kis/limits.h: the limits of a run, written once. Every place that knows
 * a limit (the struct, its bit, its default and range, the profile parser,
 * the flags, the JSON of --dry-run, the agent's request, a session's
 * stored limits, `backends`) expands KIS_LIMITS or reads kis_limit_table,
 * so a new limit is one line here (issue 20). */
#ifndef KIS_LIMITS_H
#define KIS_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "kis/error.h"

/* How a limit's value is written: a duration in milliseconds ("2s"), a
 * size in bytes ("64M"), or a plain count. */
enum kis_limit_kind { KIS_LK_MS = 0, KIS_LK_BYTES, KIS_LK_COUNT };

/* The largest values the engine can apply, so a value is never clamped or
 * wrapped on the way (--dry-run shows what applies): durations up to 366
 * days; sizes up to 2^62 bytes (JSON integers are int64); pids up to
 * PID_MAX_LIMIT (4194304, linux/threads.h); open files up to 1048576, the
 * kernel's default fs.nr_open (a backend refuses more than its own hard
 * limit allows). */
#define KIS_LIMIT_MAX_MS (366ull * 24 * 3600 * 1000)
#define KIS_LIMIT_MAX_BYTES (1ull << 62)
/* The least memory limit: below it no sandbox starts. What a backend's own
 * setup charges to the group counts: bwrap and the agent need ~0.85 MiB
 * that cannot be reclaimed, and ~3 MiB at their peak when nothing presses
 * them (the binaries' page cache, the copied mount tree's kernel memory,
 * more on a host with more mounts); 1 MiB was OOM-killed on a fresh CI
 * machine. Below it an exec fails where nothing can say so (the child's
 * report is charged to the group as well). */
#define KIS_LIMIT_MIN_MEMORY (4ull << 20)

/* X(field, BIT, kind, default, min, max, per_exec, flag, help)
 *   field:    member of struct kis_limits and key of its JSON ("limits.field")
 *   BIT:      KIS_LIMIT_<BIT>, the bit in a backend's caps
 *   default:  the documented safe default (README, "Limits"): 0 in a
 *             profile means this, never unlimited
 *   min, max: the values a profile may give besides 0 (min: the least
 *             anything can run in)
 *   per_exec: a session's exec may tighten it (the agent applies it to one
 *             command); the others belong to the session's cgroup or disk
 *             and are fixed at create */
#define KIS_LIMITS(X)                                                                              \
	X(wall_ms, WALL, KIS_LK_MS, 10ull * 60 * 1000, 1, KIS_LIMIT_MAX_MS, 1, "--timeout",        \
	  "DUR  wall-clock limit (500ms, 2s, 1m)")                                                 \
	X(cpu_ms, CPU, KIS_LK_MS, 10ull * 60 * 1000, 1, KIS_LIMIT_MAX_MS, 1, "--cpu-time",         \
	  "DUR  CPU-time limit (all the sandbox's processes together)")                            \
	X(memory_bytes, MEMORY, KIS_LK_BYTES, 1024ull << 20, KIS_LIMIT_MIN_MEMORY,                 \
	  KIS_LIMIT_MAX_BYTES, 0, "--memory", "SIZE  memory limit (k, M, G)")                      \
	X(pids, PIDS, KIS_LK_COUNT, 256ull, 1, 4194304ull, 0, "--pids", "N  process limit")        \
	X(output_bytes, OUTPUT, KIS_LK_BYTES, 64ull << 20, 1, KIS_LIMIT_MAX_BYTES, 1,              \
	  "--output-limit", "SIZE  stdout+stderr limit")                                           \
	X(file_bytes, FILE, KIS_LK_BYTES, 1024ull << 20, 1, KIS_LIMIT_MAX_BYTES, 1, "--file-size", \
	  "SIZE  largest file the command may write")                                              \
	X(open_files, OPEN_FILES, KIS_LK_COUNT, 1024ull, 1, 1048576ull, 1, "--open-files",         \
	  "N  descriptors per process")                                                            \
	X(disk_bytes, DISK, KIS_LK_BYTES, 8ull << 30, 1, KIS_LIMIT_MAX_BYTES, 0, "--disk",         \
	  "SIZE  what the command may write to its workspace")

/* Every limit: 0 means "the engine's safe default" (kis_limits_resolve),
 * never unlimited. disk_bytes is bound by a project quota, by a disk image
 * under an overlay workspace (src/store/disk.c), or by the microvm's
 * writable layer. */
struct kis_limits {
#define KIS_LIMIT_MEMBER_(f, B, k, d, lo, m, pe, fl, h) uint64_t f;
	KIS_LIMITS(KIS_LIMIT_MEMBER_)
#undef KIS_LIMIT_MEMBER_
};

/* Each limit's index, and its bit (the limits a backend can enforce). */
enum {
#define KIS_LIMIT_INDEX_(f, B, k, d, lo, m, pe, fl, h) KIS_LIMIT_I_##B,
	KIS_LIMITS(KIS_LIMIT_INDEX_)
#undef KIS_LIMIT_INDEX_
	KIS_LIMIT__COUNT
};
enum {
#define KIS_LIMIT_BIT_(f, B, k, d, lo, m, pe, fl, h) KIS_LIMIT_##B = 1u << KIS_LIMIT_I_##B,
	KIS_LIMITS(KIS_LIMIT_BIT_)
#undef KIS_LIMIT_BIT_
};

/* A limit's documented default, by its bit name: KIS_LIMIT_DEFAULT(PIDS). */
#define KIS_LIMIT_DEFAULT(B) (kis_limit_table[KIS_LIMIT_I_##B].def)

struct kis_limit_info {
	const char *name;  /* "wall_ms" */
	const char *path;  /* "limits.wall_ms" */
	unsigned bit;      /* KIS_LIMIT_WALL */
	enum kis_limit_kind kind;
	uint64_t def, min, max;
	int per_exec;
	const char *flag, *help;
	size_t off;        /* offsetof(struct kis_limits, field) */
};

/* One entry per limit, in KIS_LIMITS order. */
KIS_API extern const struct kis_limit_info kis_limit_table[KIS_LIMIT__COUNT];

static inline uint64_t *kis_limit_slot(struct kis_limits *l, unsigned i)
{
	return (uint64_t *)(void *)((char *)l + kis_limit_table[i].off);
}
static inline uint64_t kis_limit_get(const struct kis_limits *l, unsigned i)
{
	return *(const uint64_t *)(const void *)((const char *)l + kis_limit_table[i].off);
}

/* Copy `in` with each 0 replaced by its safe default. */
KIS_API void kis_limits_resolve(const struct kis_limits *in, struct kis_limits *out);

#endif
