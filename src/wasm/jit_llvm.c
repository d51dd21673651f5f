/* SPDX-License-Identifier: MIT */
/* The WebAssembly compiler: a validated module's function bodies to LLVM IR
 * (one LLVM function per wasm function, taking the instance's context
 * first), optimised and made x86-64 code by LLVM 14, linked by ORC's LLJIT.
 * With jit_llvm_*.c, the only files that include LLVM's headers:
 * jit_llvm_func.c walks a body, jit_llvm_ir.c and jit_llvm_ops.c build its
 * IR, jit_llvm_known.c recognises libc routines; this file drives LLVM.
 *
 * Why LLVM (docs/wasm.md, "The compiler"): it is on this machine already
 * (libllvm14, clang-14 builds the test programs), its code is what native
 * code gets, ORC's memory manager maps code read-execute only after it is
 * written (never writable and executable at once), and it has vector types
 * for SIMD later.
 *
 * Safety equal to the interpreter's (exec.c), by construction here:
 *   - every load and store is checked: in check mode it compares address
 *     + offset + size, in 64-bit arithmetic, with the memory's current
 *     size, and traps above it; in guard mode (jit.h: the memory is a
 *     reservation of the whole 32-bit index and offset range, PROT_NONE
 *     beyond its size) the access itself faults there, the fault handler
 *     of jit_rt.c makes that the same trap, and the accesses are volatile
 *     so that LLVM keeps every one, in order (an unused load still traps,
 *     a trap leaves memory as the interpreter would);
 *   - every function's prologue compares the stack pointer with the
 *     context's limit, less an estimate of its own frame, and traps below;
 *   - the function entry and every loop header check the store's interrupt
 *     flag and take one step of fuel, as the interpreter's TICK does;
 *   - integer division, remainder and float-to-int conversion test their
 *     trapping operands before the instruction (LLVM's would be undefined
 *     behaviour, not a trap), shifts mask their count (spec 4.3.2);
 *   - a trap is a call of wasm_jit_rt_trap (noreturn) with the
 *     interpreter's own trap kind.
 * The body is walked as it is in the binary (kept by decode.c), after the
 * validator (compile.c) accepted it: this walker trusts its structure and
 * types, and only reads immediates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "wasm/jit_llvm.h"

const struct wasm_jit_host *jit_llvm_host;

struct wasm_jit_module {
	LLVMOrcLLJITRef jit;
	uint32_t n;
	void **fns;
	void **wraps;
	uint8_t *obj; /* the object code, for the cache (jit_cache.c) */
	size_t obj_len;
	bool from_cache;
};
/* ---- LLVM: target, optimisation, linking ---- */


static int llvm_fail(char *err, size_t errlen, const char *what, LLVMErrorRef e)
{
	char *msg = e ? LLVMGetErrorMessage(e) : NULL;
	snprintf(err, errlen, "wasm.engine: %s%s%s", what, msg ? ": " : "", msg ? msg : "");
	if (msg)
		LLVMDisposeErrorMessage(msg);
	return -1;
}

static LLVMTargetMachineRef host_machine(bool fast, char *err, size_t errlen)
{
	char *triple = LLVMGetDefaultTargetTriple();
	char *cpu = LLVMGetHostCPUName();
	char *features = LLVMGetHostCPUFeatures();
	LLVMTargetRef target;
	char *msg = NULL;
	LLVMTargetMachineRef tm = NULL;
	if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
		snprintf(err, errlen, "wasm.engine: no LLVM target for this host: %s", msg ? msg : "");
	} else {
		/* the fast tier: at CodeGenLevelNone x86 selects instructions
		 * with FastISel and allocates registers with the fast
		 * allocator, where -O1's greedy allocator and SelectionDAG took
		 * 55% of Lua's compile */
		tm = LLVMCreateTargetMachine(target, triple, cpu, features,
					     fast ? LLVMCodeGenLevelNone : LLVMCodeGenLevelDefault,
					     LLVMRelocPIC, LLVMCodeModelSmall);
		if (!tm)
			snprintf(err, errlen, "wasm.engine: cannot make an LLVM target machine");
	}
	LLVMDisposeMessage(msg);
	LLVMDisposeMessage(triple);
	LLVMDisposeMessage(cpu);
	LLVMDisposeMessage(features);
	return tm;
}

/* Define the runtime helpers and the few C library functions LLVM may
 * call (memset for a zeroing loop, rounding without SSE4.1) as absolute
 * symbols: the code links to nothing else. */
static int define_symbols(LLVMOrcLLJITRef J, char *err, size_t errlen)
{
	static const struct wasm_jit_sym libc[] = {
		{"memset", (void (*)(void))memset},
		{"memcpy", (void (*)(void))memcpy},
		{"memmove", (void (*)(void))memmove},
		{"nearbyint", (void (*)(void))nearbyint},
		{"nearbyintf", (void (*)(void))nearbyintf},
		{"ceil", (void (*)(void))ceil},
		{"ceilf", (void (*)(void))ceilf},
		{"floor", (void (*)(void))floor},
		{"floorf", (void (*)(void))floorf},
		{"trunc", (void (*)(void))trunc},
		{"truncf", (void (*)(void))truncf},
	};
	size_t nlibc = sizeof(libc) / sizeof(*libc), n = jit_llvm_host->nsyms + nlibc;
	LLVMJITCSymbolMapPair *pairs = calloc(n, sizeof(*pairs));
	if (!pairs) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const struct wasm_jit_sym *sy = i < jit_llvm_host->nsyms ? &jit_llvm_host->syms[i] : &libc[i - jit_llvm_host->nsyms];
		pairs[i].Name = LLVMOrcLLJITMangleAndIntern(J, sy->name);
		pairs[i].Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)sy->addr;
		pairs[i].Sym.Flags.GenericFlags = LLVMJITSymbolGenericFlagsExported |
						  LLVMJITSymbolGenericFlagsCallable;
		pairs[i].Sym.Flags.TargetFlags = 0;
	}
	LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(pairs, n);
	free(pairs);
	LLVMErrorRef e = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(J), mu);
	if (e)
		return llvm_fail(err, errlen, "cannot define the runtime's symbols", e);
	return 0;
}

static void plugin_module_free(struct wasm_jit_module *jm)
{
	if (!jm)
		return;
	if (jm->jit)
		LLVMOrcDisposeLLJIT(jm->jit);
	free(jm->fns);
	free(jm->wraps);
	free(jm->obj);
	free(jm);
}

static const uint8_t *plugin_object(const struct wasm_jit_module *jm, size_t *len, bool *from_cache)
{
	*len = jm ? jm->obj_len : 0;
	*from_cache = jm && jm->from_cache;
	return jm ? jm->obj : NULL;
}

/* What compiled code depends on besides the module: this compiler, LLVM,
 * and the CPU it was made for (its name and features). */
static int plugin_id(char *buf, size_t len)
{
	char *cpu = LLVMGetHostCPUName();
	char *features = LLVMGetHostCPUFeatures();
	int n = snprintf(buf, len, "kis-jit %u llvm %s cpu %s %s", WASM_JIT_VERSION,
			 LLVM_VERSION_STRING, cpu, features);
	LLVMDisposeMessage(cpu);
	LLVMDisposeMessage(features);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int plugin_lookup(struct wasm_jit_module *jm, uint32_t i, void **fn,
			 void (**wrap)(void *, uint64_t *))
{
	if (!jm || i >= jm->n)
		return -1;
	*fn = jm->fns[i];
	*wrap = (void (*)(void *, uint64_t *))jm->wraps[i];
	return 0;
}

/* Link the object code into a new LLJIT and find every function. */
static int link_object(struct kis_wasm_module *m, LLVMMemoryBufferRef obj, bool from_cache,
		       char *err, size_t errlen)
{
	uint32_t n = m->nfuncs - m->nfunc_imports;
	struct wasm_jit_module *jm = calloc(1, sizeof(*jm));
	if (jm) {
		jm->obj_len = LLVMGetBufferSize(obj);
		jm->obj = malloc(jm->obj_len + 1);
		if (jm->obj)
			memcpy(jm->obj, LLVMGetBufferStart(obj), jm->obj_len);
		jm->from_cache = from_cache;
	}
	if (!jm || !jm->obj) {
		free(jm);
		LLVMDisposeMemoryBuffer(obj);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	jm->n = n;
	jm->fns = calloc((size_t)n + 1, sizeof(void *));
	jm->wraps = calloc((size_t)n + 1, sizeof(void *));
	LLVMErrorRef e = NULL;
	if (!jm->fns || !jm->wraps) {
		LLVMDisposeMemoryBuffer(obj);
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	LLVMOrcLLJITBuilderRef b = LLVMOrcCreateLLJITBuilder();
	e = LLVMOrcCreateLLJIT(&jm->jit, b);
	if (e) {
		jm->jit = NULL;
		LLVMDisposeMemoryBuffer(obj);
		llvm_fail(err, errlen, "cannot start LLVM's JIT", e);
		goto fail;
	}
	if (define_symbols(jm->jit, err, errlen) < 0) {
		LLVMDisposeMemoryBuffer(obj);
		goto fail;
	}
	e = LLVMOrcLLJITAddObjectFile(jm->jit, LLVMOrcLLJITGetMainJITDylib(jm->jit), obj);
	if (e) {
		llvm_fail(err, errlen, "cannot add the object code", e);
		goto fail;
	}
	for (uint32_t i = 0; i < n; i++) {
		char name[32];
		LLVMOrcExecutorAddress a = 0, w = 0;
		snprintf(name, sizeof(name), "f%u", i);
		e = LLVMOrcLLJITLookup(jm->jit, &a, name);
		if (!e) {
			snprintf(name, sizeof(name), "w%u", i);
			e = LLVMOrcLLJITLookup(jm->jit, &w, name);
		}
		if (e) {
			llvm_fail(err, errlen, "cannot link the compiled code", e);
			goto fail;
		}
		jm->fns[i] = (void *)(uintptr_t)a;
		jm->wraps[i] = (void *)(uintptr_t)w;
	}
	m->jit = jm;
	m->jit_free = plugin_module_free;
	return 0;
fail:
	plugin_module_free(jm);
	return -1;
}

/* m's functions to an object file in *objp (0), or -1 with err. */
static int generate(struct kis_wasm_module *m, LLVMMemoryBufferRef *objp, char *err,
		    size_t errlen)
{
	struct gen g = {.m = m, .err = err, .errlen = errlen, .guard = m->jit_guard};
	g.C = LLVMContextCreate();
	g.md_invariant = LLVMGetMDKindIDInContext(g.C, "invariant.load", 14);
	g.M = LLVMModuleCreateWithNameInContext("wasm", g.C);
	g.B = LLVMCreateBuilderInContext(g.C);
	g.AB = LLVMCreateBuilderInContext(g.C);
	g.i1 = LLVMInt1TypeInContext(g.C);
	g.i8 = LLVMInt8TypeInContext(g.C);
	g.i16 = LLVMInt16TypeInContext(g.C);
	g.i32 = LLVMInt32TypeInContext(g.C);
	g.i64 = LLVMInt64TypeInContext(g.C);
	g.i128 = LLVMIntTypeInContext(g.C, 128);
	g.f32 = LLVMFloatTypeInContext(g.C);
	g.f64 = LLVMDoubleTypeInContext(g.C);
	g.vd = LLVMVoidTypeInContext(g.C);
	g.i8p = LLVMPointerType(g.i8, 0);
	g.i64p = LLVMPointerType(g.i64, 0);
	bool fast = m->jit_tier == WASM_JIT_TIER_FAST;
	LLVMTargetMachineRef tm = host_machine(fast, err, errlen);
	int rc = -1;
	uint32_t n = m->nfuncs - m->nfunc_imports;
	g.ftys = calloc((size_t)m->ntypes + 1, sizeof(LLVMTypeRef));
	g.fns = calloc((size_t)n + 1, sizeof(LLVMValueRef));
	LLVMMemoryBufferRef obj = NULL;
	if (!tm)
		goto out;
	if (!g.ftys || !g.fns) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	LLVMSetTarget(g.M, LLVMGetDefaultTargetTriple());
	LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
	LLVMSetModuleDataLayout(g.M, td);
	LLVMDisposeTargetData(td);
	declare_helpers(&g);
	for (uint32_t i = 0; i < m->ntypes; i++)
		g.ftys[i] = func_type(&g, &m->types[i]);
	for (uint32_t i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%u", i);
		g.fns[i] = LLVMAddFunction(g.M, name, g.ftys[m->func_types[m->nfunc_imports + i]]);
		/* no tail-recursion elimination: a recursion that runs out of
		 * stack in the interpreter must trap here too, not loop */
		LLVMAddAttributeAtIndex(g.fns[i], LLVMAttributeFunctionIndex,
					LLVMCreateStringAttribute(g.C, "disable-tail-calls", 18, "true", 4));
		/* a frame larger than a page is touched page by page as it is
		 * made (LLVM's inline stack probes, as -fstack-clash-protection
		 * gives C): allocating it can only fault on the guard page,
		 * never step over it, whatever runs before the limit check */
		LLVMAddAttributeAtIndex(g.fns[i], LLVMAttributeFunctionIndex,
					LLVMCreateStringAttribute(g.C, "probe-stack", 11, "inline-asm", 10));
	}
	for (uint32_t i = 0; i < n; i++)
		if (gen_func(&g, i) < 0)
			goto out;
	for (uint32_t i = 0; i < n; i++)
		gen_wrap(&g, i);
	char *vmsg = NULL;
	if (LLVMVerifyModule(g.M, LLVMReturnStatusAction, &vmsg)) {
		snprintf(err, errlen, "wasm.engine: the compiler made invalid LLVM IR: %.300s",
			 vmsg ? vmsg : "");
		if (getenv("KIS_JIT_DUMP"))
			LLVMDumpModule(g.M);
		LLVMDisposeMessage(vmsg);
		goto out;
	}
	LLVMDisposeMessage(vmsg);
	LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
	/* -O1: the first run of a module pays its compile inside the run's
	 * time limit, and -O2 took 2.5x as long (a 91 KB Rust test of the
	 * WASI suite: 14.5 s against 5.6 s, on this loaded machine); the
	 * cache makes later runs free either way. Tier-up compiles at the
	 * fast tier first, then at this one (docs/wasm.md, "Tier-up"). */
	/* The fast tier: the stack slots our walker makes become SSA values
	 * (sroa), repeated loads of the context and memory base fold
	 * (early-cse), empty blocks go (simplifycfg); measured on Lua's
	 * module: 0.3 s of passes against 5.5 s for default<O1>, and its
	 * code 1.5x slower than -O1's where default<O0>'s was 1.6x. */
	LLVMErrorRef e = LLVMRunPasses(
		g.M, fast ? "function(sroa,early-cse,simplifycfg)" : "default<O1>", tm, po);
	LLVMDisposePassBuilderOptions(po);
	if (e) {
		llvm_fail(err, errlen, "LLVM's optimiser failed", e);
		goto out;
	}
	char *emsg = NULL;
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, g.M, LLVMObjectFile, &emsg, &obj)) {
		snprintf(err, errlen, "wasm.engine: LLVM cannot emit code: %s", emsg ? emsg : "");
		LLVMDisposeMessage(emsg);
		goto out;
	}
	*objp = obj;
	rc = 0;
out:
	reset_func(&g);
	free(g.stk);
	free(g.ctl);
	free(g.ftys);
	free(g.fns);
	LLVMDisposeBuilder(g.B);
	LLVMDisposeBuilder(g.AB);
	LLVMDisposeModule(g.M);
	LLVMContextDispose(g.C);
	if (tm)
		LLVMDisposeTargetMachine(tm);
	return rc;
}

static int plugin_compile(struct kis_wasm_module *m, const uint8_t *cached, size_t cached_len,
			  char *err, size_t errlen)
{
	if (m->jit)
		return 0;
	if (cached && cached_len) {
		/* The caller's cache made it for this module, compiler and CPU
		 * (jit_cache.c compares all three); one that does not link is
		 * compiled anew. */
		LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(
			(const char *)cached, cached_len, "cached");
		if (buf && link_object(m, buf, true, err, errlen) == 0)
			return 0;
	}
	LLVMMemoryBufferRef obj = NULL;
	if (generate(m, &obj, err, errlen) < 0)
		return -1;
	return link_object(m, obj, false, err, errlen);
}

/* The object code only: the library links it itself (jit_elf.c). */
static int plugin_emit(struct kis_wasm_module *m, uint8_t **out, size_t *len, char *err,
		       size_t errlen)
{
	LLVMMemoryBufferRef obj = NULL;
	if (generate(m, &obj, err, errlen) < 0)
		return -1;
	*len = LLVMGetBufferSize(obj);
	*out = malloc(*len ? *len : 1);
	if (*out)
		memcpy(*out, LLVMGetBufferStart(obj), *len);
	LLVMDisposeMemoryBuffer(obj);
	if (!*out) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

__attribute__((visibility("default"))) int kis_wasm_jit_plugin_init(const struct wasm_jit_host *host,
								 struct wasm_jit_plugin *out);

int kis_wasm_jit_plugin_init(const struct wasm_jit_host *host, struct wasm_jit_plugin *out)
{
	if (!host || host->version != WASM_JIT_VERSION)
		return -1;
	if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
		return -1;
	jit_llvm_host = host;
	out->compile = plugin_compile;
	out->emit = plugin_emit;
	out->module_free = plugin_module_free;
	out->lookup = plugin_lookup;
	out->object = plugin_object;
	out->id = plugin_id;
	return 0;
}
