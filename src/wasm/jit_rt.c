/* SPDX-License-Identifier: MIT */
/* Runtime of compiled WebAssembly: the stack compiled code runs on, entry
 * from the host or the interpreter, traps (a longjmp back to the entry), and
 * the helpers generated code calls for what it does not do inline.
 *
 * Theory of operation. kis_wasm_call reaches wasm_invoke, which hands a
 * compiled function to wasm_jit_invoke. That switches to the store's own
 * stack (a mapping with a guard region below it; a compiled function
 * that calls out of compiled code compares the stack pointer with
 * ctx->stack_limit, above the guard by a margin, and in guard mode one
 * that does not runs into the guard, whose fault is the trap: jit.h,
 * WASM_JIT_STACK_GUARD), sets a jmp_buf and calls the function's
 * slot-form wrapper.
 * Every trap, from generated code or from a helper here, is a call of
 * wasm_jit_rt_trap, which longjmps to that jmp_buf with the trap kind.
 * Compiled frames hold no resources, so unwinding them is only resetting
 * the stack pointer. A host function called from compiled code (WASI) runs
 * on the same stack and may enter wasm again: a nested entry stays on the
 * stack and sets a jmp_buf of its own, restoring the outer one on return.
 *
 * A call crosses from either engine to the other: a store may hold
 * interpreted and compiled instances at once (a module the compiler
 * refused runs interpreted beside others that compiled, and imports link
 * them). wasm_jit_rt_call hands an interpreted callee to wasm_invoke
 * (exec.c); wasm_invoke hands a compiled callee here, but through the
 * entry this file gives it (wasm_set_compiled_entry, at the first
 * instance with compiled code), as it calls a host function through its
 * pointer: to the interpreter a compiled function is a callee with a native
 * entry, and it runs, and links, without a compiler (issue 42: exec.c and
 * this file were one circle). So this file is above the interpreter, and
 * the interpreter names nothing of it. */
#include <emmintrin.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <ucontext.h>
#include <unistd.h>

#include "wasm/jit.h"

/* The store whose compiled code runs on this thread's stack switch, for
 * the fault handler (initial-exec: reading it is a plain load, safe in a
 * signal handler). */
static __thread struct kis_wasm_store *running __attribute__((tls_model("initial-exec")));

/* Calls fn(arg) with the stack pointer at top (16-byte aligned) and back
 * (System V x86-64: rdi = arg, rsi = fn, rdx = top; rbp keeps the caller's
 * stack pointer across the call). */
void wasm_jit_switch(void *arg, void (*fn)(void *), uintptr_t top);
__asm__(".text\n"
	".p2align 4\n"
	".hidden wasm_jit_switch\n"
	".globl wasm_jit_switch\n"
	".type wasm_jit_switch,@function\n"
	"wasm_jit_switch:\n"
	"\tendbr64\n"
	"\tpushq %rbp\n"
	"\tmovq %rsp, %rbp\n"
	"\tmovq %rdx, %rsp\n"
	"\tcallq *%rsi\n"
	"\tmovq %rbp, %rsp\n"
	"\tpopq %rbp\n"
	"\tretq\n"
	".size wasm_jit_switch, .-wasm_jit_switch\n");

static struct wasm_jit_store *jit_store(struct kis_wasm_store *s)
{
	if (s->jit)
		return s->jit;
	struct wasm_jit_store *js = calloc(1, sizeof(*js));
	if (!js)
		return NULL;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t guard = WASM_JIT_STACK_GUARD > page ? WASM_JIT_STACK_GUARD : page;
	js->map_len = WASM_JIT_STACK_BYTES + guard;
	/* MAP_NORESERVE and untouched: pages cost only once used. The guard
	 * region is PROT_NONE, so a function with no limit check (jit.h), or
	 * a host function deeper than the margin, faults instead of writing
	 * below; a frame larger than a page probes it page by page (LLVM's
	 * probe-stack, jit_llvm_ir.c fn_decl), so none steps over it. */
	js->map = mmap(NULL, js->map_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (js->map == MAP_FAILED) {
		free(js);
		return NULL;
	}
	if (mprotect(js->map, guard, PROT_NONE) < 0) {
		munmap(js->map, js->map_len);
		free(js);
		return NULL;
	}
	js->stack_top = ((uintptr_t)js->map + js->map_len) & ~(uintptr_t)15;
	js->stack_limit = (uintptr_t)js->map + guard + WASM_JIT_STACK_MARGIN;
	atomic_init(&js->polls, NULL);
	atomic_init(&js->poll_prot, PROT_READ);
	s->jit = js;
	return js;
}

void wasm_jit_store_free(struct wasm_jit_store *js)
{
	if (!js)
		return;
	munmap(js->map, js->map_len);
	for (struct wasm_jit_poll *p = atomic_load(&js->polls), *n; p; p = n) {
		n = p->next;
		free(p);
	}
	free(js);
}

/* ---- the poll page (jit.h) ---- */

void wasm_jit_poll_set(struct kis_wasm_store *s, int prot)
{
	struct wasm_jit_store *js = s->jit;
	if (!js)
		return;
	/* PROT_NONE always walks (an interrupt is rare, and a walk of its
	 * racing with a run's reset to PROT_READ must end with the pages
	 * shut: kis_wasm_call looks at the flag again after its reset);
	 * PROT_READ only on a change, so a run's start costs no system call
	 * when nothing was set */
	if (atomic_exchange(&js->poll_prot, prot) == prot && prot != PROT_NONE)
		return;
	for (struct wasm_jit_poll *p = atomic_load(&js->polls); p; p = p->next) {
		uint8_t *page = atomic_load(&p->page);
		if (page)
			(void)mprotect(page, WASM_JIT_POLL_OFF, prot);
	}
}

/* The context with its poll page before it: two pages, the first
 * readable only (never written: it is read and faulted on, nothing
 * else), published in the store's list and then given the pages' current
 * protection. The last two pages of mem's prefix when mem is given (a
 * memory the module defines, in guard mode: jit.h, WASM_JIT_PREFIX), else
 * a mapping of their own. */
static struct wasm_jit_ctx *ctx_new(struct wasm_jit_store *js, bool poll,
				    struct kis_wasm_memory *mem)
{
	_Static_assert(sizeof(struct wasm_jit_ctx) <= WASM_JIT_POLL_OFF, "one page of context");
	_Static_assert(WASM_JIT_PREFIX >= 2 * WASM_JIT_POLL_OFF, "room for the context");
	if (!poll)
		return calloc(1, sizeof(struct wasm_jit_ctx));
	struct wasm_jit_poll *node = calloc(1, sizeof(*node));
	uint8_t *map = mem ? mem->data - 2 * WASM_JIT_POLL_OFF
			   : mmap(NULL, 2 * WASM_JIT_POLL_OFF, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!node || map == MAP_FAILED || mprotect(map, WASM_JIT_POLL_OFF, PROT_READ) < 0 ||
	    (mem && mprotect(map + WASM_JIT_POLL_OFF, WASM_JIT_POLL_OFF,
			     PROT_READ | PROT_WRITE) < 0)) {
		free(node);
		if (mem && map != MAP_FAILED)
			mprotect(map, 2 * WASM_JIT_POLL_OFF, PROT_NONE);
		else if (map != MAP_FAILED)
			munmap(map, 2 * WASM_JIT_POLL_OFF);
		return NULL;
	}
	/* a prefix's context page may hold an earlier context of the same
	 * memory's (an instantiation that failed after it was made) */
	memset(map + WASM_JIT_POLL_OFF, 0, sizeof(struct wasm_jit_ctx));
	node->in_prefix = mem != NULL;
	atomic_init(&node->page, map);
	node->next = atomic_load(&js->polls);
	atomic_store(&js->polls, node);
	int prot = atomic_load(&js->poll_prot);
	if (prot != PROT_READ)
		(void)mprotect(map, WASM_JIT_POLL_OFF, prot);
	return (struct wasm_jit_ctx *)(map + WASM_JIT_POLL_OFF);
}

void wasm_jit_instance_free(struct kis_wasm_instance *inst)
{
	struct wasm_jit_ctx *c = inst->jit;
	if (!c)
		return;
	inst->jit = NULL;
	struct wasm_jit_store *js = inst->store->jit;
	uint8_t *page = (uint8_t *)c - WASM_JIT_POLL_OFF;
	for (struct wasm_jit_poll *p = js ? atomic_load(&js->polls) : NULL; p; p = p->next)
		if (atomic_load(&p->page) == page) {
			atomic_store(&p->page, NULL);
			/* in a memory's prefix: the memory's mapping, shut again
			 * (the memory, freed after its instances, unmaps it) */
			if (p->in_prefix)
				mprotect(page, 2 * WASM_JIT_POLL_OFF, PROT_NONE);
			else
				munmap(page, 2 * WASM_JIT_POLL_OFF);
			return;
		}
	free(c); /* check mode's, from calloc */
}

static const struct wasm_jit_sym externals[] = {
#define S(n) {#n, (void (*)(void))n},
	WASM_JIT_HELPERS(S) WASM_JIT_LIBC(S)
#undef S
};
const struct wasm_jit_externals wasm_jit_rt_externals = {externals,
							 sizeof(externals) / sizeof(*externals)};

int wasm_jit_instance_init(struct kis_wasm_instance *inst, char *err, size_t errlen)
{
	/* the interpreter reaches compiled functions through this entry
	 * (exec.c names nothing of this file: see this file's head) */
	wasm_set_compiled_entry(wasm_jit_invoke);
	const struct kis_wasm_module *m = inst->m;
	struct wasm_jit_store *js = jit_store(inst->store);
	struct kis_wasm_memory *mem0 = m->nmems ? inst->mems[0] : NULL;
	if (m->jit_guard && mem0 && wasm_memory_reserve(mem0) < 0) {
		/* code without checks needs memory 0 in a reservation (one
		 * made before its store compiled moves there now); without
		 * one it does not run */
		snprintf(err, errlen, "cannot reserve the guard region of memory 0: %s", strerror(errno));
		return -1;
	}
	struct wasm_jit_ctx *c =
		js ? ctx_new(js, m->jit_guard, wasm_jit_mem_at_ctx(m) ? mem0 : NULL) : NULL;
	if (!c) {
		snprintf(err, errlen, "cannot allocate the compiled code's stack and context");
		return -1;
	}
	inst->jit = c; /* freed with the instance from here on (wasm_jit_instance_free) */
	c->mem = mem0;
	if (m->jit_guard && c->mem)
		c->mem0 = c->mem->data;
	c->globals = inst->globals;
	c->tables = inst->tables;
	c->funcs = inst->funcs;
	c->tick = &inst->store->jit_tick;
	c->stack_limit = js->stack_limit;
	c->types = m->types;
	c->inst = inst;
	c->store = inst->store;
	for (uint32_t i = 0; i < m->nfuncs - m->nfunc_imports; i++) {
		struct kis_wasm_func *f = &inst->own_funcs[i];
		if (wasm_jit_elf_lookup(m->jit, i, &f->jit_fn, &f->jit_wrap) < 0) {
			for (uint32_t k = 0; k < i; k++)
				inst->own_funcs[k].jit_fn = NULL, inst->own_funcs[k].jit_wrap = NULL;
			snprintf(err, errlen, "compiled code of function %u is missing",
				 m->nfunc_imports + i);
			return -1;
		}
		f->jit_ctx = c;
	}
	return 0;
}

struct entry {
	struct kis_wasm_func *f;
	uint64_t *io;
	struct wasm_jit_store *js;
	jmp_buf jb;
	enum kis_wasm_trap trap;
};

/* ---- guard-region memory (jit.h) ---- */

static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static bool guard_on;

static void guard_probe(void)
{
	/* An address-space limit would count every reservation: 8 GiB per
	 * memory against a limit meant for what a run uses. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) < 0 || rl.rlim_cur != RLIM_INFINITY)
		return;
	void *p = mmap(NULL, WASM_JIT_RESERVE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (p == MAP_FAILED)
		return;
	munmap(p, WASM_JIT_RESERVE);
	guard_on = true;
}

bool wasm_jit_guard_mode(void)
{
	pthread_once(&guard_once, guard_probe);
	return guard_on;
}

static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static int fault_errno;
static struct sigaction old_segv, old_bus;

/* The trap a fault of this thread's becomes, for fault_trap. */
static __thread int fault_kind __attribute__((tls_model("initial-exec")));

/* Where a fault resumes: as if compiled code had called the trap helper
 * (the handler leaves the stack as a call would), with the store the
 * handler saw on this thread. */
__attribute__((noreturn)) static void fault_trap(void)
{
	if (fault_kind == KIS_WASM_TRAP_OUT_OF_FUEL)
		running->fuel = 0; /* as wasm_jit_rt_trap leaves it */
	longjmp(*running->jit->trap_jb, fault_kind);
}

/* The length of the tick at ip if it is the poll instruction the
 * generator emits (jit.h): cmpb $0, -8192(%reg), that is an optional REX
 * prefix, 0x80 with a ModRM of mod 2 (disp32) and reg 7 (CMP), a SIB byte
 * when rm is 4 (Intel SDM vol. 2, 2.1 and 2.2.1), the displacement
 * -8192 (the poll page from P, jit.h WASM_JIT_CTX_ARG) and the immediate 0;
 * else 0. */
static size_t poll_len(const uint8_t *ip)
{
	size_t n = (ip[0] & 0xf0) == 0x40 ? 1 : 0;
	if (ip[n] != 0x80)
		return 0;
	uint8_t modrm = ip[n + 1];
	if (modrm >> 6 != 2 || ((modrm >> 3) & 7) != 7)
		return 0;
	n += (modrm & 7) == 4 ? 3 : 2;
	int32_t disp;
	memcpy(&disp, ip + n, 4);
	if (disp != -(int32_t)(WASM_JIT_POLL_OFF + WASM_JIT_CTX_ARG) || ip[n + 4] != 0)
		return 0;
	return n + 5;
}

/* Is page one of s's poll pages? */
static bool is_poll_page(struct wasm_jit_store *js, uintptr_t page)
{
	for (struct wasm_jit_poll *p = atomic_load(&js->polls); p; p = p->next)
		if ((uintptr_t)atomic_load(&p->page) == page)
			return true;
	return false;
}

/* SIGSEGV/SIGBUS. Only when this thread runs compiled code of a store
 * (not inside a host or interpreted callee), on that store's stack, is a
 * fault one of ours, and only when it is one of:
 *   - an access in a guard reservation of one of its memories: the
 *     out-of-bounds trap;
 *   - an access in the stack's guard region (a function with no limit
 *     check ran into it, jit.h): the stack-exhausted trap, resumed below
 *     the innermost entry's frame, the stack above the guard being used up;
 *   - the poll instruction (jit.h) on one of its poll pages: the interrupt
 *     trap when the store is interrupted, else in a budgeted run one step
 *     of fuel (the trap when it is spent), else nothing; without a trap the
 *     instruction is stepped over.
 * Anything else is a crash as before: the previous handler, or the default
 * action (the disposition reset, the faulting instruction runs again and
 * the kernel ends the process, signal(7)). */
static void on_fault(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	struct kis_wasm_store *s = running;
	struct wasm_jit_store *js = s ? s->jit : NULL;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	uintptr_t addr = (uintptr_t)si->si_addr;
	bool ours = js && js->on_stack && !js->in_host && si->si_code > 0;
	bool on_jit_stack = js && sp >= (uintptr_t)js->map && sp < (uintptr_t)js->map + js->map_len;
	uintptr_t guard_end = js ? js->stack_limit - WASM_JIT_STACK_MARGIN : 0;
	/* where the trap is taken: below the faulting frame (and its red
	 * zone), 16-byte aligned less the return address a call would have
	 * pushed (System V x86-64 3.2.2); or, that close to the guard, below
	 * the innermost entry's frame (every frame under it is done with) */
	uintptr_t resume = on_jit_stack && sp - 4096 >= guard_end ? sp - 512 : js ? js->trap_sp : 0;
	resume = (resume & ~(uintptr_t)15) - 8;
	if (ours && sig == SIGSEGV && on_jit_stack && addr >= (uintptr_t)js->map && addr < guard_end) {
		fault_kind = KIS_WASM_TRAP_STACK_EXHAUSTED;
		uc->uc_mcontext.gregs[REG_RSP] = (greg_t)resume;
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)fault_trap;
		return;
	}
	uint8_t *ip = (uint8_t *)uc->uc_mcontext.gregs[REG_RIP];
	size_t plen;
	if (ours && sig == SIGSEGV && on_jit_stack && addr % WASM_JIT_POLL_OFF == 0 && is_poll_page(js, addr) &&
	    (plen = poll_len(ip)) != 0) {
		int kind = 0;
		if (atomic_load(&s->interrupt))
			kind = KIS_WASM_TRAP_INTERRUPTED;
		else if ((atomic_load(&s->jit_tick) & WASM_JIT_TICK_METER) && --s->fuel < 0)
			kind = KIS_WASM_TRAP_OUT_OF_FUEL;
		if (!kind) {
			uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)(ip + plen);
			return;
		}
		fault_kind = kind;
		uc->uc_mcontext.gregs[REG_RSP] = (greg_t)resume;
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)fault_trap;
		return;
	}
	if (ours && on_jit_stack && wasm_store_guard_fault(s, addr)) {
		/* the return from the handler (rt_sigreturn) restores the
		 * signal mask and leaves the alternate stack */
		fault_kind = KIS_WASM_TRAP_MEMORY_OOB;
		uc->uc_mcontext.gregs[REG_RSP] = (greg_t)resume;
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)fault_trap;
		return;
	}
	const struct sigaction *o = sig == SIGBUS ? &old_bus : &old_segv;
	if (o->sa_flags & SA_SIGINFO) {
		o->sa_sigaction(sig, si, ucv);
		return;
	}
	if (o->sa_handler != SIG_DFL && o->sa_handler != SIG_IGN) {
		o->sa_handler(sig);
		return;
	}
	struct sigaction d = {.sa_handler = SIG_DFL};
	sigemptyset(&d.sa_mask);
	sigaction(sig, &d, NULL);
	if (si->si_code <= 0) /* sent, not a fault: it does not come again */
		raise(sig);
}

static void fault_install(void)
{
	struct sigaction sa = {.sa_sigaction = on_fault, .sa_flags = SA_SIGINFO | SA_ONSTACK};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &old_segv) < 0 || sigaction(SIGBUS, &sa, &old_bus) < 0)
		fault_errno = errno ? errno : EINVAL;
}

/* Whoever set a SIGSEGV or SIGBUS handler after ours (a test harness
 * does, around each test: cmocka) took the trap from us: before compiled
 * code runs, ours goes back in front, and the newer one becomes the one a
 * fault that is not ours is handed to. Two sigaction reads per outermost
 * entry into compiled code. */
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;

/* This thread has an alternate signal stack (ours or its own): the fault
 * of a stack run into its guard needs one to be handled at all. */
static __thread bool alt_ok __attribute__((tls_model("initial-exec")));

static int alt_stack(char *err, size_t errlen)
{
	/* An alternate stack for this thread, if it has none: the handler
	 * then runs there whatever the stack the fault happened on. Kept for
	 * the thread's life (sigaltstack(2) has no owner to free it). */
	stack_t cur;
	if (alt_ok || (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE)))
		return alt_ok = true, 0;
	long min = sysconf(_SC_SIGSTKSZ);
	size_t len = 64u << 10;
	if (min > 0 && (size_t)min * 4 > len)
		len = (size_t)min * 4;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "cannot allocate the fault handler's stack: %s", strerror(errno));
		return -1;
	}
	stack_t ss = {.ss_sp = p, .ss_size = len};
	if (sigaltstack(&ss, NULL) < 0) {
		int e = errno;
		munmap(p, len);
		snprintf(err, errlen, "cannot set the fault handler's stack: %s", strerror(e));
		errno = e;
		return -1;
	}
	return alt_ok = true, 0;
}

/* Before compiled code runs on this thread: our handler in front, and an
 * alternate stack; -1 when the thread has none and cannot get one (a
 * seccomp filter denies sigaltstack(2) on a thread the store was not
 * made on), where a stack running into its guard could not trap. */
static int fault_keep(void)
{
	char why[128];
	if (!alt_ok && alt_stack(why, sizeof(why)) < 0)
		return -1;
	struct sigaction cur;
	if (sigaction(SIGSEGV, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
	    cur.sa_sigaction == on_fault && sigaction(SIGBUS, NULL, &cur) == 0 &&
	    (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fault)
		return 0;
	struct sigaction sa = {.sa_sigaction = on_fault, .sa_flags = SA_SIGINFO | SA_ONSTACK};
	sigemptyset(&sa.sa_mask);
	pthread_mutex_lock(&fault_lock);
	const int sigs[2] = {SIGSEGV, SIGBUS};
	for (int i = 0; i < 2; i++) {
		struct sigaction *old = sigs[i] == SIGBUS ? &old_bus : &old_segv;
		if (sigaction(sigs[i], NULL, &cur) < 0 ||
		    ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fault))
			continue;
		struct sigaction prev;
		if (sigaction(sigs[i], &sa, &prev) == 0)
			*old = prev;
	}
	pthread_mutex_unlock(&fault_lock);
	return 0;
}

int wasm_jit_fault_init(char *err, size_t errlen)
{
	pthread_once(&fault_once, fault_install);
	if (fault_errno) {
		snprintf(err, errlen, "cannot install the compiled code's fault handler: %s",
			 strerror(fault_errno));
		errno = fault_errno;
		return -1;
	}
	return alt_stack(err, errlen);
}

static void run_entry(void *p)
{
	struct entry *e = p;
	/* below this frame: what a fault of the stack's guard resumes on
	 * (on_fault), every frame under this one being done with then */
	volatile char anchor = 0;
	e->js->trap_sp = (uintptr_t)&anchor - 1024;
	int k = setjmp(e->jb);
	if (k == 0) {
		e->f->jit_wrap(e->f->jit_ctx, e->io);
		e->trap = KIS_WASM_OK;
	} else {
		e->trap = (enum kis_wasm_trap)k;
	}
}

enum kis_wasm_trap wasm_jit_invoke(struct kis_wasm_store *s, struct kis_wasm_func *f,
				   const uint64_t *args, uint64_t *results)
{
	struct wasm_jit_store *js = s->jit;
	const struct wasm_functype *ft = f->type;
	uint32_t n = ft->nps > ft->nrs ? ft->nps : ft->nrs;
	uint64_t small[16];
	uint64_t *io = n <= 16 ? small : calloc(n, sizeof(uint64_t));
	if (!io || !js)
		return KIS_WASM_TRAP_STACK_EXHAUSTED;
	if (ft->nps)
		memcpy(io, args, (size_t)ft->nps * 8);
	struct entry e = {.f = f, .io = io, .js = js};
	jmp_buf *outer = js->trap_jb;
	uintptr_t outer_sp = js->trap_sp;
	uint32_t in_host = js->in_host;
	js->trap_jb = &e.jb;
	js->in_host = 0; /* compiled code again, inside a host call maybe */
	if (js->on_stack) {
		run_entry(&e);
	} else {
		if (wasm_jit_guard_mode() && fault_keep() < 0) {
			js->in_host = in_host;
			js->trap_jb = outer;
			if (io != small)
				free(io);
			return KIS_WASM_TRAP_STACK_EXHAUSTED;
		}
		struct kis_wasm_store *prev = running;
		running = s;
		js->on_stack = true;
		wasm_jit_switch(&e, run_entry, js->stack_top);
		js->on_stack = false;
		running = prev;
	}
	js->in_host = in_host;
	js->trap_jb = outer;
	js->trap_sp = outer_sp;
	if (e.trap == KIS_WASM_OK && ft->nrs)
		memcpy(results, io, (size_t)ft->nrs * 8);
	if (io != small)
		free(io);
	return e.trap;
}

/* ---- helpers called by generated code ---- */

void wasm_jit_rt_trap(struct wasm_jit_ctx *c, uint32_t kind)
{
	if (kind == KIS_WASM_TRAP_OUT_OF_FUEL)
		c->store->fuel = 0; /* as the interpreter leaves it */
	if (kind == KIS_WASM_OK || kind >= KIS_WASM_TRAP__COUNT)
		kind = KIS_WASM_TRAP_UNREACHABLE;
	longjmp(*c->store->jit->trap_jb, (int)kind);
}

/* A tick whose word was not zero (jit.h, WASM_JIT_TICK_*): the
 * interpreter's TICK, the interrupt flag and then one step of fuel. */
void wasm_jit_rt_tick(struct wasm_jit_ctx *c)
{
	struct kis_wasm_store *s = c->store;
	if (atomic_load(&s->interrupt))
		wasm_jit_rt_trap(c, KIS_WASM_TRAP_INTERRUPTED);
	int w = atomic_load(&s->jit_tick);
	if (w & WASM_JIT_TICK_INTERRUPT) {
		/* an interrupt of a run before this one, which kis_wasm_call's
		 * reset of the word raced with: the flag, cleared, is what
		 * counts. Clear the bit, then look at the flag again: an
		 * interrupt that sets it after our first look set the bit
		 * after setting the flag, so one of the two looks sees it. */
		atomic_fetch_and(&s->jit_tick, ~WASM_JIT_TICK_INTERRUPT);
		if (atomic_load(&s->interrupt))
			wasm_jit_rt_trap(c, KIS_WASM_TRAP_INTERRUPTED);
	}
	if ((w & WASM_JIT_TICK_METER) && --s->fuel < 0)
		wasm_jit_rt_trap(c, KIS_WASM_TRAP_OUT_OF_FUEL);
}

/* wasm_jit_rt_tick_saved (jit.h): the registers the System V ABI lets
 * wasm_jit_rt_tick clobber and preserve_most has the callee keep (rax,
 * rcx, rdx, rsi, rdi, r8 to r10), saved around the call; entered with the
 * stack 8 bytes off 16 (the return address), so eight pushes and 8 bytes
 * more align it for the call (System V x86-64 3.2.2). A trap in the tick
 * longjmps out of it like any other helper. */
__asm__(".text\n"
	".p2align 4\n"
	".hidden wasm_jit_rt_tick_saved\n"
	".globl wasm_jit_rt_tick_saved\n"
	".type wasm_jit_rt_tick_saved,@function\n"
	"wasm_jit_rt_tick_saved:\n"
	"\tendbr64\n"
	"\tpushq %rax\n"
	"\tpushq %rcx\n"
	"\tpushq %rdx\n"
	"\tpushq %rsi\n"
	"\tpushq %rdi\n"
	"\tpushq %r8\n"
	"\tpushq %r9\n"
	"\tpushq %r10\n"
	"\tsubq $8, %rsp\n"
	"\tcallq wasm_jit_rt_tick\n"
	"\taddq $8, %rsp\n"
	"\tpopq %r10\n"
	"\tpopq %r9\n"
	"\tpopq %r8\n"
	"\tpopq %rdi\n"
	"\tpopq %rsi\n"
	"\tpopq %rdx\n"
	"\tpopq %rcx\n"
	"\tpopq %rax\n"
	"\tretq\n"
	".size wasm_jit_rt_tick_saved, .-wasm_jit_rt_tick_saved\n");

/* A call that compiled code does not make directly: a host function, or a
 * function of an instance that runs in the interpreter. io holds the
 * arguments and receives the results (as many slots as the larger). */
void wasm_jit_rt_call(struct wasm_jit_ctx *c, struct kis_wasm_func *f, uint64_t *io)
{
	struct kis_wasm_store *s = c->store;
	const struct wasm_functype *ft = f->type;
	uint64_t small[16];
	uint64_t *res = ft->nrs <= 16 ? small : calloc(ft->nrs, sizeof(uint64_t));
	if (!res)
		wasm_jit_rt_trap(c, KIS_WASM_TRAP_STACK_EXHAUSTED);
	enum kis_wasm_trap t;
	if (f->jit_wrap) {
		f->jit_wrap(f->jit_ctx, io);
		if (res != small)
			free(res);
		return;
	}
	if (f->host) {
		/* the interpreter ticks at a call of a host function too
		 * (exec.c call:); a compiled callee ticks in its prologue and
		 * an interpreted one in wasm_invoke */
		if (atomic_load_explicit(&s->interrupt, memory_order_relaxed)) {
			if (res != small)
				free(res);
			wasm_jit_rt_trap(c, KIS_WASM_TRAP_INTERRUPTED);
		}
		if (--s->fuel < 0) {
			if (res != small)
				free(res);
			wasm_jit_rt_trap(c, KIS_WASM_TRAP_OUT_OF_FUEL);
		}
		/* the interpreter's host-call contract (exec.c): the depth
		 * counts the host frame, so a re-entry is not a new run */
		s->depth++;
		s->jit->in_host++;
		t = f->host(f->user, c->inst, io, res);
		s->jit->in_host--;
		s->depth--;
	} else {
		s->depth++;
		s->jit->in_host++;
		t = wasm_invoke(s, f, io, res);
		s->jit->in_host--;
		s->depth--;
	}
	if (t == KIS_WASM_OK && ft->nrs)
		memcpy(io, res, (size_t)ft->nrs * 8);
	if (res != small)
		free(res);
	if (t != KIS_WASM_OK)
		wasm_jit_rt_trap(c, t);
}

uint32_t wasm_jit_rt_sig_eq(const struct wasm_functype *a, const struct wasm_functype *b)
{
	return wasm_functype_eq(a, b);
}

uint32_t wasm_jit_rt_memory_grow(struct wasm_jit_ctx *c, uint32_t delta)
{
	return (uint32_t)wasm_memory_grow(c->mem, delta);
}

void wasm_jit_rt_memory_init(struct wasm_jit_ctx *c, uint32_t x, uint32_t d, uint32_t s,
			     uint32_t n)
{
	const struct kis_wasm_instance *inst = c->inst;
	const struct wasm_data *seg = &inst->m->datas[x];
	uint64_t len = inst->data_dropped[x] ? 0 : seg->len;
	if ((uint64_t)s + n > len || (uint64_t)d + n > c->mem->size)
		wasm_jit_rt_trap(c, KIS_WASM_TRAP_MEMORY_OOB);
	if (n)
		memcpy(c->mem->data + d, seg->bytes + s, n);
}

void wasm_jit_rt_data_drop(struct wasm_jit_ctx *c, uint32_t x)
{
	c->inst->data_dropped[x] = true;
}

void wasm_jit_rt_memory_copy(struct wasm_jit_ctx *c, uint32_t d, uint32_t s, uint32_t n)
{
	uint64_t size = c->mem->size;
	if ((uint64_t)s + n > size || (uint64_t)d + n > size)
		wasm_jit_rt_trap(c, KIS_WASM_TRAP_MEMORY_OOB);
	if (n)
		memmove(c->mem->data + d, c->mem->data + s, n);
}

void wasm_jit_rt_memory_fill(struct wasm_jit_ctx *c, uint32_t d, uint32_t v, uint32_t n)
{
	if ((uint64_t)d + n > c->mem->size)
		wasm_jit_rt_trap(c, KIS_WASM_TRAP_MEMORY_OOB);
	if (n)
		memset(c->mem->data + d, (int)(uint8_t)v, n);
}

int32_t wasm_jit_rt_memcmp(struct wasm_jit_ctx *c, uint32_t l, uint32_t r, uint32_t n)
{
	const uint8_t *a = c->mem->data + l, *b = c->mem->data + r;
	uint64_t x, y;
	uint32_t i = 0;
	/* eight bytes at a time; where two words differ, the first differing
	 * byte is the lowest set byte of their xor (x86-64 is little-endian:
	 * the byte at the lower address is the less significant) */
	for (; n - i >= 8; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y)
			goto differ;
	}
	if (i == n)
		return 0;
	if (n >= 8) {
		/* the last eight bytes, overlapping ones already equal */
		i = n - 8;
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x == y)
			return 0;
		goto differ;
	}
	for (; i < n; i++)
		if (a[i] != b[i])
			return (int32_t)a[i] - (int32_t)b[i];
	return 0;
differ:
	i += (uint32_t)__builtin_ctzll(x ^ y) >> 3;
	return (int32_t)a[i] - (int32_t)b[i];
}

/* ---- the string routines' fast paths (jit.h) ----
 * A scan reads memory in 16-byte blocks at 16-byte-aligned offsets below
 * its size, which is a whole number of pages: a block that starts inside
 * memory ends inside it, so nothing past the end is ever read (the bytes
 * of the first block below s are masked off). A scan stops at
 * min(size, s + WASM_JIT_FAST_MAX): -1, the routine's own code goes on. */

static uint64_t scan_end(const struct kis_wasm_memory *m, uint32_t s)
{
	uint64_t far = (uint64_t)s + WASM_JIT_FAST_MAX;
	return far < m->size ? far : m->size;
}

/* The offset from s of the first byte that is NUL or one of the n <= 4
 * bytes k (stop), or the first that is not one of them (!stop: NUL never
 * is one); -1 if none before the scan's end. */
static inline __attribute__((always_inline)) int64_t
scan_n(const struct kis_wasm_memory *m, uint32_t s, const uint8_t *k, int n, bool stop)
{
	if (s >= m->size)
		return -1;
	uint64_t end = scan_end(m, s), p = s & ~15ull;
	__m128i v[4];
	for (int i = 0; i < n; i++)
		v[i] = _mm_set1_epi8((char)k[i]);
	unsigned below = (1u << (s & 15)) - 1; /* the first block's bytes before s */
	for (;;) {
		__m128i x = _mm_loadu_si128((const __m128i *)(m->data + p));
		__m128i e = stop ? _mm_cmpeq_epi8(x, _mm_setzero_si128()) : _mm_setzero_si128();
		for (int i = 0; i < n; i++)
			e = _mm_or_si128(e, _mm_cmpeq_epi8(x, v[i]));
		unsigned hit = (unsigned)_mm_movemask_epi8(e);
		if (!stop)
			hit = ~hit & 0xffffu;
		hit &= ~below;
		if (hit)
			return (int64_t)(p + (unsigned)__builtin_ctz(hit) - s);
		below = 0;
		p += 16;
		if (p >= end)
			return -1;
	}
}

/* scan_n with n a constant in each copy: its compares unrolled */
static int64_t scan_small(const struct kis_wasm_memory *m, uint32_t s, const uint8_t *k, int n,
			  bool stop)
{
	switch (n) {
	case 0:
		return scan_n(m, s, k, 0, stop);
	case 1:
		return stop ? scan_n(m, s, k, 1, true) : scan_n(m, s, k, 1, false);
	case 2:
		return stop ? scan_n(m, s, k, 2, true) : scan_n(m, s, k, 2, false);
	case 3:
		return stop ? scan_n(m, s, k, 3, true) : scan_n(m, s, k, 3, false);
	default:
		return stop ? scan_n(m, s, k, 4, true) : scan_n(m, s, k, 4, false);
	}
}

/* The same for any set, as musl's bit set w (bytes of the set: bit
 * ch & 31 of word ch >> 5): the first byte that is NUL or in it (stop),
 * or the first not in it (!stop). */
static int64_t scan_set(const struct kis_wasm_memory *m, uint32_t s, const uint32_t *w, bool stop)
{
	if (s >= m->size)
		return -1;
	const uint8_t *d = m->data;
	for (uint64_t i = s, end = scan_end(m, s); i < end; i++) {
		uint8_t ch = d[i];
		bool in = (w[ch >> 5] >> (ch & 31)) & 1;
		if (stop ? !ch || in : !in)
			return (int64_t)(i - s);
	}
	return -1;
}

/* Whether [a, a + n) meets the set's 32 bytes at lo (64-bit: no wrap). */
static bool meets_set(uint64_t a, uint64_t n, uint64_t lo)
{
	return a < lo + 32 && lo < a + n;
}

/* musl's set of set[0..n): bit (ch & 31) of word ch >> 5 */
static void make_set(uint32_t *w, const uint8_t *set, int64_t n)
{
	memset(w, 0, 32);
	for (int64_t i = 0; i < n; i++)
		w[set[i] >> 5] |= 1u << (set[i] & 31);
}

/* wasi-libc's strcspn (musl's, as clang 14 compiled it): it moves global 0
 * down by 32 (put back on return); with set[0] or set[1] NUL it returns
 * __strchrnul(s, set[0]) - s and writes nothing; otherwise it zeroes the
 * 32 bytes at sp - 32, sets a bit there for each byte of set, then reads
 * s up to the first byte whose bit is set or NUL. Here: the same result
 * and the same bytes written, when every read lies inside memory, the
 * set's bytes do too, and nothing read after the set's first write (set
 * from set[2] on, s) overlaps them: then the write changes nothing read,
 * and s may be scanned before it. */
int64_t wasm_jit_rt_strcspn(struct wasm_jit_ctx *c, uint32_t s, uint32_t set, uint32_t sp)
{
	const struct kis_wasm_memory *m = c->mem;
	uint8_t *d = m->data;
	int64_t lc = scan_small(m, set, NULL, 0, true), r;
	if (lc < 2) /* __strchrnul: the first set[0] or NUL (lc -1: a trap) */
		return lc < 0 ? -1 : scan_small(m, s, d + set, (int)lc, true);
	if (sp < 32 || sp > m->size || meets_set(set, (uint64_t)lc + 1, sp - 32u))
		return -1;
	uint32_t w[8];
	make_set(w, d + set, lc);
	r = lc <= 4 ? scan_small(m, s, d + set, (int)lc, true) : scan_set(m, s, w, true);
	if (r < 0 || meets_set(s, (uint64_t)r + 1, sp - 32u))
		return -1;
	memcpy(d + sp - 32u, w, sizeof(w)); /* x86-64: the words' bytes as wasm stores them */
	return r;
}

/* wasi-libc's strspn: it zeroes the 32 bytes at sp - 32 first (global 0
 * unmoved), then reads set[0] (NUL: returns 0); with set[1] NUL it counts
 * the bytes of s equal to set[0]; otherwise it sets a bit for each byte of
 * set and reads s up to the first byte whose bit is clear. The same
 * conditions as wasm_jit_rt_strcspn's for doing it here. */
int64_t wasm_jit_rt_strspn(struct wasm_jit_ctx *c, uint32_t s, uint32_t set, uint32_t sp)
{
	const struct kis_wasm_memory *m = c->mem;
	uint8_t *d = m->data;
	uint32_t w[8] = {0};
	int64_t lc = 0, r = 0;
	if (sp < 32 || sp > m->size || set >= m->size || meets_set(set, 1, sp - 32u))
		return -1;
	if (d[set]) {
		lc = scan_small(m, set, NULL, 0, true);
		if (lc < 0 || meets_set(set, (uint64_t)lc + 1, sp - 32u))
			return -1;
		if (lc >= 2) /* one byte: compared, no bit set */
			make_set(w, d + set, lc);
		r = lc <= 4 ? scan_small(m, s, d + set, (int)lc, false) : scan_set(m, s, w, false);
		if (r < 0 || meets_set(s, (uint64_t)r + 1, sp - 32u))
			return -1;
	}
	memcpy(d + sp - 32u, w, sizeof(w));
	return r;
}

void wasm_jit_rt_table_init(struct wasm_jit_ctx *c, uint32_t tab, uint32_t x, uint32_t d,
			    uint32_t s, uint32_t n)
{
	struct wasm_elem_inst *seg = &c->inst->elems[x];
	struct kis_wasm_table *t = c->tables[tab];
	if ((uint64_t)s + n > seg->n || (uint64_t)d + n > t->size)
		wasm_jit_rt_trap(c, KIS_WASM_TRAP_TABLE_OOB);
	if (n)
		memcpy(t->elems + d, seg->refs + s, (size_t)n * 8);
}

void wasm_jit_rt_elem_drop(struct wasm_jit_ctx *c, uint32_t x)
{
	c->inst->elems[x].n = 0;
}

void wasm_jit_rt_table_copy(struct wasm_jit_ctx *c, uint32_t dt, uint32_t st, uint32_t d,
			    uint32_t s, uint32_t n)
{
	struct kis_wasm_table *td = c->tables[dt], *ts = c->tables[st];
	if ((uint64_t)s + n > ts->size || (uint64_t)d + n > td->size)
		wasm_jit_rt_trap(c, KIS_WASM_TRAP_TABLE_OOB);
	if (n)
		memmove(td->elems + d, ts->elems + s, (size_t)n * 8);
}

uint32_t wasm_jit_rt_table_grow(struct wasm_jit_ctx *c, uint32_t tab, uint64_t init, uint32_t n)
{
	return (uint32_t)wasm_table_grow(c->tables[tab], n, init);
}

void wasm_jit_rt_table_fill(struct wasm_jit_ctx *c, uint32_t tab, uint32_t i, uint64_t v,
			    uint32_t n)
{
	struct kis_wasm_table *t = c->tables[tab];
	if ((uint64_t)i + n > t->size)
		wasm_jit_rt_trap(c, KIS_WASM_TRAP_TABLE_OOB);
	for (uint64_t k = 0; k < n; k++)
		t->elems[i + k] = v;
}

/* One vector instruction, by the interpreter's simd.c: operands in io's
 * first nslots slots, the result written from io[0]. Its only trap is an
 * access outside memory 0. */
void wasm_jit_rt_simd(struct wasm_jit_ctx *c, const uint32_t *words, uint64_t *io, uint32_t nslots)
{
	struct kis_wasm_memory *m = c->mem;
	if (!wasm_simd_exec(words, io + nslots, NULL, m ? m->data : NULL, m ? m->size : 0, c->inst))
		wasm_jit_rt_trap(c, KIS_WASM_TRAP_MEMORY_OOB);
}
