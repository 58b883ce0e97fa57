/* XLM-R's Unigram vocabulary for the Hugging Face folder tests
 * (test_hf_xlmr.c, test_hf_nomic.c): the pieces, scores and nmt_nfkc
 * charsmap of the committed tests/corpus/ugm/xlmr.gguf, written as the
 * folder's tokenizer.json (base64 charsmap) and tokenizer_config.json, and
 * as the t5 vocabulary llama.cpp's converter writes into a GGUF (padded
 * with [PADi] pieces up to the model's vocab_size). Include after t.h. */
#ifndef SLM_T_XLMR_VOCAB_H
#define SLM_T_XLMR_VOCAB_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "format/gguf.h"

#define UGM_DIR SLM_TESTS_DIR "/corpus/ugm"
enum { NV = 868, MASK = 867 };

static struct {
    char *tok[NV];
    uint64_t len[NV];
    float score[NV];
    int32_t type[NV];
    uint8_t *cm;
    uint64_t cm_len;
} V;

/* xlmr.gguf's pieces, scores and charsmap; id 867 ("[PAD866]" there) is
 * <mask> here, as XLM-R's tokenizer.json has it last. */
static int xlmr_load_vocab(void) {
    slm_map m;
    slm_gguf *g = NULL;
    slm_err err = {0};
    if (slm_map_file(&m, UGM_DIR "/xlmr.gguf", &err) || slm_gguf_open(&g, m.data, m.size, "xlmr.gguf", &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return 0;
    }
    slm_gguf_type et;
    uint64_t n = 0, ns = 0, nt = 0;
    const void *d, *sc = NULL, *ty = NULL, *cm = NULL;
    int ok = slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &d) && n == NV &&
             slm_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &ns, &sc) && ns == NV &&
             slm_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &nt, &ty) && nt == NV &&
             slm_gguf_get_arr(g, "tokenizer.ggml.precompiled_charsmap", &et, &V.cm_len, &cm);
    for (int i = 0; ok && i < NV; i++) {
        slm_gguf_str s;
        ok = slm_gguf_arr_str(g, "tokenizer.ggml.tokens", (uint64_t)i, &s);
        if (i == MASK) s.s = "<mask>", s.len = 6;
        V.tok[i] = malloc(s.len + 1);
        memcpy(V.tok[i], s.s, s.len);
        V.tok[i][s.len] = 0;
        V.len[i] = s.len;
        memcpy(&V.score[i], (const uint8_t *)sc + 4 * i, 4);
        memcpy(&V.type[i], (const uint8_t *)ty + 4 * i, 4);
        if (i == MASK) V.score[i] = 0, V.type[i] = 3; /* control, as the converter makes a special added token */
    }
    if (ok) {
        V.cm = malloc(V.cm_len);
        memcpy(V.cm, cm, V.cm_len);
    }
    slm_gguf_close(g);
    slm_unmap(&m);
    return ok && V.type[0] == 3 && V.type[3] == 2 && !strcmp(V.tok[2], "</s>");
}

/* base64 (this file's own encoder) */
static char *b64(const uint8_t *p, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(4 * (n / 3 + 1) + 1), *w = o;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *w++ = A[v >> 18 & 63], *w++ = A[v >> 12 & 63];
        *w++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *w++ = i + 2 < n ? A[v & 63] : '=';
    }
    *w = 0;
    return o;
}

/* s as a JSON string body */
static size_t jesc(char *o, const char *s) {
    size_t n = 0;
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') o[n++] = '\\', o[n++] = (char)c;
        else if (c < 0x20) n += (size_t)sprintf(o + n, "\\u%04x", c);
        else o[n++] = (char)c;
    }
    return n;
}

/* XLM-R's tokenizer.json: Unigram, the Precompiled + Replace normalizer,
 * Metaspace, <s> $A </s> (pairs <s> A </s></s> B </s>). Caller frees. */
static char *tokenizer_json(void) {
    char *cm = b64(V.cm, V.cm_len);
    char *j = malloc(strlen(cm) + 200000), *w = j;
    static const int added[5] = {0, 1, 2, 3, MASK};
    w += sprintf(w, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [");
    for (int i = 0; i < 5; i++)
        w += sprintf(w, "%s{\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": %s, \"rstrip\": false, "
                     "\"normalized\": false, \"special\": true}", i ? ", " : "", added[i], V.tok[added[i]],
                     i == 4 ? "true" : "false");
    w += sprintf(w, "], \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Precompiled\", "
                 "\"precompiled_charsmap\": \"%s\"}, {\"type\": \"Replace\", \"pattern\": {\"Regex\": \" {2,}\"}, "
                 "\"content\": \" \"}]}, \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\xe2\x96\x81\", "
                 "\"add_prefix_space\": true, \"prepend_scheme\": \"always\"}, \"post_processor\": {\"type\": "
                 "\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, "
                 "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}], "
                 "\"pair\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", "
                 "\"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": "
                 "\"</s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"B\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": "
                 "\"</s>\", \"type_id\": 0}}], \"special_tokens\": {\"</s>\": {\"id\": \"</s>\", \"ids\": [2], \"tokens\": "
                 "[\"</s>\"]}, \"<s>\": {\"id\": \"<s>\", \"ids\": [0], \"tokens\": [\"<s>\"]}}}, \"decoder\": {\"type\": "
                 "\"Metaspace\", \"replacement\": \"\xe2\x96\x81\", \"add_prefix_space\": true, \"prepend_scheme\": "
                 "\"always\"}, \"model\": {\"type\": \"Unigram\", \"unk_id\": 3, \"vocab\": [", cm);
    for (int i = 0; i < NV; i++) {
        w += sprintf(w, "%s[\"", i ? ", " : "");
        w += jesc(w, V.tok[i]);
        w += sprintf(w, "\", %.9g]", (double)V.score[i]);
    }
    w += sprintf(w, "], \"byte_fallback\": false}}\n");
    free(cm);
    return j;
}

static const char *const TOK_CONFIG =
    "{\"bos_token\": \"<s>\", \"clean_up_tokenization_spaces\": true, \"cls_token\": \"<s>\", \"eos_token\": \"</s>\", "
    "\"mask_token\": {\"__type\": \"AddedToken\", \"content\": \"<mask>\", \"lstrip\": true, \"normalized\": true, "
    "\"rstrip\": false, \"single_word\": false}, \"model_max_length\": 8192, \"pad_token\": \"<pad>\", \"sep_token\": "
    "\"</s>\", \"tokenizer_class\": \"XLMRobertaTokenizer\", \"unk_token\": \"<unk>\"}";

/* The t5 vocabulary as the converter writes it, padded to n_vocab (>= NV)
 * with [PADi] pieces of score -10000, unused (type 5). */
static void xlmr_gguf_vocab(slm_gguf_writer *g, int n_vocab) {
    const char **toks = malloc(sizeof *toks * (size_t)n_vocab);
    uint64_t *lens = malloc(sizeof *lens * (size_t)n_vocab);
    float *scores = malloc(sizeof *scores * (size_t)n_vocab);
    int32_t *types = malloc(sizeof *types * (size_t)n_vocab);
    char(*pad)[16] = calloc((size_t)n_vocab, 16);
    for (int i = 0; i < n_vocab; i++) {
        if (i >= NV) snprintf(pad[i], 16, "[PAD%d]", i);
        toks[i] = i < NV ? V.tok[i] : pad[i];
        lens[i] = i < NV ? V.len[i] : strlen(pad[i]);
        scores[i] = i < NV ? V.score[i] : -10000.0f;
        types[i] = i < NV ? V.type[i] : 5;
    }
    slm_gguf_set_str(g, "tokenizer.ggml.model", "t5");
    slm_gguf_set_str(g, "tokenizer.ggml.pre", "default");
    slm_gguf_set_arr_str(g, "tokenizer.ggml.tokens", toks, lens, (uint64_t)n_vocab);
    slm_gguf_set_arr(g, "tokenizer.ggml.scores", SLM_GGUF_F32, scores, (uint64_t)n_vocab);
    slm_gguf_set_arr(g, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, (uint64_t)n_vocab);
    slm_gguf_set_bool(g, "tokenizer.ggml.add_space_prefix", 1);
    slm_gguf_set_u32(g, "tokenizer.ggml.token_type_count", 1);
    slm_gguf_set_bool(g, "tokenizer.ggml.remove_extra_whitespaces", 1);
    slm_gguf_set_arr(g, "tokenizer.ggml.precompiled_charsmap", SLM_GGUF_U8, V.cm, V.cm_len);
    slm_gguf_set_u32(g, "tokenizer.ggml.bos_token_id", 0);
    slm_gguf_set_u32(g, "tokenizer.ggml.eos_token_id", 2);
    slm_gguf_set_u32(g, "tokenizer.ggml.unknown_token_id", 3);
    slm_gguf_set_u32(g, "tokenizer.ggml.seperator_token_id", 2);
    slm_gguf_set_u32(g, "tokenizer.ggml.padding_token_id", 1);
    slm_gguf_set_u32(g, "tokenizer.ggml.cls_token_id", 0);
    slm_gguf_set_u32(g, "tokenizer.ggml.mask_token_id", MASK);
    slm_gguf_set_bool(g, "tokenizer.ggml.add_bos_token", 1);
    slm_gguf_set_bool(g, "tokenizer.ggml.add_sep_token", 1);
    slm_gguf_set_bool(g, "tokenizer.ggml.add_eos_token", 1);
    /* the writer copies what it is given (slm_gguf_set_arr*) */
    free(toks), free(lens), free(scores), free(types), free(pad);
}

/* The pieces xlmr_load_vocab read. */
static void xlmr_vocab_free(void) {
    for (int i = 0; i < NV; i++) free(V.tok[i]);
    free(V.cm);
}

#endif
