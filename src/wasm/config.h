/* SPDX-License-Identifier: MIT */
/* Limits of the WebAssembly runtime, in one place (after wasm3's m3_config.h):
 * what the decoder and validator accept and what a run may use. */
#ifndef KIS_WASM_CONFIG_H
#define KIS_WASM_CONFIG_H

/* Decoder and validator (spec 5, 3): anything larger is rejected. */
#define KIS_WASM_MAX_MODULE_BYTES   (256u << 20)
#define KIS_WASM_MAX_TYPES          100000u
#define KIS_WASM_MAX_FUNCS          1000000u
#define KIS_WASM_MAX_IMPORTS        100000u
#define KIS_WASM_MAX_EXPORTS        100000u
#define KIS_WASM_MAX_GLOBALS        1000000u
#define KIS_WASM_MAX_TABLES         100000u
#define KIS_WASM_MAX_SEGMENTS       100000u
#define KIS_WASM_MAX_PARAMS         1000u   /* per function type, each way */
#define KIS_WASM_MAX_LOCALS         50000u  /* params + declared locals */
#define KIS_WASM_MAX_NESTING        1024u   /* nested blocks in one body */
#define KIS_WASM_MAX_OPERANDS       65536u  /* operand stack depth in one body */
#define KIS_WASM_MAX_BR_TABLE       65536u  /* labels of one br_table */
#define KIS_WASM_MAX_ELEM_PER_SEG   10000000u

/* Runtime. */
#define KIS_WASM_STACK_SLOTS        (1u << 20) /* 8 MiB value stack per store */
#define KIS_WASM_MAX_CALL_DEPTH     10000u     /* frames before "call stack exhausted" */
#define KIS_WASM_MAX_TABLE_ELEMS    10000000u  /* table.grow fails beyond this */
#define KIS_WASM_MAX_PAGES          65536u     /* 4 GiB, the wasm32 ceiling */

#endif
