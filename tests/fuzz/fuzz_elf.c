/* SPDX-License-Identifier: MIT */
/* libFuzzer target: our linker of compiled wasm code (src/wasm/jit_elf.c),
 * fed what a corrupt or planted cache file, or a compiler process that a
 * hostile module took over (kis-helper answers with an object the engine
 * links), could hand it. The linker is on that boundary: whatever the
 * bytes, it refuses by name or links, and never reads or writes outside
 * the object or the image it mapped.
 *
 * Each input goes through both of its paths: the check (the whole link
 * computed for an image where mmap would put one, nothing mapped), then the
 * link itself into a mapping made read-execute (never run). They must agree:
 * an object the check passes links, one it refuses is refused, except where
 * the kernel refuses the mapping (cannot-map). Where the object links, the
 * entries of the functions it defines are looked up as the runtime does.
 * Code pages are never executed here: what the code would do is the
 * compiler's business and the wasm tier's seccomp filter's, not the
 * linker's. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "wasm/jit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void disagree(int check, int link, const char *err)
{
	fprintf(stderr, "fuzz-elf: the check said %d, the link %d (%s)\n", check, link, err);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[300] = "";
	/* as many functions as the object defines (the cache's reader knows
	 * the module's count; a fuzzed object states its own) */
	for (int round = 0; round < 2; round++) {
		uint32_t nfuncs = round == 0 ? UINT32_MAX : 1;
		struct wasm_jit_module *jm = NULL;
		int check = wasm_jit_elf_load(&wasm_jit_rt_externals, data, size, nfuncs, false, &jm,
					      err, sizeof(err));
		wasm_jit_elf_free(jm);
		jm = NULL;
		int link = wasm_jit_elf_load(&wasm_jit_rt_externals, data, size, nfuncs, true, &jm,
					     err, sizeof(err));
		if ((check == 0) != (link == 0) && link != -WASM_ELF_E_MAP)
			disagree(check, link, err);
		if (link == 0 && nfuncs != UINT32_MAX) {
			void *fn = NULL;
			void (*wrap)(void *, uint64_t *) = NULL;
			if (wasm_jit_elf_lookup(jm, 0, &fn, &wrap) < 0 || !fn || !wrap)
				disagree(check, link, "a linked function without its entries");
		}
		wasm_jit_elf_free(jm);
	}
	return 0;
}
