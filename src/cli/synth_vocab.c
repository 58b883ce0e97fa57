/* staticlm synth's vocabulary: the first tokens of a SentencePiece GGUF
 * vocabulary, padded with unique normal tokens (synth.c says why). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/synth_vocab.h"
#include "common/common.h"
#include "format/gguf.h"

/* ---- the vocabulary ------------------------------------------------------ */

void vocab_free(vocab *v) {
    if (v->str)
        for (int i = 0; i < v->n; i++) slm_xfree(v->str[i]);
    slm_xfree(v->str);
    slm_xfree(v->len);
    slm_xfree(v->score);
    slm_xfree(v->type);
    memset(v, 0, sizeof *v);
}

const char *default_vocab_file(void) {
    static const char *const cands[] = {"../shared/vocab/ggml-vocab-llama-spm.gguf",
                                        "shared/vocab/ggml-vocab-llama-spm.gguf",
                                        "../../shared/vocab/ggml-vocab-llama-spm.gguf"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        FILE *f = fopen(cands[i], "rb");
        if (f) {
            fclose(f);
            return cands[i];
        }
    }
    return NULL;
}

/* The first min(n, file) tokens of an SPM vocabulary, padded to n. */
int vocab_load(vocab *v, const char *path, int n) {
    slm_err err;
    memset(&err, 0, sizeof err);
    slm_map map;
    memset(&map, 0, sizeof map);
    slm_gguf *g = NULL;
    int ok = 0;
    memset(v, 0, sizeof *v);
    if (slm_map_file(&map, path, &err) || slm_gguf_open(&g, map.data, map.size, slm_basename(path), &err)) {
        fprintf(stderr, "staticlm synth: %s\n", err.msg);
        goto done;
    }
    slm_gguf_str model;
    slm_gguf_type et;
    uint64_t n_tok = 0, n_sc = 0, n_ty = 0;
    const void *sc = NULL, *ty = NULL;
    if (!slm_gguf_get_str(g, "tokenizer.ggml.model", &model) || !slm_gguf_str_eq(model, "llama")) {
        fprintf(stderr, "staticlm synth: %s: not a SentencePiece (tokenizer.ggml.model = llama) vocabulary\n", path);
        goto done;
    }
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok, NULL) || et != SLM_GGUF_STRING ||
        !slm_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n_sc, &sc) || et != SLM_GGUF_F32 || n_sc != n_tok ||
        !slm_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &n_ty, &ty) || et != SLM_GGUF_I32 || n_ty != n_tok ||
        n_tok < SYNTH_SPM_BASE) {
        fprintf(stderr, "staticlm synth: %s: tokens, scores and token_type (at least %d) are needed\n", path,
                SYNTH_SPM_BASE);
        goto done;
    }
    v->bos = 1, v->eos = 2, v->unk = 0;
    slm_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &v->bos);
    slm_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &v->eos);
    slm_gguf_get_u32(g, "tokenizer.ggml.unknown_token_id", &v->unk);
    if (v->bos >= (uint32_t)n || v->eos >= (uint32_t)n || v->unk >= (uint32_t)n) {
        fprintf(stderr, "staticlm synth: %s: special token ids beyond the vocabulary size %d\n", path, n);
        goto done;
    }
    v->n = n;
    v->str = slm_calloc((size_t)n, sizeof *v->str);
    v->len = slm_calloc((size_t)n, sizeof *v->len);
    v->score = slm_calloc((size_t)n, sizeof *v->score);
    v->type = slm_calloc((size_t)n, sizeof *v->type);
    if (!v->str || !v->len || !v->score || !v->type) goto nomem;
    float min_score = 0.0f;
    for (int i = 0; i < n; i++) {
        if ((uint64_t)i < n_tok) {
            slm_gguf_str s;
            if (!slm_gguf_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)i, &s)) goto done;
            if (!(v->str[i] = slm_malloc((size_t)s.len + 1))) goto nomem;
            memcpy(v->str[i], s.s, (size_t)s.len);
            v->str[i][s.len] = 0;
            v->len[i] = s.len;
            memcpy(&v->score[i], (const char *)sc + 4 * (size_t)i, 4);
            memcpy(&v->type[i], (const char *)ty + 4 * (size_t)i, 4);
            if (v->score[i] < min_score) min_score = v->score[i];
        } else {
            char buf[32];
            int len = snprintf(buf, sizeof buf, "<synth_%d>", i);
            if (!(v->str[i] = slm_strdup(buf))) goto nomem;
            v->len[i] = (uint64_t)len;
            v->score[i] = min_score - 1.0f - (float)(i - (int)n_tok);
            v->type[i] = 1; /* normal */
        }
    }
    ok = 1;
    goto done;
nomem:
    fprintf(stderr, "staticlm synth: out of memory for %d tokens\n", n);
done:
    if (!ok) vocab_free(v);
    slm_gguf_close(g);
    slm_unmap(&map);
    return ok;
}

