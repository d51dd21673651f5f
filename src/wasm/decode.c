/* SPDX-License-Identifier: MIT */
/* Binary decoder (spec chapter 5) with the module-level checks of validation
 * (spec 3.4); function bodies are handed to compile.c as they are read. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/io.h"
#include "wasm/internal.h"
#include "wasm/jit.h"

struct reader {
	const uint8_t *p, *end;
	char err[256];
	bool failed;
	bool defer_bodies; /* wasm_module_load_for_cache */
};

__attribute__((format(printf, 2, 3))) static int fail(struct reader *r, const char *fmt, ...)
{
	if (!r->failed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r->err, sizeof(r->err), fmt, ap);
		va_end(ap);
		r->failed = true;
	}
	return -1;
}


static int u32(struct reader *r, uint32_t *v)
{
	if (wasm_read_u32(&r->p, r->end, v) < 0)
		return fail(r, r->p >= r->end ? "malformed: unexpected end" : "malformed: integer representation too long");
	return 0;
}

static int byte(struct reader *r, uint8_t *b)
{
	*b = 0;
	if (r->p >= r->end)
		return fail(r, "malformed: unexpected end");
	*b = *r->p++;
	return 0;
}

/* A vector length, refused when it cannot fit in what is left (each element
 * takes at least one byte), so no input makes us allocate much. */
static int count(struct reader *r, uint32_t *n, uint32_t cap)
{
	if (u32(r, n) < 0)
		return -1;
	if (*n > (size_t)(r->end - r->p) || *n > cap)
		return fail(r, "malformed: unexpected end (length %u too large)", *n);
	return 0;
}

/* UTF-8 as spec 5.2.4 allows it: no overlong forms, no surrogates. */
static bool utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		uint32_t cp, min;
		size_t len;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			len = 2, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
			return false;
		i += len;
	}
	return true;
}

static int name_n(struct reader *r, char **out, uint32_t *len)
{
	uint32_t n;
	if (count(r, &n, UINT32_MAX) < 0)
		return -1;
	if (!utf8_valid(r->p, n))
		return fail(r, "malformed: malformed UTF-8 encoding");
	char *s = malloc((size_t)n + 1);
	if (!s)
		return fail(r, "out of memory");
	memcpy(s, r->p, n);
	s[n] = 0;
	r->p += n;
	*out = s;
	if (len)
		*len = n;
	return 0;
}

static int name(struct reader *r, char **out)
{
	return name_n(r, out, NULL);
}

static bool is_valtype(uint8_t t)
{
	return t == KIS_WASM_I32 || t == KIS_WASM_I64 || t == KIS_WASM_F32 || t == KIS_WASM_F64 ||
	       t == KIS_WASM_V128 || t == KIS_WASM_FUNCREF || t == KIS_WASM_EXTERNREF;
}

static int valtype(struct reader *r, uint8_t *t)
{
	if (byte(r, t) < 0)
		return -1;
	if (!is_valtype(*t))
		return fail(r, "malformed: malformed value type 0x%02x", *t);
	return 0;
}

static int reftype(struct reader *r, uint8_t *t)
{
	if (byte(r, t) < 0)
		return -1;
	if (*t != KIS_WASM_FUNCREF && *t != KIS_WASM_EXTERNREF)
		return fail(r, "malformed: malformed reference type");
	return 0;
}

static int limits(struct reader *r, struct wasm_limits *l)
{
	uint8_t flag;
	if (byte(r, &flag) < 0)
		return -1;
	if (flag > 1)
		return fail(r, "malformed: integer too large (limits flag)");
	if (u32(r, &l->min) < 0)
		return -1;
	l->has_max = flag == 1;
	l->max = UINT32_MAX;
	if (l->has_max && u32(r, &l->max) < 0)
		return -1;
	if (l->has_max && l->min > l->max)
		return fail(r, "invalid: size minimum must not be greater than maximum");
	return 0;
}

static int memtype(struct reader *r, struct wasm_limits *l)
{
	if (limits(r, l) < 0)
		return -1;
	if (l->min > 65536 || (l->has_max && l->max > 65536))
		return fail(r, "invalid: memory size must be at most 65536 pages (4GiB)");
	return 0;
}

static int tabletype(struct reader *r, struct wasm_tabletype *t)
{
	if (reftype(r, &t->elem) < 0)
		return -1;
	return limits(r, &t->lim);
}

static int globaltype(struct reader *r, struct wasm_globaltype *g)
{
	uint8_t mut;
	if (valtype(r, &g->type) < 0 || byte(r, &mut) < 0)
		return -1;
	if (mut > 1)
		return fail(r, "malformed: malformed mutability");
	g->mut = mut;
	return 0;
}

/* Constant expressions (spec 3.3.10): one instruction of the right type and
 * `end`. In Wasm 2.0 they may only read imported globals (context C' of
 * spec 3.4.10), for global initialisers and segment offsets alike. */
static int constexpr(struct reader *r, struct kis_wasm_module *m, uint8_t want,
		     uint32_t visible_globals, struct wasm_constexpr *e)
{
	uint8_t op;
	uint8_t got = 0;
	if (byte(r, &op) < 0)
		return -1;
	e->op = op;
	e->val = e->hi = 0;
	switch (op) {
	case 0x41: {
		int32_t v;
		if (wasm_read_s32(&r->p, r->end, &v) < 0)
			return fail(r, "malformed: integer representation too long");
		e->val = (uint32_t)v;
		got = KIS_WASM_I32;
		break;
	}
	case 0x42: {
		int64_t v;
		if (wasm_read_s64(&r->p, r->end, &v) < 0)
			return fail(r, "malformed: integer representation too long");
		e->val = (uint64_t)v;
		got = KIS_WASM_I64;
		break;
	}
	case 0x43:
	case 0x44: {
		size_t n = op == 0x43 ? 4 : 8;
		if ((size_t)(r->end - r->p) < n)
			return fail(r, "malformed: unexpected end");
		memcpy(&e->val, r->p, n); /* little-endian host */
		r->p += n;
		got = op == 0x43 ? KIS_WASM_F32 : KIS_WASM_F64;
		break;
	}
	case 0xfd: { /* v128.const (spec 5.4.8): subopcode 12, 16 bytes */
		uint32_t sub;
		if (u32(r, &sub) < 0)
			return -1;
		if (sub != 12)
			return fail(r, "invalid: constant expression required");
		if ((size_t)(r->end - r->p) < 16)
			return fail(r, "malformed: unexpected end");
		memcpy(&e->val, r->p, 8);
		memcpy(&e->hi, r->p + 8, 8);
		r->p += 16;
		got = KIS_WASM_V128;
		break;
	}
	case 0xd0:
		if (reftype(r, &got) < 0)
			return -1;
		break;
	case 0xd2: {
		uint32_t idx;
		if (u32(r, &idx) < 0)
			return -1;
		if (idx >= m->nfuncs)
			return fail(r, "invalid: unknown function %u", idx);
		m->declared[idx] = 1;
		e->val = idx;
		got = KIS_WASM_FUNCREF;
		break;
	}
	case 0x23: {
		uint32_t idx;
		if (u32(r, &idx) < 0)
			return -1;
		if (idx >= visible_globals)
			return fail(r, "invalid: unknown global %u", idx);
		if (m->globals[idx].mut)
			return fail(r, "invalid: constant expression required");
		e->val = idx;
		got = m->globals[idx].type;
		break;
	}
	case 0x0b:
		return fail(r, "invalid: type mismatch (empty constant expression)");
	default:
		return fail(r, "invalid: constant expression required");
	}
	if (byte(r, &op) < 0)
		return -1;
	if (op != 0x0b) {
		if ((op >= 0x41 && op <= 0x44) || op == 0xd0 || op == 0xd2 || op == 0x23 || op == 0xfd)
			return fail(r, "invalid: type mismatch (constant expression)");
		return fail(r, "invalid: constant expression required");
	}
	if (got != want)
		return fail(r, "invalid: type mismatch (constant expression)");
	return 0;
}

static void *grow_array(void *p, uint32_t n, size_t elem)
{
	return realloc(p, ((size_t)n + 1) * elem);
}

static int sec_type(struct reader *r, struct kis_wasm_module *m)
{
	uint32_t n;
	if (count(r, &n, KIS_WASM_MAX_TYPES) < 0)
		return -1;
	m->types = calloc((size_t)n + 1, sizeof(*m->types));
	if (!m->types)
		return fail(r, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		uint8_t form;
		uint32_t np, nr;
		if (byte(r, &form) < 0)
			return -1;
		if (form != 0x60)
			return fail(r, "malformed: integer representation too long (function type form)");
		struct wasm_functype *ft = &m->types[i];
		m->ntypes = i + 1;
		if (count(r, &np, KIS_WASM_MAX_PARAMS) < 0)
			return -1;
		ft->t = malloc((size_t)np + 1);
		if (!ft->t)
			return fail(r, "out of memory");
		for (uint32_t k = 0; k < np; k++)
			if (valtype(r, &ft->t[k]) < 0)
				return -1;
		if (count(r, &nr, KIS_WASM_MAX_PARAMS) < 0)
			return -1;
		uint8_t *t = realloc(ft->t, (size_t)np + nr + 1);
		if (!t)
			return fail(r, "out of memory");
		ft->t = t;
		for (uint32_t k = 0; k < nr; k++)
			if (valtype(r, &ft->t[np + k]) < 0)
				return -1;
		ft->np = np;
		ft->nr = nr;
		ft->nps = wasm_slots(ft->t, np);
		ft->nrs = wasm_slots(ft->t + np, nr);
	}
	return 0;
}

static int sec_import(struct reader *r, struct kis_wasm_module *m)
{
	uint32_t n;
	if (count(r, &n, KIS_WASM_MAX_IMPORTS) < 0)
		return -1;
	m->imports = calloc((size_t)n + 1, sizeof(*m->imports));
	if (!m->imports)
		return fail(r, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		struct wasm_import *im = &m->imports[i];
		m->nimports = i + 1;
		if (name(r, &im->module) < 0 || name(r, &im->name) < 0 || byte(r, &im->kind) < 0)
			return -1;
		switch (im->kind) {
		case KIS_WASM_EXTERN_FUNC: {
			uint32_t t;
			if (u32(r, &t) < 0)
				return -1;
			if (t >= m->ntypes)
				return fail(r, "invalid: unknown type %u", t);
			if (!(m->func_types = grow_array(m->func_types, m->nfuncs, sizeof(uint32_t))))
				return fail(r, "out of memory");
			im->idx = m->nfuncs;
			m->func_types[m->nfuncs++] = t;
			m->nfunc_imports++;
			break;
		}
		case KIS_WASM_EXTERN_TABLE:
			if (!(m->tables = grow_array(m->tables, m->ntables, sizeof(*m->tables))))
				return fail(r, "out of memory");
			if (tabletype(r, &m->tables[m->ntables]) < 0)
				return -1;
			im->idx = m->ntables++;
			m->ntable_imports++;
			break;
		case KIS_WASM_EXTERN_MEMORY:
			if (!(m->mems = grow_array(m->mems, m->nmems, sizeof(*m->mems))))
				return fail(r, "out of memory");
			if (memtype(r, &m->mems[m->nmems]) < 0)
				return -1;
			im->idx = m->nmems++;
			m->nmem_imports++;
			break;
		case KIS_WASM_EXTERN_GLOBAL:
			if (!(m->globals = grow_array(m->globals, m->nglobals, sizeof(*m->globals))))
				return fail(r, "out of memory");
			if (globaltype(r, &m->globals[m->nglobals]) < 0)
				return -1;
			im->idx = m->nglobals++;
			m->nglobal_imports++;
			break;
		default:
			return fail(r, "malformed: malformed import kind");
		}
	}
	if (m->nmems > 1)
		return fail(r, "invalid: multiple memories");
	return 0;
}

static int sec_function(struct reader *r, struct kis_wasm_module *m)
{
	uint32_t n;
	if (count(r, &n, KIS_WASM_MAX_FUNCS) < 0)
		return -1;
	uint32_t *ft = realloc(m->func_types, ((size_t)m->nfuncs + n + 1) * sizeof(uint32_t));
	if (!ft)
		return fail(r, "out of memory");
	m->func_types = ft;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t t;
		if (u32(r, &t) < 0)
			return -1;
		if (t >= m->ntypes)
			return fail(r, "invalid: unknown type %u", t);
		ft[m->nfuncs++] = t;
	}
	return 0;
}

static int sec_table(struct reader *r, struct kis_wasm_module *m)
{
	uint32_t n;
	if (count(r, &n, KIS_WASM_MAX_TABLES) < 0)
		return -1;
	struct wasm_tabletype *t = realloc(m->tables, ((size_t)m->ntables + n + 1) * sizeof(*t));
	if (!t)
		return fail(r, "out of memory");
	m->tables = t;
	for (uint32_t i = 0; i < n; i++)
		if (tabletype(r, &t[m->ntables++]) < 0)
			return -1;
	return 0;
}

static int sec_memory(struct reader *r, struct kis_wasm_module *m)
{
	uint32_t n;
	if (count(r, &n, 100) < 0)
		return -1;
	struct wasm_limits *l = realloc(m->mems, ((size_t)m->nmems + n + 1) * sizeof(*l));
	if (!l)
		return fail(r, "out of memory");
	m->mems = l;
	for (uint32_t i = 0; i < n; i++)
		if (memtype(r, &l[m->nmems++]) < 0)
			return -1;
	if (m->nmems > 1)
		return fail(r, "invalid: multiple memories");
	return 0;
}

static int sec_global(struct reader *r, struct kis_wasm_module *m)
{
	uint32_t n;
	if (count(r, &n, KIS_WASM_MAX_GLOBALS) < 0)
		return -1;
	struct wasm_globaltype *g = realloc(m->globals, ((size_t)m->nglobals + n + 1) * sizeof(*g));
	if (!g)
		return fail(r, "out of memory");
	m->globals = g;
	m->global_init = calloc((size_t)n + 1, sizeof(*m->global_init));
	if (!m->global_init)
		return fail(r, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		if (globaltype(r, &g[m->nglobals]) < 0)
			return -1;
		if (constexpr(r, m, g[m->nglobals].type, m->nglobal_imports, &m->global_init[i]) < 0)
			return -1;
		m->nglobals++;
	}
	return 0;
}

static int sec_export(struct reader *r, struct kis_wasm_module *m)
{
	uint32_t n;
	if (count(r, &n, KIS_WASM_MAX_EXPORTS) < 0)
		return -1;
	m->exports = calloc((size_t)n + 1, sizeof(*m->exports));
	if (!m->exports)
		return fail(r, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		struct wasm_export *e = &m->exports[i];
		m->nexports = i + 1;
		if (name_n(r, &e->name, &e->name_len) < 0 || byte(r, &e->kind) < 0 || u32(r, &e->idx) < 0)
			return -1;
		uint32_t lim;
		switch (e->kind) {
		case KIS_WASM_EXTERN_FUNC:
			lim = m->nfuncs;
			break;
		case KIS_WASM_EXTERN_TABLE:
			lim = m->ntables;
			break;
		case KIS_WASM_EXTERN_MEMORY:
			lim = m->nmems;
			break;
		case KIS_WASM_EXTERN_GLOBAL:
			lim = m->nglobals;
			break;
		default:
			return fail(r, "malformed: malformed export kind");
		}
		if (e->idx >= lim)
			return fail(r, "invalid: unknown %s %u",
				    (const char *[]){ "function", "table", "memory", "global" }[e->kind],
				    e->idx);
		if (e->kind == KIS_WASM_EXTERN_FUNC)
			m->declared[e->idx] = 1;
		/* Quadratic, but bounded by the export cap and only done once. */
		for (uint32_t k = 0; k < i; k++)
			if (m->exports[k].name_len == e->name_len &&
			    !memcmp(m->exports[k].name, e->name, e->name_len))
				return fail(r, "invalid: duplicate export name");
	}
	return 0;
}

static int sec_start(struct reader *r, struct kis_wasm_module *m)
{
	uint32_t f;
	if (u32(r, &f) < 0)
		return -1;
	if (f >= m->nfuncs)
		return fail(r, "invalid: unknown function %u", f);
	const struct wasm_functype *t = &m->types[m->func_types[f]];
	if (t->np || t->nr)
		return fail(r, "invalid: start function must have type [] -> []");
	m->start = f;
	return 0;
}

static int sec_elem(struct reader *r, struct kis_wasm_module *m)
{
	uint32_t n;
	if (count(r, &n, KIS_WASM_MAX_SEGMENTS) < 0)
		return -1;
	m->elems = calloc((size_t)n + 1, sizeof(*m->elems));
	if (!m->elems)
		return fail(r, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		struct wasm_elem *e = &m->elems[i];
		m->nelems = i + 1;
		uint32_t flags;
		if (u32(r, &flags) < 0)
			return -1;
		if (flags > 7)
			return fail(r, "malformed: malformed elements segment kind");
		e->type = KIS_WASM_FUNCREF;
		e->mode = (flags & 1) ? ((flags & 2) ? SEG_DECLARATIVE : SEG_PASSIVE) : SEG_ACTIVE;
		if (e->mode == SEG_ACTIVE) {
			if ((flags & 2) && u32(r, &e->table) < 0)
				return -1;
			if (e->table >= m->ntables)
				return fail(r, "invalid: unknown table %u", e->table);
			if (constexpr(r, m, KIS_WASM_I32, m->nglobal_imports, &e->offset) < 0)
				return -1;
		}
		bool exprs = flags & 4;
		if (flags & 3) { /* elemkind or reftype present */
			if (exprs) {
				if (reftype(r, &e->type) < 0)
					return -1;
			} else {
				uint8_t kind;
				if (byte(r, &kind) < 0)
					return -1;
				if (kind != 0)
					return fail(r, "malformed: malformed element kind");
			}
		}
		if (count(r, &e->n, KIS_WASM_MAX_ELEM_PER_SEG) < 0)
			return -1;
		e->init = calloc((size_t)e->n + 1, sizeof(*e->init));
		if (!e->init)
			return fail(r, "out of memory");
		for (uint32_t k = 0; k < e->n; k++) {
			if (exprs) {
				if (constexpr(r, m, e->type, m->nglobal_imports, &e->init[k]) < 0)
					return -1;
			} else {
				uint32_t f;
				if (u32(r, &f) < 0)
					return -1;
				if (f >= m->nfuncs)
					return fail(r, "invalid: unknown function %u", f);
				m->declared[f] = 1;
				e->init[k].op = 0xd2;
				e->init[k].val = f;
			}
		}
		if (e->mode == SEG_ACTIVE && m->tables[e->table].elem != e->type)
			return fail(r, "invalid: type mismatch (element segment and table)");
	}
	return 0;
}

static int sec_code(struct reader *r, struct kis_wasm_module *m)
{
	uint32_t n;
	if (count(r, &n, KIS_WASM_MAX_FUNCS) < 0)
		return -1;
	if (n != m->nfuncs - m->nfunc_imports)
		return fail(r, "malformed: function and code section have inconsistent lengths");
	m->codes = calloc((size_t)n + 1, sizeof(*m->codes));
	if (!m->codes)
		return fail(r, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		uint32_t size;
		if (u32(r, &size) < 0)
			return -1;
		if (size > (size_t)(r->end - r->p))
			return fail(r, "malformed: unexpected end (function body)");
		if (!r->defer_bodies &&
		    wasm_compile_func(m, m->nfunc_imports + i, r->p, size, &m->codes[i], r->err,
				      sizeof(r->err)) < 0) {
			r->failed = true;
			return -1;
		}
		/* kept for the compiler (jit.c), which walks the validated
		 * body: where it lies in m->src, the module's own copy of its
		 * binary, which the reader walks (module_load) */
		m->codes[i].body = r->p;
		m->codes[i].body_len = size;
		r->p += size;
	}
	m->bodies_deferred = r->defer_bodies && n;
	return 0;
}

int wasm_module_finish_bodies(struct kis_wasm_module *m, char *err, size_t errlen)
{
	uint32_t n = m->nfuncs - m->nfunc_imports;
	for (; m->bodies_deferred && m->bodies_done < n; m->bodies_done++) {
		struct wasm_code *c = &m->codes[m->bodies_done];
		const uint8_t *body = c->body;
		uint32_t len = c->body_len;
		int rc = wasm_compile_func(m, m->nfunc_imports + m->bodies_done, body, len, c, err,
					   errlen);
		c->body = body;
		c->body_len = len;
		if (rc < 0)
			return -1;
	}
	m->bodies_deferred = false;
	return 0;
}

static int sec_data(struct reader *r, struct kis_wasm_module *m)
{
	uint32_t n;
	if (count(r, &n, KIS_WASM_MAX_SEGMENTS) < 0)
		return -1;
	if (m->has_datacount && n != m->datacount)
		return fail(r, "malformed: data count and data section have inconsistent lengths");
	m->datas = calloc((size_t)n + 1, sizeof(*m->datas));
	if (!m->datas)
		return fail(r, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		struct wasm_data *d = &m->datas[i];
		m->ndatas = i + 1;
		uint32_t flags;
		if (u32(r, &flags) < 0)
			return -1;
		if (flags > 2)
			return fail(r, "malformed: malformed data segment kind");
		d->mode = flags == 1 ? SEG_PASSIVE : SEG_ACTIVE;
		if (flags == 2 && u32(r, &d->mem) < 0)
			return -1;
		if (d->mode == SEG_ACTIVE) {
			if (d->mem >= m->nmems)
				return fail(r, "invalid: unknown memory %u", d->mem);
			if (constexpr(r, m, KIS_WASM_I32, m->nglobal_imports, &d->offset) < 0)
				return -1;
		}
		if (count(r, &d->len, UINT32_MAX) < 0)
			return -1;
		d->bytes = malloc((size_t)d->len + 1);
		if (!d->bytes)
			return fail(r, "out of memory");
		memcpy(d->bytes, r->p, d->len);
		r->p += d->len;
	}
	return 0;
}

void kis_wasm_module_free(struct kis_wasm_module *m)
{
	if (!m)
		return;
	if (m->jit && m->jit_free)
		m->jit_free(m->jit);
	if (m->src_map)
		munmap(m->src, m->src_map);
	else
		free(m->src);
	for (uint32_t i = 0; i < m->ntypes; i++)
		free(m->types[i].t);
	free(m->types);
	for (uint32_t i = 0; i < m->nimports; i++) {
		free(m->imports[i].module);
		free(m->imports[i].name);
	}
	free(m->imports);
	free(m->func_types);
	if (m->codes)
		for (uint32_t i = 0; i < m->nfuncs - m->nfunc_imports; i++) {
			free(m->codes[i].ops); /* body: in m->src */
		}
	free(m->codes);
	free(m->tables);
	free(m->mems);
	free(m->globals);
	free(m->global_init);
	for (uint32_t i = 0; i < m->nexports; i++)
		free(m->exports[i].name);
	free(m->exports);
	for (uint32_t i = 0; i < m->nelems; i++)
		free(m->elems[i].init);
	free(m->elems);
	for (uint32_t i = 0; i < m->ndatas; i++)
		free(m->datas[i].bytes);
	free(m->datas);
	free(m->declared);
	free(m);
}

/* Sections must come in this order (spec 5.5.2), custom ones anywhere. */
static int section_rank(uint8_t id)
{
	static const int8_t rank[13] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 10 };
	return id < 13 ? rank[id] : -1;
}

static int decode(struct reader *r, struct kis_wasm_module *m)
{
	static const uint8_t magic[8] = { 0, 'a', 's', 'm', 1, 0, 0, 0 };
	if (r->end - r->p < 4 || memcmp(r->p, magic, 4))
		return fail(r, "malformed: magic header not detected");
	if (r->end - r->p < 8 || memcmp(r->p + 4, magic + 4, 4))
		return fail(r, "malformed: unknown binary version");
	r->p += 8;
	int last = 0;
	bool have_code = false, have_func = false;
	while (r->p < r->end) {
		uint8_t id;
		uint32_t size;
		if (byte(r, &id) < 0 || u32(r, &size) < 0)
			return -1;
		if (size > (size_t)(r->end - r->p))
			return fail(r, "malformed: section size mismatch (unexpected end)");
		struct reader sub = { .p = r->p, .end = r->p + size, .defer_bodies = r->defer_bodies };
		int rank = section_rank(id);
		if (rank < 0)
			return fail(r, "malformed: malformed section id %u", id);
		if (id != 0) {
			if (rank <= last)
				return fail(r, "malformed: unexpected content after last section (section %u out of order)", id);
			last = rank;
		}
		/* ref.func in bodies checks declared[], filled by the sections
		 * before the code section; allocate once the count is known. */
		if (!m->declared && id >= 6) {
			m->declared = calloc((size_t)m->nfuncs + 1, 1);
			if (!m->declared)
				return fail(r, "out of memory");
		}
		int rc = 0;
		switch (id) {
		case 0: {
			char *nm = NULL;
			rc = name(&sub, &nm);
			free(nm);
			sub.p = sub.end;
			break;
		}
		case 1:
			rc = sec_type(&sub, m);
			break;
		case 2:
			rc = sec_import(&sub, m);
			break;
		case 3:
			have_func = true;
			rc = sec_function(&sub, m);
			break;
		case 4:
			rc = sec_table(&sub, m);
			break;
		case 5:
			rc = sec_memory(&sub, m);
			break;
		case 6:
			rc = sec_global(&sub, m);
			break;
		case 7:
			rc = sec_export(&sub, m);
			break;
		case 8:
			rc = sec_start(&sub, m);
			break;
		case 9:
			rc = sec_elem(&sub, m);
			break;
		case 10:
			have_code = true;
			rc = sec_code(&sub, m);
			break;
		case 11:
			rc = sec_data(&sub, m);
			break;
		case 12:
			rc = u32(&sub, &m->datacount);
			m->has_datacount = true;
			break;
		default:
			return fail(r, "malformed: malformed section id %u", id);
		}
		if (rc < 0) {
			snprintf(r->err, sizeof(r->err), "%s", sub.err);
			r->failed = true;
			return -1;
		}
		if (sub.p != sub.end)
			return fail(r, "malformed: section size mismatch");
		r->p = sub.end;
	}
	(void)have_func;
	if (!have_code && m->nfuncs != m->nfunc_imports)
		return fail(r, "malformed: function and code section have inconsistent lengths");
	if (m->has_datacount && m->ndatas != m->datacount)
		return fail(r, "malformed: data count and data section have inconsistent lengths");
	return 0;
}

/* From this size the module's copy is a mapping of its own (module_load) */
#define SRC_MAP_MIN (16u << 10)

static int module_load(const uint8_t *bytes, size_t len, bool defer, struct kis_wasm_module **out,
		       struct kis_error **err)
{
	if (len > KIS_WASM_MAX_MODULE_BYTES)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "module of %zu bytes is too large", len);
	struct kis_wasm_module *m = calloc(1, sizeof(*m));
	if (!m)
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot allocate module");
	m->start = -1;
	/* One copy of the binary, made first and decoded from: the function
	 * bodies stay where they lie in it (not a copy each), and the pages
	 * read are the ones just written (each page first touched costs
	 * ~5-12 us under this hypervisor; the caller's buffer, in the wasm
	 * tier's child, is the parent's, not yet touched there). */
	/* a larger one in a mapping made present in one call (a page
	 * first written is a fault each, a populated one ~1 us), from 512
	 * KiB on in huge pages (kis_map_populated): SQLite's 1.27 MB
	 * module, copied here and read by the decoder, was ~310 pages each
	 * touched first in this process */
	if (len >= SRC_MAP_MIN) {
		size_t ml;
		void *p = kis_map_populated(len, &ml);
		if (p != MAP_FAILED) {
			m->src = p;
			m->src_map = ml;
		}
	}
	if (!m->src)
		m->src = malloc(len ? len : 1);
	if (!m->src) {
		kis_wasm_module_free(m);
		return kis_error_set(err, KIS_E_INTERNAL, ENOMEM, "cannot allocate module");
	}
	memcpy(m->src, bytes, len);
	m->src_len = len;
	struct reader r = { .p = m->src, .end = m->src + len, .defer_bodies = defer };
	if (decode(&r, m) < 0 || (!m->declared && !(m->declared = calloc((size_t)m->nfuncs + 1, 1)))) {
		kis_wasm_module_free(m);
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "%s",
				     r.failed ? r.err : "out of memory");
	}
	*out = m;
	return 0;
}

int kis_wasm_module_load(const uint8_t *bytes, size_t len, struct kis_wasm_module **out,
			 struct kis_error **err)
{
	return module_load(bytes, len, false, out, err);
}

int wasm_module_load_for_cache(const uint8_t *bytes, size_t len, struct kis_wasm_module **out,
			       struct kis_error **err)
{
	return module_load(bytes, len, true, out, err);
}

size_t kis_wasm_module_import_count(const struct kis_wasm_module *m)
{
	return m->nimports;
}

int kis_wasm_module_import(const struct kis_wasm_module *m, size_t i, const char **module,
			   const char **nm, enum kis_wasm_extern_kind *kind)
{
	if (i >= m->nimports)
		return -1;
	*module = m->imports[i].module;
	*nm = m->imports[i].name;
	*kind = (enum kis_wasm_extern_kind)m->imports[i].kind;
	return 0;
}
