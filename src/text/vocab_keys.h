/* Optional keys of a GGUF vocabulary (tokenizer.ggml.*), read alike by the
 * WordPiece and Unigram loaders: a token id and a bool, each refused with
 * the file's name and the key when present but not what it should be. */
#ifndef SLM_TEXT_VOCAB_KEYS_H
#define SLM_TEXT_VOCAB_KEYS_H

#include "common/common.h"
#include "format/gguf.h"

/* Key `key` as a token id below n into *id. Absent: def, when def is below
 * n; a def not below n is an error when `required_default`, else it means
 * none (-1), as llama.cpp disables such a default. */
slm_status slm_vocab_key_id(const slm_gguf *g, const char *name, const char *key, int n, int def, int required_default,
                            int *id, slm_err *err);
/* Key `key` as a bool into *v, left as it is when absent. */
slm_status slm_vocab_key_flag(const slm_gguf *g, const char *name, const char *key, int *v, slm_err *err);

/* A printable copy of s for messages (printable ASCII, others '?', at most
 * 40 bytes shown, then "..."), into buf of cap bytes. */
const char *slm_vocab_shown(const char *s, char *buf, size_t cap);

#endif
