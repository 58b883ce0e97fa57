/* A plain reference forward pass for tests: one token at a time, like
 * llama2.c's run.c, in double precision, written without the compiler,
 * the executor or the kernels. Weights are dequantized with the reference
 * dequantizers. Supports what the architectures need: GQA, Q/K/V bias,
 * adjacent-pair and neox RoPE, rope_freqs factors, linear RoPE scaling,
 * sliding-window attention, tied embeddings. */
#ifndef SLM_REF_FORWARD_H
#define SLM_REF_FORWARD_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "format/model.h"

static float *ref_dequant(const slm_model_file *m, const char *name, int64_t *rows, int64_t *cols) {
    const slm_tensor *t = slm_model_tensor(m, name);
    if (!t) return NULL;
    int64_t c = t->ne[0], r = t->n_dims > 1 ? t->ne[1] : 1;
    float *out = malloc((size_t)(r * c) * sizeof(float));
    for (int64_t i = 0; i < r; i++) /* repacked or not */
        if (!slm_dequantize_matrix_row(t->type, t->data, c, i, out + i * c)) {
            free(out);
            return NULL;
        }
    if (rows) *rows = r;
    if (cols) *cols = c;
    return out;
}

static float *ref_layer(const slm_model_file *m, const char *fmt, int l) {
    char name[64];
    snprintf(name, sizeof name, fmt, l);
    return ref_dequant(m, name, NULL, NULL);
}

/* y[rows] = W[rows, cols] x[cols] (+ bias) */
static void ref_matvec(const float *W, const double *x, double *y, int rows, int cols, const float *bias) {
    for (int i = 0; i < rows; i++) {
        double s = 0;
        for (int j = 0; j < cols; j++) s += (double)W[(size_t)i * cols + j] * x[j];
        y[i] = s + (bias ? bias[i] : 0.0);
    }
}

static void ref_rmsnorm(const double *x, const float *g, double *y, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double k = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = g[i] * x[i] * k;
}

static void ref_rope(double *v, int heads, int hd, int pos, const slm_model_config *c, const float *factors) {
    for (int h = 0; h < heads; h++) {
        double *x = v + (size_t)h * hd;
        for (int i = 0; i < hd / 2; i++) {
            double freq = pow((double)c->rope_base, -2.0 * i / hd);
            if (factors) freq /= factors[i];
            double a = (double)pos / (double)c->rope_scale * freq;
            int i0 = c->rope_neox ? i : 2 * i, i1 = c->rope_neox ? i + hd / 2 : 2 * i + 1;
            double x0 = x[i0], x1 = x[i1];
            x[i0] = x0 * cos(a) - x1 * sin(a);
            x[i1] = x0 * sin(a) + x1 * cos(a);
        }
    }
}

/* logits[n][vocab] for the sequence ids[0..n) at positions 0..n-1. Returns 1 ok. */
static int ref_forward(const slm_model_file *m, const int32_t *ids, int n, float *logits) {
    const slm_model_config *c = &m->cfg;
    const int D = c->dim, H = c->n_heads, KV = c->n_kv_heads, hd = c->head_dim, F = c->hidden_dim,
              V = c->vocab_size, kvd = KV * hd, L = c->n_layers;
    float *emb = ref_dequant(m, "token_embd.weight", NULL, NULL);
    float *out = c->tied_embeddings ? emb : ref_dequant(m, "output.weight", NULL, NULL);
    float *onorm = ref_dequant(m, "output_norm.weight", NULL, NULL);
    float *factors = c->rope_freqs ? ref_dequant(m, "rope_freqs.weight", NULL, NULL) : NULL;
    double *kc = calloc((size_t)L * n * kvd, sizeof(double)), *vc = calloc((size_t)L * n * kvd, sizeof(double));
    double *x = malloc(sizeof(double) * D), *xn = malloc(sizeof(double) * D), *q = malloc(sizeof(double) * D),
           *att = malloc(sizeof(double) * D), *o = malloc(sizeof(double) * D), *g = malloc(sizeof(double) * F),
           *u = malloc(sizeof(double) * F), *sc = malloc(sizeof(double) * n), *lg = malloc(sizeof(double) * V);
    int ok = emb && out && onorm;
    float *wq = NULL, *wk = NULL, *wv = NULL, *wo = NULL, *an = NULL, *fn = NULL, *w1 = NULL, *w2 = NULL, *w3 = NULL,
          *bq = NULL, *bk = NULL, *bv = NULL;
    for (int p = 0; ok && p < n; p++) {
        for (int i = 0; i < D; i++) x[i] = emb[(size_t)ids[p] * D + i];
        for (int l = 0; ok && l < L; l++) {
            wq = ref_layer(m, "blk.%d.attn_q.weight", l);
            wk = ref_layer(m, "blk.%d.attn_k.weight", l);
            wv = ref_layer(m, "blk.%d.attn_v.weight", l);
            wo = ref_layer(m, "blk.%d.attn_output.weight", l);
            an = ref_layer(m, "blk.%d.attn_norm.weight", l);
            fn = ref_layer(m, "blk.%d.ffn_norm.weight", l);
            w1 = ref_layer(m, "blk.%d.ffn_gate.weight", l);
            w2 = ref_layer(m, "blk.%d.ffn_down.weight", l);
            w3 = ref_layer(m, "blk.%d.ffn_up.weight", l);
            if (c->qkv_bias) {
                bq = ref_layer(m, "blk.%d.attn_q.bias", l);
                bk = ref_layer(m, "blk.%d.attn_k.bias", l);
                bv = ref_layer(m, "blk.%d.attn_v.bias", l);
            }
            ok = wq && wk && wv && wo && an && fn && w1 && w2 && w3 && (!c->qkv_bias || (bq && bk && bv));
            if (ok) {
                double *kr = kc + ((size_t)l * n + p) * kvd, *vr = vc + ((size_t)l * n + p) * kvd;
                ref_rmsnorm(x, an, xn, D, c->norm_eps);
                ref_matvec(wq, xn, q, D, D, bq);
                ref_matvec(wk, xn, kr, kvd, D, bk);
                ref_matvec(wv, xn, vr, kvd, D, bv);
                ref_rope(q, H, hd, p, c, factors);
                ref_rope(kr, KV, hd, p, c, factors);
                int first = c->sliding_window > 0 && p + 1 > c->sliding_window ? p + 1 - c->sliding_window : 0;
                for (int h = 0; h < H; h++) {
                    int kh = h / (H / KV);
                    double mx = -1e300, sum = 0;
                    for (int t = first; t <= p; t++) {
                        double s = 0;
                        for (int d = 0; d < hd; d++) s += q[h * hd + d] * kc[((size_t)l * n + t) * kvd + kh * hd + d];
                        sc[t] = s / sqrt((double)hd);
                        if (sc[t] > mx) mx = sc[t];
                    }
                    for (int t = first; t <= p; t++) sum += (sc[t] = exp(sc[t] - mx));
                    for (int d = 0; d < hd; d++) {
                        double a = 0;
                        for (int t = first; t <= p; t++) a += sc[t] / sum * vc[((size_t)l * n + t) * kvd + kh * hd + d];
                        att[h * hd + d] = a;
                    }
                }
                ref_matvec(wo, att, o, D, D, NULL);
                for (int i = 0; i < D; i++) x[i] += o[i];
                ref_rmsnorm(x, fn, xn, D, c->norm_eps);
                ref_matvec(w1, xn, g, F, D, NULL);
                ref_matvec(w3, xn, u, F, D, NULL);
                for (int i = 0; i < F; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
                ref_matvec(w2, g, o, D, F, NULL);
                for (int i = 0; i < D; i++) x[i] += o[i];
            }
            free(wq); free(wk); free(wv); free(wo); free(an); free(fn); free(w1); free(w2); free(w3);
            free(bq); free(bk); free(bv);
            bq = bk = bv = NULL;
        }
        if (!ok) break;
        ref_rmsnorm(x, onorm, xn, D, c->norm_eps);
        ref_matvec(out, xn, lg, V, D, NULL);
        for (int i = 0; i < V; i++) logits[(size_t)p * V + i] = (float)lg[i];
    }
    if (out != emb) free(out);
    free(emb); free(onorm); free(factors); free(kc); free(vc);
    free(x); free(xn); free(q); free(att); free(o); free(g); free(u); free(sc); free(lg);
    return ok;
}

#endif
