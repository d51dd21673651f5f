/* SPDX-License-Identifier: MIT */
/* Unit tests of our linker of compiled wasm code (src/wasm/jit_elf.c): every
 * relocation type it takes, done right (an object the system assembler made,
 * run), and a cached object that is corrupt or hostile (truncated, bad
 * relocation offsets, an unknown symbol, huge sections, ...) refused by
 * name, never a crash or a mapping out of range. */
#include <elf.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "wasm/jit.h"

/* f0(buf) exercises each relocation the loader takes and leaves what it
 * saw in buf; w0 reaches it through a PLT32 (internal). */
static const char sample_s[] =
	"\t.text\n"
	"\t.globl f0\n\t.type f0,@function\n"
	"f0:\n"
	"\tpushq %rbx\n"
	"\tmovq %rdi, %rbx\n"
	/* PLT32 to an external: through its stub */
	"\tleaq 40(%rbx), %rdi\n\tmovl $7, %esi\n\tmovl $8, %edx\n\tcall memset@PLT\n"
	/* REX_GOTPCRELX to an external, and GOTPCRELX (call through the GOT) */
	"\tmovq memset@GOTPCREL(%rip), %rax\n\tmovq %rax, 0(%rbx)\n"
	"\tleaq 48(%rbx), %rdi\n\tmovl $9, %esi\n\tmovl $8, %edx\n\tcall *memset@GOTPCREL(%rip)\n"
	/* PC32 to a local constant, R_X86_64_64 to it from data */
	"\tmovq k(%rip), %rax\n\tmovq kp(%rip), %rcx\n\taddq (%rcx), %rax\n\tmovq %rax, 8(%rbx)\n"
	/* GOTPCRELX to an internal symbol, PC32 to one */
	"\tmovq f0@GOTPCREL(%rip), %rax\n\tmovq %rax, 16(%rbx)\n"
	"\tleaq f0(%rip), %rax\n\tmovq %rax, 24(%rbx)\n"
	/* PC64 in data: f0 - place */
	"\tmovq pc64(%rip), %rax\n\tleaq pc64(%rip), %rcx\n\taddq %rcx, %rax\n\tmovq %rax, 32(%rbx)\n"
	/* GOTPCREL in data: the slot relative to the place */
	"\tmovslq gotrel(%rip), %rax\n\tleaq gotrel(%rip), %rcx\n\taddq %rcx, %rax\n"
	"\tmovq (%rax), %rax\n\tmovq %rax, 56(%rbx)\n"
	"\tpopq %rbx\n"
	"\tret\n"
	"\t.globl w0\n\t.type w0,@function\n"
	"w0:\n\tjmp f0@PLT\n"
	"\t.section .rodata\n\t.p2align 3\nk:\t.quad 21\n"
	"gotrel:\t.long memset@GOTPCREL\n"
	"\t.data\n\t.p2align 3\nkp:\t.quad k\npc64:\t.quad f0 - .\n"
	"\t.bss\n\t.p2align 3\nzero:\t.zero 64\n"
	"\t.section .note.GNU-stack,\"\",@progbits\n";

static uint8_t *sample;
static size_t sample_len;

/* what the objects may call: the C library's part of the runtime's table */
static const struct wasm_jit_sym ext_syms[] = {
#define L(n) {#n, (void (*)(void))n},
	WASM_JIT_LIBC(L)
#undef L
};
static const struct wasm_jit_externals ext = {ext_syms, sizeof(ext_syms) / sizeof(*ext_syms)};

/* The sample assembled by the system's compiler driver (binutils' as). */
static int assemble(const char *src, uint8_t **out, size_t *len)
{
	char dir[] = "/tmp/kis-jit-elf.XXXXXX";
	if (!mkdtemp(dir))
		return -1;
	char s[64], o[64], cmd[256];
	snprintf(s, sizeof(s), "%s/s.s", dir);
	snprintf(o, sizeof(o), "%s/s.o", dir);
	FILE *f = fopen(s, "w");
	int rc = -1;
	if (f) {
		fputs(src, f);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "cc -c -o %s %s 2>/dev/null", o, s);
		if (system(cmd) == 0 && (f = fopen(o, "rb"))) {
			fseek(f, 0, SEEK_END);
			long n = ftell(f);
			fseek(f, 0, SEEK_SET);
			*out = malloc((size_t)n);
			if (*out && fread(*out, 1, (size_t)n, f) == (size_t)n) {
				*len = (size_t)n;
				rc = 0;
			}
			fclose(f);
		}
	}
	unlink(s);
	unlink(o);
	rmdir(dir);
	return rc;
}

static int setup(void **state)
{
	(void)state;
	if (!sample && assemble(sample_s, &sample, &sample_len) < 0)
		return 0; /* each test skips */
	return 0;
}

#define NEED_SAMPLE()                                                         \
	do {                                                                  \
		if (!sample) {                                                \
			print_message("skipped: no system assembler (cc)\n"); \
			skip();                                               \
		}                                                             \
	} while (0)

static int load(const uint8_t *b, size_t len, uint32_t n, struct wasm_jit_module **jm)
{
	char err[300];
	return wasm_jit_elf_load(&ext, b, len, n, true, jm, err, sizeof(err));
}

static void every_relocation_applies(void **state)
{
	(void)state;
	NEED_SAMPLE();
	struct wasm_jit_module *jm = NULL;
	char err[300] = "";
	int rc = wasm_jit_elf_load(&ext, sample, sample_len, 1, true, &jm, err, sizeof(err));
	if (rc < 0)
		print_error("%s\n", err);
	assert_int_equal(rc, 0);
	void *fn, *wrapv;
	void (*wrap)(void *, uint64_t *);
	assert_int_equal(wasm_jit_elf_lookup(jm, 0, &fn, &wrap), 0);
	wrapv = (void *)wrap;
	assert_int_equal(wasm_jit_elf_lookup(jm, 1, &fn, &wrap), -1);
	assert_int_equal(wasm_jit_elf_lookup(jm, 0, &fn, &wrap), 0);
	uint64_t buf[8] = {0};
	/* through w0 (PLT32 to f0), then f0 itself */
	for (int pass = 0; pass < 2; pass++) {
		memset(buf, 0, sizeof(buf));
		((void (*)(uint64_t *))(pass ? fn : wrapv))(buf);
		assert_int_equal(buf[0], (uint64_t)(uintptr_t)memset);
		assert_int_equal(buf[1], 42);
		assert_int_equal(buf[2], (uint64_t)(uintptr_t)fn);
		assert_int_equal(buf[3], (uint64_t)(uintptr_t)fn);
		assert_int_equal(buf[4], (uint64_t)(uintptr_t)fn);
		assert_int_equal(buf[5], 0x0707070707070707ull);
		assert_int_equal(buf[6], 0x0909090909090909ull);
		assert_int_equal(buf[7], (uint64_t)(uintptr_t)memset);
	}
	/* the code is read-execute, not writable: /proc/self/maps says so */
	FILE *m = fopen("/proc/self/maps", "r");
	char line[512];
	bool seen = false;
	while (m && fgets(line, sizeof(line), m)) {
		unsigned long lo, hi;
		char perm[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) == 3 && (uintptr_t)fn >= lo &&
		    (uintptr_t)fn < hi) {
			assert_string_equal(perm, "r-xp");
			seen = true;
		}
	}
	if (m)
		fclose(m);
	assert_true(seen);
	wasm_jit_elf_free(jm);
}

/* ---- corrupt objects: a copy of the sample, changed ---- */

static uint8_t *copy(void)
{
	uint8_t *c = malloc(sample_len);
	assert_non_null(c);
	memcpy(c, sample, sample_len);
	return c;
}

static Elf64_Shdr *shdr(uint8_t *b, unsigned i)
{
	Elf64_Ehdr eh;
	memcpy(&eh, b, sizeof(eh));
	return (Elf64_Shdr *)(void *)(b + eh.e_shoff + (size_t)i * sizeof(Elf64_Shdr));
}

static unsigned nsecs(const uint8_t *b)
{
	Elf64_Ehdr eh;
	memcpy(&eh, b, sizeof(eh));
	return eh.e_shnum;
}

/* The first section of a type (and, for RELA, relocating code). */
static unsigned find(uint8_t *b, uint32_t type, uint64_t flag)
{
	for (unsigned i = 1; i < nsecs(b); i++) {
		Elf64_Shdr *h = shdr(b, i);
		if (h->sh_type == type && (!flag || (h->sh_flags & flag) == flag))
			return i;
	}
	fail_msg("no section of type %u", type);
	return 0;
}

static unsigned rela_text(uint8_t *b)
{
	unsigned text = find(b, SHT_PROGBITS, SHF_EXECINSTR);
	for (unsigned i = 1; i < nsecs(b); i++)
		if (shdr(b, i)->sh_type == SHT_RELA && shdr(b, i)->sh_info == text)
			return i;
	fail_msg("no relocations of the code");
	return 0;
}

static void expect(uint8_t *b, size_t len, int code)
{
	struct wasm_jit_module *jm = NULL;
	char err[300] = "";
	int rc = wasm_jit_elf_load(&ext, b, len, 1, true, &jm, err, sizeof(err));
	if (rc != -code)
		print_error("got %d (%s), want %s\n", rc, err, wasm_elf_strerror(code));
	assert_int_equal(rc, -code);
	assert_null(jm);
	assert_non_null(strstr(err, wasm_elf_strerror(code)));
	/* and the check the cache makes (no mapping kept) says the same */
	assert_int_equal(wasm_jit_elf_load(&ext, b, len, UINT32_MAX, false, &jm, NULL, 0), -code);
	free(b);
}

static void truncated_object_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	struct wasm_jit_module *jm = NULL;
	for (size_t n = 0; n < sample_len; n++) {
		uint8_t *b = malloc(n ? n : 1);
		memcpy(b, sample, n);
		assert_true(load(b, n, 1, &jm) < 0);
		assert_null(jm);
		free(b);
	}
	expect(copy(), 10, WASM_ELF_E_TRUNCATED);
	/* the section headers cut off */
	Elf64_Ehdr eh;
	memcpy(&eh, sample, sizeof(eh));
	expect(copy(), eh.e_shoff + 10, WASM_ELF_E_TRUNCATED);
}

static void bad_header_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	uint8_t *b = copy();
	b[EI_CLASS] = ELFCLASS32;
	expect(b, sample_len, WASM_ELF_E_HEADER);
	b = copy();
	b[16] = ET_EXEC; /* e_type */
	expect(b, sample_len, WASM_ELF_E_HEADER);
	b = copy();
	Elf64_Ehdr eh;
	memcpy(&eh, b, sizeof(eh));
	eh.e_shnum = 0xffff;
	memcpy(b, &eh, sizeof(eh));
	expect(b, sample_len, WASM_ELF_E_HEADER);
}

static void bad_relocation_offset_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	const uint64_t offs[] = {1ull << 40, UINT64_MAX - 1, 0};
	for (size_t k = 0; k < sizeof(offs) / sizeof(*offs); k++) {
		uint8_t *b = copy();
		Elf64_Shdr *rh = shdr(b, rela_text(b));
		Elf64_Rela r;
		memcpy(&r, b + rh->sh_offset, sizeof(r));
		/* 0: past the end by 2 of the code's last bytes */
		r.r_offset = offs[k] ? offs[k] : shdr(b, rh->sh_info)->sh_size - 2;
		memcpy(b + rh->sh_offset, &r, sizeof(r));
		expect(b, sample_len, WASM_ELF_E_RELOC_OFFSET);
	}
}

static void bad_relocation_symbol_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	uint8_t *b = copy();
	Elf64_Shdr *rh = shdr(b, rela_text(b));
	Elf64_Rela r;
	memcpy(&r, b + rh->sh_offset, sizeof(r));
	r.r_info = ELF64_R_INFO(0x7fffffffu, ELF64_R_TYPE(r.r_info));
	memcpy(b + rh->sh_offset, &r, sizeof(r));
	expect(b, sample_len, WASM_ELF_E_SYMBOL);
}

static void unsupported_relocation_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	const uint32_t types[] = {R_X86_64_TPOFF32, R_X86_64_COPY, R_X86_64_GOTOFF64, 200};
	for (size_t k = 0; k < sizeof(types) / sizeof(*types); k++) {
		uint8_t *b = copy();
		Elf64_Shdr *rh = shdr(b, rela_text(b));
		Elf64_Rela r;
		memcpy(&r, b + rh->sh_offset, sizeof(r));
		r.r_info = ELF64_R_INFO(ELF64_R_SYM(r.r_info), types[k]);
		memcpy(b + rh->sh_offset, &r, sizeof(r));
		expect(b, sample_len, WASM_ELF_E_RELOC_TYPE);
	}
}

static void unknown_symbol_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	/* "memset" renamed "system": a libc function the table does not have */
	uint8_t *b = copy();
	unsigned st = find(b, SHT_SYMTAB, 0);
	Elf64_Shdr *sh = shdr(b, shdr(b, st)->sh_link);
	char *str = (char *)b + sh->sh_offset;
	char *hit = NULL;
	for (size_t i = 0; i + 7 <= sh->sh_size; i++)
		if (!memcmp(str + i, "memset", 7))
			hit = str + i;
	assert_non_null(hit);
	memcpy(hit, "system", 6);
	expect(b, sample_len, WASM_ELF_E_UNKNOWN_SYMBOL);
}

static void huge_sections_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	/* code bigger than the file */
	uint8_t *b = copy();
	shdr(b, find(b, SHT_PROGBITS, SHF_EXECINSTR))->sh_size = 1ull << 62;
	expect(b, sample_len, WASM_ELF_E_SECTION);
	/* an empty section (bss) of 2^40 bytes: past the image's ceiling */
	b = copy();
	shdr(b, find(b, SHT_NOBITS, 0))->sh_size = 1ull << 40;
	expect(b, sample_len, WASM_ELF_E_TOO_BIG);
	/* its offset past the file's end, with a size that wraps */
	b = copy();
	Elf64_Shdr *h = shdr(b, find(b, SHT_PROGBITS, SHF_EXECINSTR));
	h->sh_offset = UINT64_MAX - 8;
	h->sh_size = 16;
	expect(b, sample_len, WASM_ELF_E_SECTION);
	/* a symbol table that claims more than the file */
	b = copy();
	shdr(b, find(b, SHT_SYMTAB, 0))->sh_size = (1ull << 40) * sizeof(Elf64_Sym);
	expect(b, sample_len, WASM_ELF_E_SECTION);
}

static void writable_code_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	uint8_t *b = copy();
	shdr(b, find(b, SHT_PROGBITS, SHF_EXECINSTR))->sh_flags |= SHF_WRITE;
	expect(b, sample_len, WASM_ELF_E_SECTION);
}

static void symbol_name_outside_strings_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	uint8_t *b = copy();
	Elf64_Shdr *st = shdr(b, find(b, SHT_SYMTAB, 0));
	Elf64_Sym y;
	memcpy(&y, b + st->sh_offset + sizeof(y), sizeof(y));
	y.st_name = 0xfffffff0u;
	memcpy(b + st->sh_offset + sizeof(y), &y, sizeof(y));
	expect(b, sample_len, WASM_ELF_E_STRING);
}

/* Linked before the module is known (the wasm tier's child, before its
 * seccomp filter): as many functions as the object defines, counted, so
 * that the module's own count can be checked when it takes the code. */
static void early_link_counts_the_functions(void **state)
{
	(void)state;
	NEED_SAMPLE();
	struct wasm_jit_module *jm = NULL;
	assert_int_equal(wasm_jit_link_cached(sample, sample_len, &jm), 0);
	assert_non_null(jm);
	assert_int_equal(wasm_jit_elf_nfuncs(jm), 1);
	void *fn;
	void (*wrap)(void *, uint64_t *);
	assert_int_equal(wasm_jit_elf_lookup(jm, 0, &fn, &wrap), 0);
	assert_int_equal(wasm_jit_elf_lookup(jm, 1, &fn, &wrap), -1);
	wasm_jit_elf_free(jm);
	/* a damaged object links no earlier than at instantiation */
	uint8_t *b = copy();
	memset(b, 0, 16);
	jm = NULL;
	assert_int_equal(wasm_jit_link_cached(b, sample_len, &jm), -1);
	assert_null(jm);
	free(b);
	assert_int_equal(wasm_jit_link_cached(NULL, 0, &jm), -1);
}

/* The permissions /proc/self/maps gives the mapping holding p ("r-xp"). */
static void perms_at(const void *p, char out[5])
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	strcpy(out, "none");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char pr[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, pr) == 3 && (uintptr_t)p >= lo &&
		    (uintptr_t)p < hi) {
			memcpy(out, pr, 5);
			break;
		}
	}
	if (f)
		fclose(f);
}

/* The engine's link of cached code (wasm_code_cache_get_linked) is
 * never executable where it was made: read-write until the child seals
 * it, then read-execute, and it runs as a direct link does. */
static void prelinked_code_is_executable_only_once_sealed(void **state)
{
	(void)state;
	NEED_SAMPLE();
	struct wasm_jit_module *jm = NULL;
	char err[300] = "", pr[5];
	assert_int_equal(wasm_jit_elf_prelink(&ext, sample, sample_len, 1, &jm, err, sizeof(err)), 0);
	void *fn;
	void (*wrap)(void *, uint64_t *);
	assert_int_equal(wasm_jit_elf_lookup(jm, 0, &fn, &wrap), 0);
	perms_at(fn, pr);
	assert_string_equal(pr, "rw-p");
	assert_int_equal(wasm_jit_elf_seal(jm, err, sizeof(err)), 0);
	perms_at(fn, pr);
	assert_string_equal(pr, "r-xp");
	assert_int_equal(wasm_jit_elf_seal(jm, err, sizeof(err)), 0); /* once is enough */
	uint64_t buf[8] = {0};
	((void (*)(uint64_t *))fn)(buf);
	assert_int_equal(buf[1], 42);
	assert_int_equal(buf[5], 0x0707070707070707ull);
	wasm_jit_elf_free(jm);
	/* a refused object is refused by the prelink as by the check */
	uint8_t *b = copy();
	memset(b, 0, 16);
	assert_true(wasm_jit_elf_prelink(&ext, b, sample_len, 1, &jm, err, sizeof(err)) < 0);
	assert_null(jm);
	free(b);
}

/* Externals resolve by name through a sorted index (jit_elf.c,
 * sort_externals): names given out of order, one a prefix of another, one
 * twice (the first of them wins, as the linear search it replaced found),
 * each reached through an absolute relocation in data. */
static char ext_marks[6];
static const struct wasm_jit_sym many_syms[] = {
	{"zeta", (void (*)(void))(void *)&ext_marks[0]},
	{"mem", (void (*)(void))(void *)&ext_marks[1]},
	{"alpha", (void (*)(void))(void *)&ext_marks[2]},
	{"memset", (void (*)(void))(void *)&ext_marks[3]},
	{"alpha", (void (*)(void))(void *)&ext_marks[4]},
	{"f9", (void (*)(void))(void *)&ext_marks[5]},
};
static const struct wasm_jit_externals many = {many_syms, sizeof(many_syms) / sizeof(*many_syms)};

static void externals_found_by_name(void **state)
{
	(void)state;
	uint8_t *b = NULL;
	size_t len = 0;
	const char *src = "\t.text\n\t.globl f0\n\t.type f0,@function\n"
			  "f0:\n\tleaq tab(%rip), %rax\n\tret\n"
			  "\t.globl w0\n\t.type w0,@function\nw0:\n\tjmp f0@PLT\n"
			  "\t.data\n\t.p2align 3\ntab:\t.quad memset, alpha, zeta, mem, f9\n"
			  "\t.section .note.GNU-stack,\"\",@progbits\n";
	if (assemble(src, &b, &len) < 0) {
		print_message("skipped: no system assembler (cc)\n");
		skip();
	}
	struct wasm_jit_module *jm = NULL;
	char err[300] = "";
	int rc = wasm_jit_elf_load(&many, b, len, 1, true, &jm, err, sizeof(err));
	if (rc < 0)
		print_error("%s\n", err);
	assert_int_equal(rc, 0);
	void *fn;
	void (*wrap)(void *, uint64_t *);
	assert_int_equal(wasm_jit_elf_lookup(jm, 0, &fn, &wrap), 0);
	void **tab = ((void **(*)(void))fn)();
	assert_ptr_equal(tab[0], &ext_marks[3]);
	assert_ptr_equal(tab[1], &ext_marks[2]);
	assert_ptr_equal(tab[2], &ext_marks[0]);
	assert_ptr_equal(tab[3], &ext_marks[1]);
	/* an external named like an entry is the external */
	assert_ptr_equal(tab[4], &ext_marks[5]);
	wasm_jit_elf_free(jm);
	/* a name between two of the table's, and one past its last: unknown */
	static const char *const absent[] = {"beta", "zz", "a", "me"};
	for (size_t k = 0; k < sizeof(absent) / sizeof(*absent); k++) {
		char src2[512];
		snprintf(src2, sizeof(src2),
			 "\t.text\n\t.globl f0\n\t.type f0,@function\n"
			 "f0:\n\tret\n\t.globl w0\n\t.type w0,@function\nw0:\n\tret\n"
			 "\t.data\n\t.p2align 3\n\t.quad %s\n"
			 "\t.section .note.GNU-stack,\"\",@progbits\n",
			 absent[k]);
		uint8_t *c = NULL;
		size_t clen = 0;
		assert_int_equal(assemble(src2, &c, &clen), 0);
		assert_int_equal(wasm_jit_elf_load(&many, c, clen, 1, true, &jm, err, sizeof(err)),
				 -WASM_ELF_E_UNKNOWN_SYMBOL);
		assert_null(jm);
		free(c);
	}
	free(b);
}

/* An image of a MiB and more is mapped on a 2 MiB boundary with its
 * written part in whole 2 MiB extents (jit_elf.c, map_image: huge pages
 * where the kernel gives them); prelinked, sealed and run as any other,
 * its gaps int3 and its bss zero. */
static void large_image_links_and_runs(void **state)
{
	(void)state;
	uint8_t *b = NULL;
	size_t len = 0;
	const char *src = "\t.text\n\t.globl f0\n\t.type f0,@function\n"
			  "f0:\n\tmovq k(%rip), %rax\n\taddq z(%rip), %rax\n\tret\n"
			  "\t.p2align 4\n\t.skip 1500000, 0x90\n"
			  "\t.globl f1\n\t.type f1,@function\n"
			  "f1:\n\tleaq f0(%rip), %rax\n\tret\n"
			  "\t.globl w0\n\t.type w0,@function\nw0:\n\tjmp f0@PLT\n"
			  "\t.globl w1\n\t.type w1,@function\nw1:\n\tjmp f1@PLT\n"
			  "\t.section .rodata\n\t.p2align 3\nk:\t.quad 42\n"
			  "\t.bss\n\t.p2align 3\nz:\t.zero 3000000\n"
			  "\t.section .note.GNU-stack,\"\",@progbits\n";
	if (assemble(src, &b, &len) < 0) {
		print_message("skipped: no system assembler (cc)\n");
		skip();
	}
	for (int pre = 0; pre < 2; pre++) {
		struct wasm_jit_module *jm = NULL;
		char err[300] = "", pr[5];
		int rc = pre ? wasm_jit_elf_prelink(&ext, b, len, 2, &jm, err, sizeof(err))
			     : wasm_jit_elf_load(&ext, b, len, 2, true, &jm, err, sizeof(err));
		if (rc < 0)
			print_error("%s\n", err);
		assert_int_equal(rc, 0);
		if (pre)
			assert_int_equal(wasm_jit_elf_seal(jm, err, sizeof(err)), 0);
		void *f0, *f1;
		void (*wrap)(void *, uint64_t *);
		assert_int_equal(wasm_jit_elf_lookup(jm, 0, &f0, &wrap), 0);
		assert_int_equal(wasm_jit_elf_lookup(jm, 1, &f1, &wrap), 0);
		assert_int_equal((uintptr_t)f0 % ((uintptr_t)2 << 20), 0);
		perms_at(f1, pr);
		assert_string_equal(pr, "r-xp");
		assert_int_equal(((uint64_t (*)(void))f0)(), 42);
		assert_ptr_equal(((void *(*)(void))f1)(), f0);
		wasm_jit_elf_free(jm);
	}
	free(b);
}

static void functions_of_another_module_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	struct wasm_jit_module *jm = NULL;
	char err[300] = "";
	/* the sample defines f0 and w0: a module of 2 functions is not it */
	assert_int_equal(wasm_jit_elf_load(&ext, sample, sample_len, 2, true, &jm, err, sizeof(err)),
			 -WASM_ELF_E_FUNCS);
	assert_null(jm);
	assert_int_equal(wasm_jit_elf_load(&ext, sample, sample_len, 0, true, &jm, err, sizeof(err)),
			 -WASM_ELF_E_FUNCS);
	/* w0 renamed x0: the wrapper is missing */
	uint8_t *b = copy();
	unsigned st = find(b, SHT_SYMTAB, 0);
	Elf64_Shdr *sh = shdr(b, shdr(b, st)->sh_link);
	char *str = (char *)b + sh->sh_offset;
	for (size_t i = 0; i + 3 <= sh->sh_size; i++)
		if (!memcmp(str + i, "\0w0\0", 4) || (i == 0 && !memcmp(str, "w0", 3)))
			str[i + 1] = 'x';
	expect(b, sample_len, WASM_ELF_E_FUNCS);
}

static void out_of_range_absolute_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	/* R_X86_64_32 of a code address: it lies above 4 GiB (mmap's choice
	 * for a PIE process), so it cannot fit */
	uint8_t *o = NULL;
	size_t n = 0;
	assert_int_equal(assemble("\t.text\n\t.globl f0\nf0:\tmovl $f0, %eax\n\tret\n"
				  "\t.globl w0\nw0:\tret\n",
				  &o, &n),
			 0);
	struct wasm_jit_module *jm = NULL;
	char err[300] = "";
	int rc = wasm_jit_elf_load(&ext, o, n, 1, true, &jm, err, sizeof(err));
	if (rc == 0) { /* mapped below 4 GiB after all: then it must be right */
		void *fn;
		void (*w)(void *, uint64_t *);
		assert_int_equal(wasm_jit_elf_lookup(jm, 0, &fn, &w), 0);
		assert_int_equal(((uint32_t(*)(void))fn)(), (uint32_t)(uintptr_t)fn);
		wasm_jit_elf_free(jm);
	} else {
		assert_int_equal(rc, -WASM_ELF_E_RELOC_RANGE);
	}
	free(o);
}

/* Random damage: any answer but a crash (ASan/UBSan watch the reads). */
static void random_damage_never_crashes(void **state)
{
	(void)state;
	NEED_SAMPLE();
	srand(12345);
	int refused = 0;
	for (int i = 0; i < 3000; i++) {
		uint8_t *b = copy();
		int flips = 1 + rand() % 4;
		for (int k = 0; k < flips; k++)
			b[(size_t)rand() % sample_len] ^= (uint8_t)(1u << (rand() % 8));
		struct wasm_jit_module *jm = NULL;
		char err[300];
		if (wasm_jit_elf_load(&ext, b, sample_len, 1, i % 2, &jm, err, sizeof(err)) < 0)
			refused++;
		wasm_jit_elf_free(jm);
		free(b);
	}
	assert_true(refused > 0);
}

/* ---- containers: one object per range of functions (jit_llvm.c) ---- */

/* f0 calls f1 of the other object (PLT32), reads its address through the
 * GOT and w1's PC-relative: all resolved across the two. */
static const char range_a_s[] =
	"\t.text\n"
	"\t.globl f0\n\t.type f0,@function\n"
	"f0:\n\tpushq %rbx\n\tmovq %rdi, %rbx\n\tcall f1@PLT\n"
	"\tmovq f1@GOTPCREL(%rip), %rax\n\tmovq %rax, 8(%rbx)\n"
	"\tleaq w1(%rip), %rax\n\tmovq %rax, 16(%rbx)\n\tpopq %rbx\n\tret\n"
	"\t.globl w0\n\t.type w0,@function\n"
	"w0:\n\tjmp f0@PLT\n"
	"\t.section .note.GNU-stack,\"\",@progbits\n";
static const char range_b_s[] =
	"\t.text\n"
	"\t.globl f1\n\t.type f1,@function\n"
	"f1:\n\tmovq $42, (%rdi)\n\tret\n"
	"\t.globl w1\n\t.type w1,@function\n"
	"w1:\n\tjmp f1@PLT\n"
	"\t.section .note.GNU-stack,\"\",@progbits\n";

/* "KISOBJS1", n, 0, the lengths, the objects (jit.h) */
static uint8_t *container(uint8_t *const *objs, const size_t *lens, uint32_t n, size_t *len)
{
	size_t total = WASM_JIT_OBJS_HEAD + (size_t)n * 8;
	for (uint32_t i = 0; i < n; i++)
		total += lens[i];
	uint8_t *b = calloc(1, total);
	assert_non_null(b);
	memcpy(b, WASM_JIT_OBJS_MAGIC, 8);
	memcpy(b + 8, &n, 4);
	size_t at = WASM_JIT_OBJS_HEAD + (size_t)n * 8;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t l = lens[i];
		memcpy(b + WASM_JIT_OBJS_HEAD + (size_t)i * 8, &l, 8);
		memcpy(b + at, objs[i], lens[i]);
		at += lens[i];
	}
	*len = total;
	return b;
}

static void calls_cross_the_objects_of_a_container(void **state)
{
	(void)state;
	NEED_SAMPLE();
	uint8_t *o[2];
	size_t l[2], len;
	assert_int_equal(assemble(range_a_s, &o[0], &l[0]), 0);
	assert_int_equal(assemble(range_b_s, &o[1], &l[1]), 0);
	uint8_t *b = container(o, l, 2, &len);
	struct wasm_jit_module *jm = NULL;
	char err[300] = "";
	int rc = wasm_jit_elf_load(&ext, b, len, 2, true, &jm, err, sizeof(err));
	if (rc < 0)
		print_error("%s\n", err);
	assert_int_equal(rc, 0);
	void *f0, *f1;
	void (*w0)(void *, uint64_t *), (*w1)(void *, uint64_t *);
	assert_int_equal(wasm_jit_elf_lookup(jm, 0, &f0, &w0), 0);
	assert_int_equal(wasm_jit_elf_lookup(jm, 1, &f1, &w1), 0);
	uint64_t buf[3] = {0};
	((void (*)(uint64_t *))f0)(buf);
	assert_int_equal(buf[0], 42);
	assert_int_equal(buf[1], (uint64_t)(uintptr_t)f1);
	assert_int_equal(buf[2], (uint64_t)(uintptr_t)w1);
	wasm_jit_elf_free(jm);
	/* the cache's check agrees, and an early link counts the functions
	 * of both */
	assert_int_equal(wasm_jit_elf_load(&ext, b, len, UINT32_MAX, false, &jm, NULL, 0), 0);
	assert_int_equal(wasm_jit_elf_load(&ext, b, len, UINT32_MAX, true, &jm, NULL, 0), 0);
	assert_int_equal(wasm_jit_elf_nfuncs(jm), 2);
	wasm_jit_elf_free(jm);
	/* an entry no object defines (the second alone), and one defined by
	 * two objects (the first twice) */
	size_t len2;
	uint8_t *b2 = container(&o[0], &l[0], 1, &len2);
	assert_int_equal(wasm_jit_elf_load(&ext, b2, len2, 1, true, &jm, err, sizeof(err)),
			 -WASM_ELF_E_UNKNOWN_SYMBOL);
	assert_non_null(strstr(err, "f1"));
	free(b2);
	uint8_t *twice[3] = {o[0], o[1], o[1]};
	size_t tl[3] = {l[0], l[1], l[1]};
	b2 = container(twice, tl, 3, &len2);
	assert_int_equal(wasm_jit_elf_load(&ext, b2, len2, 2, true, &jm, err, sizeof(err)),
			 -WASM_ELF_E_FUNCS);
	assert_non_null(strstr(err, "twice"));
	free(b2);
	/* random damage to the container: refused or linked, never a crash */
	srand(777);
	for (int i = 0; i < 1000; i++) {
		uint8_t *c = malloc(len);
		memcpy(c, b, len);
		size_t where = i % 2 ? (size_t)rand() % (WASM_JIT_OBJS_HEAD + 16) : (size_t)rand() % len;
		c[where] ^= (uint8_t)(1u << (rand() % 8));
		if (wasm_jit_elf_load(&ext, c, len, 2, i % 3 == 0, &jm, err, sizeof(err)) == 0)
			wasm_jit_elf_free(jm);
		jm = NULL;
		free(c);
	}
	free(b);
	free(o[0]);
	free(o[1]);
}

static void bad_containers_refused(void **state)
{
	(void)state;
	NEED_SAMPLE();
	uint8_t *o[1] = {sample};
	size_t l[1] = {sample_len}, len;
	uint8_t *b = container(o, l, 1, &len);
	struct wasm_jit_module *jm = NULL;
	assert_int_equal(wasm_jit_elf_load(&ext, b, len, 1, true, &jm, NULL, 0), 0);
	wasm_jit_elf_free(jm);
	/* no objects; more than the most; the reserved word set */
	uint32_t bad[] = {0, WASM_JIT_OBJS_MAX + 1};
	for (size_t i = 0; i < 2; i++) {
		uint8_t *c = malloc(len);
		memcpy(c, b, len);
		memcpy(c + 8, &bad[i], 4);
		expect(c, len, WASM_ELF_E_HEADER);
	}
	uint8_t *c = malloc(len);
	memcpy(c, b, len);
	c[12] = 1;
	expect(c, len, WASM_ELF_E_HEADER);
	/* an object's length past the end; bytes after the last object */
	c = malloc(len);
	memcpy(c, b, len);
	uint64_t big = sample_len + 1;
	memcpy(c + WASM_JIT_OBJS_HEAD, &big, 8);
	expect(c, len, WASM_ELF_E_TRUNCATED);
	c = malloc(len + 8);
	memcpy(c, b, len);
	memset(c + len, 0, 8);
	expect(c, len + 8, WASM_ELF_E_HEADER);
	/* cut inside the lengths */
	c = malloc(len);
	memcpy(c, b, len);
	expect(c, WASM_JIT_OBJS_HEAD + 4, WASM_ELF_E_TRUNCATED);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_relocation_applies),
		cmocka_unit_test(truncated_object_refused),
		cmocka_unit_test(bad_header_refused),
		cmocka_unit_test(bad_relocation_offset_refused),
		cmocka_unit_test(bad_relocation_symbol_refused),
		cmocka_unit_test(unsupported_relocation_refused),
		cmocka_unit_test(unknown_symbol_refused),
		cmocka_unit_test(huge_sections_refused),
		cmocka_unit_test(writable_code_refused),
		cmocka_unit_test(symbol_name_outside_strings_refused),
		cmocka_unit_test(functions_of_another_module_refused),
		cmocka_unit_test(prelinked_code_is_executable_only_once_sealed),
		cmocka_unit_test(early_link_counts_the_functions),
		cmocka_unit_test(out_of_range_absolute_refused),
		cmocka_unit_test(random_damage_never_crashes),
		cmocka_unit_test(calls_cross_the_objects_of_a_container),
		cmocka_unit_test(bad_containers_refused),
		cmocka_unit_test(externals_found_by_name),
		cmocka_unit_test(large_image_links_and_runs),
	};
	int rc = cmocka_run_group_tests_name("jit_elf", tests, setup, NULL);
	free(sample);
	return rc;
}
