/* SPDX-License-Identifier: MIT */
/* libFuzzer target over the whole runtime: decode, validate, instantiate
 * with stand-in imports of the right types, then run each export on fuel. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kis/wasm.h"
#include "wasm/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum kis_wasm_trap stub(void *user, struct kis_wasm_instance *caller,
			       const kis_wasm_slot *args, kis_wasm_slot *results)
{
	const struct wasm_functype *t = user;
	memset(results, 0, (size_t)t->nrs * sizeof(*results)); /* slots: two per v128 */
	return KIS_WASM_OK;
}

struct fuzz_ctx {
	const struct kis_wasm_module *m;
	struct kis_wasm_store *s;
	uint32_t next; /* index of the import being resolved */
};

/* Make an object that matches the import's declared type exactly. */
static int resolve(void *user, const char *module, const char *name,
		   enum kis_wasm_extern_kind kind, struct kis_wasm_extern *out)
{
	struct fuzz_ctx *c = user;
	const struct wasm_import *im = &c->m->imports[c->next++];
	out->kind = kind;
	switch (kind) {
	case KIS_WASM_EXTERN_FUNC: {
		const struct wasm_functype *t = &c->m->types[c->m->func_types[im->idx]];
		out->u.func = kis_wasm_host_func_new(c->s, t->t, t->np, t->t + t->np, t->nr, stub,
						     (void *)t);
		break;
	}
	case KIS_WASM_EXTERN_TABLE: {
		const struct wasm_tabletype *t = &c->m->tables[im->idx];
		uint32_t min = t->lim.min > 100000 ? 100000 : t->lim.min;
		out->u.table = kis_wasm_table_new(c->s, (enum kis_wasm_valtype)t->elem, min,
						  t->lim.has_max, t->lim.max);
		break;
	}
	case KIS_WASM_EXTERN_MEMORY: {
		const struct wasm_limits *l = &c->m->mems[im->idx];
		out->u.memory = kis_wasm_memory_new(c->s, l->min > 256 ? 256 : l->min, l->has_max,
						    l->max);
		break;
	}
	case KIS_WASM_EXTERN_GLOBAL: {
		const struct wasm_globaltype *g = &c->m->globals[im->idx];
		out->u.global = kis_wasm_global_new(c->s, (enum kis_wasm_valtype)g->type, g->mut, 0);
		break;
	}
	default:
		return -1;
	}
	return out->u.func ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kis_wasm_module *m = NULL;
	struct kis_error *err = NULL;
	if (kis_wasm_module_load(data, size, &m, &err) < 0) {
		kis_error_free(err);
		return 0;
	}
	struct kis_wasm_store *s = kis_wasm_store_new();
	struct fuzz_ctx c = { .m = m, .s = s };
	struct kis_wasm_instance *inst = NULL;
	enum kis_wasm_trap trap;
	kis_wasm_set_fuel(s, 20000);
	if (s && kis_wasm_instantiate(s, m, resolve, &c, &inst, &trap, &err) == 0) {
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
