/* SPDX-License-Identifier: MIT */
/* kis-wasm-run: load a module without imports, call one export that takes
 * no arguments (default "run") and print its first result; for benchmarks. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kis/wasm.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: kis-wasm-run FILE.wasm [EXPORT]\n");
		return 2;
	}
	const char *export = argc > 2 ? argv[2] : "run";
	FILE *f = fopen(argv[1], "rb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = malloc(cap);
	size_t got;
	while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
		len += got;
		if (len == cap)
			buf = realloc(buf, cap *= 2);
	}
	fclose(f);
	if (!buf)
		return 1;
	struct kis_wasm_module *m = NULL;
	struct kis_wasm_store *s = kis_wasm_store_new();
	struct kis_wasm_instance *inst = NULL;
	struct kis_error *err = NULL;
	enum kis_wasm_trap trap;
	if (!s || kis_wasm_module_load(buf, len, &m, &err) < 0 ||
	    kis_wasm_instantiate(s, m, NULL, NULL, &inst, &trap, &err) < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], err ? err->message : "out of memory");
		return 1;
	}
	free(buf);
	struct kis_wasm_extern e;
	if (kis_wasm_instance_export(inst, export, &e) < 0 || e.kind != KIS_WASM_EXTERN_FUNC) {
		fprintf(stderr, "%s: no exported function '%s'\n", argv[1], export);
		return 1;
	}
	kis_wasm_slot res[16] = { 0 };
	trap = kis_wasm_call(s, e.u.func, NULL, res);
	if (trap != KIS_WASM_OK) {
		fprintf(stderr, "%s: trap: %s\n", argv[1], kis_wasm_trap_message(trap));
		return 1;
	}
	printf("%" PRIu32 "\n", (uint32_t)res[0]);
	kis_wasm_store_free(s);
	kis_wasm_module_free(m);
	return 0;
}
