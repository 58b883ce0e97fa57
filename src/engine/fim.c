/* Fill-in-the-middle: a code model's FIM tokens (slm_fim_get), read as
 * llama.cpp reads them: the GGUF keys tokenizer.ggml.fim_{pre,suf,mid,pad,
 * rep,sep}_token_id (and the older prefix/suffix/middle ones), else the
 * families' token texts (Qwen2.5-Coder's <|fim_prefix|>, StarCoder's
 * <fim_prefix>, CodeLlama's <PRE>, DeepSeek Coder's <｜fim▁begin｜>, ...).
 * pad, rep and sep end a reply (the stop set), as in llama.cpp. */
#include <string.h>

#include "engine/engine_internal.h"

/* The texts each FIM token goes by, in the families' vocabularies. */
static const char *const k_pre[] = {"<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<fim_prefix>", "<PRE>", "▁<PRE>", NULL};
static const char *const k_suf[] = {"<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<fim_suffix>", "<SUF>", "▁<SUF>", NULL};
static const char *const k_mid[] = {"<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<fim_middle>", "<MID>", "▁<MID>", NULL};
static const char *const k_pad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL};
static const char *const k_rep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const k_sep[] = {"<|file_sep|>", "<file_sep>", "<|file_separator|>", NULL};

static int32_t by_key(const slm_engine *e, const char *key, const char *old_key) {
    uint32_t v;
    const slm_gguf *g = e->from_blob ? NULL : e->model.gguf;
    if (g && (slm_gguf_get_u32(g, key, &v) || (old_key && slm_gguf_get_u32(g, old_key, &v))) &&
        v < (uint32_t)e->cfg.vocab_size)
        return (int32_t)v;
    return -1;
}

static int32_t by_text(const slm_engine *e, const char *const *names) {
    for (int id = 0; id < e->cfg.vocab_size; id++) {
        const char *s = slm_tok_str(e->tok, id);
        if (!s || (s[0] != '<' && s[0] != '\xe2')) continue; /* '<' or U+2581 */
        for (int k = 0; names[k]; k++)
            if (!strcmp(s, names[k])) return id;
    }
    return -1;
}

void slm_engine_fim_detect(slm_engine *e) {
    struct { int32_t *dst; const char *key, *old; const char *const *names; } w[] = {
        {&e->fim.pre, "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id", k_pre},
        {&e->fim.suf, "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id", k_suf},
        {&e->fim.mid, "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id", k_mid},
        {&e->fim.pad, "tokenizer.ggml.fim_pad_token_id", NULL, k_pad},
        {&e->fim.rep, "tokenizer.ggml.fim_rep_token_id", NULL, k_rep},
        {&e->fim.sep, "tokenizer.ggml.fim_sep_token_id", NULL, k_sep},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        *w[i].dst = by_key(e, w[i].key, w[i].old);
        if (*w[i].dst < 0 && !slm_tok_runc(e->tok)) *w[i].dst = by_text(e, w[i].names); /* not llama2.c's */
    }
}

int slm_fim_get(const slm_engine *e, slm_fim_tokens *out) {
    if (!out) return 0;
    if (!e || !e->loaded) {
        *out = (slm_fim_tokens){-1, -1, -1, -1, -1, -1};
        return 0;
    }
    *out = e->fim;
    return out->pre >= 0 && out->suf >= 0 && out->mid >= 0;
}
