/* Internal: the pieces of slm_bpe that the tokenizer.json loader
 * (bpe_json.c) builds a tokenizer with. Not for other users. */
#ifndef SLM_BPE_INTERNAL_H
#define SLM_BPE_INTERNAL_H

#include "text/bpe.h"

/* room for n_vocab tokens, blob_size bytes of strings (NULs included) */
slm_bpe *slm_bpe__alloc(int n_vocab, uint64_t blob_size);
char *slm_bpe__blob(slm_bpe *t);
void slm_bpe__set_token(slm_bpe *t, int id, uint32_t off, uint32_t len, int type);
/* the string -> id table, once every token is set */
slm_status slm_bpe__index(slm_bpe *t, const char *name, slm_err *err);
int slm_bpe__lookup(const slm_bpe *t, const char *s, size_t n);
/* takes ownership of l and r (slm_malloc'd, n entries) */
slm_status slm_bpe__set_merges(slm_bpe *t, int32_t *l, int32_t *r, int n);
void slm_bpe__set_specials(slm_bpe *t, int bos, int eos, int eot, int unk, int pad, int add_bos, int add_eos);
void slm_bpe__set_mode(slm_bpe *t, int byte_level, int ignore_merges, int add_prefix_space, int spm_prepend,
                       int spm_split, const char *pre_name);
slm_status slm_bpe__add_regex(slm_bpe *t, const char *re, size_t n, const char *name, slm_err *err);
/* the regexes of a named GGUF pre-tokenizer ("gpt-2", ...) */
slm_status slm_bpe__add_pre(slm_bpe *t, const char *pre, const char *name, slm_err *err);
/* tables, specials, pieces, regexes; frees nothing on failure */
slm_status slm_bpe__finish(slm_bpe *t, const char *name, slm_err *err);

#endif
