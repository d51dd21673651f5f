/* SPDX-License-Identifier: MIT */
/* Our own linker of the compiler's object code: an x86-64 relocatable ELF
 * object (what LLVM emits for a module, fresh or from the store's cache)
 * mapped, relocated against the runtime's table and its own symbols,
 * and made read-execute. No LLVM: a cached run never loads it.
 *
 * Why the ELF object itself, not a format of our own that the compile step
 * would write: it is what LLVM gives us, so a fresh compile and a cached
 * run go through this one linker (every compiled test exercises it), there
 * is no second format to keep in step, and a format of our own would need
 * an ELF reader at compile time anyway. The price is that this reader is on
 * a security boundary (the cache is a file): it accepts a narrow subset
 * (ELF64, little-endian, ET_REL, EM_X86_64, RELA, no groups, no TLS, no
 * extended section numbers) and bounds-checks every offset, size, index and
 * relocation target against the file and the image before it is used.
 *
 * Theory of operation. parse() reads the headers into struct obj and lays
 * the loaded sections out in three page-aligned regions of one image:
 * executable (the code, then one 8-byte stub per external function), read
 * only (constants, then one GOT slot per symbol a GOTPCREL names) and
 * writable (data, bss). The image is mapped read-write, filled and
 * relocated; then the executable region becomes read-execute and the read
 * only one read-only, so no page is ever writable and executable at once
 * (the wasm tier's seccomp filter allows mprotect to exactly PROT_READ |
 * PROT_EXEC). Externals resolve only against the caller's table (the
 * runtime's: WASM_JIT_HELPERS and the C library functions LLVM's code
 * generator may call, WASM_JIT_LIBC, jit_rt.c; given, so that this linker
 * names nothing of the runtime that runs what it links); a
 * PC-relative reference to one goes through its stub (the image may lie
 * further than 2 GiB from the library), which jumps through its GOT slot.
 *
 * Relocations (System V ABI x86-64 psABI, 4.4, with S the symbol, A the
 * addend, P the place, G + GOT the symbol's GOT slot, L its stub): 64
 * (S + A), PC64 (S + A - P), PC32 (S + A - P, a stub for an external),
 * PLT32 (L + A - P), 32 and 32S (S + A, zero or sign extended),
 * GOTPCREL, GOTPCRELX and REX_GOTPCRELX (G + GOT + A - P, not relaxed:
 * relaxing is optional for a linker), NONE. Any other type is refused.
 *
 * Several objects. The compiler emits one object per range of functions,
 * compiled on threads of their own (jit_llvm.c), in a container (jit.h,
 * WASM_JIT_OBJS_MAGIC); a bare object is a container of one. They are
 * linked as one image, as if one object: each region holds that region's
 * sections of every object in turn, then the stubs, or the GOT. A call from
 * one range into another names f<i> (or w<i>) undefined; it resolves, once
 * every object's entries are placed, to the one definition of that entry
 * in the image (a name defined by none, or twice, is refused). Such a
 * symbol is inside the image, so it needs no stub: a PC-relative reference
 * to it is direct, as within one object, and a GOTPCREL one gets its slot. */
#include <elf.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "wasm/jit.h"

/* The image's ceiling: as the wasm tier's room for fresh code (1 GiB), and
 * below 2 GiB so any place-relative value inside one image fits 32 bits. */
#define IMAGE_MAX (1ull << 30)
#define PAGE 4096u
#define STUB_BYTES 8u
/* Where the check pretends the image lies: where mmap puts one in a
 * 64-bit process (below the stack, above 4 GiB). */
#define CHECK_BASE 0x7f0000000000ull

struct wasm_jit_module {
	uint8_t *map;
	size_t map_len;
	uint32_t n;
	void **fns;
	void **wraps;
	uint8_t *obj; /* a fresh compile's object code, for the cache; else NULL */
	size_t obj_len;
	bool from_cache;
	/* prelinked (wasm_jit_elf_prelink): still all read-write, these
	 * regions to protect at wasm_jit_elf_seal */
	bool unsealed;
	size_t rx_len, r_at, r_len;
};

static const char *const names[] = {
#define N(e, s) [e] = s,
	WASM_ELF_ERRORS(N)
#undef N
};

const char *wasm_elf_strerror(int e)
{
	if (e < 0)
		e = -e;
	return e > 0 && (size_t)e < sizeof(names) / sizeof(*names) && names[e] ? names[e] : "unknown";
}

/* A loaded section: where in the image, which region. */
struct sec {
	Elf64_Shdr h;
	bool load;
	uint64_t at; /* offset in the image */
};

/* A symbol, resolved: its image offset (internal) or index in the externals. */
struct sym {
	Elf64_Sym s;
	/* SYM_CROSS: f<i> or w<i> undefined here, defined by another object */
	enum { SYM_NONE, SYM_INTERNAL, SYM_EXTERNAL, SYM_CROSS, SYM_BAD } kind;
	int bad;        /* why SYM_BAD, as a WASM_ELF_E_ value */
	uint64_t off;   /* SYM_INTERNAL, and SYM_CROSS once resolved: image offset */
	uint32_t ext;   /* SYM_EXTERNAL: index in ext; SYM_CROSS: the entry's index */
	bool wrap;      /* SYM_CROSS: w<i>, not f<i> */
	int32_t got;    /* GOT slot, or -1 */
	int32_t stub;   /* stub (externals), or -1 */
};

struct obj {
	const uint8_t *b;
	size_t len;
	Elf64_Ehdr eh;
	struct sec *secs;
	uint32_t nsecs;
	uint32_t symtab; /* its section index */
	struct sym *syms;
	uint32_t nsyms;
	const char *str; /* the symbol string table */
	uint64_t strlen_;
	const struct wasm_jit_externals *ext; /* what externals resolve to */
	const uint32_t *ext_order; /* ext's indices by name (sort_externals) */
	char *err;
	size_t errlen;
};

/* The objects linked into one image, and its layout. */
struct link {
	struct obj *o;
	uint32_t n;
	uint32_t *ext_order;
	uint64_t rx_len, r_at, r_len, rw_at, rw_len, size;
	uint64_t stubs_at, got_at;
	uint32_t nstubs, ngot;
};

static int fail(struct obj *o, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct obj *o, int code, const char *fmt, ...)
{
	char what[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (o->err && o->errlen)
		snprintf(o->err, o->errlen, "wasm.engine: compiled code refused (%s): %s",
			 wasm_elf_strerror(code), what);
	return -code;
}

/* [off, off + n) lies inside a region of size len (no overflow). */
static bool inside(uint64_t off, uint64_t n, uint64_t len)
{
	return off <= len && n <= len - off;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static const char *str_at(struct obj *o, uint32_t name)
{
	if (name >= o->strlen_ || !memchr(o->str + name, 0, o->strlen_ - name))
		return NULL;
	return o->str + name;
}

static int read_sections(struct obj *o)
{
	const Elf64_Ehdr *eh = &o->eh;
	if (o->len < sizeof(*eh))
		return fail(o, WASM_ELF_E_TRUNCATED, "%zu bytes, shorter than an ELF header", o->len);
	memcpy(&o->eh, o->b, sizeof(o->eh));
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_ident[EI_VERSION] != EV_CURRENT ||
	    eh->e_type != ET_REL || eh->e_machine != EM_X86_64 || eh->e_version != EV_CURRENT)
		return fail(o, WASM_ELF_E_HEADER, "not an x86-64 little-endian relocatable ELF64 object");
	if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 || eh->e_shnum >= SHN_LORESERVE)
		return fail(o, WASM_ELF_E_HEADER, "section header entries of %u bytes, %u of them",
			    eh->e_shentsize, eh->e_shnum);
	if (!inside(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), o->len))
		return fail(o, WASM_ELF_E_TRUNCATED, "the section headers lie outside the file");
	o->nsecs = eh->e_shnum;
	o->secs = calloc(o->nsecs, sizeof(*o->secs));
	if (!o->secs)
		return fail(o, WASM_ELF_E_NOMEM, "section table");
	bool have_symtab = false;
	for (uint32_t i = 0; i < o->nsecs; i++) {
		Elf64_Shdr *h = &o->secs[i].h;
		memcpy(h, o->b + eh->e_shoff + (uint64_t)i * sizeof(*h), sizeof(*h));
		if (i == 0)
			continue;
		if (h->sh_type != SHT_NOBITS && !inside(h->sh_offset, h->sh_size, o->len))
			return fail(o, WASM_ELF_E_SECTION, "section %u lies outside the file", i);
		if (h->sh_size > IMAGE_MAX)
			return fail(o, WASM_ELF_E_TOO_BIG, "section %u of %llu bytes", i,
				    (unsigned long long)h->sh_size);
		uint64_t al = h->sh_addralign ? h->sh_addralign : 1;
		if (al & (al - 1) || al > PAGE)
			return fail(o, WASM_ELF_E_SECTION, "section %u aligned to %llu", i,
				    (unsigned long long)al);
		switch (h->sh_type) {
		case SHT_SYMTAB:
			if (have_symtab)
				return fail(o, WASM_ELF_E_SYMTAB, "more than one symbol table");
			have_symtab = true;
			o->symtab = i;
			break;
		case SHT_REL:
		case SHT_SYMTAB_SHNDX:
		case SHT_GROUP:
			return fail(o, WASM_ELF_E_SECTION, "section %u of type %u is not supported", i,
				    h->sh_type);
		default:
			break;
		}
		if (!(h->sh_flags & SHF_ALLOC))
			continue;
		if (h->sh_flags & (SHF_TLS | SHF_GROUP | SHF_COMPRESSED))
			return fail(o, WASM_ELF_E_SECTION, "section %u is TLS, grouped or compressed", i);
		if ((h->sh_flags & SHF_WRITE) && (h->sh_flags & SHF_EXECINSTR))
			return fail(o, WASM_ELF_E_SECTION, "section %u is writable and executable", i);
		switch (h->sh_type) {
		case SHT_PROGBITS:
		case SHT_NOBITS:
			o->secs[i].load = true;
			break;
		case SHT_X86_64_UNWIND:
		case SHT_NOTE:
			/* .eh_frame: nothing unwinds compiled frames (a trap is a
			 * longjmp past them, jit_rt.c), so it is not loaded */
			break;
		default:
			return fail(o, WASM_ELF_E_SECTION, "allocated section %u of type %u", i,
				    h->sh_type);
		}
		if (h->sh_type == SHT_NOBITS && (h->sh_flags & SHF_EXECINSTR))
			return fail(o, WASM_ELF_E_SECTION, "section %u is executable and empty", i);
	}
	if (!have_symtab)
		return fail(o, WASM_ELF_E_SYMTAB, "no symbol table");
	return 0;
}

/* Place every object's loaded sections, the stubs and the GOT (their
 * counts known). */
static int layout(struct link *L)
{
	struct obj *o0 = &L->o[0];
	for (int pass = 0; pass < 3; pass++) {
		uint64_t at = pass == 0 ? 0 : pass == 1 ? L->r_at : L->rw_at;
		for (uint32_t k = 0; k < L->n; k++) {
			struct obj *o = &L->o[k];
			for (uint32_t i = 1; i < o->nsecs; i++) {
				struct sec *s = &o->secs[i];
				if (!s->load)
					continue;
				int region = (s->h.sh_flags & SHF_EXECINSTR) ? 0
					     : (s->h.sh_flags & SHF_WRITE)  ? 2
									     : 1;
				if (region != pass)
					continue;
				at = align_up(at, s->h.sh_addralign ? s->h.sh_addralign : 1);
				s->at = at;
				at += s->h.sh_size;
				if (at > IMAGE_MAX)
					return fail(o, WASM_ELF_E_TOO_BIG, "the image passes %llu bytes",
						    (unsigned long long)IMAGE_MAX);
			}
		}
		if (pass == 0) {
			L->stubs_at = align_up(at, 16);
			at = L->stubs_at + (uint64_t)L->nstubs * STUB_BYTES;
			/* a page at least: a module of no functions has no code */
			L->rx_len = at ? align_up(at, PAGE) : PAGE;
			L->r_at = L->rx_len;
		} else if (pass == 1) {
			L->got_at = align_up(at, 8);
			at = L->got_at + (uint64_t)L->ngot * 8;
			L->r_len = align_up(at, PAGE) - L->r_at;
			L->rw_at = L->r_at + L->r_len;
		} else {
			L->rw_len = align_up(at, PAGE) - L->rw_at;
		}
		if (at > IMAGE_MAX)
			return fail(o0, WASM_ELF_E_TOO_BIG, "the image passes %llu bytes",
				    (unsigned long long)IMAGE_MAX);
	}
	L->size = L->rw_at + L->rw_len;
	return 0;
}

/* "f<i>" or "w<i>" (i decimal, no leading zero, below 2^32): an entry. */
static bool entry_name(const char *nm, bool *wrap, uint32_t *idx)
{
	if (!nm || (nm[0] != 'f' && nm[0] != 'w') || nm[1] < '0' || nm[1] > '9' ||
	    (nm[1] == '0' && nm[2]))
		return false;
	uint64_t v = 0;
	const char *c = nm + 1;
	for (; *c >= '0' && *c <= '9' && v <= UINT32_MAX; c++)
		v = v * 10 + (uint64_t)(*c - '0');
	if (*c || v > UINT32_MAX)
		return false;
	*wrap = nm[0] == 'w';
	*idx = (uint32_t)v;
	return true;
}

/* The externals' indices ordered by name, equal names by index: a
 * binary search per undefined symbol finds the first of a name, as a
 * linear search would. That linear search (a strcmp against each of the
 * runtime's externals for every undefined symbol, calls between the
 * container's objects included) was a third of the engine's link of
 * SQLite's cached code, 29 objects (docs/wasm.md, issue 44's fifth pass). */
static int by_name(const void *a, const void *b, void *ctx)
{
	const struct wasm_jit_externals *ext = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = strcmp(ext->syms[x].name, ext->syms[y].name);
	return c ? c : (x > y) - (x < y);
}

static uint32_t *sort_externals(const struct wasm_jit_externals *ext)
{
	uint32_t *v = malloc((ext->n ? ext->n : 1) * sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < ext->n; i++)
		v[i] = (uint32_t)i;
	qsort_r(v, ext->n, sizeof(*v), by_name, (void *)ext);
	return v;
}

static bool find_external(const struct obj *o, const char *name, size_t *at)
{
	size_t lo = 0, hi = o->ext->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(o->ext->syms[o->ext_order[mid]].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == o->ext->n || strcmp(o->ext->syms[o->ext_order[lo]].name, name))
		return false;
	*at = o->ext_order[lo];
	return true;
}

static int read_symbols(struct obj *o)
{
	const Elf64_Shdr *st = &o->secs[o->symtab].h;
	if (st->sh_entsize != sizeof(Elf64_Sym) || st->sh_size % sizeof(Elf64_Sym))
		return fail(o, WASM_ELF_E_SYMTAB, "entries of %llu bytes",
			    (unsigned long long)st->sh_entsize);
	if (st->sh_link == 0 || st->sh_link >= o->nsecs ||
	    o->secs[st->sh_link].h.sh_type != SHT_STRTAB)
		return fail(o, WASM_ELF_E_SYMTAB, "its string table is not one");
	const Elf64_Shdr *sh = &o->secs[st->sh_link].h;
	o->str = (const char *)o->b + sh->sh_offset;
	o->strlen_ = sh->sh_size;
	uint64_t n = st->sh_size / sizeof(Elf64_Sym);
	if (n > UINT32_MAX / 2)
		return fail(o, WASM_ELF_E_SYMTAB, "%llu symbols", (unsigned long long)n);
	o->nsyms = (uint32_t)n;
	o->syms = calloc(n + 1, sizeof(*o->syms));
	if (!o->syms)
		return fail(o, WASM_ELF_E_NOMEM, "symbol table");
	for (uint32_t i = 0; i < o->nsyms; i++) {
		struct sym *y = &o->syms[i];
		memcpy(&y->s, o->b + st->sh_offset + (uint64_t)i * sizeof(Elf64_Sym), sizeof(y->s));
		y->got = y->stub = -1;
		const char *name = str_at(o, y->s.st_name);
		if (!name)
			return fail(o, WASM_ELF_E_STRING, "symbol %u's name lies outside its table", i);
		uint16_t x = y->s.st_shndx;
		if (i == 0) {
			y->kind = SYM_NONE;
		} else if (x == SHN_UNDEF) {
			y->kind = SYM_BAD;
			y->bad = WASM_ELF_E_UNKNOWN_SYMBOL;
			size_t k;
			if (ELF64_ST_BIND(y->s.st_info) != STB_WEAK && find_external(o, name, &k)) {
				y->kind = SYM_EXTERNAL;
				y->ext = (uint32_t)k;
			}
			/* another range's entry: resolved once all are placed */
			if (y->kind == SYM_BAD && ELF64_ST_BIND(y->s.st_info) != STB_WEAK &&
			    entry_name(name, &y->wrap, &y->ext))
				y->kind = SYM_CROSS;
		} else if (x >= o->nsecs || !o->secs[x].load) {
			y->kind = SYM_BAD; /* absolute, common, or in a section not loaded */
			y->bad = WASM_ELF_E_SYMBOL;
		} else if (ELF64_ST_TYPE(y->s.st_info) == STT_TLS ||
			   ELF64_ST_TYPE(y->s.st_info) == STT_GNU_IFUNC ||
			   y->s.st_value > o->secs[x].h.sh_size) {
			return fail(o, WASM_ELF_E_SYMBOL,
				    "symbol %u is TLS, an IFUNC or outside its section", i);
		} else {
			y->kind = SYM_INTERNAL; /* off: once laid out */
		}
	}
	return 0;
}

/* One relocation's type: its width, and whether it is PC-relative. */
static int reloc_kind(uint32_t type, unsigned *width, bool *got, bool *pcrel)
{
	*got = *pcrel = false;
	switch (type) {
	case R_X86_64_NONE:
		*width = 0;
		return 0;
	case R_X86_64_64:
		*width = 8;
		return 0;
	case R_X86_64_PC64:
		*width = 8;
		*pcrel = true;
		return 0;
	case R_X86_64_PC32:
	case R_X86_64_PLT32:
		*width = 4;
		*pcrel = true;
		return 0;
	case R_X86_64_32:
	case R_X86_64_32S:
		*width = 4;
		return 0;
	case R_X86_64_GOTPCREL:
	case R_X86_64_GOTPCRELX:
	case R_X86_64_REX_GOTPCRELX:
		*width = 4;
		*got = true;
		return 0;
	default:
		return -1;
	}
}

/* Every relocation section of a loaded one: checked; with apply false the
 * GOT slots and stubs it needs are counted, with apply true it is done for
 * an image at base (written into img, or only computed and range-checked
 * when img is NULL: the check). */
static int relocate(struct obj *o, struct link *L, uint64_t base, uint8_t *img, bool apply)
{
	for (uint32_t i = 1; i < o->nsecs; i++) {
		const Elf64_Shdr *rh = &o->secs[i].h;
		if (rh->sh_type != SHT_RELA)
			continue;
		if (rh->sh_info == 0 || rh->sh_info >= o->nsecs)
			return fail(o, WASM_ELF_E_RELOC, "section %u relocates section %u", i,
				    rh->sh_info);
		const struct sec *t = &o->secs[rh->sh_info];
		if (!t->load)
			continue; /* .rela.eh_frame and the like */
		if (rh->sh_link != o->symtab || rh->sh_entsize != sizeof(Elf64_Rela) ||
		    rh->sh_size % sizeof(Elf64_Rela))
			return fail(o, WASM_ELF_E_RELOC, "section %u is not a table of RELA entries", i);
		if (t->h.sh_type == SHT_NOBITS && rh->sh_size)
			return fail(o, WASM_ELF_E_RELOC, "section %u relocates an empty section", i);
		uint64_t n = rh->sh_size / sizeof(Elf64_Rela);
		for (uint64_t k = 0; k < n; k++) {
			Elf64_Rela r;
			memcpy(&r, o->b + rh->sh_offset + k * sizeof(r), sizeof(r));
			uint32_t type = (uint32_t)ELF64_R_TYPE(r.r_info);
			uint64_t si = ELF64_R_SYM(r.r_info);
			unsigned width;
			bool got, pcrel;
			if (reloc_kind(type, &width, &got, &pcrel) < 0)
				return fail(o, WASM_ELF_E_RELOC_TYPE, "relocation type %u", type);
			if (width == 0)
				continue;
			if (!inside(r.r_offset, width, t->h.sh_size))
				return fail(o, WASM_ELF_E_RELOC_OFFSET,
					    "offset %llu of section %u (%llu bytes)",
					    (unsigned long long)r.r_offset, rh->sh_info,
					    (unsigned long long)t->h.sh_size);
			if (si == 0 || si >= o->nsyms)
				return fail(o, WASM_ELF_E_SYMBOL, "relocation against symbol %llu",
					    (unsigned long long)si);
			struct sym *y = &o->syms[si];
			if (y->kind == SYM_BAD) {
				const char *nm = str_at(o, y->s.st_name);
				return fail(o, y->bad, "'%.64s'", nm && *nm ? nm : "(unnamed)");
			}
			if (!apply) {
				if (got && y->got < 0)
					y->got = (int32_t)L->ngot++;
				/* an external within 32 bits of a place: its stub,
				 * which jumps through its GOT slot */
				if (pcrel && width == 4 && y->kind == SYM_EXTERNAL && y->stub < 0) {
					y->stub = (int32_t)L->nstubs++;
					if (y->got < 0)
						y->got = (int32_t)L->ngot++;
				}
				continue;
			}
			uint64_t S = y->kind == SYM_EXTERNAL ? (uint64_t)(uintptr_t)o->ext->syms[y->ext].addr
							     : base + y->off;
			uint64_t P = base + t->at + r.r_offset;
			uint64_t A = (uint64_t)r.r_addend;
			uint64_t v;
			if (got)
				v = base + L->got_at + (uint64_t)y->got * 8 + A - P;
			else if (y->stub >= 0 && width == 4 && pcrel)
				v = base + L->stubs_at + (uint64_t)y->stub * STUB_BYTES + A - P;
			else
				v = S + A - (pcrel ? P : 0);
			uint8_t *place = img ? img + t->at + r.r_offset : NULL;
			if (width == 8) {
				if (place)
					memcpy(place, &v, 8);
				continue;
			}
			bool fits = type == R_X86_64_32 ? v <= UINT32_MAX
							: (int64_t)v >= INT32_MIN && (int64_t)v <= INT32_MAX;
			if (!fits)
				return fail(o, WASM_ELF_E_RELOC_RANGE, "type %u at offset %llu of section %u",
					    type, (unsigned long long)r.r_offset, rh->sh_info);
			uint32_t v32 = (uint32_t)v;
			if (place)
				memcpy(place, &v32, 4);
		}
	}
	return 0;
}

/* The module's entries: f<i> (typed) and w<i> (over slots), i < n, each
 * defined once among all the objects, in executable code. n == UINT32_MAX:
 * as many as the objects have. */
static int find_entries(struct link *L, uint64_t base, uint32_t n, void **fns, void **wraps,
			uint32_t *count)
{
	uint32_t nf = 0, nw = 0, maxi = 0;
	uint64_t nsyms = 0;
	for (uint32_t k = 0; k < L->n; k++)
		nsyms += L->o[k].nsyms;
	for (uint32_t k = 0; k < L->n; k++) {
		struct obj *o = &L->o[k];
		for (uint32_t i = 1; i < o->nsyms; i++) {
			struct sym *y = &o->syms[i];
			const char *nm = str_at(o, y->s.st_name);
			bool wrap;
			uint32_t idx;
			if (y->kind != SYM_INTERNAL || ELF64_ST_BIND(y->s.st_info) != STB_GLOBAL ||
			    !entry_name(nm, &wrap, &idx))
				continue;
			const struct sec *s = &o->secs[y->s.st_shndx];
			if (!(s->h.sh_flags & SHF_EXECINSTR) || y->s.st_value >= s->h.sh_size)
				return fail(o, WASM_ELF_E_FUNCS, "'%.32s' is not in the code", nm);
			if (idx >= (n == UINT32_MAX ? nsyms : n))
				return fail(o, WASM_ELF_E_FUNCS, "'%.32s': the module has %u functions", nm, n);
			void **slot = wrap ? &wraps[idx] : &fns[idx];
			if (*slot)
				return fail(o, WASM_ELF_E_FUNCS, "'%.32s' is defined twice", nm);
			*slot = (void *)(uintptr_t)(base + y->off);
			if (wrap)
				nw++;
			else
				nf++;
			if (idx + 1 > maxi)
				maxi = idx + 1;
		}
	}
	uint32_t want = n == UINT32_MAX ? maxi : n;
	if (nf != want || nw != want)
		return fail(&L->o[0], WASM_ELF_E_FUNCS, "%u functions and %u wrappers for %u", nf,
			    nw, want);
	*count = want;
	return 0;
}

/* Every SYM_CROSS to the entry another object defines (find_entries has
 * placed them all, for an image at base). */
static int resolve_cross(struct link *L, uint64_t base, void **fns, void **wraps, uint32_t count)
{
	for (uint32_t k = 0; k < L->n; k++) {
		struct obj *o = &L->o[k];
		for (uint32_t i = 1; i < o->nsyms; i++) {
			struct sym *y = &o->syms[i];
			if (y->kind != SYM_CROSS)
				continue;
			void *at = y->ext < count ? (y->wrap ? wraps : fns)[y->ext] : NULL;
			if (!at) {
				const char *nm = str_at(o, y->s.st_name);
				return fail(o, WASM_ELF_E_UNKNOWN_SYMBOL, "'%.64s' is defined by no object",
					    nm ? nm : "");
			}
			y->off = (uint64_t)(uintptr_t)at - base;
		}
	}
	return 0;
}

/* The objects of a container (or one bare object) into L->o. */
static int split_objects(struct obj *h, struct link *L, const uint8_t *b, size_t len)
{
	uint32_t n = 1;
	size_t at = 0;
	if (len < WASM_JIT_OBJS_HEAD || memcmp(b, WASM_JIT_OBJS_MAGIC, 8)) {
		if (len < SELFMAG || memcmp(b, ELFMAG, SELFMAG))
			return fail(h, WASM_ELF_E_HEADER, "neither an object nor a container of them");
	} else {
		uint32_t hdr[2];
		memcpy(hdr, b + 8, sizeof(hdr));
		n = hdr[0];
		if (n == 0 || n > WASM_JIT_OBJS_MAX || hdr[1] != 0)
			return fail(h, WASM_ELF_E_HEADER, "a container of %u objects", n);
		at = WASM_JIT_OBJS_HEAD + (size_t)n * 8;
		if (len < at)
			return fail(h, WASM_ELF_E_TRUNCATED, "a container's lengths end past its %zu bytes", len);
	}
	L->o = calloc(n, sizeof(*L->o));
	if (!L->o)
		return fail(h, WASM_ELF_E_NOMEM, "object table");
	L->n = n;
	for (uint32_t k = 0; k < n; k++) {
		uint64_t l = len;
		if (at) {
			memcpy(&l, b + WASM_JIT_OBJS_HEAD + (size_t)k * 8, 8);
			if (!inside(at, l, len))
				return fail(h, WASM_ELF_E_TRUNCATED, "object %u of %llu bytes passes the end",
					    k, (unsigned long long)l);
		}
		L->o[k] = (struct obj){.b = b + at, .len = (size_t)l, .ext = h->ext,
				       .ext_order = L->ext_order, .err = h->err,
				       .errlen = h->errlen};
		at += l;
	}
	if (at != len)
		return fail(h, WASM_ELF_E_HEADER, "%zu bytes after the container's objects", len - at);
	return 0;
}

static void link_release(struct link *L)
{
	for (uint32_t k = 0; k < L->n; k++) {
		free(L->o[k].secs);
		free(L->o[k].syms);
	}
	free(L->o);
	free(L->ext_order);
}

void wasm_jit_elf_free(struct wasm_jit_module *jm)
{
	if (!jm)
		return;
	if (jm->map)
		munmap(jm->map, jm->map_len);
	free(jm->fns);
	free(jm->wraps);
	free(jm->obj);
	free(jm);
}

enum load_mode { LOAD_CHECK, LOAD_LINK, LOAD_PRELINK };

/* The image's mapping: size bytes, of which the first written (code,
 * stubs, constants, GOT) are made present by the caller. From
 * IMAGE_HUGE_MIN on it starts on a 2 MiB boundary and its written part's
 * extents are advised MADV_HUGEPAGE: under this machine's hypervisor
 * (a PVM guest) a 4 KiB page first written costs a fault in the guest and
 * one in the host even after MADV_POPULATE_WRITE, and SQLite's image
 * (~2.3 MB) was ~2 ms of int3 fill for that alone; in two huge pages
 * ~0.2 ms. The writable tail past those extents (bss, which a hostile
 * object may make large) keeps small pages, faulted in if used. Advice
 * only: without THP the pages are small, as before. *map_len: the
 * length to munmap (the written part's last extent whole, at least). */
#define IMAGE_HUGE ((size_t)2 << 20)
#define IMAGE_HUGE_MIN ((size_t)1 << 20)
static uint8_t *map_image(uint64_t size, uint64_t written, size_t *map_len)
{
	*map_len = (size_t)size;
	if (size < IMAGE_HUGE_MIN)
		return mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* the written part's last extent whole (a huge page needs all of
	 * it mapped); size <= IMAGE_MAX + a page (layout): no overflow */
	size_t adv = ((size_t)written + IMAGE_HUGE - 1) & ~(IMAGE_HUGE - 1);
	size_t len = adv > size ? adv : (size_t)size, over = len + IMAGE_HUGE;
	uint8_t *p = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return p;
	uint8_t *a = (uint8_t *)(((uintptr_t)p + IMAGE_HUGE - 1) & ~(uintptr_t)(IMAGE_HUGE - 1));
	/* the reservation's slack, both sides of [a, a + len), returned */
	if (a > p)
		munmap(p, (size_t)(a - p));
	size_t tail = (size_t)(p + over - (a + len));
	if (tail)
		munmap(a + len, tail);
	madvise(a, adv, MADV_HUGEPAGE);
	*map_len = len;
	return a;
}

static int load(const struct wasm_jit_externals *ext, const uint8_t *b, size_t len,
		uint32_t nfuncs, enum load_mode mode, struct wasm_jit_module **out, char *err,
		size_t errlen);

int wasm_jit_elf_load(const struct wasm_jit_externals *ext, const uint8_t *b, size_t len,
		      uint32_t nfuncs, bool exec, struct wasm_jit_module **out, char *err,
		      size_t errlen)
{
	return load(ext, b, len, nfuncs, exec ? LOAD_LINK : LOAD_CHECK, out, err, errlen);
}

int wasm_jit_elf_prelink(const struct wasm_jit_externals *ext, const uint8_t *b, size_t len,
			 uint32_t nfuncs, struct wasm_jit_module **out, char *err, size_t errlen)
{
	return load(ext, b, len, nfuncs, LOAD_PRELINK, out, err, errlen);
}

int wasm_jit_elf_seal(struct wasm_jit_module *jm, char *err, size_t errlen)
{
	if (!jm || !jm->unsealed)
		return 0;
	if (mprotect(jm->map, jm->rx_len, PROT_READ | PROT_EXEC) < 0 ||
	    (jm->r_len && mprotect(jm->map + jm->r_at, jm->r_len, PROT_READ) < 0)) {
		if (err)
			snprintf(err, errlen, "wasm.engine: compiled code refused (%s): cannot protect the code: %s",
				 wasm_elf_strerror(WASM_ELF_E_MAP), strerror(errno));
		return -WASM_ELF_E_MAP;
	}
	jm->unsealed = false;
	return 0;
}

static int load(const struct wasm_jit_externals *ext, const uint8_t *b, size_t len,
		uint32_t nfuncs, enum load_mode mode, struct wasm_jit_module **out, char *err,
		size_t errlen)
{
	struct obj h = {.b = b, .len = len, .ext = ext, .err = err, .errlen = errlen};
	struct link L = {0};
	struct wasm_jit_module *jm = NULL;
	uint8_t *img = MAP_FAILED;
	int rc;
	*out = NULL;
	if (!b || len > IMAGE_MAX) {
		rc = fail(&h, WASM_ELF_E_TOO_BIG, "an object of %zu bytes", len);
		goto out;
	}
	if (ext->n > UINT32_MAX || !(L.ext_order = sort_externals(ext))) {
		rc = fail(&h, WASM_ELF_E_NOMEM, "externals' index");
		goto out;
	}
	if ((rc = split_objects(&h, &L, b, len)) < 0)
		goto out;
	uint64_t nsyms = 0;
	for (uint32_t k = 0; k < L.n; k++) {
		if ((rc = read_sections(&L.o[k])) < 0 || (rc = read_symbols(&L.o[k])) < 0 ||
		    (rc = relocate(&L.o[k], &L, 0, NULL, false)) < 0)
			goto out;
		nsyms += L.o[k].nsyms;
	}
	if ((rc = layout(&L)) < 0)
		goto out;
	for (uint32_t k = 0; k < L.n; k++) {
		struct obj *o = &L.o[k];
		for (uint32_t i = 1; i < o->nsyms; i++)
			if (o->syms[i].kind == SYM_INTERNAL)
				o->syms[i].off = o->secs[o->syms[i].s.st_shndx].at + o->syms[i].s.st_value;
	}
	if (nfuncs == UINT32_MAX && nsyms > UINT32_MAX / 2) {
		rc = fail(&h, WASM_ELF_E_SYMTAB, "%llu symbols", (unsigned long long)nsyms);
		goto out;
	}
	uint32_t n = nfuncs == UINT32_MAX ? (uint32_t)nsyms : nfuncs;
	jm = calloc(1, sizeof(*jm));
	if (jm) {
		jm->fns = calloc((size_t)n + 1, sizeof(void *));
		jm->wraps = calloc((size_t)n + 1, sizeof(void *));
	}
	if (!jm || !jm->fns || !jm->wraps) {
		rc = fail(&h, WASM_ELF_E_NOMEM, "entry tables");
		goto out;
	}
	if (mode == LOAD_CHECK) {
		/* The check: the whole link computed for an image where mmap
		 * would put one, nothing mapped or written (a fresh page costs
		 * ~80 us to fault in here: the engine checks before each run) */
		rc = find_entries(&L, CHECK_BASE, nfuncs, jm->fns, jm->wraps, &jm->n);
		if (rc == 0)
			rc = resolve_cross(&L, CHECK_BASE, jm->fns, jm->wraps, jm->n);
		for (uint32_t k = 0; rc == 0 && k < L.n; k++)
			rc = relocate(&L.o[k], &L, CHECK_BASE, NULL, true);
		goto out;
	}
	size_t map_len;
	img = map_image(L.size, L.rx_len + L.r_len, &map_len);
	if (img == MAP_FAILED) {
		rc = fail(&h, WASM_ELF_E_MAP, "cannot map %llu bytes: %s",
			  (unsigned long long)L.size, strerror(errno));
		goto out;
	}
	jm->map = img;
	jm->map_len = map_len;
	/* The pages written next (code, stubs, constants, GOT: all bounded by
	 * the file's size) made present in one call rather than one fault
	 * each (MADV_POPULATE_WRITE, Linux 5.14; on an older kernel they
	 * fault in as written). The writable region (bss, which a hostile
	 * file may make huge) is left to fault in if used. */
	madvise(img, L.rx_len + L.r_len, MADV_POPULATE_WRITE);
	/* int3 wherever the code region holds no code (the sections are
	 * copied over it next) */
	memset(img, 0xcc, L.rx_len);
	for (uint32_t k = 0; k < L.n; k++) {
		const struct obj *o = &L.o[k];
		for (uint32_t i = 1; i < o->nsecs; i++) {
			const struct sec *s = &o->secs[i];
			if (s->load && s->h.sh_type == SHT_PROGBITS)
				memcpy(img + s->at, o->b + s->h.sh_offset, s->h.sh_size);
			/* SHT_NOBITS: a new anonymous mapping is zero already
			 * (mmap(2)), so a huge one costs address space only */
		}
	}
	uint64_t base = (uint64_t)(uintptr_t)img;
	if ((rc = find_entries(&L, base, nfuncs, jm->fns, jm->wraps, &jm->n)) < 0 ||
	    (rc = resolve_cross(&L, base, jm->fns, jm->wraps, jm->n)) < 0)
		goto out;
	for (uint32_t k = 0; k < L.n; k++) {
		const struct obj *o = &L.o[k];
		for (uint32_t i = 1; i < o->nsyms; i++) {
			const struct sym *y = &o->syms[i];
			uint64_t addr = y->kind == SYM_EXTERNAL
						? (uint64_t)(uintptr_t)o->ext->syms[y->ext].addr
						: (uint64_t)(uintptr_t)img + y->off;
			if (y->got >= 0)
				memcpy(img + L.got_at + (uint64_t)y->got * 8, &addr, 8);
			if (y->stub >= 0) {
				/* jmp *slot(%rip): ff 25 rel32, from the end of the jump */
				uint8_t *st = img + L.stubs_at + (uint64_t)y->stub * STUB_BYTES;
				int32_t got = y->got;
				if (got < 0) {
					rc = fail(&h, WASM_ELF_E_RELOC, "a stub without its slot");
					goto out;
				}
				int64_t d = (int64_t)(L.got_at + (uint64_t)got * 8) -
					    (int64_t)(L.stubs_at + (uint64_t)y->stub * STUB_BYTES + 6);
				int32_t d32 = (int32_t)d;
				st[0] = 0xff;
				st[1] = 0x25;
				memcpy(st + 2, &d32, 4);
				st[6] = st[7] = 0xcc;
			}
		}
	}
	for (uint32_t k = 0; k < L.n; k++)
		if ((rc = relocate(&L.o[k], &L, base, img, true)) < 0)
			goto out;
	jm->rx_len = L.rx_len;
	jm->r_at = L.r_at;
	jm->r_len = L.r_len;
	if (mode == LOAD_PRELINK) {
		/* read-write still: wasm_jit_elf_seal protects it where it runs */
		jm->unsealed = true;
		*out = jm;
		jm = NULL;
		rc = 0;
		goto out;
	}
	/* Written: now read-execute code and read-only constants and GOT. */
	if (mprotect(img, L.rx_len, PROT_READ | PROT_EXEC) < 0 ||
	    (L.r_len && mprotect(img + L.r_at, L.r_len, PROT_READ) < 0)) {
		rc = fail(&h, WASM_ELF_E_MAP, "cannot protect the code: %s", strerror(errno));
		goto out;
	}
	*out = jm;
	jm = NULL;
	rc = 0;
out:
	wasm_jit_elf_free(jm);
	link_release(&L);
	return rc;
}

int wasm_jit_elf_lookup(const struct wasm_jit_module *jm, uint32_t i, void **fn,
			void (**wrap)(void *, uint64_t *))
{
	if (!jm || i >= jm->n)
		return -1;
	*fn = jm->fns[i];
	*wrap = (void (*)(void *, uint64_t *))jm->wraps[i];
	return 0;
}

uint32_t wasm_jit_elf_nfuncs(const struct wasm_jit_module *jm)
{
	return jm ? jm->n : 0;
}

void wasm_jit_elf_keep_object(struct wasm_jit_module *jm, uint8_t *obj, size_t len, bool from_cache)
{
	free(jm->obj);
	jm->obj = obj;
	jm->obj_len = obj ? len : 0;
	jm->from_cache = from_cache;
}

const uint8_t *wasm_jit_elf_object(const struct wasm_jit_module *jm, size_t *len, bool *from_cache)
{
	*len = jm ? jm->obj_len : 0;
	*from_cache = jm && jm->from_cache;
	return jm ? jm->obj : NULL;
}
