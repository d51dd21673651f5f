/* SPDX-License-Identifier: MIT */
/* "Did you mean": the nearest known word to a mistyped verb, flag or enum
 * value, by edit distance (Damerau's optimal string alignment: a swap of
 * two neighbours, as in 'versoin', counts as one edit). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Edits are counted on at most this many characters: longer words are no
 * typo of a flag or an enum value. */
#define SUGGEST_MAX 64

static size_t min3(size_t a, size_t b, size_t c)
{
	size_t m = a < b ? a : b;
	return m < c ? m : c;
}

static size_t distance(const char *a, size_t la, const char *b, size_t lb)
{
	/* three rows of the (la+1) x (lb+1) table: the one before the
	 * previous is what a transposition looks back to */
	size_t r0[SUGGEST_MAX + 1], r1[SUGGEST_MAX + 1], r2[SUGGEST_MAX + 1];
	size_t *pp = r0, *p = r1, *c = r2;
	for (size_t j = 0; j <= lb; j++)
		p[j] = j;
	for (size_t i = 1; i <= la; i++) {
		c[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
			c[j] = min3(p[j] + 1, c[j - 1] + 1, p[j - 1] + cost);
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    pp[j - 2] + 1 < c[j])
				c[j] = pp[j - 2] + 1;
		}
		size_t *t = pp;
		pp = p;
		p = c;
		c = t;
	}
	return p[lb];
}

const char *cli_suggest(const char *word, const char *const *known, size_t n)
{
	size_t lw = strnlen(word, SUGGEST_MAX + 1);
	if (!lw || lw > SUGGEST_MAX)
		return NULL;
	/* close enough to be a typo, not another word: at most a third of
	 * the word's length, and never more than 3 */
	size_t best_d = lw / 3 < 3 ? (lw / 3 ? lw / 3 : 1) : 3;
	const char *best = NULL;
	bool tie = false;
	for (size_t i = 0; i < n; i++) {
		size_t lk = strlen(known[i]);
		if (!lk || lk > SUGGEST_MAX || !strcmp(known[i], word))
			continue;
		size_t d = distance(word, lw, known[i], lk);
		if (d < best_d || (d == best_d && !best)) {
			best = known[i];
			best_d = d;
			tie = false;
		} else if (d == best_d && strcmp(best, known[i])) {
			tie = true;
		}
	}
	/* two candidates as near: name neither rather than guess */
	return tie ? NULL : best;
}

const char *cli_suggest_list(const char *word, const char *bar_list, char *buf, size_t len)
{
	/* a '|'-joined list, split in place into a copy */
	const char *known[32];
	size_t n = 0;
	if (strlen(bar_list) >= len)
		return NULL;
	strcpy(buf, bar_list);
	for (char *sv = NULL, *t = strtok_r(buf, "|", &sv); t && n < 32;
	     t = strtok_r(NULL, "|", &sv))
		known[n++] = t;
	return cli_suggest(word, known, n);
}
