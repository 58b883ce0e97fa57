/* What a grammar costs per token (not a test):
 *   cmake --build build --target bench_grammar
 *   build/tests/bench_grammar [VOCAB.gguf ...] [--model M.gguf]
 * For each GGUF vocabulary (default: ../shared/vocab's llama-spm, 32000
 * tokens, and gpt-2, 50257): a JSON schema's grammar at four points of a
 * document (before the object, inside a string, inside a number, before a
 * boolean): the time of one full mask (slm_gmatch_mask, the tokens walked in
 * byte order), of checking every token alone (what a mask costs without the
 * shared prefixes), and of checking one token (the sampled one: the cheap
 * path). The mask's time is the fastest of 20. With --model: the wall time per slm_session_next of 200 tokens at
 * temperature 1 with and without the schema (decode included). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/common.h"
#include "format/gguf.h"
#include "staticlm.h"
#include "text/grammar.h"
#include "text/tokenizer.h"

static const char *k_schema =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":20},\"age\":{\"type\":\"integer\"},"
    "\"happy\":{\"type\":\"boolean\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":3}},"
    "\"required\":[\"name\",\"age\",\"happy\",\"tags\"],\"additionalProperties\":false}";

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int bench_vocab(const char *path, const slm_grammar *g) {
    slm_map map;
    slm_gguf *gg = NULL;
    slm_tokenizer *t = NULL;
    slm_err err = {0};
    if (slm_map_file(&map, path, &err) || slm_gguf_open(&gg, map.data, map.size, slm_basename(path), &err) ||
        slm_tok_load_gguf(&t, gg, slm_basename(path), &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    const int V = slm_tok_vocab_size(t), prev = slm_tok_bos(t) == 0 ? 1 : 0;
    const char **str = malloc((size_t)V * sizeof *str);
    uint32_t *len = malloc((size_t)V * sizeof *len);
    uint8_t *allowed = malloc((size_t)V);
    for (int i = 0; i < V; i++) {
        const int ty = slm_tok_type(t, i);
        str[i] = ty == 2 || ty == 3 ? "" : slm_tok_decode(t, prev, i);
        len[i] = (uint32_t)strlen(str[i]);
    }
    slm_gvocab *v = NULL;
    double t0 = now_ms();
    if (slm_gvocab_new(V, str, len, &v, &err)) return 1;
    printf("%s: %d tokens, vocabulary prepared in %.1f ms\n", slm_basename(path), V, now_ms() - t0);
    slm_gmatch *m = NULL;
    if (slm_gmatch_new(g, &m, &err)) return 1;
    static const char *const points[] = {"", "{\"name\": \"Ab", "{\"name\": \"Ab\", \"age\": 12",
                                         "{\"name\": \"Ab\", \"age\": 12, \"happy\": "};
    static const char *const labels[] = {"before the object", "inside a string", "inside a number", "before a boolean"};
    for (int p = 0; p < 4; p++) {
        slm_gmatch_reset(m);
        if (points[p][0] && slm_gmatch_accept(m, points[p], strlen(points[p]), &err)) return 1;
        const int reps = 20; /* the fastest of them: the machine may be shared */
        int n = 0;
        double mask_ms = 1e30;
        for (int r = 0; r < reps; r++) {
            t0 = now_ms();
            n = slm_gmatch_mask(m, v, allowed);
            const double dt = now_ms() - t0;
            if (dt < mask_ms) mask_ms = dt;
        }
        t0 = now_ms();
        int n2 = 0;
        for (int i = 0; i < V; i++) n2 += len[i] && slm_gmatch_check(m, str[i], len[i]) == 1;
        const double each_ms = now_ms() - t0;
        /* the sampled token: an allowed one (the common case of the cheap path) */
        int pick = 0;
        while (pick < V && !allowed[pick]) pick++;
        t0 = now_ms();
        const int one_reps = 10000;
        for (int r = 0; r < one_reps; r++) slm_gmatch_check(m, str[pick], len[pick]);
        const double one_us = (now_ms() - t0) * 1e3 / one_reps;
        printf("  %-18s allowed %6d (%d): mask %7.3f ms, each token alone %7.3f ms, one token %6.3f us\n", labels[p], n,
               n2, mask_ms, each_ms, one_us);
    }
    slm_gmatch_free(m);
    slm_gvocab_free(v);
    free(str);
    free(len);
    free(allowed);
    slm_tok_free(t);
    slm_gguf_close(gg);
    slm_unmap(&map);
    return 0;
}

/* Wall time per token of a session: 200 tokens at temperature 1. */
static double session_ms(slm_engine *e, const char *grammar, int *n_out, int *masked, char *text, size_t cap) {
    slm_session_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.samp.temperature = 1.0f;
    cfg.samp.seed = 5;
    cfg.samp.grammar = grammar;
    cfg.n_predict = 200;
    cfg.ignore_eos = grammar == NULL;
    slm_session *s = NULL;
    if (slm_session_new(e, &cfg, &s) || slm_session_feed_text(s, "Hello", SLM_FEED_BOS)) return -1;
    int n = 0;
    int32_t id = 0;
    const double t0 = now_ms();
    while (id >= 0 && slm_session_next(s, &id, NULL) == SLM_OK) n += id >= 0;
    const double ms = now_ms() - t0;
    snprintf(text, cap, "%s", slm_session_text(s, NULL, NULL));
    slm_session_stats st;
    slm_session_get_stats(s, &st);
    *masked = st.n_masked;
    slm_session_free(s);
    *n_out = n;
    return ms / (n ? n : 1);
}

int main(int argc, char **argv) {
    char *text = NULL;
    slm_err err = {0};
    if (slm_json_schema_to_grammar(k_schema, strlen(k_schema), &text, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    slm_grammar *g = NULL;
    if (slm_grammar_compile(text, strlen(text), &g, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    const char *model = NULL;
    int nv = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (bench_vocab(argv[i], g)) return 1;
        else nv++;
    }
    if (!nv && !model) {
        if (bench_vocab(SLM_SHARED_DIR "/vocab/ggml-vocab-llama-spm.gguf", g) ||
            bench_vocab(SLM_SHARED_DIR "/vocab/ggml-vocab-gpt-2.gguf", g))
            return 1;
    }
    if (model) {
        slm_options o = slm_default_options();
        o.n_threads = 1;
        slm_engine *e = NULL;
        if (slm_load(&e, model, &o)) return fprintf(stderr, "%s: %s\n", model, slm_last_error(e)), 1;
        char out[8192];
        int n0 = 0, n1 = 0, k0 = 0, k1 = 0;
        session_ms(e, NULL, &n0, &k0, out, sizeof out); /* warm */
        double plain = 1e30, gram = 1e30;
        for (int r = 0; r < 5; r++) { /* the fastest of 5 each, interleaved */
            double a = session_ms(e, NULL, &n0, &k0, out, sizeof out), b = session_ms(e, text, &n1, &k1, out, sizeof out);
            if (a < plain) plain = a;
            if (b < gram) gram = b;
        }
        slm_info in;
        slm_get_info(e, &in);
        printf("%s (vocabulary %d): %.3f ms per token without a grammar (%d tokens), %.3f ms with the schema (%d tokens, "
               "%d of them masked the whole vocabulary)\n",
               slm_basename(model), in.vocab_size, plain, n0, gram, n1, k1);
        printf("  reply: %.300s\n", out);
        slm_free(e);
    }
    slm_grammar_free(g);
    slm_xfree(text);
    return 0;
}
