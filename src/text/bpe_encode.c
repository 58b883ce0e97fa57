/* Encoding with the byte-level BPE tokenizer (see bpe.h for the steps).
 *
 * Facts taken from llama.cpp (src/llama-vocab.cpp; MIT): the special-token
 * partition (longest token first, USER_DEFINED always, CONTROL and UNKNOWN
 * only when parse_special), the merge queue order (lowest rank, then
 * leftmost), the fallback for a final symbol that is no token (the token of
 * each single byte of its byte-encoded text, else nothing).
 *
 * The merge engine: one symbol per byte (byte-level) or per character
 * (SentencePiece-flavoured), a doubly linked list, and a binary min-heap of
 * candidate pairs (rank, left position); an entry is stale when either
 * symbol changed since it was pushed (lengths compared).
 */
#include <stdlib.h>

#include "text/bpe_internal.h"
#include "text/st_partition.h"

typedef struct sym {
    int32_t start, len; /* bytes of the (normalized) text */
    int32_t prev, next;
    int32_t id;
} sym;

typedef struct cand {
    int32_t rank, left, right, llen, rlen;
} cand;

typedef struct ids_out {
    int32_t *ids;
    int cap, n;
} ids_out;

static void emit(ids_out *o, int id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* scratch for one encode call */
typedef struct work {
    sym *syms;     /* n + 4 (byte-level), 3n + 4 (normalized text) */
    cand *heap;    /* 3 * the symbols */
    int nheap;
    char *buf;     /* byte-encoded word: 2n + 4 */
    char *san;     /* sanitized / normalized text: 3n + 8 */
    int32_t *map;  /* sanitized offset -> original offset: 3n + 8 */
    char *pfx;     /* " " + text: n + 1 */
} work;

static int cand_less(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(work *w, cand c) {
    int i = w->nheap++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!cand_less(&c, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
}

static cand heap_pop(work *w) {
    cand top = w->heap[0], last = w->heap[--w->nheap];
    int i = 0, n = w->nheap;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const cand *best = &last;
        if (l < n && cand_less(&w->heap[l], best)) { m = l; best = &w->heap[l]; }
        if (r < n && cand_less(&w->heap[r], best)) m = r;
        if (m == i) break;
        w->heap[i] = w->heap[m];
        i = m;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

static void try_pair(const slm_bpe *t, work *w, int l, int r) {
    if (l < 0 || r < 0) return;
    int rank = slm_bpe__merge_rank(t, w->syms[l].id, w->syms[r].id);
    if (rank < 0) return;
    cand c = {rank, l, r, w->syms[l].len, w->syms[r].len};
    heap_push(w, c);
}

/* Merge the symbols [0, n) (already linked) and emit the result. text holds
 * the bytes the symbols span (original bytes in byte-level mode). */
static void bpe_word(const slm_bpe *t, work *w, const char *text, int n, ids_out *o) {
    w->nheap = 0;
    for (int i = 0; i + 1 < n; i++) try_pair(t, w, i, i + 1);
    while (w->nheap > 0) {
        cand c = heap_pop(w);
        sym *L = &w->syms[c.left], *R = &w->syms[c.right];
        if (L->len != c.llen || R->len != c.rlen || L->next != c.right || L->len == 0 || R->len == 0)
            continue;
        L->len += R->len;
        L->id = t->merge_res[c.rank];
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0) w->syms[R->next].prev = c.left;
        try_pair(t, w, L->prev, c.left);
        try_pair(t, w, c.left, L->next);
    }
    for (int i = 0; i >= 0 && i < n; i = w->syms[i].next) {
        sym *s = &w->syms[i];
        if (s->len == 0) continue;
        if (s->id >= 0) {
            emit(o, s->id);
            continue;
        }
        /* not a token: llama.cpp looks up each byte of the (byte-encoded)
         * text as a one-byte token; SentencePiece mode: <0xXX> tokens */
        for (int k = 0; k < s->len; k++) {
            uint8_t b = (uint8_t)text[s->start + k];
            if (t->byte_level) {
                for (int e = 0; e < slm_bpe__enc_len[b]; e++) {
                    int id = slm_bpe__lookup(t, (const char *)&slm_bpe__enc[b][e], 1);
                    if (id >= 0) emit(o, id);
                }
            } else {
                int id = t->byte_tok[b] >= 0 ? t->byte_tok[b] : t->unk;
                if (id >= 0) emit(o, id);
            }
        }
    }
}

/* One pre-token text[0, n) in byte-level mode. */
static void encode_word_bytes(const slm_bpe *t, work *w, const char *text, int n, ids_out *o) {
    if (n <= 0) return;
    if (t->ignore_merges) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            uint8_t b = (uint8_t)text[i];
            for (int e = 0; e < slm_bpe__enc_len[b]; e++) w->buf[k++] = (char)slm_bpe__enc[b][e];
        }
        int id = slm_bpe__lookup(t, w->buf, (size_t)k);
        if (id >= 0) {
            emit(o, id);
            return;
        }
    }
    for (int i = 0; i < n; i++) {
        sym *s = &w->syms[i];
        s->start = i;
        s->len = 1;
        s->prev = i - 1;
        s->next = i + 1 < n ? i + 1 : -1;
        s->id = t->byte_tok[(uint8_t)text[i]];
    }
    bpe_word(t, w, text, n, o);
}

/* One piece of normalized text in SentencePiece-flavoured mode: symbols are
 * characters (an invalid byte is one symbol); a character that is no token
 * becomes its bytes' <0xXX> tokens (byte_fallback), else unk. */
static void encode_word_spm(const slm_bpe *t, work *w, const char *text, int n, ids_out *o) {
    if (n <= 0) return;
    if (t->ignore_merges) {
        int id = slm_bpe__lookup(t, text, (size_t)n);
        if (id >= 0) {
            emit(o, id);
            return;
        }
    }
    int ns = 0;
    for (int i = 0; i < n;) {
        uint32_t cp;
        int l = slm_bpe__utf8_len((const uint8_t *)text + i, (size_t)(n - i), &cp);
        if (l == 0) l = 1;
        int id = slm_bpe__lookup(t, text + i, (size_t)l);
        if (id >= 0) {
            sym *s = &w->syms[ns++];
            s->start = i;
            s->len = l;
            s->id = id;
        } else {
            for (int k = 0; k < l; k++) {
                sym *s = &w->syms[ns++];
                s->start = i + k;
                s->len = 1;
                s->id = -1; /* resolved to <0xXX> / unk by bpe_word */
                int bt = t->byte_tok[(uint8_t)text[i + k]];
                if (bt >= 0) s->id = bt;
            }
        }
        i += l;
    }
    for (int i = 0; i < ns; i++) {
        w->syms[i].prev = i - 1;
        w->syms[i].next = i + 1 < ns ? i + 1 : -1;
    }
    bpe_word(t, w, text, ns, o);
}


/* Encode one fragment (no special tokens in it). first: the fragment starts
 * the text (SentencePiece "first" prepend scheme, ByteLevel add_prefix_space).
 * Returns 0 or an SLM_TOK_E* code. */
static int encode_fragment(const slm_bpe *t, work *w, const char *text, int n, int first, ids_out *o,
                           slm_bpe_budget *bud) {
    if (n <= 0) return 0;
    static const char ws[3] = {(char)0xe2, (char)0x96, (char)0x81}; /* U+2581 */
    if (!t->byte_level) {
        /* normalize: " " -> "▁", prepend "▁" */
        int pre = t->spm_prepend == PREPEND_ALWAYS || (t->spm_prepend == PREPEND_FIRST && first);
        char *norm = w->san;
        int k = 0;
        if (pre) {
            memcpy(norm, ws, 3);
            k = 3;
        }
        for (int i = 0; i < n; i++) {
            if (text[i] == ' ') {
                memcpy(norm + k, ws, 3);
                k += 3;
            } else
                norm[k++] = text[i];
        }
        if (t->nl_split) { /* gemma4: runs of newlines apart from the rest; such a run whole if a token */
            for (int s = 0; s < k;) {
                const int nl = norm[s] == '\n';
                int e = s;
                while (e < k && (norm[e] == '\n') == nl) e++;
                const int id = nl ? slm_bpe__lookup(t, norm + s, (size_t)(e - s)) : -1;
                if (id >= 0) emit(o, id);
                else encode_word_spm(t, w, norm + s, e - s, o);
                s = e;
            }
            return 0;
        }
        if (!t->spm_split) {
            encode_word_spm(t, w, norm, k, o);
            return 0;
        }
        /* Metaspace split: a piece starts at each "▁" */
        int s = 0;
        for (int i = 1; i <= k; i++) {
            if (i == k || (i + 3 <= k && memcmp(norm + i, ws, 3) == 0)) {
                encode_word_spm(t, w, norm + s, i - s, o);
                s = i;
            }
        }
        return 0;
    }
    const char *src = text;
    if (t->add_prefix_space && first && text[0] != ' ') {
        w->pfx[0] = ' ';
        memcpy(w->pfx + 1, text, (size_t)n);
        src = w->pfx;
        n++;
    }
    /* a valid UTF-8 copy (invalid bytes -> U+FFFD) for the regexes, with a
     * map from its offsets back to the original bytes */
    char *san = w->san;
    int32_t *map = w->map;
    int k = 0;
    for (int i = 0; i < n;) {
        uint32_t cp;
        int l = slm_bpe__utf8_len((const uint8_t *)src + i, (size_t)(n - i), &cp);
        map[k] = i;
        if (l == 0) {
            san[k++] = (char)0xef;
            san[k++] = (char)0xbf;
            san[k++] = (char)0xbd;
            i++;
        } else {
            memcpy(san + k, src + i, (size_t)l);
            k += l;
            i += l;
        }
    }
    map[k] = n;
    slm_bpe_pieces pc;
    int rc = slm_bpe__pretokenize(t, san, k, &pc, bud);
    if (rc) return rc;
    for (int p = 0; p < pc.n; p++) {
        int32_t a = map[pc.a[2 * p]], b = map[pc.a[2 * p + 1]];
        encode_word_bytes(t, w, src + a, b - a, o);
    }
    slm_xfree(pc.a);
    return 0;
}

/* A fragment of the text: raw [start, start+len) or a token. */
/* A special token's text and kind for the partition. */
static int bpe_special(const void *vocab, int32_t id, const char **s, size_t *len) {
    const slm_bpe *t = vocab;
    *s = slm_bpe__tok(t, id);
    *len = t->len[id];
    return t->type[id] == SLM_BPE_TT_CONTROL || t->type[id] == SLM_BPE_TT_UNKNOWN;
}

static int encode_impl(const slm_bpe *t, const char *text, size_t len, int add_bos, int add_eos, int parse_special,
                       const uint8_t *plain, int32_t *ids, int cap);

int slm_bpe_encode(const slm_bpe *t, const char *text, size_t len, int add_bos, int add_eos,
                   int parse_special, int32_t *ids, int cap) {
    return encode_impl(t, text, len, add_bos, add_eos, parse_special, NULL, ids, cap);
}

int slm_bpe_encode_masked(const slm_bpe *t, const char *text, size_t len, const uint8_t *plain, int add_bos,
                          int add_eos, int32_t *ids, int cap) {
    return encode_impl(t, text, len, add_bos, add_eos, 1, plain, ids, cap);
}

static int encode_impl(const slm_bpe *t, const char *text, size_t len, int add_bos, int add_eos, int parse_special,
                       const uint8_t *plain, int32_t *ids, int cap) {
    if (!t) return SLM_TOK_ENOMEM;
    if (!text) len = 0;
    if (len > t->max_input || len > (size_t)(INT32_MAX / 8)) return SLM_TOK_ETOOLONG;
    int n = (int)len;
    ids_out o = {ids, ids ? cap : 0, 0};
    if (add_bos && t->add_bos && t->bos >= 0) emit(&o, t->bos);
    slm_st_frags fr = {0};
    if (!slm_st_partition(text, n, parse_special, plain, t->special, t->n_special, bpe_special, t, &fr))
        return SLM_TOK_ENOMEM;
    work w = {0};
    int maxlen = 0;
    for (int f = 0; f < fr.n; f++)
        if (fr.a[f].id < 0 && fr.a[f].len > maxlen) maxlen = fr.a[f].len;
    int rc = 0;
    slm_bpe_budget budget;
    slm_bpe__budget_init(&budget, len);
    if (maxlen > 0) {
        size_t m = (size_t)maxlen + 1; /* + add_prefix_space */
        /* a symbol per byte (byte-level) or per byte of the normalized
         * text (" " -> 3 bytes); a heap entry per pair and 2 per merge */
        size_t ns = t->byte_level ? m + 4 : 3 * m + 4;
        w.syms = slm_malloc(ns * sizeof *w.syms);
        w.heap = slm_malloc(3 * ns * sizeof *w.heap);
        w.buf = slm_malloc(2 * m + 4);
        w.san = slm_malloc(3 * m + 8);
        w.map = slm_malloc((3 * m + 8) * sizeof *w.map);
        w.pfx = slm_malloc(m + 1);
        if (!w.syms || !w.heap || !w.buf || !w.san || !w.map || !w.pfx) rc = SLM_TOK_ENOMEM;
    }
    int first = 1;
    for (int f = 0; !rc && f < fr.n; f++) {
        if (fr.a[f].id >= 0) emit(&o, fr.a[f].id);
        else
            rc = encode_fragment(t, &w, text + fr.a[f].start, fr.a[f].len, first && fr.a[f].start == 0, &o, &budget);
        first = 0;
    }
    slm_xfree(w.syms);
    slm_xfree(w.heap);
    slm_xfree(w.buf);
    slm_xfree(w.san);
    slm_xfree(w.map);
    slm_xfree(w.pfx);
    slm_xfree(fr.a);
    if (rc) return rc;
    if (add_eos && t->add_eos && t->eos >= 0) emit(&o, t->eos);
    return o.n;
}
