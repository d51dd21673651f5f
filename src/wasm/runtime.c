/* SPDX-License-Identifier: MIT */
/* The store and its objects (spec 4.2), instantiation with import matching
 * (spec 4.5), and the public call interface; growth of tables and memories
 * is memory.c's. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mremap */
#endif
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "wasm/internal.h"
#include "wasm/jit.h"
#include "wasm/jit_tierup.h"

static const char *const trap_messages[KIS_WASM_TRAP__COUNT] = {
	[KIS_WASM_OK] = "ok",
	[KIS_WASM_TRAP_UNREACHABLE] = "unreachable",
	[KIS_WASM_TRAP_MEMORY_OOB] = "out of bounds memory access",
	[KIS_WASM_TRAP_TABLE_OOB] = "out of bounds table access",
	[KIS_WASM_TRAP_DIV_ZERO] = "integer divide by zero",
	[KIS_WASM_TRAP_INT_OVERFLOW] = "integer overflow",
	[KIS_WASM_TRAP_INVALID_CONVERSION] = "invalid conversion to integer",
	[KIS_WASM_TRAP_UNDEFINED_ELEMENT] = "undefined element",
	[KIS_WASM_TRAP_UNINITIALIZED_ELEMENT] = "uninitialized element",
	[KIS_WASM_TRAP_INDIRECT_CALL_MISMATCH] = "indirect call type mismatch",
	[KIS_WASM_TRAP_STACK_EXHAUSTED] = "call stack exhausted",
	[KIS_WASM_TRAP_INTERRUPTED] = "interrupted",
	[KIS_WASM_TRAP_OUT_OF_FUEL] = "out of fuel",
	[KIS_WASM_TRAP_HOST] = "host function trapped",
};

const char *kis_wasm_trap_message(enum kis_wasm_trap trap)
{
	if ((unsigned)trap >= KIS_WASM_TRAP__COUNT)
		return "unknown trap";
	return trap_messages[trap];
}

/* ---- store ---- */

struct kis_wasm_store *kis_wasm_store_new(void)
{
	struct kis_wasm_store *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	/* one zero slot below the stack: the interpreter reloads its cached
	 * top (sp[-1], see exec.c) even when the stack is empty */
	uint64_t *slots = malloc(((size_t)KIS_WASM_STACK_SLOTS + 1) * sizeof(uint64_t));
	s->frames = malloc(((size_t)KIS_WASM_MAX_CALL_DEPTH + 2) * sizeof(*s->frames));
	if (!slots || !s->frames) {
		free(slots);
		free(s->frames);
		free(s);
		return NULL;
	}
	slots[0] = 0;
	s->stack = slots + 1;
	s->stack_end = s->stack + KIS_WASM_STACK_SLOTS;
	s->sp = s->stack;
	s->fuel_budget = -1;
	s->fuel = INT64_MAX; /* unlimited, as kis_wasm_call sets it */
	s->mem_limit_pages = KIS_WASM_MAX_PAGES;
	atomic_init(&s->interrupt, 0);
	atomic_init(&s->jit_tick, 0);
	return s;
}

static int track(struct kis_wasm_store *s, int kind, void *p)
{
	if (s->nobjs == s->cap_objs) {
		size_t ncap = s->cap_objs ? s->cap_objs * 2 : 64;
		struct wasm_obj *n = realloc(s->objs, ncap * sizeof(*n));
		if (!n)
			return -1;
		s->objs = n;
		s->cap_objs = ncap;
	}
	s->objs[s->nobjs].kind = kind;
	s->objs[s->nobjs++].p = p;
	return 0;
}

static void memory_free(struct kis_wasm_memory *mem)
{
	if (mem->data && mem->reserved) /* with its prefix (jit.h) */
		munmap(mem->data - WASM_JIT_PREFIX, WASM_JIT_PREFIX + mem->reserved);
	else if (mem->data)
		munmap(mem->data, mem->size);
	free(mem);
}

static void instance_free(struct kis_wasm_instance *inst)
{
	free(inst->own_funcs);
	free(inst->funcs);
	free(inst->tables);
	free(inst->mems);
	free(inst->globals);
	if (inst->elems)
		for (uint32_t i = 0; i < inst->m->nelems; i++)
			free(inst->elems[i].refs);
	free(inst->elems);
	free(inst->data_dropped);
	wasm_jit_instance_free(inst);
	free(inst);
}

void kis_wasm_store_free(struct kis_wasm_store *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nobjs; i++) {
		void *p = s->objs[i].p;
		switch (s->objs[i].kind) {
		case OBJ_FUNC: {
			struct kis_wasm_func *f = p;
			free(f->own.t);
			free(f);
			break;
		}
		case OBJ_TABLE:
			free(((struct kis_wasm_table *)p)->elems);
			free(p);
			break;
		case OBJ_MEMORY:
			memory_free(p);
			break;
		case OBJ_GLOBAL:
			free(p);
			break;
		case OBJ_INSTANCE:
			instance_free(p);
			break;
		default:
			break;
		}
	}
	free(s->objs);
	free(s->stack - 1); /* the guard slot, see kis_wasm_store_new */
	free(s->frames);
	wasm_jit_store_free(s->jit);
	wasm_jit_module_free(s->linked);
	free(s);
}

int kis_wasm_compiler_available(void)
{
	return wasm_jit_present();
}

int kis_wasm_compiler_load(struct kis_error **err)
{
	char msg[320];
	if (wasm_jit_load(msg, sizeof(msg)) < 0)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0, "%s", msg);
	return 0;
}

int kis_wasm_store_use_compiler(struct kis_wasm_store *s, int on, struct kis_error **err)
{
	/* with cached code in hand, LLVM is needed only if that is refused:
	 * not loaded now (jit_load.c: a refused one is compiled only by a
	 * compiler loaded already) */
	/* KIS_WASM_COMPILE_OR_INTERPRET: a compiler that cannot start or
	 * refuses a module leaves that instance to the interpreter */
	bool soft = on == KIS_WASM_COMPILE_OR_INTERPRET;
	if (on && !s->cached && kis_wasm_compiler_load(soft ? NULL : err) < 0 && !soft)
		return -1;
	if (on && s->cached && !kis_wasm_compiler_available() && !soft)
		return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0,
				     "wasm.engine: the compiler (libkis-jit.so) is not installed");
	if (on) {
		/* guard-region memory needs its fault handler, installed now
		 * (cached code too): a confined caller loads its seccomp filter
		 * after this */
		char msg[200];
		if (wasm_jit_guard_mode() && wasm_jit_fault_init(msg, sizeof(msg)) < 0) {
			if (!soft)
				return kis_error_set(err, KIS_E_INTERNAL, errno, "%s", msg);
			on = 0;
		}
	}
	s->compile = on != 0;
	s->compile_or_interpret = soft;
	return 0;
}

void kis_wasm_store_on_compiled(struct kis_wasm_store *s,
				void (*fn)(void *user, const uint8_t *obj, size_t len, int from_cache),
				void *user)
{
	s->compiled = fn;
	s->compiled_user = user;
}

void kis_wasm_store_use_cached_code(struct kis_wasm_store *s, const uint8_t *obj, size_t len)
{
	s->cached = obj;
	s->cached_len = len;
}

int kis_wasm_store_link_cached_code(struct kis_wasm_store *s)
{
	if (!s->cached || s->linked)
		return s->linked ? 0 : -1;
	return wasm_jit_link_cached(s->cached, s->cached_len, &s->linked);
}

int wasm_store_use_prelinked(struct kis_wasm_store *s, struct wasm_jit_module *jm)
{
	if (!jm || s->linked || wasm_jit_elf_seal(jm, NULL, 0) < 0)
		return -1;
	wasm_jit_elf_keep_object(jm, NULL, 0, true);
	s->linked = jm;
	return 0;
}

const char *kis_wasm_compiler_memory_mode(void)
{
	return wasm_jit_guard_mode() ? "guard" : "check";
}

int kis_wasm_compiler_id(char *buf, size_t len)
{
	if (wasm_jit_id(buf, len) < 0)
		return -1;
	/* the code differs by how it checks memory (jit.h), and the mode is
	 * the process's: part of what cached code is keyed by */
	size_t n = strlen(buf);
	int r = snprintf(buf + n, len - n, " mem %s", kis_wasm_compiler_memory_mode());
	return r < 0 || (size_t)r >= len - n ? -1 : 0;
}

void kis_wasm_interrupt(struct kis_wasm_store *s)
{
	atomic_store(&s->interrupt, 1);
	/* after the flag: compiled code that sees this bit finds it set
	 * (both sequentially consistent, lock-free: signal safe) */
	atomic_fetch_or(&s->jit_tick, WASM_JIT_TICK_INTERRUPT);
	/* and guard mode's poll pages shut: its compiled code's next tick
	 * faults into the trap (jit.h) */
	wasm_jit_poll_set(s, PROT_NONE);
}

void kis_wasm_set_fuel(struct kis_wasm_store *s, int64_t fuel)
{
	s->fuel_budget = fuel < 0 ? -1 : fuel;
}

int64_t kis_wasm_fuel_left(const struct kis_wasm_store *s)
{
	/* an unlimited run counts down from INT64_MAX (see kis_wasm_call) */
	return s->fuel_budget < 0 ? -1 : s->fuel;
}

void wasm_store_profile_to(struct kis_wasm_store *s, struct wasm_prof_out *o)
{
	s->prof_out = o;
}

/* The counts of inst's defined functions (struct kis_wasm_func.prof, what
 * the interpreter counted), saturated to 32 bits, then n: a reader that
 * sees n sees the counts before it (the engine reads them after the
 * child exited, waitpid orders the rest). */
void wasm_instance_profile_out(const struct kis_wasm_instance *inst)
{
	struct wasm_prof_out *o = inst->store->prof_out;
	const struct kis_wasm_module *m = inst->m;
	uint32_t n = m->nfuncs - m->nfunc_imports;
	if (!o || n == 0 || n > o->cap)
		return;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t c = inst->funcs[m->nfunc_imports + i]->prof;
		o->c[i] = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
	}
	o->n = n;
}

void kis_wasm_set_memory_limit(struct kis_wasm_store *s, uint32_t max_pages)
{
	s->mem_limit_pages = max_pages < KIS_WASM_MAX_PAGES ? max_pages : KIS_WASM_MAX_PAGES;
}

/* ---- objects ---- */

struct kis_wasm_func *kis_wasm_host_func_new(struct kis_wasm_store *s, const uint8_t *params,
					     uint32_t np, const uint8_t *results, uint32_t nr,
					     kis_wasm_host_fn fn, void *user)
{
	struct kis_wasm_func *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->own.t = malloc((size_t)np + nr + 1);
	if (!f->own.t || track(s, OBJ_FUNC, f) < 0) {
		free(f->own.t);
		free(f);
		return NULL;
	}
	if (np)
		memcpy(f->own.t, params, np);
	if (nr)
		memcpy(f->own.t + np, results, nr);
	f->own.np = np;
	f->own.nr = nr;
	f->own.nps = wasm_slots(f->own.t, np);
	f->own.nrs = wasm_slots(f->own.t + np, nr);
	f->type = &f->own;
	f->host = fn;
	f->user = user;
	return f;
}

void kis_wasm_func_type(const struct kis_wasm_func *f, const uint8_t **params, uint32_t *np,
			const uint8_t **results, uint32_t *nr)
{
	*params = f->type->t;
	*np = f->type->np;
	*results = f->type->t + f->type->np;
	*nr = f->type->nr;
}

struct kis_wasm_global *kis_wasm_global_new(struct kis_wasm_store *s, enum kis_wasm_valtype type,
					    int mutable_, kis_wasm_slot value)
{
	struct kis_wasm_global *g = calloc(1, sizeof(*g));
	if (!g || track(s, OBJ_GLOBAL, g) < 0) {
		free(g);
		return NULL;
	}
	g->type = (uint8_t)type;
	g->mut = mutable_ != 0;
	g->val = value;
	return g;
}

kis_wasm_slot kis_wasm_global_get(const struct kis_wasm_global *g)
{
	return g->val;
}

void kis_wasm_global_get_v128(const struct kis_wasm_global *g, kis_wasm_slot out[2])
{
	out[0] = g->val;
	out[1] = g->hi;
}

enum kis_wasm_valtype kis_wasm_global_type(const struct kis_wasm_global *g)
{
	return (enum kis_wasm_valtype)g->type;
}

int kis_wasm_global_set(struct kis_wasm_global *g, kis_wasm_slot value)
{
	if (!g->mut)
		return -1;
	g->val = value;
	return 0;
}

struct kis_wasm_table *kis_wasm_table_new(struct kis_wasm_store *s, enum kis_wasm_valtype elem,
					  uint32_t min, int has_max, uint32_t max)
{
	if (min > KIS_WASM_MAX_TABLE_ELEMS)
		return NULL;
	struct kis_wasm_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->elems = calloc((size_t)min + 1, sizeof(uint64_t));
	if (!t->elems || track(s, OBJ_TABLE, t) < 0) {
		free(t->elems);
		free(t);
		return NULL;
	}
	t->elem = (uint8_t)elem;
	t->size = min;
	t->lim.min = min;
	t->lim.has_max = has_max != 0;
	t->lim.max = has_max ? max : UINT32_MAX;
	return t;
}

struct kis_wasm_memory *kis_wasm_memory_new(struct kis_wasm_store *s, uint32_t min, int has_max,
					    uint32_t max)
{
	struct kis_wasm_memory *mem = calloc(1, sizeof(*mem));
	if (!mem)
		return NULL;
	mem->lim.min = min;
	mem->lim.has_max = has_max != 0;
	mem->lim.max = has_max ? max : 65536;
	mem->cap_pages = s->mem_limit_pages;
	/* compiled code of this process checks no index against the size:
	 * the reservation is what keeps it inside (jit.h) */
	if (s->compile && wasm_jit_guard_mode() && wasm_memory_reserve(mem) < 0) {
		free(mem);
		return NULL;
	}
	if (min > mem->cap_pages || (min && wasm_memory_grow(mem, min) < 0) ||
	    track(s, OBJ_MEMORY, mem) < 0) {
		memory_free(mem);
		return NULL;
	}
	return mem;
}

uint8_t *kis_wasm_memory_data(struct kis_wasm_memory *mem, uint64_t *size)
{
	*size = mem->size;
	return mem->data;
}

/* ---- instantiation (spec 4.5.4) ---- */

/* Import subtyping of limits (spec 4.5.2.4): at least as large, and a
 * maximum at least as tight. */
static bool limits_match(uint64_t size, const struct wasm_limits *have, const struct wasm_limits *want)
{
	if (size < want->min)
		return false;
	if (want->has_max && (!have->has_max || have->max > want->max))
		return false;
	return true;
}

static uint64_t eval_const(const struct kis_wasm_instance *inst, const struct wasm_constexpr *e)
{
	switch (e->op) {
	case 0x23:
		return inst->globals[e->val]->val;
	case 0xd2:
		return (uint64_t)(uintptr_t)inst->funcs[e->val];
	case 0xd0:
		return 0;
	default:
		return e->val;
	}
}

static int link_imports(struct kis_wasm_instance *inst, kis_wasm_resolve_fn resolve, void *user,
			struct kis_error **err)
{
	const struct kis_wasm_module *m = inst->m;
	for (uint32_t i = 0; i < m->nimports; i++) {
		const struct wasm_import *im = &m->imports[i];
		struct kis_wasm_extern ext;
		memset(&ext, 0, sizeof(ext));
		if (!resolve || resolve(user, im->module, im->name, (enum kis_wasm_extern_kind)im->kind, &ext) < 0)
			return kis_error_set(err, KIS_E_NOT_FOUND, 0, "unknown import '%s' '%s'",
					     im->module, im->name);
		bool ok = ext.kind == im->kind && ext.u.func;
		if (ok) {
			switch (im->kind) {
			case KIS_WASM_EXTERN_FUNC:
				ok = wasm_functype_eq(ext.u.func->type, &m->types[m->func_types[im->idx]]);
				inst->funcs[im->idx] = ext.u.func;
				break;
			case KIS_WASM_EXTERN_TABLE: {
				const struct wasm_tabletype *want = &m->tables[im->idx];
				ok = ext.u.table->elem == want->elem &&
				     limits_match(ext.u.table->size, &ext.u.table->lim, &want->lim);
				inst->tables[im->idx] = ext.u.table;
				break;
			}
			case KIS_WASM_EXTERN_MEMORY:
				ok = limits_match(ext.u.memory->size / WASM_PAGE, &ext.u.memory->lim,
						  &m->mems[im->idx]);
				inst->mems[im->idx] = ext.u.memory;
				break;
			case KIS_WASM_EXTERN_GLOBAL:
				ok = ext.u.global->type == m->globals[im->idx].type &&
				     ext.u.global->mut == m->globals[im->idx].mut;
				inst->globals[im->idx] = ext.u.global;
				break;
			default:
				ok = false;
				break;
			}
		}
		if (!ok)
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0,
					     "incompatible import type for '%s' '%s'", im->module, im->name);
	}
	return 0;
}

static int fail_trap(struct kis_error **err, enum kis_wasm_trap *trap, enum kis_wasm_trap t)
{
	*trap = t;
	return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "instantiation trapped: %s",
			     kis_wasm_trap_message(t));
}

int kis_wasm_instantiate(struct kis_wasm_store *s, const struct kis_wasm_module *m,
			 kis_wasm_resolve_fn resolve, void *user, struct kis_wasm_instance **out,
			 enum kis_wasm_trap *trap, struct kis_error **err)
{
	enum kis_wasm_trap dummy;
	if (!trap)
		trap = &dummy;
	*trap = KIS_WASM_OK;
	struct kis_wasm_instance *inst = calloc(1, sizeof(*inst));
	if (!inst)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot allocate instance");
	inst->m = m;
	inst->store = s;
	inst->funcs = calloc((size_t)m->nfuncs + 1, sizeof(*inst->funcs));
	inst->tables = calloc((size_t)m->ntables + 1, sizeof(*inst->tables));
	inst->mems = calloc((size_t)m->nmems + 1, sizeof(*inst->mems));
	inst->globals = calloc((size_t)m->nglobals + 1, sizeof(*inst->globals));
	inst->elems = calloc((size_t)m->nelems + 1, sizeof(*inst->elems));
	inst->data_dropped = calloc((size_t)m->ndatas + 1, sizeof(bool));
	uint32_t ndef = m->nfuncs - m->nfunc_imports;
	struct kis_wasm_func *own = calloc((size_t)ndef + 1, sizeof(*own));
	if (!inst->funcs || !inst->tables || !inst->mems || !inst->globals || !inst->elems ||
	    !inst->data_dropped || !own || track(s, OBJ_INSTANCE, inst) < 0) {
		inst->own_funcs = own;
		instance_free(inst);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot allocate instance");
	}
	for (uint32_t i = 0; i < ndef; i++) {
		own[i].type = &m->types[m->func_types[m->nfunc_imports + i]];
		own[i].inst = inst;
		own[i].code = &m->codes[i];
		inst->funcs[m->nfunc_imports + i] = &own[i];
	}
	inst->own_funcs = own;

	TRY(link_imports(inst, resolve, user, err));
	if (s->compile) {
		/* the module's own code first: a module the compiler refuses
		 * fails before any object of it is made */
		/* The module's machine code is made once and kept with it (it
		 * is the module's, like its translation): the cast is that
		 * lazily filled cache, not a change of what the module means. */
		char msg[512];
		((struct kis_wasm_module *)m)->jit_guard = wasm_jit_guard_mode();
		((struct kis_wasm_module *)m)->jit_tier = s->jit_tier;
		if (wasm_jit_compile((struct kis_wasm_module *)m, s->cached, s->cached_len,
				     &s->linked, msg, sizeof(msg)) < 0 &&
		    !s->compile_or_interpret)
			return kis_error_set(err, KIS_E_PROFILE_UNSATISFIABLE, 0, "%s", msg);
		s->cached = NULL;
		s->cached_len = 0;
		if (s->compiled) { /* with no code (interpreted): obj NULL, len 0 */
			size_t len;
			bool cached;
			const uint8_t *obj = wasm_jit_object(m->jit, &len, &cached);
			s->compiled(s->compiled_user, obj, len, cached);
		}
	}
	if (m->bodies_deferred && !m->jit) {
		/* loaded for cached code that is not running (refused, or an
		 * interpreting store): the bodies are validated now, or the
		 * module is refused as kis_wasm_module_load would have */
		char msg[256];
		if (wasm_module_finish_bodies((struct kis_wasm_module *)m, msg, sizeof(msg)) < 0)
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "%s", msg);
	}

	for (uint32_t i = m->ntable_imports; i < m->ntables; i++) {
		const struct wasm_tabletype *t = &m->tables[i];
		inst->tables[i] = kis_wasm_table_new(s, (enum kis_wasm_valtype)t->elem, t->lim.min,
						     t->lim.has_max, t->lim.max);
		if (!inst->tables[i])
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, ENOMEM, "cannot allocate table of %u elements", t->lim.min);
	}
	for (uint32_t i = m->nmem_imports; i < m->nmems; i++) {
		const struct wasm_limits *l = &m->mems[i];
		inst->mems[i] = kis_wasm_memory_new(s, l->min, l->has_max, l->max);
		if (!inst->mems[i])
			return kis_error_set(err, KIS_E_INVALID_ARGUMENT, ENOMEM,
					     "cannot allocate memory of %u pages (store limit %u)", l->min,
					     s->mem_limit_pages);
	}
	for (uint32_t i = m->nglobal_imports; i < m->nglobals; i++) {
		const struct wasm_globaltype *g = &m->globals[i];
		const struct wasm_constexpr *e = &m->global_init[i - m->nglobal_imports];
		uint64_t v = eval_const(inst, e);
		inst->globals[i] = kis_wasm_global_new(s, (enum kis_wasm_valtype)g->type, g->mut, v);
		if (!inst->globals[i])
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot allocate global");
		/* a v128's high half: from the constant or the global read */
		inst->globals[i]->hi = e->op == 0x23 ? inst->globals[e->val]->hi : e->hi;
	}
	for (uint32_t i = 0; i < m->nelems; i++) {
		const struct wasm_elem *e = &m->elems[i];
		inst->elems[i].refs = calloc((size_t)e->n + 1, sizeof(uint64_t));
		if (!inst->elems[i].refs)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot allocate element segment");
		for (uint32_t k = 0; k < e->n; k++)
			inst->elems[i].refs[k] = eval_const(inst, &e->init[k]);
		inst->elems[i].n = e->n;
	}

	if (s->compile && m->jit) {
		/* every object made: the context points at them */
		char msg[512];
		if (wasm_jit_instance_init(inst, msg, sizeof(msg)) < 0)
			return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "%s", msg);
	}
	/* Active segments behave as table.init / memory.init followed by a
	 * drop, in order; a trap stops there with earlier writes kept. */
	for (uint32_t i = 0; i < m->nelems; i++) {
		const struct wasm_elem *e = &m->elems[i];
		if (e->mode == SEG_ACTIVE) {
			struct kis_wasm_table *t = inst->tables[e->table];
			uint64_t off = (uint32_t)eval_const(inst, &e->offset);
			if (off + e->n > t->size)
				return fail_trap(err, trap, KIS_WASM_TRAP_TABLE_OOB);
			if (e->n)
				memcpy(t->elems + off, inst->elems[i].refs, (size_t)e->n * 8);
		}
		if (e->mode != SEG_PASSIVE)
			inst->elems[i].n = 0;
	}
	for (uint32_t i = 0; i < m->ndatas; i++) {
		const struct wasm_data *d = &m->datas[i];
		if (d->mode != SEG_ACTIVE)
			continue;
		struct kis_wasm_memory *mem = inst->mems[d->mem];
		uint64_t off = (uint32_t)eval_const(inst, &d->offset);
		if (off + d->len > mem->size)
			return fail_trap(err, trap, KIS_WASM_TRAP_MEMORY_OOB);
		if (d->len)
			memcpy(mem->data + off, d->bytes, d->len);
		inst->data_dropped[i] = true;
	}
	if (m->start >= 0) {
		enum kis_wasm_trap t = kis_wasm_call(s, inst->funcs[m->start], NULL, NULL);
		if (t != KIS_WASM_OK)
			return fail_trap(err, trap, t);
	}
	*out = inst;
	return 0;
}

int kis_wasm_instance_export(const struct kis_wasm_instance *inst, const char *nm,
			     struct kis_wasm_extern *out)
{
	return kis_wasm_instance_export_n(inst, nm, strlen(nm), out);
}

int kis_wasm_instance_export_n(const struct kis_wasm_instance *inst, const char *nm, size_t len,
			       struct kis_wasm_extern *out)
{
	const struct kis_wasm_module *m = inst->m;
	for (uint32_t i = 0; i < m->nexports; i++) {
		const struct wasm_export *e = &m->exports[i];
		if (e->name_len != len || memcmp(e->name, nm, len))
			continue;
		out->kind = (enum kis_wasm_extern_kind)e->kind;
		switch (e->kind) {
		case KIS_WASM_EXTERN_FUNC:
			out->u.func = inst->funcs[e->idx];
			break;
		case KIS_WASM_EXTERN_TABLE:
			out->u.table = inst->tables[e->idx];
			break;
		case KIS_WASM_EXTERN_MEMORY:
			out->u.memory = inst->mems[e->idx];
			break;
		default:
			out->u.global = inst->globals[e->idx];
			break;
		}
		return 0;
	}
	return -1;
}

struct kis_wasm_memory *kis_wasm_instance_memory(const struct kis_wasm_instance *inst)
{
	return inst->m->nmems ? inst->mems[0] : NULL;
}

enum kis_wasm_trap kis_wasm_call(struct kis_wasm_store *s, struct kis_wasm_func *f,
				 const kis_wasm_slot *args, kis_wasm_slot *results)
{
	if (s->depth == 0) {
		/* a new run from the host: fresh budget, no stale interrupt */
		atomic_store(&s->interrupt, 0);
		/* unlimited (-1) becomes a count the interpreter never exhausts:
		 * it then only decrements and tests the sign (exec.c TICK) */
		s->fuel = s->fuel_budget < 0 ? INT64_MAX : s->fuel_budget;
		/* compiled code counts fuel only in a budgeted run: unlimited,
		 * the count is never read (kis_wasm_fuel_left says -1) */
		atomic_store(&s->jit_tick, s->fuel_budget < 0 ? 0 : WASM_JIT_TICK_METER);
		/* guard mode's poll pages (jit.h): readable, or shut for a
		 * budget (each tick then faults and counts); then the flag
		 * again, for an interrupt that came while they were opened */
		wasm_jit_poll_set(s, s->fuel_budget < 0 ? PROT_READ : PROT_NONE);
		if (atomic_load(&s->interrupt))
			wasm_jit_poll_set(s, PROT_NONE);
	}
	return wasm_invoke(s, f, args, results);
}
