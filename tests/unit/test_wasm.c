/* SPDX-License-Identifier: MIT */
/* Unit tests of the WebAssembly runtime: LEB128 edge cases, rejection of
 * malformed input, running a small module, traps, interrupt and fuel. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kis/wasm.h"
#include "wasm/internal.h"

/* Made with wabt's wat2wasm from:
 * (module
 *   (import "host" "tick" (func $tick))
 *   (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add)
 *   (func (export "div") (param i32 i32) (result i32) local.get 0 local.get 1 i32.div_s)
 *   (func (export "spin") (loop $l call $tick br $l))
 *   (func $rec (export "rec") call $rec)
 *   (func (export "fib") (param i32) (result i32) ...recursive fib...)
 *   (memory (export "mem") 1)
 *   (func (export "load") (param i32) (result i32) local.get 0 i32.load)) */
/* Every test runs twice: interpreted, then compiled (the compiler's
 * round: each store made here compiles its instances). */
static bool compiled;

static struct kis_wasm_store *new_store(void)
{
	struct kis_wasm_store *s = kis_wasm_store_new();
	struct kis_error *err = NULL;
	if (s && compiled && kis_wasm_store_use_compiler(s, 1, &err) < 0) {
		print_error("compiler: %s\n", err ? err->message : "?");
		kis_error_free(err);
		kis_wasm_store_free(s);
		return NULL;
	}
	return s;
}

static const uint8_t test_module[] = {
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x0f, 0x03, 0x60,
  0x00, 0x00, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, 0x60, 0x01, 0x7f, 0x01,
  0x7f, 0x02, 0x0d, 0x01, 0x04, 0x68, 0x6f, 0x73, 0x74, 0x04, 0x74, 0x69,
  0x63, 0x6b, 0x00, 0x00, 0x03, 0x07, 0x06, 0x01, 0x01, 0x00, 0x00, 0x02,
  0x02, 0x05, 0x03, 0x01, 0x00, 0x01, 0x07, 0x2d, 0x07, 0x03, 0x61, 0x64,
  0x64, 0x00, 0x01, 0x03, 0x64, 0x69, 0x76, 0x00, 0x02, 0x04, 0x73, 0x70,
  0x69, 0x6e, 0x00, 0x03, 0x03, 0x72, 0x65, 0x63, 0x00, 0x04, 0x03, 0x66,
  0x69, 0x62, 0x00, 0x05, 0x03, 0x6d, 0x65, 0x6d, 0x02, 0x00, 0x04, 0x6c,
  0x6f, 0x61, 0x64, 0x00, 0x06, 0x0a, 0x45, 0x06, 0x07, 0x00, 0x20, 0x00,
  0x20, 0x01, 0x6a, 0x0b, 0x07, 0x00, 0x20, 0x00, 0x20, 0x01, 0x6d, 0x0b,
  0x09, 0x00, 0x03, 0x40, 0x10, 0x00, 0x0c, 0x00, 0x0b, 0x0b, 0x04, 0x00,
  0x10, 0x04, 0x0b, 0x1c, 0x00, 0x20, 0x00, 0x41, 0x02, 0x49, 0x04, 0x7f,
  0x20, 0x00, 0x05, 0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x05, 0x20, 0x00,
  0x41, 0x02, 0x6b, 0x10, 0x05, 0x6a, 0x0b, 0x0b, 0x07, 0x00, 0x20, 0x00,
  0x28, 0x02, 0x00, 0x0b
};

/* (module (func (export "loop") (loop br 0))): no calls, only a back-edge */
static const uint8_t bare_loop[] = {
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60,
	0x00, 0x00, 0x03, 0x02, 0x01, 0x00, 0x07, 0x08, 0x01, 0x04, 0x6c, 0x6f,
	0x6f, 0x70, 0x00, 0x00, 0x0a, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0c,
	0x00, 0x0b, 0x0b
};

/* (module (func (export "count") (param i32) (result i32) (local i32)
 *   (loop (local.set 1 (i32.add (local.get 1) (i32.const 1)))
 *     (br_if 0 (i32.lt_u (local.get 1) (local.get 0))))
 *   (local.get 1))) */
static const uint8_t count_loop[] = {
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x06, 0x01, 0x60,
	0x01, 0x7f, 0x01, 0x7f, 0x03, 0x02, 0x01, 0x00, 0x07, 0x09, 0x01, 0x05,
	0x63, 0x6f, 0x75, 0x6e, 0x74, 0x00, 0x00, 0x0a, 0x19, 0x01, 0x17, 0x01,
	0x01, 0x7f, 0x03, 0x40, 0x20, 0x01, 0x41, 0x01, 0x6a, 0x21, 0x01, 0x20,
	0x01, 0x20, 0x00, 0x49, 0x0d, 0x00, 0x0b, 0x20, 0x01, 0x0b
};

static void leb128(void **state)
{
	(void)state;
	struct {
		uint8_t bytes[12];
		size_t len;
		int ok;
		uint32_t value;
	} u[] = {
		{ { 0x00 }, 1, 0, 0 },
		{ { 0xe5, 0x8e, 0x26 }, 3, 0, 624485 },
		{ { 0xff, 0xff, 0xff, 0xff, 0x0f }, 5, 0, UINT32_MAX },
		{ { 0x80, 0x80, 0x80, 0x80, 0x00 }, 5, 0, 0 },        /* padded zero */
		{ { 0xff, 0xff, 0xff, 0xff, 0x1f }, 5, -1, 0 },       /* bits beyond 32 */
		{ { 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 }, 6, -1, 0 }, /* too long */
		{ { 0x80 }, 1, -1, 0 },                               /* truncated */
	};
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
		const uint8_t *p = u[i].bytes;
		uint32_t v = 0;
		int rc = wasm_read_u32(&p, u[i].bytes + u[i].len, &v);
		assert_int_equal(rc, u[i].ok);
		if (rc == 0) {
			assert_int_equal(v, u[i].value);
			assert_ptr_equal(p, u[i].bytes + u[i].len);
		}
	}

	const uint8_t neg1[] = { 0x7f };
	const uint8_t min32[] = { 0x80, 0x80, 0x80, 0x80, 0x78 };
	const uint8_t bad32[] = { 0x80, 0x80, 0x80, 0x80, 0x70 }; /* sign bits disagree */
	const uint8_t min64[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f };
	const uint8_t *p;
	int32_t s;
	int64_t l;
	p = neg1;
	assert_int_equal(wasm_read_s32(&p, neg1 + 1, &s), 0);
	assert_int_equal(s, -1);
	p = min32;
	assert_int_equal(wasm_read_s32(&p, min32 + 5, &s), 0);
	assert_int_equal(s, INT32_MIN);
	p = bad32;
	assert_int_equal(wasm_read_s32(&p, bad32 + 5, &s), -1);
	p = min64;
	assert_int_equal(wasm_read_s64(&p, min64 + 10, &l), 0);
	assert_true(l == INT64_MIN);
}

static void malformed_rejected(void **state)
{
	(void)state;
	struct kis_wasm_module *m = NULL;
	struct kis_error *err = NULL;
	const uint8_t bad_magic[] = { 0, 'a', 's', 'n', 1, 0, 0, 0 };
	assert_int_equal(kis_wasm_module_load(bad_magic, sizeof(bad_magic), &m, &err), -1);
	assert_non_null(err);
	assert_non_null(strstr(err->message, "magic header"));
	kis_error_free(err);
	err = NULL;

	/* every truncation of a valid module is refused, none crashes, except
	 * cuts at the three section boundaries that leave a valid module (after
	 * the header, the type section and the import section) */
	int accepted = 0;
	for (size_t n = 0; n < sizeof(test_module); n++) {
		if (kis_wasm_module_load(test_module, n, &m, &err) == 0) {
			kis_wasm_module_free(m);
			accepted++;
			continue;
		}
		assert_non_null(err);
		kis_error_free(err);
		err = NULL;
	}
	assert_int_equal(accepted, 3);
}

struct fixture {
	struct kis_wasm_module *m;
	struct kis_wasm_store *s;
	struct kis_wasm_instance *inst;
	int ticks, stop_after;
	struct kis_wasm_func *nested; /* called by each tick, when set */
	enum kis_wasm_trap nested_trap[4];
};

static enum kis_wasm_trap tick(void *user, struct kis_wasm_instance *caller,
			       const kis_wasm_slot *args, kis_wasm_slot *results)
{
	struct fixture *f = user;
	if (f->nested && f->ticks < 4)
		f->nested_trap[f->ticks] = kis_wasm_call(f->s, f->nested, NULL, NULL);
	if (++f->ticks == f->stop_after)
		kis_wasm_interrupt(f->s);
	return KIS_WASM_OK;
}



static int resolve(void *user, const char *module, const char *name,
		   enum kis_wasm_extern_kind kind, struct kis_wasm_extern *out)
{
	struct fixture *f = user;
	if (strcmp(module, "host") || strcmp(name, "tick"))
		return -1;
	out->kind = KIS_WASM_EXTERN_FUNC;
	out->u.func = kis_wasm_host_func_new(f->s, NULL, 0, NULL, 0, tick, f);
	return out->u.func ? 0 : -1;
}

static int setup(void **state)
{
	static struct fixture f;
	memset(&f, 0, sizeof(f));
	struct kis_error *err = NULL;
	if (kis_wasm_module_load(test_module, sizeof(test_module), &f.m, &err) < 0)
		return -1;
	f.s = new_store();
	enum kis_wasm_trap trap;
	if (!f.s || kis_wasm_instantiate(f.s, f.m, resolve, &f, &f.inst, &trap, &err) < 0) {
		print_error("instantiate: %s\n", err ? err->message : "no store");
		kis_error_free(err);
		return -1;
	}

	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	kis_wasm_store_free(f->s);
	kis_wasm_module_free(f->m);
	return 0;
}

static struct kis_wasm_func *export_func(struct fixture *f, const char *name)
{
	struct kis_wasm_extern e;
	assert_int_equal(kis_wasm_instance_export(f->inst, name, &e), 0);
	assert_int_equal(e.kind, KIS_WASM_EXTERN_FUNC);
	return e.u.func;
}

static void runs_small_module(void **state)
{
	struct fixture *f = *state;
	kis_wasm_slot args[2] = { 40, 2 }, res[1] = { 0 };
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "add"), args, res), KIS_WASM_OK);
	assert_int_equal(res[0], 42);
	args[0] = 20;
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "fib"), args, res), KIS_WASM_OK);
	assert_int_equal(res[0], 6765);
	/* i32 wraps and stays zero-extended in its slot */
	args[0] = UINT32_MAX;
	args[1] = 2;
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "add"), args, res), KIS_WASM_OK);
	assert_int_equal(res[0], 1);
}

static void traps_are_named(void **state)
{
	struct fixture *f = *state;
	kis_wasm_slot args[2] = { 1, 0 }, res[1];
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "div"), args, res), KIS_WASM_TRAP_DIV_ZERO);
	args[0] = 0x80000000u;
	args[1] = UINT32_MAX;
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "div"), args, res),
			 KIS_WASM_TRAP_INT_OVERFLOW);
	args[0] = 65533; /* a 4-byte load that ends past the 64 KiB page */
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "load"), args, res),
			 KIS_WASM_TRAP_MEMORY_OOB);
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "rec"), NULL, NULL),
			 KIS_WASM_TRAP_STACK_EXHAUSTED);
	assert_string_equal(kis_wasm_trap_message(KIS_WASM_TRAP_STACK_EXHAUSTED), "call stack exhausted");
	/* the store is usable after a trap */
	args[0] = 65532;
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "load"), args, res), KIS_WASM_OK);
}

static void interrupt_stops_loop(void **state)
{
	struct fixture *f = *state;
	f->ticks = 0;
	f->stop_after = 1000;
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "spin"), NULL, NULL),
			 KIS_WASM_TRAP_INTERRUPTED);
	assert_int_equal(f->ticks, 1000);
}

static void fuel_stops_loop(void **state)
{
	struct fixture *f = *state;
	f->ticks = 0;
	f->stop_after = -1;
	kis_wasm_set_fuel(f->s, 5000);
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "spin"), NULL, NULL),
			 KIS_WASM_TRAP_OUT_OF_FUEL);
	assert_true(f->ticks > 1000 && f->ticks < 5000);
	kis_wasm_set_fuel(f->s, -1);
}

/* A function's entry checks the stack's depth and takes its tick in one
 * compare in compiled code (jit.h, the tick word): fuel still counts one
 * per call, exactly as the interpreter counts (fib(10) calls fib 177
 * times), and with a budget set, which fails every entry's compare, a
 * runaway recursion is still the exhaustion trap, not a fault. */
static void fuel_counts_calls_and_stack_still_checked(void **state)
{
	struct fixture *f = *state;
	kis_wasm_slot args[2] = { 10, 0 }, res[1] = { 0 };
	kis_wasm_set_fuel(f->s, 1000);
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "fib"), args, res), KIS_WASM_OK);
	assert_int_equal(res[0], 55);
	assert_int_equal(kis_wasm_fuel_left(f->s), 1000 - 177);
	kis_wasm_set_fuel(f->s, 177);
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "fib"), args, res), KIS_WASM_OK);
	assert_int_equal(kis_wasm_fuel_left(f->s), 0);
	kis_wasm_set_fuel(f->s, 176);
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "fib"), args, res),
			 KIS_WASM_TRAP_OUT_OF_FUEL);
	kis_wasm_set_fuel(f->s, INT64_MAX / 2);
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "rec"), NULL, NULL),
			 KIS_WASM_TRAP_STACK_EXHAUSTED);
	/* no budget: the word is the limit alone again, and both still work */
	kis_wasm_set_fuel(f->s, -1);
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "rec"), NULL, NULL),
			 KIS_WASM_TRAP_STACK_EXHAUSTED);
	args[0] = 20;
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "fib"), args, res), KIS_WASM_OK);
	assert_int_equal(res[0], 6765);
	assert_int_equal(kis_wasm_fuel_left(f->s), -1);
}

/* A host function called from wasm enters wasm again, and that nested run
 * recurses until the stack is spent (compiled, "rec" calls nothing out of
 * compiled code and checks no limit: the guard's fault is its trap,
 * jit.h): each nested run ends in the exhaustion trap, the host function
 * returns, and the outer run goes on to its own end (here the interrupt
 * the third tick asks for); the store then runs again as new. */
static void nested_run_spends_the_stack_and_the_outer_goes_on(void **state)
{
	struct fixture *f = *state;
	f->nested = export_func(f, "rec");
	f->stop_after = 3;
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "spin"), NULL, NULL),
			 KIS_WASM_TRAP_INTERRUPTED);
	assert_int_equal(f->ticks, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(f->nested_trap[i], KIS_WASM_TRAP_STACK_EXHAUSTED);
	f->nested = NULL;
	kis_wasm_slot args[2] = { 20, 0 }, res[1] = { 0 };
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "fib"), args, res), KIS_WASM_OK);
	assert_int_equal(res[0], 6765);
	assert_int_equal(kis_wasm_call(f->s, export_func(f, "rec"), NULL, NULL),
			 KIS_WASM_TRAP_STACK_EXHAUSTED);
}

static void *interrupt_later(void *arg)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	kis_wasm_interrupt(arg);
	return NULL;
}

/* What the tier does to cancel a run: another thread sets the flag while
 * the guest spins in a loop that calls nothing. */
static void interrupt_from_thread(void **state)
{
	(void)state;
	struct kis_wasm_module *m = NULL;
	struct kis_error *err = NULL;
	assert_int_equal(kis_wasm_module_load(bare_loop, sizeof(bare_loop), &m, &err), 0);
	struct kis_wasm_store *s = new_store();
	struct kis_wasm_instance *inst;
	enum kis_wasm_trap trap;
	assert_int_equal(kis_wasm_instantiate(s, m, NULL, NULL, &inst, &trap, &err), 0);
	struct kis_wasm_extern e;
	assert_int_equal(kis_wasm_instance_export(inst, "loop", &e), 0);

	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, interrupt_later, s), 0);
	assert_int_equal(kis_wasm_call(s, e.u.func, NULL, NULL), KIS_WASM_TRAP_INTERRUPTED);
	pthread_join(t, NULL);

	kis_wasm_set_fuel(s, 1000);
	assert_int_equal(kis_wasm_call(s, e.u.func, NULL, NULL), KIS_WASM_TRAP_OUT_OF_FUEL);
	assert_int_equal(kis_wasm_fuel_left(s), 0);
	kis_wasm_store_free(s);
	kis_wasm_module_free(m);
}

/* Fuel is one unit per call and per loop iteration, whether the check runs
 * at the loop header (entry) or on the back-edge (exec.c WASM_LOOP_EDGE):
 * a call that loops n times needs exactly n + 1. */
static void fuel_counts_iterations(void **state)
{
	(void)state;
	struct kis_wasm_module *m = NULL;
	struct kis_error *err = NULL;
	assert_int_equal(kis_wasm_module_load(count_loop, sizeof(count_loop), &m, &err), 0);
	struct kis_wasm_store *s = new_store();
	assert_non_null(s);
	struct kis_wasm_instance *inst;
	enum kis_wasm_trap trap;
	assert_int_equal(kis_wasm_instantiate(s, m, NULL, NULL, &inst, &trap, &err), 0);
	struct kis_wasm_extern e;
	assert_int_equal(kis_wasm_instance_export(inst, "count", &e), 0);
	kis_wasm_slot args[1] = { 100 }, res[1] = { 0 };

	kis_wasm_set_fuel(s, 101);
	assert_int_equal(kis_wasm_call(s, e.u.func, args, res), KIS_WASM_OK);
	assert_int_equal(res[0], 100);
	assert_int_equal(kis_wasm_fuel_left(s), 0);

	kis_wasm_set_fuel(s, 100);
	assert_int_equal(kis_wasm_call(s, e.u.func, args, res), KIS_WASM_TRAP_OUT_OF_FUEL);
	assert_int_equal(kis_wasm_fuel_left(s), 0);

	kis_wasm_set_fuel(s, 150);
	assert_int_equal(kis_wasm_call(s, e.u.func, args, res), KIS_WASM_OK);
	assert_int_equal(kis_wasm_fuel_left(s), 49);

	kis_wasm_set_fuel(s, -1);
	assert_int_equal(kis_wasm_call(s, e.u.func, args, res), KIS_WASM_OK);
	assert_int_equal(kis_wasm_fuel_left(s), -1);
	kis_wasm_store_free(s);
	kis_wasm_module_free(m);
}

/* (module (memory (export "m") 1) (func (export "grow") (param i32) (result i32)
 *   (memory.grow (local.get 0)))) */
static const uint8_t grow_module[] = {
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x06, 0x01, 0x60,
	0x01, 0x7f, 0x01, 0x7f, 0x03, 0x02, 0x01, 0x00, 0x05, 0x03, 0x01, 0x00,
	0x01, 0x07, 0x0c, 0x02, 0x01, 0x6d, 0x02, 0x00, 0x04, 0x67, 0x72, 0x6f,
	0x77, 0x00, 0x00, 0x0a, 0x08, 0x01, 0x06, 0x00, 0x20, 0x00, 0x40, 0x00,
	0x0b
};

static void memory_limit(void **state)
{
	(void)state;
	struct kis_wasm_module *m = NULL;
	struct kis_error *err = NULL;
	assert_int_equal(kis_wasm_module_load(grow_module, sizeof(grow_module), &m, &err), 0);
	struct kis_wasm_store *s = new_store();
	kis_wasm_set_memory_limit(s, 4);
	struct kis_wasm_instance *inst;
	enum kis_wasm_trap trap;
	assert_int_equal(kis_wasm_instantiate(s, m, NULL, NULL, &inst, &trap, &err), 0);
	struct kis_wasm_extern e;
	assert_int_equal(kis_wasm_instance_export(inst, "grow", &e), 0);
	kis_wasm_slot arg = 3, res = 0;
	assert_int_equal(kis_wasm_call(s, e.u.func, &arg, &res), KIS_WASM_OK);
	assert_int_equal(res, 1); /* old size: now 4 pages, the limit */
	arg = 1;
	assert_int_equal(kis_wasm_call(s, e.u.func, &arg, &res), KIS_WASM_OK);
	assert_int_equal((uint32_t)res, UINT32_MAX); /* -1: refused */
	uint64_t size;
	kis_wasm_memory_data(kis_wasm_instance_memory(inst), &size);
	assert_int_equal(size, 4 * 65536);

	kis_wasm_set_memory_limit(s, 0); /* a new instance cannot even start */
	assert_int_equal(kis_wasm_instantiate(s, m, NULL, NULL, &inst, &trap, &err), -1);
	assert_int_equal(trap, KIS_WASM_OK);
	kis_error_free(err);
	kis_wasm_store_free(s);
	kis_wasm_module_free(m);
}

/* A v128 through every boundary (made with wat2wasm):
 * (module
 *   (import "host" "swap" (func $swap (param v128) (result v128)))
 *   (global $g (export "g") (mut v128) (v128.const i32x4 1 2 3 4))
 *   (func $mix (param $a i32) (param $v v128) (param $b i32) (result v128 i32)
 *     (local $x i64) (local $w v128) (local $y i32)
 *     (local.set $w (i32x4.add (local.get $v) (i32x4.splat (local.get $a))))
 *     (local.set $y (local.get $b))
 *     (block (result v128) (i32.const 7) (local.get $w) (br 0))
 *     (local.get $y))
 *   (func (export "f") (param v128 i32) (result v128 i32)
 *     (call $mix (local.get 1) (local.get 0) (i32.const 5)))
 *   (func (export "roundtrip") (param v128) (result v128)
 *     (global.set $g (call $swap (local.get 0)))
 *     (global.get $g))) */
static const uint8_t v128_module[] = {
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x15, 0x03, 0x60,
	0x01, 0x7b, 0x01, 0x7b, 0x60, 0x03, 0x7f, 0x7b, 0x7f, 0x02, 0x7b, 0x7f,
	0x60, 0x02, 0x7b, 0x7f, 0x02, 0x7b, 0x7f, 0x02, 0x0d, 0x01, 0x04, 0x68,
	0x6f, 0x73, 0x74, 0x04, 0x73, 0x77, 0x61, 0x70, 0x00, 0x00, 0x03, 0x04,
	0x03, 0x01, 0x02, 0x00, 0x06, 0x16, 0x01, 0x7b, 0x01, 0xfd, 0x0c, 0x01,
	0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x04,
	0x00, 0x00, 0x00, 0x0b, 0x07, 0x15, 0x03, 0x01, 0x67, 0x03, 0x00, 0x01,
	0x66, 0x00, 0x02, 0x09, 0x72, 0x6f, 0x75, 0x6e, 0x64, 0x74, 0x72, 0x69,
	0x70, 0x00, 0x03, 0x0a, 0x3a, 0x03, 0x22, 0x03, 0x01, 0x7e, 0x01, 0x7b,
	0x01, 0x7f, 0x20, 0x01, 0x20, 0x00, 0xfd, 0x11, 0xfd, 0xae, 0x01, 0x21,
	0x04, 0x20, 0x02, 0x21, 0x05, 0x02, 0x7b, 0x41, 0x07, 0x20, 0x04, 0x0c,
	0x00, 0x0b, 0x20, 0x05, 0x0b, 0x0a, 0x00, 0x20, 0x01, 0x20, 0x00, 0x41,
	0x05, 0x10, 0x01, 0x0b, 0x0a, 0x00, 0x20, 0x00, 0x10, 0x00, 0x24, 0x00,
	0x23, 0x00, 0x0b
};

/* host "swap": the two halves of its v128 exchanged */
static enum kis_wasm_trap swap_halves(void *user, struct kis_wasm_instance *caller,
				      const kis_wasm_slot *args, kis_wasm_slot *results)
{
	(void)user;
	(void)caller;
	results[0] = args[1];
	results[1] = args[0];
	return KIS_WASM_OK;
}

static int resolve_swap(void *user, const char *module, const char *name,
			enum kis_wasm_extern_kind kind, struct kis_wasm_extern *out)
{
	(void)module;
	(void)name;
	out->kind = kind;
	out->u.func = user;
	return 0;
}

/* v128 values take two slots at the interface, in calls between wasm
 * functions (mixed with i32 params and locals), in a branch that drops an
 * operand below, in a host call and in a global. */
/* A module loaded for cached machine code (wasm_module_load_for_cache)
 * has its bodies validated later: an interpreting store validates them at
 * instantiation and refuses an invalid one with the validator's message,
 * as kis_wasm_module_load does at once. */
static void deferred_bodies_validated_before_use(void **state)
{
	(void)state;
	/* () -> i32 whose body leaves an i64: type mismatch (spec 3.3) */
	static const uint8_t bad_body[] = { 0, 'a', 's', 'm', 1, 0, 0, 0,
					    1, 5, 1, 0x60, 0, 1, 0x7f,
					    3, 2, 1, 0,
					    10, 6, 1, 4, 0, 0x42, 0, 0x0b };
	struct kis_wasm_module *m = NULL;
	struct kis_error *err = NULL;
	assert_int_equal(kis_wasm_module_load(bad_body, sizeof(bad_body), &m, &err), -1);
	assert_non_null(err);
	char eager[256];
	snprintf(eager, sizeof(eager), "%s", err->message);
	kis_error_free(err);
	err = NULL;

	assert_int_equal(wasm_module_load_for_cache(bad_body, sizeof(bad_body), &m, &err), 0);
	assert_true(m->bodies_deferred);
	struct kis_wasm_store *s = new_store();
	assert_non_null(s);
	struct kis_wasm_instance *inst = NULL;
	enum kis_wasm_trap trap = KIS_WASM_OK;
	assert_int_equal(kis_wasm_instantiate(s, m, NULL, NULL, &inst, &trap, &err), -1);
	assert_non_null(err);
	assert_string_equal(err->message, eager);
	kis_error_free(err);
	err = NULL;
	kis_wasm_store_free(s);
	kis_wasm_module_free(m);

	/* a valid one: translated at instantiation, then it runs */
	assert_int_equal(wasm_module_load_for_cache(count_loop, sizeof(count_loop), &m, &err), 0);
	assert_true(m->bodies_deferred);
	s = new_store();
	assert_non_null(s);
	assert_int_equal(kis_wasm_instantiate(s, m, NULL, NULL, &inst, &trap, &err), 0);
	assert_false(m->bodies_deferred);
	kis_wasm_store_free(s);
	kis_wasm_module_free(m);
}

static void v128_boundaries(void **state)
{
	(void)state;
	struct kis_wasm_module *m = NULL;
	struct kis_error *err = NULL;
	assert_int_equal(kis_wasm_module_load(v128_module, sizeof(v128_module), &m, &err), 0);
	struct kis_wasm_store *s = new_store();
	assert_non_null(s);
	const uint8_t v = KIS_WASM_V128;
	struct kis_wasm_func *swap = kis_wasm_host_func_new(s, &v, 1, &v, 1, swap_halves, NULL);
	assert_non_null(swap);
	struct kis_wasm_instance *inst;
	enum kis_wasm_trap trap;
	assert_int_equal(kis_wasm_instantiate(s, m, resolve_swap, swap, &inst, &trap, &err), 0);

	struct kis_wasm_extern g, f, rt;
	assert_int_equal(kis_wasm_instance_export(inst, "g", &g), 0);
	kis_wasm_slot gv[2];
	kis_wasm_global_get_v128(g.u.global, gv);
	assert_true(gv[0] == (1ull | 2ull << 32) && gv[1] == (3ull | 4ull << 32));

	/* f(v, 10) = (v + splat(10), 5) as i32x4 */
	assert_int_equal(kis_wasm_instance_export(inst, "f", &f), 0);
	kis_wasm_slot args[3] = { 1ull | 2ull << 32, 3ull | 0xffffffffull << 32, 10 };
	kis_wasm_slot res[3] = { 0 };
	assert_int_equal(kis_wasm_call(s, f.u.func, args, res), KIS_WASM_OK);
	assert_true(res[0] == (11ull | 12ull << 32));
	assert_true(res[1] == (13ull | 9ull << 32)); /* the lane wraps */
	assert_int_equal(res[2], 5);

	assert_int_equal(kis_wasm_instance_export(inst, "roundtrip", &rt), 0);
	kis_wasm_slot in[2] = { 0x1111, 0x2222 }, out[2] = { 0 };
	assert_int_equal(kis_wasm_call(s, rt.u.func, in, out), KIS_WASM_OK);
	assert_true(out[0] == 0x2222 && out[1] == 0x1111);
	kis_wasm_global_get_v128(g.u.global, gv);
	assert_true(gv[0] == 0x2222 && gv[1] == 0x1111);
	kis_wasm_store_free(s);
	kis_wasm_module_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(leb128),
		cmocka_unit_test(malformed_rejected),
		cmocka_unit_test_setup_teardown(runs_small_module, setup, teardown),
		cmocka_unit_test_setup_teardown(traps_are_named, setup, teardown),
		cmocka_unit_test_setup_teardown(interrupt_stops_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(fuel_stops_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(fuel_counts_calls_and_stack_still_checked, setup,
						teardown),
		cmocka_unit_test_setup_teardown(nested_run_spends_the_stack_and_the_outer_goes_on,
						setup, teardown),
		cmocka_unit_test(interrupt_from_thread),
		cmocka_unit_test(fuel_counts_iterations),
		cmocka_unit_test(memory_limit),
		cmocka_unit_test(v128_boundaries),
		cmocka_unit_test(deferred_bodies_validated_before_use),
	};
	int failed = cmocka_run_group_tests_name("interpreter", tests, NULL, NULL);
#if defined(__SANITIZE_ADDRESS__)
	/* ASan does not follow compiled code onto its own stack (jit_rt.c
	 * switches stacks): the compiled round runs in the plain build */
	return failed;
#else
	if (!kis_wasm_compiler_available()) {
		printf("compiled round: skipped, no compiler plugin (libkis-jit.so)\n");
		return failed;
	}
	compiled = true;
	return failed + cmocka_run_group_tests_name("compiler", tests, NULL, NULL);
#endif
}
