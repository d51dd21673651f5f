/* SPDX-License-Identifier: MIT */
/* kis/wasm.h: the public interface of the project's WebAssembly 2.0 runtime:
 * load and validate a module, instantiate it in a store, call exports. */
#ifndef KIS_WASM_H
#define KIS_WASM_H

#include <stddef.h>
#include <stdint.h>

#include "kis/error.h"

/* Value types, numbered as in the binary format (spec 5.3.1). */
enum kis_wasm_valtype {
	KIS_WASM_I32 = 0x7f,
	KIS_WASM_I64 = 0x7e,
	KIS_WASM_F32 = 0x7d,
	KIS_WASM_F64 = 0x7c,
	KIS_WASM_V128 = 0x7b,
	KIS_WASM_FUNCREF = 0x70,
	KIS_WASM_EXTERNREF = 0x6f,
};

/* Kinds of imports and exports (spec 2.5.10), numbered as in the binary. */
enum kis_wasm_extern_kind {
	KIS_WASM_EXTERN_FUNC = 0,
	KIS_WASM_EXTERN_TABLE = 1,
	KIS_WASM_EXTERN_MEMORY = 2,
	KIS_WASM_EXTERN_GLOBAL = 3,
};

/* Why a run stopped. Stable: only append. kis_wasm_trap_message() gives the
 * text the specification's test suite uses for each. */
enum kis_wasm_trap {
	KIS_WASM_OK = 0,
	KIS_WASM_TRAP_UNREACHABLE,
	KIS_WASM_TRAP_MEMORY_OOB,
	KIS_WASM_TRAP_TABLE_OOB,
	KIS_WASM_TRAP_DIV_ZERO,
	KIS_WASM_TRAP_INT_OVERFLOW,
	KIS_WASM_TRAP_INVALID_CONVERSION,
	KIS_WASM_TRAP_UNDEFINED_ELEMENT,
	KIS_WASM_TRAP_UNINITIALIZED_ELEMENT,
	KIS_WASM_TRAP_INDIRECT_CALL_MISMATCH,
	KIS_WASM_TRAP_STACK_EXHAUSTED,
	KIS_WASM_TRAP_INTERRUPTED,  /* kis_wasm_interrupt() was called */
	KIS_WASM_TRAP_OUT_OF_FUEL,  /* the budget of kis_wasm_set_fuel() ran out */
	KIS_WASM_TRAP_HOST,         /* a host function asked to stop */
	KIS_WASM_TRAP__COUNT
};

/* Values cross the interface as raw 64-bit slots: i32 zero-extended, f32 as
 * its bit pattern in the low half, i64/f64 as their bits, funcref as an
 * opaque handle (0 is null), externref as the host's own 64-bit value (0 is
 * null, so a host should not use 0 for a non-null reference). A v128 takes
 * two consecutive slots, its low 64 bits (lanes 0..) first; so an array of
 * arguments or results holds one slot per value, two per v128. */
typedef uint64_t kis_wasm_slot;

struct kis_wasm_module;   /* decoded, validated and translated; immutable */
struct kis_wasm_store;    /* owns every instance and runtime object */
struct kis_wasm_instance;
struct kis_wasm_func;
struct kis_wasm_table;
struct kis_wasm_memory;
struct kis_wasm_global;

struct kis_wasm_extern {
	enum kis_wasm_extern_kind kind;
	union {
		struct kis_wasm_func *func;
		struct kis_wasm_table *table;
		struct kis_wasm_memory *memory;
		struct kis_wasm_global *global;
	} u;
};

/* A host function. `caller` is the instance whose code made the call (NULL
 * when called through kis_wasm_call), so a WASI layer can reach its memory.
 * args and results are separate arrays. Return KIS_WASM_OK or a trap. */
typedef enum kis_wasm_trap (*kis_wasm_host_fn)(void *user, struct kis_wasm_instance *caller,
					       const kis_wasm_slot *args, kis_wasm_slot *results);

/* Import resolution during instantiation: fill *out for (module, name) and
 * return 0, or return -1 when nothing of that name is provided. The kind and
 * type are checked by the runtime (spec 4.5.4, "incompatible import type"). */
typedef int (*kis_wasm_resolve_fn)(void *user, const char *module, const char *name,
				   enum kis_wasm_extern_kind kind, struct kis_wasm_extern *out);

KIS_API const char *kis_wasm_trap_message(enum kis_wasm_trap trap);

/* Decode, validate and translate a binary module. Fails with
 * KIS_E_INVALID_ARGUMENT and a message that starts with "malformed" or
 * "invalid" (spec chapters 5 and 3). `bytes` need not outlive the call. */
KIS_API int kis_wasm_module_load(const uint8_t *bytes, size_t len, struct kis_wasm_module **out,
				 struct kis_error **err);
KIS_API void kis_wasm_module_free(struct kis_wasm_module *m);
KIS_API size_t kis_wasm_module_import_count(const struct kis_wasm_module *m);
KIS_API int kis_wasm_module_import(const struct kis_wasm_module *m, size_t i, const char **module,
				   const char **name, enum kis_wasm_extern_kind *kind);

/* A store holds the runtime objects and the execution stack. Not thread
 * safe, except kis_wasm_interrupt(). The module must outlive the store's
 * instances of it. */
KIS_API struct kis_wasm_store *kis_wasm_store_new(void);
KIS_API void kis_wasm_store_free(struct kis_wasm_store *s);
/* Ask the running code to stop at the next loop back-edge or call; safe from
 * a signal handler or another thread. Cleared when the next call starts. */
KIS_API void kis_wasm_interrupt(struct kis_wasm_store *s);
/* Budget of loop iterations plus calls for each following kis_wasm_call
 * (a negative value means unlimited, the default). */
KIS_API void kis_wasm_set_fuel(struct kis_wasm_store *s, int64_t fuel);
KIS_API int64_t kis_wasm_fuel_left(const struct kis_wasm_store *s);
/* The compiler (wasm.engine compiler): 1 when this build has it (its
 * plugin is installed; loading it may still fail, and says why). kis_wasm_store_use_compiler(s, 1) makes every instance created in s
 * from then on run as machine code (the module is compiled at its first
 * such instantiation, which fails, naming it, on what the compiler does not
 * handle yet); 0 goes back to the interpreter for later instances. */
KIS_API int kis_wasm_compiler_available(void);
/* Load the compiler now (a plugin, libkis-jit.so, and LLVM): a caller
 * that confines its file access later loads it first. Idempotent. */
KIS_API int kis_wasm_compiler_load(struct kis_error **err);
/* on: KIS_WASM_INTERPRET (0), KIS_WASM_COMPILE (1), or
 * KIS_WASM_COMPILE_OR_INTERPRET (2): compile where the compiler starts and
 * takes the module, and run interpreted where not (wasm.engine auto). */
enum { KIS_WASM_INTERPRET, KIS_WASM_COMPILE, KIS_WASM_COMPILE_OR_INTERPRET };
KIS_API int kis_wasm_store_use_compiler(struct kis_wasm_store *s, int on, struct kis_error **err);
/* wasm.engine auto in the wasm tier: a module with no compiled code in the
 * store's cache is compiled on its first run only up to this size (LLVM at
 * -O1 takes ~8 ms per KiB here: 1 s); a larger one runs interpreted until
 * a run with wasm.engine compiler fills the cache. */
#define KIS_WASM_AUTO_COMPILE_MAX (128u << 10)
/* fn runs each time a module's machine code has been made and mapped
 * (read-execute) in s, before any of it runs, with the object code it was
 * linked from and whether that came from kis_wasm_store_use_cached_code:
 * where a confined caller hands the code to its cache and forbids making
 * more executable memory (the wasm tier's second seccomp filter). */
KIS_API void kis_wasm_store_on_compiled(struct kis_wasm_store *s,
					void (*fn)(void *user, const uint8_t *obj, size_t len,
						   int from_cache),
					void *user);
/* Object code made before for the next module s compiles (only ever from
 * a cache the caller trusts: it runs as is), linked without LLVM
 * (src/wasm/jit_elf.c). Given before kis_wasm_store_use_compiler, that
 * does not load the compiler; one refused at instantiation (corrupt, or
 * another module's) is compiled anew if the compiler is loaded
 * (kis_wasm_compiler_load), else the instantiation fails naming why. obj
 * must stay valid until then. */
KIS_API void kis_wasm_store_use_cached_code(struct kis_wasm_store *s, const uint8_t *obj,
					    size_t len);
/* Link the code given by kis_wasm_store_use_cached_code now, read-execute,
 * for the next module s instantiates (which takes it if it has as many
 * functions, else refuses it as a corrupt cached object): so that a
 * confined caller makes its only executable mapping before it loads its
 * seccomp filter, and that filter can forbid every other one (the wasm
 * tier's single filter for cached code). The object is parsed here as it
 * is at instantiation: only ever one from a cache the caller trusts. 0, or
 * -1 (the code is left to link at instantiation). */
KIS_API int kis_wasm_store_link_cached_code(struct kis_wasm_store *s);
/* What compiled code depends on besides the module (compiler and LLVM
 * versions, CPU): part of a cache's key. 0, or -1 without a compiler. */
KIS_API int kis_wasm_compiler_id(char *buf, size_t len);
/* How compiled code of this process keeps memory accesses in bounds:
 * "guard" (a reservation of the whole 32-bit index and offset range per
 * memory, PROT_NONE beyond its size, faults turned into the trap) or
 * "check" (an explicit compare at each access; where no such reservation
 * can be had, e.g. under an RLIMIT_AS). */
KIS_API const char *kis_wasm_compiler_memory_mode(void);
/* Cap, in 64 KiB pages, every memory made in this store from now on:
 * instantiation fails above it and memory.grow returns -1 (default and
 * ceiling: 65536 pages, 4 GiB). */
KIS_API void kis_wasm_set_memory_limit(struct kis_wasm_store *s, uint32_t max_pages);

/* Instantiate (spec 4.5.4): resolve imports, initialise tables and memory,
 * run the start function. A link failure returns -1 with *trap = OK; a trap
 * while initialising returns -1 with *trap set (the objects it touched stay
 * modified, as the specification says). */
KIS_API int kis_wasm_instantiate(struct kis_wasm_store *s, const struct kis_wasm_module *m,
				 kis_wasm_resolve_fn resolve, void *user,
				 struct kis_wasm_instance **out, enum kis_wasm_trap *trap,
				 struct kis_error **err);
/* Look up an export by name; 0 when found, -1 otherwise. The _n form takes
 * names that hold NUL bytes, which the binary format allows. */
KIS_API int kis_wasm_instance_export(const struct kis_wasm_instance *inst, const char *name,
				     struct kis_wasm_extern *out);
KIS_API int kis_wasm_instance_export_n(const struct kis_wasm_instance *inst, const char *name,
				       size_t len, struct kis_wasm_extern *out);
/* The instance's memory 0, or NULL. */
KIS_API struct kis_wasm_memory *kis_wasm_instance_memory(const struct kis_wasm_instance *inst);

/* Call a function: args holds one slot per parameter, results receives one
 * per result (two for each v128, see kis_wasm_slot). Returns KIS_WASM_OK or
 * the trap that stopped it. */
KIS_API enum kis_wasm_trap kis_wasm_call(struct kis_wasm_store *s, struct kis_wasm_func *f,
					 const kis_wasm_slot *args, kis_wasm_slot *results);
KIS_API void kis_wasm_func_type(const struct kis_wasm_func *f, const uint8_t **params,
				uint32_t *nparams, const uint8_t **results, uint32_t *nresults);
KIS_API struct kis_wasm_func *kis_wasm_host_func_new(struct kis_wasm_store *s,
						     const uint8_t *params, uint32_t nparams,
						     const uint8_t *results, uint32_t nresults,
						     kis_wasm_host_fn fn, void *user);

/* For a v128 global, `value`, _get and _set are its low 64 bits (the high
 * half of a new one is zero); _get_v128 reads both. */
KIS_API struct kis_wasm_global *kis_wasm_global_new(struct kis_wasm_store *s,
						    enum kis_wasm_valtype type, int mutable_,
						    kis_wasm_slot value);
KIS_API kis_wasm_slot kis_wasm_global_get(const struct kis_wasm_global *g);
KIS_API void kis_wasm_global_get_v128(const struct kis_wasm_global *g, kis_wasm_slot out[2]);
KIS_API enum kis_wasm_valtype kis_wasm_global_type(const struct kis_wasm_global *g);
/* -1 when the global is immutable. */
KIS_API int kis_wasm_global_set(struct kis_wasm_global *g, kis_wasm_slot value);

/* has_max = 0 means no maximum. */
KIS_API struct kis_wasm_table *kis_wasm_table_new(struct kis_wasm_store *s,
						  enum kis_wasm_valtype elem, uint32_t min,
						  int has_max, uint32_t max);
KIS_API struct kis_wasm_memory *kis_wasm_memory_new(struct kis_wasm_store *s, uint32_t min_pages,
						    int has_max, uint32_t max_pages);
/* The memory's bytes and size; valid until the memory next grows. */
KIS_API uint8_t *kis_wasm_memory_data(struct kis_wasm_memory *mem, uint64_t *size);

#endif
