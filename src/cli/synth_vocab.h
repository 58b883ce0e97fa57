/* staticlm synth's vocabulary (synth_vocab.c), private to cli/. */
#ifndef SLM_CLI_SYNTH_VOCAB_H
#define SLM_CLI_SYNTH_VOCAB_H

#include <stdint.h>

#include "format/gguf.h"

#define SYNTH_SPM_BASE 259   /* <unk>, <s>, </s> and the 256 byte tokens */
#define SYNTH_WPM_MIN 292   /* WordPiece: [PAD], 99 unused, [UNK] [CLS] [SEP] [MASK], 94 + 94 ASCII pieces */
#define SYNTH_MAX_SPECIAL 16 /* special-id keys (and eos_token_ids entries) a BPE vocabulary may carry */

typedef struct vocab {
    int n;
    char **str;      /* [n] NUL-terminated */
    uint64_t *len;   /* [n] bytes */
    float *score;    /* [n]; BPE: NULL when the file has no scores */
    int32_t *type;   /* [n] GGUF token types */
    uint32_t bos, eos, unk; /* SPM */
    /* byte-level BPE (tokenizer.ggml.model "gpt2"); 0: SentencePiece */
    int bpe;
    char *pre;                /* tokenizer.ggml.pre, or NULL when the file has none */
    int n_merges;
    char **merge;             /* [n_merges] "a b", NUL-terminated */
    uint64_t *merge_len;      /* [n_merges] bytes */
    int n_ids;                /* the file's special-id keys, ids remapped to this vocabulary */
    const char *id_key[SYNTH_MAX_SPECIAL];
    uint32_t id_val[SYNTH_MAX_SPECIAL];
    int n_eos_ids;            /* tokenizer.ggml.eos_token_ids, remapped; -1: not in the file */
    uint32_t eos_ids[SYNTH_MAX_SPECIAL];
    int add_bos, add_eos;     /* -1: not in the file */
    int wpm;                  /* 1: a generated WordPiece vocabulary (vocab_wpm; tokenizer.ggml.model "bert") */
    /* a SentencePiece unigram vocabulary (tokenizer.ggml.model "t5": XLM-RoBERTa's, T5's): the
     * tokens as for SPM, its normalizer and flags copied; id_key / id_val hold its special ids */
    int ugm;
    uint8_t *charsmap;        /* tokenizer.ggml.precompiled_charsmap, or NULL */
    uint64_t n_charsmap;
    int add_space_prefix, remove_extra_ws, add_sep; /* -1: not in the file */
} vocab;

void vocab_free(vocab *v);
/* ../shared/vocab/ggml-vocab-llama-spm.gguf from the usual places, or NULL. */
const char *default_vocab_file(void);
/* A vocabulary of n tokens from a SentencePiece (llama), byte-level BPE
 * (gpt2) or unigram (t5) GGUF vocabulary: its first tokens, padded to n; 1
 * ok (else said on stderr). */
int vocab_load(vocab *v, const char *path, int n);
/* A WordPiece vocabulary of n >= SYNTH_WPM_MIN tokens, as llama.cpp's
 * converter writes BERT's (phantom space: a word-start piece "\u2581foo", a
 * continuation "##bar" as "bar", the bracketed specials as they are):
 * [PAD] 0, [unused0..98] 1..99, [UNK] 100, [CLS] 101, [SEP] 102, [MASK]
 * 103 (BERT's vocab.txt places them so), then every printable ASCII
 * character as a word start and as a continuation (any ASCII text
 * tokenizes without [UNK]), common English words and suffixes, and
 * generated distinct words and continuations to n; 1 ok (else said on
 * stderr). */
int vocab_wpm(vocab *v, int n);
/* The tokenizer.ggml.* metadata of v. */
void vocab_put(slm_gguf_writer *w, const vocab *v);

#endif
