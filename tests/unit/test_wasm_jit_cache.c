/* SPDX-License-Identifier: MIT */
/* Unit tests of the code cache's tier-up claims, bound and reader
 * (jit_cache.c), of tier-up's budget (jit_tierup.c), and of the large
 * module's buffers (core/io.c). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/io.h"
#include "kis/wasm.h"
#include "wasm/jit.h"
#include "wasm/jit_cache.h"
#include "wasm/jit_tierup.h"

/* a store root of our own, removed after each test */
static int setup(void **state)
{
	char *root = strdup("/tmp/kis-test-jit-cache.XXXXXX");
	if (!root || !mkdtemp(root))
		return -1;
	*state = root;
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", (char *)*state);
	free(*state);
	return system(cmd) == 0 ? 0 : -1;
}

static const uint8_t MOD[] = {0, 'a', 's', 'm', 1, 0, 0, 0, 0, 3, 1, 'x', 'y'};

static size_t files_in(const char *root, const char *suffix)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/cache/wasm-code", root);
	DIR *d = opendir(path);
	size_t n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name), sl = strlen(suffix);
		n += l > sl && !strcmp(de->d_name + l - sl, suffix);
	}
	if (d)
		closedir(d);
	return n;
}

/* The race of two first runs: the second claim of the same module, while
 * the first is held, says "running" (flock(2) locks conflict between open
 * files even within one process), and once given up it can be had again,
 * its file gone in between. */
static void test_claim_is_exclusive_until_given_up(void **state)
{
	const char *root = *state;
	char name[32];
	if (wasm_code_cache_name(MOD, sizeof(MOD), name) < 0)
		skip(); /* no compiler plugin to key by */
	int a = -1, b = -1;
	assert_int_equal(wasm_code_cache_claim(root, MOD, sizeof(MOD), &a), 0);
	assert_true(a >= 0);
	assert_int_equal(files_in(root, ".pending"), 1);
	/* the claim holds the module's bytes, for the compile to read */
	uint8_t buf[sizeof(MOD)];
	assert_int_equal(pread(a, buf, sizeof(buf), 0), (ssize_t)sizeof(MOD));
	assert_memory_equal(buf, MOD, sizeof(MOD));
	assert_int_equal(wasm_code_cache_claim(root, MOD, sizeof(MOD), &b), 1);
	assert_int_equal(b, -1);
	wasm_code_cache_unclaim(root, name, a);
	assert_int_equal(files_in(root, ".pending"), 0);
	assert_int_equal(wasm_code_cache_claim(root, MOD, sizeof(MOD), &b), 0);
	wasm_code_cache_unclaim(root, name, b);
}

/* A whole object is all a reader ever finds: the cache keeps what a put
 * wrote (its tier with it) and no temporary file. The object here is not
 * one our loader accepts, so the read is a miss by design. */
static void test_put_leaves_one_file_and_no_temporary(void **state)
{
	const char *root = *state;
	char name[32];
	if (wasm_code_cache_name(MOD, sizeof(MOD), name) < 0)
		skip();
	const uint8_t obj[] = {1, 2, 3, 4};
	assert_int_equal(wasm_code_cache_put_tier(root, MOD, sizeof(MOD), obj, sizeof(obj),
						  WASM_JIT_TIER_FAST), 0);
	assert_int_equal(wasm_code_cache_put_tier(root, MOD, sizeof(MOD), obj, sizeof(obj),
						  WASM_JIT_TIER_OPT), 0);
	assert_int_equal(files_in(root, ".o"), 1);
	assert_int_equal(files_in(root, ".tmp"), 0);
	uint8_t *o = NULL;
	size_t n = 0;
	unsigned tier = 9;
	assert_int_equal(wasm_code_cache_get_tier(root, MOD, sizeof(MOD), &o, &n, &tier), -1);
	assert_null(o);
}

/* The engine's reader that links (wasm_code_cache_get_linked): an entry
 * whose object the loader refuses is a miss, with nothing linked and
 * nothing left mapped for the caller, as the check-only reader's. A
 * module past a page puts the object at an offset the reader unmaps up
 * to. */
static void test_linked_read_of_a_refused_object_is_a_miss(void **state)
{
	const char *root = *state;
	char name[32];
	if (wasm_code_cache_name(MOD, sizeof(MOD), name) < 0)
		skip();
	size_t ml = 3 * 4096 + 100;
	uint8_t *mod = calloc(1, ml);
	assert_non_null(mod);
	memcpy(mod, MOD, sizeof(MOD));
	const uint8_t obj[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
	assert_int_equal(wasm_code_cache_put(root, mod, ml, obj, sizeof(obj)), 0);
	uint8_t *o = (uint8_t *)1;
	size_t n = 1;
	unsigned tier = 9;
	struct wasm_jit_module *pre = (struct wasm_jit_module *)1;
	assert_int_equal(wasm_code_cache_get_linked(root, mod, ml, &o, &n, &tier, &pre), -1);
	assert_null(o);
	assert_null(pre);
	assert_int_equal(n, 0);
	/* another module of the same length is a miss as well (compared) */
	mod[ml - 1] = 1;
	assert_int_equal(wasm_code_cache_get_linked(root, mod, ml, &o, &n, &tier, &pre), -1);
	free(mod);
}

/* An object the loader accepts (f0 and w0, each a ret), assembled by the
 * system's compiler driver; -1 without one. */
static int tiny_object(uint8_t **out, size_t *len)
{
	char dir[] = "/tmp/kis-jit-cache-obj.XXXXXX";
	if (!mkdtemp(dir))
		return -1;
	char src[64], obj[64], cmd[256];
	snprintf(src, sizeof(src), "%s/s.s", dir);
	snprintf(obj, sizeof(obj), "%s/s.o", dir);
	FILE *f = fopen(src, "w");
	int rc = -1;
	if (f) {
		fputs("\t.text\n\t.globl f0\n\t.type f0,@function\nf0:\n\tret\n"
		      "\t.globl w0\n\t.type w0,@function\nw0:\n\tret\n"
		      "\t.section .note.GNU-stack,\"\",@progbits\n", f);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "cc -c -o %s %s 2>/dev/null", obj, src);
		struct stat st;
		if (system(cmd) == 0 && stat(obj, &st) == 0 && (f = fopen(obj, "rb"))) {
			*out = malloc((size_t)st.st_size);
			if (*out && fread(*out, 1, (size_t)st.st_size, f) == (size_t)st.st_size) {
				*len = (size_t)st.st_size;
				rc = 0;
			}
			fclose(f);
		}
	}
	unlink(src);
	unlink(obj);
	rmdir(dir);
	return rc;
}

/* A hit of a large entry (a file of 700 KB and more, read into huge
 * pages, the slack past its end unmapped) gives the object's exact bytes,
 * linked; every shorter copy of the file, one
 * byte longer, and one whose module copy differs in its last byte, is a
 * miss with nothing handed out. */
static void test_large_entry_hits_and_its_damage_is_a_miss(void **state)
{
	const char *root = *state;
	char name[32];
	if (wasm_code_cache_name(MOD, sizeof(MOD), name) < 0)
		skip();
	uint8_t *obj = NULL;
	size_t ol = 0;
	if (tiny_object(&obj, &ol) < 0) {
		print_message("skipped: no system assembler (cc)\n");
		skip();
	}
	size_t ml = 700u << 10;
	uint8_t *mod = malloc(ml);
	assert_non_null(mod);
	for (size_t i = 0; i < ml; i++)
		mod[i] = (uint8_t)(i * 131 + 7);
	memcpy(mod, MOD, sizeof(MOD));
	assert_int_equal(wasm_code_cache_name(mod, ml, name), 0);
	assert_int_equal(wasm_code_cache_put(root, mod, ml, obj, ol), 0);
	uint8_t *o = NULL;
	size_t n = 0;
	unsigned tier = 9;
	struct wasm_jit_module *pre = NULL;
	assert_int_equal(wasm_code_cache_get_linked(root, mod, ml, &o, &n, &tier, &pre), 0);
	assert_non_null(pre);
	assert_int_equal(n, ol);
	assert_memory_equal(o, obj, ol);
	assert_int_equal(tier, WASM_JIT_TIER_OPT);
	wasm_jit_elf_free(pre);
	wasm_code_cache_free(o, n);
	/* the file, cut or lengthened or changed, in place of the entry */
	char path[512];
	snprintf(path, sizeof(path), "%s/cache/wasm-code/%s", root, name);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	size_t fl = (size_t)st.st_size;
	uint8_t *whole = malloc(fl + 1);
	assert_non_null(whole);
	assert_int_equal(fread(whole, 1, fl, f), fl);
	fclose(f);
	whole[fl] = 0;
	const size_t cuts[] = {fl - 1, fl - ol / 2, fl - ol, fl - ol - 9, ml / 2, 40, 7, 0, fl + 1};
	for (size_t k = 0; k <= sizeof(cuts) / sizeof(*cuts); k++) {
		size_t len = k < sizeof(cuts) / sizeof(*cuts) ? cuts[k] : fl;
		f = fopen(path, "wb");
		assert_non_null(f);
		if (k == sizeof(cuts) / sizeof(*cuts))
			whole[fl - ol - 9] ^= 1; /* the module copy's last byte */
		assert_int_equal(fwrite(whole, 1, len, f), len);
		fclose(f);
		o = (uint8_t *)1;
		pre = (struct wasm_jit_module *)1;
		assert_int_equal(wasm_code_cache_get_linked(root, mod, ml, &o, &n, &tier, &pre), -1);
		assert_null(o);
		assert_null(pre);
	}
	free(whole);
	free(mod);
	free(obj);
}

/* kis_map_populated (core/io.c), the large module's buffers: a small one
 * is exactly its length, a large one starts on a 2 MiB boundary and
 * covers whole 2 MiB, and all of it can be written and unmapped. */
static void test_large_buffers_are_whole_huge_pages(void **state)
{
	(void)state;
	size_t ml = 0;
	uint8_t *p = kis_map_populated(4096, &ml);
	assert_true(p != MAP_FAILED);
	assert_int_equal(ml, 4096);
	memset(p, 1, ml);
	assert_int_equal(munmap(p, ml), 0);
	size_t want = (1u << 20) + 12345;
	p = kis_map_populated(want, &ml);
	assert_true(p != MAP_FAILED);
	assert_int_equal((uintptr_t)p % (2u << 20), 0);
	assert_int_equal(ml, 2u << 20);
	memset(p, 2, ml);
	assert_int_equal(munmap(p, ml), 0);
}

/* The budget grows with the module and stops at its caps; the wall bound
 * is never below its floor. */
static void test_budget_grows_with_the_module_and_is_capped(void **state)
{
	(void)state;
	struct wasm_tierup_budget small, lua, huge;
	wasm_tierup_budget(140u << 10, &small);
	wasm_tierup_budget(635239, &lua);
	wasm_tierup_budget(256u << 20, &huge);
	assert_true(small.mem_bytes < lua.mem_bytes && lua.mem_bytes <= huge.mem_bytes);
	assert_true(lua.mem_bytes >= (256u << 20) && huge.mem_bytes == (2ull << 30));
	assert_true(small.cpu_s < lua.cpu_s && huge.cpu_s == 300);
	assert_true(small.wall_s >= 600 && lua.wall_s >= 10 * lua.cpu_s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_claim_is_exclusive_until_given_up, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_put_leaves_one_file_and_no_temporary, setup,
						teardown),
		cmocka_unit_test(test_budget_grows_with_the_module_and_is_capped),
		cmocka_unit_test_setup_teardown(test_linked_read_of_a_refused_object_is_a_miss, setup,
						teardown),
		cmocka_unit_test(test_large_buffers_are_whole_huge_pages),
		cmocka_unit_test_setup_teardown(test_large_entry_hits_and_its_damage_is_a_miss, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
