/* text/grammar — the compiled form the parser (grammar_parse.c) writes and
 * the matcher (grammar_match.c) walks. Private to those two. */
#ifndef SLM_GRAMMAR_INTERNAL_H
#define SLM_GRAMMAR_INTERNAL_H

#include "text/grammar.h"

/* One element of a rule body. A rule is its alternatives one after the
 * other, each ended by G_ALT but the last, ended by G_END. */
enum {
    G_END = 0, /* end of the rule's last alternative */
    G_ALT = 1, /* end of an alternative; another follows */
    G_REF = 2, /* v = rule index */
    G_CHR = 3  /* v = class index: one code point of the class */
};

typedef struct gelem {
    uint32_t type, v;
} gelem;

/* A character class: n ranges [lo, hi] at rng[2 * off ..]; neg: the
 * complement (`.` is the complement of nothing). */
typedef struct gclass {
    uint32_t off, n, neg;
} gclass;

struct slm_grammar {
    gelem *el;            /* [n_el] all rule bodies */
    uint32_t n_el;
    uint32_t *rule_start; /* [n_rules] index in el of each rule's first element */
    uint32_t n_rules;
    uint32_t root;        /* the rule `root` */
    gclass *cls;          /* [n_cls] */
    uint32_t n_cls;
    uint32_t *rng;        /* [2 * n_rng] lo, hi pairs */
    uint32_t n_rng;
    uint32_t *alt_off;    /* [n_rules + 1] rule r's alternatives: alts[alt_off[r] .. alt_off[r + 1]) */
    uint32_t *alts;       /* [n_alts] index in el of each alternative's first element */
    uint32_t n_alts;
};

static inline int g_is_end(const gelem *e) { return e->type == G_END || e->type == G_ALT; }

#endif
