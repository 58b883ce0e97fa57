/* The Unigram tokenizer's insides, shared by ugm.c (vocabulary, charsmap,
 * serialization) and ugm_encode.c (normalizer, Viterbi). Private to src/text. */
#ifndef SLM_UGM_INTERNAL_H
#define SLM_UGM_INTERNAL_H

#include "text/ugm.h"

/* GGUF token types */
enum { UGM_UNDEFINED = 0, UGM_NORMAL = 1, UGM_UNKNOWN = 2, UGM_CONTROL = 3, UGM_USER = 4, UGM_UNUSED = 5, UGM_BYTE = 6 };

/* A byte trie with each node's children numbered consecutively and sorted
 * by byte (built breadth first from the sorted spellings): the child of
 * node v for byte c is a binary search in kid_byte[first[v], first[v] + nkid[v]). */
typedef struct ugm_trie {
    uint32_t n_nodes;
    uint32_t *first;   /* [n_nodes] first child */
    uint16_t *nkid;    /* [n_nodes] number of children (<= 256) */
    uint8_t *byte;     /* [n_nodes] the byte leading to the node (root: 0) */
    int32_t *value;    /* [n_nodes] token id ending here, -1 none */
} ugm_trie;

/* The child of node v for byte c, or -1. */
static inline int64_t ugm_trie_child(const ugm_trie *t, uint32_t v, uint8_t c) {
    uint32_t lo = t->first[v], hi = lo + t->nkid[v];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->byte[mid] < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < t->first[v] + t->nkid[v] && t->byte[lo] == c ? (int64_t)lo : -1;
}

struct slm_ugm {
    int n_vocab;
    slm_ugm_meta meta;
    char *blob;         /* every spelling, NUL-terminated */
    uint32_t *off;      /* [n_vocab] offset of token i in blob */
    uint32_t *len;      /* [n_vocab] its length, bytes (>= 1) */
    float *score;       /* [n_vocab] */
    uint8_t *type;      /* [n_vocab] UGM_* */
    char *strs;         /* every spelling with U+2581 -> ' ', NUL-terminated */
    uint32_t *str_off;  /* [n_vocab] offset of token i in strs */
    uint32_t *str_len;  /* [n_vocab] its length */
    uint8_t *charsmap;  /* the precompiled charsmap as given (NULL: none) */
    size_t charsmap_len;
    uint32_t n_xcda;    /* entries of its double array (u32 each, from byte 4) */
    const uint8_t *repl;/* the replacement strings */
    size_t repl_len;
    ugm_trie tokens;    /* normal, user-defined and unused tokens */
    ugm_trie user;      /* user-defined tokens */
    float unk_score;    /* lowest normal score - 10 */
    int32_t *special;   /* [n_special] control/unknown/user-defined ids, longest first */
    int n_special;
};

/* Entry i of the double array (i < n_xcda), little endian. */
static inline uint32_t ugm_xcda(const slm_ugm *u, uint32_t i) {
    const uint8_t *p = u->charsmap + 4 + 4 * (size_t)i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint32_t ugm_xcda_base(uint32_t e) { return (e >> 10) << ((e & (1u << 9)) >> 6); }
static inline uint32_t ugm_xcda_lcheck(uint32_t e) { return e & ((1u << 31) | 0xFF); }
static inline int ugm_xcda_leaf(uint32_t e) { return (e >> 8) & 1; }
static inline uint32_t ugm_xcda_value(uint32_t e) { return e & ((1u << 31) - 1); }

#define UGM_MAX_VOCAB (1 << 24)
#define UGM_MAX_LEN 65536      /* bytes of one token */
#define UGM_MAX_CHARSMAP_DEPTH 1024 /* the charsmap walk stops after this many bytes (real keys: a few dozen) */

#endif
