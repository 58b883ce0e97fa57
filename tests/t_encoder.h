/* The encoder tests' shared parts (test_encoder.c, test_encoder_moe.c): the
 * small models' shapes, their tensors kept in memory for the plain double
 * references, a vocabulary writer, the references' LayerNorm, matmul and
 * neox RoPE, and the batch check (slm_session_embed_batch against one text
 * at a time). */
#ifndef SLM_T_ENCODER_H
#define SLM_T_ENCODER_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dtype.h"
#include "common/trace.h"
#include "format/gguf.h"
#include "staticlm.h"
#include "t.h"
#include "t_engine.h"

enum { DIM = 64, HEADS = 4, HD = 16, FF = 96, LAYERS = 2, CTX = 32, VOCAB = 40 };

static char dir[256];

/* The test's model, kept in memory for the reference: every tensor f32
 * except the matrices of a nomic file (f16, read back through the same
 * conversion). */
typedef struct tensor {
    char name[64];
    int64_t ne[2];
    int n_dims;
    float *f;       /* the values (after the f16 round trip when stored as f16) */
    uint16_t *h;    /* f16 storage, or NULL */
} tensor;

typedef struct model {
    int nomic, jina; /* jina: jina-bert-v2 */
    tensor t[64];
    int n;
} model;

static uint64_t rng = 88172645463325252ull;
static inline float urand(void) { /* xorshift, [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

static inline tensor *add_t(model *m, const char *name, int64_t ne0, int64_t ne1, float scale, float base, int f16) {
    tensor *t = &m->t[m->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->n_dims = ne1 > 1 ? 2 : 1;
    const size_t n = (size_t)(ne0 * ne1);
    t->f = malloc(n * sizeof(float));
    t->h = f16 ? malloc(n * sizeof(uint16_t)) : NULL;
    for (size_t i = 0; i < n; i++) {
        t->f[i] = base + scale * urand();
        if (f16) {
            t->h[i] = slm_f32_to_f16(t->f[i]);
            t->f[i] = slm_f16_to_f32(t->h[i]);
        }
    }
    return t;
}

static inline const float *get(const model *m, const char *fmt, int l) {
    char name[64];
    snprintf(name, sizeof name, fmt, l);
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name)) return m->t[i].f;
    return NULL;
}


static inline void free_model(model *m) {
    for (int i = 0; i < m->n; i++) {
        free(m->t[i].f);
        free(m->t[i].h);
    }
}

/* A vocabulary of VOCAB tokens ("\u2581wN" words; ids are what the tests
 * feed): SentencePiece (<unk>, <s>, </s>) or WordPiece ([PAD], [UNK],
 * [CLS], [SEP]), with its special ids. */
static inline void write_vocab(slm_gguf_writer *w, int wordpiece) {
    char names[VOCAB][16];
    const char *toks[VOCAB];
    uint64_t lens[VOCAB];
    float scores[VOCAB];
    int32_t types[VOCAB];
    static const char *const wpm_special[4] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]"};
    for (int i = 0; i < VOCAB; i++) {
        if (wordpiece && i < 4) snprintf(names[i], sizeof names[i], "%s", wpm_special[i]);
        else if (i < 3) snprintf(names[i], sizeof names[i], "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else snprintf(names[i], sizeof names[i], "\xe2\x96\x81w%d", i);
        toks[i] = names[i];
        lens[i] = strlen(names[i]);
        scores[i] = -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : 1;
    }
    slm_gguf_set_str(w, "tokenizer.ggml.model", wordpiece ? "bert" : "llama");
    if (wordpiece) {
        slm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 1);
        slm_gguf_set_u32(w, "tokenizer.ggml.seperator_token_id", 3);
    }
    slm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, lens, VOCAB);
    slm_gguf_set_arr(w, "tokenizer.ggml.scores", SLM_GGUF_F32, scores, VOCAB);
    slm_gguf_set_arr(w, "tokenizer.ggml.token_type", SLM_GGUF_I32, types, VOCAB);
    slm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", wordpiece ? 2 : 1);
    if (!wordpiece) slm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
}

static inline void layernorm(double *x, const float *g, const float *b, int n) {
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    const double inv = 1.0 / sqrt(var / n + 1e-12);
    for (int i = 0; i < n; i++) x[i] = (x[i] - mean) * inv * g[i] + b[i];
}

/* y[r][0..out) = x[r] . W[0..out)^T (+ bias) for r < n; W [out][in]. */
static inline void matmul(const double *x, int n, int in, const float *W, const float *bias, int out, double *y) {
    for (int r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            double acc = bias ? bias[o] : 0.0;
            for (int k = 0; k < in; k++) acc += x[(size_t)r * in + k] * W[(size_t)o * in + k];
            y[(size_t)r * out + o] = acc;
        }
}

static inline void rope_neox(double *x, int pos) { /* every head of one row; base 1000 */
    for (int h = 0; h < HEADS; h++)
        for (int i = 0; i < HD / 2; i++) {
            const double f = pow(1000.0, -2.0 * i / HD), a = pos * f;
            double *p = x + h * HD;
            const double u = p[i], v = p[i + HD / 2];
            p[i] = u * cos(a) - v * sin(a);
            p[i + HD / 2] = u * sin(a) + v * cos(a);
        }
}


/* Attention of n rows [n][DIM] (HEADS heads of HD), every row to every row;
 * alibi: jina-bert-v2's biases (largest 8 over HEADS heads, a power of two:
 * slope 2^(-8 (h + 1) / HEADS)). */
static inline void attend(const double *q, const double *k, const double *v, int n, int alibi, double *att) {
    for (int r = 0; r < n; r++)
        for (int h = 0; h < HEADS; h++) {
            double s[CTX], mx = -1e300, sum = 0;
            for (int j = 0; j < n; j++) {
                double d = 0;
                for (int c = 0; c < HD; c++) d += q[r * DIM + h * HD + c] * k[j * DIM + h * HD + c];
                s[j] = d / sqrt((double)HD);
                if (alibi) s[j] -= pow(2.0, -8.0 * (h + 1) / HEADS) * abs(r - j);
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j < n; j++) sum += (s[j] = exp(s[j] - mx));
            for (int c = 0; c < HD; c++) {
                double acc = 0;
                for (int j = 0; j < n; j++) acc += s[j] * v[j * DIM + h * HD + c];
                att[r * DIM + h * HD + c] = acc / sum;
            }
        }
}

/* gelu, tanh form (llama.cpp's) */
static inline double gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

/* The inputs the family checks feed: 16 ids (the first 1, the rest spread over the vocabulary), and
 * the lengths taken of them (padded in embed.4 and embed.16, both full). */
static const int enc_lengths[] = {1, 3, 4, 9, 16};
static inline void fill_ids(int32_t *ids) {
    for (int i = 0; i < 16; i++) ids[i] = i == 0 ? 1 : 3 + (i * 7) % (VOCAB - 3);
}

/* The keys of a bert-like file (A its arch) of the test's shape with `layers` layers: the LayerNorm
 * epsilon 1e-12, both ways, mean pooling; with rope the RoPE base 1000 (rope_neox's). */
static inline void put_bert_keys(slm_gguf_writer *w, const char *A, int layers, int rope) {
    char key[96];
#define K(s) (snprintf(key, sizeof key, "%s." s, A), key)
    slm_gguf_set_str(w, "general.architecture", A);
    slm_gguf_set_u32(w, K("context_length"), CTX);
    slm_gguf_set_u32(w, K("embedding_length"), DIM);
    slm_gguf_set_u32(w, K("feed_forward_length"), FF);
    slm_gguf_set_u32(w, K("block_count"), (uint32_t)layers);
    slm_gguf_set_u32(w, K("attention.head_count"), HEADS);
    slm_gguf_set_f32(w, K("attention.layer_norm_epsilon"), 1e-12f);
    slm_gguf_set_bool(w, K("attention.causal"), 0);
    slm_gguf_set_u32(w, K("pooling_type"), 1);
    if (rope) slm_gguf_set_f32(w, K("rope.freq_base"), 1000.0f);
#undef K
}

/* The model's tensors into w, then the file written and w freed; experts > 0: a tensor named
 * *_exps.* [in, out x experts] is written 3-D [in, out, experts]. 1 when written. */
static inline int write_tensors(slm_gguf_writer *w, const model *m, int experts, const char *path) {
    for (int i = 0; i < m->n; i++) {
        const tensor *t = &m->t[i];
        const uint64_t n = (uint64_t)(t->ne[0] * t->ne[1]);
        const int exps = experts > 0 && strstr(t->name, "_exps.") != NULL;
        const int64_t ne[3] = {t->ne[0], exps ? t->ne[1] / experts : t->ne[1], experts};
        slm_gguf_add_tensor(w, t->name, t->h ? SLM_F16 : SLM_F32, exps ? 3u : (uint32_t)t->n_dims, ne,
                            t->h ? (const void *)t->h : (const void *)t->f, n * (t->h ? 2 : 4));
    }
    slm_err err = {0};
    const slm_status s = slm_gguf_write(w, path, &err);
    if (s) fprintf(stderr, "  write %s: %s\n", path, err.msg);
    slm_gguf_writer_free(w);
    return s == SLM_OK;
}

/* ---- several texts at once (slm_session_embed_batch) ---------------------- */

/* With max_prompt_len 32 the batch programs are embed.4x8, embed.2x12 and
 * embed.2x16 (regions of 8, 12 and 16 rows). The texts: 1 token, regions
 * filled (8, 12, 16), two over the largest region (20, 32: alone, through
 * embed.32), more texts than any program has regions. Longest first, the
 * 16 short ones take 6 calls: 2x16 {16, 15}, {13, 12}; 2x12 {12, 11}; 4x8
 * {8, 8, 7, 6}, {5, 4, 3, 2}, {1, 1}. */
static const int batch_len[] = {1, 8, 3, 16, 5, 20, 7, 2, 12, 32, 12, 1, 15, 6, 4, 11, 8, 13};
enum { NB = sizeof batch_len / sizeof batch_len[0], BATCH_CALLS = 6, BATCH_ALONE = 2 };

/* Batch results against one text at a time (slm_session_embed) for every
 * pooling the model has (rank: with a classifier head); the mean pooling's
 * calls traced and counted. width: the output's floats per row. */
static inline slm_options batch_opts(void) {
    slm_options o = slm_default_options();
    o.embeddings = 1;
    o.max_prompt_len = 32;
    o.prefill_variants[0] = 4;
    o.kv_type = SLM_KV_F32;
    o.n_threads = 2;
    return o;
}

static inline void check_batch(const char *path, const char *what, int width, int rank) {
    const slm_options o = batch_opts();
    slm_engine *e = t_load(path, &o);
    slm_session *s = NULL;
    CHECK(e != NULL);
    if (e) CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    if (!s) {
        slm_free(e);
        return;
    }
    static int32_t ids[NB][32];
    const int32_t *pid[NB];
    float *got[NB], *want[NB];
    size_t cap[NB];
    for (int t = 0; t < NB; t++) {
        for (int i = 0; i < batch_len[t]; i++) ids[t][i] = i == 0 ? 1 : 3 + (t * 7 + i * 5) % (VOCAB - 3);
        pid[t] = ids[t];
        cap[t] = (size_t)batch_len[t] * (size_t)width;
        got[t] = malloc(cap[t] * sizeof(float));
        want[t] = malloc(cap[t] * sizeof(float));
    }
    const int poolings[] = {SLM_POOLING_NONE, SLM_POOLING_MEAN, SLM_POOLING_CLS, SLM_POOLING_LAST, SLM_POOLING_RANK};
    for (int pi = 0; pi < 5; pi++) {
        const int pool = poolings[pi];
        if (pool == SLM_POOLING_RANK && !rank) continue;
        const int w = pool == SLM_POOLING_RANK ? 1 : width; /* the test's heads: one label */
        char trace[320];
        snprintf(trace, sizeof trace, "%s/batch_trace.json", dir);
        slm_err err = {0};
        if (pool == SLM_POOLING_MEAN) CHECK(slm_trace_start(trace, 4, &err) == SLM_OK);
        CHECKF(slm_session_embed_batch(s, NB, pid, batch_len, pool, got, cap) == SLM_OK, "%s: %s", what,
               slm_session_error(s));
        if (pool == SLM_POOLING_MEAN) { /* packed: 6 batch calls, the 2 long texts alone */
            CHECK(slm_trace_stop(NULL, NULL, &err) == SLM_OK);
            char *j = t_read_file(trace, NULL);
            int calls = 0, alone = 0;
            for (const char *q = j; q && (q = strstr(q, "\"embed_batch\"")); q++) calls++;
            for (const char *q = j; q && (q = strstr(q, "\"embed_chunk\"")); q++) alone++;
            CHECKF(calls == BATCH_CALLS && alone == BATCH_ALONE, "%s: %d batch calls, %d alone", what, calls, alone);
            CHECK(j && strstr(j, "embed.4x8") && strstr(j, "embed.2x12") && strstr(j, "embed.2x16"));
            free(j);
            unlink(trace);
        }
        double worst = 0, rank_big = 1e-30, rank_d = 0; /* rank: one score a text, some near 0: relative to the largest */
        for (int t = 0; t < NB; t++) {
            const int rows = pool == SLM_POOLING_NONE ? batch_len[t] : 1;
            CHECKF(slm_session_embed(s, pid[t], batch_len[t], pool, want[t], cap[t]) == SLM_OK, "%s", slm_session_error(s));
            double big = 1e-30, d = 0;
            for (int i = 0; i < rows * w; i++) {
                big = fmax(big, fabs(want[t][i]));
                d = fmax(d, fabs(got[t][i] - want[t][i]));
            }
            if (pool == SLM_POOLING_RANK) rank_big = fmax(rank_big, big), rank_d = fmax(rank_d, d);
            else worst = fmax(worst, d / big);
        }
        if (pool == SLM_POOLING_RANK) worst = rank_d / rank_big;
        CHECKF(worst <= 1e-5, "%s pooling %s: batch vs one at a time: relative difference %g", what,
               slm_pooling_name(pool), worst);
    }
    /* an error names its text; the session still works after it */
    ids[4][2] = VOCAB + 5;
    CHECK(slm_session_embed_batch(s, NB, pid, batch_len, SLM_POOLING_MEAN, got, cap) == SLM_ERR_ARG);
    CHECKF(strstr(slm_session_error(s), "text 4") != NULL, "%s", slm_session_error(s));
    ids[4][2] = 3;
    const int zero[2] = {3, 0};
    CHECK(slm_session_embed_batch(s, 2, pid, zero, SLM_POOLING_MEAN, got, cap) == SLM_ERR_ARG);
    CHECKF(strstr(slm_session_error(s), "text 1") != NULL, "%s", slm_session_error(s));
    CHECK(slm_session_embed_batch(s, 0, NULL, NULL, SLM_POOLING_MEAN, NULL, NULL) == SLM_OK);
    CHECK(slm_session_embed_batch(s, 1, pid + 3, batch_len + 3, SLM_POOLING_CLS, got, cap) == SLM_OK);
    CHECK(slm_session_embed(s, pid[3], batch_len[3], SLM_POOLING_CLS, want[0], cap[0]) == SLM_OK);
    for (int i = 0; i < width; i++) CHECK(fabs(got[0][i] - want[0][i]) <= 1e-5 * (1 + fabs(want[0][i])));
    for (int t = 0; t < NB; t++) {
        free(got[t]);
        free(want[t]);
    }
    slm_session_free(s);
    slm_free(e);
}

#endif
