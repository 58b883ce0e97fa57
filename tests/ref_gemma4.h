/* The plain double-precision reference of Gemma 4 (gemma4), one token at a
 * time, written from llama.cpp's graph (src/models/gemma4.cpp) without the
 * compiler, the executor or the kernels: embeddings times sqrt(dim); the
 * per-layer inputs ((norm(proj(x) / sqrt(dim)) + ple_embd * sqrt(ple)) /
 * sqrt(2)); per layer Q (per-head norm, RoPE), K and V (V = K's projection
 * without attn_v; K normed with its gain, V without one; RoPE on K) into
 * the layer's cache, or none on a KV-shared layer, which attends over the
 * cache of layer n_kv - 2 (window) or n_kv - 1 (global); query scale 1;
 * post norms; GeGLU; with experts (26B-A4B) the dense FFN's output normed
 * by post_ffw_norm_1 plus the experts' branch (ref_g4_experts) before
 * post_ffw_norm; the per-layer embedding; the layer's output scale; the
 * final soft-cap. Included by ref_forward.h. */
#ifndef SLM_REF_GEMMA4_H
#define SLM_REF_GEMMA4_H

static double ref_gelu(double g) { return 0.5 * g * (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))); }

static void ref_plain_norm(double *x, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    const double k = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) x[i] *= k;
}

/* Layer l's tensor, dequantized (NULL when absent). */
static float *ref_g4(const slm_model_file *m, const char *fmt, int l) { return ref_layer(m, fmt, l); }

/* gemma4's experts branch of layer l (26B-A4B; llama.cpp's gemma4 graph
 * and build_moe_ffn) on the residual x into out [dim]: the router's input
 * rmsnorm(x) (no gain) times ffn_gate_inp.scale and 1/sqrt(dim); softmax
 * over the experts; the K most probable (ties: the lower index), their
 * probabilities over their sum (at least 6.1e-5); each one's GeGLU FFN of x
 * normed by pre_ffw_norm_2, its output times its ffn_down_exps.scale (when
 * the file has them) and its weight, summed; the sum normed by
 * post_ffw_norm_2. 0 when a tensor is missing. */
static int ref_g4_experts(const slm_model_file *m, int l, const double *x, double *out) {
    const slm_model_config *c = &m->cfg;
    const int D = c->dim, E = c->n_experts, K = c->n_experts_used, F = c->hidden_dim;
    float *gs = ref_g4(m, "blk.%d.ffn_gate_inp.scale", l), *wr = ref_g4(m, "blk.%d.ffn_gate_inp.weight", l),
          *n2 = ref_g4(m, "blk.%d.pre_ffw_norm_2.weight", l), *p2 = ref_g4(m, "blk.%d.post_ffw_norm_2.weight", l),
          *ds = c->expert_down_scale ? ref_g4(m, "blk.%d.ffn_down_exps.scale", l) : NULL;
    double *r = malloc(sizeof(double) * D), *xn = malloc(sizeof(double) * D), *acc = calloc((size_t)D, sizeof(double)),
           *lg = malloc(sizeof(double) * E), *g = malloc(sizeof(double) * F), *u = malloc(sizeof(double) * F),
           *y = malloc(sizeof(double) * D);
    int ok = gs && wr && n2 && p2 && (ds || !c->expert_down_scale) && K <= 64;
    if (ok) {
        for (int i = 0; i < D; i++) r[i] = x[i];
        ref_plain_norm(r, D, c->norm_eps);
        for (int i = 0; i < D; i++) r[i] *= gs[i] / sqrt((double)D);
        ref_matvec(wr, r, lg, E, D, NULL);
        double mx = lg[0], sum = 0, wsum = 0;
        for (int e = 1; e < E; e++) mx = lg[e] > mx ? lg[e] : mx;
        for (int e = 0; e < E; e++) sum += (lg[e] = exp(lg[e] - mx));
        int sel[64];
        double w[64];
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int q = 0; q < k; q++) taken |= sel[q] == e;
                if (!taken && (best < 0 || lg[e] > lg[best])) best = e;
            }
            sel[k] = best;
            wsum += (w[k] = lg[best] / sum);
        }
        if (wsum < 6.103515625e-5) wsum = 6.103515625e-5;
        ref_rmsnorm(x, n2, xn, D, c->norm_eps);
        for (int k = 0; ok && k < K; k++) {
            float *wg = ref_expert(m, l, "gate", sel[k], "weight"), *wu = ref_expert(m, l, "up", sel[k], "weight"),
                  *wd = ref_expert(m, l, "down", sel[k], "weight");
            ok = wg && wu && wd;
            if (ok) {
                ref_matvec(wg, xn, g, F, D, NULL);
                ref_matvec(wu, xn, u, F, D, NULL);
                for (int i = 0; i < F; i++) g[i] = ref_gelu(g[i]) * u[i];
                ref_matvec(wd, g, y, D, F, NULL);
                const double a = w[k] / wsum * (ds ? ds[sel[k]] : 1.0);
                for (int i = 0; i < D; i++) acc[i] += a * y[i];
            }
            free(wg); free(wu); free(wd);
        }
        ref_rmsnorm(acc, p2, out, D, c->norm_eps);
    }
    free(gs); free(wr); free(n2); free(p2); free(ds);
    free(r); free(xn); free(acc); free(lg); free(g); free(u); free(y);
    return ok;
}

static inline int ref_forward_gemma4(const slm_model_file *m, const int32_t *ids, int n, float *logits) {
    const slm_model_config *c = &m->cfg;
    const int D = c->dim, H = c->n_heads, L = c->n_layers, V = c->vocab_size, P = c->ple_dim;
    const int hmax = c->head_dim > c->head_dim_swa ? c->head_dim : c->head_dim_swa;
    const int kvmax = hmax * (c->n_kv_heads > c->n_kv_heads_swa ? c->n_kv_heads : c->n_kv_heads_swa);
    const int fd = c->moe_dense ? c->dense_ffn : c->hidden_dim; /* the dense FFN (beside the experts) */
    const int fmax = fd > c->hidden_dim_shared ? fd : c->hidden_dim_shared;
    const int n_kv = L - c->kv_shared;
    float *emb = ref_dequant(m, "token_embd.weight", NULL, NULL);
    float *out = c->tied_embeddings ? emb : ref_dequant(m, "output.weight", NULL, NULL);
    float *onorm = ref_dequant(m, "output_norm.weight", NULL, NULL);
    float *freqs = c->rope_freqs ? ref_dequant(m, "rope_freqs.weight", NULL, NULL) : NULL;
    float *pemb = P ? ref_dequant(m, "per_layer_token_embd.weight", NULL, NULL) : NULL;
    float *pproj = P ? ref_dequant(m, "per_layer_model_proj.weight", NULL, NULL) : NULL;
    float *pnorm = P ? ref_dequant(m, "per_layer_proj_norm.weight", NULL, NULL) : NULL;
    double *kc = calloc((size_t)L * n * kvmax, sizeof(double)), *vc = calloc((size_t)L * n * kvmax, sizeof(double));
    double *x = malloc(sizeof(double) * D), *xn = malloc(sizeof(double) * D), *q = malloc(sizeof(double) * H * hmax),
           *att = malloc(sizeof(double) * H * hmax), *o = malloc(sizeof(double) * D), *g = malloc(sizeof(double) * fmax),
           *u = malloc(sizeof(double) * fmax), *sc = malloc(sizeof(double) * n), *lg = malloc(sizeof(double) * V),
           *pin = malloc(sizeof(double) * ((size_t)P * L + 1)), *pg = malloc(sizeof(double) * (P + 1));
    int ok = emb && out && onorm && (!c->rope_freqs || freqs) && (!P || (pemb && pproj && pnorm));
    for (int p = 0; ok && p < n; p++) {
        for (int i = 0; i < D; i++) x[i] = emb[(size_t)ids[p] * D + i] * sqrt((double)D);
        if (P) { /* the per-layer inputs */
            ref_matvec(pproj, x, pin, P * L, D, NULL);
            for (int l = 0; l < L; l++) {
                double *r = pin + (size_t)l * P;
                for (int j = 0; j < P; j++) r[j] /= sqrt((double)D);
                ref_rmsnorm(r, pnorm, r, P, c->norm_eps);
                for (int j = 0; j < P; j++)
                    r[j] = (r[j] + pemb[(size_t)ids[p] * P * L + (size_t)l * P + j] * sqrt((double)P)) / sqrt(2.0);
            }
        }
        for (int l = 0; ok && l < L; l++) {
            const int swa = slm_layer_swa(c, l), own = l < n_kv;
            const int hd = swa ? c->head_dim_swa : c->head_dim;
            const int KV = swa && c->n_kv_heads_swa ? c->n_kv_heads_swa : c->n_kv_heads;
            const int rot = swa ? (c->rope_dims_swa ? c->rope_dims_swa : c->head_dim_swa) : slm_rope_dims(c);
            const int kvd = KV * hd, QD = H * hd, F = !own && c->hidden_dim_shared ? c->hidden_dim_shared : fd;
            const int src = own ? l : n_kv - (swa ? 2 : 1);
            const double base = swa ? c->rope_base_swa : c->rope_base, rs = swa ? 1.0 : c->rope_scale;
            float *wq = ref_g4(m, "blk.%d.attn_q.weight", l), *wk = own ? ref_g4(m, "blk.%d.attn_k.weight", l) : NULL,
                  *wv = own ? ref_g4(m, "blk.%d.attn_v.weight", l) : NULL, *wo = ref_g4(m, "blk.%d.attn_output.weight", l),
                  *an = ref_g4(m, "blk.%d.attn_norm.weight", l), *fn = ref_g4(m, "blk.%d.ffn_norm.weight", l),
                  *w1 = ref_g4(m, "blk.%d.ffn_gate.weight", l), *w2 = ref_g4(m, "blk.%d.ffn_down.weight", l),
                  *w3 = ref_g4(m, "blk.%d.ffn_up.weight", l), *qn = ref_g4(m, "blk.%d.attn_q_norm.weight", l),
                  *kn = own ? ref_g4(m, "blk.%d.attn_k_norm.weight", l) : NULL,
                  *pa = ref_g4(m, "blk.%d.post_attention_norm.weight", l), *pf = ref_g4(m, "blk.%d.post_ffw_norm.weight", l),
                  *ig = P ? ref_g4(m, "blk.%d.inp_gate.weight", l) : NULL, *pj = P ? ref_g4(m, "blk.%d.proj.weight", l) : NULL,
                  *pn = P ? ref_g4(m, "blk.%d.post_norm.weight", l) : NULL,
                  *os = c->layer_scale ? ref_g4(m, "blk.%d.layer_output_scale.weight", l) : NULL;
            ok = wq && wo && an && fn && w1 && w2 && w3 && qn && pa && pf && (!own || (wk && kn)) && (!P || (ig && pj && pn)) &&
                 (!c->layer_scale || os) && src >= 0;
            if (ok) {
                ref_rmsnorm(x, an, xn, D, c->norm_eps);
                ref_matvec(wq, xn, q, QD, D, NULL);
                ref_head_norm(q, qn, H, hd, c->norm_eps);
                ref_rope_ex(q, H, hd, rot, p, base, rs, 1, swa ? NULL : freqs, 0.0, NULL);
                if (own) {
                    double *kr = kc + ((size_t)l * n + p) * kvmax, *vr = vc + ((size_t)l * n + p) * kvmax;
                    ref_matvec(wk, xn, kr, kvd, D, NULL);
                    if (wv) ref_matvec(wv, xn, vr, kvd, D, NULL);
                    else memcpy(vr, kr, sizeof(double) * kvd); /* V = K's projection */
                    ref_head_norm(kr, kn, KV, hd, c->norm_eps);
                    for (int h = 0; h < KV; h++) ref_plain_norm(vr + (size_t)h * hd, hd, c->norm_eps);
                    ref_rope_ex(kr, KV, hd, rot, p, base, rs, 1, swa ? NULL : freqs, 0.0, NULL);
                }
                const int first = swa && p + 1 > c->sliding_window ? p + 1 - c->sliding_window : 0;
                for (int h = 0; h < H; h++) {
                    const int kh = h / (H / KV);
                    double mx = -1e300, sum = 0;
                    for (int t = first; t <= p; t++) {
                        double s = 0;
                        for (int d = 0; d < hd; d++) s += q[h * hd + d] * kc[((size_t)src * n + t) * kvmax + kh * hd + d];
                        sc[t] = s; /* query scale 1 */
                        if (s > mx) mx = s;
                    }
                    for (int t = first; t <= p; t++) sum += (sc[t] = exp(sc[t] - mx));
                    for (int d = 0; d < hd; d++) {
                        double a = 0;
                        for (int t = first; t <= p; t++) a += sc[t] / sum * vc[((size_t)src * n + t) * kvmax + kh * hd + d];
                        att[h * hd + d] = a;
                    }
                }
                ref_matvec(wo, att, o, D, QD, NULL);
                ref_rmsnorm(o, pa, o, D, c->norm_eps);
                for (int i = 0; i < D; i++) x[i] += o[i];
                ref_rmsnorm(x, fn, xn, D, c->norm_eps);
                ref_matvec(w1, xn, g, F, D, NULL);
                ref_matvec(w3, xn, u, F, D, NULL);
                for (int i = 0; i < F; i++) g[i] = ref_gelu(g[i]) * u[i];
                ref_matvec(w2, g, o, D, F, NULL);
                if (c->moe_dense) { /* the dense branch normed, plus the experts' */
                    float *pf1 = ref_g4(m, "blk.%d.post_ffw_norm_1.weight", l);
                    double *ex = malloc(sizeof(double) * D);
                    ok = pf1 && ref_g4_experts(m, l, x, ex);
                    if (ok) {
                        ref_rmsnorm(o, pf1, o, D, c->norm_eps);
                        for (int i = 0; i < D; i++) o[i] += ex[i];
                    }
                    free(pf1);
                    free(ex);
                }
                ref_rmsnorm(o, pf, o, D, c->norm_eps);
                for (int i = 0; i < D; i++) x[i] += o[i];
                if (P) { /* the per-layer embedding */
                    ref_matvec(ig, x, pg, P, D, NULL);
                    for (int j = 0; j < P; j++) pg[j] = ref_gelu(pg[j]) * pin[(size_t)l * P + j];
                    ref_matvec(pj, pg, o, D, P, NULL);
                    ref_rmsnorm(o, pn, o, D, c->norm_eps);
                    for (int i = 0; i < D; i++) x[i] += o[i];
                }
                if (os)
                    for (int i = 0; i < D; i++) x[i] *= os[0];
            }
            free(wq); free(wk); free(wv); free(wo); free(an); free(fn); free(w1); free(w2); free(w3);
            free(qn); free(kn); free(pa); free(pf); free(ig); free(pj); free(pn); free(os);
        }
        if (!ok) break;
        ref_rmsnorm(x, onorm, xn, D, c->norm_eps);
        ref_matvec(out, xn, lg, V, D, NULL);
        for (int i = 0; i < V; i++) logits[(size_t)p * V + i] = (float)ref_softcap(lg[i], c->final_softcap);
    }
    if (out != emb) free(out);
    free(emb); free(onorm); free(freqs); free(pemb); free(pproj); free(pnorm); free(kc); free(vc);
    free(x); free(xn); free(q); free(att); free(o); free(g); free(u); free(sc); free(lg); free(pin); free(pg);
    return ok;
}

#endif
