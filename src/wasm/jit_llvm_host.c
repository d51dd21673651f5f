/* SPDX-License-Identifier: MIT */
/* The plugin's one piece of shared state: the host's table of functions
 * (the LEB128 readers, SIMD signatures), set once by
 * kis_wasm_jit_plugin_init (jit_llvm.c) before any compile and read by
 * every part of the generator (jit_llvm_*.c, through jit_llvm.h's macros).
 * It lives below them all, so that the parts name nothing of the driver
 * that calls them (issue 42: the driver and its parts were one circle). */
#include "wasm/jit_llvm.h"

const struct wasm_jit_host *jit_llvm_host;
