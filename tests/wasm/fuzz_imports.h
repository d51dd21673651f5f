/* SPDX-License-Identifier: MIT */
/* What both wasm fuzz targets (fuzz_wasm.c, fuzz_wasm_diff.c) give a module
 * for its imports: stand-ins of exactly the declared types, functions that
 * return zeros, tables and memories capped so an input cannot ask for
 * gigabytes. Included once by each target (static functions). */
#ifndef KIS_TESTS_FUZZ_IMPORTS_H
#define KIS_TESTS_FUZZ_IMPORTS_H

#include <stdint.h>
#include <string.h>

#include "kis/wasm.h"
#include "wasm/internal.h"

static enum kis_wasm_trap fuzz_stub(void *user, struct kis_wasm_instance *caller,
			       const kis_wasm_slot *args, kis_wasm_slot *results)
{
	const struct wasm_functype *t = user;
	memset(results, 0, (size_t)t->nrs * sizeof(*results)); /* slots: two per v128 */
	return KIS_WASM_OK;
}

struct fuzz_imports {
	const struct kis_wasm_module *m;
	struct kis_wasm_store *s;
	uint32_t next; /* index of the import being resolved */
};

/* Make an object that matches the import's declared type exactly. */
static int fuzz_resolve(void *user, const char *module, const char *name,
		   enum kis_wasm_extern_kind kind, struct kis_wasm_extern *out)
{
	struct fuzz_imports *c = user;
	const struct wasm_import *im = &c->m->imports[c->next++];
	out->kind = kind;
	switch (kind) {
	case KIS_WASM_EXTERN_FUNC: {
		const struct wasm_functype *t = &c->m->types[c->m->func_types[im->idx]];
		out->u.func = kis_wasm_host_func_new(c->s, t->t, t->np, t->t + t->np, t->nr, fuzz_stub,
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

#endif
