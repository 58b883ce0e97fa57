/* A Hugging Face folder against its GGUF twin (test_hf_bert.c,
 * test_hf_xlmr.c): an engine with embeddings for either, and the check that
 * both open to the same config and the same tensors (name, type, shape,
 * bytes). Include after t.h. */
#ifndef SLM_T_HF_TWIN_H
#define SLM_T_HF_TWIN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/model.h"
#include "staticlm.h"
#include "t_engine.h"

/* Embeddings on, programs of ctx rows and a small variant, an f32 KV, 2 threads. */
static inline slm_options twin_opts(int ctx, int small_variant) {
    slm_options o = slm_default_options();
    o.embeddings = 1;
    o.max_prompt_len = ctx;
    o.prefill_variants[0] = small_variant;
    o.kv_type = SLM_KV_F32;
    o.n_threads = 2;
    return o;
}

/* path loaded with twin_opts. */
static inline slm_engine *twin_load(const char *path, int ctx, int small_variant) {
    const slm_options o = twin_opts(ctx, small_variant);
    return t_load(path, &o);
}

static inline void twin_same_model(const char *dir, const char *gguf) {
    slm_model_file a, b;
    slm_err err = {0};
    CHECKF(slm_model_open(&a, dir, &err) == SLM_OK, "%s", err.msg);
    if (err.status) return;
    CHECKF(slm_model_open(&b, gguf, &err) == SLM_OK, "%s", err.msg);
    if (err.status) {
        slm_model_close(&a);
        return;
    }
    CHECKF(!memcmp(&a.cfg, &b.cfg, sizeof a.cfg), "%s: config differs from the GGUF's (eps %g/%g, ctx %d/%d, vocab %d/%d, "
           "encoder %d/%d, qkv_bias %d/%d, tied %d/%d)", dir, (double)a.cfg.norm_eps, (double)b.cfg.norm_eps,
           a.cfg.context_len, b.cfg.context_len, a.cfg.vocab_size, b.cfg.vocab_size, a.cfg.encoder, b.cfg.encoder,
           a.cfg.qkv_bias, b.cfg.qkv_bias, a.cfg.tied_embeddings, b.cfg.tied_embeddings);
    CHECKF(a.n_tensors == b.n_tensors, "%s: %d tensors, the GGUF %d", dir, a.n_tensors, b.n_tensors);
    for (int i = 0; i < b.n_tensors; i++) {
        const slm_tensor *tb = &b.tensors[i], *ta = slm_model_tensor(&a, tb->name);
        CHECKF(ta != NULL, "%s: no %s", dir, tb->name);
        if (!ta) continue;
        CHECKF(ta->type == tb->type && ta->n_dims == tb->n_dims && !memcmp(ta->ne, tb->ne, sizeof ta->ne) &&
               ta->nbytes == tb->nbytes && !memcmp(ta->data, tb->data, (size_t)tb->nbytes),
               "%s: tensor %s differs (rows %lld / %lld)", dir, tb->name, (long long)ta->ne[1], (long long)tb->ne[1]);
    }
    slm_model_close(&a);
    slm_model_close(&b);
}

/* A BERT tokenizer.json at path: WordPiece over vocab[0..n) (ids 0..4 the
 * special [PAD] [UNK] [CLS] [SEP] [MASK]), BertNormalizer (lowercase or
 * not), [CLS] $A [SEP]. */
static inline void twin_wp_tokenizer(const char *path, const char *const *vocab, int n, int lowercase) {
    char *j = malloc(16384);
    size_t k = 0;
    k += (size_t)sprintf(j + k, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [");
    for (int i = 0; i < 5; i++)
        k += (size_t)sprintf(j + k, "%s{\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": false, "
                             "\"rstrip\": false, \"normalized\": false, \"special\": true}", i ? ", " : "", i, vocab[i]);
    k += (size_t)sprintf(j + k, "], \"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": true, "
                         "\"handle_chinese_chars\": true, \"strip_accents\": null, \"lowercase\": %s}, "
                         "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}, "
                         "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": ["
                         "{\"SpecialToken\": {\"id\": \"[CLS]\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, "
                         "{\"SpecialToken\": {\"id\": \"[SEP]\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": {"
                         "\"[CLS]\": {\"id\": \"[CLS]\", \"ids\": [2], \"tokens\": [\"[CLS]\"]}, "
                         "\"[SEP]\": {\"id\": \"[SEP]\", \"ids\": [3], \"tokens\": [\"[SEP]\"]}}}, "
                         "\"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": true}, "
                         "\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", "
                         "\"continuing_subword_prefix\": \"##\", \"max_input_chars_per_word\": 100, \"vocab\": {",
                         lowercase ? "true" : "false");
    for (int i = 0; i < n; i++) k += (size_t)sprintf(j + k, "%s\"%s\": %d", i ? ", " : "", vocab[i], i);
    k += (size_t)sprintf(j + k, "}}}\n");
    CHECK(t_write_file(path, j, k));
    free(j);
}

#endif
