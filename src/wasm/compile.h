/* SPDX-License-Identifier: MIT */
/* The function-body compiler's own header: compile.c validates a body and
 * drives compile_emit.c, which writes and fuses the internal code. */
#ifndef KIS_WASM_COMPILE_H
#define KIS_WASM_COMPILE_H

#include "wasm/internal.h"

#define ANY 0u /* operand of unknown type, only in unreachable code */
#define NONE UINT32_MAX

struct ctl {
	uint8_t kind; /* 0 function, 0x02 block, 0x03 loop, 0x04 if, 0x05 else */
	bool unreachable;   /* validation: the rest of this block cannot run */
	bool dead_entry;    /* emission: the block was entered from dead code */
	uint8_t single;     /* storage for a one-value block type */
	uint32_t height;    /* operand count below the block's params */
	uint32_t hslots;    /* the same in stack slots (a v128 takes two) */
	const uint8_t *params, *results;
	uint32_t np, nr;
	uint32_t start_pc;  /* loop: where branches go */
	uint32_t fixups;    /* chain of code words to patch with the end's pc */
	uint32_t else_fix;  /* if: the word of the JMP_IF_NOT to patch */
};

/* An instruction just emitted, remembered for fusing (see fuse_binop). */
struct emitted {
	uint32_t pc, len, op, a, b;
};

struct cc {
	const struct kis_wasm_module *m;
	struct emitted last[4]; /* [0] the latest */
	uint32_t nlast;
	const uint8_t *p, *end;
	uint8_t *locals;
	uint32_t nlocals;
	uint32_t *lslot;  /* per local: its first slot in the frame */
	uint32_t nlslots; /* slots of all locals */
	uint8_t *vals;
	uint32_t nvals;
	uint32_t nslots, maxslots; /* operand stack height in slots, and its peak */
	struct ctl *ctl;
	uint32_t nctl;
	uint32_t *code;
	uint32_t ncode, capcode;
	char *err;
	size_t errlen;
	bool failed;
	/* straight-line code from the function's entry (no label passed yet),
	 * and which of the first 64 locals it may have written: a declared
	 * local still holds its initial zero there (spec 4.4.10) */
	bool prologue;
	uint32_t nparams;
	uint64_t written;
};

__attribute__((format(printf, 2, 3))) int cc_fail(struct cc *c, const char *fmt, ...);


/* compile_emit.c */
bool cc_dead(const struct cc *c);
int cc_emit(struct cc *c, uint32_t w);
void cc_note(struct cc *c, uint32_t pc, uint32_t op, uint32_t a, uint32_t b);
void cc_forget_from(struct cc *c, uint32_t at);
void cc_label_here(struct cc *c);
int cc_emit_op(struct cc *c, uint32_t op);
int cc_emit_op1(struct cc *c, uint32_t op, uint32_t a);
int cc_emit_op2(struct cc *c, uint32_t op, uint32_t a, uint32_t b);
const struct emitted *cc_prev(const struct cc *c, unsigned i);
bool cc_drop_zero_set(struct cc *c, uint32_t x);
int cc_emit_binop(struct cc *c, uint8_t op);
int cc_fuse_local_set(struct cc *c, uint32_t op, uint32_t z);
int cc_emit_cond_jump(struct cc *c, bool on_zero);

#endif
