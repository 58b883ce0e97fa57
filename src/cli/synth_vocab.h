/* staticlm synth's vocabulary (synth_vocab.c), private to cli/. */
#ifndef SLM_CLI_SYNTH_VOCAB_H
#define SLM_CLI_SYNTH_VOCAB_H

#include <stdint.h>

#define SYNTH_SPM_BASE 259 /* <unk>, <s>, </s> and the 256 byte tokens */

typedef struct vocab {
    int n;
    char **str;      /* [n] NUL-terminated */
    uint64_t *len;   /* [n] bytes */
    float *score;    /* [n] */
    int32_t *type;   /* [n] GGUF token types */
    uint32_t bos, eos, unk;
} vocab;

void vocab_free(vocab *v);
/* ../shared/vocab/ggml-vocab-llama-spm.gguf from the usual places, or NULL. */
const char *default_vocab_file(void);
/* The first min(n, file) tokens of an SPM vocabulary, padded to n; 1 ok (else said on stderr). */
int vocab_load(vocab *v, const char *path, int n);

#endif
