/* SPDX-License-Identifier: MIT */
/* Internal: WASI preview1 (wasi_snapshot_preview1) over the interpreter:
 * one context per run, its descriptor table, and a runner for _start. */
#ifndef KIS_WASM_WASI_H
#define KIS_WASM_WASI_H

#include <stdbool.h>
#include <stdint.h>

#include "kis/wasm.h"

struct kis_wasi;

struct kis_wasi_config {
	char *const *argv;      /* argv[0] is the module's name as the guest sees it */
	char *const *envp;      /* "KEY=VALUE" */
	int stdin_fd, stdout_fd, stderr_fd; /* host descriptors (stay the caller's) */
	int preopen_fd;         /* host directory: the only preopen, guest fd 3; -1: none */
	const char *preopen_name; /* "/" */
	/* More preopens (the profile's mounts, issue 21): guest fd 4 + i is
	 * host fd extra[i].fd, named extra[i].name; ro: only the rights that
	 * read (no write, create, link, rename, unlink, set-size or times) */
	const struct kis_wasi_preopen {
		int fd;
		const char *name;
		bool ro;
	} *extra;
	size_t n_extra;
	uint32_t max_fds;       /* size of the guest's descriptor table (>= 4) */
};

/* How a module's run ended. */
struct kis_wasi_outcome {
	bool exited;            /* proc_exit or a normal return from _start */
	int exit_code;
	enum kis_wasm_trap trap;/* when !exited: why it stopped */
	uint64_t memory_bytes;  /* linear memory at the end (never shrinks: the peak) */
	uint64_t memory_cap;    /* the cap applied (0: none) */
	char message[200];      /* link errors and the like */
};

struct kis_wasi *kis_wasi_new(const struct kis_wasi_config *cfg);
/* Takes over the preopen's host descriptor (closed here). Free the store
 * first: the module it ran must outlive its instances. */
void kis_wasi_free(struct kis_wasi *w);
/* Import resolver for kis_wasm_instantiate: wasi_snapshot_preview1 only. */
int kis_wasi_resolve(void *w, const char *module, const char *name,
		     enum kis_wasm_extern_kind kind, struct kis_wasm_extern *out);
/* Bind host functions into the store (before instantiate). */
int kis_wasi_bind(struct kis_wasi *w, struct kis_wasm_store *s);

/* Load, instantiate and call _start. memory_cap (bytes, 0: none) lowers the
 * maximum of memory 0 so that memory.grow past it returns -1 (spec 4.4.7.11
 * lets grow fail). Returns 0 when the module ran (outcome says how it
 * ended), -1 when it could not be loaded or linked (message says why). */
int kis_wasi_run_module(struct kis_wasi *w, struct kis_wasm_store *s, const uint8_t *bytes,
			size_t len,
			uint64_t memory_cap, struct kis_wasi_outcome *out);

/* The wasm magic (core spec 5.5.16). */
bool kis_wasi_is_module(const uint8_t *bytes, size_t len);

#endif
