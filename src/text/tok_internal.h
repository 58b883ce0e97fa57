/* The tokenizer handle's insides, shared by tokenizer.c (loaders, encoder)
 * and tok_save.c (serialization). Private to src/text. */
#ifndef SLM_TOK_INTERNAL_H
#define SLM_TOK_INTERNAL_H

#include "text/bpe.h"
#include "text/tokenizer.h"
#include "text/ugm.h"
#include "text/wpm.h"

/* TOK_BPE: byte-level BPE (bpe.c) behind the same interface; only n_vocab,
 * bos, eos, eot and the bpe fields below are used. TOK_WPM: WordPiece
 * (wpm.c) the same way, with n_vocab, bos ([CLS]), eos, unk and wpm; TOK_UGM:
 * Unigram (ugm.c), with n_vocab, bos and eos (-1: none), unk, add_space_prefix,
 * byte_piece and ugm. */
enum { TOK_RUNC = 0, TOK_SPM = 1, TOK_BPE = 2, TOK_WPM = 3, TOK_UGM = 4 };

/* SentencePiece token types (as GGUF tokenizer.ggml.token_type stores them). */
enum {
    TT_UNDEFINED = 0, TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3,
    TT_USER_DEFINED = 4, TT_UNUSED = 5, TT_BYTE = 6
};

#define TOK_MAX_VOCAB (1 << 24)   /* sane upper bound on vocabulary size */
#define TOK_MAX_LEN 65536         /* sane upper bound on one token, bytes */

struct slm_tokenizer {
    int n_vocab;            /* number of tokens */
    int mode;               /* TOK_RUNC, TOK_SPM, TOK_BPE or TOK_WPM */
    int bos, eos, unk;      /* special token ids (always in range) */
    int add_space_prefix;   /* 1: prepend " " to non-empty text */
    int space_id;           /* id of " " (run.c's dummy prefix), -1 if none */
    uint32_t max_len;       /* longest token string, bytes */
    char *blob;             /* every token string, each NUL-terminated */
    uint32_t *off;          /* [n_vocab] offset of token i in blob, bytes */
    uint32_t *len;          /* [n_vocab] length of token i, bytes (no NUL) */
    float *score;           /* [n_vocab] merge score (higher merges first) */
    uint8_t *type;          /* [n_vocab] SentencePiece type (TT_*) */
    int16_t *byte_val;      /* [n_vocab] byte of a "<0xXX>" byte token, else -1 */
    int32_t *hash;          /* [hash_mask+1] open-addressing table of ids, -1 empty */
    uint32_t hash_mask;     /* table size - 1 (size is a power of two) */
    int32_t byte_id[256];   /* id emitted for raw byte b by byte fallback */
    int32_t *special;       /* [n_special] user-defined ids (TOK_SPM), longest first */
    int n_special;          /* number of user-defined tokens */
    uint8_t special_first[256]; /* 1: some user-defined token starts with this byte */
    char byte_piece[256][2]; /* decode output for byte tokens: byte, NUL */
    /* TOK_BPE */
    slm_bpe *bpe;           /* the byte-level BPE tokenizer */
    /* TOK_WPM */
    slm_wpm *wpm;           /* the WordPiece tokenizer */
    /* TOK_UGM */
    slm_ugm *ugm;           /* the Unigram tokenizer */
    char *pieces;           /* every decoded piece, NUL-terminated */
    uint32_t *piece_off;    /* [n_vocab] offset of piece i in pieces */
    uint8_t *lead_space;    /* [n_vocab] 1: the piece's leading space is a dummy prefix
                               (SentencePiece-flavoured vocabularies) */
    int eot;                /* end-of-turn id, -1 if none */
    int hf_pair;            /* TOK_UGM from a tokenizer.json: 1 + its template's add_sep (0: not known) */
    size_t max_input;       /* longest text encode accepts, bytes */
};

static inline const char *slm_tok__s(const slm_tokenizer *t, int id) { return t->blob + t->off[id]; }
/* A tokenizer with room for n_vocab tokens and blob_size bytes of strings. */
slm_tokenizer *slm_tok__alloc(int n_vocab, uint64_t blob_size);
/* After blob/off/len/score/type are filled: the derived tables. */
slm_status slm_tok__index(slm_tokenizer *t, slm_err *err);
/* Wrap a WordPiece tokenizer (takes ownership of w, also on failure). */
slm_status slm_tok__from_wpm(slm_tokenizer **out, slm_wpm *w, slm_err *err);
/* Wrap a Unigram tokenizer (takes ownership of u, also on failure). */
slm_status slm_tok__from_ugm(slm_tokenizer **out, slm_ugm *u, slm_err *err);

#endif
