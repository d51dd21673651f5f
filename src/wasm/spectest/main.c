/* SPDX-License-Identifier: MIT */
/* kis-wasm-spectest: runs the JSON scripts that wabt's wast2json makes from
 * the WebAssembly spec tests against our runtime, with the `spectest` host module. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kis/wasm.h"
#include "wasm/internal.h"
#include "wasm/jit.h"
#include "wasm/jit_cache.h"

struct named {
	char *name;
	struct kis_wasm_instance *inst;
};

struct known {
	char **keys;
	bool *hit;
	size_t n;
};

struct file_run {
	struct kis_wasm_store *store;
	struct kis_wasm_module **mods;
	uint8_t **bytes; /* each module's binary, with --code-cache */
	size_t *lens;
	size_t nmods;
	const uint8_t *cur; /* the module being instantiated */
	size_t cur_len;
	struct named *named, *registered;
	size_t nnamed, nregistered;
	struct kis_wasm_instance *current;
	struct kis_wasm_extern spectest[16];
	const char *spectest_names[16];
	const char *dir, *wast;
	int passed, failed, skipped, known_failed;
};

static struct known known;
static bool use_compiler; /* --engine compiler: every module runs compiled */
static bool fast_tier;    /* --tier fast: compiled at tier-up's first tier (jit.h) */
/* --tier mixed: at the mixed tier (jit.h), with a made-up profile that
 * counts every odd-numbered defined function once, so those are
 * optimised, the others fast, and calls cross from one tier to the other */
static bool mixed_tier;
static bool verbose;
/* --code-cache DIR: compiled code kept in DIR/cache/wasm-code as the wasm
 * tier keeps it in its store (jit_cache.c), and linked from there when
 * there; --expect-cached: fail a module that had to be compiled. */
static const char *code_cache;
static bool expect_cached;
static int n_linked_cached, n_compiled;

/* ---- the spectest host module (see the spec interpreter's spectest.ml) ---- */

static enum kis_wasm_trap host_print(void *user, struct kis_wasm_instance *caller,
				     const kis_wasm_slot *args, kis_wasm_slot *results)
{
	return KIS_WASM_OK;
}

static kis_wasm_slot f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static kis_wasm_slot f64_bits(double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	return u;
}

static int make_spectest(struct file_run *r)
{
	static const uint8_t I32 = KIS_WASM_I32, I64 = KIS_WASM_I64, F32 = KIS_WASM_F32,
			     F64 = KIS_WASM_F64;
	static const uint8_t i32_f32[2] = { KIS_WASM_I32, KIS_WASM_F32 };
	static const uint8_t f64_f64[2] = { KIS_WASM_F64, KIS_WASM_F64 };
	struct kis_wasm_store *s = r->store;
	size_t k = 0;
#define FUNC(nm, p, np)                                                                    \
	r->spectest_names[k] = nm;                                                         \
	r->spectest[k].kind = KIS_WASM_EXTERN_FUNC;                                        \
	r->spectest[k++].u.func = kis_wasm_host_func_new(s, p, np, NULL, 0, host_print, NULL)
	FUNC("print", NULL, 0);
	FUNC("print_i32", &I32, 1);
	FUNC("print_i64", &I64, 1);
	FUNC("print_f32", &F32, 1);
	FUNC("print_f64", &F64, 1);
	FUNC("print_i32_f32", i32_f32, 2);
	FUNC("print_f64_f64", f64_f64, 2);
#undef FUNC
#define GLOBAL(nm, t, v)                                                                   \
	r->spectest_names[k] = nm;                                                         \
	r->spectest[k].kind = KIS_WASM_EXTERN_GLOBAL;                                      \
	r->spectest[k++].u.global = kis_wasm_global_new(s, t, 0, v)
	GLOBAL("global_i32", KIS_WASM_I32, 666);
	GLOBAL("global_i64", KIS_WASM_I64, 666);
	GLOBAL("global_f32", KIS_WASM_F32, f32_bits(666.6f));
	GLOBAL("global_f64", KIS_WASM_F64, f64_bits(666.6));
#undef GLOBAL
	r->spectest_names[k] = "table";
	r->spectest[k].kind = KIS_WASM_EXTERN_TABLE;
	r->spectest[k++].u.table = kis_wasm_table_new(s, KIS_WASM_FUNCREF, 10, 1, 20);
	r->spectest_names[k] = "memory";
	r->spectest[k].kind = KIS_WASM_EXTERN_MEMORY;
	r->spectest[k++].u.memory = kis_wasm_memory_new(s, 1, 1, 2);
	for (size_t i = 0; i < k; i++)
		if (!r->spectest[i].u.func)
			return -1;
	return 0;
}

static int resolve(void *user, const char *module, const char *name,
		   enum kis_wasm_extern_kind kind, struct kis_wasm_extern *out)
{
	struct file_run *r = user;
	if (!strcmp(module, "spectest")) {
		for (size_t i = 0; i < 16 && r->spectest_names[i]; i++) {
			if (!strcmp(r->spectest_names[i], name)) {
				*out = r->spectest[i];
				return 0;
			}
		}
		return -1;
	}
	for (size_t i = r->nregistered; i-- > 0;)
		if (!strcmp(r->registered[i].name, module))
			return kis_wasm_instance_export(r->registered[i].inst, name, out);
	return -1;
}

/* ---- helpers ---- */

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	uint8_t *buf = NULL;
	size_t cap = 0, n = 0;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			uint8_t *nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	fclose(f);
	*len = n;
	return buf;
}

static void add_named(struct named **arr, size_t *n, const char *name, struct kis_wasm_instance *inst)
{
	struct named *a = realloc(*arr, (*n + 1) * sizeof(**arr));
	if (!a)
		abort();
	*arr = a;
	a[*n].name = strdup(name);
	a[*n].inst = inst;
	(*n)++;
}

static struct kis_wasm_instance *find_named(struct file_run *r, const char *name)
{
	if (!name)
		return r->current;
	for (size_t i = r->nnamed; i-- > 0;)
		if (!strcmp(r->named[i].name, name))
			return r->named[i].inst;
	return NULL;
}

/* Load a binary module; NULL with *msg set on failure. */
static struct kis_wasm_module *load(struct file_run *r, const char *file, char *msg, size_t msglen)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", r->dir, file);
	size_t len;
	uint8_t *bytes = read_file(path, &len);
	if (!bytes) {
		snprintf(msg, msglen, "cannot read %.900s: %s", path, strerror(errno));
		return NULL;
	}
	struct kis_wasm_module *m = NULL;
	struct kis_error *err = NULL;
	if (kis_wasm_module_load(bytes, len, &m, &err) < 0) {
		snprintf(msg, msglen, "%s", err && err->message ? err->message : "load failed");
		kis_error_free(err);
		free(bytes);
		return NULL;
	}
	struct kis_wasm_module **mods = realloc(r->mods, (r->nmods + 1) * sizeof(*mods));
	uint8_t **bs = mods ? realloc(r->bytes, (r->nmods + 1) * sizeof(*bs)) : NULL;
	size_t *ls = bs ? realloc(r->lens, (r->nmods + 1) * sizeof(*ls)) : NULL;
	if (!mods || !bs || !ls)
		abort();
	r->mods = mods;
	r->bytes = bs;
	r->lens = ls;
	bs[r->nmods] = code_cache ? bytes : (free(bytes), NULL);
	ls[r->nmods] = len;
	mods[r->nmods++] = m;
	return m;
}

/* Instantiate; returns 0, or -1 with *trap (OK for a link error) and msg. */
static int instantiate(struct file_run *r, struct kis_wasm_module *m, struct kis_wasm_instance **inst,
		       enum kis_wasm_trap *trap, char *msg, size_t msglen)
{
	struct kis_error *err = NULL;
	uint8_t *cached = NULL;
	size_t cached_len = 0;
	r->cur = NULL;
	for (size_t i = 0; code_cache && use_compiler && i < r->nmods; i++)
		if (r->mods[i] == m) {
			r->cur = r->bytes[i];
			r->cur_len = r->lens[i];
		}
	/* the cached code for this module only: cleared after, whether it
	 * was used or the instantiation stopped before compiling */
	if (r->cur && wasm_code_cache_get(code_cache, r->cur, r->cur_len, &cached, &cached_len) == 0)
		kis_wasm_store_use_cached_code(r->store, cached, cached_len);
	/* the made-up profile (mixed_tier), for the compile at instantiation */
	uint32_t n = m->nfuncs - m->nfunc_imports, *prof = NULL;
	if (mixed_tier && use_compiler && n && (prof = calloc(n, sizeof(uint32_t))) != NULL) {
		for (uint32_t i = 1; i < n; i += 2)
			prof[i] = 1;
		m->jit_prof = prof;
		m->jit_nprof = n;
	}
	int rc = kis_wasm_instantiate(r->store, m, resolve, r, inst, trap, &err);
	m->jit_prof = NULL;
	m->jit_nprof = 0;
	free(prof);
	kis_wasm_store_use_cached_code(r->store, NULL, 0);
	wasm_code_cache_free(cached, cached_len);
	r->cur = NULL;
	if (rc < 0) {
		snprintf(msg, msglen, "%s", err && err->message ? err->message : "instantiation failed");
		kis_error_free(err);
		return -1;
	}
	return 0;
}

/* Lane width in bytes of a v128's "lane_type", 0 if unknown. */
static unsigned lane_bytes(const char *lt)
{
	if (!lt)
		return 0;
	if (!strcmp(lt, "i8"))
		return 1;
	if (!strcmp(lt, "i16"))
		return 2;
	if (!strcmp(lt, "i32") || !strcmp(lt, "f32"))
		return 4;
	if (!strcmp(lt, "i64") || !strcmp(lt, "f64"))
		return 8;
	return 0;
}

/* A v128 from wast2json: {"type":"v128","lane_type":T,"value":[lane...]}
 * with each lane a decimal string of its bits (negative for signed
 * integers), into two slots, low half first. */
static int parse_v128(json_t *v, kis_wasm_slot out[2])
{
	unsigned w = lane_bytes(json_string_value(json_object_get(v, "lane_type")));
	json_t *lanes = json_object_get(v, "value");
	if (!w || json_array_size(lanes) != 16 / w)
		return -1;
	uint8_t b[16];
	for (unsigned i = 0; i < 16 / w; i++) {
		const char *l = json_string_value(json_array_get(lanes, i));
		if (!l)
			return -1;
		uint64_t x = l[0] == '-' ? (uint64_t)strtoll(l, NULL, 10) : strtoull(l, NULL, 10);
		memcpy(b + i * w, &x, w); /* little-endian host */
	}
	memcpy(out, b, 16);
	return 0;
}

/* Parse one value into its slots (two for a v128); returns the slot count
 * or -1. */
static int parse_value(json_t *v, kis_wasm_slot *out)
{
	const char *type = json_string_value(json_object_get(v, "type"));
	json_t *jv = json_object_get(v, "value");
	const char *val = json_string_value(jv);
	if (!type)
		return -1;
	if (!strcmp(type, "v128"))
		return parse_v128(v, out) < 0 ? -1 : 2;
	if (!strcmp(type, "externref") || !strcmp(type, "funcref")) {
		if (!val || !strcmp(val, "null")) {
			*out = 0;
			return 1;
		}
		/* host references are numbered from 0; shifted so 0 stays null */
		*out = strtoull(val, NULL, 10) + 1;
		return 1;
	}
	if (!val)
		return -1;
	*out = strtoull(val, NULL, 10);
	return 1;
}

static bool f32_matches(const char *val, uint32_t b)
{
	if (!strcmp(val, "nan:canonical"))
		return (b & 0x7fffffffu) == 0x7fc00000u;
	if (!strcmp(val, "nan:arithmetic"))
		return (b & 0x7fc00000u) == 0x7fc00000u;
	return b == (uint32_t)strtoull(val, NULL, 10);
}

static bool f64_matches(const char *val, uint64_t got)
{
	if (!strcmp(val, "nan:canonical"))
		return (got & ~(1ull << 63)) == 0x7ff8000000000000ull;
	if (!strcmp(val, "nan:arithmetic"))
		return (got & 0x7ff8000000000000ull) == 0x7ff8000000000000ull;
	return got == strtoull(val, NULL, 10);
}

/* A v128 result lane by lane: integers by their bits, float lanes may
 * also be nan:canonical or nan:arithmetic each. */
static bool v128_matches(json_t *want, const kis_wasm_slot got[2])
{
	const char *lt = json_string_value(json_object_get(want, "lane_type"));
	unsigned w = lane_bytes(lt);
	json_t *lanes = json_object_get(want, "value");
	if (!w || json_array_size(lanes) != 16 / w)
		return false;
	uint8_t b[16];
	memcpy(b, got, 16);
	for (unsigned i = 0; i < 16 / w; i++) {
		const char *l = json_string_value(json_array_get(lanes, i));
		uint64_t x = 0;
		memcpy(&x, b + i * w, w);
		if (!l)
			return false;
		if (lt[0] == 'f') {
			if (!(w == 4 ? f32_matches(l, (uint32_t)x) : f64_matches(l, x)))
				return false;
			continue;
		}
		uint64_t want_bits = l[0] == '-' ? (uint64_t)strtoll(l, NULL, 10) : strtoull(l, NULL, 10);
		uint64_t mask = w == 8 ? ~0ull : (1ull << (8 * w)) - 1;
		if ((x & mask) != (want_bits & mask))
			return false;
	}
	return true;
}

/* got points at the value's slots (two for a v128). */
static bool value_matches(json_t *want, const kis_wasm_slot *gotp)
{
	const char *type = json_string_value(json_object_get(want, "type"));
	const char *val = json_string_value(json_object_get(want, "value"));
	kis_wasm_slot got = gotp[0];
	if (!type)
		return false;
	if (!strcmp(type, "v128"))
		return v128_matches(want, gotp);
	if (!strcmp(type, "funcref") && !val)
		return got != 0; /* any non-null function */
	if (!strcmp(type, "externref") || !strcmp(type, "funcref")) {
		if (!val || !strcmp(val, "null"))
			return got == 0;
		return got == strtoull(val, NULL, 10) + 1;
	}
	if (!val)
		return false;
	if (!strcmp(type, "i32"))
		return (uint32_t)got == (uint32_t)strtoull(val, NULL, 10);
	if (!strcmp(type, "i64"))
		return got == strtoull(val, NULL, 10);
	if (!strcmp(type, "f32"))
		return f32_matches(val, (uint32_t)got);
	if (!strcmp(type, "f64"))
		return f64_matches(val, got);
	return false;
}

/* Run an action; returns 0 when it ran (trap or not), -1 when it could not
 * be started (msg says why). results receives the result slots (two per
 * v128), *rtypes the *nres result types. */
static int do_action(struct file_run *r, json_t *action, kis_wasm_slot *results, size_t maxres,
		     const uint8_t **rtypes, size_t *nres, enum kis_wasm_trap *trap, char *msg,
		     size_t msglen)
{
	static const uint8_t v128_type = KIS_WASM_V128, other_type = KIS_WASM_I64;
	const char *type = json_string_value(json_object_get(action, "type"));
	const char *modname = json_string_value(json_object_get(action, "module"));
	const char *field = json_string_value(json_object_get(action, "field"));
	struct kis_wasm_instance *inst = find_named(r, modname);
	*trap = KIS_WASM_OK;
	*nres = 0;
	if (!inst || !field || !type) {
		snprintf(msg, msglen, "no module instance for the action");
		return -1;
	}
	struct kis_wasm_extern ext;
	json_t *jfield = json_object_get(action, "field");
	if (kis_wasm_instance_export_n(inst, field, json_string_length(jfield), &ext) < 0) {
		snprintf(msg, msglen, "no export '%s'", field);
		return -1;
	}
	if (!strcmp(type, "get")) {
		if (ext.kind != KIS_WASM_EXTERN_GLOBAL) {
			snprintf(msg, msglen, "'%s' is not a global", field);
			return -1;
		}
		if (kis_wasm_global_type(ext.u.global) == KIS_WASM_V128) {
			kis_wasm_global_get_v128(ext.u.global, results);
			*rtypes = &v128_type;
		} else {
			results[0] = kis_wasm_global_get(ext.u.global);
			*rtypes = &other_type;
		}
		*nres = 1;
		return 0;
	}
	if (ext.kind != KIS_WASM_EXTERN_FUNC) {
		snprintf(msg, msglen, "'%s' is not a function", field);
		return -1;
	}
	const uint8_t *pt, *rt;
	uint32_t np, nr;
	kis_wasm_func_type(ext.u.func, &pt, &np, &rt, &nr);
	json_t *args = json_object_get(action, "args");
	if (json_array_size(args) != np || 2 * (size_t)nr > maxres) {
		snprintf(msg, msglen, "argument count mismatch for '%s'", field);
		return -1;
	}
	kis_wasm_slot argv[128];
	if (np > 64) {
		snprintf(msg, msglen, "too many arguments");
		return -1;
	}
	size_t ns = 0;
	for (size_t i = 0; i < np; i++) {
		int k = parse_value(json_array_get(args, i), &argv[ns]);
		if (k < 0 || (k == 2) != (pt[i] == KIS_WASM_V128)) {
			snprintf(msg, msglen, "unsupported argument");
			return -1;
		}
		ns += (size_t)k;
	}
	*trap = kis_wasm_call(r->store, ext.u.func, argv, results);
	*rtypes = rt;
	*nres = nr;
	return 0;
}

/* ---- commands ---- */

static bool trap_text_matches(const char *want, enum kis_wasm_trap t)
{
	const char *ours = kis_wasm_trap_message(t);
	return want && !strncmp(want, ours, strlen(ours));
}

/* Returns 1 pass, 0 fail, -1 skipped; msg explains a failure. */
static int run_command(struct file_run *r, json_t *cmd, char *msg, size_t msglen)
{
	const char *type = json_string_value(json_object_get(cmd, "type"));
	const char *file = json_string_value(json_object_get(cmd, "filename"));
	const char *text = json_string_value(json_object_get(cmd, "text"));
	kis_wasm_slot res[256];
	const uint8_t *rtypes = NULL;
	size_t nres;
	enum kis_wasm_trap trap;
	msg[0] = 0;
	if (!type)
		return 0;

	if (!strcmp(type, "module")) {
		r->current = NULL;
		struct kis_wasm_module *m = load(r, file, msg, msglen);
		struct kis_wasm_instance *inst;
		if (!m || instantiate(r, m, &inst, &trap, msg, msglen) < 0)
			return 0;
		r->current = inst;
		const char *name = json_string_value(json_object_get(cmd, "name"));
		if (name)
			add_named(&r->named, &r->nnamed, name, inst);
		return 1;
	}
	if (!strcmp(type, "register")) {
		const char *as = json_string_value(json_object_get(cmd, "as"));
		struct kis_wasm_instance *inst =
			find_named(r, json_string_value(json_object_get(cmd, "name")));
		if (!inst || !as) {
			snprintf(msg, msglen, "nothing to register");
			return 0;
		}
		add_named(&r->registered, &r->nregistered, as, inst);
		return 1;
	}
	if (!strcmp(type, "action")) {
		if (do_action(r, json_object_get(cmd, "action"), res, 256, &rtypes, &nres, &trap, msg, msglen) < 0)
			return 0;
		if (trap) {
			snprintf(msg, msglen, "trapped: %s", kis_wasm_trap_message(trap));
			return 0;
		}
		return 1;
	}
	if (!strcmp(type, "assert_return")) {
		if (do_action(r, json_object_get(cmd, "action"), res, 256, &rtypes, &nres, &trap, msg, msglen) < 0)
			return 0;
		if (trap) {
			snprintf(msg, msglen, "trapped: %s", kis_wasm_trap_message(trap));
			return 0;
		}
		json_t *exp = json_object_get(cmd, "expected");
		if (json_array_size(exp) != nres) {
			snprintf(msg, msglen, "%zu results, expected %zu", nres, json_array_size(exp));
			return 0;
		}
		for (size_t i = 0, at = 0; i < nres; i++) {
			json_t *w = json_array_get(exp, i);
			bool wide = rtypes[i] == KIS_WASM_V128;
			if (!value_matches(w, &res[at])) {
				if (wide)
					snprintf(msg, msglen, "result %zu: got v128 0x%016" PRIx64 "%016" PRIx64
						 ", expected v128 %s lanes", i, res[at + 1], res[at],
						 json_string_value(json_object_get(w, "lane_type")) ?: "?");
				else
					snprintf(msg, msglen, "result %zu: got 0x%" PRIx64 ", expected %s %s", i,
						 res[at], json_string_value(json_object_get(w, "type")),
						 json_string_value(json_object_get(w, "value")) ?: "(any)");
				return 0;
			}
			at += wide ? 2 : 1;
		}
		return 1;
	}
	if (!strcmp(type, "assert_trap") || !strcmp(type, "assert_exhaustion")) {
		if (do_action(r, json_object_get(cmd, "action"), res, 256, &rtypes, &nres, &trap, msg, msglen) < 0)
			return 0;
		if (!trap) {
			snprintf(msg, msglen, "returned, expected trap '%s'", text ? text : "");
			return 0;
		}
		if (!trap_text_matches(text, trap)) {
			snprintf(msg, msglen, "trapped with '%s', expected '%s'", kis_wasm_trap_message(trap),
				 text ? text : "");
			return 0;
		}
		return 1;
	}
	if (!strcmp(type, "assert_invalid") || !strcmp(type, "assert_malformed")) {
		const char *mt = json_string_value(json_object_get(cmd, "module_type"));
		if (mt && strcmp(mt, "binary"))
			return -1; /* text modules: a matter for the text parser, as in wabt */
		char lmsg[512];
		if (load(r, file, lmsg, sizeof(lmsg))) {
			snprintf(msg, msglen, "module accepted, expected '%s'", text ? text : "");
			return 0;
		}
		if (verbose)
			printf("    %s: rejected with '%s' (expected '%s')\n", type, lmsg, text ? text : "");
		return 1;
	}
	if (!strcmp(type, "assert_unlinkable") || !strcmp(type, "assert_uninstantiable")) {
		struct kis_wasm_module *m = load(r, file, msg, msglen);
		if (!m)
			return 0;
		struct kis_wasm_instance *inst;
		char imsg[512];
		if (instantiate(r, m, &inst, &trap, imsg, sizeof(imsg)) == 0) {
			snprintf(msg, msglen, "instantiated, expected '%s'", text ? text : "");
			return 0;
		}
		bool want_trap = !strcmp(type, "assert_uninstantiable");
		if (want_trap != (trap != KIS_WASM_OK)) {
			snprintf(msg, msglen, "failed with '%s', expected '%s'", imsg, text ? text : "");
			return 0;
		}
		if (want_trap && !trap_text_matches(text, trap)) {
			snprintf(msg, msglen, "trapped with '%s', expected '%s'", kis_wasm_trap_message(trap),
				 text ? text : "");
			return 0;
		}
		return 1;
	}
	snprintf(msg, msglen, "unknown command type '%s'", type);
	return 0;
}

static bool is_known(const char *key)
{
	for (size_t i = 0; i < known.n; i++) {
		if (!strcmp(known.keys[i], key)) {
			known.hit[i] = true;
			return true;
		}
	}
	return false;
}

static void load_known(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return; /* no list: every failure counts */
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, " \t\r\n#")] = 0;
		if (!line[0])
			continue;
		known.keys = realloc(known.keys, (known.n + 1) * sizeof(char *));
		known.hit = realloc(known.hit, (known.n + 1) * sizeof(bool));
		if (!known.keys || !known.hit)
			abort();
		known.keys[known.n] = strdup(line);
		known.hit[known.n++] = false;
	}
	fclose(f);
}

/* kis_wasm_store_on_compiled: a fresh compile goes to the cache. */
static void on_compiled(void *user, const uint8_t *obj, size_t len, int from_cache)
{
	struct file_run *r = user;
	if (from_cache) {
		n_linked_cached++;
		return;
	}
	n_compiled++;
	if (r->cur && wasm_code_cache_put(code_cache, r->cur, r->cur_len, obj, len) < 0)
		fprintf(stderr, "%s: cannot write the code cache in %s\n", r->wast, code_cache);
}

static void file_run_release(struct file_run *r)
{
	kis_wasm_store_free(r->store);
	for (size_t i = 0; i < r->nmods; i++) {
		kis_wasm_module_free(r->mods[i]);
		if (r->bytes)
			free(r->bytes[i]);
	}
	free(r->mods);
	free(r->bytes);
	free(r->lens);
	for (size_t i = 0; i < r->nnamed; i++)
		free(r->named[i].name);
	for (size_t i = 0; i < r->nregistered; i++)
		free(r->registered[i].name);
	free(r->named);
	free(r->registered);
}

static int run_file(const char *json_path, int *passed, int *failed, int *skipped, int *kfailed)
{
	json_error_t jerr;
	json_t *root = json_load_file(json_path, JSON_ALLOW_NUL, &jerr);
	if (!root) {
		fprintf(stderr, "%s: cannot parse: %s\n", json_path, jerr.text);
		(*failed)++;
		return -1;
	}
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", json_path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(dir, sizeof(dir), ".");
	const char *src = json_string_value(json_object_get(root, "source_filename"));
	const char *wast = src ? strrchr(src, '/') : NULL;
	wast = wast ? wast + 1 : (src ? src : json_path);

	struct file_run r = { .dir = dir, .wast = wast };
	r.store = kis_wasm_store_new();
	if (r.store && fast_tier)
		r.store->jit_tier = WASM_JIT_TIER_FAST;
	if (r.store && mixed_tier)
		r.store->jit_tier = WASM_JIT_TIER_MIXED;
	struct kis_error *cerr = NULL;
	if (!r.store || make_spectest(&r) < 0 ||
	    (use_compiler && kis_wasm_store_use_compiler(r.store, 1, &cerr) < 0)) {
		kis_error_free(cerr);
		fprintf(stderr, "%s: cannot set up the store\n", wast);
		json_decref(root);
		file_run_release(&r);
		(*failed)++;
		return -1;
	}
	if (code_cache)
		kis_wasm_store_on_compiled(r.store, on_compiled, &r);
	json_t *cmds = json_object_get(root, "commands");
	for (size_t i = 0; i < json_array_size(cmds); i++) {
		json_t *cmd = json_array_get(cmds, i);
		char msg[1024];
		int rc = run_command(&r, cmd, msg, sizeof(msg));
		long line = (long)json_integer_value(json_object_get(cmd, "line"));
		char key[600];
		snprintf(key, sizeof(key), "%s:%ld", wast, line);
		if (rc > 0) {
			r.passed++;
		} else if (rc < 0) {
			r.skipped++;
		} else if (is_known(key)) {
			r.known_failed++;
			printf("  known failure %s %s: %s\n", key,
			       json_string_value(json_object_get(cmd, "type")), msg);
		} else {
			r.failed++;
			printf("  FAIL %s %s: %s\n", key, json_string_value(json_object_get(cmd, "type")), msg);
		}
	}
	printf("%s: %d passed, %d failed", wast, r.passed, r.failed + r.known_failed);
	if (r.known_failed)
		printf(" (%d known)", r.known_failed);
	if (r.skipped)
		printf(", %d skipped (text modules)", r.skipped);
	printf("\n");
	*passed += r.passed;
	*failed += r.failed;
	*kfailed += r.known_failed;
	*skipped += r.skipped;
	file_run_release(&r);
	json_decref(root);
	return 0;
}

int main(int argc, char **argv)
{
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--known-failures") && i + 1 < argc) {
			load_known(argv[++i]);
		} else if (!strcmp(argv[i], "--code-cache") && i + 1 < argc) {
			code_cache = argv[++i];
		} else if (!strcmp(argv[i], "--expect-cached")) {
			expect_cached = true;
		} else if (!strcmp(argv[i], "--tier") && i + 1 < argc &&
			   (!strcmp(argv[i + 1], "fast") || !strcmp(argv[i + 1], "opt") ||
			    !strcmp(argv[i + 1], "mixed"))) {
			fast_tier = !strcmp(argv[++i], "fast");
			mixed_tier = !strcmp(argv[i], "mixed");
		} else if (!strcmp(argv[i], "-v")) {
			verbose = true;
		} else if (!strcmp(argv[i], "--engine") && i + 1 < argc &&
			   (!strcmp(argv[i + 1], "compiler") || !strcmp(argv[i + 1], "interpreter"))) {
			use_compiler = !strcmp(argv[++i], "compiler");
		} else {
			fprintf(stderr, "usage: kis-wasm-spectest [-v] [--engine interpreter|compiler] "
					"[--tier opt|fast] [--code-cache DIR [--expect-cached]] [--known-failures FILE] "
					"FILE.json...\n");
			return 2;
		}
	}
	if (i == argc) {
		fprintf(stderr, "usage: kis-wasm-spectest [-v] [--known-failures FILE] FILE.json...\n");
		return 2;
	}
	int passed = 0, failed = 0, skipped = 0, kfailed = 0;
	for (; i < argc; i++)
		run_file(argv[i], &passed, &failed, &skipped, &kfailed);
	int stale = 0;
	for (size_t k = 0; k < known.n; k++) {
		if (!known.hit[k]) {
			printf("known failure %s did not fail: remove it from the list\n", known.keys[k]);
			stale++;
		}
	}
	printf("skipped: %d text-format assert_malformed/assert_invalid commands\n", skipped);
	printf("known failures: %d, unexpected failures: %d\n", kfailed, failed);
	printf("%d passed, %d failed\n", passed, failed + kfailed);
	if (code_cache)
		printf("code cache %s: %d modules linked from it, %d compiled\n", code_cache,
		       n_linked_cached, n_compiled);
	if (expect_cached && n_compiled) {
		printf("--expect-cached: %d modules were compiled, not linked from the cache\n",
		       n_compiled);
		return 1;
	}
	return failed ? 1 : 0;
}
