/* SPDX-License-Identifier: MIT */
/* Growth of tables and memories (spec 4.5.3 grow), guard reservations for
 * compiled code (jit.h) and recognising their faults. Both engines call
 * these (exec.c, jit_rt.c) and neither needs the rest of runtime.c, which
 * is why they are a file of their own (issue 42: the circles
 * exec.c <-> runtime.c and jit_rt.c <-> runtime.c). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mremap */
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "wasm/internal.h"
#include "wasm/jit.h"

int64_t wasm_table_grow(struct kis_wasm_table *t, uint32_t delta, uint64_t init)
{
	uint64_t old = t->size, n = old + delta;
	uint64_t cap = t->lim.has_max ? t->lim.max : UINT32_MAX;
	if (n > cap || n > KIS_WASM_MAX_TABLE_ELEMS)
		return -1;
	if (delta) {
		uint64_t *e = realloc(t->elems, (size_t)(n + 1) * sizeof(uint64_t));
		if (!e)
			return -1;
		t->elems = e;
		for (uint64_t i = old; i < n; i++)
			e[i] = init;
		t->size = (uint32_t)n;
	}
	return (int64_t)old;
}

/* Memory lives in an anonymous mapping: growth by mremap gives zeroed pages
 * that cost nothing until touched. A guard-region memory (mem->reserved)
 * has its whole reservation mapped PROT_NONE from the start, and grows by
 * making the next pages read-write in place (mprotect(2): pages of a
 * MAP_NORESERVE private mapping never written read as zero), so the
 * limits count what is accessible, never the reservation. */
int64_t wasm_memory_grow(struct kis_wasm_memory *mem, uint32_t delta)
{
	uint64_t old = mem->size / WASM_PAGE, n = old + delta;
	uint64_t cap = mem->lim.has_max ? mem->lim.max : 65536;
	if (n > cap || n > mem->cap_pages)
		return -1;
	if (delta == 0)
		return (int64_t)old;
	size_t nbytes = (size_t)n * WASM_PAGE;
	void *p;
	if (mem->reserved) {
		if (nbytes > mem->reserved ||
		    mprotect(mem->data + mem->size, nbytes - mem->size, PROT_READ | PROT_WRITE) < 0)
			return -1;
		mem->size = nbytes;
		return (int64_t)old;
	}
	if (mem->data)
		p = mremap(mem->data, mem->size, nbytes, MREMAP_MAYMOVE);
	else
		p = mmap(NULL, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	mem->data = p;
	mem->size = nbytes;
	return (int64_t)old;
}

/* Give mem a guard reservation (jit.h): a new PROT_NONE mapping of
 * WASM_JIT_RESERVE bytes, and the pages it has moved to its start
 * (mremap(2) MREMAP_FIXED replaces what is there, contents kept), as a
 * memory.grow may move them; every reader of data reloads it after any
 * call (exec.c), as after a grow. */
/* Where reservations go: a hint in [32 TiB, 80 TiB), below where Linux
 * places a PIE, its heap and the top-down mmap area (x86-64, 47-bit user
 * space; above ASan's shadow). The kernel takes a hint whose range is free
 * and else picks another place (mmap(2)). Why: the compiled code's
 * sections are mapped separately and reach each other by 32-bit
 * PC-relative references (the small code model); 8 GiB holes between them,
 * left by freed reservations in the top-down area, could put them further
 * apart than that. */
#define RESERVE_HINT_BASE (32ull << 40)
#define RESERVE_HINT_END (80ull << 40)
static _Atomic uint64_t reserve_hint = RESERVE_HINT_BASE;

static void *reserve_hint_next(void)
{
	const uint64_t step = WASM_JIT_PREFIX + WASM_JIT_RESERVE;
	uint64_t h = atomic_fetch_add(&reserve_hint, step);
	if (h + step > RESERVE_HINT_END) {
		uint64_t want = h + step;
		atomic_compare_exchange_strong(&reserve_hint, &want, RESERVE_HINT_BASE);
		h = atomic_fetch_add(&reserve_hint, step);
	}
	return (void *)(uintptr_t)h;
}

int wasm_memory_reserve(struct kis_wasm_memory *mem)
{
	if (mem->reserved)
		return 0;
	/* the prefix first (jit.h, WASM_JIT_PREFIX), PROT_NONE too until an
	 * instance's context is made there */
	uint8_t *q = mmap(reserve_hint_next(), WASM_JIT_PREFIX + WASM_JIT_RESERVE, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (q == MAP_FAILED)
		return -1;
	uint8_t *p = q + WASM_JIT_PREFIX;
	if (mem->data && mremap(mem->data, mem->size, mem->size, MREMAP_MAYMOVE | MREMAP_FIXED, p) ==
				 MAP_FAILED) {
		munmap(q, WASM_JIT_PREFIX + WASM_JIT_RESERVE);
		return -1;
	}
	/* Transparent huge pages where the kernel offers them (madvise
	 * mode): a page first touched costs a fault, and in a VM a second
	 * one in the hypervisor (~8 us a 4 KiB page on this PVM guest, 8 MiB
	 * in 17 ms, against 0.3 ms in 2 MiB pages). Only whole 2 MiB extents
	 * inside the read-write part are ever huge, so what is resident stays
	 * within what memory.grow made accessible. Advice only: refused on a
	 * kernel without THP, and then nothing changes. */
	madvise(p, WASM_JIT_RESERVE, MADV_HUGEPAGE);
	mem->data = p;
	mem->reserved = WASM_JIT_RESERVE;
	return 0;
}

bool wasm_store_guard_fault(const struct kis_wasm_store *s, uintptr_t addr)
{
	/* from the fault handler (jit_rt.c): reads only, and the thread it
	 * interrupted was running compiled code, never changing objs */
	for (size_t i = 0; i < s->nobjs; i++) {
		const struct kis_wasm_memory *mem = s->objs[i].p;
		if (s->objs[i].kind == OBJ_MEMORY && mem->reserved &&
		    addr - (uintptr_t)mem->data < mem->reserved)
			return true;
	}
	return false;
}
