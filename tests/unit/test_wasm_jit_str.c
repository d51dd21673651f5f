/* SPDX-License-Identifier: MIT */
/* The runtime's strcspn and strspn for the compiler's fast path of
 * wasi-libc's recognised bodies (jit_rt.c, jit_llvm.h): results and the
 * 32-byte set as the wasm routines leave them, -1 and nothing written
 * where the routine would trap or its set meets a string it reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "wasm/jit.h"

#define MEM 65536u
#define SP 40000u /* the shadow stack pointer: the set is 39968..39999 */

struct fixture {
	uint8_t *map; /* memory, then a PROT_NONE page: a read past it faults */
	struct kis_wasm_memory mem;
	struct wasm_jit_ctx ctx;
	uint8_t before[MEM];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	f->map = mmap(NULL, MEM + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (f->map == MAP_FAILED || mprotect(f->map + MEM, 4096, PROT_NONE) < 0) {
		free(f);
		return -1;
	}
	memset(f->map, 0x5a, MEM); /* no NUL anywhere until a test puts one */
	f->mem.data = f->map;
	f->mem.size = MEM;
	f->ctx.mem = &f->mem;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	munmap(f->map, MEM + 4096);
	free(f);
	return 0;
}

static void put(struct fixture *f, uint32_t at, const char *s)
{
	memcpy(f->map + at, s, strlen(s) + 1);
}

static void snap(struct fixture *f)
{
	memcpy(f->before, f->map, MEM);
}

/* memory as the snapshot, but for the n bytes at at */
static void same_but(struct fixture *f, uint32_t at, uint32_t n)
{
	assert_memory_equal(f->map, f->before, at);
	assert_memory_equal(f->map + at + n, f->before + at + n, MEM - at - n);
}

static uint32_t word(struct fixture *f, uint32_t at)
{
	uint32_t w;
	memcpy(&w, f->map + at, 4);
	return w;
}

static void test_strcspn_writes_the_set_musl_leaves(void **state)
{
	struct fixture *f = *state;
	put(f, 100, "hello, world");
	put(f, 200, "ow");
	snap(f);
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, 100, 200, SP), 4);
	same_but(f, SP - 32, 32);
	/* 'o' (0x6f) is bit 15 of word 3, 'w' (0x77) bit 23 */
	for (uint32_t i = 0; i < 8; i++)
		assert_int_equal(word(f, SP - 32 + 4 * i), i == 3 ? (1u << 15) | (1u << 23) : 0);
}

static void test_strcspn_of_one_byte_is_strchrnul_and_writes_nothing(void **state)
{
	struct fixture *f = *state;
	put(f, 100, "hello");
	put(f, 200, "l");
	put(f, 300, "");
	snap(f);
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, 100, 200, SP), 2);
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, 100, 300, SP), 5);
	/* no set: the stack pointer is not looked at */
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, 100, 200, 3), 2);
	same_but(f, 0, 0);
}

static void test_string_running_off_the_end_is_left_to_the_routine(void **state)
{
	struct fixture *f = *state;
	put(f, 200, "ab");
	put(f, 300, "a");
	snap(f);
	/* no NUL from MEM - 5 to the end: the routine traps; the helper must
	 * neither read past the end (the page there faults) nor write */
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, MEM - 5, 200, SP), -1);
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, MEM - 5, 300, SP), -1);
	memset(f->map + MEM - 5, 'a', 5); /* all in the set "ab": strspn too */
	snap(f);
	assert_int_equal(wasm_jit_rt_strspn(&f->ctx, MEM - 5, 200, SP), -1);
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, 200, MEM - 1, SP), -1);
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, MEM, 200, SP), -1);
	assert_int_equal(wasm_jit_rt_strspn(&f->ctx, 200, MEM, SP), -1);
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, 0xffffffffu, 200, SP), -1);
	same_but(f, 0, 0);
	/* a NUL in the very last byte: a string, read to its end */
	f->map[MEM - 1] = 0;
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, MEM - 5, 200 + 2, SP), 4);
	assert_int_equal(wasm_jit_rt_strspn(&f->ctx, MEM - 5, 200, SP), 4);
	/* stopped before the end: no trap in the routine either */
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, MEM - 5, 300, SP), 0);
}

static void test_set_out_of_memory_or_over_a_string_is_left_to_the_routine(void **state)
{
	struct fixture *f = *state;
	put(f, 100, "hello");
	put(f, 200, "ab");
	snap(f);
	/* the set at sp - 32: below 0 (sp < 32), past the end */
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, 100, 200, 31), -1);
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, 100, 200, MEM + 1), -1);
	assert_int_equal(wasm_jit_rt_strspn(&f->ctx, 100, 200, 0), -1);
	assert_int_equal(wasm_jit_rt_strspn(&f->ctx, 100, 200, 0xfffffff0u), -1);
	/* over the set (read after its first write), or over s */
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, 100, 200, 200 + 34), -1);
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, 100, 200, 200 + 32 + 3), 5);
	assert_int_equal(wasm_jit_rt_strspn(&f->ctx, 100, 200, 100 + 32), -1);
	same_but(f, 200 + 3, 32);
	/* ending exactly at the end of memory: allowed */
	assert_int_equal(wasm_jit_rt_strcspn(&f->ctx, 100, 200, MEM), 5);
	/* only what is read counts: strspn reads s[0] alone here (and then
	 * its set, written over the rest of s, is there) */
	assert_int_equal(wasm_jit_rt_strspn(&f->ctx, 100, 200, 100 + 33), 0);
	assert_int_equal(f->map[100], 'h');
	assert_int_equal(f->map[101], 0);
}

static void test_strspn_zeroes_the_set_first(void **state)
{
	struct fixture *f = *state;
	put(f, 100, "aaab");
	put(f, 200, "");
	put(f, 300, "a");
	put(f, 400, "ba");
	snap(f);
	/* an empty set: 0, the set zeroed; s need not be a string at all */
	assert_int_equal(wasm_jit_rt_strspn(&f->ctx, MEM - 3, 200, SP), 0);
	same_but(f, SP - 32, 32);
	for (uint32_t i = 0; i < 32; i++)
		assert_int_equal(f->map[SP - 32 + i], 0);
	/* one byte: counted, no bit set */
	memset(f->map + SP - 32, 0x77, 32);
	assert_int_equal(wasm_jit_rt_strspn(&f->ctx, 100, 300, SP), 3);
	for (uint32_t i = 0; i < 32; i++)
		assert_int_equal(f->map[SP - 32 + i], 0);
	/* more: the bits of 'b' (0x62) and 'a' (0x61), word 3 */
	assert_int_equal(wasm_jit_rt_strspn(&f->ctx, 100, 400, SP), 4);
	assert_int_equal(word(f, SP - 32 + 12), (1u << 1) | (1u << 2));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_strcspn_writes_the_set_musl_leaves, setup, teardown),
		cmocka_unit_test_setup_teardown(test_strcspn_of_one_byte_is_strchrnul_and_writes_nothing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_string_running_off_the_end_is_left_to_the_routine,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_out_of_memory_or_over_a_string_is_left_to_the_routine,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_strspn_zeroes_the_set_first, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
