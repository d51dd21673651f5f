/* SPDX-License-Identifier: MIT */
/* The interpreter's handler shapes and its dispatch list, for run() in
 * exec.c only: each internal opcode (internal.h) and the label it runs. */
#ifndef KIS_WASM_EXEC_DISPATCH_H
#define KIS_WASM_EXEC_DISPATCH_H

/* Binary and unary operators on the top of the stack, which is cached in
 * `tos` (see run()). These expand to a complete handler and never jump
 * elsewhere. */
#define BIN32(op, expr)                                                   \
	op_##op: {                                                        \
		uint32_t b = (uint32_t)tos, a = (uint32_t)sp[-2];         \
		sp--;                                                     \
		SET_TOP((uint32_t)(expr));                                \
		NEXT_T();                                                 \
	}
#define BIN64(op, expr)                                                   \
	op_##op: {                                                        \
		uint64_t b = tos, a = sp[-2];                             \
		sp--;                                                     \
		SET_TOP((uint64_t)(expr));                                \
		NEXT_T();                                                 \
	}
#define CMP64(op, expr) BIN64(op, expr)
#define UN32(op, expr)                                                    \
	op_##op: {                                                        \
		uint32_t a = (uint32_t)tos;                               \
		SET_TOP((uint32_t)(expr));                                \
		NEXT_T();                                                 \
	}
#define UN64(op, expr)                                                    \
	op_##op: {                                                        \
		uint64_t a = tos;                                         \
		SET_TOP((uint64_t)(expr));                                \
		NEXT_T();                                                 \
	}
#define FBIN32(op, expr)                                                  \
	op_##op: {                                                        \
		float b = f32_of(tos), a = f32_of(sp[-2]);                \
		sp--;                                                     \
		SET_TOP(of_f32(expr));                                    \
		NEXT_T();                                                 \
	}
#define FBIN64(op, expr)                                                  \
	op_##op: {                                                        \
		double b = f64_of(tos), a = f64_of(sp[-2]);               \
		sp--;                                                     \
		SET_TOP(of_f64(expr));                                    \
		NEXT_T();                                                 \
	}
#define FCMP32(op, expr)                                                  \
	op_##op: {                                                        \
		float b = f32_of(tos), a = f32_of(sp[-2]);                \
		sp--;                                                     \
		SET_TOP((expr) ? 1 : 0);                                  \
		NEXT_T();                                                 \
	}
#define FCMP64(op, expr)                                                  \
	op_##op: {                                                        \
		double b = f64_of(tos), a = f64_of(sp[-2]);               \
		sp--;                                                     \
		SET_TOP((expr) ? 1 : 0);                                  \
		NEXT_T();                                                 \
	}
#define FUN32(op, expr)                                                   \
	op_##op: {                                                        \
		float a = f32_of(tos);                                    \
		SET_TOP(of_f32(expr));                                    \
		NEXT_T();                                                 \
	}
#define FUN64(op, expr)                                                   \
	op_##op: {                                                        \
		double a = f64_of(tos);                                   \
		SET_TOP(of_f64(expr));                                    \
		NEXT_T();                                                 \
	}

/* Loads (opcode, bytes, value from the bytes at p) and stores (opcode,
 * bytes), for their forms with operands in locals. */
#define WASM_LOADS(X)                                          \
	X(0x28, 4, rd32(p))                                    \
	X(0x29, 8, rd64(p))                                    \
	X(0x2a, 4, rd32(p))                                    \
	X(0x2b, 8, rd64(p))                                    \
	X(0x2c, 1, (uint32_t)(int32_t)(int8_t)*p)              \
	X(0x2d, 1, *p)                                         \
	X(0x2e, 2, (uint32_t)(int32_t)(int16_t)rd16(p))        \
	X(0x2f, 2, rd16(p))                                    \
	X(0x30, 1, (uint64_t)(int64_t)(int8_t)*p)              \
	X(0x31, 1, *p)                                         \
	X(0x32, 2, (uint64_t)(int64_t)(int16_t)rd16(p))        \
	X(0x33, 2, rd16(p))                                    \
	X(0x34, 4, (uint64_t)(int64_t)(int32_t)rd32(p))        \
	X(0x35, 4, rd32(p))
#define WASM_STORES(X) \
	X(0x36, 4) X(0x37, 8) X(0x38, 4) X(0x39, 8) X(0x3a, 1) X(0x3b, 2) X(0x3c, 1) X(0x3d, 2) X(0x3e, 4)

/* The dispatch entries (opcode -> handler label), expanded inside run()
 * either as a table of label addresses or as switch cases. */
#define SHAPE_s SHAPE_S
#define SHAPE_l SHAPE_L
#define SHAPE_i SHAPE_I
#define SHAPE_ll SHAPE_LL
#define SHAPE_li SHAPE_LI
#define BASE_FUSED_ENTRIES(k)                          \
	ENTRY(OP_FUSED + 64 * FUSE_L + k, op_l_##k)    \
	ENTRY(OP_FUSED + 64 * FUSE_I + k, op_i_##k)    \
	ENTRY(OP_FUSED + 64 * FUSE_LL + k, op_ll_##k)  \
	ENTRY(OP_FUSED + 64 * FUSE_LI + k, op_li_##k)
#define CMP_ENTRIES(k, sh)                                                   \
	ENTRY(OP_FUSED + 64 * (FUSE_BR + SHAPE_##sh) + k, op_##sh##_br_##k)  \
	ENTRY(OP_FUSED + 64 * (FUSE_BRZ + SHAPE_##sh) + k, op_##sh##_brz_##k)
#define ARITH_ENTRIES(k, sh)                                                 \
	ENTRY(OP_FUSED + 64 * (FUSE_SET + SHAPE_##sh) + k, op_##sh##_set_##k) \
	ENTRY(OP_FUSED + 64 * (FUSE_TEE + SHAPE_##sh) + k, op_##sh##_tee_##k)
#define FUSED_CMP_ENTRIES(k, opcode, bits, expr)                             \
	BASE_FUSED_ENTRIES(k) CMP_ENTRIES(k, s) CMP_ENTRIES(k, l)            \
	CMP_ENTRIES(k, i) CMP_ENTRIES(k, ll) CMP_ENTRIES(k, li)
#define FUSED_ARITH_ENTRIES(k, opcode, bits, expr)                           \
	BASE_FUSED_ENTRIES(k) ARITH_ENTRIES(k, s) ARITH_ENTRIES(k, l)        \
	ARITH_ENTRIES(k, i) ARITH_ENTRIES(k, ll) ARITH_ENTRIES(k, li)
#define LOAD_ENTRY(op, n, conv) ENTRY(OP_LOAD_L + op - 0x28, op_lload_##op)
#define STORE_ENTRY(op, n) ENTRY(OP_STORE_LL + op - 0x36, op_llstore_##op)
#define LOAD_LI_ENTRY(op, n, conv) ENTRY(OP_LOAD_LI + op - 0x28, op_liload_##op)
#define FLOAT_ENTRIES(k, opcode, type, expr)          \
	ENTRY(OP_FLOAT_L + k, op_fl_##k)             \
	ENTRY(OP_FLOAT_LL + k, op_fll_##k)
#define FLOAD_ENTRIES(k, opcode, type, expr)          \
	ENTRY(OP_FLOAD_L + k, op_floadl_##k)          \
	ENTRY(OP_FLOAD_LI + k, op_floadli_##k)        \
	ENTRY(OP_FLOAD2 + k, op_fload2_##k)
#define CHAIN_ENTRY(i, k1, k2, e1, e2) ENTRY(OP_CHAIN + i, op_chain_##i)
#define LOAD_SI_ENTRY(op, n, conv) ENTRY(OP_LOAD_SI + op - 0x28, op_siload_##op)
#define LOAD_IDX_ENTRY(op, n, conv) ENTRY(OP_LOAD_IDX + op - 0x28, op_idxload_##op)
#define LOAD_IDX_TEE_ENTRY(op, n, conv) ENTRY(OP_LOAD_IDX_TEE + op - 0x28, op_idxteeload_##op)
#define FSET_ENTRIES(k, opcode, type, expr)           \
	ENTRY(OP_FSET_S + k, op_fsets_##k)           \
	ENTRY(OP_FSET_L + k, op_fsetl_##k)
#define STEP_ENTRIES(k, opcode, bits, expr)                   \
	ENTRY(OP_STEP_BR_I + k, op_step_i_##k)                \
	ENTRY(OP_STEP_BR_L + k, op_step_l_##k)
#define ICHAIN_ENTRIES(i, first, k2, e1, e2)    \
	ENTRY(OP_ICHAIN_S + i, op_ichain_s_##i) \
	ENTRY(OP_ICHAIN_L + i, op_ichain_l_##i) \
	ENTRY(OP_ICHAIN_I + i, op_ichain_i_##i) \
	ENTRY(OP_LICHAIN_L + i, op_lichain_l_##i) \
	ENTRY(OP_LICHAIN_I + i, op_lichain_i_##i)
#define DISPATCH_ENTRIES                              \
	ENTRY(0x28, op_0x28) \
	ENTRY(0x29, op_0x29) \
	ENTRY(0x2a, op_0x2a) \
	ENTRY(0x2b, op_0x2b) \
	ENTRY(0x2c, op_0x2c) \
	ENTRY(0x2d, op_0x2d) \
	ENTRY(0x2e, op_0x2e) \
	ENTRY(0x2f, op_0x2f) \
	ENTRY(0x30, op_0x30) \
	ENTRY(0x31, op_0x31) \
	ENTRY(0x32, op_0x32) \
	ENTRY(0x33, op_0x33) \
	ENTRY(0x34, op_0x34) \
	ENTRY(0x35, op_0x35) \
	ENTRY(0x36, op_0x36) \
	ENTRY(0x37, op_0x37) \
	ENTRY(0x38, op_0x38) \
	ENTRY(0x39, op_0x39) \
	ENTRY(0x3a, op_0x3a) \
	ENTRY(0x3b, op_0x3b) \
	ENTRY(0x3c, op_0x3c) \
	ENTRY(0x3d, op_0x3d) \
	ENTRY(0x3e, op_0x3e) \
	ENTRY(0x45, op_0x45) \
	ENTRY(0x46, op_0x46) \
	ENTRY(0x47, op_0x47) \
	ENTRY(0x48, op_0x48) \
	ENTRY(0x49, op_0x49) \
	ENTRY(0x4a, op_0x4a) \
	ENTRY(0x4b, op_0x4b) \
	ENTRY(0x4c, op_0x4c) \
	ENTRY(0x4d, op_0x4d) \
	ENTRY(0x4e, op_0x4e) \
	ENTRY(0x4f, op_0x4f) \
	ENTRY(0x50, op_0x50) \
	ENTRY(0x51, op_0x51) \
	ENTRY(0x52, op_0x52) \
	ENTRY(0x53, op_0x53) \
	ENTRY(0x54, op_0x54) \
	ENTRY(0x55, op_0x55) \
	ENTRY(0x56, op_0x56) \
	ENTRY(0x57, op_0x57) \
	ENTRY(0x58, op_0x58) \
	ENTRY(0x59, op_0x59) \
	ENTRY(0x5a, op_0x5a) \
	ENTRY(0x5b, op_0x5b) \
	ENTRY(0x5c, op_0x5c) \
	ENTRY(0x5d, op_0x5d) \
	ENTRY(0x5e, op_0x5e) \
	ENTRY(0x5f, op_0x5f) \
	ENTRY(0x60, op_0x60) \
	ENTRY(0x61, op_0x61) \
	ENTRY(0x62, op_0x62) \
	ENTRY(0x63, op_0x63) \
	ENTRY(0x64, op_0x64) \
	ENTRY(0x65, op_0x65) \
	ENTRY(0x66, op_0x66) \
	ENTRY(0x67, op_0x67) \
	ENTRY(0x68, op_0x68) \
	ENTRY(0x69, op_0x69) \
	ENTRY(0x6a, op_0x6a) \
	ENTRY(0x6b, op_0x6b) \
	ENTRY(0x6c, op_0x6c) \
	ENTRY(0x6d, op_0x6d) \
	ENTRY(0x6e, op_0x6e) \
	ENTRY(0x6f, op_0x6f) \
	ENTRY(0x70, op_0x70) \
	ENTRY(0x71, op_0x71) \
	ENTRY(0x72, op_0x72) \
	ENTRY(0x73, op_0x73) \
	ENTRY(0x74, op_0x74) \
	ENTRY(0x75, op_0x75) \
	ENTRY(0x76, op_0x76) \
	ENTRY(0x77, op_0x77) \
	ENTRY(0x78, op_0x78) \
	ENTRY(0x79, op_0x79) \
	ENTRY(0x7a, op_0x7a) \
	ENTRY(0x7b, op_0x7b) \
	ENTRY(0x7c, op_0x7c) \
	ENTRY(0x7d, op_0x7d) \
	ENTRY(0x7e, op_0x7e) \
	ENTRY(0x7f, op_0x7f) \
	ENTRY(0x80, op_0x80) \
	ENTRY(0x81, op_0x81) \
	ENTRY(0x82, op_0x82) \
	ENTRY(0x83, op_0x83) \
	ENTRY(0x84, op_0x84) \
	ENTRY(0x85, op_0x85) \
	ENTRY(0x86, op_0x86) \
	ENTRY(0x87, op_0x87) \
	ENTRY(0x88, op_0x88) \
	ENTRY(0x89, op_0x89) \
	ENTRY(0x8a, op_0x8a) \
	ENTRY(0x8b, op_0x8b) \
	ENTRY(0x8c, op_0x8c) \
	ENTRY(0x8d, op_0x8d) \
	ENTRY(0x8e, op_0x8e) \
	ENTRY(0x8f, op_0x8f) \
	ENTRY(0x90, op_0x90) \
	ENTRY(0x91, op_0x91) \
	ENTRY(0x92, op_0x92) \
	ENTRY(0x93, op_0x93) \
	ENTRY(0x94, op_0x94) \
	ENTRY(0x95, op_0x95) \
	ENTRY(0x96, op_0x96) \
	ENTRY(0x97, op_0x97) \
	ENTRY(0x98, op_0x98) \
	ENTRY(0x99, op_0x99) \
	ENTRY(0x9a, op_0x9a) \
	ENTRY(0x9b, op_0x9b) \
	ENTRY(0x9c, op_0x9c) \
	ENTRY(0x9d, op_0x9d) \
	ENTRY(0x9e, op_0x9e) \
	ENTRY(0x9f, op_0x9f) \
	ENTRY(0xa0, op_0xa0) \
	ENTRY(0xa1, op_0xa1) \
	ENTRY(0xa2, op_0xa2) \
	ENTRY(0xa3, op_0xa3) \
	ENTRY(0xa4, op_0xa4) \
	ENTRY(0xa5, op_0xa5) \
	ENTRY(0xa6, op_0xa6) \
	ENTRY(0xa7, op_0xa7) \
	ENTRY(0xa8, op_0xa8) \
	ENTRY(0xa9, op_0xa9) \
	ENTRY(0xaa, op_0xaa) \
	ENTRY(0xab, op_0xab) \
	ENTRY(0xac, op_0xac) \
	ENTRY(0xad, op_0xad) \
	ENTRY(0xae, op_0xae) \
	ENTRY(0xaf, op_0xaf) \
	ENTRY(0xb0, op_0xb0) \
	ENTRY(0xb1, op_0xb1) \
	ENTRY(0xb2, op_0xb2) \
	ENTRY(0xb3, op_0xb3) \
	ENTRY(0xb4, op_0xb4) \
	ENTRY(0xb5, op_0xb5) \
	ENTRY(0xb6, op_0xb6) \
	ENTRY(0xb7, op_0xb7) \
	ENTRY(0xb8, op_0xb8) \
	ENTRY(0xb9, op_0xb9) \
	ENTRY(0xba, op_0xba) \
	ENTRY(0xbb, op_0xbb) \
	ENTRY(0xbc, op_0xbc) \
	ENTRY(0xbd, op_0xbd) \
	ENTRY(0xbe, op_0xbe) \
	ENTRY(0xbf, op_0xbf) \
	ENTRY(0xc0, op_0xc0) \
	ENTRY(0xc1, op_0xc1) \
	ENTRY(0xc2, op_0xc2) \
	ENTRY(0xc3, op_0xc3) \
	ENTRY(0xc4, op_0xc4) \
	ENTRY(OP_BR, op_OP_BR) \
	ENTRY(OP_BR_IF, op_OP_BR_IF) \
	ENTRY(OP_BR_IF_SIMPLE, op_OP_BR_IF_SIMPLE) \
	ENTRY(OP_BR_TABLE, op_OP_BR_TABLE) \
	ENTRY(OP_CALL, op_OP_CALL) \
	ENTRY(OP_CALL_INDIRECT, op_OP_CALL_INDIRECT) \
	ENTRY(OP_DROP, op_OP_DROP) \
	ENTRY(OP_F32_CONST, op_OP_F32_CONST) \
	ENTRY(OP_F64_CONST, op_OP_F64_CONST) \
	ENTRY(OP_GLOBAL_GET, op_OP_GLOBAL_GET) \
	ENTRY(OP_GLOBAL_SET, op_OP_GLOBAL_SET) \
	ENTRY(OP_I32_CONST, op_OP_I32_CONST) \
	ENTRY(OP_I64_CONST, op_OP_I64_CONST) \
	ENTRY(OP_JMP, op_OP_JMP) \
	ENTRY(OP_JMP_IF_NOT, op_OP_JMP_IF_NOT) \
	ENTRY(OP_LOCAL_GET, op_OP_LOCAL_GET) \
	ENTRY(OP_LOCAL_SET, op_OP_LOCAL_SET) \
	ENTRY(OP_LOCAL_TEE, op_OP_LOCAL_TEE) \
	ENTRY(OP_LOOP_CHECK, op_OP_LOOP_CHECK) \
	ENTRY(OP_MEMORY_GROW, op_OP_MEMORY_GROW) \
	ENTRY(OP_MEMORY_SIZE, op_OP_MEMORY_SIZE) \
	ENTRY(OP_NOP, op_OP_NOP) \
	ENTRY(OP_REF_FUNC, op_OP_REF_FUNC) \
	ENTRY(OP_REF_IS_NULL, op_OP_REF_IS_NULL) \
	ENTRY(OP_REF_NULL, op_OP_REF_NULL) \
	ENTRY(OP_RETURN, op_OP_RETURN) \
	ENTRY(OP_SELECT, op_OP_SELECT) \
	ENTRY(OP_TABLE_GET, op_OP_TABLE_GET) \
	ENTRY(OP_TABLE_SET, op_OP_TABLE_SET) \
	ENTRY(OP_UNREACHABLE, op_OP_UNREACHABLE) \
	ENTRY(OP_FC_BASE + 0, op_fc0) \
	ENTRY(OP_FC_BASE + 1, op_fc1) \
	ENTRY(OP_FC_BASE + 10, op_fc10) \
	ENTRY(OP_FC_BASE + 11, op_fc11) \
	ENTRY(OP_FC_BASE + 12, op_fc12) \
	ENTRY(OP_FC_BASE + 13, op_fc13) \
	ENTRY(OP_FC_BASE + 14, op_fc14) \
	ENTRY(OP_FC_BASE + 15, op_fc15) \
	ENTRY(OP_FC_BASE + 16, op_fc16) \
	ENTRY(OP_FC_BASE + 17, op_fc17) \
	ENTRY(OP_FC_BASE + 2, op_fc2) \
	ENTRY(OP_FC_BASE + 3, op_fc3) \
	ENTRY(OP_FC_BASE + 4, op_fc4) \
	ENTRY(OP_FC_BASE + 5, op_fc5) \
	ENTRY(OP_FC_BASE + 6, op_fc6) \
	ENTRY(OP_FC_BASE + 7, op_fc7) \
	ENTRY(OP_FC_BASE + 8, op_fc8) \
	ENTRY(OP_FC_BASE + 9, op_fc9) \
	WASM_FUSABLE_COMPARES(FUSED_CMP_ENTRIES) \
	WASM_FUSABLE_ARITH(FUSED_ARITH_ENTRIES) \
	WASM_LOADS(LOAD_ENTRY) \
	WASM_STORES(STORE_ENTRY) \
	WASM_LOADS(LOAD_LI_ENTRY) \
	WASM_FUSABLE_FLOATS(FLOAT_ENTRIES) \
	ENTRY(OP_SET_K32, op_set_k32) \
	ENTRY(OP_SET_K64, op_set_k64) \
	ENTRY(OP_COPY, op_copy) \
	ENTRY(OP_RSUB_L32, op_rsub_l32) \
	ENTRY(OP_RSUB_I32, op_rsub_i32) \
	ENTRY(OP_RSUB_L64, op_rsub_l64) \
	ENTRY(OP_RSUB_I64, op_rsub_i64) \
	WASM_FUSABLE_FLOATS(FLOAD_ENTRIES) \
	ENTRY(OP_COPY_N, op_copy_n) \
	ENTRY(OP_FSUM64, op_fsum64) \
	WASM_I_CHAINS(ICHAIN_ENTRIES) \
	WASM_LOADS(LOAD_IDX_ENTRY) \
	WASM_LOADS(LOAD_IDX_TEE_ENTRY) \
	ENTRY(OP_FSUM64_SET, op_fsum64_set) \
	WASM_FUSABLE_CHAINS(CHAIN_ENTRY) \
	WASM_I32_COMPARES(STEP_ENTRIES) \
	WASM_LOADS(LOAD_SI_ENTRY) \
	WASM_FUSABLE_FLOATS(FSET_ENTRIES) \
	ENTRY(OP_SIMD, op_simd)

#endif
