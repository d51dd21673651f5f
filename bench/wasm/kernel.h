/* SPDX-License-Identifier: MIT */
/* Shared definitions of the benchmark kernels: each exports `run`, takes no
 * arguments, needs no libc and returns a checksum of its work. */
#ifndef KIS_BENCH_KERNEL_H
#define KIS_BENCH_KERNEL_H

#ifdef __wasm__
#define KERNEL __attribute__((export_name("run"))) __attribute__((noinline))
#else
#define KERNEL __attribute__((noinline))
#endif

/* 0 by default; the bench script may make every kernel bigger or smaller */
#ifndef SCALE_ADJ
#define SCALE_ADJ 0
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

KERNEL unsigned run(void);

#endif
