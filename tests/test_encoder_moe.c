/* nomic-bert-moe (nomic-embed-text-v2-moe): small random-weight files
 * written here with the GGUF writer, their embedding programs against a
 * plain double reference of llama.cpp's graph for it: nomic-bert's fused
 * Q/K/V (with its bias here) and neox RoPE, bert's post-norm layers and
 * GELU FFN with biases, and on every layer l with l % moe_every_n_layers ==
 * 1 a router (softmax over every expert, the top K weights as they are)
 * over ungated experts (up, GELU, down; no biases) in place of the FFN.
 * Experts every 2 layers (f32) and every 3 (f16 matrices: layer 3 of 4
 * dense); the sensitivity of the comparison (the reference with the wrong
 * top K, renormalized weights or gated experts is far from what the
 * engine gives); batch programs against one text at a time; the keys and
 * tensors a file must have; staticlm synth's nomic-embed-text-v2-moe shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "common/dtype.h"
#include "format/gguf.h"
#include "staticlm.h"
#include "t.h"
#include "t_encoder.h"
#include "t_engine.h"

enum { ML = 4, NE = 4, NK = 2 }; /* layers, experts, experts per row */

/* The files' knobs, and the reference's deliberate departures from llama.cpp's graph. */
typedef struct moe_file {
    int every;    /* moe_every_n_layers */
    int f16;      /* matrices stored f16 */
    int exp_at;   /* the layers that hold the experts: l % every == exp_at (1; another: a misplaced file) */
    int keys;     /* 0: every key; 1: no expert_count; 2: expert_used_count above the experts */
} moe_file;

typedef struct variant {
    int k;        /* experts per row (NK) */
    int renorm;   /* the chosen weights divided by their sum */
    int gated;    /* gelu(up) * up in place of gelu(up) */
} variant;

static void moe_make(model *m, const moe_file *f) {
    memset(m, 0, sizeof *m);
    add_t(m, "token_embd.weight", DIM, VOCAB, 0.5f, 0, 0);
    add_t(m, "token_types.weight", DIM, 1, 0.5f, 0, 0);
    add_t(m, "token_embd_norm.weight", DIM, 1, 0.1f, 1, 0);
    add_t(m, "token_embd_norm.bias", DIM, 1, 0.1f, 0, 0);
    char n[64];
    for (int l = 0; l < ML; l++) {
#define T2(fmt, a, b) (snprintf(n, sizeof n, fmt, l), add_t(m, n, a, b, 0.12f, 0, f->f16))
#define T1(fmt, a, base) (snprintf(n, sizeof n, fmt, l), add_t(m, n, a, 1, 0.1f, base, 0))
        T2("blk.%d.attn_qkv.weight", DIM, 3 * DIM);
        T1("blk.%d.attn_qkv.bias", 3 * DIM, 0);
        T2("blk.%d.attn_output.weight", DIM, DIM);
        T1("blk.%d.attn_output.bias", DIM, 0);
        T1("blk.%d.attn_output_norm.weight", DIM, 1);
        T1("blk.%d.attn_output_norm.bias", DIM, 0);
        if (l % f->every == f->exp_at) { /* the router (f32, spread so the top K stand apart), the experts as [in, out x E] */
            snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.weight", l);
            add_t(m, n, DIM, NE, 0.5f, 0, 0);
            T2("blk.%d.ffn_up_exps.weight", DIM, FF * NE);
            T2("blk.%d.ffn_down_exps.weight", FF, DIM * NE);
        } else {
            T2("blk.%d.ffn_up.weight", DIM, FF);
            T1("blk.%d.ffn_up.bias", FF, 0);
            T2("blk.%d.ffn_down.weight", FF, DIM);
            T1("blk.%d.ffn_down.bias", DIM, 0);
        }
        T1("blk.%d.layer_output_norm.weight", DIM, 1);
        T1("blk.%d.layer_output_norm.bias", DIM, 0);
#undef T1
#undef T2
    }
}

/* The file: the keys llama.cpp's converter writes for NomicBertModel with experts, the tensors (the
 * experts 3-D [in, out, E]), a vocabulary. */
static int moe_write(const model *m, const moe_file *f, const char *path) {
    slm_gguf_writer *w = slm_gguf_writer_new();
    put_bert_keys(w, "nomic-bert-moe", ML, 1);
    if (f->keys != 1) slm_gguf_set_u32(w, "nomic-bert-moe.expert_count", NE);
    slm_gguf_set_u32(w, "nomic-bert-moe.expert_used_count", f->keys == 2 ? NE + 1 : NK);
    slm_gguf_set_u32(w, "nomic-bert-moe.moe_every_n_layers", (uint32_t)f->every);
    slm_gguf_set_u32(w, "tokenizer.ggml.token_type_count", 1);
    write_vocab(w, 0);
    return write_tensors(w, m, NE, path);
}

/* The experts' sum of one row xr [DIM] into out [DIM]; *margin: the gap
 * between the K-th and the next router probability (how firmly the choice stands). */
static void experts_row(const model *m, int l, const double *xr, variant v, double *out, double *margin) {
    double p[NE], mx = -1e300, sum = 0, h[FF], y[DIM];
    int chosen[NE] = {0}, order[NE];
    matmul(xr, 1, DIM, get(m, "blk.%d.ffn_gate_inp.weight", l), NULL, NE, p);
    for (int e = 0; e < NE; e++) mx = fmax(mx, p[e]);
    for (int e = 0; e < NE; e++) sum += (p[e] = exp(p[e] - mx));
    for (int e = 0; e < NE; e++) p[e] /= sum;
    for (int j = 0; j < NE; j++) { /* by probability, the lower index first among equals */
        int best = -1;
        for (int e = 0; e < NE; e++)
            if (!chosen[e] && (best < 0 || p[e] > p[best])) best = e;
        chosen[best] = 1;
        order[j] = best;
    }
    *margin = p[order[NK - 1]] - p[order[NK]];
    double wsum = 0;
    for (int j = 0; j < v.k; j++) wsum += p[order[j]];
    memset(out, 0, sizeof(double) * DIM);
    const float *up = get(m, "blk.%d.ffn_up_exps.weight", l), *down = get(m, "blk.%d.ffn_down_exps.weight", l);
    for (int j = 0; j < v.k; j++) {
        const int e = order[j];
        matmul(xr, 1, DIM, up + (size_t)e * FF * DIM, NULL, FF, h);
        for (int i = 0; i < FF; i++) h[i] = v.gated ? gelu_tanh(h[i]) * h[i] : gelu_tanh(h[i]);
        matmul(h, 1, FF, down + (size_t)e * DIM * FF, NULL, DIM, y);
        const double wt = v.renorm ? p[e] / wsum : p[e];
        for (int i = 0; i < DIM; i++) out[i] += wt * y[i];
    }
}

/* Every row's final hidden state of ids[0..n): x [n][DIM]; *margin: the smallest router margin. */
static void moe_reference(const model *m, int every, const int32_t *ids, int n, variant v, double *x, double *margin) {
    double *q = malloc(sizeof(double) * n * DIM), *k = malloc(sizeof(double) * n * DIM),
           *vv = malloc(sizeof(double) * n * DIM), *att = malloc(sizeof(double) * n * DIM),
           *o = malloc(sizeof(double) * n * DIM), *up = malloc(sizeof(double) * n * FF),
           *qkv = malloc(sizeof(double) * n * 3 * DIM);
    const float *te = get(m, "token_embd.weight", 0), *ty = get(m, "token_types.weight", 0);
    *margin = 1.0;
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < DIM; j++) x[r * DIM + j] = (double)te[ids[r] * DIM + j] + ty[j];
        layernorm(x + r * DIM, get(m, "token_embd_norm.weight", 0), get(m, "token_embd_norm.bias", 0), DIM);
    }
    for (int l = 0; l < ML; l++) {
        matmul(x, n, DIM, get(m, "blk.%d.attn_qkv.weight", l), get(m, "blk.%d.attn_qkv.bias", l), 3 * DIM, qkv);
        for (int r = 0; r < n; r++) {
            for (int j = 0; j < DIM; j++) {
                q[r * DIM + j] = qkv[r * 3 * DIM + j];
                k[r * DIM + j] = qkv[r * 3 * DIM + DIM + j];
                vv[r * DIM + j] = qkv[r * 3 * DIM + 2 * DIM + j];
            }
            rope_neox(q + r * DIM, r);
            rope_neox(k + r * DIM, r);
        }
        attend(q, k, vv, n, 0, att);
        matmul(att, n, DIM, get(m, "blk.%d.attn_output.weight", l), get(m, "blk.%d.attn_output.bias", l), DIM, o);
        for (int r = 0; r < n; r++) {
            for (int j = 0; j < DIM; j++) x[r * DIM + j] += o[r * DIM + j];
            layernorm(x + r * DIM, get(m, "blk.%d.attn_output_norm.weight", l), get(m, "blk.%d.attn_output_norm.bias", l), DIM);
        }
        if (l % every == 1) {
            for (int r = 0; r < n; r++) {
                double mg;
                experts_row(m, l, x + r * DIM, v, o + r * DIM, &mg);
                *margin = fmin(*margin, mg);
            }
        } else {
            matmul(x, n, DIM, get(m, "blk.%d.ffn_up.weight", l), get(m, "blk.%d.ffn_up.bias", l), FF, up);
            for (int i = 0; i < n * FF; i++) up[i] = gelu_tanh(up[i]);
            matmul(up, n, FF, get(m, "blk.%d.ffn_down.weight", l), get(m, "blk.%d.ffn_down.bias", l), DIM, o);
        }
        for (int r = 0; r < n; r++) {
            for (int j = 0; j < DIM; j++) x[r * DIM + j] += o[r * DIM + j];
            layernorm(x + r * DIM, get(m, "blk.%d.layer_output_norm.weight", l), get(m, "blk.%d.layer_output_norm.bias", l), DIM);
        }
    }
    free(q), free(k), free(vv), free(att), free(o), free(up), free(qkv);
}

/* The largest difference of got from want, relative to want's largest value. */
static double rel_err(const float *got, const double *want, int count) {
    double worst = 0, big = 1e-30;
    for (int i = 0; i < count; i++) {
        big = fmax(big, fabs(want[i]));
        worst = fmax(worst, fabs(got[i] - want[i]));
    }
    return worst / big;
}

static slm_engine *moe_load(const char *path) {
    slm_options o = slm_default_options();
    o.embeddings = 1;
    o.max_prompt_len = 16;
    o.prefill_variants[0] = 4; /* a short input runs padded through embed.4 */
    o.kv_type = SLM_KV_F32;
    o.n_threads = 2;
    return t_load(path, &o);
}

/* A file of the knobs f against the reference, each length padded or full; with `breaks`, the
 * reference's departures each far from the engine's rows. */
static void check_moe(const moe_file *f, const char *what, int breaks) {
    model m;
    moe_make(&m, f);
    char path[300];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, what);
    CHECK(moe_write(&m, f, path));
    slm_engine *e = moe_load(path);
    slm_session *s = NULL;
    CHECK(e != NULL);
    if (e) CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    if (s) {
        CHECK(slm_model_pooling(e) == SLM_POOLING_MEAN);
        int32_t ids[16];
        fill_ids(ids);
        static float got[16 * DIM], mean[DIM];
        static double want[16 * DIM];
        const variant ok = {NK, 0, 0};
        for (size_t c = 0; c < sizeof enc_lengths / sizeof enc_lengths[0]; c++) {
            const int n = enc_lengths[c];
            double margin;
            moe_reference(&m, f->every, ids, n, ok, want, &margin);
            CHECKF(margin > 1e-5, "%s n %d: the router's top %d stand %g apart from the next (a fragile case)", what,
                   n, NK, margin);
            CHECKF(slm_session_embed(s, ids, n, SLM_POOLING_NONE, got, (size_t)n * DIM) == SLM_OK, "%s",
                   slm_session_error(s));
            const double err = rel_err(got, want, n * DIM);
            CHECKF(err < 1e-4, "%s n %d: relative error %g", what, n, err);
            if (n == 16) fprintf(stderr, "  %s: 16 rows, relative error %.3g, smallest router margin %.3g\n", what, err, margin);
            CHECK(slm_session_embed(s, ids, n, SLM_POOLING_MEAN, mean, DIM) == SLM_OK);
            double mw[DIM];
            for (int j = 0; j < DIM; j++) {
                mw[j] = 0;
                for (int r = 0; r < n; r++) mw[j] += want[r * DIM + j] / n;
            }
            CHECKF(rel_err(mean, mw, DIM) < 1e-4, "%s mean n %d: %g", what, n, rel_err(mean, mw, DIM));
        }
        /* the comparison sees each mistake a graph could make in the experts (got: the 16 rows) */
        static const variant bad[4] = {{NK + 1, 0, 0}, {NK - 1, 0, 0}, {NK, 1, 0}, {NK, 0, 1}};
        static const char *const bad_name[4] = {"top K + 1", "top K - 1", "renormalized weights", "gated experts"};
        for (int b = 0; b < 4 && breaks; b++) {
            double margin;
            moe_reference(&m, f->every, ids, 16, bad[b], want, &margin);
            const double err = rel_err(got, want, 16 * DIM);
            fprintf(stderr, "  %s against the reference with %s: relative difference %.3g\n", what, bad_name[b], err);
            CHECKF(err > 1e-2, "%s: the reference with %s is only %g from the engine's rows", what, bad_name[b], err);
        }
        slm_session_free(s);
    }
    slm_free(e);
    if (breaks) check_batch(path, what, DIM, 0); /* several texts a program: each row routed alone */
    unlink(path);
    free_model(&m);
}

static void test_experts_every_2(void) {
    const moe_file f = {2, 0, 1, 0}; /* experts on layers 1 and 3 */
    check_moe(&f, "nomic-moe-every2", 1);
}

static void test_experts_every_3_f16(void) {
    const moe_file f = {3, 1, 1, 0}; /* experts on layer 1 only; layer 3 is dense (3 % 3 == 0) */
    check_moe(&f, "nomic-moe-every3-f16", 0);
}

/* A file is refused naming what is wrong: experts on the other layers, a
 * missing or impossible count. */
static void test_refusals(void) {
    static const struct { moe_file f; const char *says; } c[3] = {
        {{2, 0, 0, 0}, "blk.0.ffn_up.weight"}, /* experts on layers 0 and 2 */
        {{2, 0, 1, 1}, "expert_count"},
        {{2, 0, 1, 2}, "expert_used_count"},
    };
    for (int i = 0; i < 3; i++) {
        model m;
        moe_make(&m, &c[i].f);
        char path[300];
        snprintf(path, sizeof path, "%s/refused%d.gguf", dir, i);
        CHECK(moe_write(&m, &c[i].f, path));
        slm_engine *e = NULL;
        slm_options o = slm_default_options();
        o.embeddings = 1;
        CHECK(slm_load(&e, path, &o) != SLM_OK);
        CHECKF(strstr(slm_last_error(e), c[i].says) != NULL, "case %d: %s", i, slm_last_error(e));
        slm_free(e);
        unlink(path);
        free_model(&m);
    }
}

/* staticlm synth --shape nomic-embed-text-v2-moe cut to 2 layers of 64, with XLM-R's kind of
 * vocabulary (a unigram one): the converter's keys and tensors (the experts 3-D on layer 1, no gate,
 * the router f32, the Q/K/V bias), and the file embeds a text. */
static void test_synth_shape(void) {
    char path[300], cmd[1200];
    snprintf(path, sizeof path, "%s/synth-v2moe.gguf", dir);
    snprintf(cmd, sizeof cmd, "\"%s\" synth --shape nomic-embed-text-v2-moe --layers 2 --dim 64 --heads 4 --ffn 96 "
             "--type q8_0 --vocab-file \"%s\" -o \"%s\" >/dev/null 2>&1", SLM_CLI_PATH, SLM_TESTS_DIR "/corpus/ugm/xlmr.gguf",
             path);
    CHECK(system(cmd) == 0);
    slm_map map;
    slm_gguf *g = NULL;
    slm_err err = {0};
    if (slm_map_file(&map, path, &err) || slm_gguf_open(&g, map.data, map.size, path, &err)) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    uint32_t v[6] = {0};
    float eps = 0, base = 0;
    CHECK(slm_gguf_get_u32(g, "nomic-bert-moe.expert_count", &v[0]) && v[0] == 8);
    CHECK(slm_gguf_get_u32(g, "nomic-bert-moe.expert_used_count", &v[1]) && v[1] == 2);
    CHECK(slm_gguf_get_u32(g, "nomic-bert-moe.moe_every_n_layers", &v[2]) && v[2] == 2);
    CHECK(slm_gguf_get_u32(g, "nomic-bert-moe.context_length", &v[3]) && v[3] == 512);
    CHECK(slm_gguf_get_u32(g, "tokenizer.ggml.token_type_count", &v[4]) && v[4] == 1);
    CHECK(slm_gguf_get_u32(g, "nomic-bert-moe.pooling_type", &v[5]) && v[5] == 1);
    CHECK(slm_gguf_get_f32(g, "nomic-bert-moe.attention.layer_norm_epsilon", &eps) && eps == 1e-5f);
    CHECK(slm_gguf_get_f32(g, "nomic-bert-moe.rope.freq_base", &base) && base == 10000.0f);
    const slm_gguf_tensor *up = slm_gguf_find_tensor(g, "blk.1.ffn_up_exps.weight"),
                          *down = slm_gguf_find_tensor(g, "blk.1.ffn_down_exps.weight"),
                          *router = slm_gguf_find_tensor(g, "blk.1.ffn_gate_inp.weight"),
                          *qb = slm_gguf_find_tensor(g, "blk.0.attn_qkv.bias");
    CHECK(up && up->n_dims == 3 && up->ne[0] == 64 && up->ne[1] == 96 && up->ne[2] == 8 && up->type == SLM_Q8_0);
    CHECK(down && down->n_dims == 3 && down->ne[0] == 96 && down->ne[1] == 64 && down->ne[2] == 8);
    CHECK(router && router->type == SLM_F32 && router->ne[0] == 64 && router->ne[1] == 8);
    CHECK(qb && qb->type == SLM_F32 && qb->ne[0] == 192);
    CHECK(slm_gguf_find_tensor(g, "blk.0.ffn_up.bias") && slm_gguf_find_tensor(g, "blk.0.ffn_down.bias"));
    CHECK(!slm_gguf_find_tensor(g, "blk.1.ffn_up.weight") && !slm_gguf_find_tensor(g, "blk.0.ffn_gate.weight") &&
          !slm_gguf_find_tensor(g, "blk.0.ffn_up_exps.weight") && !slm_gguf_find_tensor(g, "blk.1.ffn_gate_exps.weight"));
    slm_gguf_str tm;
    CHECK(slm_gguf_get_str(g, "tokenizer.ggml.model", &tm) && slm_gguf_str_eq(tm, "t5"));
    slm_gguf_close(g);
    slm_unmap(&map);
    slm_engine *e = moe_load(path);
    slm_session *s = NULL;
    CHECK(e != NULL);
    if (e) CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    if (s) {
        float a[64];
        int nt = 0;
        CHECKF(slm_session_embed_text(s, "Hello world", SLM_POOLING_MEAN, a, 64, &nt) == SLM_OK, "%s", slm_session_error(s));
        int finite = nt > 2;
        for (int i = 0; i < 64; i++) finite &= isfinite(a[i]);
        CHECK(finite);
        slm_session_free(s);
    }
    slm_free(e);
    unlink(path);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/slm_encoder_moe_%d", (int)getpid());
    mkdir(dir, 0700);
    T_RUN(test_experts_every_2);
    T_RUN(test_experts_every_3_f16);
    T_RUN(test_refusals);
    T_RUN(test_synth_shape);
    rmdir(dir);
    T_DONE();
}
