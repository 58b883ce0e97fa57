/* staticlm synth --arch gemma4: Gemma 4's keys and tensors as llama.cpp's
 * converter writes them (conversion/gemma.py, Gemma4Model): the per-layer
 * window list, head_count_kv and feed_forward_length as per-layer lists when
 * the kinds of layer differ, the window layers' head size, the shared KV
 * layers, the per-layer embeddings, the global layers' proportional RoPE as
 * rope_freqs.weight (1 for the rotated pairs, 1e30 for the others); with
 * experts (26B-A4B), each layer's router, experts and their norms beside
 * its dense FFN. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/synth.h"
#include "format/model.h"

/* Layer l slides (the window on l % p < p - 1). */
static int swa(const synth_shape *sh, int l) { return l % sh->swa_period < sh->swa_period - 1; }
/* Layer l keeps K/V of its own. */
static int has_kv(const synth_shape *sh, int l) { return l < sh->n_layers - sh->kv_shared; }
static int hd(const synth_shape *sh, int l) {
    const int g = sh->head_dim ? sh->head_dim : sh->dim / sh->n_heads;
    return swa(sh, l) && sh->head_dim_swa ? sh->head_dim_swa : g;
}
static int kvh(const synth_shape *sh, int l) {
    return !swa(sh, l) && sh->kv_heads_global ? sh->kv_heads_global : sh->n_kv_heads;
}
static int ffn(const synth_shape *sh, int l) { return !has_kv(sh, l) && sh->ffn_shared ? sh->ffn_shared : sh->ffn; }

int synth_gemma4_shape(const synth_args *a, synth_shape *sh) {
    if (!sh->swa_period) sh->swa_period = 6;
    if (!sh->window) sh->window = 512;
    if (a->window) sh->window = a->window;
    if (!sh->rot_quarters) sh->rot_quarters = 4;
    if (!sh->head_dim_swa) sh->head_dim_swa = sh->head_dim ? sh->head_dim : sh->dim / sh->n_heads;
    if (a->o_dim > 0 || a->o_heads > 0) { /* dim / heads for the window layers, twice that for the global ones */
        sh->head_dim_swa = sh->dim / sh->n_heads;
        sh->head_dim = 2 * sh->head_dim_swa;
    }
    if (a->o_ffn > 0 && sh->ffn_shared) sh->ffn_shared = 2 * sh->ffn; /* the double-wide FFN of the shared layers */
    if (a->o_layers > 0 && sh->kv_shared) {
        /* fewer layers: about half of them keep K/V, whole periods (so the last of them is global) */
        int n_kv = sh->n_layers / 2 / sh->swa_period * sh->swa_period;
        if (n_kv < sh->swa_period) n_kv = sh->swa_period;
        sh->kv_shared = n_kv < sh->n_layers ? sh->n_layers - n_kv : 0;
    }
    if (a->kv_shared >= sh->n_layers) {
        fprintf(stderr, "staticlm synth: gemma4: --kv-shared %d: at most %d of %d layers can share K/V\n", a->kv_shared,
                sh->n_layers - 2, sh->n_layers);
        return 2;
    }
    if (a->kv_shared >= 0) sh->kv_shared = a->kv_shared;
    if (sh->kv_shared >= sh->n_layers) sh->kv_shared = 0;
    const int n_kv = sh->n_layers - sh->kv_shared;
    if (sh->kv_shared && (n_kv < 2 || swa(sh, n_kv - 1) || !swa(sh, n_kv - 2))) {
        fprintf(stderr, "staticlm synth: gemma4: %d KV-shared layers of %d: the last layer with K/V must be global and "
                        "the one before it a window layer (llama.cpp's rule; window period %d)\n",
                sh->kv_shared, sh->n_layers, sh->swa_period);
        return 2;
    }
    if (sh->n_heads % sh->n_kv_heads || (sh->kv_heads_global && sh->n_heads % sh->kv_heads_global)) {
        fprintf(stderr, "staticlm synth: gemma4: KV heads %d / %d do not divide %d heads\n", sh->n_kv_heads,
                sh->kv_heads_global, sh->n_heads);
        return 2;
    }
    return 0;
}

void synth_gemma4_metadata(slm_gguf_writer *w, const synth_shape *sh) {
    const int L = sh->n_layers < 1024 ? sh->n_layers : 1024;
    uint8_t pat[1024];
    uint32_t kv[1024], ff[1024];
    for (int l = 0; l < L; l++) {
        pat[l] = (uint8_t)swa(sh, l);
        kv[l] = (uint32_t)kvh(sh, l);
        ff[l] = (uint32_t)ffn(sh, l);
    }
    /* one integer where every layer agrees, else a list (as the converter writes) */
    if (sh->ffn_shared && sh->kv_shared) slm_gguf_set_arr(w, "gemma4.feed_forward_length", SLM_GGUF_U32, ff, (uint64_t)L);
    else slm_gguf_set_u32(w, "gemma4.feed_forward_length", (uint32_t)sh->ffn);
    if (sh->kv_heads_global) slm_gguf_set_arr(w, "gemma4.attention.head_count_kv", SLM_GGUF_U32, kv, (uint64_t)L);
    else slm_gguf_set_u32(w, "gemma4.attention.head_count_kv", (uint32_t)sh->n_kv_heads);
    slm_gguf_set_u32(w, "gemma4.attention.sliding_window", (uint32_t)sh->window);
    slm_gguf_set_arr(w, "gemma4.attention.sliding_window_pattern", SLM_GGUF_BOOL, pat, (uint64_t)L);
    slm_gguf_set_u32(w, "gemma4.attention.shared_kv_layers", (uint32_t)sh->kv_shared);
    slm_gguf_set_u32(w, "gemma4.embedding_length_per_layer_input", (uint32_t)sh->ple);
    const int hs = sh->head_dim_swa ? sh->head_dim_swa : sh->dim / sh->n_heads;
    slm_gguf_set_u32(w, "gemma4.attention.key_length_swa", (uint32_t)hs);
    slm_gguf_set_u32(w, "gemma4.attention.value_length_swa", (uint32_t)hs);
    slm_gguf_set_u32(w, "gemma4.rope.dimension_count_swa", (uint32_t)hs);
    slm_gguf_set_f32(w, "gemma4.rope.freq_base_swa", 10000.0f);
    slm_gguf_set_f32(w, "gemma4.final_logit_softcapping", 30.0f);
}

/* The layer output scales: a spread around 1 (real ones differ per layer). */
static float out_scale(int l) { return 0.75f + 0.5f * (float)((l * 37) % 11) / 10.0f; }

/* Layer l's experts as the converter writes the 26B-A4B's (llama.cpp's
 * names): the router [dim, E] (f32, as llama-quantize leaves it) and its
 * input gains ffn_gate_inp.scale [dim], the experts' norms, the dense
 * branch's post norm, the fused gate and up [dim, 2 x width, E] (each
 * expert's gate rows, then its up rows), the down [width, dim, E] and its
 * per-expert scales [E]. Gains and scales spread around 1. */
static int experts(synth *s, const synth_shape *sh, const synth_type *ty, int l) {
    const int D = sh->dim, E = sh->experts, F = sh->expert_ffn ? sh->expert_ffn : sh->ffn;
    char n[64];
    float v[8192];
    if (D > 8192 || E > 8192) return 0;
    snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.weight", l);
    if (!synth_add(s, n, SLM_F32, D, E, 0, NULL)) return 0;
    for (int i = 0; i < D; i++) v[i] = 0.5f + (float)((i * 7 + l) % 11) / 10.0f;
    snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.scale", l);
    if (!synth_add(s, n, SLM_F32, D, 1, 2, v)) return 0;
    static const char *const norms[3] = {"pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2"};
    for (int j = 0; j < 3; j++) {
        snprintf(n, sizeof n, "blk.%d.%s.weight", l, norms[j]);
        if (!synth_add(s, n, SLM_F32, D, 1, 1, NULL)) return 0;
    }
    snprintf(n, sizeof n, "blk.%d.ffn_gate_up_exps.weight", l);
    if (!synth_add3(s, n, synth_mtype(ty, sh, SLM_QROLE_OTHER, l, sh->n_layers, D), D, 2 * (int64_t)F, E)) return 0;
    snprintf(n, sizeof n, "blk.%d.ffn_down_exps.weight", l);
    if (!synth_add3(s, n, synth_mtype(ty, sh, SLM_QROLE_FFN_DOWN, l, sh->n_layers, F), F, D, E)) return 0;
    for (int e = 0; e < E; e++) v[e] = 0.75f + 0.5f * (float)((e * 13 + l) % 9) / 8.0f;
    snprintf(n, sizeof n, "blk.%d.ffn_down_exps.scale", l);
    return synth_add(s, n, SLM_F32, E, 1, 2, v);
}

int synth_gemma4_tensors(synth *s, const synth_shape *sh, const synth_type *ty) {
    const int D = sh->dim, P = sh->ple, L = sh->n_layers;
    char n[64];
    if (!synth_add(s, "token_embd.weight", sh->tied ? synth_otype(ty, D) : synth_mtype(ty, sh, SLM_QROLE_OTHER, 0, 1, D), D,
                   sh->vocab, 0, NULL))
        return 0;
    int n_v = 0, i_v = 0; /* the attn_v tensors (none on the global layers when V = K) and this one's place */
    for (int l = 0; l < L; l++) n_v += !(sh->k_eq_v && !swa(sh, l));
    int any_global = 0;
    for (int l = 0; l < L; l++) any_global |= !swa(sh, l);
    if (any_global) { /* the global layers' proportional RoPE: rot_quarters / 4 of the pairs rotate (llama.cpp
                       * loads it with a global layer only, and refuses a file with a tensor it did not load) */
        const int g = sh->head_dim ? sh->head_dim : D / sh->n_heads, pairs = g / 2, rot = pairs * sh->rot_quarters / 4;
        float f[2048];
        if (pairs > 2048) return 0;
        for (int i = 0; i < pairs; i++) f[i] = i < rot ? 1.0f : 1e30f;
        if (!synth_add(s, "rope_freqs.weight", SLM_F32, pairs, 1, 2, f)) return 0;
    }
    if (P) {
        /* llama-quant.cpp counts it a token embedding: the output's type when the embedding is tied */
        const int64_t PL = (int64_t)P * L;
        if (!synth_add(s, "per_layer_token_embd.weight",
                       sh->tied ? synth_otype(ty, PL) : synth_mtype(ty, sh, SLM_QROLE_OTHER, 0, 1, PL), PL, sh->vocab, 0, NULL) ||
            /* llama-quantize leaves per_layer_model_proj as its source has it (F16 here) */
            !synth_add(s, "per_layer_model_proj.weight", ty->wt ? SLM_F16 : ty->matrix, D, PL, 0, NULL) ||
            !synth_add(s, "per_layer_proj_norm.weight", SLM_F32, P, 1, 1, NULL))
            return 0;
    }
    for (int l = 0; l < L; l++) {
        const int h = hd(sh, l), q = h * sh->n_heads, kv = h * kvh(sh, l), F = ffn(sh, l);
        const uint32_t t_in = synth_mtype(ty, sh, SLM_QROLE_OTHER, l, L, D), t_k = synth_mtype(ty, sh, SLM_QROLE_ATTN_K, l, L, D);
        const uint32_t t_v = synth_mtype(ty, sh, SLM_QROLE_ATTN_V, i_v, n_v, D);
#define T(suffix, type, ne0, ne1, init)                                                        \
    do {                                                                                       \
        snprintf(n, sizeof n, "blk.%d.%s", l, suffix);                                         \
        if (!synth_add(s, n, type, ne0, ne1, init, NULL)) return 0;                            \
    } while (0)
        T("attn_norm.weight", SLM_F32, D, 1, 1);
        T("attn_q.weight", t_in, D, q, 0);
        T("attn_k.weight", t_k, D, kv, 0); /* the shared layers keep theirs (not read) */
        if (!(sh->k_eq_v && !swa(sh, l))) {
            T("attn_v.weight", t_v, D, kv, 0);
            i_v++;
        }
        T("attn_k_norm.weight", SLM_F32, h, 1, 1);
        { /* gains 1/sqrt(head size): Gemma 4 attends with query scale 1, so its learned gains carry the
           * usual scale (gains of 1 would make every softmax a near-argmax that any rounding flips) */
            float qg[4096];
            if (h > 4096) return 0;
            for (int i = 0; i < h; i++) qg[i] = 1.0f / sqrtf((float)h);
            snprintf(n, sizeof n, "blk.%d.attn_q_norm.weight", l);
            if (!synth_add(s, n, SLM_F32, h, 1, 2, qg)) return 0;
        }
        T("attn_output.weight", synth_mtype(ty, sh, SLM_QROLE_ATTN_OUTPUT, l, L, q), q, D, 0);
        T("post_attention_norm.weight", SLM_F32, D, 1, 1);
        T("ffn_norm.weight", SLM_F32, D, 1, 1);
        T("ffn_gate.weight", t_in, D, F, 0);
        T("ffn_up.weight", t_in, D, F, 0);
        T("ffn_down.weight", synth_mtype(ty, sh, SLM_QROLE_FFN_DOWN, l, L, F), F, D, 0);
        T("post_ffw_norm.weight", SLM_F32, D, 1, 1);
        if (sh->experts && !experts(s, sh, ty, l)) return 0;
        if (P) {
            T("inp_gate.weight", t_in, D, P, 0);
            T("proj.weight", synth_mtype(ty, sh, SLM_QROLE_OTHER, l, L, P), P, D, 0);
            T("post_norm.weight", SLM_F32, D, 1, 1);
        }
        const float sc = out_scale(l);
        snprintf(n, sizeof n, "blk.%d.layer_output_scale.weight", l);
        if (!synth_add(s, n, SLM_F32, 1, 1, 2, &sc)) return 0;
#undef T
    }
    if (!synth_add(s, "output_norm.weight", SLM_F32, D, 1, 1, NULL)) return 0;
    if (!sh->tied && !synth_add(s, "output.weight", synth_otype(ty, D), D, sh->vocab, 0, NULL)) return 0;
    return 1;
}
