/* A plain reference forward pass for tests: one token at a time, like
 * llama2.c's run.c, in double precision, written without the compiler,
 * the executor or the kernels. Weights are dequantized with the reference
 * dequantizers. Supports what the architectures need: GQA, Q/K/V bias,
 * adjacent-pair and neox RoPE, rope_freqs factors, linear RoPE scaling,
 * sliding-window attention, tied embeddings, and the families' features
 * (qwen3, gemma2, gemma3, phi3: see ref_forward_ctx) and mixtures of experts. */
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
        if (!slm_dequantize_matrix_row(t->type, t->data, c, t->ne[1], i, out + i * c)) {
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

/* Expert e's matrix or bias of layer l (kind gate, up or down), dequantized. */
static float *ref_expert(const slm_model_file *m, int l, const char *kind, int e, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "blk.%d.ffn_%s.%d.%s", l, kind, e, what);
    return ref_dequant(m, name, NULL, NULL);
}

/* The shared expert (qwen2moe, granitemoe's shared variant) on the normed
 * row xn added into o[D]: its SwiGLU FFN, times sigmoid(xn . gate) when
 * shared_gate. */
static void ref_matvec(const float *W, const double *x, double *y, int rows, int cols, const float *bias);
static int ref_shared(const slm_model_file *m, int l, const double *xn, double *o) {
    const slm_model_config *c = &m->cfg;
    const int D = c->dim, F = c->shared_ffn;
    float *wg = ref_layer(m, "blk.%d.ffn_gate_shexp.weight", l), *wu = ref_layer(m, "blk.%d.ffn_up_shexp.weight", l),
          *wd = ref_layer(m, "blk.%d.ffn_down_shexp.weight", l),
          *wi = c->shared_gate ? ref_layer(m, "blk.%d.ffn_gate_inp_shexp.weight", l) : NULL;
    double *g = malloc(sizeof(double) * (size_t)F), *u = malloc(sizeof(double) * (size_t)F),
           *y = malloc(sizeof(double) * (size_t)D), gate = 1.0;
    const int ok = wg && wu && wd && (wi || !c->shared_gate);
    if (ok) {
        ref_matvec(wg, xn, g, F, D, NULL);
        ref_matvec(wu, xn, u, F, D, NULL);
        for (int i = 0; i < F; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
        ref_matvec(wd, g, y, D, F, NULL);
        if (wi) {
            double z;
            ref_matvec(wi, xn, &z, 1, D, NULL);
            gate = 1.0 / (1.0 + exp(-z));
        }
        for (int i = 0; i < D; i++) o[i] += gate * y[i];
    }
    free(wg); free(wu); free(wd); free(wi); free(g); free(u); free(y);
    return ok;
}

/* The routing of one row from its router logits lg[E]: the scores (softmax,
 * or each logit's sigmoid when expert_sigmoid), the K experts of the largest
 * score plus the selection bias sb (when not NULL; ties: the lower index)
 * into sel, their unbiased scores renormalized when expert_norm, times
 * expert_scale, into w. */
static void ref_route(const slm_model_config *c, const double *lg, const float *sb, int *sel, double *w) {
    const int E = c->n_experts, K = c->n_experts_used;
    double mx = -1e300, sum = 0, wsum = 0;
    for (int e = 0; e < E; e++) mx = lg[e] > mx ? lg[e] : mx;
    for (int e = 0; e < E; e++) sum += exp(lg[e] - mx);
#define REF_SCORE(e) (c->expert_sigmoid ? 1.0 / (1.0 + exp(-lg[e])) : exp(lg[e] - mx) / sum)
#define REF_KEY(e) (REF_SCORE(e) + (sb ? (double)sb[e] : 0.0))
    for (int s = 0; s < K; s++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int q = 0; q < s; q++) taken |= sel[q] == e;
            if (!taken && (best < 0 || REF_KEY(e) > REF_KEY(best))) best = e;
        }
        sel[s] = best;
        w[s] = REF_SCORE(best);
        wsum += w[s];
    }
#undef REF_KEY
#undef REF_SCORE
    for (int s = 0; s < K; s++) {
        if (c->expert_norm) w[s] /= wsum;
        if (c->expert_scale != 0.0f) w[s] *= c->expert_scale;
    }
}

/* A mixture-of-experts FFN on the normed row xn into o[D]: the routing
 * (ref_route), each expert's SwiGLU weighted; the shared expert's output
 * added. */
static int ref_moe(const slm_model_file *m, int l, const double *xn, double *o) {
    const slm_model_config *c = &m->cfg;
    const int D = c->dim, F = c->hidden_dim, E = c->n_experts, K = c->n_experts_used;
    char name[64];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", l);
    float *router = ref_dequant(m, name, NULL, NULL), *rb = NULL, *sb = NULL;
    if (c->expert_sel_bias) { /* glm4moe: the selection bias */
        snprintf(name, sizeof name, "blk.%d.exp_probs_b.bias", l);
        sb = ref_dequant(m, name, NULL, NULL);
    }
    if (c->expert_bias) { /* gpt-oss: the router's and the experts' biases */
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.bias", l);
        rb = ref_dequant(m, name, NULL, NULL);
    }
    double *lg = malloc(sizeof(double) * (size_t)E), *g = malloc(sizeof(double) * (size_t)F),
           *u = malloc(sizeof(double) * (size_t)F), *y = malloc(sizeof(double) * (size_t)D);
    int sel[64], ok = router != NULL && K <= 64 && (sb || !c->expert_sel_bias);
    double w[64];
    for (int i = 0; i < D; i++) o[i] = 0;
    if (ok) {
        ref_matvec(router, xn, lg, E, D, rb);
        ref_route(c, lg, sb, sel, w);
    }
    for (int s = 0; ok && s < K; s++) {
        float *wg = ref_expert(m, l, "gate", sel[s], "weight"), *wu = ref_expert(m, l, "up", sel[s], "weight"),
              *wd = ref_expert(m, l, "down", sel[s], "weight"), *bg = NULL, *bu = NULL, *bd = NULL;
        if (c->expert_bias) {
            bg = ref_expert(m, l, "gate", sel[s], "bias");
            bu = ref_expert(m, l, "up", sel[s], "bias");
            bd = ref_expert(m, l, "down", sel[s], "bias");
        }
        ok = wg && wu && wd && (!c->expert_bias || (bg && bu && bd && rb));
        if (ok) {
            ref_matvec(wg, xn, g, F, D, bg);
            ref_matvec(wu, xn, u, F, D, bu);
            const double L = c->swiglu_limit, al = c->swiglu_alpha;
            for (int i = 0; i < F; i++) {
                if (L > 0) { /* gpt-oss's clamped SwiGLU */
                    const double x = g[i] < L ? g[i] : L, v = u[i] < -L ? -L : u[i] > L ? L : u[i];
                    g[i] = x / (1.0 + exp(-al * x)) * (v + 1.0);
                } else {
                    g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
                }
            }
            ref_matvec(wd, g, y, D, F, bd);
            for (int i = 0; i < D; i++) o[i] += w[s] * y[i];
        }
        free(wg); free(wu); free(wd); free(bg); free(bu); free(bd);
    }
    free(rb); free(sb);
    free(router); free(lg); free(g); free(u); free(y);
    return ok && (!c->shared_ffn || ref_shared(m, l, xn, o));
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

/* RoPE of `heads` heads at pos with the given base / linear scale: the
 * first rot dimensions of each head rotate (neox pairs (i, i + rot/2), else
 * (2i, 2i+1)); factors divide each pair's frequency; cos and sin are
 * multiplied by attn_factor when it is not 0. */
static void ref_rope_ex(double *v, int heads, int hd, int rot, int pos, double base, double scale, int neox,
                        const float *factors, double attn_factor, const slm_model_config *yarn) {
    const double mul = attn_factor != 0.0 ? attn_factor : 1.0;
    /* YaRN as transformers computes it: each pair's inverse frequency blends
     * the interpolated (/ scale) and original ones by the extrapolation
     * factor, 1 below the correction range and 0 above it */
    double lo = 0, hi = 0;
    if (yarn && yarn->rope_yarn) {
        const double two_pi = 6.283185307179586;
        lo = floor(rot * log(yarn->rope_orig_ctx / (yarn->yarn_beta_fast * two_pi)) / (2 * log(base)));
        hi = ceil(rot * log(yarn->rope_orig_ctx / (yarn->yarn_beta_slow * two_pi)) / (2 * log(base)));
        lo = fmax(lo, 0);
        hi = fmin(hi, rot - 1);
        if (hi == lo) hi += 0.001;
    }
    for (int h = 0; h < heads; h++) {
        double *x = v + (size_t)h * hd;
        for (int i = 0; i < rot / 2; i++) {
            double freq = pow(base, -2.0 * i / rot);
            if (factors) freq /= factors[i];
            double a = (double)pos / scale * freq;
            if (yarn && yarn->rope_yarn) {
                const double ramp = fmin(1, fmax(0, (i - lo) / (hi - lo)));
                const double ef = (1 - ramp) * yarn->yarn_ext_factor;
                a = (double)pos * (freq / scale * (1 - ef) + freq * ef);
            }
            int i0 = neox ? i : 2 * i, i1 = neox ? i + rot / 2 : 2 * i + 1;
            double x0 = x[i0], x1 = x[i1];
            x[i0] = (x0 * cos(a) - x1 * sin(a)) * mul;
            x[i1] = (x0 * sin(a) + x1 * cos(a)) * mul;
        }
    }
}

/* Per-head RMSNorm: each run of hd values on its own, gains g[hd]. */
static void ref_head_norm(double *x, const float *g, int heads, int hd, double eps) {
    for (int h = 0; h < heads; h++) ref_rmsnorm(x + (size_t)h * hd, g, x + (size_t)h * hd, hd, eps);
}

static double ref_softcap(double x, double cap) { return cap > 0 ? cap * tanh(x / cap) : x; }

/* qwen35's Gated DeltaNet layer on the normed row xn into o[D], as
 * llama.cpp's qwen35.cpp and ggml's ssm_conv / gated_delta_net compute it,
 * written plainly: cw[(K-1) x conv_dim] the conv window (oldest first) and
 * st[H_v][S][S] the delta state (st[h][j][i]: value dim j, key dim i), both
 * updated. */
static int ref_delta_layer(const slm_model_file *m, int l, const double *xn, double *o, double *cw, double *st) {
    const slm_model_config *c = &m->cfg;
    const int D = c->dim, S = c->ssm_state, Hk = c->ssm_k_heads, Hv = c->ssm_v_heads, K = c->ssm_conv;
    const int CD = (2 * Hk + Hv) * S, VD = Hv * S;
    float *wqkv = ref_layer(m, "blk.%d.attn_qkv.weight", l), *wz = ref_layer(m, "blk.%d.attn_gate.weight", l),
          *wb = ref_layer(m, "blk.%d.ssm_beta.weight", l), *wa = ref_layer(m, "blk.%d.ssm_alpha.weight", l),
          *wo = ref_layer(m, "blk.%d.ssm_out.weight", l), *taps = ref_layer(m, "blk.%d.ssm_conv1d.weight", l),
          *dt = ref_layer(m, "blk.%d.ssm_dt.bias", l), *A = ref_layer(m, "blk.%d.ssm_a", l),
          *nw = ref_layer(m, "blk.%d.ssm_norm.weight", l);
    double *qkv = malloc(sizeof(double) * CD), *z = malloc(sizeof(double) * VD), *b = malloc(sizeof(double) * Hv),
           *a = malloc(sizeof(double) * Hv), *y = malloc(sizeof(double) * VD), *q = malloc(sizeof(double) * S),
           *k = malloc(sizeof(double) * S);
    const int ok = wqkv && wz && wb && wa && wo && taps && dt && A && nw;
    if (ok) {
        ref_matvec(wqkv, xn, qkv, CD, D, NULL);
        ref_matvec(wz, xn, z, VD, D, NULL);
        ref_matvec(wb, xn, b, Hv, D, NULL);
        ref_matvec(wa, xn, a, Hv, D, NULL);
        for (int ch = 0; ch < CD; ch++) { /* the causal conv over the window and this row, SiLU; the window shifts */
            double acc = taps[(size_t)ch * K + K - 1] * qkv[ch];
            for (int j = 0; j < K - 1; j++) acc += taps[(size_t)ch * K + j] * cw[(size_t)j * CD + ch];
            for (int j = 0; j + 1 < K - 1; j++) cw[(size_t)j * CD + ch] = cw[(size_t)(j + 1) * CD + ch];
            cw[(size_t)(K - 2) * CD + ch] = qkv[ch];
            qkv[ch] = acc / (1.0 + exp(-acc));
        }
        for (int h = 0; h < Hv; h++) {
            const int kh = h % Hk; /* llama.cpp's tiled order */
            double nq = 0, nk = 0;
            for (int i = 0; i < S; i++) {
                nq += qkv[kh * S + i] * qkv[kh * S + i];
                nk += qkv[(Hk + kh) * S + i] * qkv[(Hk + kh) * S + i];
            }
            nq = fmax(sqrt(nq), c->norm_eps);
            nk = fmax(sqrt(nk), c->norm_eps);
            for (int i = 0; i < S; i++) {
                q[i] = qkv[kh * S + i] / nq / sqrt((double)S);
                k[i] = qkv[(Hk + kh) * S + i] / nk;
            }
            const double sp = a[h] + dt[h] > 20 ? a[h] + dt[h] : log(1.0 + exp(a[h] + dt[h]));
            const double decay = exp(sp * A[h]), beta = 1.0 / (1.0 + exp(-b[h]));
            const double *v = qkv + (size_t)(2 * Hk + h) * S;
            double *M = st + (size_t)h * S * S;
            for (int j = 0; j < S; j++) {
                double sk = 0;
                for (int i = 0; i < S; i++) sk += (M[j * S + i] *= decay) * k[i];
                const double d = (v[j] - sk) * beta;
                double oq = 0;
                for (int i = 0; i < S; i++) oq += (M[j * S + i] += d * k[i]) * q[i];
                y[h * S + j] = oq;
            }
            ref_rmsnorm(y + h * S, nw, y + h * S, S, c->norm_eps); /* gated RMSNorm: times silu(z) */
            for (int j = 0; j < S; j++) y[h * S + j] *= z[h * S + j] / (1.0 + exp(-z[h * S + j]));
        }
        ref_matvec(wo, y, o, D, VD, NULL);
    }
    free(wqkv); free(wz); free(wb); free(wa); free(wo); free(taps); free(dt); free(A); free(nw);
    free(qkv); free(z); free(b); free(a); free(y); free(q); free(k);
    return ok;
}

/* logits[n][vocab] for the sequence ids[0..n) at positions 0..n-1, for a
 * compiled context of ctx rows (LongRoPE picks its factors by it). Every
 * family feature of the config: head size other than dim / n_heads, Q/K
 * bias, per-head Q/K norm, partial rotary, rope_freqs / LongRoPE factors
 * and attn_factor, per-layer sliding window and RoPE base/scale, query
 * scale, score and logit soft-capping, post norms, GeGLU, embedding scale.
 * Returns 1 ok. */
static inline int ref_forward_gemma4(const slm_model_file *m, const int32_t *ids, int n, float *logits);
/* hidden (may be NULL): each position's final-norm hidden state too,
 * [n][dim] (what embeddings pool); not for gemma4 (returns 0). */
static inline int ref_forward_full(const slm_model_file *m, const int32_t *ids, int n, float *logits, float *hidden,
                                   int ctx) {
    const slm_model_config *c = &m->cfg;
    if (!strcmp(c->arch, "gemma4")) return hidden ? 0 : ref_forward_gemma4(m, ids, n, logits); /* ref_gemma4.h */
    const int D = c->dim, H = c->n_heads, KV = c->n_kv_heads, hd = c->head_dim, F = slm_dense_ffn(c),
              V = c->vocab_size, kvd = KV * hd, L = c->n_layers, QD = H * hd, rot = slm_rope_dims(c);
    float *emb = ref_dequant(m, "token_embd.weight", NULL, NULL);
    float *out = c->tied_embeddings ? emb : ref_dequant(m, "output.weight", NULL, NULL);
    float *onorm = ref_dequant(m, "output_norm.weight", NULL, NULL);
    const char *fname = c->rope_freqs ? "rope_freqs.weight"
                        : !c->rope_long ? NULL
                        : ctx > c->rope_orig_ctx ? "rope_factors_long.weight"
                                                 : "rope_factors_short.weight";
    float *factors = fname ? ref_dequant(m, fname, NULL, NULL) : NULL;
    double *kc = calloc((size_t)L * n * kvd, sizeof(double)), *vc = calloc((size_t)L * n * kvd, sizeof(double));
    double *x = malloc(sizeof(double) * D), *xn = malloc(sizeof(double) * D), *q = malloc(sizeof(double) * QD),
           *att = malloc(sizeof(double) * QD), *o = malloc(sizeof(double) * D), *g = malloc(sizeof(double) * F),
           *u = malloc(sizeof(double) * F), *sc = malloc(sizeof(double) * n), *lg = malloc(sizeof(double) * V);
    int ok = emb && out && onorm && (!fname || factors);
    float *wq = NULL, *wk = NULL, *wv = NULL, *wo = NULL, *an = NULL, *fn = NULL, *w1 = NULL, *w2 = NULL, *w3 = NULL,
          *bq = NULL, *bk = NULL, *bv = NULL, *qn = NULL, *kn = NULL, *pa = NULL, *pf = NULL, *sk = NULL, *bo = NULL;
    const double qscale = c->attn_scale != 0.0f ? (double)c->attn_scale : 1.0 / sqrt((double)hd);
    /* qwen35: each DeltaNet layer's conv window and delta state; the gated query's rows */
    const size_t cwn = c->recur_interval ? (size_t)(c->ssm_conv - 1) * (size_t)(2 * c->ssm_k_heads + c->ssm_v_heads) * c->ssm_state : 0,
                 stn = c->recur_interval ? (size_t)c->ssm_v_heads * c->ssm_state * c->ssm_state : 0;
    double *cw = calloc((size_t)L * cwn + 1, sizeof(double)), *st = calloc((size_t)L * stn + 1, sizeof(double)),
           *qg = malloc(sizeof(double) * 2 * QD);
    for (int p = 0; ok && p < n; p++) {
        for (int i = 0; i < D; i++) x[i] = emb[(size_t)ids[p] * D + i] * (c->embed_scale != 0.0f ? (double)c->embed_scale : 1.0);
        for (int l = 0; ok && l < L; l++) {
            if (slm_layer_recurrent(c, l)) { /* qwen35: a DeltaNet layer, then the FFN as below */
                an = ref_layer(m, "blk.%d.attn_norm.weight", l);
                ok = an && ref_delta_layer(m, l, (ref_rmsnorm(x, an, xn, D, c->norm_eps), xn), o, cw + (size_t)l * cwn,
                                           st + (size_t)l * stn);
                free(an);
                an = NULL;
                for (int i = 0; ok && i < D; i++) x[i] += o[i];
                fn = ref_layer(m, "blk.%d.ffn_norm.weight", l);
                if (slm_layer_moe(c, l)) { /* qwen35moe: the experts and the gated shared expert */
                    ok = ok && fn && (ref_rmsnorm(x, fn, xn, D, c->norm_eps), ref_moe(m, l, xn, o));
                    for (int i = 0; ok && i < D; i++) x[i] += o[i];
                    free(fn);
                    fn = NULL;
                    continue;
                }
                w1 = ref_layer(m, "blk.%d.ffn_gate.weight", l);
                w2 = ref_layer(m, "blk.%d.ffn_down.weight", l);
                w3 = ref_layer(m, "blk.%d.ffn_up.weight", l);
                ok = ok && fn && w1 && w2 && w3;
                if (ok) {
                    ref_rmsnorm(x, fn, xn, D, c->norm_eps);
                    ref_matvec(w1, xn, g, F, D, NULL);
                    ref_matvec(w3, xn, u, F, D, NULL);
                    for (int i = 0; i < F; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
                    ref_matvec(w2, g, o, D, F, NULL);
                    for (int i = 0; i < D; i++) x[i] += o[i];
                }
                free(fn); free(w1); free(w2); free(w3);
                fn = w1 = w2 = w3 = NULL;
                continue;
            }
            wq = ref_layer(m, "blk.%d.attn_q.weight", l);
            wk = ref_layer(m, "blk.%d.attn_k.weight", l);
            wv = ref_layer(m, "blk.%d.attn_v.weight", l);
            wo = ref_layer(m, "blk.%d.attn_output.weight", l);
            an = c->no_pre_norms ? NULL : ref_layer(m, "blk.%d.attn_norm.weight", l);
            fn = c->no_pre_norms ? NULL : ref_layer(m, "blk.%d.ffn_norm.weight", l);
            if (!slm_layer_moe(c, l)) { /* MoE: ref_moe reads the experts (glm4moe: after the dense layers) */
                w1 = ref_layer(m, "blk.%d.ffn_gate.weight", l);
                w2 = ref_layer(m, "blk.%d.ffn_down.weight", l);
                w3 = ref_layer(m, "blk.%d.ffn_up.weight", l);
            }
            if (c->qkv_bias) {
                bq = ref_layer(m, "blk.%d.attn_q.bias", l);
                bk = ref_layer(m, "blk.%d.attn_k.bias", l);
                bv = ref_layer(m, "blk.%d.attn_v.bias", l);
            }
            if (c->attn_sinks) sk = ref_layer(m, "blk.%d.attn_sinks.weight", l);
            if (c->o_bias) bo = ref_layer(m, "blk.%d.attn_output.bias", l);
            if (c->qk_norm) {
                qn = ref_layer(m, "blk.%d.attn_q_norm.weight", l);
                kn = ref_layer(m, "blk.%d.attn_k_norm.weight", l);
            }
            if (c->post_norms) {
                pa = ref_layer(m, "blk.%d.post_attention_norm.weight", l);
                pf = ref_layer(m, "blk.%d.post_ffw_norm.weight", l);
            }
            ok = wq && wk && wv && wo && ((an && fn) || c->no_pre_norms) && ((w1 && w2 && w3) || slm_layer_moe(c, l)) && (!c->qkv_bias || (bq && bk && bv)) &&
                 (!c->qk_norm || (qn && kn)) && (!c->post_norms || (pa && pf)) && (!c->attn_sinks || sk) &&
                 (!c->o_bias || bo);
            if (ok) {
                double *kr = kc + ((size_t)l * n + p) * kvd, *vr = vc + ((size_t)l * n + p) * kvd;
                const int swa = slm_layer_swa(c, l);
                const double base = swa && c->rope_base_swa > 0.0f ? c->rope_base_swa : c->rope_base;
                const double rscale = swa && c->rope_scale_swa > 0.0f ? c->rope_scale_swa : c->rope_scale;
                if (an) ref_rmsnorm(x, an, xn, D, c->norm_eps);
                else memcpy(xn, x, sizeof(double) * D); /* olmo2: no pre-norm */
                if (c->attn_gate) { /* qwen35: per head its query rows, then its gate's */
                    ref_matvec(wq, xn, qg, 2 * QD, D, NULL);
                    for (int h = 0; h < H; h++) memcpy(q + h * hd, qg + (size_t)h * 2 * hd, sizeof(double) * hd);
                } else {
                    ref_matvec(wq, xn, q, QD, D, bq);
                }
                ref_matvec(wk, xn, kr, kvd, D, bk);
                ref_matvec(wv, xn, vr, kvd, D, bv);
                if (c->qk_norm == 2) { /* olmo2: the whole rows */
                    ref_rmsnorm(q, qn, q, QD, c->norm_eps);
                    ref_rmsnorm(kr, kn, kr, kvd, c->norm_eps);
                } else if (c->qk_norm) {
                    ref_head_norm(q, qn, H, hd, c->norm_eps);
                    ref_head_norm(kr, kn, KV, hd, c->norm_eps);
                }
                if (c->nope_step <= 0 || (l + 1) % c->nope_step != 0) { /* smollm3: no RoPE on every fourth layer */
                    /* with YaRN, sliding layers of their own RoPE rotate plainly (olmo3) */
                    const int plain = swa && c->rope_yarn && (c->rope_base_swa > 0.0f || c->rope_scale_swa > 0.0f);
                    const double af = plain ? 0.0 : c->rope_attn_factor;
                    ref_rope_ex(q, H, hd, rot, p, base, rscale, c->rope_neox, factors, af, plain ? NULL : c);
                    ref_rope_ex(kr, KV, hd, rot, p, base, rscale, c->rope_neox, factors, af, plain ? NULL : c);
                }
                int first = swa && p + 1 > c->sliding_window ? p + 1 - c->sliding_window : 0;
                for (int h = 0; h < H; h++) {
                    int kh = h / (H / KV);
                    double mx = -1e300, sum = 0;
                    for (int t = first; t <= p; t++) {
                        double s = 0;
                        for (int d = 0; d < hd; d++) s += q[h * hd + d] * kc[((size_t)l * n + t) * kvd + kh * hd + d];
                        sc[t] = ref_softcap(s * qscale, c->attn_softcap);
                        if (sc[t] > mx) mx = sc[t];
                    }
                    for (int t = first; t <= p; t++) sum += (sc[t] = exp(sc[t] - mx));
                    if (sk) sum += exp(sk[h] - mx); /* gpt-oss: the head's sink logit */
                    for (int d = 0; d < hd; d++) {
                        double a = 0;
                        for (int t = first; t <= p; t++) a += sc[t] / sum * vc[((size_t)l * n + t) * kvd + kh * hd + d];
                        att[h * hd + d] = a;
                    }
                }
                if (c->attn_gate) /* the output times sigmoid(gate) */
                    for (int h = 0; h < H; h++)
                        for (int d = 0; d < hd; d++) att[h * hd + d] /= 1.0 + exp(-qg[(size_t)h * 2 * hd + hd + d]);
                ref_matvec(wo, att, o, D, QD, bo);
                if (c->residual_scale != 0.0f) /* granite */
                    for (int i = 0; i < D; i++) o[i] *= c->residual_scale;
                if (c->post_norms) ref_rmsnorm(o, pa, o, D, c->norm_eps);
                for (int i = 0; i < D; i++) x[i] += o[i];
                if (fn) ref_rmsnorm(x, fn, xn, D, c->norm_eps);
                else memcpy(xn, x, sizeof(double) * D);
                if (slm_layer_moe(c, l)) {
                    ok = ref_moe(m, l, xn, o);
                } else {
                    ref_matvec(w1, xn, g, F, D, NULL);
                    ref_matvec(w3, xn, u, F, D, NULL);
                    for (int i = 0; i < F; i++)
                        g[i] = c->ffn_gelu ? 0.5 * g[i] * (1.0 + tanh(0.7978845608028654 * (g[i] + 0.044715 * g[i] * g[i] * g[i]))) * u[i]
                                           : g[i] / (1.0 + exp(-g[i])) * u[i];
                    ref_matvec(w2, g, o, D, F, NULL);
                }
                if (c->residual_scale != 0.0f)
                    for (int i = 0; i < D; i++) o[i] *= c->residual_scale;
                if (c->post_norms) ref_rmsnorm(o, pf, o, D, c->norm_eps);
                for (int i = 0; i < D; i++) x[i] += o[i];
            }
            free(wq); free(wk); free(wv); free(wo); free(an); free(fn); free(w1); free(w2); free(w3);
            free(bq); free(bk); free(bv); free(qn); free(kn); free(pa); free(pf); free(sk); free(bo);
            bq = bk = bv = qn = kn = pa = pf = sk = bo = w1 = w2 = w3 = NULL;
        }
        if (!ok) break;
        ref_rmsnorm(x, onorm, xn, D, c->norm_eps);
        for (int i = 0; hidden && i < D; i++) hidden[(size_t)p * D + i] = (float)xn[i];
        ref_matvec(out, xn, lg, V, D, NULL);
        for (int i = 0; i < V; i++)
            logits[(size_t)p * V + i] =
                (float)ref_softcap(c->logit_scale != 0.0f ? lg[i] / c->logit_scale : lg[i], c->final_softcap);
    }
    if (out != emb) free(out);
    free(emb); free(onorm); free(factors); free(kc); free(vc);
    free(x); free(xn); free(q); free(att); free(o); free(g); free(u); free(sc); free(lg);
    free(cw); free(st); free(qg);
    return ok;
}

static inline int ref_forward_ctx(const slm_model_file *m, const int32_t *ids, int n, float *logits, int ctx) {
    return ref_forward_full(m, ids, n, logits, NULL, ctx);
}

#include "ref_gemma4.h"

/* The same for a context no longer than the model's original one. */
static inline int ref_forward(const slm_model_file *m, const int32_t *ids, int n, float *logits) {
    return ref_forward_ctx(m, ids, n, logits, 0);
}

#endif
