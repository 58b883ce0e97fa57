/* The compiler's constants: the RoPE cos/sin tables every ROPE task and
 * RoPE epilogue reads (one, or two when sliding-window layers rotate with
 * their own base), with the model's scaling folded in. */
#include <math.h>

#include "compiler/compiler.h"

/* One RoPE table: [kv_capacity][rot/2] (cos, sin), in the same float
 * arithmetic as llama2.c's run.c so positions rotate identically; scaling
 * (when the model has it) divides the angle, factors (Llama 3 rope_freqs,
 * LongRoPE) divide each pair's frequency, attn_factor multiplies cos and
 * sin (LongRoPE's magnitude correction, as ggml's rope applies it). */
/* YaRN's correction dimension: the pair index whose wavelength makes n_rot
 * turns in orig_ctx positions (llama.cpp's ggml_rope_yarn_corr_dim,
 * transformers' find_correction_dim). */
static float yarn_corr_dim(int rot, int orig_ctx, float n_rot, float base) {
    return (float)rot * logf((float)orig_ctx / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

/* cos/sin of every position and rotated pair. freq_i = base^(-2i/rot)
 * (divided by the file's factor when given); the angle is pos * freq_i /
 * scale, or with YaRN the mix of that and pos * freq_i by the ramp over
 * [low, high] pairs; both times the magnitude attn_factor. */
static void rope_table(float *out, int n_pos, int rot, float base, float scale, const float *factors, float attn_factor,
                       const slm_model_config *m, int yarn) {
    const int pairs = rot / 2;
    float low = 0.0f, high = 0.0f;
    if (yarn) {
        low = floorf(yarn_corr_dim(rot, m->rope_orig_ctx, m->yarn_beta_fast, base));
        high = ceilf(yarn_corr_dim(rot, m->rope_orig_ctx, m->yarn_beta_slow, base));
        if (low < 0.0f) low = 0.0f;
        if (high > (float)(rot - 1)) high = (float)(rot - 1);
    }
    for (int pos = 0; pos < n_pos; pos++)
        for (int i = 0; i < pairs; i++) {
            float freq = 1.0f / powf(base, (float)(2 * i) / (float)rot);
            if (factors) {
                float f;
                memcpy(&f, factors + i, sizeof f);
                freq /= f;
            }
            const float extrap = (float)pos * freq;
            float val = extrap;
            if (scale != 1.0f) val /= scale;
            if (yarn) {
                float y = ((float)i - low) / fmaxf(0.001f, high - low);
                const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * m->yarn_ext_factor;
                val = val * (1.0f - mix) + extrap * mix;
            }
            float cv = cosf(val), sv = sinf(val);
            if (attn_factor != 0.0f && attn_factor != 1.0f) {
                cv *= attn_factor;
                sv *= attn_factor;
            }
            out[((size_t)pos * pairs + i) * 2 + 0] = cv;
            out[((size_t)pos * pairs + i) * 2 + 1] = sv;
        }
}

slm_status slm_build_constants(slm_compiled *c, const slm_model_file *mf, slm_err *err) {
    const slm_model_config *m = &c->cfg;
    const int rot = slm_rope_dims(m), pairs = rot / 2;
    const float *factors = NULL;
    if (m->rope_freqs || m->rope_long) {
        /* Llama 3: rope_freqs.weight; LongRoPE: the long factors when the KV
         * capacity (our context size) exceeds the original context, as
         * llama.cpp picks them by its context size */
        const char *name = m->rope_freqs ? "rope_freqs.weight"
                           : c->kv_capacity > m->rope_orig_ctx ? "rope_factors_long.weight"
                                                               : "rope_factors_short.weight";
        const slm_tensor *t = slm_model_tensor(mf, name);
        if (!t || t->type != SLM_F32 || t->ne[0] != pairs)
            return slm_errf(err, SLM_ERR_FORMAT, "%s missing or malformed", name);
        factors = t->data;
    }
    int n_tables = 1, swa_layer = -1;
    for (int l = 0; l < m->n_layers; l++)
        if (slm_rope_table_of(m, l) == 1) n_tables = 2, swa_layer = l;
    /* gemma4: the window layers rotate their own head size (and take no rope_freqs) */
    const int rot1 = swa_layer >= 0 && m->head_dim_swa > 0 ? slm_layer_rope_dims(m, swa_layer) : rot;
    const float *factors1 = m->rope_freqs_global ? NULL : factors;
    uint64_t per = (uint64_t)c->kv_capacity * (uint64_t)pairs * 2;
    uint64_t n = per + (n_tables == 2 ? (uint64_t)c->kv_capacity * (uint64_t)(rot1 / 2) * 2 : 0);
    c->consts.rope = slm_aligned_alloc((size_t)n * sizeof(float));
    if (!c->consts.rope) return slm_errf(err, SLM_ERR_NOMEM, "out of memory for RoPE tables");
    c->consts.rope_pos = c->kv_capacity;
    c->consts.rope_pairs = pairs;
    c->consts.rope_pairs_swa = n_tables == 2 && rot1 != rot ? rot1 / 2 : 0;
    c->consts.bytes = n * sizeof(float);
    rope_table(c->consts.rope, c->kv_capacity, rot, m->rope_base, m->rope_scale, factors, m->rope_attn_factor, m,
               m->rope_yarn);
    /* the sliding-window layers' own base and scaling (gemma3, olmo3); with
     * YaRN on the global layers they keep plain RoPE, magnitude 1 (llama.cpp) */
    if (n_tables == 2)
        rope_table(c->consts.rope + per, c->kv_capacity, rot1, m->rope_base_swa > 0.0f ? m->rope_base_swa : m->rope_base,
                   m->rope_scale_swa > 0.0f ? m->rope_scale_swa : m->rope_scale, factors1,
                   m->rope_yarn ? 0.0f : m->rope_attn_factor, m, 0);
    return SLM_OK;
}

