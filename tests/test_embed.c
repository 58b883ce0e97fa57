/* Embeddings: the embedding programs' final-norm rows against the plain
 * reference forward (ref_forward.h) for every pooling, short inputs (a
 * padded small variant), inputs over max_prompt_len (chunks) and up to the
 * KV capacity; the model file's pooling_type and add_eos; the refusals
 * (embeddings off, a blob without embedding programs, an encoder's
 * attention.causal = false, an input over the capacity, a short output);
 * the same embeddings from a blob and from a --cache-dir (t_blob_embed.h); a session generates
 * as before after an embedding; the normalizations; `staticlm embed` prints
 * what the API gives; a sentence-transformers folder's pooling. stories260K
 * + tok512, and small qwen3 and qwen35 (recurrent layers) files written by
 * `staticlm synth`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dtype.h"
#include "common/trace.h"
#include "format/model.h"
#include "ref_forward.h"
#include "staticlm.h"
#include "t.h"
#include "t_engine.h"
#include "t_blob_embed.h"
#include "run_cmd.h"

#define M(f) T_SHARED("models/" f)

static char dir[256];

static slm_engine *load(const char *model, const char *tok, slm_options o) {
    o.tokenizer_path = tok;
    o.n_threads = 2;
    return t_load(model, &o);
}

static slm_options embed_opts(int mpl, int mrl) {
    slm_options o = slm_default_options();
    o.embeddings = 1;
    o.max_prompt_len = mpl;
    o.min_response_len = mrl;
    o.prefill_variants[0] = 4; /* a short input runs padded through embed.4 */
    o.kv_type = SLM_KV_F32;    /* the rows the reference keeps, up to float rounding */
    return o;
}

/* Worst |a - b| over n, relative to the largest |b|. */
static double rel_err(const float *a, const float *b, size_t n) {
    double worst = 0, big = 1e-30;
    for (size_t i = 0; i < n; i++) {
        if (fabs(b[i]) > big) big = fabs(b[i]);
        if (fabs((double)a[i] - b[i]) > worst) worst = fabs((double)a[i] - b[i]);
    }
    return worst / big;
}

/* The reference's hidden rows of ids[0..n) ([n][dim], malloc'd). */
static float *ref_rows(const char *model, const int32_t *ids, int n, int ctx) {
    slm_model_file m;
    memset(&m, 0, sizeof m);
    slm_err err = {0};
    if (slm_model_open(&m, model, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return NULL;
    }
    float *h = malloc(sizeof(float) * (size_t)n * (size_t)m.cfg.dim);
    float *lg = malloc(sizeof(float) * (size_t)n * (size_t)m.cfg.vocab_size);
    if (!h || !lg || !ref_forward_full(&m, ids, n, lg, h, ctx)) {
        free(h);
        h = NULL;
    }
    free(lg);
    slm_model_close(&m);
    return h;
}

/* Every pooling of ids against the reference rows. */
static void check_poolings(slm_session *s, const char *model, const int32_t *ids, int n, int dim, int ctx) {
    float *ref = ref_rows(model, ids, n, ctx);
    CHECK(ref != NULL);
    if (!ref) return;
    float *out = malloc(sizeof(float) * (size_t)n * (size_t)dim), *want = malloc(sizeof(float) * (size_t)dim);
    CHECKF(slm_session_embed(s, ids, n, SLM_POOLING_NONE, out, (size_t)n * dim) == SLM_OK, "%s", slm_session_error(s));
    double e = rel_err(out, ref, (size_t)n * dim);
    CHECKF(e < 1e-4, "n %d none: relative error %g", n, e);
    for (int j = 0; j < dim; j++) {
        double sum = 0;
        for (int r = 0; r < n; r++) sum += ref[(size_t)r * dim + j];
        want[j] = (float)(sum / n);
    }
    CHECK(slm_session_embed(s, ids, n, SLM_POOLING_MEAN, out, dim) == SLM_OK);
    CHECKF((e = rel_err(out, want, dim)) < 1e-4, "n %d mean: relative error %g", n, e);
    CHECK(slm_session_embed(s, ids, n, SLM_POOLING_CLS, out, dim) == SLM_OK);
    CHECKF((e = rel_err(out, ref, dim)) < 1e-4, "n %d cls: relative error %g", n, e);
    CHECK(slm_session_embed(s, ids, n, SLM_POOLING_LAST, out, dim) == SLM_OK);
    CHECKF((e = rel_err(out, ref + (size_t)(n - 1) * dim, dim)) < 1e-4, "n %d last: relative error %g", n, e);
    /* the rows are dropped after each embedding */
    CHECK(slm_session_n_past(s) == 0);
    free(out);
    free(want);
    free(ref);
}

/* stories260K: padded (3 ids in embed.4), one program (12 in embed.16),
 * chunks (40 = 16 + 16 + 8), the whole KV (48 = 16 + 32). */
static void test_against_reference(void) {
    slm_engine *e = load(M("stories260K.bin"), M("tok512.bin"), embed_opts(16, 32));
    CHECK(e != NULL);
    if (!e) return;
    slm_session *s = NULL;
    CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    slm_info in;
    slm_get_info(e, &in);
    CHECK(in.kv_capacity == 48);
    CHECK(slm_model_pooling(e) == SLM_POOLING_NONE); /* a llama2.c file names none */
    int32_t ids[48];
    for (int i = 0; i < 48; i++) ids[i] = i == 0 ? 1 : 3 + (i * 37) % 500;
    const int ns[] = {1, 3, 12, 16, 17, 40, 48};
    for (size_t k = 0; s && k < sizeof ns / sizeof ns[0]; k++) check_poolings(s, M("stories260K.bin"), ids, ns[k], in.dim, 0);
    /* over the capacity: refused, naming it */
    float *big = malloc(sizeof(float) * 49 * (size_t)in.dim);
    int32_t more[49];
    for (int i = 0; i < 49; i++) more[i] = ids[i % 48];
    CHECK(slm_session_embed(s, more, 49, SLM_POOLING_MEAN, big, 49 * (size_t)in.dim) == SLM_ERR_CAPACITY);
    CHECKF(strstr(slm_session_error(s), "capacity 48") != NULL, "%s", slm_session_error(s));
    /* a short output, a bad pooling, no ids */
    CHECK(slm_session_embed(s, ids, 3, SLM_POOLING_NONE, big, 2 * (size_t)in.dim) == SLM_ERR_ARG);
    CHECK(strstr(slm_session_error(s), "need") != NULL);
    CHECK(slm_session_embed(s, ids, 3, 7, big, (size_t)in.dim) == SLM_ERR_ARG);
    CHECK(slm_session_embed(s, ids, 0, SLM_POOLING_MEAN, big, (size_t)in.dim) == SLM_ERR_ARG);
    free(big);
    slm_session_free(s);
    slm_free(e);
}

/* Text: BOS, no EOS for tok512; the same vector as the ids; a session
 * generates after an embedding what a fresh one does. */
static void test_text_and_generation_after(void) {
    slm_engine *e = load(M("stories260K.bin"), M("tok512.bin"), embed_opts(16, 64));
    CHECK(e != NULL);
    if (!e) return;
    slm_session_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.n_predict = 20;
    slm_session *s = NULL, *fresh = NULL;
    CHECK(slm_session_new(e, &cfg, &s) == SLM_OK);
    const char *text = "Once upon a time, there was a cat";
    int32_t ids[64];
    const int n = slm_tokenize(e, text, 1, ids, 64);
    CHECK(n > 3 && ids[0] == 1);
    float a[64], b[64];
    int nt = 0;
    CHECK(slm_session_embed_text(s, text, SLM_POOLING_MEAN, a, 64, &nt) == SLM_OK);
    CHECK(nt == n);
    CHECK(slm_session_embed(s, ids, n, SLM_POOLING_MEAN, b, 64) == SLM_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* generation after it equals a fresh session's */
    int got[2][32], k[2] = {0, 0};
    CHECK(slm_session_feed_text(s, "Lily went", SLM_FEED_BOS) == SLM_OK);
    for (int32_t id; k[0] < 32 && !slm_session_next(s, &id, NULL) && id >= 0;) got[0][k[0]++] = id;
    slm_session_free(s);
    CHECK(slm_session_new(e, &cfg, &fresh) == SLM_OK);
    CHECK(slm_session_feed_text(fresh, "Lily went", SLM_FEED_BOS) == SLM_OK);
    for (int32_t id; k[1] < 32 && !slm_session_next(fresh, &id, NULL) && id >= 0;) got[1][k[1]++] = id;
    CHECK(k[0] == 20 && k[0] == k[1] && !memcmp(got[0], got[1], sizeof(int) * (size_t)k[0]));
    slm_session_free(fresh);
    slm_free(e);
}

static void test_refusals(void) {
    /* embeddings off */
    slm_options o = embed_opts(16, 32);
    o.embeddings = 0;
    slm_engine *e = load(M("stories260K.bin"), M("tok512.bin"), o);
    CHECK(e != NULL);
    if (!e) return;
    slm_session *s = NULL;
    CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    int32_t ids[3] = {1, 50, 60};
    float out[64];
    CHECK(slm_session_embed(s, ids, 3, SLM_POOLING_MEAN, out, 64) == SLM_ERR_ARG);
    CHECKF(strstr(slm_session_error(s), "--embeddings") != NULL, "%s", slm_session_error(s));
    slm_session_free(s);
    /* a blob compiled without embeddings holds no embedding programs */
    char blob[300];
    snprintf(blob, sizeof blob, "%s/m.slm", dir);
    CHECK(slm_save_blob(e, blob) == SLM_OK);
    slm_free(e);
    o.embeddings = 1;
    slm_engine *b = NULL;
    CHECK(slm_load(&b, blob, &o) == SLM_ERR_UNSUPPORTED);
    CHECKF(strstr(slm_last_error(b), "holds no embedding programs") != NULL, "%s", slm_last_error(b));
    slm_free(b);
    unlink(blob);
    /* with them: the blob's embeddings are the source's (a decoder: embed.T beside prefill and generate) */
    int32_t many[24];
    for (int i = 0; i < 24; i++) many[i] = i ? 5 + (i * 37) % 500 : 1;
    static const int lens[] = {3, 16, 1, 9};
    o.tokenizer_path = M("tok512.bin");
    t_blob_embed_check(M("stories260K.bin"), &o, blob, many, 24, lens, 4);
    /* a cache folder: compiled and written with them on the first load, mapped on the second */
    char cdir[300];
    snprintf(cdir, sizeof cdir, "%s/cache", dir);
    o.cache_dir = cdir;
    float x[64], y[64];
    for (int k = 0; k < 2; k++) {
        b = load(M("stories260K.bin"), M("tok512.bin"), o);
        slm_session *bs = NULL;
        CHECK(b && slm_session_new(b, NULL, &bs) == SLM_OK);
        CHECK(bs && slm_session_embed(bs, many, 20, SLM_POOLING_MEAN, k ? y : x, 64) == SLM_OK);
        slm_session_free(bs);
        slm_free(b);
    }
    CHECK(!memcmp(x, y, sizeof x));
    o.cache_dir = NULL;
    b = load(M("stories260K.bin"), M("tok512.bin"), o);
    slm_session *bs = NULL;
    CHECK(b && slm_session_new(b, NULL, &bs) == SLM_OK);
    CHECK(bs && slm_session_embed(bs, many, 20, SLM_POOLING_MEAN, y, 64) == SLM_OK && !memcmp(x, y, sizeof x));
    slm_session_free(bs);
    slm_free(b);
}

/* Write a small qwen3 file with `staticlm synth` (extra options after the
 * output path). */
static int synth_arch(const char *arch, const char *out, const char *extra1, const char *extra2) {
    char *argv[] = {"staticlm", "synth", "--shape", "custom", "--arch", (char *)arch, "--type", "f16", "--vocab-file",
                    T_SHARED("vocab/ggml-vocab-llama-spm.gguf"), "-o", (char *)out,
                    (char *)extra1, (char *)extra2, NULL};
    char *o = NULL, *er = NULL;
    const int rc = t_run_capture(dir, SLM_CLI_PATH, argv, &o, &er);
    if (rc) fprintf(stderr, "  synth: %s\n", er ? er : "");
    free(o);
    free(er);
    return rc == 0;
}
static int synth(const char *out, const char *extra1, const char *extra2) { return synth_arch("qwen3", out, extra1, extra2); }

/* A qwen3 file naming pooling last (Qwen3-Embedding's): the default pooling
 * is its, the vector the reference's last row; an encoder's causal = false
 * is refused with embeddings (and loads without them). */
static void test_model_pooling_key(void) {
    char path[300], enc[300];
    snprintf(path, sizeof path, "%s/q3e.gguf", dir);
    snprintf(enc, sizeof enc, "%s/enc.gguf", dir);
    CHECK(synth(path, "--pooling", "last"));
    CHECK(synth(enc, "--non-causal", NULL));
    slm_engine *e = load(path, NULL, embed_opts(16, 16));
    CHECK(e != NULL);
    if (e) {
        CHECK(slm_model_pooling(e) == SLM_POOLING_LAST);
        slm_session *s = NULL;
        CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
        slm_info in;
        slm_get_info(e, &in);
        int32_t ids[20];
        for (int i = 0; i < 20; i++) ids[i] = 5 + (i * 53) % 500;
        float *ref = ref_rows(path, ids, 20, 0), out[64];
        CHECK(ref != NULL && in.dim == 64);
        CHECK(slm_session_embed(s, ids, 20, SLM_POOLING_DEFAULT, out, 64) == SLM_OK);
        if (ref) CHECKF(rel_err(out, ref + 19 * 64, 64) < 1e-4, "%g", rel_err(out, ref + 19 * 64, 64));
        check_poolings(s, path, ids, 20, 64, 0);
        free(ref);
        slm_session_free(s);
        static const int lens[] = {5, 18, 1};
        char blob[320];
        snprintf(blob, sizeof blob, "%s.slmblob", path); /* pooling last kept by the blob */
        const slm_options bo = embed_opts(16, 16);
        t_blob_embed_check(path, &bo, blob, ids, 20, lens, 3);
    }
    slm_free(e);
    slm_engine *x = NULL;
    slm_options o = embed_opts(16, 16);
    CHECK(slm_load(&x, enc, &o) == SLM_ERR_UNSUPPORTED);
    CHECKF(strstr(slm_last_error(x), "attention.causal") != NULL, "%s", slm_last_error(x));
    slm_free(x);
    o.embeddings = 0;
    x = load(enc, NULL, o);
    CHECK(x != NULL);
    slm_free(x);
}

/* A sentence-transformers folder's 1_Pooling/config.json: its mode, -1
 * without one, -2 for a mode staticlm has not. */
static void test_hf_pooling(void) {
    char d[300], f[340];
    snprintf(d, sizeof d, "%s/st", dir);
    CHECK(slm_hf_pooling(d) == -1);
    snprintf(f, sizeof f, "%s/1_Pooling", d);
    CHECK(mkdir(d, 0700) == 0 && mkdir(f, 0700) == 0);
    const char *cases[][2] = {{"{\"word_embedding_dimension\": 1024, \"pooling_mode_cls_token\": false, "
                               "\"pooling_mode_mean_tokens\": false, \"pooling_mode_lasttoken\": true}", "3"},
                              {"{\"pooling_mode_cls_token\": true, \"pooling_mode_mean_tokens\": false}", "2"},
                              {"{\"pooling_mode_mean_tokens\": true}", "1"},
                              {"{\"pooling_mode_max_tokens\": true}", "-2"},
                              {"{\"pooling_mode\": \"lasttoken\"}", "3"},
                              {"not json", "-1"}};
    snprintf(f, sizeof f, "%s/1_Pooling/config.json", d);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *fp = fopen(f, "w");
        CHECK(fp != NULL);
        if (!fp) return;
        fputs(cases[i][0], fp);
        fclose(fp);
        CHECKF(slm_hf_pooling(d) == atoi(cases[i][1]), "case %zu: %d", i, slm_hf_pooling(d));
    }
    /* modules.json names the Pooling module's folder */
    char sub[340];
    snprintf(sub, sizeof sub, "%s/2_Pool", d);
    CHECK(mkdir(sub, 0700) == 0);
    snprintf(f, sizeof f, "%s/2_Pool/config.json", d);
    const char *cls = "{\"pooling_mode_cls_token\": true}";
    CHECK(t_write_file(f, cls, strlen(cls)));
    snprintf(f, sizeof f, "%s/modules.json", d);
    const char *mods = "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},"
                       " {\"idx\": 1, \"name\": \"1\", \"path\": \"2_Pool\", \"type\": \"sentence_transformers.models.Pooling\"}]";
    CHECK(t_write_file(f, mods, strlen(mods)));
    CHECK(slm_hf_pooling(d) == 2);
    const char *bad = "[{\"path\": \"../x\", \"type\": \"sentence_transformers.models.Pooling\"}]"; /* back to 1_Pooling */
    CHECK(t_write_file(f, bad, strlen(bad)));
    CHECK(slm_hf_pooling(d) == -1); /* 1_Pooling's config is not JSON now */
}

/* A hybrid with recurrent layers (qwen35: DeltaNet state carried across
 * chunks) against the reference, and a session that embeds then generates. */
static void test_recurrent(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/q35.gguf", dir);
    CHECK(synth_arch("qwen35", path, NULL, NULL));
    slm_engine *e = load(path, NULL, embed_opts(16, 16));
    CHECK(e != NULL);
    if (!e) return;
    slm_session *s = NULL;
    CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    int32_t ids[32];
    for (int i = 0; i < 32; i++) ids[i] = 5 + (i * 41) % 500;
    const int ns[] = {3, 20, 32};
    for (size_t k = 0; s && k < sizeof ns / sizeof ns[0]; k++) check_poolings(s, path, ids, ns[k], 64, 0);
    slm_session_free(s);
    slm_free(e);
}

/* A decoder's batch embedding programs (embed.BxS, causal regions): texts
 * of several lengths in one call equal each text alone and the reference's
 * rows, for every pooling; a text above the largest region goes alone. A
 * recurrent model (qwen35) has none and runs the texts one by one. */
static void check_decoder_batch(const char *arch, int has_batch) {
    char path[300];
    snprintf(path, sizeof path, "%s/b-%s.gguf", dir, arch);
    CHECK(synth_arch(arch, path, NULL, NULL));
    slm_engine *e = load(path, NULL, embed_opts(32, 16)); /* embed.4x8, embed.2x12, embed.2x16 */
    CHECK(e != NULL);
    if (!e) return;
    slm_session *s = NULL;
    CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    enum { K = 7, DIM = 64 };
    const int n[K] = {3, 8, 12, 5, 16, 1, 20};
    int32_t ids[K][20];
    const int32_t *pid[K];
    float got[K][DIM], one[DIM], *outs[K];
    size_t cap[K];
    for (int t = 0; t < K; t++) {
        for (int i = 0; i < n[t]; i++) ids[t][i] = 5 + (t * 97 + i * 41) % 500;
        pid[t] = ids[t];
        outs[t] = got[t];
        cap[t] = DIM;
    }
    const int pools[] = {SLM_POOLING_LAST, SLM_POOLING_MEAN, SLM_POOLING_CLS};
    for (size_t pi = 0; s && pi < sizeof pools / sizeof pools[0]; pi++) {
        char trace[320];
        snprintf(trace, sizeof trace, "%s/dec_batch_trace.json", dir);
        slm_err err = {0};
        if (pi == 0) CHECK(slm_trace_start(trace, 4, &err) == SLM_OK);
        CHECKF(slm_session_embed_batch(s, K, pid, n, pools[pi], outs, cap) == SLM_OK, "%s", slm_session_error(s));
        if (pi == 0) { /* 3 + 8 + 5 + 1 in embed.4x8, 12 + 16 in embed.2x16, 20 alone */
            CHECK(slm_trace_stop(NULL, NULL, &err) == SLM_OK);
            char *j = t_read_file(trace, NULL);
            int calls = 0;
            for (const char *q = j; q && (q = strstr(q, "\"embed_batch\"")); q++) calls++;
            CHECKF(calls == (has_batch ? 2 : 0), "%s: %d batch calls", arch, calls);
            free(j);
            unlink(trace);
        }
        for (int t = 0; t < K; t++) {
            CHECK(slm_session_embed(s, ids[t], n[t], pools[pi], one, DIM) == SLM_OK);
            double er = rel_err(got[t], one, DIM);
            CHECKF(er < 1e-5, "%s pooling %d text %d (%d tokens): batch vs alone %g", arch, pools[pi], t, n[t], er);
        }
    }
    /* last pooling against the reference's last row of each text */
    CHECK(slm_session_embed_batch(s, K, pid, n, SLM_POOLING_LAST, outs, cap) == SLM_OK);
    for (int t = 0; t < K; t++) {
        float *ref = ref_rows(path, ids[t], n[t], 0);
        CHECK(ref != NULL);
        if (!ref) continue;
        const double er = rel_err(got[t], ref + (size_t)(n[t] - 1) * DIM, DIM);
        CHECKF(er < 1e-4, "%s text %d: against the reference %g", arch, t, er);
        free(ref);
    }
    slm_session_free(s);
    slm_free(e);
}

static void test_decoder_batch(void) {
    check_decoder_batch("qwen3", 1);
    check_decoder_batch("gemma3", 1); /* window layers */
    check_decoder_batch("qwen35", 0);
}

/* A reranker (synth --pooling rank: Qwen3-Reranker's layout): its score is
 * the softmax of the classifier head on the reference's last hidden row of
 * the rerank template's tokens, as llama.cpp computes it. */
static void test_rerank(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/rr.gguf", dir);
    char *argv[] = {"staticlm", "synth", "--shape", "custom", "--arch", "qwen3", "--type", "f16", "--vocab-file",
                    T_SHARED("vocab/ggml-vocab-gpt-2.gguf"), "--pooling", "rank", "-o", path, NULL};
    char *o = NULL, *er = NULL;
    CHECKF(t_run_capture(dir, SLM_CLI_PATH, argv, &o, &er) == 0, "%s", er ? er : "");
    free(o);
    free(er);
    slm_engine *e = load(path, NULL, embed_opts(64, 192));
    CHECK(e != NULL);
    if (!e) return;
    CHECK(slm_model_pooling(e) == SLM_POOLING_RANK && slm_model_rank_outputs(e) == 2);
    slm_session *s = NULL;
    CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    float sc[2] = {0, 0};
    int n = 0;
    CHECKF(slm_session_rerank(s, "what is a cat?", "A cat is a small animal.", sc, 2, &n) == SLM_OK, "%s",
           slm_session_error(s));
    CHECK(fabsf(sc[0] + sc[1] - 1.0f) < 1e-6f && sc[0] > 0 && sc[1] > 0);
    /* the reference: the template's text, tokenized with its special tokens */
    char tmpl[2048], text[4096];
    CHECK(slm_model_meta(e, "tokenizer.chat_template.rerank", tmpl, sizeof tmpl) > 0);
    char *q = strstr(tmpl, "{query}"), *d = strstr(tmpl, "{document}");
    CHECK(q && d && q < d);
    if (!q || !d) goto out;
    snprintf(text, sizeof text, "%.*swhat is a cat?%.*sA cat is a small animal.%s", (int)(q - tmpl), tmpl,
             (int)(d - q - 7), q + 7, d + 10);
    int32_t *ids = malloc(sizeof(int32_t) * 512);
    const int m = slm_tokenize(e, text, 0, ids, 512);
    CHECK(m == n && m > 0 && m <= 256);
    slm_model_file mf;
    memset(&mf, 0, sizeof mf);
    slm_err err = {0};
    float *ref = m == n ? ref_rows(path, ids, m, 0) : NULL;
    CHECK(ref && slm_model_open(&mf, path, &err) == SLM_OK);
    const slm_tensor *w = ref ? slm_model_tensor(&mf, "cls.output.weight") : NULL;
    CHECK(w && w->type == SLM_F16 && w->ne[0] == 64 && w->ne[1] == 2);
    if (w) {
        double z[2];
        for (int r = 0; r < 2; r++) {
            z[r] = 0;
            for (int j = 0; j < 64; j++)
                z[r] += (double)slm_f16_to_f32(((const uint16_t *)w->data)[r * 64 + j]) * ref[(size_t)(m - 1) * 64 + j];
        }
        const double p_yes = 1.0 / (1.0 + exp(z[1] - z[0]));
        CHECKF(fabs(p_yes - sc[0]) < 1e-4, "score %g, reference %g", sc[0], p_yes);
    }
    slm_model_close(&mf);
    free(ref);
    free(ids);
    /* ranks only with its head; embeddings of the same engine still work */
    float v[64];
    CHECK(slm_session_embed_text(s, "a cat", SLM_POOLING_LAST, v, 64, NULL) == SLM_OK);
    CHECK(slm_session_rerank(s, "q", "d", sc, 1, NULL) == SLM_ERR_ARG); /* short output */
    { /* from a blob: its classifier rows (cls.output) and rerank template (.slm.meta) */
        int32_t rid[12];
        for (int i = 0; i < 12; i++) rid[i] = 10 + i * 31;
        static const int lens[] = {4, 10};
        char blob[320];
        snprintf(blob, sizeof blob, "%s.slmblob", path);
        const slm_options bo = embed_opts(64, 192);
        t_blob_embed_check(path, &bo, blob, rid, 12, lens, 2);
    }
out:
    slm_session_free(s);
    slm_free(e);
    /* a model without a classifier head or a rerank template */
    slm_engine *x = load(M("stories260K.bin"), M("tok512.bin"), embed_opts(16, 32));
    slm_session *xs = NULL;
    CHECK(x && slm_session_new(x, NULL, &xs) == SLM_OK);
    CHECK(slm_model_rank_outputs(x) == 0);
    CHECK(slm_session_rerank(xs, "q", "d", sc, 2, NULL) == SLM_ERR_UNSUPPORTED);
    int32_t one[2] = {1, 50};
    CHECK(slm_session_embed(xs, one, 2, SLM_POOLING_RANK, sc, 2) == SLM_ERR_ARG);
    CHECK(strstr(slm_session_error(xs), "classifier") != NULL);
    slm_session_free(xs);
    slm_free(x);
}

/* Cross-encoders (synth --pooling rank on an encoder, Q8_0 matrices the
 * compiler repacks): no rerank template, so the pair is [CLS] query [SEP]
 * document [SEP] by the vocabulary's flags (add_eos, as the converter
 * writes BERT's), and the score is the head computed here in double from
 * the file's own tensors: bert (bge-reranker's, ms-marco-MiniLM's) on the
 * first row, tanh(W1 x + b1) then W2 . + b2; modern-bert
 * (gte-reranker-modernbert's) on the mean of the rows, GELU(W1 x), a
 * LayerNorm without bias (cls.norm), then W2 . + b2. */
static double head_ref(const slm_model_file *mf, const float *x, int dim, int modern) {
    const slm_tensor *w1 = slm_model_tensor(mf, "cls.weight"), *b1 = slm_model_tensor(mf, "cls.bias"),
                     *nw = slm_model_tensor(mf, "cls.norm.weight"), *w2 = slm_model_tensor(mf, "cls.output.weight"),
                     *b2 = slm_model_tensor(mf, "cls.output.bias");
    if (!w1 || !w2 || !b2 || w1->ne[1] != dim || b2->type != SLM_F32 || (modern ? !nw || b1 != NULL : !b1)) return NAN;
    float *row = malloc(sizeof(float) * (size_t)dim), *wr = malloc(sizeof(float) * (size_t)dim);
    double *h = malloc(sizeof(double) * (size_t)dim), score = ((const float *)b2->data)[0];
    slm_dequantize_row(w2->type, w2->data, row, dim);
    for (int i = 0; i < dim; i++) {
        slm_dequantize_row(w1->type, (const uint8_t *)w1->data + (size_t)i * slm_row_bytes(w1->type, (uint64_t)dim), wr, dim);
        double acc = modern ? 0.0 : ((const float *)b1->data)[i];
        for (int j = 0; j < dim; j++) acc += (double)wr[j] * x[j];
        h[i] = modern ? 0.5 * acc * (1.0 + tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc))) : tanh(acc);
    }
    if (modern) {
        double mean = 0, var = 0;
        for (int i = 0; i < dim; i++) mean += h[i] / dim;
        for (int i = 0; i < dim; i++) var += (h[i] - mean) * (h[i] - mean) / dim;
        for (int i = 0; i < dim; i++) h[i] = (h[i] - mean) / sqrt(var + 1e-5) * ((const float *)nw->data)[i];
    }
    for (int i = 0; i < dim; i++) score += h[i] * row[i];
    free(wr);
    free(row);
    free(h);
    return score;
}

static void check_cross_encoder(const char *arch, int xlmr) {
    const int modern = !strcmp(arch, "modern-bert");
    char path[300];
    snprintf(path, sizeof path, "%s/rr-%s%s.gguf", dir, arch, xlmr ? "-xlmr" : "");
    /* xlmr: bge-reranker-v2-m3's kind, XLM-RoBERTa's unigram vocabulary (tests/corpus/ugm) whose flags
     * give <s> query </s> document </s> */
    char *argv[] = {"staticlm", "synth", "--shape", modern ? "modernbert-embed-base" : "custom", "--arch", (char *)arch,
                    "--type", "q8_0", "--pooling", "rank", "--layers", "2", "--dim", "64", "--heads", "4", "--ffn", "96",
                    "--n-vocab", xlmr ? "868" : "600", "-o", path, xlmr ? "--vocab-file" : NULL,
                    SLM_TESTS_DIR "/corpus/ugm/xlmr.gguf", NULL};
    char *o = NULL, *er = NULL;
    CHECKF(t_run_capture(dir, SLM_CLI_PATH, argv, &o, &er) == 0, "%s", er ? er : "");
    free(o);
    free(er);
    slm_engine *e = load(path, NULL, embed_opts(64, 0));
    CHECK(e != NULL);
    if (!e) return;
    CHECK(slm_model_pooling(e) == SLM_POOLING_RANK && slm_model_rank_outputs(e) == 1);
    slm_session *s = NULL;
    CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    const char *q = "what is a cat?", *d = "a cat is a small animal.";
    float sc = 0;
    int n = 0;
    CHECKF(s && slm_session_rerank(s, q, d, &sc, 1, &n) == SLM_OK, "%s", s ? slm_session_error(s) : "");
    /* the pair, as llama-server builds it */
    int32_t ids[64];
    const int nq = slm_tokenize(e, q, 0, ids + 1, 30), nd = slm_tokenize(e, d, 0, ids + nq + 2, 30);
    CHECKF(nq > 3 && nd > 3 && n == nq + nd + 3, "%s: %d tokens, %d + %d + 3", arch, n, nq, nd);
    slm_info in;
    slm_get_info(e, &in);
    ids[0] = in.bos_id;                       /* [CLS], <s> */
    ids[nq + 1] = ids[nq + nd + 2] = in.eos_id; /* [SEP] (102) of synth's WordPiece vocabulary, </s> (2) */
    CHECK(xlmr ? in.bos_id == 0 && in.eos_id == 2 : in.eos_id == 102);
    float *row = malloc(sizeof(float) * (size_t)in.dim), sc2 = 0;
    CHECK(slm_session_embed(s, ids, n, modern ? SLM_POOLING_MEAN : SLM_POOLING_CLS, row, (size_t)in.dim) == SLM_OK);
    CHECK(slm_session_embed(s, ids, n, SLM_POOLING_RANK, &sc2, 1) == SLM_OK && sc2 == sc);
    slm_model_file mf;
    memset(&mf, 0, sizeof mf);
    slm_err err = {0};
    CHECK(slm_model_open(&mf, path, &err) == SLM_OK);
    const double want = head_ref(&mf, row, in.dim, modern);
    CHECKF(fabs(want - sc) < 1e-5 * (1 + fabs(want)), "%s: score %g, reference %g", arch, sc, want);
    /* the document matters, and the order of the pair */
    float other = 0;
    CHECK(slm_session_rerank(s, d, q, &other, 1, NULL) == SLM_OK && other != sc);
    slm_model_close(&mf);
    free(row);
    slm_session_free(s);
    slm_free(e);
    /* from a blob: the repacked head matrices kept in its weights, the pair's flags in .slm.embed */
    char blob[320];
    snprintf(blob, sizeof blob, "%s.slmblob", path);
    static const int lens[] = {4, 20, 1, 9, 13};
    int32_t bid[24];
    for (int i = 0; i < 24; i++) bid[i] = i ? 5 + (i * 37) % 500 : in.bos_id;
    const slm_options bo = embed_opts(64, 0);
    t_blob_embed_check(path, &bo, blob, bid, 24, lens, 5);
    unlink(path);
}

static void test_rerank_encoder(void) {
    check_cross_encoder("bert", 0);
    check_cross_encoder("modern-bert", 0);
    check_cross_encoder("bert", 1);
}

static void test_normalize(void) {
    float v[4] = {3, -4, 0, 0};
    slm_embed_normalize(v, 4, 2);
    CHECK(fabsf(v[0] - 0.6f) < 1e-6f && fabsf(v[1] + 0.8f) < 1e-6f);
    float t[3] = {1, -1, 2};
    slm_embed_normalize(t, 3, 1);
    CHECK(fabsf(t[2] - 0.5f) < 1e-6f && fabsf(t[1] + 0.25f) < 1e-6f);
    float m[2] = {0.5f, -2.0f};
    slm_embed_normalize(m, 2, 0);
    CHECK(fabsf(m[1] + 32760.0f) < 1e-2f && fabsf(m[0] - 8190.0f) < 1e-2f);
    float p[2] = {1, 1};
    slm_embed_normalize(p, 2, 3);
    CHECK(fabsf(p[0] - powf(2.0f, -1.0f / 3.0f)) < 1e-6f);
    float z[2] = {0, 0}, u[2] = {5, 7};
    slm_embed_normalize(z, 2, 2);
    slm_embed_normalize(u, 2, -1);
    CHECK(z[0] == 0 && z[1] == 0 && u[0] == 5 && u[1] == 7);
    CHECK(slm_pooling_parse("last") == SLM_POOLING_LAST && slm_pooling_parse("rank") == SLM_POOLING_RANK && slm_pooling_parse("max") == -2);
}

/* Parse the first JSON array of numbers after `after` in s into v. */
static int json_floats(const char *s, const char *after, float *v, int cap) {
    const char *p = strstr(s, after);
    if (!p || !(p = strchr(p, '['))) return 0;
    int n = 0;
    for (p++; n < cap && *p && *p != ']';) {
        char *end;
        v[n++] = strtof(p, &end);
        if (end == p) return 0;
        p = end + (*end == ',');
    }
    return n;
}

/* The CLI: json and array forms equal the API's normalized vectors; the
 * text form prints each and the similarity matrix; bad options exit 2. */
static void test_cli(void) {
    slm_engine *e = load(M("stories260K.bin"), M("tok512.bin"), embed_opts(16, 32));
    CHECK(e != NULL);
    if (!e) return;
    slm_session *s = NULL;
    CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    float want[2][64];
    CHECK(slm_session_embed_text(s, "Once upon a time", SLM_POOLING_MEAN, want[0], 64, NULL) == SLM_OK);
    CHECK(slm_session_embed_text(s, "The dog ran", SLM_POOLING_MEAN, want[1], 64, NULL) == SLM_OK);
    slm_embed_normalize(want[0], 64, 2);
    slm_embed_normalize(want[1], 64, 2);
    slm_session_free(s);
    slm_free(e);
    char *argv[] = {"staticlm", "embed", "-m", M("stories260K.bin"), "-z", M("tok512.bin"), "-p",
                    "Once upon a time\nThe dog ran", "--pooling", "mean", "--max-prompt-len", "16",
                    "--min-response-len", "32", "--kv-type", "f32", "--embd-output-format", "json", NULL};
    char *out = NULL, *er = NULL;
    CHECKF(t_run_capture(dir, SLM_CLI_PATH, argv, &out, &er) == 0, "%s", er ? er : "");
    float got[64];
    CHECK(out && json_floats(out, "\"index\":0", got, 64) == 64 && rel_err(got, want[0], 64) < 1e-6);
    CHECK(out && json_floats(out, "\"index\":1", got, 64) == 64 && rel_err(got, want[1], 64) < 1e-6);
    free(out);
    free(er);
    argv[17] = "text";
    CHECK(t_run_capture(dir, SLM_CLI_PATH, argv, &out, &er) == 0);
    CHECK(out && strstr(out, "embedding 0: ") && strstr(out, "embedding 1: ") && strstr(out, "cosine similarity matrix"));
    CHECK(out && strstr(out, "  1.00 ") != NULL);
    free(out);
    free(er);
    argv[17] = "yaml";
    CHECK(t_run_capture(dir, SLM_CLI_PATH, argv, &out, &er) == 2);
    CHECK(er && strstr(er, "--embd-output-format") != NULL);
    free(out);
    free(er);
    argv[9] = "max";
    argv[17] = "json";
    CHECK(t_run_capture(dir, SLM_CLI_PATH, argv, &out, &er) == 2);
    CHECK(er && strstr(er, "--pooling") != NULL);
    free(out);
    free(er);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/slm_test_embed_%d", (int)getpid());
    if (mkdir(dir, 0700) != 0) return 1;
    T_RUN(test_against_reference);
    T_RUN(test_text_and_generation_after);
    T_RUN(test_refusals);
    T_RUN(test_model_pooling_key);
    T_RUN(test_recurrent);
    T_RUN(test_decoder_batch);
    T_RUN(test_rerank);
    T_RUN(test_rerank_encoder);
    T_RUN(test_hf_pooling);
    T_RUN(test_normalize);
    T_RUN(test_cli);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    T_DONE();
}
