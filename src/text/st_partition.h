/* The special-token partition the BPE and WordPiece encoders share
 * (llama.cpp's tokenizer_st_partition): special tokens, longest first, each
 * splitting every text fragment at each leftmost, non-overlapping
 * occurrence; control and unknown tokens only with parse_special, and never
 * where a byte of the match is plain (message content, slm_tok_encode_masked). */
#ifndef SLM_ST_PARTITION_H
#define SLM_ST_PARTITION_H

#include <stddef.h>
#include <stdint.h>

typedef struct slm_st_frag {
    int32_t id;         /* a special token, or -1 for text */
    int32_t start, len; /* text: its bytes */
} slm_st_frag;

typedef struct slm_st_frags {
    slm_st_frag *a;
    int n, cap;
} slm_st_frags;

/* Special token id's text (*s, *len; len > 0) and whether it is a control or
 * unknown token (1) or user-defined (0). */
typedef int (*slm_st_token_fn)(const void *vocab, int32_t id, const char **s, size_t *len);

/* text[0, n) into *out (its a freed by the caller with slm_xfree): the
 * special ids special[0, n_special) longest first. 0 when out of memory. */
int slm_st_partition(const char *text, int32_t n, int parse_special, const uint8_t *plain, const int32_t *special,
                     int n_special, slm_st_token_fn tok, const void *vocab, slm_st_frags *out);

#endif
