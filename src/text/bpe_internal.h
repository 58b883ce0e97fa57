/* Internal to the byte-level BPE tokenizer: the struct and what its files
 * share. Not for other users (they see text/bpe.h).
 *
 *   bpe.c         tables (string -> id, merges), finishing a loaded
 *                 vocabulary (specials, byte tokens, decoded pieces),
 *                 decoding and accessors
 *   bpe_pretok.c  the named pre-tokenizers' regexes, compiling them
 *                 (PCRE2) and splitting text into pre-tokens under
 *                 work limits sized to the text
 *   bpe_vocab.c   loading from GGUF metadata
 *   bpe_json.c    loading from a Hugging Face tokenizer.json
 *   bpe_encode.c  special-token partition and the merge engine
 *   bpe_save.c    the blob's serialized form, written and read back
 */
#ifndef SLM_BPE_INTERNAL_H
#define SLM_BPE_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "text/bpe.h"

#define BPE_MAX_VOCAB (1 << 24)
#define BPE_MAX_MERGES (1 << 25)
#define BPE_MAX_TOKEN_LEN 65536
#define BPE_MAX_REGEX 16
#define BPE_MAX_REGEX_LEN 8192

enum { PREPEND_NEVER = 0, PREPEND_ALWAYS = 1, PREPEND_FIRST = 2 };

struct slm_bpe {
    int n_vocab;
    char *blob;            /* token strings, each NUL-terminated */
    uint32_t *off, *len;   /* [n_vocab] */
    uint8_t *type;         /* [n_vocab] SLM_BPE_TT_* */
    int32_t *hash;         /* string -> id, open addressing, -1 empty */
    uint32_t hash_mask;
    uint32_t max_len;

    int n_merges;
    int32_t *merge_l, *merge_r; /* [n_merges] ids; rank = index */
    int32_t *merge_res;         /* [n_merges] id of the concatenation, -1 if none */
    uint64_t *mkey;             /* (l << 32 | r) + 1; 0 empty */
    int32_t *mrank;
    uint32_t mmask;

    int bos, eos, eot, unk, pad;
    int add_bos, add_eos;
    int32_t *special; /* ids split out before BPE, longest first */
    int n_special;

    /* pre-tokenizer and mode */
    int byte_level;      /* 1: GPT-2 byte-to-unicode symbols; 0: SentencePiece-flavoured */
    int ignore_merges;   /* emit a pre-token that is a token whole */
    int add_prefix_space;/* byte-level: prepend " " to text not starting with one */
    int spm_prepend;     /* PREPEND_*: "▁" before a fragment */
    int spm_split;       /* Metaspace split: pieces start at each "▁" */
    int nl_split;        /* gemma4: pieces are runs of newlines and runs of other text (llama.cpp's
                            "[^\n]+|[\n]+"); a run of newlines that is a token is that token */
    char pre_name[64];
    int n_regex;
    char *regex[BPE_MAX_REGEX];
    pcre2_code *re[BPE_MAX_REGEX];
    pcre2_general_context *gctx;

    /* limits (not serialized: set by the user of a loaded tokenizer) */
    size_t max_input;      /* longest text encode accepts, bytes */

    /* decoding */
    char *dec;             /* decoded pieces */
    uint32_t *dec_off, *dec_len;
    int32_t byte_tok[256]; /* byte-level: id of the byte's char; spm: <0xXX> */
};

/* ---- bpe.c ---- */

/* GPT-2 byte <-> unicode tables, filled by slm_bpe__alloc */
extern int16_t slm_bpe__cp_byte[324]; /* code point (< 0x144) -> byte, -1 none */
extern uint8_t slm_bpe__enc[256][2];  /* UTF-8 of byte b's code point (1 or 2 bytes) */
extern uint8_t slm_bpe__enc_len[256];

/* Length of a valid UTF-8 sequence at s (n bytes left), 0 if invalid
 * (overlong, surrogate, > U+10FFFF, truncated): PCRE2's notion of valid. */
int slm_bpe__utf8_len(const uint8_t *s, size_t n, uint32_t *cp);
uint64_t slm_bpe__fnv64(const void *p, size_t n);

static inline const char *slm_bpe__tok(const slm_bpe *t, int id) { return t->blob + t->off[id]; }

/* room for n_vocab tokens, blob_size bytes of strings (NULs included) */
slm_bpe *slm_bpe__alloc(int n_vocab, uint64_t blob_size);
char *slm_bpe__blob(slm_bpe *t);
void slm_bpe__set_token(slm_bpe *t, int id, uint32_t off, uint32_t len, int type);
/* the string -> id table, once every token is set */
slm_status slm_bpe__index(slm_bpe *t, const char *name, slm_err *err);
int slm_bpe__lookup(const slm_bpe *t, const char *s, size_t n);
/* rank of the merge (l, r), -1 if none */
int slm_bpe__merge_rank(const slm_bpe *t, int l, int r);
/* takes ownership of l and r (slm_malloc'd, n entries) */
slm_status slm_bpe__set_merges(slm_bpe *t, int32_t *l, int32_t *r, int n);
void slm_bpe__set_specials(slm_bpe *t, int bos, int eos, int eot, int unk, int pad, int add_bos, int add_eos);
void slm_bpe__set_mode(slm_bpe *t, int byte_level, int ignore_merges, int add_prefix_space, int spm_prepend,
                       int spm_split, const char *pre_name);
/* tables, specials, pieces, regexes; frees nothing on failure */
slm_status slm_bpe__finish(slm_bpe *t, const char *name, slm_err *err);

/* ---- bpe_pretok.c ---- */

/* A named GGUF pre-tokenizer (tokenizer.ggml.pre). */
typedef struct slm_bpe_pre {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    int ignore_merges, add_bos, no_bos;
    const char *re[7];
} slm_bpe_pre;

const slm_bpe_pre *slm_bpe__find_pre(const char *s, size_t n);
/* name the tokenizer after pname, take p's regexes and ignore_merges */
slm_status slm_bpe__set_pre(slm_bpe *t, const slm_bpe_pre *p, const char *pname, size_t pn, const char *name,
                            slm_err *err);
/* the regexes of a named pre-tokenizer ("gpt-2", ...) */
slm_status slm_bpe__add_pre(slm_bpe *t, const char *pre, const char *name, slm_err *err);
slm_status slm_bpe__add_regex(slm_bpe *t, const char *re, size_t n, const char *name, slm_err *err);
/* compile every regex (slm_bpe__finish calls it) */
slm_status slm_bpe__compile_regexes(slm_bpe *t, const char *name, slm_err *err);

/* A piece list: [start, end) byte offsets, in pairs. */
typedef struct slm_bpe_pieces {
    int32_t *a;
    int n, cap;
} slm_bpe_pieces;

/* The time budget of one encode call's pre-tokenization (the merges that
 * run between fragments are not charged to it). */
typedef struct slm_bpe_budget {
    uint64_t allowed_ns; /* for the whole text */
    uint64_t spent_ns;   /* by earlier fragments */
} slm_bpe_budget;

/* the budget for a text of n bytes */
void slm_bpe__budget_init(slm_bpe_budget *b, size_t n);

/* Split text[0, n) (valid UTF-8) into pieces with the regex list; *out is
 * slm_malloc'd. Returns 0, SLM_TOK_ENOMEM, or SLM_TOK_EBUDGET when a match
 * hits its limits or the budget runs out. */
int slm_bpe__pretokenize(const slm_bpe *t, const char *text, int n, slm_bpe_pieces *out, slm_bpe_budget *b);
/* Try each regex on probe texts at load (untrusted regexes: tokenizer.json);
 * SLM_ERR_UNSUPPORTED naming the regex when one exceeds its limits. */
slm_status slm_bpe__probe_regexes(const slm_bpe *t, const char *name, slm_err *err);

#endif
