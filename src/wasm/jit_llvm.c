/* SPDX-License-Identifier: MIT */
/* The WebAssembly compiler: a validated module's function bodies to LLVM IR
 * (one LLVM function per wasm function, taking the instance's context
 * first), optimised and made x86-64 relocatable objects by LLVM 14, which
 * the library links itself (jit_elf.c).
 * With jit_llvm_*.c, the only files that include LLVM's headers:
 * jit_llvm_func.c walks a body, jit_llvm_ir.c and jit_llvm_ops.c build its
 * IR, jit_llvm_known.c recognises libc routines, jit_llvm_host.c holds the
 * host's table they share; this file drives LLVM, over ranges of functions
 * on threads of their own ("the compile in parallel", below). The parts
 * never call back into this file.
 *
 * Why LLVM (docs/wasm.md, "The compiler"): it is on this machine already
 * (libllvm14, clang-14 builds the test programs), its code is what native
 * code gets, it emits a plain relocatable object that our loader maps
 * read-execute only after it is written (never writable and executable at
 * once), and it has vector types for SIMD.
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
#include <pthread.h>
#include <stdatomic.h>

#include "wasm/jit_llvm.h"

/* ---- LLVM: target, optimisation, object ---- */

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
		 * allocator, where the greedy allocator and SelectionDAG take
		 * most of the optimising tier's compile. That one stays at
		 * CodeGenLevelDefault: Less compiled no faster (measured, issue
		 * 44), and FastISel at either (LLVM's -fast-isel) made code 4 to
		 * 12% slower (geomean) for up to a quarter less compile time */
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

/* The IR passes of each tier (docs/wasm.md, "The optimising tier's
 * passes"). Our walker's IR is wasm's stack machine written out: locals and
 * operands in stack slots, a boolean widened to i32 and compared with zero
 * again, the context's fields loaded where used; memory accesses are
 * volatile, so no pass may merge, move or drop them. What pays on such IR
 * is making the slots SSA values (sroa), folding repeated loads of the
 * context (early-cse) and the arithmetic and compares around them
 * (instcombine), and dropping empty blocks (simplifycfg); code generation
 * (SelectionDAG, the greedy register allocator) does the rest.
 *
 * OPT, the optimising tier (a compiling run, tier-up's second stage):
 * measured on Lua 5.4, bzip2 and SQLite's speedtest1 against LLVM's
 * default<O1> (issue 44, interleaved runs from the cache): the same code
 * speed within 1 to 2% (geomean), for about half the compile's CPU (Lua's
 * 635 KB module 3.8 to 5.2 s against 6 to 9 s on this loaded machine). default<O1>'s cost is its inliner
 * and the CGSCC walk around it and six rounds of instcombine: the inliner
 * bought nothing measurable here (a call into another range cannot be
 * inlined anyway), nor did licm, gvn, dse, loop rotation and unrolling
 * added to this list (each within the runs' noise, for 10 to 60% more
 * compile time). FAST, tier-up's first stage, with CodeGenLevelNone
 * (host_machine): the same minus instcombine, 0.3 s of passes against 5.5
 * s for default<O1> on Lua, its code 1.7x slower (the register allocator
 * and FastISel: the passes here changed nothing at CodeGenLevelNone). */
#define OPT_PASSES "function(sroa,early-cse,simplifycfg,instcombine,simplifycfg)"
#define FAST_PASSES "function(sroa,early-cse,simplifycfg)"

/* Nothing unwinds through compiled code: a trap longjmps to the entry
 * (wasm_jit_rt_trap), a fault is made a trap by the signal handler and
 * resumes at a function that longjmps, and host calls return. Marked
 * nounwind, the functions need no unwind tables, which our loader would
 * not map anyway (jit_elf.c skips .eh_frame): LLVM then emits no CFI and
 * no .eh_frame, 10% of Lua's object and a little of its compile. */
static void no_unwind(struct gen *g)
{
	LLVMAttributeRef nu =
		LLVMCreateEnumAttribute(g->C, LLVMGetEnumAttributeKindForName("nounwind", 8), 0);
	for (LLVMValueRef f = LLVMGetFirstFunction(g->M); f; f = LLVMGetNextFunction(f))
		if (!LLVMIsDeclaration(f))
			LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, nu);
}

/* The defined functions fs[0..nf) of m to an object file in *objp (0), or
 * -1 with err, at the fast tier (fast: FAST_PASSES, CodeGenLevelNone) or
 * the optimising one. A defined function is declared where the range
 * first names it (fn_decl: a call out of the range names f<i>, which the
 * loader resolves against the object that defines it, jit_elf.c), only
 * the range's are defined, with their wrappers. One LLVMContext, module
 * and target machine of its own: LLVM's contexts share nothing, so ranges
 * compile on threads of their own (generate). */
static int generate_range(struct kis_wasm_module *m, const uint32_t *fs, uint32_t nf, bool fast,
			  LLVMMemoryBufferRef *objp, char *err, size_t errlen)
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
	char *triple = LLVMGetDefaultTargetTriple();
	LLVMSetTarget(g.M, triple);
	LLVMDisposeMessage(triple);
	LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
	LLVMSetModuleDataLayout(g.M, td);
	LLVMDisposeTargetData(td);
	declare_helpers(&g);
	for (uint32_t i = 0; i < m->ntypes; i++)
		g.ftys[i] = func_type(&g, &m->types[i]);
	for (uint32_t i = 0; i < nf; i++)
		if (gen_func(&g, fs[i]) < 0)
			goto out;
	for (uint32_t i = 0; i < nf; i++)
		gen_wrap(&g, fs[i]);
	no_unwind(&g);
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
	LLVMErrorRef e = LLVMRunPasses(g.M, fast ? FAST_PASSES : OPT_PASSES, tm, po);
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

/* ---- which functions are hot (the mixed tier) ----
 *
 * WASM_JIT_TIER_MIXED compiles the functions where a run's time went at
 * the optimising tier and the rest at the fast one: a compile near the
 * fast tier's cost, its code at the optimising tier's speed where it
 * matters (docs/wasm.md, "The mixed tier"). Where the time went is the
 * interpreter's profile of an earlier run (m->jit_prof: calls and loop
 * back-edges per function, exec.c): the functions with the most counts,
 * until they hold HOT_PER_MILLE of all counts. Measured on Lua 5.4, bzip2
 * and SQLite's speedtest1 (issue 44): 99% of the counts lie in 16 to 27%
 * of the code, 99.9% in 23 to 28%. A guess from the module alone
 * (functions with loops, smallest first, up to a quarter of the code)
 * found too little of it (its code 1.35x to 1.62x the optimising tier's,
 * the fast tier's 1.44x to 1.79x), so without a profile of the right
 * length every function is optimised. */
#define HOT_PER_MILLE 999u

/* hot[i] set for the functions chosen; m->jit_nprof == n. */
static void choose_hot(const struct kis_wasm_module *m, uint32_t n, uint8_t *hot, uint32_t *ord)
{
	const uint32_t *c = m->jit_prof;
	uint64_t total = 0, acc = 0;
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		total += c[i];
		if (c[i])
			ord[k++] = i;
	}
	/* the counted functions, most counts first (ties by index: the same
	 * set on every compile of the same profile) */
	for (uint32_t gap = k / 2; gap > 0; gap /= 2) /* Shell's sort */
		for (uint32_t i = gap; i < k; i++) {
			uint32_t v = ord[i], j = i;
			while (j >= gap && (c[ord[j - gap]] < c[v] ||
					    (c[ord[j - gap]] == c[v] && ord[j - gap] > v))) {
				ord[j] = ord[j - gap];
				j -= gap;
			}
			ord[j] = v;
		}
	for (uint32_t i = 0; i < k && acc * 1000 < total * HOT_PER_MILLE; i++) {
		hot[ord[i]] = 1;
		acc += c[ord[i]];
	}
}

/* ---- the compile in parallel ----
 *
 * A module's defined functions are cut into ranges of about RANGE_BYTES of
 * body each (at most WASM_JIT_OBJS_MAX in all), each range one object
 * (generate_range) at one tier, and the ranges are taken from a shared
 * counter by m->jit_threads threads (this one among them). At one tier a
 * range is contiguous; at the mixed tier the hot functions are cut into
 * ranges of their own (in index order), then the others, and the hot
 * ranges go first (they take most of the time: a thread that finishes
 * early then takes the cheap ones). The cut depends on the module (and
 * the hot set) only, never on the thread count, so one or two threads
 * make the same objects, in the same order: the container (jit.h,
 * "KISOBJS1") that the loader links as one image. Both costs of a compile
 * (LLVM's passes and its code generation) are per function, so the ranges
 * add only their fixed part: a context, the declarations, a target
 * machine, an object. */
#define RANGE_BYTES (32u << 10)

struct range {
	uint32_t lo, hi; /* into the order of functions (struct ranges.ord) */
	bool fast;
	LLVMMemoryBufferRef obj;
	int rc;
	char err[512];
};

struct ranges {
	struct kis_wasm_module *m;
	uint32_t *ord; /* the defined functions, each range's together */
	struct range *r;
	uint32_t n;
	atomic_uint next;
	atomic_bool failed; /* one range failed: take no more */
};

static void *range_worker(void *arg)
{
	struct ranges *rs = arg;
	for (;;) {
		unsigned i = atomic_fetch_add(&rs->next, 1);
		if (i >= rs->n || atomic_load(&rs->failed))
			return NULL;
		struct range *r = &rs->r[i];
		r->rc = generate_range(rs->m, rs->ord + r->lo, r->hi - r->lo, r->fast, &r->obj,
				       r->err, sizeof(r->err));
		if (r->rc < 0)
			atomic_store(&rs->failed, true);
	}
}

/* Cut ord[from, to) by the bodies' bytes into at most max ranges at r,
 * at one tier; the number of ranges (0 for no functions). */
static uint32_t cut_ranges(const struct kis_wasm_module *m, const uint32_t *ord, uint32_t from,
			   uint32_t to, uint32_t max, bool fast, struct range *r)
{
	if (from == to || max == 0)
		return 0;
	uint64_t total = 0;
	for (uint32_t i = from; i < to; i++)
		total += m->codes[ord[i]].body_len;
	uint64_t want = total / RANGE_BYTES;
	if (want > max)
		want = max;
	if (want > to - from)
		want = to - from;
	if (want < 1)
		want = 1;
	uint64_t per = (total + want - 1) / want, acc = 0;
	uint32_t k = 0;
	r[0].lo = from;
	for (uint32_t i = from; i < to; i++) {
		acc += m->codes[ord[i]].body_len;
		if (acc >= per * (k + 1) && k + 1 < want && i + 1 < to) {
			r[k].hi = i + 1;
			r[++k].lo = i + 1;
		}
	}
	r[k].hi = to;
	for (uint32_t i = 0; i <= k; i++)
		r[i].fast = fast;
	return k + 1;
}

/* The order and the cut, by the tier: all at one, or the hot functions
 * (optimising) then the others (fast). 0, or -1 out of memory. */
static int plan(struct kis_wasm_module *m, uint32_t n, struct ranges *rs)
{
	uint8_t *hot = calloc(n ? n : 1, 1);
	if (!hot)
		return -1;
	if (m->jit_tier == WASM_JIT_TIER_MIXED && m->jit_prof && m->jit_nprof == n)
		choose_hot(m, n, hot, rs->ord);
	else if (m->jit_tier != WASM_JIT_TIER_FAST)
		memset(hot, 1, n);
	uint32_t nh = 0;
	for (uint32_t i = 0; i < n; i++)
		nh += hot[i] != 0;
	uint32_t h = 0, c = nh;
	for (uint32_t i = 0; i < n; i++)
		rs->ord[hot[i] ? h++ : c++] = i;
	free(hot);
	/* the cold part's share of the objects: as many as its bytes ask
	 * for, at most half when there are hot ones too */
	uint32_t cold_max = nh ? WASM_JIT_OBJS_MAX / 2 : WASM_JIT_OBJS_MAX;
	rs->n = cut_ranges(m, rs->ord, 0, nh, WASM_JIT_OBJS_MAX - (nh < n ? 1 : 0), false, rs->r);
	if (rs->n + cold_max > WASM_JIT_OBJS_MAX)
		cold_max = WASM_JIT_OBJS_MAX - rs->n;
	rs->n += cut_ranges(m, rs->ord, nh, n, cold_max, true, rs->r + rs->n);
	return 0;
}

/* m's functions to the container of objects (malloc'd into *out). */
static int generate(struct kis_wasm_module *m, uint8_t **out, size_t *len, char *err,
		    size_t errlen)
{
	uint32_t n = m->nfuncs - m->nfunc_imports;
	struct ranges rs = {.m = m,
			    .r = calloc(WASM_JIT_OBJS_MAX, sizeof(struct range)),
			    .ord = calloc(n ? n : 1, sizeof(uint32_t))};
	if (!rs.r || !rs.ord || plan(m, n, &rs) < 0) {
		free(rs.r);
		free(rs.ord);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (rs.n == 0) { /* no defined functions: one empty object, as before */
		rs.r[0] = (struct range){.lo = 0, .hi = 0, .fast = m->jit_tier == WASM_JIT_TIER_FAST};
		rs.n = 1;
	}
	atomic_init(&rs.next, 0);
	atomic_init(&rs.failed, false);
	/* the other threads: a thread that cannot be made (a pids limit, a
	 * seccomp filter that allows no clone) leaves its share to the
	 * ones that run, this one at least */
	pthread_t th[WASM_JIT_OBJS_MAX];
	uint32_t nth = 0, want = m->jit_threads > 1 ? m->jit_threads : 1;
	if (want > rs.n)
		want = rs.n;
	while (nth + 1 < want && pthread_create(&th[nth], NULL, range_worker, &rs) == 0)
		nth++;
	range_worker(&rs);
	for (uint32_t i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	int rc = -1;
	size_t total = WASM_JIT_OBJS_HEAD + (size_t)rs.n * 8;
	for (uint32_t i = 0; i < rs.n; i++) {
		if (rs.r[i].rc < 0) {
			snprintf(err, errlen, "%s", rs.r[i].err);
			goto out;
		}
		if (!rs.r[i].obj) { /* not taken: another range failed first */
			snprintf(err, errlen, "wasm.engine: the compile stopped");
			continue;
		}
		total += LLVMGetBufferSize(rs.r[i].obj);
	}
	if (atomic_load(&rs.failed))
		goto out;
	uint8_t *b = malloc(total);
	if (!b) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* "KISOBJS1", the count, 0, each object's length, the objects */
	memcpy(b, WASM_JIT_OBJS_MAGIC, 8);
	uint32_t hdr[2] = {rs.n, 0};
	memcpy(b + 8, hdr, sizeof(hdr));
	size_t at = WASM_JIT_OBJS_HEAD + (size_t)rs.n * 8;
	for (uint32_t i = 0; i < rs.n; i++) {
		uint64_t l = LLVMGetBufferSize(rs.r[i].obj);
		memcpy(b + WASM_JIT_OBJS_HEAD + (size_t)i * 8, &l, 8);
		memcpy(b + at, LLVMGetBufferStart(rs.r[i].obj), l);
		at += l;
	}
	*out = b;
	*len = total;
	rc = 0;
out:
	for (uint32_t i = 0; i < rs.n; i++)
		if (rs.r[i].obj)
			LLVMDisposeMemoryBuffer(rs.r[i].obj);
	free(rs.r);
	free(rs.ord);
	return rc;
}

/* The object code only, as the container of one object per range: the
 * library links it itself (jit_elf.c). */
static int plugin_emit(struct kis_wasm_module *m, uint8_t **out, size_t *len, char *err,
		       size_t errlen)
{
	return generate(m, out, len, err, errlen);
}

__attribute__((visibility("default"))) int kis_wasm_jit_plugin_init(const struct wasm_jit_host *host,
								 struct wasm_jit_plugin *out);

int kis_wasm_jit_plugin_init(const struct wasm_jit_host *host, struct wasm_jit_plugin *out)
{
	if (!host || host->version != WASM_JIT_VERSION)
		return -1;
	/* the asm parser: the poll tick is inline assembly (jit_llvm_ir.c) */
	if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter() ||
	    LLVMInitializeNativeAsmParser())
		return -1;
	jit_llvm_host = host;
	out->emit = plugin_emit;
	return 0;
}
