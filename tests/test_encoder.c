/* Encoders (bert, nomic-bert, jina-bert-v2, gemma-embedding, modern-bert): small random-weight files written here with
 * the GGUF writer, their embedding programs against a plain double
 * reference of llama.cpp's BERT graph in this file (learned positions,
 * token type 0, post-norm LayerNorms, biases, GELU; nomic-bert's fused QKV,
 * neox RoPE and SwiGLU; jina-bert-v2's ALiBi, second attention LayerNorm and
 * fused GeGLU), every row attending to every row; inputs padded
 * into a small variant and filling the largest; the refusals (an input over
 * max_prompt_len, text generation, a model loaded without embeddings);
 * gemma-embedding (EmbeddingGemma: gemma3's layers attending both ways, a
 * symmetric window on the window layers, the dense projections after
 * pooling) against its own plain reference; modern-bert (ModernBERT:
 * pre-norm LayerNorms without biases, layer 0 without its attention norm,
 * fused QKV and gate/up, two RoPE bases, a global layer first in every
 * period and a symmetric window on the others, GeGLU or SwiGLU, the output
 * norm) against its own, with inputs longer than the window. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dtype.h"
#include "device/kernels.h"
#include "common/trace.h"
#include "format/gguf.h"
#include "staticlm.h"
#include "t.h"
#include "t_encoder.h"
#include "t_engine.h"
#include "t_blob_embed.h"

/* kind 0 bert, 1 nomic-bert, 2 jina-bert-v2 (bert's tensors without learned positions, with
 * attn_norm_2 and a fused GeGLU up [DIM, 2 FF] with its bias) */
static void make_model(model *m, int kind) {
    memset(m, 0, sizeof *m);
    const int nomic = kind == 1, jina = kind == 2;
    m->nomic = nomic;
    m->jina = jina;
    add_t(m, "token_embd.weight", DIM, VOCAB, 0.5f, 0, 0);
    add_t(m, "token_types.weight", DIM, 2, 0.5f, 0, 0);
    if (!nomic && !jina) add_t(m, "position_embd.weight", DIM, CTX, 0.5f, 0, 0);
    add_t(m, "token_embd_norm.weight", DIM, 1, 0.1f, 1, 0);
    add_t(m, "token_embd_norm.bias", DIM, 1, 0.1f, 0, 0);
    char n[64];
    for (int l = 0; l < LAYERS; l++) {
#define T2(fmt, a, b) (snprintf(n, sizeof n, fmt, l), add_t(m, n, a, b, 0.12f, 0, nomic))
#define T1(fmt, a, base) (snprintf(n, sizeof n, fmt, l), add_t(m, n, a, 1, 0.1f, base, 0))
        if (nomic) {
            T2("blk.%d.attn_qkv.weight", DIM, 3 * DIM);
        } else {
            T2("blk.%d.attn_q.weight", DIM, DIM);
            T1("blk.%d.attn_q.bias", DIM, 0);
            T2("blk.%d.attn_k.weight", DIM, DIM);
            T1("blk.%d.attn_k.bias", DIM, 0);
            T2("blk.%d.attn_v.weight", DIM, DIM);
            T1("blk.%d.attn_v.bias", DIM, 0);
        }
        T2("blk.%d.attn_output.weight", DIM, DIM);
        if (!nomic) T1("blk.%d.attn_output.bias", DIM, 0);
        T1("blk.%d.attn_output_norm.weight", DIM, 1);
        T1("blk.%d.attn_output_norm.bias", DIM, 0);
        if (jina) {
            T1("blk.%d.attn_norm_2.weight", DIM, 1);
            T1("blk.%d.attn_norm_2.bias", DIM, 0);
        }
        T2("blk.%d.ffn_up.weight", DIM, jina ? 2 * FF : FF);
        if (nomic) T2("blk.%d.ffn_gate.weight", DIM, FF);
        else T1("blk.%d.ffn_up.bias", jina ? 2 * FF : FF, 0);
        T2("blk.%d.ffn_down.weight", FF, DIM);
        if (!nomic) T1("blk.%d.ffn_down.bias", DIM, 0);
        T1("blk.%d.layer_output_norm.weight", DIM, 1);
        T1("blk.%d.layer_output_norm.bias", DIM, 0);
#undef T1
#undef T2
    }
}


/* The file: the model's tensors and keys, and a vocabulary. */
static int write_model(const model *m, const char *path) {
    const char *A = m->nomic ? "nomic-bert" : m->jina ? "jina-bert-v2" : "bert";
    slm_gguf_writer *w = slm_gguf_writer_new();
    put_bert_keys(w, A, LAYERS, m->nomic);
    write_vocab(w, m->nomic); /* bert: SentencePiece; nomic-bert: WordPiece, as real files have */
    return write_tensors(w, m, 0, path);
}

/* ---- the reference: llama.cpp's BERT graph in double ---------------------- */

/* Every row's final hidden state of ids[0..n): out [n][DIM]. */
static void reference(const model *m, const int32_t *ids, int n, double *out) {
    double *x = out, *q = malloc(sizeof(double) * n * DIM), *k = malloc(sizeof(double) * n * DIM),
           *v = malloc(sizeof(double) * n * DIM), *att = malloc(sizeof(double) * n * DIM),
           *o = malloc(sizeof(double) * n * DIM), *up = malloc(sizeof(double) * n * FF),
           *gt = malloc(sizeof(double) * n * FF), *qkv = malloc(sizeof(double) * n * 3 * DIM),
           *xin = malloc(sizeof(double) * n * DIM), *u = malloc(sizeof(double) * n * 2 * FF);
    const float *te = get(m, "token_embd.weight", 0), *ty = get(m, "token_types.weight", 0),
                *pe = get(m, "position_embd.weight", 0);
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < DIM; j++)
            x[r * DIM + j] = (double)te[ids[r] * DIM + j] + ty[j] + (pe ? pe[r * DIM + j] : 0.0f);
        layernorm(x + r * DIM, get(m, "token_embd_norm.weight", 0), get(m, "token_embd_norm.bias", 0), DIM);
    }
    for (int l = 0; l < LAYERS; l++) {
        memcpy(xin, x, sizeof(double) * n * DIM);
        if (m->nomic) {
            matmul(x, n, DIM, get(m, "blk.%d.attn_qkv.weight", l), NULL, 3 * DIM, qkv);
            for (int r = 0; r < n; r++)
                for (int j = 0; j < DIM; j++) {
                    q[r * DIM + j] = qkv[r * 3 * DIM + j];
                    k[r * DIM + j] = qkv[r * 3 * DIM + DIM + j];
                    v[r * DIM + j] = qkv[r * 3 * DIM + 2 * DIM + j];
                }
            for (int r = 0; r < n; r++) {
                rope_neox(q + r * DIM, r);
                rope_neox(k + r * DIM, r);
            }
        } else {
            matmul(x, n, DIM, get(m, "blk.%d.attn_q.weight", l), get(m, "blk.%d.attn_q.bias", l), DIM, q);
            matmul(x, n, DIM, get(m, "blk.%d.attn_k.weight", l), get(m, "blk.%d.attn_k.bias", l), DIM, k);
            matmul(x, n, DIM, get(m, "blk.%d.attn_v.weight", l), get(m, "blk.%d.attn_v.bias", l), DIM, v);
        }
        attend(q, k, v, n, m->jina, att);
        matmul(att, n, DIM, get(m, "blk.%d.attn_output.weight", l), get(m, "blk.%d.attn_output.bias", l), DIM, o);
        for (int r = 0; r < n; r++) {
            for (int j = 0; j < DIM; j++) x[r * DIM + j] += o[r * DIM + j];
            layernorm(x + r * DIM, get(m, "blk.%d.attn_output_norm.weight", l), get(m, "blk.%d.attn_output_norm.bias", l), DIM);
            if (!m->jina) continue;
            for (int j = 0; j < DIM; j++) x[r * DIM + j] += xin[r * DIM + j]; /* and the layer's input again */
            layernorm(x + r * DIM, get(m, "blk.%d.attn_norm_2.weight", l), get(m, "blk.%d.attn_norm_2.bias", l), DIM);
        }
        if (m->jina) { /* GeGLU: gelu of the first half times the second */
            matmul(x, n, DIM, get(m, "blk.%d.ffn_up.weight", l), get(m, "blk.%d.ffn_up.bias", l), 2 * FF, u);
            for (int r = 0; r < n; r++)
                for (int i = 0; i < FF; i++) {
                    const double g = u[r * 2 * FF + i];
                    up[r * FF + i] = u[r * 2 * FF + FF + i] * 0.5 * g *
                                     (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
                }
        } else {
            matmul(x, n, DIM, get(m, "blk.%d.ffn_up.weight", l), get(m, "blk.%d.ffn_up.bias", l), FF, up);
        }
        if (m->nomic) {
            matmul(x, n, DIM, get(m, "blk.%d.ffn_gate.weight", l), NULL, FF, gt);
            for (int i = 0; i < n * FF; i++) up[i] *= gt[i] / (1.0 + exp(-gt[i]));
        } else if (!m->jina) {
            for (int i = 0; i < n * FF; i++)
                up[i] = gelu_tanh(up[i]);
        }
        matmul(up, n, FF, get(m, "blk.%d.ffn_down.weight", l), get(m, "blk.%d.ffn_down.bias", l), DIM, o);
        for (int r = 0; r < n; r++) {
            for (int j = 0; j < DIM; j++) x[r * DIM + j] += o[r * DIM + j];
            layernorm(x + r * DIM, get(m, "blk.%d.layer_output_norm.weight", l), get(m, "blk.%d.layer_output_norm.bias", l), DIM);
        }
    }
    free(q), free(k), free(v), free(att), free(o), free(up), free(gt), free(qkv), free(xin), free(u);
}

static slm_engine *load(const char *path, int embeddings) {
    slm_options o = slm_default_options();
    o.embeddings = embeddings;
    o.max_prompt_len = 16;
    o.prefill_variants[0] = 4; /* a short input runs padded through embed.4 */
    o.kv_type = SLM_KV_F32;
    o.n_threads = 2;
    return t_load(path, &o);
}

static void check_family(int kind) {
    const int nomic = kind == 1;
    const char *const name[3] = {"bert", "nomic-bert", "jina-bert-v2"};
    model m;
    make_model(&m, kind);
    char path[300];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name[kind]);
    CHECK(write_model(&m, path));
    slm_engine *e = load(path, 1);
    CHECK(e != NULL);
    slm_session *s = NULL;
    if (e) CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    if (s) {
        CHECK(slm_model_pooling(e) == SLM_POOLING_MEAN);
        int32_t ids[16];
        fill_ids(ids);
        static float got[16 * DIM];
        static double want[16 * DIM];
        for (size_t c = 0; c < sizeof enc_lengths / sizeof enc_lengths[0]; c++) {
            const int n = enc_lengths[c];
            reference(&m, ids, n, want);
            CHECKF(slm_session_embed(s, ids, n, SLM_POOLING_NONE, got, (size_t)n * DIM) == SLM_OK, "%s",
                   slm_session_error(s));
            double worst = 0, big = 1e-30;
            for (int i = 0; i < n * DIM; i++) {
                if (fabs(want[i]) > big) big = fabs(want[i]);
                if (fabs(got[i] - want[i]) > worst) worst = fabs(got[i] - want[i]);
            }
            CHECKF(worst / big < 1e-4, "%s n %d: relative error %g", name[kind], n, worst / big);
            /* cls: the first row; mean: over every row */
            CHECK(slm_session_embed(s, ids, n, SLM_POOLING_CLS, got, DIM) == SLM_OK);
            for (int j = 0; j < DIM; j++) worst = fmax(worst, fabs(got[j] - want[j]) / big);
            CHECKF(worst < 1e-4, "cls n %d: %g", n, worst);
            CHECK(slm_session_embed(s, ids, n, SLM_POOLING_MEAN, got, DIM) == SLM_OK);
            for (int j = 0; j < DIM; j++) {
                double mean = 0;
                for (int r = 0; r < n; r++) mean += want[r * DIM + j];
                worst = fmax(worst, fabs(got[j] - mean / n) / big);
            }
            CHECKF(worst < 1e-4, "mean n %d: %g", n, worst);
        }
        /* jina-bert-v2's ALiBi in each kernel set's attention (scalar's per-row entry; the block entries of
         * AVX2, AVX-512 and the amx sets, which hand ALiBi to AVX-512's, where the CPU has them) */
        static const char *const sets[4] = {"scalar", "avx2", "avx512", "amx-emu"};
        for (int k = 0; k < 4 && m.jina; k++) {
            if (!slm_kernels_select(sets[k])) continue;
            reference(&m, ids, 16, want);
            CHECK(slm_session_embed(s, ids, 16, SLM_POOLING_NONE, got, (size_t)16 * DIM) == SLM_OK);
            double worst = 0, big = 1e-30;
            for (int i = 0; i < 16 * DIM; i++) {
                big = fmax(big, fabs(want[i]));
                worst = fmax(worst, fabs(got[i] - want[i]));
            }
            CHECKF(worst / big < 1e-4, "jina-bert-v2 (%s kernels): relative error %g", sets[k], worst / big);
        }
        slm_kernels_select(NULL);
        /* both ways: the first row changes with what follows it (a causal model's would not) */
        float a[DIM], b[DIM];
        CHECK(slm_session_embed(s, ids, 5, SLM_POOLING_CLS, a, DIM) == SLM_OK);
        CHECK(slm_session_embed(s, ids, 6, SLM_POOLING_CLS, b, DIM) == SLM_OK);
        CHECK(memcmp(a, b, sizeof a) != 0);
        /* text: WordPiece gives [CLS] words [SEP], as llama.cpp's (the nomic file's vocabulary) */
        float ta[DIM], tb[DIM];
        int nt = 0;
        const int32_t wp[4] = {2, 5, 7, 3};
        if (nomic) {
            CHECK(slm_session_embed_text(s, "W5 w7", SLM_POOLING_MEAN, ta, DIM, &nt) == SLM_OK);
            CHECK(nt == 4);
            CHECK(slm_session_embed(s, wp, 4, SLM_POOLING_MEAN, tb, DIM) == SLM_OK);
            CHECK(!memcmp(ta, tb, sizeof ta));
        }
        /* over max_prompt_len: one call or nothing (no chunks both ways) */
        int32_t more[17];
        for (int i = 0; i < 17; i++) more[i] = ids[i % 16];
        CHECK(slm_session_embed(s, more, 17, SLM_POOLING_MEAN, got, DIM) == SLM_ERR_CAPACITY);
        CHECKF(strstr(slm_session_error(s), "both ways") != NULL, "%s", slm_session_error(s));
        /* no text from an encoder */
        CHECK(slm_session_feed(s, ids, 3) != SLM_OK);
        CHECKF(strstr(slm_session_error(s), "encoder") != NULL, "%s", slm_session_error(s));
        slm_session_free(s);
    }
    slm_free(e);
    /* loaded for text: refused, saying what it is */
    slm_engine *t = NULL;
    slm_options o = slm_default_options();
    CHECK(slm_load(&t, path, &o) == SLM_ERR_UNSUPPORTED);
    CHECKF(strstr(slm_last_error(t), "encoder") != NULL, "%s", slm_last_error(t));
    slm_free(t);
    unlink(path);
    free_model(&m);
}

static void test_bert(void) { check_family(0); }
static void test_nomic_bert(void) { check_family(1); }
static void test_jina_bert_v2(void) { check_family(2); }

/* ---- gemma-embedding ------------------------------------------------------- */

enum { GD = 64, GH = 4, GKV = 1, GHD = 16, GFF = 96, GL = 4, GWIN = 6, GD2 = 96 };

static void g_rms(double *x, const float *g, int n) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    const double inv = 1.0 / sqrt(ss / n + 1e-6);
    for (int i = 0; i < n; i++) x[i] = x[i] * inv * g[i];
}

static void g_rope(double *x, int heads, int pos, double base) {
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < GHD / 2; i++) {
            const double a = pos * pow(base, -2.0 * i / GHD);
            double *p = x + h * GHD;
            const double u = p[i], v = p[i + GHD / 2];
            p[i] = u * cos(a) - v * sin(a);
            p[i + GHD / 2] = u * sin(a) + v * cos(a);
        }
}

/* gemma3's layers, both ways: every row's final-norm state [n][GD]. */
static void g_reference(const model *m, const int32_t *ids, int n, double *x) {
    double *xn = malloc(sizeof(double) * n * GD), *q = malloc(sizeof(double) * n * GH * GHD),
           *k = malloc(sizeof(double) * n * GKV * GHD), *v = malloc(sizeof(double) * n * GKV * GHD),
           *att = malloc(sizeof(double) * n * GH * GHD), *o = malloc(sizeof(double) * n * GD),
           *gt = malloc(sizeof(double) * n * GFF), *up = malloc(sizeof(double) * n * GFF);
    const float *te = get(m, "token_embd.weight", 0);
    for (int r = 0; r < n; r++)
        for (int j = 0; j < GD; j++) x[r * GD + j] = te[ids[r] * GD + j] * sqrt((double)GD);
    for (int l = 0; l < GL; l++) {
        const int swa = l % 2 == 0;
        memcpy(xn, x, sizeof(double) * n * GD);
        for (int r = 0; r < n; r++) g_rms(xn + r * GD, get(m, "blk.%d.attn_norm.weight", l), GD);
        matmul(xn, n, GD, get(m, "blk.%d.attn_q.weight", l), NULL, GH * GHD, q);
        matmul(xn, n, GD, get(m, "blk.%d.attn_k.weight", l), NULL, GKV * GHD, k);
        matmul(xn, n, GD, get(m, "blk.%d.attn_v.weight", l), NULL, GKV * GHD, v);
        for (int r = 0; r < n; r++) {
            for (int h = 0; h < GH; h++) g_rms(q + (r * GH + h) * GHD, get(m, "blk.%d.attn_q_norm.weight", l), GHD);
            for (int h = 0; h < GKV; h++) g_rms(k + (r * GKV + h) * GHD, get(m, "blk.%d.attn_k_norm.weight", l), GHD);
            g_rope(q + r * GH * GHD, GH, r, swa ? 10000.0 : 1000000.0);
            g_rope(k + r * GKV * GHD, GKV, r, swa ? 10000.0 : 1000000.0);
        }
        for (int r = 0; r < n; r++) /* both ways; the window layers |r - j| <= GWIN / 2 */
            for (int h = 0; h < GH; h++) {
                const int kh = h / (GH / GKV);
                double s[CTX], mx = -1e300, sum = 0;
                for (int j = 0; j < n; j++) {
                    s[j] = -1e300;
                    if (swa && abs(r - j) > GWIN / 2) continue;
                    double d = 0;
                    for (int c = 0; c < GHD; c++) d += q[(r * GH + h) * GHD + c] * k[(j * GKV + kh) * GHD + c];
                    s[j] = d / sqrt((double)GHD);
                    if (s[j] > mx) mx = s[j];
                }
                for (int j = 0; j < n; j++) sum += (s[j] = s[j] > -1e299 ? exp(s[j] - mx) : 0.0);
                for (int c = 0; c < GHD; c++) {
                    double acc = 0;
                    for (int j = 0; j < n; j++) acc += s[j] * v[(j * GKV + kh) * GHD + c];
                    att[(r * GH + h) * GHD + c] = acc / sum;
                }
            }
        matmul(att, n, GH * GHD, get(m, "blk.%d.attn_output.weight", l), NULL, GD, o);
        for (int r = 0; r < n; r++) {
            g_rms(o + r * GD, get(m, "blk.%d.post_attention_norm.weight", l), GD);
            for (int j = 0; j < GD; j++) x[r * GD + j] += o[r * GD + j];
        }
        memcpy(xn, x, sizeof(double) * n * GD);
        for (int r = 0; r < n; r++) g_rms(xn + r * GD, get(m, "blk.%d.ffn_norm.weight", l), GD);
        matmul(xn, n, GD, get(m, "blk.%d.ffn_gate.weight", l), NULL, GFF, gt);
        matmul(xn, n, GD, get(m, "blk.%d.ffn_up.weight", l), NULL, GFF, up);
        for (int i = 0; i < n * GFF; i++)
            up[i] *= 0.5 * gt[i] * (1.0 + tanh(0.7978845608028654 * (gt[i] + 0.044715 * gt[i] * gt[i] * gt[i])));
        matmul(up, n, GFF, get(m, "blk.%d.ffn_down.weight", l), NULL, GD, o);
        for (int r = 0; r < n; r++) {
            g_rms(o + r * GD, get(m, "blk.%d.post_ffw_norm.weight", l), GD);
            for (int j = 0; j < GD; j++) x[r * GD + j] += o[r * GD + j];
        }
    }
    for (int r = 0; r < n; r++) g_rms(x + r * GD, get(m, "output_norm.weight", 0), GD);
    free(xn), free(q), free(k), free(v), free(att), free(o), free(gt), free(up);
}

static int g_write(const model *m, const char *path) {
    const char *A = "gemma-embedding";
    slm_gguf_writer *w = slm_gguf_writer_new();
    char key[96];
#define K(s) (snprintf(key, sizeof key, "%s." s, A), key)
    slm_gguf_set_str(w, "general.architecture", A);
    slm_gguf_set_u32(w, K("context_length"), CTX);
    slm_gguf_set_u32(w, K("embedding_length"), GD);
    slm_gguf_set_u32(w, K("feed_forward_length"), GFF);
    slm_gguf_set_u32(w, K("block_count"), GL);
    slm_gguf_set_u32(w, K("attention.head_count"), GH);
    slm_gguf_set_u32(w, K("attention.head_count_kv"), GKV);
    slm_gguf_set_u32(w, K("attention.key_length"), GHD);
    slm_gguf_set_u32(w, K("attention.value_length"), GHD);
    slm_gguf_set_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-6f);
    slm_gguf_set_u32(w, K("attention.sliding_window"), GWIN);
    slm_gguf_set_u32(w, K("attention.sliding_window_pattern"), 2);
    slm_gguf_set_f32(w, K("rope.freq_base"), 1000000.0f);
    slm_gguf_set_f32(w, K("rope.freq_base_swa"), 10000.0f);
    slm_gguf_set_u32(w, K("pooling_type"), 1);
#undef K
    write_vocab(w, 0);
    for (int i = 0; i < m->n; i++) {
        const tensor *t = &m->t[i];
        slm_gguf_add_tensor(w, t->name, SLM_F32, (uint32_t)t->n_dims, t->ne, t->f, (uint64_t)(t->ne[0] * t->ne[1]) * 4);
    }
    slm_err err = {0};
    const slm_status s = slm_gguf_write(w, path, &err);
    if (s) fprintf(stderr, "  write %s: %s\n", path, err.msg);
    slm_gguf_writer_free(w);
    return s == SLM_OK;
}

/* The gemma-embedding test model; *d2, *d3 its dense projections. */
static void g_make(model *m, const tensor **d2, const tensor **d3) {
    memset(m, 0, sizeof *m);
    add_t(m, "token_embd.weight", GD, VOCAB, 0.5f, 0, 0);
    add_t(m, "output_norm.weight", GD, 1, 0.1f, 1, 0);
    char n[64];
    for (int l = 0; l < GL; l++) {
#define G2(fmt, a, b) (snprintf(n, sizeof n, fmt, l), add_t(m, n, a, b, 0.15f, 0, 0))
#define G1(fmt, a) (snprintf(n, sizeof n, fmt, l), add_t(m, n, a, 1, 0.1f, 1, 0))
        G1("blk.%d.attn_norm.weight", GD);
        G2("blk.%d.attn_q.weight", GD, GH * GHD);
        G2("blk.%d.attn_k.weight", GD, GKV * GHD);
        G2("blk.%d.attn_v.weight", GD, GKV * GHD);
        G2("blk.%d.attn_output.weight", GH * GHD, GD);
        G1("blk.%d.attn_q_norm.weight", GHD);
        G1("blk.%d.attn_k_norm.weight", GHD);
        G1("blk.%d.post_attention_norm.weight", GD);
        G1("blk.%d.ffn_norm.weight", GD);
        G2("blk.%d.ffn_gate.weight", GD, GFF);
        G2("blk.%d.ffn_up.weight", GD, GFF);
        G2("blk.%d.ffn_down.weight", GFF, GD);
        G1("blk.%d.post_ffw_norm.weight", GD);
#undef G1
#undef G2
    }
    *d2 = add_t(m, "dense_2.weight", GD, GD2, 0.15f, 0, 0);
    *d3 = add_t(m, "dense_3.weight", GD2, GD, 0.15f, 0, 0);
}

static void test_gemma_embedding(void) {
    model m;
    const tensor *d2, *d3;
    g_make(&m, &d2, &d3);
    char path[300];
    snprintf(path, sizeof path, "%s/gemma-embedding.gguf", dir);
    CHECK(g_write(&m, path));
    slm_engine *e = load(path, 1);
    CHECK(e != NULL);
    slm_session *s = NULL;
    if (e) CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    if (s) {
        CHECK(slm_model_is_encoder(e) == 1);
        int32_t ids[16];
        for (int i = 0; i < 16; i++) ids[i] = i == 0 ? 1 : 3 + (i * 5) % (VOCAB - 3);
        static double want[16 * GD];
        static float got[16 * GD];
        const int ns[] = {1, 3, 9, 16};
        for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
            const int nn = ns[c];
            g_reference(&m, ids, nn, want);
            /* mean pooling, then dense_2 and dense_3 */
            double pooled[GD], h[GD2], y[GD], big = 1e-30, worst = 0;
            for (int j = 0; j < GD; j++) {
                pooled[j] = 0;
                for (int r = 0; r < nn; r++) pooled[j] += want[r * GD + j] / nn;
            }
            for (int i = 0; i < GD2; i++) {
                h[i] = 0;
                for (int j = 0; j < GD; j++) h[i] += d2->f[i * GD + j] * pooled[j];
            }
            for (int i = 0; i < GD; i++) {
                y[i] = 0;
                for (int j = 0; j < GD2; j++) y[i] += d3->f[i * GD2 + j] * h[j];
                if (fabs(y[i]) > big) big = fabs(y[i]);
            }
            CHECKF(slm_session_embed(s, ids, nn, SLM_POOLING_MEAN, got, GD) == SLM_OK, "%s", slm_session_error(s));
            for (int i = 0; i < GD; i++) worst = fmax(worst, fabs(got[i] - y[i]));
            CHECKF(worst / big < 1e-4, "gemma-embedding n %d: relative error %g", nn, worst / big);
        }
        slm_session_free(s);
    }
    slm_free(e);
    unlink(path);
    free_model(&m);
}

/* ---- modern-bert ----------------------------------------------------------- */

enum { MD = 64, MH = 4, MHD = 16, MFF = 48, ML = 5, MWIN = 6 };

static void m_ln(double *x, const float *g, int n) { /* LayerNorm without a bias, eps 1e-5 */
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    const double inv = 1.0 / sqrt(var / n + 1e-5);
    for (int i = 0; i < n; i++) x[i] = (x[i] - mean) * inv * g[i];
}

/* ModernBERT as llama.cpp's modern-bert graph runs it, in double: every
 * row's output-normed state [n][MD]; layer l global when l % period == 0
 * (base 160000), else the window (|r - j| <= MWIN / 2, base 10000). */
static void m_reference(const model *m, const int32_t *ids, int n, int period, int silu, double *x) {
    double *xn = malloc(sizeof(double) * n * MD), *qkv = malloc(sizeof(double) * n * 3 * MD),
           *att = malloc(sizeof(double) * n * MD), *o = malloc(sizeof(double) * n * MD),
           *u = malloc(sizeof(double) * n * 2 * MFF), *h = malloc(sizeof(double) * n * MFF);
    const float *te = get(m, "token_embd.weight", 0);
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < MD; j++) x[r * MD + j] = te[ids[r] * MD + j];
        m_ln(x + r * MD, get(m, "token_embd_norm.weight", 0), MD);
    }
    for (int l = 0; l < ML; l++) {
        const int swa = l % period != 0;
        memcpy(xn, x, sizeof(double) * n * MD);
        if (l > 0) /* layer 0: no attention norm */
            for (int r = 0; r < n; r++) m_ln(xn + r * MD, get(m, "blk.%d.attn_norm.weight", l), MD);
        matmul(xn, n, MD, get(m, "blk.%d.attn_qkv.weight", l), NULL, 3 * MD, qkv);
        for (int r = 0; r < n; r++) { /* Q, then K, then V in each row */
            g_rope(qkv + r * 3 * MD, MH, r, swa ? 10000.0 : 160000.0);
            g_rope(qkv + r * 3 * MD + MD, MH, r, swa ? 10000.0 : 160000.0);
        }
        for (int r = 0; r < n; r++)
            for (int hh = 0; hh < MH; hh++) {
                double s[CTX], mx = -1e300, sum = 0;
                for (int j = 0; j < n; j++) {
                    s[j] = -1e300;
                    if (swa && abs(r - j) > MWIN / 2) continue;
                    double d = 0;
                    for (int c = 0; c < MHD; c++) d += qkv[r * 3 * MD + hh * MHD + c] * qkv[j * 3 * MD + MD + hh * MHD + c];
                    s[j] = d / sqrt((double)MHD);
                    if (s[j] > mx) mx = s[j];
                }
                for (int j = 0; j < n; j++) sum += (s[j] = s[j] > -1e299 ? exp(s[j] - mx) : 0.0);
                for (int c = 0; c < MHD; c++) {
                    double acc = 0;
                    for (int j = 0; j < n; j++) acc += s[j] * qkv[j * 3 * MD + 2 * MD + hh * MHD + c];
                    att[r * MD + hh * MHD + c] = acc / sum;
                }
            }
        matmul(att, n, MD, get(m, "blk.%d.attn_output.weight", l), NULL, MD, o);
        for (int i = 0; i < n * MD; i++) x[i] += o[i];
        memcpy(xn, x, sizeof(double) * n * MD);
        for (int r = 0; r < n; r++) m_ln(xn + r * MD, get(m, "blk.%d.ffn_norm.weight", l), MD);
        matmul(xn, n, MD, get(m, "blk.%d.ffn_up.weight", l), NULL, 2 * MFF, u);
        for (int r = 0; r < n; r++) /* act(the first half) times the second */
            for (int i = 0; i < MFF; i++) {
                const double g = u[r * 2 * MFF + i], up = u[r * 2 * MFF + MFF + i];
                h[r * MFF + i] = up * (silu ? g / (1.0 + exp(-g))
                                            : 0.5 * g * (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))));
            }
        matmul(h, n, MFF, get(m, "blk.%d.ffn_down.weight", l), NULL, MD, o);
        for (int i = 0; i < n * MD; i++) x[i] += o[i];
    }
    for (int r = 0; r < n; r++) m_ln(x + r * MD, get(m, "output_norm.weight", 0), MD);
    free(xn), free(qkv), free(att), free(o), free(u), free(h);
}

static int m_write(const model *m, const char *path, int period, int silu) {
    const char *A = "modern-bert";
    slm_gguf_writer *w = slm_gguf_writer_new();
    char key[96];
#define K(s) (snprintf(key, sizeof key, "%s." s, A), key)
    slm_gguf_set_str(w, "general.architecture", A);
    slm_gguf_set_u32(w, K("context_length"), CTX);
    slm_gguf_set_u32(w, K("embedding_length"), MD);
    slm_gguf_set_u32(w, K("feed_forward_length"), MFF);
    slm_gguf_set_u32(w, K("block_count"), ML);
    slm_gguf_set_u32(w, K("attention.head_count"), MH);
    slm_gguf_set_f32(w, K("attention.layer_norm_epsilon"), 1e-5f);
    slm_gguf_set_bool(w, K("attention.causal"), 0);
    slm_gguf_set_u32(w, K("attention.sliding_window"), MWIN);
    if (period != 3) slm_gguf_set_u32(w, K("attention.sliding_window_pattern"), (uint32_t)period); /* 3: the default */
    slm_gguf_set_f32(w, K("rope.freq_base"), 160000.0f);
    if (silu) slm_gguf_set_str(w, K("hidden_activation"), "silu");
    else slm_gguf_set_f32(w, K("rope.freq_base_swa"), 10000.0f); /* else llama.cpp's default, 10000 */
    slm_gguf_set_u32(w, K("pooling_type"), 2);
#undef K
    write_vocab(w, 0);
    for (int i = 0; i < m->n; i++) {
        const tensor *t = &m->t[i];
        slm_gguf_add_tensor(w, t->name, SLM_F32, (uint32_t)t->n_dims, t->ne, t->f, (uint64_t)(t->ne[0] * t->ne[1]) * 4);
    }
    slm_err err = {0};
    const slm_status s = slm_gguf_write(w, path, &err);
    if (s) fprintf(stderr, "  write %s: %s\n", path, err.msg);
    slm_gguf_writer_free(w);
    return s == SLM_OK;
}

/* One variant: GeGLU with the default period (3) and a reranker's head in
 * the file (cls.*: tensors the graph does not read, which must load), or
 * SwiGLU with a period of 2. */
/* The modern-bert test model: GeGLU with the head's dense layer and norm, or SwiGLU without. */
static void m_make(model *m, int silu) {
    memset(m, 0, sizeof *m);
    add_t(m, "token_embd.weight", MD, VOCAB, 0.5f, 0, 0);
    add_t(m, "token_embd_norm.weight", MD, 1, 0.1f, 1, 0);
    add_t(m, "output_norm.weight", MD, 1, 0.1f, 1, 0);
    char n[64];
    for (int l = 0; l < ML; l++) {
#define M2(fmt, a, b) (snprintf(n, sizeof n, fmt, l), add_t(m, n, a, b, 0.15f, 0, 0))
#define M1(fmt) (snprintf(n, sizeof n, fmt, l), add_t(m, n, MD, 1, 0.1f, 1, 0))
        if (l > 0) M1("blk.%d.attn_norm.weight");
        M2("blk.%d.attn_qkv.weight", MD, 3 * MD);
        M2("blk.%d.attn_output.weight", MD, MD);
        M1("blk.%d.ffn_norm.weight");
        M2("blk.%d.ffn_up.weight", MD, 2 * MFF);
        M2("blk.%d.ffn_down.weight", MFF, MD);
#undef M1
#undef M2
    }
    if (!silu) {
        add_t(m, "cls.weight", MD, MD, 0.15f, 0, 0);
        add_t(m, "cls.norm.weight", MD, 1, 0.1f, 1, 0);
    }
}

static void check_modern(int silu) {
    const int period = silu ? 2 : 3;
    model m;
    m_make(&m, silu);
    char path[300];
    snprintf(path, sizeof path, "%s/modern-bert.gguf", dir);
    CHECK(m_write(&m, path, period, silu));
    slm_engine *e = load(path, 1);
    CHECK(e != NULL);
    slm_session *s = NULL;
    if (e) CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    if (s) {
        CHECK(slm_model_is_encoder(e) == 1);
        CHECK(slm_model_pooling(e) == SLM_POOLING_CLS);
        int32_t ids[16];
        for (int i = 0; i < 16; i++) ids[i] = i == 0 ? 1 : 3 + (i * 11) % (VOCAB - 3);
        static double want[16 * MD];
        static float got[16 * MD];
        const int ns[] = {1, 3, 5, 9, 16}; /* 9 and 16: longer than the window (7 rows) */
        for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
            const int nn = ns[c];
            m_reference(&m, ids, nn, period, silu, want);
            CHECKF(slm_session_embed(s, ids, nn, SLM_POOLING_NONE, got, (size_t)nn * MD) == SLM_OK, "%s",
                   slm_session_error(s));
            double worst = 0, big = 1e-30;
            for (int i = 0; i < nn * MD; i++) {
                big = fmax(big, fabs(want[i]));
                worst = fmax(worst, fabs(got[i] - want[i]));
            }
            CHECKF(worst / big < 1e-4, "modern-bert (%s) n %d: relative error %g", silu ? "silu" : "gelu", nn,
                   worst / big);
        }
        slm_session_free(s);
    }
    slm_free(e);
    /* loaded for text: refused, saying what it is */
    slm_engine *t = NULL;
    slm_options o = slm_default_options();
    CHECK(slm_load(&t, path, &o) == SLM_ERR_UNSUPPORTED);
    CHECKF(strstr(slm_last_error(t), "encoder") != NULL, "%s", slm_last_error(t));
    slm_free(t);
    unlink(path);
    free_model(&m);
}

static void test_modern_bert(void) {
    check_modern(0);
    check_modern(1);
}


/* The file's embeddings from a blob (t_blob_embed.h): bit-identical to the source's. */
static void blob_check(const char *path) {
    const slm_options o = batch_opts();
    int32_t ids[20];
    for (int i = 0; i < 20; i++) ids[i] = i == 0 ? 1 : 3 + (i * 7) % (VOCAB - 3);
    static const int lens[] = {1, 8, 3, 16, 5, 12, 7, 2, 18};
    char blob[320];
    snprintf(blob, sizeof blob, "%s.slmblob", path);
    t_blob_embed_check(path, &o, blob, ids, 20, lens, (int)(sizeof lens / sizeof lens[0]));
}

static void test_embed_batch(void) {
    static const char *const kinds[3] = {"bert", "nomic-bert", "jina-bert-v2"};
    for (int kind = 0; kind < 3; kind++) { /* with a one-label classifier head: pooling rank (its first row) */
        model m;
        make_model(&m, kind);
        add_t(&m, "cls.output.weight", DIM, 1, 0.2f, 0, 0);
        char path[300];
        snprintf(path, sizeof path, "%s/%s-batch.gguf", dir, kinds[kind]);
        CHECK(write_model(&m, path));
        check_batch(path, kinds[kind], DIM, 1); /* jina: ALiBi's distances within a region */
        blob_check(path);
        unlink(path);
        free_model(&m);
    }
    { /* modern-bert: the window inside a region, the rank head on the mean */
        model m;
        m_make(&m, 0);
        add_t(&m, "cls.output.weight", MD, 1, 0.2f, 0, 0);
        char path[300];
        snprintf(path, sizeof path, "%s/modern-batch.gguf", dir);
        CHECK(m_write(&m, path, 3, 0));
        check_batch(path, "modern-bert", MD, 1);
        blob_check(path);
        unlink(path);
        free_model(&m);
    }
    model m;
    const tensor *d2, *d3;
    g_make(&m, &d2, &d3);
    char path[300];
    snprintf(path, sizeof path, "%s/gemma-batch.gguf", dir);
    CHECK(g_write(&m, path));
    check_batch(path, "gemma-embedding", GD, 0);
    blob_check(path);
    unlink(path);
    free_model(&m);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/slm_encoder_%d", (int)getpid());
    mkdir(dir, 0700);
    T_RUN(test_bert);
    T_RUN(test_nomic_bert);
    T_RUN(test_jina_bert_v2);
    T_RUN(test_gemma_embedding);
    T_RUN(test_modern_bert);
    T_RUN(test_embed_batch);
    rmdir(dir);
    T_DONE();
}
