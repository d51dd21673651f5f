/* SPDX-License-Identifier: MIT */
/* libFuzzer target over the whole runtime: decode, validate, instantiate
 * with stand-in imports of the right types, then run each export on fuel. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_imports.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kis_wasm_module *m = NULL;
	struct kis_error *err = NULL;
	if (kis_wasm_module_load(data, size, &m, &err) < 0) {
		kis_error_free(err);
		return 0;
	}
	struct kis_wasm_store *s = kis_wasm_store_new();
	struct fuzz_imports c = { .m = m, .s = s };
	struct kis_wasm_instance *inst = NULL;
	enum kis_wasm_trap trap;
	kis_wasm_set_fuel(s, 20000);
	if (s && kis_wasm_instantiate(s, m, fuzz_resolve, &c, &inst, &trap, &err) == 0) {
		for (uint32_t i = 0; i < m->nexports; i++) {
			struct kis_wasm_extern e;
			if (m->exports[i].kind != KIS_WASM_EXTERN_FUNC ||
			    kis_wasm_instance_export_n(inst, m->exports[i].name, m->exports[i].name_len, &e) < 0)
				continue;
			/* slots: up to two per value (v128) */
			kis_wasm_slot args[2 * KIS_WASM_MAX_PARAMS] = { 0 }, res[2 * KIS_WASM_MAX_PARAMS];
			(void)kis_wasm_call(s, e.u.func, args, res);
		}
	}
	kis_error_free(err);
	kis_wasm_store_free(s);
	kis_wasm_module_free(m);
	return 0;
}
