/* text/grammar_match.c — the matcher of compiled GBNF grammars
 * (text/grammar.h): which byte strings continue a text under a grammar.
 *
 * State: a set of parse stacks plus a partial UTF-8 character. A stack is
 * the list of grammar positions still to match, innermost on top; its top
 * is always a character class (a G_CHR element) or the stack is empty (the
 * text may end). Stacks are linked nodes {pos, up} that share their lower
 * parts; each node carries a hash of its whole chain, so that duplicate
 * stacks in a set are found through a small hash table instead of pairwise.
 * A character c advances every stack whose top class takes c (pop the top,
 * step to the next element of its sequence) and expands the result: a rule
 * reference on top is replaced by each of the rule's alternatives (the rest
 * of the sequence below it), an alternative that matches nothing uncovers
 * what lies below. Left recursion is refused when compiling, so expansion
 * ends; its work per character is still bounded (SLM_GMATCH_STEPS), and so
 * are the stacks per set and the nodes.
 *
 * The committed state's nodes sit at the bottom of the node buffer; the
 * nodes a check makes sit above and are dropped after it. Accepting bytes
 * keeps the nodes it made; once a quarter of the buffer is in use, the live
 * stacks' nodes are copied into the spare buffer (compaction) and the two
 * swapped.
 *
 * Masking a vocabulary (slm_gmatch_mask) walks the tokens in byte order: a
 * token shares the states of its common prefix with the one before it (the
 * sets of every depth are kept on a stack in `pool`), and all tokens below
 * a prefix that died are refused without work, as a walk over a trie. */
#include <stdio.h>

#include "text/grammar_internal.h"

#define MAX_TOKEN 1024          /* bytes of a vocabulary token the mask considers (longer: refused) */
#define POOL (1u << 18)         /* stack entries of the sets of all depths */
#define HT (4 * SLM_GMATCH_MAX_STACKS) /* the dedup table: a power of two */
#define MASK_STEPS (1ull << 26) /* work per mask call, all tokens together */
#define EMPTY_HASH 0x9e3779b9u

typedef struct gnode {
    uint32_t pos;  /* index in el of a G_CHR or G_REF element */
    uint32_t up;   /* the node below + 1; 0 = the bottom */
    uint32_t hash; /* of the chain from here down */
} gnode;

struct slm_gmatch {
    const slm_grammar *g;
    gnode *nodes, *spare;   /* [SLM_GMATCH_NODES]; the committed set's nodes are [0, base) */
    uint32_t base, top;
    uint32_t compacted;     /* nodes in use after the last compaction (or reset) */
    uint32_t *set, nset;    /* [SLM_GMATCH_MAX_STACKS] the committed stacks (node + 1; 0 = empty) */
    uint32_t pcp, pleft;    /* committed partial character: bits so far, continuation bytes due */
    uint32_t *work;         /* [SLM_GMATCH_NODES] expansion worklist, compaction chains */
    uint32_t *ht_stamp, *ht_val, ht_gen; /* [HT] dedup table, valid where stamp == gen */
    uint32_t *stamp, *remap, gen; /* [SLM_GMATCH_NODES] compaction: copied node + 1 */
    uint32_t *pool;         /* [POOL] the sets of depths 0..: see slm_gmatch_mask */
    /* per depth d of the token being matched: its set pool[soff[d] .. + sn[d]), pool in use
       up to pend[d], nodes in use up to ntop[d], partial character pcp[d] / pleft[d] */
    uint32_t *soff, *sn, *pend, *ntop, *dcp;
    uint8_t *dleft;
    uint32_t steps;         /* work on the current character */
    uint64_t total;         /* work in the current mask call */
    char err[200];
};

/* ---- classes ------------------------------------------------------------------------ */

static int class_has(const slm_grammar *g, uint32_t ci, uint32_t cp) {
    const gclass *c = &g->cls[ci];
    const uint32_t *r = g->rng + 2 * (size_t)c->off;
    for (uint32_t i = 0; i < c->n; i++)
        if (cp >= r[2 * i] && cp <= r[2 * i + 1]) return !c->neg;
    return (int)c->neg;
}

/* Whether the class may take some code point in [lo, hi] (a character whose
 * last bytes are still to come). */
static int class_meets(const slm_grammar *g, uint32_t ci, uint32_t lo, uint32_t hi) {
    const gclass *c = &g->cls[ci];
    const uint32_t *r = g->rng + 2 * (size_t)c->off;
    for (uint32_t i = 0; i < c->n; i++) {
        if (!c->neg && r[2 * i] <= hi && r[2 * i + 1] >= lo) return 1;
        if (c->neg && r[2 * i] <= lo && r[2 * i + 1] >= hi) return 0;
    }
    return (int)c->neg;
}

/* ---- stacks ------------------------------------------------------------------------- */

static int fail(slm_gmatch *m, const char *what) {
    snprintf(m->err, sizeof m->err, "grammar: %s", what);
    return -1;
}

static int charge(slm_gmatch *m, uint32_t n) {
    m->steps += n;
    m->total += n;
    if (m->steps > SLM_GMATCH_STEPS) return fail(m, "the grammar is too ambiguous: one character needs too many steps");
    if (m->total > MASK_STEPS) return fail(m, "the grammar is too ambiguous: a token needs too many steps");
    return 0;
}

static uint32_t mix(uint32_t pos, uint32_t below) {
    uint32_t h = pos * 0x9E3779B1u ^ (below + 0x7F4A7C15u + (below << 6) + (below >> 2));
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    return h;
}

static uint32_t hash_of(const slm_gmatch *m, uint32_t st) { return st ? m->nodes[st - 1].hash : EMPTY_HASH; }

/* A node {pos, up}: its index + 1, 0 when the buffer is full. */
static uint32_t node(slm_gmatch *m, uint32_t pos, uint32_t up) {
    if (m->top >= SLM_GMATCH_NODES) {
        fail(m, "the parse stacks outgrew their memory (nesting too deep)");
        return 0;
    }
    m->nodes[m->top] = (gnode){pos, up, mix(pos, hash_of(m, up))};
    return ++m->top;
}

static int same(slm_gmatch *m, uint32_t a, uint32_t b) {
    while (a && b) {
        if (a == b) return 1;
        if (charge(m, 1) < 0) return -1;
        const gnode *x = &m->nodes[a - 1], *y = &m->nodes[b - 1];
        if (x->pos != y->pos || x->hash != y->hash) return 0;
        a = x->up;
        b = y->up;
    }
    return a == b;
}

static void ht_clear(slm_gmatch *m) {
    if (++m->ht_gen == 0) { /* wrapped: forget every stamp */
        memset(m->ht_stamp, 0, HT * sizeof(uint32_t));
        m->ht_gen = 1;
    }
}

/* Add st to out[0..*no) unless an equal stack is there. */
static int add_unique(slm_gmatch *m, uint32_t *out, uint32_t *no, uint32_t cap, uint32_t st) {
    uint32_t k = hash_of(m, st) & (HT - 1);
    for (; m->ht_stamp[k] == m->ht_gen; k = (k + 1) & (HT - 1)) {
        int s = same(m, out[m->ht_val[k]], st);
        if (s) return s < 0 ? -1 : 0;
    }
    if (*no >= cap) return fail(m, "the grammar is too ambiguous: more parse stacks than allowed");
    m->ht_stamp[k] = m->ht_gen;
    m->ht_val[k] = *no;
    out[(*no)++] = st;
    return 0;
}

/* Expand the worklist work[0..nw) into out: until every stack's top is a
 * character class (or it is empty). */
static int expand(slm_gmatch *m, uint32_t nw, uint32_t *out, uint32_t *no, uint32_t cap) {
    const slm_grammar *g = m->g;
    while (nw) {
        if (charge(m, 1) < 0) return -1;
        const uint32_t st = m->work[--nw];
        if (!st || g->el[m->nodes[st - 1].pos].type == G_CHR) {
            if (add_unique(m, out, no, cap, st) < 0) return -1;
            continue;
        }
        const gnode nd = m->nodes[st - 1];
        const uint32_t r = g->el[nd.pos].v;
        uint32_t cont = nd.up;
        if (!g_is_end(&g->el[nd.pos + 1]) && !(cont = node(m, nd.pos + 1, nd.up))) return -1;
        if (nw + (g->alt_off[r + 1] - g->alt_off[r]) > SLM_GMATCH_NODES)
            return fail(m, "the grammar is too ambiguous: too many alternatives open at once");
        for (uint32_t a = g->alt_off[r + 1]; a-- > g->alt_off[r];) { /* reversed: the first is expanded first */
            const uint32_t p = g->alts[a];
            uint32_t s = cont;
            if (!g_is_end(&g->el[p]) && !(s = node(m, p, cont))) return -1;
            m->work[nw++] = s;
        }
    }
    return 0;
}

/* The stacks of in[0..n) that take code point cp, advanced and expanded,
 * into out (at most cap). Returns the count, or -1. */
static int64_t step(slm_gmatch *m, const uint32_t *in, uint32_t n, uint32_t cp, uint32_t *out, uint32_t cap) {
    const slm_grammar *g = m->g;
    uint32_t no = 0;
    m->steps = 0;
    ht_clear(m);
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t st = in[i];
        if (!st) continue;
        const gnode nd = m->nodes[st - 1];
        if (!class_has(g, g->el[nd.pos].v, cp)) continue;
        uint32_t next = nd.up;
        if (!g_is_end(&g->el[nd.pos + 1]) && !(next = node(m, nd.pos + 1, nd.up))) return -1;
        m->work[0] = next;
        if (expand(m, 1, out, &no, cap) < 0) return -1;
    }
    return no;
}

/* ---- life cycle ------------------------------------------------------------------- */

void slm_gmatch_reset(slm_gmatch *m) {
    if (!m) return;
    const slm_grammar *g = m->g;
    m->top = m->base = 0;
    m->pcp = m->pleft = 0;
    m->steps = 0;
    m->total = 0;
    ht_clear(m);
    uint32_t nw = 0, no = 0;
    for (uint32_t a = g->alt_off[g->root + 1]; a-- > g->alt_off[g->root];) {
        const uint32_t p = g->alts[a];
        uint32_t s = 0;
        if (!g_is_end(&g->el[p]) && !(s = node(m, p, 0))) break;
        m->work[nw++] = s;
    }
    if (expand(m, nw, m->set, &no, SLM_GMATCH_MAX_STACKS) < 0) no = 0;
    m->nset = no;
    m->base = m->compacted = m->top;
}

slm_status slm_gmatch_new(const slm_grammar *g, slm_gmatch **out, slm_err *err) {
    *out = NULL;
    slm_gmatch *m = slm_calloc(1, sizeof *m);
    if (!m) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    m->g = g;
    const size_t N = SLM_GMATCH_NODES, D = MAX_TOKEN + 1;
    m->nodes = slm_malloc(N * sizeof(gnode));
    m->spare = slm_malloc(N * sizeof(gnode));
    m->set = slm_malloc(SLM_GMATCH_MAX_STACKS * sizeof(uint32_t));
    m->work = slm_malloc(N * sizeof(uint32_t));
    m->ht_stamp = slm_calloc(HT, sizeof(uint32_t));
    m->ht_val = slm_malloc(HT * sizeof(uint32_t));
    m->stamp = slm_calloc(N, sizeof(uint32_t));
    m->remap = slm_malloc(N * sizeof(uint32_t));
    m->pool = slm_malloc(POOL * sizeof(uint32_t));
    m->soff = slm_malloc(D * sizeof(uint32_t));
    m->sn = slm_malloc(D * sizeof(uint32_t));
    m->pend = slm_malloc(D * sizeof(uint32_t));
    m->ntop = slm_malloc(D * sizeof(uint32_t));
    m->dcp = slm_malloc(D * sizeof(uint32_t));
    m->dleft = slm_malloc(D);
    if (!m->nodes || !m->spare || !m->set || !m->work || !m->ht_stamp || !m->ht_val || !m->stamp || !m->remap ||
        !m->pool || !m->soff || !m->sn || !m->pend || !m->ntop || !m->dcp || !m->dleft) {
        slm_gmatch_free(m);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    }
    slm_gmatch_reset(m);
    if (m->err[0]) {
        slm_status st = slm_errf(err, SLM_ERR_CAPACITY, "%s", m->err);
        slm_gmatch_free(m);
        return st;
    }
    *out = m;
    return SLM_OK;
}

void slm_gmatch_free(slm_gmatch *m) {
    if (!m) return;
    slm_xfree(m->nodes);
    slm_xfree(m->spare);
    slm_xfree(m->set);
    slm_xfree(m->work);
    slm_xfree(m->ht_stamp);
    slm_xfree(m->ht_val);
    slm_xfree(m->stamp);
    slm_xfree(m->remap);
    slm_xfree(m->pool);
    slm_xfree(m->soff);
    slm_xfree(m->sn);
    slm_xfree(m->pend);
    slm_xfree(m->ntop);
    slm_xfree(m->dcp);
    slm_xfree(m->dleft);
    slm_xfree(m);
}

const char *slm_gmatch_error(const slm_gmatch *m) { return m && m->err[0] ? m->err : "grammar: no error"; }

int slm_gmatch_can_end(const slm_gmatch *m) {
    if (m->pleft) return 0;
    for (uint32_t i = 0; i < m->nset; i++)
        if (!m->set[i]) return 1;
    return 0;
}

int slm_gmatch_done(const slm_gmatch *m) { return m->nset == 1 && slm_gmatch_can_end(m); }

/* ---- matching bytes --------------------------------------------------------------------- */

/* Depth 0 of the walk: the committed state. */
static void walk_start(slm_gmatch *m) {
    memcpy(m->pool, m->set, (size_t)m->nset * sizeof(uint32_t));
    m->soff[0] = 0;
    m->sn[0] = m->nset;
    m->pend[0] = m->nset;
    m->ntop[0] = m->base;
    m->dcp[0] = m->pcp;
    m->dleft[0] = (uint8_t)m->pleft;
}

/* Extend the walk from depth d (valid) by b[d..n): depths d+1..n. Returns
 * n when every byte was taken, the depth where the set died (< n: byte
 * [depth] was refused), or -1. */
static int64_t walk(slm_gmatch *m, uint32_t d, const uint8_t *b, uint32_t n) {
    m->top = m->ntop[d];
    for (; d < n; d++) {
        const uint8_t c = b[d];
        uint32_t cp = m->dcp[d], left = m->dleft[d];
        if (!left) {
            const uint32_t k = c < 0x80 ? 0 : c >= 0xC2 && c < 0xE0 ? 1 : c >= 0xE0 && c < 0xF0 ? 2 : c >= 0xF0 && c < 0xF5 ? 3 : 4;
            if (k == 4) return d;
            cp = k ? c & (0x3Fu >> k) : c;
            left = k;
        } else {
            if ((c & 0xC0) != 0x80) return d;
            /* the second byte rules out overlong forms, surrogates and code
               points past U+10FFFF (E0 A0.., ED ..9F, F0 90.., F4 ..8F) */
            if (left == 2 && cp < 16 && ((cp == 0 && c < 0xA0) || (cp == 0xD && c >= 0xA0))) return d;
            if (left == 3 && ((cp == 0 && c < 0x90) || (cp == 4 && c >= 0x90))) return d;
            cp = cp << 6 | (c & 0x3F);
            left--;
        }
        m->dcp[d + 1] = left ? cp : 0;
        m->dleft[d + 1] = (uint8_t)left;
        if (left) { /* the same set, a longer partial character */
            m->soff[d + 1] = m->soff[d];
            m->sn[d + 1] = m->sn[d];
            m->pend[d + 1] = m->pend[d];
            m->ntop[d + 1] = m->top;
            continue;
        }
        const uint32_t room = POOL - m->pend[d];
        if (room < 1) return fail(m, "the parse stacks outgrew their memory");
        int64_t k = step(m, m->pool + m->soff[d], m->sn[d], cp, m->pool + m->pend[d],
                         room < SLM_GMATCH_MAX_STACKS ? room : SLM_GMATCH_MAX_STACKS);
        if (k < 0) return -1;
        if (k == 0) return d;
        m->soff[d + 1] = m->pend[d];
        m->sn[d + 1] = (uint32_t)k;
        m->pend[d + 1] = m->pend[d] + (uint32_t)k;
        m->ntop[d + 1] = m->top;
    }
    return n;
}

/* After a whole walk to depth n: whether its state is alive (a partial
 * character needs a class that may take it). */
static int walk_alive(const slm_gmatch *m, uint32_t n) {
    const uint32_t left = m->dleft[n];
    if (!left) return m->sn[n] > 0;
    const uint32_t cp = m->dcp[n];
    uint32_t lo = cp << (6 * left), hi = lo | ((1u << (6 * left)) - 1);
    if (left == 2 && cp < 16 && lo < 0x800) lo = 0x800; /* E0: no overlong form */
    if (left == 3 && lo < 0x10000) lo = 0x10000;       /* F0 */
    if (hi > 0x10FFFF) hi = 0x10FFFF;                   /* F4 */
    const uint32_t *set = m->pool + m->soff[n];
    for (uint32_t i = 0; i < m->sn[n]; i++)
        if (set[i] && class_meets(m->g, m->g->el[m->nodes[set[i] - 1].pos].v, lo, hi)) return 1;
    return 0;
}

int slm_gmatch_check(slm_gmatch *m, const char *b, size_t n) {
    if (!n || n > MAX_TOKEN) return 0;
    m->err[0] = 0;
    m->total = 0;
    walk_start(m);
    int64_t r = walk(m, 0, (const uint8_t *)b, (uint32_t)n);
    int ok = r < 0 ? -1 : r == (int64_t)n && walk_alive(m, (uint32_t)n);
    m->top = m->base;
    return ok;
}

/* The walk's set at depth n becomes the committed state. Its nodes stay
 * where the walk made them (with those of dead stacks) until a quarter of
 * the buffer has been used since the last compaction: then the live ones
 * are copied into the spare buffer (shared parts once) and the buffers
 * swapped; a deep stack is copied once per that many nodes, not per token. */
static void commit(slm_gmatch *m, uint32_t n) {
    const uint32_t *set = m->pool + m->soff[n];
    m->nset = m->sn[n];
    m->pcp = m->dcp[n];
    m->pleft = m->dleft[n];
    if (m->top <= m->compacted + SLM_GMATCH_NODES / 4) {
        memmove(m->set, set, (size_t)m->nset * sizeof(uint32_t));
        m->base = m->top;
        return;
    }
    uint32_t nn = 0;
    if (++m->gen == 0) {
        memset(m->stamp, 0, SLM_GMATCH_NODES * sizeof(uint32_t));
        m->gen = 1;
    }
    for (uint32_t i = 0; i < m->sn[n]; i++) {
        uint32_t k = 0, x = set[i];
        while (x && m->stamp[x - 1] != m->gen) {
            m->work[k++] = x;
            x = m->nodes[x - 1].up;
        }
        uint32_t below = x ? m->remap[x - 1] : 0;
        while (k) {
            const uint32_t y = m->work[--k];
            m->spare[nn] = m->nodes[y - 1];
            m->spare[nn].up = below;
            m->stamp[y - 1] = m->gen;
            m->remap[y - 1] = below = ++nn;
        }
        m->set[i] = set[i] ? m->remap[set[i] - 1] : 0;
    }
    gnode *t = m->nodes;
    m->nodes = m->spare;
    m->spare = t;
    m->base = m->top = m->compacted = nn;
}

slm_status slm_gmatch_accept(slm_gmatch *m, const char *b, size_t n, slm_err *err) {
    if (!n) return SLM_OK;
    if (n > MAX_TOKEN) return slm_errf(err, SLM_ERR_ARG, "grammar: %zu bytes at once, more than %d", n, MAX_TOKEN);
    m->err[0] = 0;
    m->total = 0;
    walk_start(m);
    int64_t r = walk(m, 0, (const uint8_t *)b, (uint32_t)n);
    if (r < 0) {
        m->top = m->base;
        return slm_errf(err, SLM_ERR_CAPACITY, "%s", m->err);
    }
    if (r < (int64_t)n || !walk_alive(m, (uint32_t)n)) {
        m->top = m->base;
        return slm_errf(err, SLM_ERR_ARG, "grammar: the text does not continue the grammar (at byte %lld of %zu)",
                        (long long)r, n);
    }
    commit(m, (uint32_t)n);
    return SLM_OK;
}

int slm_grammar_matches(const slm_grammar *g, const char *s, size_t n) {
    slm_gmatch *m;
    slm_err err = {0};
    if (slm_gmatch_new(g, &m, &err)) return -1;
    int ok = 1;
    for (size_t i = 0; ok == 1 && i < n; i += MAX_TOKEN) {
        slm_status st = slm_gmatch_accept(m, s + i, n - i < MAX_TOKEN ? n - i : MAX_TOKEN, &err);
        ok = st == SLM_OK ? 1 : st == SLM_ERR_ARG ? 0 : -1;
    }
    if (ok == 1) ok = slm_gmatch_can_end(m);
    slm_gmatch_free(m);
    return ok;
}

/* ---- vocabularies -------------------------------------------------------------------- */

struct slm_gvocab {
    uint32_t n;
    char *bytes;      /* every token's bytes, one after the other */
    uint32_t *off, *len; /* [n] by token id */
    uint32_t *order;  /* [n] token ids sorted by their bytes */
    uint32_t *lcp;    /* [n] common prefix of order[k] with order[k - 1] (0 for k = 0) */
};

static int tok_less(const slm_gvocab *v, uint32_t a, uint32_t b) {
    const uint32_t la = v->len[a], lb = v->len[b];
    const int c = memcmp(v->bytes + v->off[a], v->bytes + v->off[b], la < lb ? la : lb);
    return c < 0 || (c == 0 && (la < lb || (la == lb && a < b)));
}

/* Bottom-up merge sort of v->order (tmp: n entries). */
static void sort_tokens(slm_gvocab *v, uint32_t *tmp) {
    uint32_t *a = v->order, *b = tmp;
    for (uint32_t w = 1; w < v->n; w *= 2) {
        for (uint32_t lo = 0; lo < v->n; lo += 2 * w) {
            uint32_t mid = lo + w < v->n ? lo + w : v->n, hi = lo + 2 * w < v->n ? lo + 2 * w : v->n;
            uint32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) b[k++] = tok_less(v, a[j], a[i]) ? a[j++] : a[i++];
            while (i < mid) b[k++] = a[i++];
            while (j < hi) b[k++] = a[j++];
        }
        uint32_t *t = a;
        a = b;
        b = t;
    }
    if (a != v->order) memcpy(v->order, a, (size_t)v->n * sizeof(uint32_t));
}

slm_status slm_gvocab_new(int n, const char *const *str, const uint32_t *len, slm_gvocab **out, slm_err *err) {
    *out = NULL;
    if (n < 0) return slm_errf(err, SLM_ERR_ARG, "grammar: vocabulary of %d tokens", n);
    slm_gvocab *v = slm_calloc(1, sizeof *v);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) total += len[i] <= MAX_TOKEN ? len[i] : 0;
    uint32_t *tmp = NULL;
    if (!v || total > UINT32_MAX || !(v->bytes = slm_malloc((size_t)total + 1)) ||
        !(v->off = slm_malloc(((size_t)n + 1) * sizeof(uint32_t))) || !(v->len = slm_malloc(((size_t)n + 1) * sizeof(uint32_t))) ||
        !(v->order = slm_malloc(((size_t)n + 1) * sizeof(uint32_t))) || !(v->lcp = slm_malloc(((size_t)n + 1) * sizeof(uint32_t))) ||
        !(tmp = slm_malloc(((size_t)n + 1) * sizeof(uint32_t)))) {
        slm_gvocab_free(v);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    }
    v->n = (uint32_t)n;
    uint32_t o = 0;
    for (int i = 0; i < n; i++) {
        const uint32_t l = len[i] <= MAX_TOKEN ? len[i] : 0; /* longer ones: never allowed */
        if (l) memcpy(v->bytes + o, str[i], l);
        v->off[i] = o;
        v->len[i] = l;
        v->order[i] = (uint32_t)i;
        o += l;
    }
    sort_tokens(v, tmp);
    slm_xfree(tmp);
    for (uint32_t k = 0; k < v->n; k++) {
        uint32_t l = 0;
        if (k) {
            const uint32_t a = v->order[k - 1], b = v->order[k];
            const uint32_t mx = v->len[a] < v->len[b] ? v->len[a] : v->len[b];
            while (l < mx && v->bytes[v->off[a] + l] == v->bytes[v->off[b] + l]) l++;
        }
        v->lcp[k] = l;
    }
    *out = v;
    return SLM_OK;
}

void slm_gvocab_free(slm_gvocab *v) {
    if (!v) return;
    slm_xfree(v->bytes);
    slm_xfree(v->off);
    slm_xfree(v->len);
    slm_xfree(v->order);
    slm_xfree(v->lcp);
    slm_xfree(v);
}

int slm_gmatch_mask(slm_gmatch *m, const slm_gvocab *v, uint8_t *allowed) {
    m->err[0] = 0;
    m->total = 0;
    walk_start(m);
    uint32_t valid = 0, dead = UINT32_MAX; /* depths valid for the last token; where it died */
    int count = 0;
    for (uint32_t k = 0; k < v->n; k++) {
        const uint32_t t = v->order[k], n = v->len[t], l = v->lcp[k];
        allowed[t] = 0;
        if (valid > l) valid = l;
        if (!n) continue;
        if (dead <= l) continue; /* a prefix this token shares died */
        dead = UINT32_MAX;
        int64_t r = walk(m, valid, (const uint8_t *)v->bytes + v->off[t], n);
        if (r < 0) {
            m->top = m->base;
            return -1;
        }
        if (r < (int64_t)n) {
            valid = (uint32_t)r;
            dead = (uint32_t)r + 1;
            continue;
        }
        valid = n;
        if (walk_alive(m, n)) {
            allowed[t] = 1;
            count++;
        }
    }
    m->top = m->base;
    return count;
}
