/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the differential test of the two engines. Each input is
 * a module; it is instantiated in an interpreting store and in a compiling
 * one (stand-in imports returning zeros), and every exported function is
 * called in both with the same arguments (edge values and bits drawn from
 * the input): the traps, the results (bit for bit; any NaN matches any
 * NaN, whose payload wasm leaves open, spec 4.3.3) and memory 0 after
 * each call must agree. A disagreement aborts, which libFuzzer reports
 * with the input. Running out of fuel or stack may happen at different
 * points (the engines count the same steps, but their stacks differ):
 * the two then part ways and the rest of that input is not compared. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_imports.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a side: one store and its instance; imp.next counts its imports */
struct side {
	struct fuzz_imports imp;
	struct kis_wasm_instance *inst;
};

static _Noreturn void disagree(const char *what, const char *name, uint64_t a, uint64_t b)
{
	fprintf(stderr, "engines disagree on export '%s': %s (interpreter %#llx, compiler %#llx)\n",
		name, what, (unsigned long long)a, (unsigned long long)b);
	abort();
}

static uint64_t mix(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* An argument of type t: an edge value or random bits. */
static uint64_t arg(uint64_t *st, uint8_t t)
{
	static const uint64_t e32[] = {0, 1, 2, 31, 32, 0x7fffffff, 0x80000000, 0xffffffff, 65535, 65536};
	static const uint64_t e64[] = {0, 1, 63, 64, 0x7fffffffffffffffull, 0x8000000000000000ull,
				       ~0ull, 0x7ff8000000000000ull, 0x3ff0000000000000ull};
	uint64_t r = mix(st);
	bool edge = r & 1;
	r >>= 1;
	switch (t) {
	case KIS_WASM_I32:
	case KIS_WASM_F32:
		return edge ? e32[r % (sizeof(e32) / sizeof(*e32))] : (uint32_t)r;
	default:
		return edge ? e64[r % (sizeof(e64) / sizeof(*e64))] : r;
	}
}

static bool same_value(uint8_t t, uint64_t a, uint64_t b)
{
	if (t == KIS_WASM_F32) {
		float x, y;
		uint32_t ua = (uint32_t)a, ub = (uint32_t)b;
		memcpy(&x, &ua, 4);
		memcpy(&y, &ub, 4);
		return ua == ub || (isnan(x) && isnan(y));
	}
	if (t == KIS_WASM_F64) {
		double x, y;
		memcpy(&x, &a, 8);
		memcpy(&y, &b, 8);
		return a == b || (isnan(x) && isnan(y));
	}
	return a == b;
}

static bool inconclusive(enum kis_wasm_trap t)
{
	return t == KIS_WASM_TRAP_OUT_OF_FUEL || t == KIS_WASM_TRAP_STACK_EXHAUSTED;
}

/* What was compared, printed at exit: a fuzzer whose compiler never ran
 * would compare nothing, and must say so. */
static unsigned long n_compiled, n_refused, n_calls;

static void report(void)
{
	fprintf(stderr, "fuzz-wasm-diff: %lu modules compiled and compared (%lu refused by the "
			"compiler), %lu calls compared\n",
		n_compiled, n_refused, n_calls);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	atexit(report);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kis_wasm_module *m = NULL;
	struct kis_error *err = NULL;
	if (kis_wasm_module_load(data, size, &m, &err) < 0) {
		kis_error_free(err);
		return 0;
	}
	struct side sd[2] = {{.imp.m = m}, {.imp.m = m}};
	enum kis_wasm_trap it[2];
	int ok[2];
	for (int k = 0; k < 2; k++) {
		sd[k].imp.s = kis_wasm_store_new();
		if (!sd[k].imp.s)
			abort();
		kis_wasm_set_fuel(sd[k].imp.s, 20000);
		if (k == 1 && kis_wasm_store_use_compiler(sd[k].imp.s, KIS_WASM_COMPILE, &err) < 0) {
			fprintf(stderr, "no compiler: %s\n", err ? err->message : "?");
			abort();
		}
		ok[k] = kis_wasm_instantiate(sd[k].imp.s, m, fuzz_resolve, &sd[k].imp, &sd[k].inst, &it[k], &err);
		kis_error_free(err);
		err = NULL;
	}
	/* a module the compiler refuses by name is not a disagreement */
	if (ok[0] != ok[1] && !(ok[0] == 0 && m->jit == NULL))
		disagree("instantiation", "(start)", (uint64_t)ok[0], (uint64_t)ok[1]);
	if (ok[0] == 0 && m->jit)
		n_compiled++;
	else if (ok[0] == 0)
		n_refused++;
	if (ok[0] == 0 && ok[1] == 0) {
		uint64_t st = 0;
		for (size_t i = 0; i < size; i++)
			st = st * 31 + data[i];
		bool parted = false;
		for (uint32_t i = 0; i < m->nexports && !parted; i++) {
			const struct wasm_export *x = &m->exports[i];
			struct kis_wasm_extern e[2];
			if (x->kind != KIS_WASM_EXTERN_FUNC ||
			    kis_wasm_instance_export_n(sd[0].inst, x->name, x->name_len, &e[0]) < 0 ||
			    kis_wasm_instance_export_n(sd[1].inst, x->name, x->name_len, &e[1]) < 0)
				continue;
			const uint8_t *pt, *rt;
			uint32_t np, nr;
			kis_wasm_func_type(e[0].u.func, &pt, &np, &rt, &nr);
			kis_wasm_slot args[2 * KIS_WASM_MAX_PARAMS] = {0};
			kis_wasm_slot res[2][2 * KIS_WASM_MAX_PARAMS];
			for (uint32_t a = 0, s = 0; a < np && s + 1 < 2 * KIS_WASM_MAX_PARAMS; a++) {
				args[s++] = arg(&st, pt[a]);
				if (pt[a] == KIS_WASM_V128)
					args[s++] = arg(&st, KIS_WASM_I64);
			}
			enum kis_wasm_trap t[2];
			for (int k = 0; k < 2; k++) {
				memset(res[k], 0, sizeof(res[k]));
				t[k] = kis_wasm_call(sd[k].imp.s, e[k].u.func, args, res[k]);
			}
			n_calls++;
			if (inconclusive(t[0]) || inconclusive(t[1])) {
				parted = t[0] != t[1];
				continue;
			}
			if (t[0] != t[1])
				disagree("trap", x->name, t[0], t[1]);
			if (t[0] == KIS_WASM_OK)
				for (uint32_t r = 0, s = 0; r < nr; r++, s++) {
					if (!same_value(rt[r], res[0][s], res[1][s]))
						disagree("result", x->name, res[0][s], res[1][s]);
					if (rt[r] == KIS_WASM_V128 && (++s, res[0][s] != res[1][s]))
						disagree("v128 result", x->name, res[0][s], res[1][s]);
				}
			struct kis_wasm_memory *mem[2] = {kis_wasm_instance_memory(sd[0].inst),
							  kis_wasm_instance_memory(sd[1].inst)};
			if (mem[0] && mem[1]) {
				uint64_t n[2];
				uint8_t *d0 = kis_wasm_memory_data(mem[0], &n[0]);
				uint8_t *d1 = kis_wasm_memory_data(mem[1], &n[1]);
				if (n[0] != n[1])
					disagree("memory size", x->name, n[0], n[1]);
				if (n[0] && memcmp(d0, d1, n[0]))
					disagree("memory bytes", x->name, 0, 0);
			}
		}
	}
	for (int k = 0; k < 2; k++)
		kis_wasm_store_free(sd[k].imp.s);
	kis_wasm_module_free(m);
	return 0;
}
