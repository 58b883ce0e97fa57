/* staticlm synth --arch bert | nomic-bert | nomic-bert-moe | modern-bert | jina-bert-v2:
 * encoder embedding models (the shapes of bge-small/base-en-v1.5,
 * all-MiniLM-L6-v2, nomic-embed-text-v1.5 and v2-moe, modernbert-embed-base,
 * jina-embeddings-v2-base-en) with the keys and tensors
 * llama.cpp's converter writes (conversion/bert.py, BertModel,
 * NomicBertModel and ModernBertModel) and its graphs read; format/encoder.c
 * is our reader of them.
 *
 * Keys: {arch}.context_length, embedding_length, feed_forward_length,
 * block_count, attention.head_count, attention.layer_norm_epsilon,
 * attention.causal = false, pooling_type (1 mean, 2 cls, 4 rank), nomic-bert's
 * rope.freq_base; tokenizer.ggml.token_type_count (llama.cpp sizes
 * token_types.weight by it, and refuses the file without it). The
 * vocabulary is a generated WordPiece one (cli/synth_vocab.c).
 *
 * Tensors: token_embd, position_embd (bert's learned positions; the
 * context's rows), token_types, the embedding LayerNorm; per layer bert's
 * attn_q/k/v with biases, nomic-bert's fused attn_qkv [dim, 3 x dim] (no
 * biases anywhere), attn_output (+ bias), attn_output_norm, ffn_up (+ bias),
 * nomic-bert's ffn_gate (SwiGLU), ffn_down (+ bias), layer_output_norm;
 * nomic-bert-moe: nomic-bert's fused attn_qkv with its bias, bert's GELU FFN
 * with biases, and on every second layer (l % 2 == 1, moe_every_n_layers 2)
 * the router ffn_gate_inp [dim, experts] (f32) and the experts'
 * ffn_up_exps [dim, ffn, experts], ffn_down_exps [ffn, dim, experts], no
 * gate and no biases (the converter drops them); keys expert_count,
 * expert_used_count, moe_every_n_layers;
 * with --pooling rank a cross-encoder's classifier head (cls.weight and
 * cls.bias: dense + tanh; cls.output.weight [dim, 1] and its bias: one score).
 * jina-bert-v2 (jina-embeddings-v2-base-en): bert's keys and tensors
 * without position_embd (its attention adds ALiBi, the slopes from 8 as
 * llama.cpp's), with GeGLU: ffn_up [dim, 2 x ffn] and its bias, the gate's
 * rows first (the converter's fused gated_layers), ffn_down as bert's.
 * modern-bert: rope.freq_base, rope.freq_base_swa (10000), the window
 * attention.sliding_window and its layer period
 * attention.sliding_window_pattern (3), no token types; tensors
 * token_embd, token_embd_norm (a gain, no bias, as all its norms), per
 * layer attn_norm (not on layer 0), attn_qkv, attn_output, ffn_norm, the
 * fused ffn_up [dim, 2 x ffn] (gate, then up), ffn_down; output_norm; with
 * --pooling rank the head cls.weight (no bias), cls.norm, cls.output. The
 * vocabulary stays the generated WordPiece one (the real models' is BPE).
 *
 * LayerNorm gains spread near 1 and biases normal (std, near 0), so the
 * activations stay those of a trained model's scale.
 *
 * Types as llama-quantize picks them for a file without output.weight: the
 * token embedding takes the output matrix's type (q4_0 / q4_k_m: Q6_K, Q8_0
 * when the width is not a multiple of 256); position_embd and token_types
 * stay F32 (the converter and llama-quantize both leave them); Q4_K_M's
 * fused attn_qkv is Q5_K (Q5_1 below 256-multiples); attn_v and ffn_down
 * follow use_more_bits as in the decoders.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/synth.h"
#include "cli/synth_vocab.h"
#include "common/common.h"
#include "common/dtype.h"
#include "staticlm.h"

int synth_is_encoder(const char *arch) {
    return !strcmp(arch, "bert") || !strcmp(arch, "nomic-bert") || !strcmp(arch, "modern-bert") ||
           !strcmp(arch, "nomic-bert-moe") || !strcmp(arch, "jina-bert-v2");
}

int synth_encoder_shape(const synth_args *a, synth_shape *sh) {
    if (!sh->type_vocab) { /* a decoder's shape (custom) made an encoder: an encoder's defaults */
        sh->type_vocab = 2;
        sh->pooling = SLM_POOLING_MEAN;
        const int modern = !strcmp(sh->arch, "modern-bert");
        if (!(a->o_eps > 0.0f)) sh->eps = modern ? 1e-5f : 1e-12f;
        if (!(a->o_rope > 0.0f)) sh->rope_base = modern ? 160000.0f : 1000.0f;
    }
    if (!strcmp(sh->arch, "modern-bert") && !sh->window) sh->window = 128; /* ModernBERT's local window */
    if (a->o_kv > 0 && a->o_kv != sh->n_heads) {
        fprintf(stderr, "staticlm synth: %s: --kv-heads %d: an encoder has one KV head per query head (%d)\n",
                sh->arch, a->o_kv, sh->n_heads);
        return 2;
    }
    sh->n_kv_heads = sh->n_heads;
    sh->tied = 0;
    if (a->pooling >= 0) sh->pooling = a->pooling;
    if (sh->vocab < SYNTH_WPM_MIN) {
        fprintf(stderr, "staticlm synth: %s: --n-vocab %d: a WordPiece vocabulary needs at least %d tokens (the "
                        "specials and every printable ASCII character, word-start and continuation)\n",
                sh->arch, sh->vocab, SYNTH_WPM_MIN);
        return 2;
    }
    return 0;
}

void synth_encoder_metadata(slm_gguf_writer *w, const synth_shape *sh, const synth_type *ty) {
    char key[96];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", sh->arch, suffix), key)
    slm_gguf_set_u32(w, K("block_count"), (uint32_t)sh->n_layers);
    slm_gguf_set_u32(w, K("context_length"), (uint32_t)sh->ctx);
    slm_gguf_set_u32(w, K("embedding_length"), (uint32_t)sh->dim);
    slm_gguf_set_u32(w, K("feed_forward_length"), (uint32_t)sh->ffn);
    slm_gguf_set_u32(w, K("attention.head_count"), (uint32_t)sh->n_heads);
    if (strcmp(sh->arch, "bert") && strcmp(sh->arch, "jina-bert-v2")) slm_gguf_set_f32(w, K("rope.freq_base"), sh->rope_base);
    if (!strcmp(sh->arch, "modern-bert")) { /* ModernBertModel's keys */
        slm_gguf_set_f32(w, K("rope.freq_base_swa"), 10000.0f);
        slm_gguf_set_u32(w, K("attention.sliding_window"), (uint32_t)sh->window);
        slm_gguf_set_u32(w, K("attention.sliding_window_pattern"), 3);
        slm_gguf_set_u32(w, K("vocab_size"), (uint32_t)sh->vocab);
    }
    if (!strcmp(sh->arch, "nomic-bert-moe")) { /* NomicBertModel's MoE keys */
        slm_gguf_set_u32(w, K("expert_count"), (uint32_t)sh->experts);
        slm_gguf_set_u32(w, K("expert_used_count"), (uint32_t)sh->experts_used);
        slm_gguf_set_u32(w, K("moe_every_n_layers"), SYNTH_MOE_EVERY);
    }
    slm_gguf_set_f32(w, K("attention.layer_norm_epsilon"), sh->eps);
    slm_gguf_set_u32(w, "general.file_type", ty->ftype);
    if (ty->matrix != SLM_F32 && ty->matrix != SLM_F16 && ty->matrix != SLM_BF16)
        slm_gguf_set_u32(w, "general.quantization_version", 2);
    slm_gguf_set_bool(w, K("attention.causal"), 0);
    slm_gguf_set_u32(w, K("pooling_type"), (uint32_t)sh->pooling);
#undef K
    if (strcmp(sh->arch, "modern-bert")) slm_gguf_set_u32(w, "tokenizer.ggml.token_type_count", (uint32_t)sh->type_vocab);
}

/* LayerNorm gains: a spread of +-5% around 1, different for each norm k. */
static void gains(float *g, int n, int k) {
    for (int i = 0; i < n; i++) g[i] = 1.0f + 0.05f * sinf(0.7f * (float)i + 1.3f * (float)k);
}

/* modern-bert's tensors (the file comment). */
static int modern_tensors(synth *s, const synth_shape *sh, const synth_type *ty, float *g) {
    const int D = sh->dim, F = sh->ffn, L = sh->n_layers;
    const uint32_t mt = ty->matrix, t_cls = synth_mtype(ty, sh, SLM_QROLE_OTHER, 0, 1, D);
    char n[64];
    int k = 0;
#define NORM(name) (gains(g, D, k++), synth_add(s, name, SLM_F32, D, 1, 2, g))
    if (!synth_add(s, "token_embd.weight", synth_otype(ty, D), D, sh->vocab, 0, NULL) ||
        !NORM("token_embd_norm.weight"))
        return 0;
    for (int l = 0; l < L; l++) {
#define T(suffix, type, ne0, ne1) (snprintf(n, sizeof n, "blk.%d.%s", l, suffix), synth_add(s, n, type, ne0, ne1, 0, NULL))
#define TN(suffix) (snprintf(n, sizeof n, "blk.%d.%s", l, suffix), NORM(n))
        const uint32_t t_in = synth_mtype(ty, sh, SLM_QROLE_OTHER, l, L, D), t_down = synth_mtype(ty, sh, SLM_QROLE_FFN_DOWN, l, L, F);
        const uint32_t t_qkv = synth_mtype(ty, sh, SLM_QROLE_ATTN_V, l, L, D), t_o = synth_mtype(ty, sh, SLM_QROLE_ATTN_OUTPUT, l, L, D);
        if ((l > 0 && !TN("attn_norm.weight")) || !T("attn_qkv.weight", t_qkv, D, 3 * D) ||
            !T("attn_output.weight", t_o, D, D) || !TN("ffn_norm.weight") || !T("ffn_up.weight", t_in, D, 2 * F) ||
            !T("ffn_down.weight", t_down, F, D))
            return 0;
#undef TN
#undef T
    }
    if (!NORM("output_norm.weight")) return 0;
    /* a reranker (gte-reranker-modernbert-base): the head's dense layer without a bias, its norm (GELU
     * between them), one score */
    if (sh->pooling == SLM_POOLING_RANK && (!synth_add(s, "cls.weight", t_cls, D, D, 0, NULL) || !NORM("cls.norm.weight") ||
                                            !synth_add(s, "cls.output.weight", mt, D, 1, 0, NULL) ||
                                            !synth_add(s, "cls.output.bias", SLM_F32, 1, 1, 0, NULL)))
        return 0;
    return 1;
#undef NORM
}

int synth_encoder_tensors(synth *s, const synth_shape *sh, const synth_type *ty) {
    if (!strcmp(sh->arch, "modern-bert")) {
        float *g = slm_malloc((size_t)sh->dim * sizeof(float));
        const int ok = g && modern_tensors(s, sh, ty, g);
        slm_xfree(g);
        return ok;
    }
    const int moe = !strcmp(sh->arch, "nomic-bert-moe"), nomic = moe || !strcmp(sh->arch, "nomic-bert");
    const int jina = !strcmp(sh->arch, "jina-bert-v2"); /* GeGLU: the up of twice the width, gate first */
    const int bias = !nomic || moe, D = sh->dim, F = sh->ffn, L = sh->n_layers, E = sh->experts;
    const uint32_t mt = ty->matrix, t_cls = synth_mtype(ty, sh, SLM_QROLE_OTHER, 0, 1, D);
    float *g = slm_malloc((size_t)D * sizeof(float));
    char n[64];
    int ok = 0, k = 0;
    if (!g) return 0;
#define ADD(name, type, ne0, ne1, init, vals) \
    do {                                                                                       \
        if (!synth_add(s, name, type, ne0, ne1, init, vals)) goto done;                        \
    } while (0)
#define NORM(name) (gains(g, D, k++), synth_add(s, name, SLM_F32, D, 1, 2, g))
    ADD("token_embd.weight", synth_otype(ty, D), D, sh->vocab, 0, NULL);
    if (!nomic && !jina) ADD("position_embd.weight", SLM_F32, D, sh->ctx, 0, NULL);
    ADD("token_types.weight", SLM_F32, D, sh->type_vocab, 0, NULL);
    if (!NORM("token_embd_norm.weight")) goto done;
    ADD("token_embd_norm.bias", SLM_F32, D, 1, 0, NULL);
    for (int l = 0; l < L; l++) {
#define T(suffix, type, ne0, ne1) (snprintf(n, sizeof n, "blk.%d.%s", l, suffix), synth_add(s, n, type, ne0, ne1, 0, NULL))
#define TN(suffix) (snprintf(n, sizeof n, "blk.%d.%s", l, suffix), NORM(n))
        /* every layer has attn_v or attn_qkv (llama-quant.cpp gives them the same rules) */
        const uint32_t t_in = synth_mtype(ty, sh, SLM_QROLE_OTHER, l, L, D), t_v = synth_mtype(ty, sh, SLM_QROLE_ATTN_V, l, L, D);
        const uint32_t t_k = synth_mtype(ty, sh, SLM_QROLE_ATTN_K, l, L, D), t_o = synth_mtype(ty, sh, SLM_QROLE_ATTN_OUTPUT, l, L, D);
        const uint32_t t_down = synth_mtype(ty, sh, SLM_QROLE_FFN_DOWN, l, L, F);
        if (nomic) {
            if (!T("attn_qkv.weight", t_v, D, 3 * D) || (moe && !T("attn_qkv.bias", SLM_F32, 3 * D, 1))) goto done;
        } else if (!T("attn_q.weight", t_in, D, D) || !T("attn_q.bias", SLM_F32, D, 1) ||
                   !T("attn_k.weight", t_k, D, D) || !T("attn_k.bias", SLM_F32, D, 1) ||
                   !T("attn_v.weight", t_v, D, D) || !T("attn_v.bias", SLM_F32, D, 1))
            goto done;
        if (!T("attn_output.weight", t_o, D, D) || (bias && !T("attn_output.bias", SLM_F32, D, 1)) ||
            !TN("attn_output_norm.weight") || !T("attn_output_norm.bias", SLM_F32, D, 1))
            goto done;
        if (moe && l % SYNTH_MOE_EVERY == 1) { /* the router (f32, as llama-quantize leaves it), the experts 3-D */
            if (!T("ffn_gate_inp.weight", SLM_F32, D, E)) goto done;
            snprintf(n, sizeof n, "blk.%d.ffn_up_exps.weight", l);
            if (!synth_add3(s, n, t_in, D, F, E)) goto done;
            snprintf(n, sizeof n, "blk.%d.ffn_down_exps.weight", l);
            if (!synth_add3(s, n, t_down, F, D, E)) goto done;
        } else if (!T("ffn_up.weight", t_in, D, jina ? 2 * F : F) || (bias && !T("ffn_up.bias", SLM_F32, jina ? 2 * F : F, 1)) ||
                   (nomic && !moe && !T("ffn_gate.weight", t_in, D, F)) || !T("ffn_down.weight", t_down, F, D) ||
                   (bias && !T("ffn_down.bias", SLM_F32, D, 1))) {
            goto done;
        }
        if (!TN("layer_output_norm.weight") || !T("layer_output_norm.bias", SLM_F32, D, 1)) goto done;
#undef TN
#undef T
    }
    if (sh->pooling == SLM_POOLING_RANK) { /* a cross-encoder's head (bge-reranker, ms-marco-MiniLM): dense + tanh, one score */
        ADD("cls.weight", t_cls, D, D, 0, NULL);
        ADD("cls.bias", SLM_F32, D, 1, 0, NULL);
        ADD("cls.output.weight", mt, D, 1, 0, NULL);
        ADD("cls.output.bias", SLM_F32, 1, 1, 0, NULL);
    }
#undef NORM
#undef ADD
    ok = 1;
done:
    slm_xfree(g);
    return ok;
}
