/* Unigram encoder: the normalizer and the Viterbi search (ugm.h says what
 * they do, as llama.cpp's UGM tokenizer). */
#include <float.h>

#include "text/bpe.h" /* SLM_TOK_E* */
#include "text/st_partition.h"
#include "text/ugm_internal.h"

#define UGM_STEPS_PER_BYTE 256 /* the trie walk's budget, per normalized byte */
#define UGM_GROWTH 64          /* normalized bytes per input byte, at most */

/* A growable byte buffer. */
typedef struct ugm_buf {
    char *p;
    size_t n, cap, limit;
    int rc; /* 0, or the first SLM_TOK_E* */
} ugm_buf;

static void buf_put(ugm_buf *b, const char *s, size_t n) {
    if (b->rc) return;
    if (n > b->limit - b->n) {
        b->rc = SLM_TOK_EBUDGET;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = slm_realloc(b->p, nc);
        if (!np) {
            b->rc = SLM_TOK_ENOMEM;
            return;
        }
        b->p = np, b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* Length of the valid UTF-8 sequence at s (llama.cpp's unicode_cpt_from_utf8:
 * the lead byte's length and continuation bytes, no overlong or range
 * checks), 0 when invalid. */
static size_t utf8_valid(const uint8_t *s, size_t left) {
    const uint8_t b = s[0];
    if (b < 0x80) return 1;
    const size_t k = (b & 0x40) == 0 ? 0 : (b & 0x20) == 0 ? 2 : (b & 0x10) == 0 ? 3 : (b & 0x08) == 0 ? 4 : 0;
    if (!k || left < k) return 0;
    for (size_t j = 1; j < k; j++)
        if ((s[j] & 0xC0) != 0x80) return 0;
    return k;
}

/* The longest prefix of s[0, n) the charsmap maps (0: none; keys end within
 * UGM_MAX_CHARSMAP_DEPTH bytes); *repl its replacement (NUL-terminated:
 * checked at load). */
static size_t charsmap_match(const slm_ugm *u, const uint8_t *s, size_t n, const char **repl) {
    if (!u->n_xcda) return 0;
    size_t best = 0;
    uint32_t t = ugm_xcda_base(ugm_xcda(u, 0));
    const size_t lim = n < UGM_MAX_CHARSMAP_DEPTH ? n : UGM_MAX_CHARSMAP_DEPTH;
    for (size_t i = 0; i < lim && s[i]; i++) {
        const uint32_t idx = t ^ s[i];
        if (idx >= u->n_xcda) break; /* not after the load's checks */
        const uint32_t e = ugm_xcda(u, idx);
        if (ugm_xcda_lcheck(e) != s[i]) break;
        t = idx ^ ugm_xcda_base(e);
        if (ugm_xcda_leaf(e) && t < u->n_xcda) {
            const uint32_t v = ugm_xcda_value(ugm_xcda(u, t));
            if (v < u->repl_len) best = i + 1, *repl = (const char *)u->repl + v;
        }
    }
    return best;
}

/* The depth of the longest walk from the root of the user-defined tokens'
 * trie along s[0, n) (llama.cpp's get_longest_prefix: whether or not a
 * token ends there). */
static size_t user_prefix(const slm_ugm *u, const uint8_t *s, size_t n) {
    uint32_t v = 0;
    size_t i = 0;
    while (i < n) {
        const int64_t c = ugm_trie_child(&u->user, v, s[i]);
        if (c < 0) break;
        v = (uint32_t)c, i++;
    }
    return i;
}

/* llama.cpp's normalize of one fragment into b. */
static void normalize(const slm_ugm *u, const uint8_t *s, size_t n, ugm_buf *b) {
    static const char space[] = "\xe2\x96\x81"; /* U+2581 */
    const int prepend = u->meta.add_space_prefix, merge = u->meta.remove_extra_ws;
    int prepended = 0, in_word = 0;
    size_t i = 0;
    while (i < n && !b->rc) {
        const char *r;
        size_t rl, used = user_prefix(u, s + i, n - i);
        if (used) {
            r = (const char *)s + i, rl = used;
        } else if ((used = charsmap_match(u, s + i, n - i, &r)) > 0) {
            rl = strlen(r);
        } else if ((used = utf8_valid(s + i, n - i)) > 0) {
            r = (const char *)s + i, rl = used;
        } else {
            r = "\xef\xbf\xbd", rl = 3, used = 1; /* U+FFFD */
        }
        for (size_t k = 0; k < rl; k++) {
            if (r[k] != ' ') {
                if (!in_word) {
                    in_word = 1;
                    if ((prepend && !prepended) || merge) {
                        buf_put(b, space, 3);
                        prepended = 1;
                    }
                }
                buf_put(b, r + k, 1);
            } else {
                in_word = 0;
                if (!merge) buf_put(b, space, 3);
            }
        }
        i += used;
    }
}

typedef struct ugm_out {
    int32_t *ids; /* the caller's array */
    int cap;      /* its capacity */
    int n;        /* ids produced (may exceed cap) */
} ugm_out;

static void emit(ugm_out *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

typedef struct ugm_best {
    double score; /* best score of a segmentation of the text up to here */
    uint32_t from;/* where its last token starts */
    int32_t id;   /* its last token */
} ugm_best;

static size_t utf8_len(uint8_t b) { return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

/* The best segmentation of s[0, n), emitted; best and tmp: n + 1 entries
 * of scratch. 0 or SLM_TOK_EBUDGET. */
static int viterbi(const slm_ugm *u, const uint8_t *s, size_t n, ugm_best *best, int32_t *tmp, ugm_out *o) {
    if (n == 0) return 0;
    const int32_t unk = u->meta.unk;
    for (size_t i = 0; i <= n; i++) best[i] = (ugm_best){-DBL_MAX, 0, unk};
    best[0].score = 0;
    int64_t budget = (int64_t)n * UGM_STEPS_PER_BYTE + 65536;
    for (size_t at = 0; at < n;) {
        size_t cp = utf8_len(s[at]);
        if (cp > n - at) cp = n - at;
        const double here = best[at].score;
        int whole = 0; /* a token covers the code point alone */
        int64_t v = ugm_trie_child(&u->tokens, 0, s[at]);
        for (size_t p = at + 1; v >= 0; p++) {
            if (--budget < 0) return SLM_TOK_EBUDGET;
            const int32_t id = u->tokens.value[v];
            if (id >= 0) {
                if (p - at == cp) whole = 1;
                const double sc = here + (u->type[id] == UGM_USER ? 0.0 : (double)u->score[id]);
                if (sc > best[p].score) best[p] = (ugm_best){sc, (uint32_t)at, id};
            }
            if (p >= n) break;
            v = ugm_trie_child(&u->tokens, (uint32_t)v, s[p]);
        }
        if (!whole) {
            const double sc = here + (double)u->unk_score;
            if (sc > best[at + cp].score) best[at + cp] = (ugm_best){sc, (uint32_t)at, unk};
        }
        at += cp;
    }
    /* back from the end, consecutive unknowns merged (into tmp, then out in order) */
    size_t k = 0;
    int prev_unk = 0;
    for (size_t p = n;;) {
        const ugm_best *b = &best[p];
        const int is_unk = b->id == unk;
        if (!(prev_unk && is_unk)) tmp[k++] = b->id;
        if (b->from == 0) break;
        prev_unk = is_unk;
        p = b->from;
    }
    while (k > 0) emit(o, tmp[--k]);
    return 0;
}

static int ugm_special(const void *vocab, int32_t id, const char **s, size_t *len) {
    const slm_ugm *u = vocab;
    *s = u->blob + u->off[id];
    *len = u->len[id];
    return u->type[id] == UGM_CONTROL || u->type[id] == UGM_UNKNOWN;
}

int slm_ugm_encode(const slm_ugm *u, const char *text, size_t n, const uint8_t *plain, int add_bos, int add_eos,
                   int parse_special, int32_t *ids, int cap) {
    if (!u) return SLM_TOK_ENOMEM;
    if (!text) n = 0;
    if (n > (size_t)(INT32_MAX / 8)) return SLM_TOK_ETOOLONG;
    ugm_out o = {ids, ids && cap > 0 ? cap : 0, 0};
    if (add_bos && u->meta.add_bos) emit(&o, u->meta.bos);
    slm_st_frags fr = {0};
    if (!slm_st_partition(text, (int32_t)n, parse_special, plain, u->special, u->n_special, ugm_special, u, &fr))
        return SLM_TOK_ENOMEM;
    ugm_buf b = {0};
    ugm_best *best = NULL;
    int32_t *tmp = NULL;
    size_t best_cap = 0;
    int rc = 0;
    for (int f = 0; !rc && f < fr.n; f++) {
        if (fr.a[f].id >= 0) {
            emit(&o, fr.a[f].id);
            continue;
        }
        b.n = 0;
        b.limit = (size_t)fr.a[f].len * UGM_GROWTH + 4096;
        normalize(u, (const uint8_t *)text + fr.a[f].start, (size_t)fr.a[f].len, &b);
        if ((rc = b.rc)) break;
        if (b.n >= best_cap) {
            slm_xfree(best);
            slm_xfree(tmp);
            best_cap = b.n + 1;
            best = slm_malloc(best_cap * sizeof *best);
            tmp = slm_malloc(best_cap * sizeof *tmp);
            if (!best || !tmp) {
                rc = SLM_TOK_ENOMEM;
                break;
            }
        }
        if (b.n) rc = viterbi(u, (const uint8_t *)b.p, b.n, best, tmp, &o);
    }
    slm_xfree(best);
    slm_xfree(tmp);
    slm_xfree(b.p);
    slm_xfree(fr.a);
    if (rc) return rc;
    if (add_eos && u->meta.add_eos) emit(&o, u->meta.eos);
    return o.n;
}
