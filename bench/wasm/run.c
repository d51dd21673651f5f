/* SPDX-License-Identifier: MIT */
/* kis-wasm-run: load a module without imports, call one export that takes
 * no arguments (default "run") and print its first result; for benchmarks.
 * --engine compiler runs it compiled. --batch reads calls from stdin, one
 * a line ("EXPORT ARG..." with each argument a 64-bit slot in decimal) and
 * prints each one's results (slots in decimal) or its trap: the
 * differential test of the two engines (tests/integration/test_wasm_jit.py). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kis/wasm.h"

static int batch(struct kis_wasm_store *s, struct kis_wasm_instance *inst)
{
	char line[4096];
	while (fgets(line, sizeof(line), stdin)) {
		char *save = NULL, *name = strtok_r(line, " \t\n", &save);
		if (!name)
			continue;
		struct kis_wasm_extern e;
		if (kis_wasm_instance_export(inst, name, &e) < 0 || e.kind != KIS_WASM_EXTERN_FUNC) {
			printf("no export %s\n", name);
			continue;
		}
		kis_wasm_slot args[64] = {0}, res[64] = {0};
		const uint8_t *pt, *rt;
		uint32_t np, nr, n = 0;
		kis_wasm_func_type(e.u.func, &pt, &np, &rt, &nr);
		for (char *a; n < 64 && (a = strtok_r(NULL, " \t\n", &save)) != NULL;)
			args[n++] = strtoull(a, NULL, 10);
		if (n != np || nr > 64) {
			printf("bad call of %s\n", name);
			continue;
		}
		enum kis_wasm_trap trap = kis_wasm_call(s, e.u.func, args, res);
		if (trap != KIS_WASM_OK) {
			printf("trap: %s\n", kis_wasm_trap_message(trap));
			continue;
		}
		for (uint32_t i = 0; i < nr; i++)
			printf("%s%" PRIu64, i ? " " : "", res[i]);
		printf("\n");
	}
	return 0;
}

int main(int argc, char **argv)
{
	bool compiled = false, batched = false;
	for (; argc > 1 && argv[1][0] == '-'; argc--, argv++) {
		if (!strcmp(argv[1], "--engine") && argc > 2) {
			compiled = !strcmp(argv[2], "compiler");
			argc--, argv++;
		} else if (!strcmp(argv[1], "--batch")) {
			batched = true;
		} else {
			break;
		}
	}
	if (argc < 2) {
		fprintf(stderr, "usage: kis-wasm-run [--engine interpreter|compiler] [--batch] "
				"FILE.wasm [EXPORT]\n");
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
	if (!s || (compiled && kis_wasm_store_use_compiler(s, 1, &err) < 0) ||
	    kis_wasm_module_load(buf, len, &m, &err) < 0 ||
	    kis_wasm_instantiate(s, m, NULL, NULL, &inst, &trap, &err) < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], err ? err->message : "out of memory");
		return 1;
	}
	free(buf);
	if (batched) {
		batch(s, inst);
		kis_wasm_store_free(s);
		kis_wasm_module_free(m);
		return 0;
	}
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
