/* SPDX-License-Identifier: MIT */
/* Unit tests of the WASI layer: guest pointers checked against linear
 * memory, paths refused beneath the preopen, rights, prestat, proc_exit,
 * the descriptor table (closing and renumbering over the preopen). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "kis/wasm.h"
#include "wasm/wasi.h"

/* wat2wasm of:
 * (module
 *   (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
 *   (import "wasi_snapshot_preview1" "path_open" (func (param i32 i32 i32 i32 i32 i64 i64
 *                                                          i32 i32) (result i32)))
 *   (import "wasi_snapshot_preview1" "args_sizes_get" (func (param i32 i32) (result i32)))
 *   (import "wasi_snapshot_preview1" "fd_prestat_get" (func (param i32 i32) (result i32)))
 *   (import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))
 *   (import "wasi_snapshot_preview1" "fd_close" (func (param i32) (result i32)))
 *   (import "wasi_snapshot_preview1" "fd_renumber" (func (param i32 i32) (result i32)))
 *   (memory (export "memory") 1)
 *   ;; one export per import of the same name, passing its parameters through
 *   (func (export "_start") (call $exit (i32.const 7)) unreachable)) */
static const uint8_t mod_bytes[] = {
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x28, 0x06, 0x60,
  0x04, 0x7f, 0x7f, 0x7f, 0x7f, 0x01, 0x7f, 0x60, 0x09, 0x7f, 0x7f, 0x7f,
  0x7f, 0x7f, 0x7e, 0x7e, 0x7f, 0x7f, 0x01, 0x7f, 0x60, 0x02, 0x7f, 0x7f,
  0x01, 0x7f, 0x60, 0x01, 0x7f, 0x00, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x60,
  0x00, 0x00, 0x02, 0x80, 0x02, 0x07, 0x16, 0x77, 0x61, 0x73, 0x69, 0x5f,
  0x73, 0x6e, 0x61, 0x70, 0x73, 0x68, 0x6f, 0x74, 0x5f, 0x70, 0x72, 0x65,
  0x76, 0x69, 0x65, 0x77, 0x31, 0x08, 0x66, 0x64, 0x5f, 0x77, 0x72, 0x69,
  0x74, 0x65, 0x00, 0x00, 0x16, 0x77, 0x61, 0x73, 0x69, 0x5f, 0x73, 0x6e,
  0x61, 0x70, 0x73, 0x68, 0x6f, 0x74, 0x5f, 0x70, 0x72, 0x65, 0x76, 0x69,
  0x65, 0x77, 0x31, 0x09, 0x70, 0x61, 0x74, 0x68, 0x5f, 0x6f, 0x70, 0x65,
  0x6e, 0x00, 0x01, 0x16, 0x77, 0x61, 0x73, 0x69, 0x5f, 0x73, 0x6e, 0x61,
  0x70, 0x73, 0x68, 0x6f, 0x74, 0x5f, 0x70, 0x72, 0x65, 0x76, 0x69, 0x65,
  0x77, 0x31, 0x0e, 0x61, 0x72, 0x67, 0x73, 0x5f, 0x73, 0x69, 0x7a, 0x65,
  0x73, 0x5f, 0x67, 0x65, 0x74, 0x00, 0x02, 0x16, 0x77, 0x61, 0x73, 0x69,
  0x5f, 0x73, 0x6e, 0x61, 0x70, 0x73, 0x68, 0x6f, 0x74, 0x5f, 0x70, 0x72,
  0x65, 0x76, 0x69, 0x65, 0x77, 0x31, 0x0e, 0x66, 0x64, 0x5f, 0x70, 0x72,
  0x65, 0x73, 0x74, 0x61, 0x74, 0x5f, 0x67, 0x65, 0x74, 0x00, 0x02, 0x16,
  0x77, 0x61, 0x73, 0x69, 0x5f, 0x73, 0x6e, 0x61, 0x70, 0x73, 0x68, 0x6f,
  0x74, 0x5f, 0x70, 0x72, 0x65, 0x76, 0x69, 0x65, 0x77, 0x31, 0x09, 0x70,
  0x72, 0x6f, 0x63, 0x5f, 0x65, 0x78, 0x69, 0x74, 0x00, 0x03, 0x16, 0x77,
  0x61, 0x73, 0x69, 0x5f, 0x73, 0x6e, 0x61, 0x70, 0x73, 0x68, 0x6f, 0x74,
  0x5f, 0x70, 0x72, 0x65, 0x76, 0x69, 0x65, 0x77, 0x31, 0x08, 0x66, 0x64,
  0x5f, 0x63, 0x6c, 0x6f, 0x73, 0x65, 0x00, 0x04, 0x16, 0x77, 0x61, 0x73,
  0x69, 0x5f, 0x73, 0x6e, 0x61, 0x70, 0x73, 0x68, 0x6f, 0x74, 0x5f, 0x70,
  0x72, 0x65, 0x76, 0x69, 0x65, 0x77, 0x31, 0x0b, 0x66, 0x64, 0x5f, 0x72,
  0x65, 0x6e, 0x75, 0x6d, 0x62, 0x65, 0x72, 0x00, 0x02, 0x03, 0x08, 0x07,
  0x00, 0x01, 0x02, 0x02, 0x04, 0x02, 0x05, 0x05, 0x03, 0x01, 0x00, 0x01,
  0x07, 0x65, 0x08, 0x06, 0x6d, 0x65, 0x6d, 0x6f, 0x72, 0x79, 0x02, 0x00,
  0x08, 0x66, 0x64, 0x5f, 0x77, 0x72, 0x69, 0x74, 0x65, 0x00, 0x07, 0x09,
  0x70, 0x61, 0x74, 0x68, 0x5f, 0x6f, 0x70, 0x65, 0x6e, 0x00, 0x08, 0x0e,
  0x61, 0x72, 0x67, 0x73, 0x5f, 0x73, 0x69, 0x7a, 0x65, 0x73, 0x5f, 0x67,
  0x65, 0x74, 0x00, 0x09, 0x0e, 0x66, 0x64, 0x5f, 0x70, 0x72, 0x65, 0x73,
  0x74, 0x61, 0x74, 0x5f, 0x67, 0x65, 0x74, 0x00, 0x0a, 0x08, 0x66, 0x64,
  0x5f, 0x63, 0x6c, 0x6f, 0x73, 0x65, 0x00, 0x0b, 0x0b, 0x66, 0x64, 0x5f,
  0x72, 0x65, 0x6e, 0x75, 0x6d, 0x62, 0x65, 0x72, 0x00, 0x0c, 0x06, 0x5f,
  0x73, 0x74, 0x61, 0x72, 0x74, 0x00, 0x0d, 0x0a, 0x4f, 0x07, 0x0c, 0x00,
  0x20, 0x00, 0x20, 0x01, 0x20, 0x02, 0x20, 0x03, 0x10, 0x00, 0x0b, 0x16,
  0x00, 0x20, 0x00, 0x20, 0x01, 0x20, 0x02, 0x20, 0x03, 0x20, 0x04, 0x20,
  0x05, 0x20, 0x06, 0x20, 0x07, 0x20, 0x08, 0x10, 0x01, 0x0b, 0x08, 0x00,
  0x20, 0x00, 0x20, 0x01, 0x10, 0x02, 0x0b, 0x08, 0x00, 0x20, 0x00, 0x20,
  0x01, 0x10, 0x03, 0x0b, 0x06, 0x00, 0x20, 0x00, 0x10, 0x05, 0x0b, 0x08,
  0x00, 0x20, 0x00, 0x20, 0x01, 0x10, 0x06, 0x0b, 0x07, 0x00, 0x41, 0x07,
  0x10, 0x04, 0x00, 0x0b
};

#define W_BADF 8
#define W_FAULT 21
#define W_NOTCAPABLE 76
#define R_FD_READ (1ull << 1)
#define R_FD_WRITE (1ull << 6)

struct fx {
	char dir[64];
	int pipe[2];
	struct kis_wasi *w;
	struct kis_wasm_store *s;
	struct kis_wasm_module *m;
	struct kis_wasm_instance *inst;
	uint8_t *mem;
	uint64_t size;
};

static char *const test_argv[] = {"prog.wasm", "one", NULL};
static char *const test_env[] = {"A=b", NULL};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	strcpy(f->dir, "/tmp/kis-wasi-unit-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	assert_int_equal(pipe2(f->pipe, O_CLOEXEC), 0);
	struct kis_wasi_config cfg = {
		.argv = test_argv, .envp = test_env, .stdin_fd = -1, .stdout_fd = f->pipe[1],
		.stderr_fd = f->pipe[1], .preopen_fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
		.preopen_name = "/", .max_fds = 16,
	};
	assert_true(cfg.preopen_fd >= 0);
	f->w = kis_wasi_new(&cfg);
	f->s = kis_wasm_store_new();
	assert_non_null(f->w);
	assert_non_null(f->s);
	assert_int_equal(kis_wasm_module_load(mod_bytes, sizeof(mod_bytes), &f->m, NULL), 0);
	assert_int_equal(kis_wasi_bind(f->w, f->s), 0);
	enum kis_wasm_trap trap;
	assert_int_equal(kis_wasm_instantiate(f->s, f->m, kis_wasi_resolve, f->w, &f->inst, &trap,
					      NULL),
			 0);
	f->mem = kis_wasm_memory_data(kis_wasm_instance_memory(f->inst), &f->size);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	kis_wasm_store_free(f->s);
	kis_wasm_module_free(f->m);
	kis_wasi_free(f->w);
	close(f->pipe[0]);
	close(f->pipe[1]);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static uint32_t call(struct fx *f, const char *name, const kis_wasm_slot *args)
{
	struct kis_wasm_extern ex;
	assert_int_equal(kis_wasm_instance_export(f->inst, name, &ex), 0);
	kis_wasm_slot r = 0;
	assert_int_equal(kis_wasm_call(f->s, ex.u.func, args, &r), KIS_WASM_OK);
	return (uint32_t)r;
}

static void put32(struct fx *f, uint32_t at, uint32_t v)
{
	memcpy(f->mem + at, &v, 4);
}

static void test_resolve_only_preview1(void **state)
{
	struct fx *f = *state;
	struct kis_wasm_extern ex;
	assert_int_equal(kis_wasi_resolve(f->w, "wasi_snapshot_preview1", "fd_write",
					  KIS_WASM_EXTERN_FUNC, &ex), 0);
	assert_int_equal(kis_wasi_resolve(f->w, "wasi_unstable", "fd_write", KIS_WASM_EXTERN_FUNC,
					  &ex), -1);
	assert_int_equal(kis_wasi_resolve(f->w, "wasi_snapshot_preview1", "no_such",
					  KIS_WASM_EXTERN_FUNC, &ex), -1);
	assert_int_equal(kis_wasi_resolve(f->w, "wasi_snapshot_preview1", "fd_write",
					  KIS_WASM_EXTERN_MEMORY, &ex), -1);
}

static void test_fd_write_pointers(void **state)
{
	struct fx *f = *state;
	uint32_t end = (uint32_t)f->size;
	memcpy(f->mem + 100, "hi!", 3);
	put32(f, 16, 100); /* iovec {buf 100, len 3} at 16 */
	put32(f, 20, 3);
	kis_wasm_slot ok[] = {1, 16, 1, 40};
	assert_int_equal(call(f, "fd_write", ok), 0);
	char got[4] = {0};
	assert_int_equal(read(f->pipe[0], got, 3), 3);
	assert_string_equal(got, "hi!");
	uint32_t n;
	memcpy(&n, f->mem + 40, 4);
	assert_int_equal(n, 3);
	/* A buffer running one byte past the end. */
	put32(f, 16, end - 2);
	kis_wasm_slot buf_oob[] = {1, 16, 1, 40};
	assert_int_equal(call(f, "fd_write", buf_oob), W_FAULT);
	/* The iovec array past the end, or a count that wraps 32 bits. */
	kis_wasm_slot iovs_oob[] = {1, end - 4, 1, 40};
	assert_int_equal(call(f, "fd_write", iovs_oob), W_FAULT);
	kis_wasm_slot iovs_wrap[] = {1, 16, 0x20000001u, 40};
	assert_int_equal(call(f, "fd_write", iovs_wrap), W_FAULT);
	/* The result pointer straddling the end. */
	put32(f, 16, 100);
	kis_wasm_slot res_oob[] = {1, 16, 1, end - 3};
	assert_int_equal(call(f, "fd_write", res_oob), W_FAULT);
	kis_wasm_slot bad_fd[] = {9, 16, 1, 40};
	assert_int_equal(call(f, "fd_write", bad_fd), W_BADF);
}

static uint32_t open_at(struct fx *f, const char *path, uint64_t rights, uint32_t oflags)
{
	size_t l = strlen(path);
	memcpy(f->mem + 200, path, l);
	kis_wasm_slot a[] = {3, 0, 200, l, oflags, rights, 0, 0, 60};
	return call(f, "path_open", a);
}

static void test_paths_beneath(void **state)
{
	struct fx *f = *state;
	char p[128];
	snprintf(p, sizeof(p), "%s/in.txt", f->dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(open_at(f, "in.txt", R_FD_READ, 0), 0);
	assert_int_equal(open_at(f, "..", R_FD_READ, 0), W_NOTCAPABLE);
	assert_int_equal(open_at(f, "a/../../x", R_FD_READ, 0), 44 /* NOENT: a is missing */);
	assert_int_equal(open_at(f, "./../x", R_FD_READ, 0), W_NOTCAPABLE);
	assert_int_equal(open_at(f, "/etc/passwd", R_FD_READ, 0), W_NOTCAPABLE);
	snprintf(p, sizeof(p), "%s/out", f->dir);
	assert_int_equal(symlink("/etc/passwd", p), 0);
	assert_int_not_equal(open_at(f, "out", R_FD_READ, 0), 0); /* not followed: LOOP */
	kis_wasm_slot follow[] = {3, 1, 200, 3, 0, R_FD_READ, 0, 0, 60};
	memcpy(f->mem + 200, "out", 3);
	assert_int_equal(call(f, "path_open", follow), W_NOTCAPABLE);
	/* A path whose bytes lie past the end of memory. */
	kis_wasm_slot oob[] = {3, 0, f->size - 2, 8, 0, R_FD_READ, 0, 0, 60};
	assert_int_equal(call(f, "path_open", oob), W_FAULT);
}

static void test_rights_narrow(void **state)
{
	struct fx *f = *state;
	char p[128];
	snprintf(p, sizeof(p), "%s/r.txt", f->dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	close(fd);
	assert_int_equal(open_at(f, "r.txt", R_FD_READ, 0), 0);
	uint32_t nfd;
	memcpy(&nfd, f->mem + 60, 4);
	assert_true(nfd >= 4);
	put32(f, 16, 100);
	put32(f, 20, 1);
	kis_wasm_slot w[] = {nfd, 16, 1, 40};
	assert_int_equal(call(f, "fd_write", w), W_NOTCAPABLE);
	/* More than the preopen may hand down. */
	assert_int_equal(open_at(f, "r.txt", 1ull << 40, 0), W_NOTCAPABLE);
}

static void test_args_and_prestat(void **state)
{
	struct fx *f = *state;
	kis_wasm_slot a[] = {8, 12};
	assert_int_equal(call(f, "args_sizes_get", a), 0);
	uint32_t n, sz;
	memcpy(&n, f->mem + 8, 4);
	memcpy(&sz, f->mem + 12, 4);
	assert_int_equal(n, 2);
	assert_int_equal(sz, strlen("prog.wasm") + 1 + strlen("one") + 1);
	kis_wasm_slot edge[] = {f->size - 4, f->size - 8};
	assert_int_equal(call(f, "args_sizes_get", edge), 0);
	kis_wasm_slot past[] = {f->size - 3, 8};
	assert_int_equal(call(f, "args_sizes_get", past), W_FAULT);
	kis_wasm_slot pre[] = {3, 0};
	assert_int_equal(call(f, "fd_prestat_get", pre), 0);
	assert_int_equal(f->mem[0], 0);
	memcpy(&n, f->mem + 4, 4);
	assert_int_equal(n, 1); /* "/" */
	kis_wasm_slot none[] = {4, 0};
	assert_int_equal(call(f, "fd_prestat_get", none), W_BADF);
}

/* The table is the module's own (wasi-testsuite close_preopen,
 * overwrite_preopen): closing the preopen or renumbering over it works,
 * and only the module loses the capability. */
static void test_close_the_preopen(void **state)
{
	struct fx *f = *state;
	kis_wasm_slot pre[] = {3, 0}, c3[] = {3};
	assert_int_equal(call(f, "fd_close", c3), 0);
	assert_int_equal(call(f, "fd_prestat_get", pre), W_BADF);
	assert_int_equal(open_at(f, ".", 0, 2 /* oflags.directory */), W_BADF);
	assert_int_equal(call(f, "fd_close", c3), W_BADF);
}

static void test_renumber_over_the_preopen(void **state)
{
	struct fx *f = *state;
	/* a directory that may open in turn (rights.path_open) */
	assert_int_equal(open_at(f, ".", 1ull << 13, 2 /* oflags.directory */), 0);
	uint32_t nfd;
	memcpy(&nfd, f->mem + 60, 4);
	assert_int_equal(nfd, 4);
	kis_wasm_slot ren[] = {nfd, 3}, ren_closed[] = {nfd, 9};
	assert_int_equal(call(f, "fd_renumber", ren_closed), W_BADF); /* 9 is not open */
	assert_int_equal(call(f, "fd_renumber", ren), 0);
	kis_wasm_slot pre[] = {3, 0}, c3[] = {3}, c4[] = {4};
	assert_int_equal(call(f, "fd_prestat_get", pre), W_BADF); /* an opened dir now */
	assert_int_equal(call(f, "fd_close", c4), W_BADF);          /* it moved */
	assert_int_equal(open_at(f, ".", 0, 2), 0);                  /* through the new 3 */
	assert_int_equal(call(f, "fd_close", c3), 0);
	assert_int_equal(open_at(f, ".", 0, 2), W_BADF); /* no directory left at 3 */
}

static void test_proc_exit(void **state)
{
	(void)state;
	char *const argv[] = {"m", NULL};
	struct kis_wasi_config cfg = {.argv = argv, .envp = argv + 1, .stdin_fd = 0,
				      .stdout_fd = 1, .stderr_fd = 2, .preopen_fd = -1,
				      .max_fds = 8};
	struct kis_wasi *w = kis_wasi_new(&cfg);
	struct kis_wasm_store *s = kis_wasm_store_new();
	struct kis_wasi_outcome o;
	assert_int_equal(kis_wasi_run_module(w, s, mod_bytes, sizeof(mod_bytes), 0, &o), 0);
	assert_true(o.exited);
	assert_int_equal(o.exit_code, 7);
	kis_wasm_store_free(s);
	kis_wasi_free(w);
	/* Not a module at all. */
	w = kis_wasi_new(&cfg);
	s = kis_wasm_store_new();
	assert_int_equal(kis_wasi_run_module(w, s, (const uint8_t *)"\0asm\2\0\0\0", 8, 0, &o), -1);
	assert_true(o.message[0] != '\0');
	kis_wasm_store_free(s);
	kis_wasi_free(w);
	assert_false(kis_wasi_is_module((const uint8_t *)"\x7f" "ELF", 4));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_resolve_only_preview1, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fd_write_pointers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_paths_beneath, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rights_narrow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_args_and_prestat, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_the_preopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_renumber_over_the_preopen, setup, teardown),
		cmocka_unit_test(test_proc_exit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
