/* Hugging Face config.json -> slm_model_config, for the llama, mistral,
 * qwen2, qwen3, gemma2, gemma3 (gemma3_text, or the text_config of
 * Gemma3ForConditionalGeneration), phi3, smollm3, olmo2 (OLMo 2's
 * olmo2, Olmo 3's olmo3), granite (IBM Granite, dense) and exaone4
 * (EXAONE 4.0) families, and the mixtures of experts qwen3_moe (arch
 * qwen3moe), qwen2_moe (arch qwen2moe: a gated shared expert beside the
 * routed ones), mixtral (arch llama with experts), olmoe and gpt_oss (arch
 * gpt-oss; its keys are hf_oss.c's), Qwen3.5's qwen3_5 / qwen3_5_moe (arch
 * qwen35 / qwen35moe, text_config or the _text models; keys: hf_qwen35.c).
 * gemma4 / gemma4_text (arch gemma4) are handed whole to hf_gemma4.c, bert
 * (arch bert, an encoder; with ALiBi jina-bert-v2: hf_jina.c) to hf_bert.c,
 * modernbert (arch modern-bert) to hf_modernbert.c, nomic_bert (nomic-bert,
 * nomic-bert-moe) to hf_nomic.c.
 *
 * Every size comes from the file. The few keys a family's checkpoints leave
 * out take the transformers config class's defaults (Gemma3TextConfig:
 * 8 heads, 4 KV heads, head_dim 256, query_pre_attn_scalar 256, rope_theta
 * 1e6, rope_local_base_freq 10000, sliding_window 4096, pattern 6; Gemma2
 * soft-caps 50 / 30; Olmo2Config / Olmo3Config / Exaone4Config: rms_norm_eps
 * 1e-5, Olmo 3's sliding_window 4096; GraniteConfig: every multiplier 1.0),
 * as llama.cpp's converter takes them (but for Olmo 3 without
 * sliding_window, where it writes no window, and granite without
 * attention_multiplier, where llama.cpp falls back to 1/sqrt(head_dim));
 * gemma3's vocabulary is then the embedding's rows. A key that would change
 * the computation in a way we do not run (an activation, a bias, a RoPE
 * scaling type, a layer pattern) is refused by name, and so are keys that
 * disagree.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "format/hf.h"

const char *slm_hf_pstr(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    for (; s[n] && n + 4 < cap && n < 40; n++) {
        unsigned char ch = (unsigned char)s[n];
        buf[n] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (s[n]) buf[n++] = '.', buf[n++] = '.', buf[n++] = '.';
    buf[n] = 0;
    return buf;
}

#ifndef SLM_HAVE_CJSON

slm_status slm_hf_config(slm_model_config *c, slm_hf_info *info, const char *json, size_t len, const char *name,
                         slm_err *err) {
    (void)c;
    (void)json;
    (void)len;
    memset(info, 0, sizeof *info);
    return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: built without JSON support (cJSON not found)",
                    name ? name : "config.json");
}

#else

#include <cJSON.h>

#include "common/json.h"

#define pstr slm_hf_pstr


static const cJSON *item(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL; /* null counts as absent */
}

static slm_status cfg_int(const cJSON *o, const char *file, const char *key, int required, int *v, slm_err *err) {
    const cJSON *x = item(o, key);
    if (!x) {
        if (required) return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, key);
        return SLM_OK;
    }
    double d = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    if (!cJSON_IsNumber(x) || !isfinite(d) || floor(d) != d)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an integer", file, key);
    if (d < 1 || d > INT32_MAX)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %.17g is out of range (1..%d)", file, key, d, INT32_MAX);
    *v = (int)d;
    return SLM_OK;
}

static slm_status cfg_num(const cJSON *o, const char *file, const char *key, double *v, slm_err *err) {
    const cJSON *x = item(o, key);
    if (!x) return SLM_OK;
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a number", file, key);
    *v = x->valuedouble;
    return SLM_OK;
}

static slm_status cfg_bool(const cJSON *o, const char *file, const char *key, int *v, slm_err *err) {
    const cJSON *x = item(o, key);
    if (!x) return SLM_OK;
    if (!cJSON_IsBool(x)) return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected true or false", file, key);
    *v = cJSON_IsTrue(x);
    return SLM_OK;
}

/* The readers for the family files beside this one (hf_oss.c). */
slm_status slm_hf_cfg_int(const cJSON *o, const char *file, const char *key, int required, int *v, slm_err *err) {
    return cfg_int(o, file, key, required, v, err);
}
slm_status slm_hf_cfg_num(const cJSON *o, const char *file, const char *key, double *v, slm_err *err) {
    return cfg_num(o, file, key, v, err);
}
slm_status slm_hf_cfg_bool(const cJSON *o, const char *file, const char *key, int *v, slm_err *err) {
    return cfg_bool(o, file, key, v, err);
}

/* A soft-capping key: absent keeps *v (the family's default), null or 0
 * means none, else a positive number. */
static slm_status cfg_cap(const cJSON *o, const char *file, const char *key, float *v, slm_err *err) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x) return SLM_OK;
    if (cJSON_IsNull(x)) {
        *v = 0.0f;
        return SLM_OK;
    }
    if (!cJSON_IsNumber(x) || !(x->valuedouble >= 0.0 && x->valuedouble < 1e6))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a number in 0..1e6 or null", file, key);
    *v = (float)x->valuedouble;
    return SLM_OK;
}

/* A number given at the top level or in rope_parameters (rp, transformers
 * v5 moves it there); when both give it they must agree. */
static slm_status cfg_num2(const cJSON *root, const cJSON *rp, const char *file, const char *key, double *v,
                           slm_err *err) {
    double a = NAN, b = NAN;
    slm_status s;
    if ((s = cfg_num(root, file, key, &a, err)) || (rp && (s = cfg_num(rp, file, key, &b, err)))) return s;
    if (!isnan(a) && !isnan(b) && a != b)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: keys '%s' (%g) and 'rope_parameters' '%s' (%g) disagree", file, key, a,
                        key, b);
    if (!isnan(b)) *v = b;
    else if (!isnan(a)) *v = a;
    return SLM_OK;
}

/* rope_parameters (transformers v5, in place of rope_theta and
 * rope_scaling): {rope_type, rope_theta, factor, ...}, or one such object
 * per layer type {"full_attention": {...}, "sliding_attention": {...}}.
 * *g: the global layers' object; *l: the sliding layers' (gemma3's local
 * RoPE; other families' must equal the global one). */
static slm_status rope_parameters(const cJSON *root, const char *file, slm_arch F, const cJSON **g, const cJSON **l,
                                  slm_err *err) {
    *g = *l = NULL;
    const cJSON *rp = item(root, "rope_parameters");
    if (!rp) return SLM_OK;
    if (!cJSON_IsObject(rp)) return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_parameters': expected an object", file);
    if (item(root, "rope_scaling"))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: keys 'rope_scaling' and 'rope_parameters' are both given", file);
    const cJSON *full = item(rp, "full_attention"), *slide = item(rp, "sliding_attention");
    if (!full && !slide) {
        *g = rp;
        return SLM_OK;
    }
    char b[64];
    for (const cJSON *e = rp->child; e; e = e->next)
        if (!e->string || (strcmp(e->string, "full_attention") && strcmp(e->string, "sliding_attention")))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_parameters': '%s' beside the per-layer-type entries",
                            file, e->string ? pstr(e->string, b, sizeof b) : "?");
    if (!full || !cJSON_IsObject(full) || (slide && !cJSON_IsObject(slide)))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_parameters': 'full_attention' (and 'sliding_attention') "
                        "must be objects", file);
    if (slide && F == SLM_ARCH_OLMO2 && !cJSON_Compare(full, slide, 1)) {
        /* Olmo 3: the sliding layers rotate plainly with the global base (what
         * parse_window sets up); their entry may say only that */
        const cJSON *t = item(slide, "rope_type"), *th = item(slide, "rope_theta"), *gth = item(full, "rope_theta");
        for (const cJSON *e = slide->child; e; e = e->next)
            if (!e->string || (strcmp(e->string, "rope_type") && strcmp(e->string, "rope_theta")))
                return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters': 'sliding_attention' key '%s' is "
                                "not supported (olmo3's sliding layers rotate plainly)", file,
                                e->string ? pstr(e->string, b, sizeof b) : "?");
        if ((t && (!cJSON_IsString(t) || strcmp(t->valuestring, "default"))) ||
            (th && (!cJSON_IsNumber(th) || !gth || !cJSON_IsNumber(gth) || th->valuedouble != gth->valuedouble)))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters': 'sliding_attention' must be plain "
                            "RoPE ('default') with the global rope_theta", file);
    } else if (slide && F != SLM_ARCH_GEMMA3 && !cJSON_Compare(full, slide, 1))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters': a RoPE of its own on sliding layers is "
                        "supported for gemma3 and olmo3 only", file);
    *g = full;
    *l = F == SLM_ARCH_GEMMA3 ? slide : NULL;
    return SLM_OK;
}

/* Llama 3 RoPE scaling: llama.cpp's converter (LlamaModel, rope_freqs) in
 * float32 as it computes them: freqs = 1 / base^(2i/d); wavelen = 2 pi /
 * freq; below old_ctx/high_freq_factor -> 1; above old_ctx/low_freq_factor ->
 * factor; between -> 1 / ((1 - smooth)/factor + smooth), smooth =
 * (old_ctx/wavelen - low)/(high - low). */
static slm_status llama3_factors(const cJSON *rs, const char *file, int head_dim, double base, slm_hf_info *h,
                                 slm_err *err) {
    double factor = 8.0, low = 1.0, high = 4.0, old_ctx = 8192.0;
    slm_status s;
    if ((s = cfg_num(rs, file, "factor", &factor, err)) || (s = cfg_num(rs, file, "low_freq_factor", &low, err)) ||
        (s = cfg_num(rs, file, "high_freq_factor", &high, err)) ||
        (s = cfg_num(rs, file, "original_max_position_embeddings", &old_ctx, err)))
        return s;
    if (!(factor >= 1.0 && factor <= 1024.0) || !(low > 0) || !(high > low) || !(old_ctx >= 1.0 && old_ctx <= 1e9))
        return slm_errf(err, SLM_ERR_FORMAT,
                        "%s: key 'rope_scaling': llama3 needs factor in 1..1024, 0 < low_freq_factor < "
                        "high_freq_factor, original_max_position_embeddings >= 1 (have %g, %g, %g, %g)",
                        file, factor, low, high, old_ctx);
    int n = head_dim / 2;
    float *f = slm_malloc((size_t)n * sizeof *f);
    if (!f) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", file);
    const float lo_wl = (float)(old_ctx / low), hi_wl = (float)(old_ctx / high);
    for (int i = 0; i < n; i++) {
        float freq = 1.0f / powf((float)base, (float)(2 * i) / (float)head_dim);
        float wavelen = (float)(2.0 * M_PI) / freq;
        if (wavelen < hi_wl) f[i] = 1.0f;
        else if (wavelen > lo_wl) f[i] = (float)factor;
        else {
            float smooth = ((float)old_ctx / wavelen - (float)low) / (float)(high - low);
            f[i] = 1.0f / ((1.0f - smooth) / (float)factor + smooth);
        }
    }
    h->vecs = f;
    h->n_vecs = n;
    return SLM_OK;
}

/* Every key of the scaling object rs (named rk) is one of known (NULL-ended)
 * or, in rope_parameters, rope_theta or partial_rotary_factor: a key we do
 * not read is refused rather than ignored. */
static slm_status known_keys(const cJSON *rs, const char *rk, const char *file, const char *type,
                             const char *const *known, slm_err *err) {
    const int rp = !strcmp(rk, "rope_parameters");
    char b[64];
    for (const cJSON *e = rs->child; e; e = e->next) {
        int ok = e->string && rp && (!strcmp(e->string, "rope_theta") || !strcmp(e->string, "partial_rotary_factor"));
        for (size_t k = 0; !ok && e->string && known[k]; k++) ok = !strcmp(e->string, known[k]);
        if (!ok)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': %s key '%s' is not supported", file, rk, type,
                            e->string ? pstr(e->string, b, sizeof b) : "?");
    }
    return SLM_OK;
}

/* YaRN (rope_type "yarn"), as transformers computes it: factor; the
 * original context from the object, else max_position_embeddings;
 * beta_fast / beta_slow (32 / 1 when absent or 0); the magnitude
 * attention_factor, else get_mscale(factor, mscale) / get_mscale(factor,
 * mscale_all_dim) when both are given, else 0.1 ln(factor) + 1. truncate
 * false (except for gpt_oss, oss: its configs say so, and it runs with the
 * floored / ceiled correction range llama.cpp uses for its GGUF) and an
 * extrapolation_factor other than 1 (which transformers does not read) are
 * refused. A factor of 1 is no scaling. */
static slm_status parse_yarn(const cJSON *rs, const char *rk, const char *file, int oss, slm_model_config *c,
                             slm_err *err) {
    static const char *const known[] = {"type", "rope_type", "factor", "original_max_position_embeddings", "beta_fast",
                                        "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate",
                                        "extrapolation_factor", NULL};
    slm_status s;
    if ((s = known_keys(rs, rk, file, "yarn", known, err))) return s;
    double f = NAN, bf = 0, bs = 0, af = NAN, ms = 0, msa = 0, ext = 1;
    int orig = c->context_len, trunc = 1;
    if ((s = cfg_num(rs, file, "factor", &f, err)) || (s = cfg_num(rs, file, "beta_fast", &bf, err)) ||
        (s = cfg_num(rs, file, "beta_slow", &bs, err)) || (s = cfg_num(rs, file, "attention_factor", &af, err)) ||
        (s = cfg_num(rs, file, "mscale", &ms, err)) || (s = cfg_num(rs, file, "mscale_all_dim", &msa, err)) ||
        (s = cfg_num(rs, file, "extrapolation_factor", &ext, err)) || (s = cfg_bool(rs, file, "truncate", &trunc, err)) ||
        (s = cfg_int(rs, file, "original_max_position_embeddings", 0, &orig, err)))
        return s;
    if (!(f >= 1.0 && f <= 1024.0))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': yarn needs a factor in 1..1024 (have %g)", file, rk, f);
    if ((!trunc && !oss) || ext != 1.0)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': yarn with %s is not supported", file, rk,
                        !trunc ? "truncate false" : "an extrapolation_factor other than 1");
    if (bf == 0) bf = 32;
    if (bs == 0) bs = 1;
    if (!(bf > 0 && bf < 1e6) || !(bs > 0 && bs < 1e6))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': yarn beta_fast %g / beta_slow %g must be positive", file,
                        rk, bf, bs);
    if (f == 1.0) return SLM_OK;
    if (isnan(af)) {
        const double m1 = ms != 0 && msa != 0 ? ms : 1, m2 = ms != 0 && msa != 0 ? msa : 0;
        af = (0.1 * m1 * log(f) + 1.0) / (m2 != 0 ? 0.1 * m2 * log(f) + 1.0 : 1.0);
    }
    if (!(af > 0.0 && af < 16.0))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': yarn attention factor %g is out of range (0..16)", file, rk,
                        af);
    c->rope_scale = (float)f;
    c->rope_yarn = 1;
    c->rope_orig_ctx = orig;
    c->yarn_beta_fast = (float)bf;
    c->yarn_beta_slow = (float)bs;
    c->yarn_ext_factor = 1.0f;
    c->rope_attn_factor = (float)af == 1.0f ? 0.0f : (float)af;
    return SLM_OK;
}

/* LongRoPE (phi3: rope_scaling type "longrope", or "su" as older files
 * say): long_factor and short_factor (rope_dims/2 each) as
 * rope_factors_long / rope_factors_short; the original context from the
 * top level or rope_scaling (equal when both); attention_factor, else
 * sqrt(1 + ln(s) / ln(orig)) for s = max_position_embeddings / orig > 1, as
 * transformers and llama.cpp's converter compute it. */
static slm_status parse_longrope(const cJSON *root, const cJSON *rs, const char *rk, const char *file,
                                 slm_model_config *c, slm_hf_info *h, slm_err *err) {
    /* rope_parameters also holds rope_theta and partial_rotary_factor (read by the caller) */
    static const char *const known[] = {"type", "rope_type", "long_factor", "short_factor",
                                        "original_max_position_embeddings", "attention_factor", NULL};
    slm_status s;
    if ((s = known_keys(rs, rk, file, "longrope", known, err))) return s;
    int orig = 0, orig_rs = 0;
    if ((s = cfg_int(root, file, "original_max_position_embeddings", 0, &orig, err)) ||
        (s = cfg_int(rs, file, "original_max_position_embeddings", 0, &orig_rs, err)))
        return s;
    if (orig && orig_rs && orig != orig_rs)
        return slm_errf(err, SLM_ERR_FORMAT,
                        "%s: keys 'original_max_position_embeddings' (%d) and '%s' "
                        "'original_max_position_embeddings' (%d) disagree", file, orig, rk, orig_rs);
    if (!orig && !orig_rs)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': longrope needs 'original_max_position_embeddings'", file, rk);
    c->rope_orig_ctx = orig ? orig : orig_rs;
    const int half = slm_rope_dims(c) / 2;
    float *f = slm_malloc(sizeof *f * (size_t)(2 * half));
    if (!f) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", file);
    h->vecs = f;
    h->n_vecs = 2 * half;
    for (int j = 0; j < 2; j++) {
        const char *key = j ? "short_factor" : "long_factor";
        const cJSON *a = item(rs, key);
        if (!a || !cJSON_IsArray(a) || cJSON_GetArraySize(a) != half)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': '%s' must be an array of %d numbers "
                            "(rotated dimensions / 2)", file, rk, key, half);
        int i = 0;
        for (const cJSON *e = a->child; e; e = e->next, i++) {
            if (!cJSON_IsNumber(e) || !(e->valuedouble > 0.0 && e->valuedouble < 1e30))
                return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': '%s'[%d] must be a positive number", file, rk,
                                key, i);
            f[j * half + i] = (float)e->valuedouble;
        }
    }
    double af = 0.0, scale = (double)c->context_len / c->rope_orig_ctx;
    if ((s = cfg_num(rs, file, "attention_factor", &af, err))) return s;
    if (!item(rs, "attention_factor")) af = scale > 1.0 ? sqrt(1.0 + log(scale) / log((double)c->rope_orig_ctx)) : 1.0;
    if (!(af > 0.0 && af < 16.0))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': attention factor %g is out of range (0..16)", file, rk,
                        af);
    c->rope_attn_factor = (float)af == 1.0f ? 0.0f : (float)af;
    c->rope_long = 2; /* short, unless the compiler's context exceeds rope_orig_ctx */
    return SLM_OK;
}

/* rope_scaling (or rope_parameters' global object, rp): none, "linear"
 * (c->rope_scale), "llama3" (rope_freqs), "yarn" or, for phi3, "longrope". */
static slm_status parse_rope_scaling(const cJSON *root, const cJSON *rp, const char *file, slm_arch F, double theta,
                                     slm_model_config *c, slm_hf_info *h, slm_err *err) {
    slm_status s;
    const cJSON *rs = rp ? rp : item(root, "rope_scaling");
    const char *rk = rp ? "rope_parameters" : "rope_scaling";
    if (!rs) return SLM_OK;
    if (!cJSON_IsObject(rs)) return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an object", file, rk);
    const cJSON *t = item(rs, "rope_type");
    if (!t) t = item(rs, "type");
    const char *ts = t && cJSON_IsString(t) && t->valuestring ? t->valuestring : NULL;
    if (t && !ts) return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': 'rope_type' is not a string", file, rk);
    if (!ts || !strcmp(ts, "default")) return SLM_OK;
    if (!strcmp(ts, "linear")) {
        double f = 1.0;
        if ((s = cfg_num(rs, file, "factor", &f, err))) return s;
        if (!(f >= 1.0 && f <= 1024.0))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': factor %g is out of range (1..1024)", file, rk, f);
        c->rope_scale = (float)f;
        return SLM_OK;
    }
    if (!strcmp(ts, "llama3")) {
        if (c->head_dim < 2 || c->head_dim % 2 || c->head_dim > (1 << 20))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': head size %d is not an even integer", file, rk,
                            c->head_dim);
        if ((s = llama3_factors(rs, file, c->head_dim, theta, h, err))) return s;
        c->rope_freqs = 1;
        return SLM_OK;
    }
    if (F == SLM_ARCH_PHI3 && (!strcmp(ts, "longrope") || !strcmp(ts, "su")))
        return parse_longrope(root, rs, rk, file, c, h, err);
    /* gpt_oss says truncate false; it runs with llama.cpp's truncated ramp, as its GGUF does */
    if (!strcmp(ts, "yarn")) return parse_yarn(rs, rk, file, F == SLM_ARCH_GPT_OSS, c, err);
    char b[64];
    return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': type '%s' is not supported (supported: linear, llama3, yarn%s)",
                    file, rk, pstr(ts, b, sizeof b), F == SLM_ARCH_PHI3 ? ", longrope" : "");
}

/* layer_types (newer transformers): one "full_attention" or
 * "sliding_attention" per layer. Gemma without sliding_window_pattern takes
 * its period from it (n - 1 sliding layers of every n); then every family's
 * list must agree with what the other keys say. */
static slm_status check_layer_types(const cJSON *root, const char *file, slm_arch F, int has_pattern, slm_model_config *c,
                                    slm_err *err) {
    const cJSON *lt = item(root, "layer_types");
    if (!lt) return SLM_OK;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'layer_types': expected an array of %d strings", file, c->n_layers);
    unsigned char *swa = slm_malloc((size_t)c->n_layers);
    if (!swa) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", file);
    int l = 0, n_swa = 0;
    slm_status s = SLM_OK;
    for (const cJSON *e = lt->child; e; e = e->next, l++) {
        const char *v = cJSON_IsString(e) ? e->valuestring : NULL;
        if (!v || (strcmp(v, "full_attention") && strcmp(v, "sliding_attention"))) {
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': element %d is not 'full_attention' or "
                         "'sliding_attention'", file, l);
            goto out;
        }
        n_swa += swa[l] = v[0] == 's';
    }
    if ((F == SLM_ARCH_GEMMA2 || F == SLM_ARCH_GEMMA3) && !has_pattern && c->sliding_window > 0) {
        int p = 0; /* 0: all sliding; else the first period that fits */
        if (n_swa == 0) c->sliding_window = 0;
        for (int q = 2; n_swa && n_swa < c->n_layers && q <= c->n_layers + 1 && !p; q++) {
            int fits = 1;
            for (int i = 0; i < c->n_layers && fits; i++) fits = swa[i] == (i % q < q - 1);
            if (fits) p = q;
        }
        if (n_swa && n_swa < c->n_layers && !p) {
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': only n - 1 sliding layers of every n are "
                         "supported", file);
            goto out;
        }
        c->swa_pattern = p;
    }
    for (l = 0; l < c->n_layers; l++)
        if ((F == SLM_ARCH_OLMO2 || F == SLM_ARCH_EXAONE4) && c->sliding_window > 0 && swa[l] != slm_layer_swa(c, l)) {
            s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'layer_types': layer %d is '%s'; llama.cpp runs %s "
                         "with the window on three layers of every four (the fourth full%s), and so does staticlm",
                         file, l, swa[l] ? "sliding_attention" : "full_attention",
                         F == SLM_ARCH_EXAONE4 ? "exaone4 at 64 layers" : "olmo3",
                         F == SLM_ARCH_EXAONE4 ? ", without RoPE" : "");
            goto out;
        } else if (swa[l] != slm_layer_swa(c, l)) {
            s = slm_errf(err, SLM_ERR_FORMAT, "%s: key 'layer_types': layer %d is '%s' but the other keys make it %s",
                         file, l, swa[l] ? "sliding_attention" : "full_attention", swa[l] ? "full" : "sliding");
            goto out;
        }
out:
    slm_xfree(swa);
    return s;
}

/* The sliding window: mistral and mixtral when set; qwen2/qwen3/qwen3_moe only with
 * use_sliding_window, and then on the layers from max_window_layers on (all
 * of them or none is what we run); qwen2_moe none (use_sliding_window true
 * with a window is refused: llama.cpp runs none); gemma2 on even layers, gemma3 on n - 1
 * of every n (sliding_window_pattern); olmo3 on three layers of every four
 * (llama.cpp's fixed period; layer_types must say the same), its sliding
 * layers with plain RoPE of the global base (the global ones take
 * rope_scaling), olmo2 none; phi3's is ignored as llama.cpp does. */
static slm_status parse_window(const cJSON *root, const char *file, slm_arch F, int olmo3, int mixtral,
                               slm_model_config *c, slm_err *err) {
    slm_status s;
    int win = F == SLM_ARCH_GEMMA2 || F == SLM_ARCH_GEMMA3 || olmo3 ? 4096 : 0, has_pattern = 0;
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (sw && (cJSON_IsNull(sw) || (cJSON_IsNumber(sw) && sw->valuedouble == 0))) win = 0; /* none */
    else if ((s = cfg_int(root, file, "sliding_window", 0, &win, err))) return s;
    if (F == SLM_ARCH_OLMO2 && !olmo3 && win)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'sliding_window': OLMo 2 (model_type olmo2) has no window "
                        "(olmo3 does)", file);
    if (F == SLM_ARCH_MISTRAL || mixtral) c->sliding_window = win;
    else if (olmo3 && win) {
        c->sliding_window = win;
        c->swa_pattern = 4;
        c->rope_base_swa = c->rope_base;
        c->rope_scale_swa = 1.0f;
    } else if ((F == SLM_ARCH_QWEN2 || F == SLM_ARCH_QWEN3 || F == SLM_ARCH_QWEN3MOE) && win) {
        int use = 0, mwl = 0;
        const cJSON *x = item(root, "max_window_layers");
        if ((s = cfg_bool(root, file, "use_sliding_window", &use, err))) return s;
        if (use && x) {
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || floor(x->valuedouble) != x->valuedouble)
                return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'max_window_layers': expected an integer", file);
            mwl = x->valuedouble >= c->n_layers ? c->n_layers : (int)x->valuedouble;
        }
        if (use && mwl > 0 && mwl < c->n_layers)
            return slm_errf(err, SLM_ERR_UNSUPPORTED,
                            "%s: key 'max_window_layers' = %d: a sliding window on some layers only is not supported",
                            file, mwl);
        if (use && mwl == 0) c->sliding_window = win;
    } else if (F == SLM_ARCH_QWEN2MOE && win) {
        int use = 0;
        if ((s = cfg_bool(root, file, "use_sliding_window", &use, err))) return s;
        if (use)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'use_sliding_window' = true: a window on qwen2_moe is "
                            "not supported (llama.cpp runs qwen2moe without one)", file);
    } else if (F == SLM_ARCH_GEMMA2 || F == SLM_ARCH_GEMMA3) {
        c->sliding_window = win;
        c->swa_pattern = F == SLM_ARCH_GEMMA2 ? 2 : 6;
        int pat = 0;
        if (F == SLM_ARCH_GEMMA3 && (s = cfg_int(root, file, "sliding_window_pattern", 0, &pat, err))) return s;
        if (pat > 65536) return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'sliding_window_pattern': %d is too large", file, pat);
        if (pat) has_pattern = 1, c->swa_pattern = pat;
        if (c->swa_pattern == 1) c->sliding_window = 0; /* (l + 1) % 1 != 0 never holds: no layer slides */
    }
    return check_layer_types(root, file, F, has_pattern, c, err);
}

/* EXAONE 4.0's window, by llama.cpp's rule: only at 64 layers (the 32B)
 * the window (sliding_window; 4096 when absent or null, as llama.cpp takes
 * it when the converter writes no key) on the three layers of every four
 * with l % 4 < 3, rotating with the global base and scaling, and every
 * fourth layer global without RoPE. layer_types and sliding_window_pattern
 * (EXAONE's string such as "LLLG", L local and G global, repeated over the
 * layers; or an integer n: n - 1 local layers of every n, as transformers
 * and the converter read it) must say the same, else the folder is refused
 * naming the layer. At any other depth (the 1.2B's 30 layers) llama.cpp
 * runs no window and RoPE on every layer whatever these keys say, and so
 * do we: they are not read there. */
static slm_status exaone4_window(const cJSON *root, const char *file, slm_model_config *c, slm_err *err) {
    if (c->n_layers != 64) return SLM_OK;
    slm_status s;
    int win = 4096;
    if ((s = cfg_int(root, file, "sliding_window", 0, &win, err))) return s;
    c->sliding_window = win;
    c->swa_pattern = 4;
    c->nope_step = 4;
    const cJSON *p = item(root, "sliding_window_pattern");
    if (p) {
        const char *ps = cJSON_IsString(p) ? p->valuestring : NULL;
        const size_t n = ps ? strlen(ps) : 0;
        int period = 0;
        if (ps && (!n || n > 65536 || strspn(ps, "LG") != n))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'sliding_window_pattern': expected letters L (local) and "
                            "G (global), or an integer", file);
        if (!ps && (s = cfg_int(root, file, "sliding_window_pattern", 0, &period, err))) return s;
        for (int l = 0; l < c->n_layers; l++) {
            const int slides = ps ? ps[(size_t)l % n] == 'L' : (l + 1) % period != 0;
            if (slides != slm_layer_swa(c, l))
                return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'sliding_window_pattern': layer %d is %s; llama.cpp "
                                "runs exaone4 at 64 layers with the window on three layers of every four (the fourth "
                                "global, without RoPE), and so does staticlm", file, l, slides ? "local" : "global");
        }
    }
    return check_layer_types(root, file, SLM_ARCH_EXAONE4, 0, c, err);
}

/* What gemma2 / gemma3 add: GeGLU, post norms, scaled embeddings, the query
 * scale from query_pre_attn_scalar, soft-caps, local RoPE. */
static slm_status gemma_params(const cJSON *root, const cJSON *rp_l, const char *file, slm_arch F, slm_model_config *c,
                               slm_err *err) {
    slm_status s;
    const cJSON *act = item(root, "hidden_activation");
    if (!act) act = item(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || !act->valuestring ||
                (strcmp(act->valuestring, "gelu_pytorch_tanh") && strcmp(act->valuestring, "gelu_new")))) {
        char b[64];
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s': '%s' is not supported (gelu_pytorch_tanh only)", file,
                        act->string ? act->string : "hidden_activation",
                        cJSON_IsString(act) && act->valuestring ? pstr(act->valuestring, b, sizeof b) : "?");
    }
    int bidir = 0; /* EmbeddingGemma (Gemma3TextModel): gemma-embedding, as llama.cpp's converter makes it */
    if ((s = cfg_bool(root, file, "use_bidirectional_attention", &bidir, err))) return s;
    if (bidir && F != SLM_ARCH_GEMMA3)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'use_bidirectional_attention': true is supported on "
                        "gemma3_text (EmbeddingGemma) only", file);
    if (bidir && !item(root, "sliding_window")) /* the converter requires it too: the window as the file gives it */
        return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key 'sliding_window' (EmbeddingGemma's window)", file);
    if (bidir) { /* both ways, rows within sliding_window / 2 on either side on the window layers (encoder 3) */
        snprintf(c->arch, sizeof c->arch, "%s", slm_arch_name(SLM_ARCH_GEMMA_EMBEDDING));
        c->encoder = 3;
    }
    c->post_norms = 1;
    c->ffn_gelu = 1;
    c->qk_norm = F == SLM_ARCH_GEMMA3;
    c->embed_scale = sqrtf((float)c->dim);
    int qpas = F == SLM_ARCH_GEMMA3 ? 256 : 0;
    if ((s = cfg_int(root, file, "query_pre_attn_scalar", F == SLM_ARCH_GEMMA2, &qpas, err))) return s;
    c->attn_scale = (float)(1.0 / sqrt((double)qpas));
    if (F == SLM_ARCH_GEMMA2) {
        c->attn_softcap = 50.0f; /* Gemma2Config's defaults */
        c->final_softcap = 30.0f;
    }
    if ((s = cfg_cap(root, file, "attn_logit_softcapping", &c->attn_softcap, err)) ||
        (s = cfg_cap(root, file, "final_logit_softcapping", &c->final_softcap, err)))
        return s;
    if (bidir) c->final_softcap = 0.0f; /* no LM head (its GGUF: no cap with a window) */
    if (F == SLM_ARCH_GEMMA3 && c->sliding_window > 0) { /* local layers: their own base, no scaling */
        double lb = 10000.0, lt = NAN;
        if ((s = cfg_num(root, file, "rope_local_base_freq", &lb, err))) return s;
        if (rp_l) { /* rope_parameters' sliding_attention: plain RoPE with its own base */
            const cJSON *t = item(rp_l, "rope_type");
            if (t && (!cJSON_IsString(t) || !t->valuestring || strcmp(t->valuestring, "default")))
                return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'rope_parameters': 'sliding_attention' scaling is "
                                "not supported (default only)", file);
            if ((s = cfg_num(rp_l, file, "rope_theta", &lt, err))) return s;
            if (!isnan(lt) && item(root, "rope_local_base_freq") && lt != lb)
                return slm_errf(err, SLM_ERR_FORMAT, "%s: keys 'rope_local_base_freq' (%g) and 'rope_parameters' "
                                "'sliding_attention' 'rope_theta' (%g) disagree", file, lb, lt);
            if (!isnan(lt)) lb = lt;
        }
        if (!(lb > 0 && lb < 1e30))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_local_base_freq': %g is out of range", file, lb);
        c->rope_base_swa = (float)lb;
        c->rope_scale_swa = 1.0f;
    }
    return SLM_OK;
}

/* smollm3: no_rope_layers[l] is 1 where layer l rotates Q and K, 0 where
 * it does not; llama.cpp runs every no_rope_layer_interval-th layer (4, its
 * fixed step) without RoPE, so the list must say the same or the folder is
 * refused (an absent list: the interval's pattern). */
static slm_status smollm3_params(const cJSON *root, const char *file, slm_model_config *c, slm_err *err) {
    slm_status s;
    int step = 4;
    if ((s = cfg_int(root, file, "no_rope_layer_interval", 0, &step, err))) return s;
    if (step != 4)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'no_rope_layer_interval': %d (only 4, as llama.cpp runs "
                        "smollm3, is supported)", file, step);
    c->nope_step = step;
    const cJSON *nr = item(root, "no_rope_layers");
    if (!nr || cJSON_IsNull(nr)) return SLM_OK;
    if (!cJSON_IsArray(nr) || cJSON_GetArraySize(nr) != c->n_layers)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'no_rope_layers': expected a list of %d integers (one a layer)",
                        file, c->n_layers);
    int l = 0;
    for (const cJSON *e = nr->child; e; e = e->next, l++) {
        if (!cJSON_IsNumber(e) || (e->valuedouble != 0 && e->valuedouble != 1))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'no_rope_layers': item %d is not 0 or 1", file, l);
        if ((e->valuedouble != 0) != slm_layer_rope(c, l))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'no_rope_layers': layer %d %s RoPE, where every %dth "
                            "layer without it is what is supported", file, l, e->valuedouble != 0 ? "has" : "has no",
                            step);
    }
    return SLM_OK;
}

/* The family of model_type (and, for gemma3, the text_config object that
 * holds its keys). */
static slm_status pick_family(const cJSON *top, const char *file, slm_arch *F, const cJSON **root, slm_hf_info *h,
                              slm_err *err) {
    static const struct { const char *type; slm_arch f; } types[] = {
        {"llama", SLM_ARCH_LLAMA}, {"mistral", SLM_ARCH_MISTRAL}, {"qwen2", SLM_ARCH_QWEN2}, {"qwen3", SLM_ARCH_QWEN3},
        {"gemma2", SLM_ARCH_GEMMA2}, {"gemma3", SLM_ARCH_GEMMA3}, {"gemma3_text", SLM_ARCH_GEMMA3}, {"phi3", SLM_ARCH_PHI3},
        {"smollm3", SLM_ARCH_SMOLLM3}, {"olmo2", SLM_ARCH_OLMO2}, {"olmo3", SLM_ARCH_OLMO2},
        {"granite", SLM_ARCH_GRANITE}, {"exaone4", SLM_ARCH_EXAONE4}, {"qwen3_moe", SLM_ARCH_QWEN3MOE},
        {"mixtral", SLM_ARCH_LLAMA}, {"olmoe", SLM_ARCH_OLMOE}, {"gpt_oss", SLM_ARCH_GPT_OSS},
        {"qwen2_moe", SLM_ARCH_QWEN2MOE}, {"qwen3_5", SLM_ARCH_QWEN35}, {"qwen3_5_text", SLM_ARCH_QWEN35},
        {"qwen3_5_moe", SLM_ARCH_QWEN35MOE}, {"qwen3_5_moe_text", SLM_ARCH_QWEN35MOE},
    };
    char b[64];
    const cJSON *mt = item(top, "model_type");
    if (!mt) return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key 'model_type'", file);
    if (!cJSON_IsString(mt) || !mt->valuestring)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'model_type': expected a string", file);
    size_t i = 0;
    while (i < sizeof types / sizeof types[0] && strcmp(mt->valuestring, types[i].type)) i++;
    if (i == sizeof types / sizeof types[0])
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'model_type': '%s' is not supported (supported: llama, "
                        "mistral, qwen2, qwen3, gemma2, gemma3, gemma3_text, phi3, smollm3, olmo2, olmo3, granite, "
                        "exaone4, qwen3_moe, qwen2_moe, mixtral, olmoe, gpt_oss, gemma4, gemma4_text, qwen3_5, qwen3_5_text, "
                        "qwen3_5_moe, qwen3_5_moe_text, bert, xlm-roberta, modernbert, nomic_bert)",
                        file, pstr(mt->valuestring, b, sizeof b));
    *F = types[i].f;
    *root = top;
    if (*F == SLM_ARCH_QWEN35 || *F == SLM_ARCH_QWEN35MOE) /* text_config: hf_qwen35.c */
        return slm_hf_q35_root(top, file, mt->valuestring, root, h, err);
    if (!strcmp(mt->valuestring, "gemma3")) { /* Gemma3ForConditionalGeneration: the text part */
        const cJSON *tc = item(top, "text_config");
        if (!tc || !cJSON_IsObject(tc))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: model_type 'gemma3' needs key 'text_config' (an object)", file);
        const cJSON *tt = item(tc, "model_type");
        if (tt && (!cJSON_IsString(tt) || !tt->valuestring || strcmp(tt->valuestring, "gemma3_text")))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'text_config': model_type '%s' is not supported "
                            "(gemma3_text only)", file, cJSON_IsString(tt) && tt->valuestring ?
                            pstr(tt->valuestring, b, sizeof b) : "?");
        *root = tc;
        h->multimodal = 1;
    }
    return SLM_OK;
}

/* The sizes every family shares. */
static slm_status base_params(const cJSON *root, const cJSON *rp, const char *file, slm_arch F, slm_model_config *c,
                              double *theta, slm_hf_info *h, slm_err *err) {
    slm_status s;
    const int g3 = F == SLM_ARCH_GEMMA3;
    /* Olmo2Config / Olmo3Config / Exaone4Config / OlmoeConfig: 1e-5 (MixtralConfig's: the caller) */
    double eps = F == SLM_ARCH_OLMO2 || F == SLM_ARCH_EXAONE4 || F == SLM_ARCH_OLMOE ? 1e-5 : 1e-6;
    int tie = 0;
    *theta = g3 ? 1e6 : 10000.0;
    c->n_heads = g3 ? 8 : 0;
    c->n_kv_heads = g3 ? 4 : 0;
    c->context_len = g3 ? 131072 : 0;
    if ((s = cfg_int(root, file, "hidden_size", 1, &c->dim, err)) ||
        /* qwen3_moe, qwen2_moe, qwen3_5_moe: the experts' width is moe_intermediate_size (moe_params) */
        (s = cfg_int(root, file, "intermediate_size",
                     F != SLM_ARCH_QWEN3MOE && F != SLM_ARCH_QWEN2MOE && F != SLM_ARCH_QWEN35MOE, &c->hidden_dim, err)) ||
        (s = cfg_int(root, file, "num_hidden_layers", 1, &c->n_layers, err)) ||
        (s = cfg_int(root, file, "num_attention_heads", !g3, &c->n_heads, err)))
        return s;
    if (!g3) c->n_kv_heads = c->n_heads;
    if ((s = cfg_int(root, file, "num_key_value_heads", 0, &c->n_kv_heads, err)) ||
        (s = cfg_int(root, file, "vocab_size", !g3, &c->vocab_size, err)) ||
        (s = cfg_int(root, file, "max_position_embeddings", !g3, &c->context_len, err)) ||
        (s = cfg_num2(root, rp, file, "rope_theta", theta, err)) || (s = cfg_num(root, file, "rms_norm_eps", &eps, err)) ||
        (s = cfg_bool(root, file, "tie_word_embeddings", &tie, err)))
        return s;
    h->vocab_from_embed = c->vocab_size == 0;
    if (!(*theta > 0 && *theta < 1e30) || !(eps > 0 && eps < 1))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g is out of range", file,
                        !(*theta > 0 && *theta < 1e30) ? "rope_theta" : "rms_norm_eps",
                        !(*theta > 0 && *theta < 1e30) ? *theta : eps);
    if (c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'num_key_value_heads' = %d does not divide "
                        "'num_attention_heads' = %d", file, c->n_kv_heads, c->n_heads);
    c->rope_base = (float)*theta;
    c->norm_eps = (float)eps;
    c->tied_embeddings = tie;
    c->rope_scale = 1.0f;
    c->rope_neox = 1; /* HF checkpoints rotate halves; llama.cpp permutes Q/K instead */
    c->qkv_bias = F == SLM_ARCH_QWEN2 || F == SLM_ARCH_QWEN2MOE;
    /* the head size: head_dim when given (qwen3, gemma, Mistral-Nemo), else hidden / heads */
    c->head_dim = g3 ? 256 : c->dim % c->n_heads == 0 ? c->dim / c->n_heads : 0;
    if ((s = cfg_int(root, file, "head_dim", F == SLM_ARCH_GEMMA2, &c->head_dim, err))) return s;
    if (c->head_dim < 2 || c->head_dim % 2 || c->head_dim > 4096)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'head_dim': head size %d (hidden_size %d / %d heads) must be "
                        "even, 2..4096", file, c->head_dim, c->dim, c->n_heads);
    int ab = 0, mb = 0;
    if ((s = cfg_bool(root, file, "attention_bias", &ab, err)) || (s = cfg_bool(root, file, "mlp_bias", &mb, err)))
        return s;
    if ((ab && F != SLM_ARCH_QWEN2 && F != SLM_ARCH_GPT_OSS) || mb)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = true: biases are supported on Q/K/V only (qwen2)",
                        file, mb ? "mlp_bias" : "attention_bias");
    if (F != SLM_ARCH_GEMMA2 && F != SLM_ARCH_GEMMA3) {
        const cJSON *act = item(root, "hidden_act");
        if (act && (!cJSON_IsString(act) || !act->valuestring || strcmp(act->valuestring, "silu"))) {
            char b[64];
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'hidden_act': '%s' is not supported (silu only)", file,
                            cJSON_IsString(act) && act->valuestring ? pstr(act->valuestring, b, sizeof b) : "?");
        }
    }
    return SLM_OK;
}

/* phi3: fused matrices, partial rotary (partial_rotary_factor x head_dim
 * dimensions rotate, as transformers' Phi3 does). */
static slm_status phi3_params(const cJSON *root, const cJSON *rp, const char *file, slm_model_config *c,
                              slm_hf_info *h, slm_err *err) {
    slm_status s;
    double prf = 1.0;
    h->fused = 1;
    if ((s = cfg_num2(root, rp, file, "partial_rotary_factor", &prf, err))) return s;
    if (!(prf > 0.0 && prf <= 1.0))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'partial_rotary_factor': %g is out of range (0..1]", file, prf);
    const int rd = (int)(prf * c->head_dim);
    if (rd < 2 || rd % 2)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'partial_rotary_factor': %g x head size %d = %d rotated "
                        "dimensions (must be even, at least 2)", file, prf, c->head_dim, rd);
    c->rope_dims = rd == c->head_dim ? 0 : rd;
    return SLM_OK;
}

/* granite (GraniteForCausalLM): llama with muP multipliers, each 1.0 when
 * absent (GraniteConfig's defaults): embedding_multiplier (embeddings times
 * it), attention_multiplier (the query scale itself, in place of
 * 1/sqrt(head_dim): transformers' GraniteAttention scales by it, so an
 * absent key is a scale of 1.0), residual_multiplier (both branch outputs
 * times it before their residual add), logits_scaling (logits divided by
 * it). A multiplier of 1 other than the query scale is stored as 0 (none).
 * The head size is hidden / heads: llama.cpp's converter drops head_dim for
 * granite, so one that differs is refused rather than run two ways. */
static slm_status granite_params(const cJSON *root, const char *file, slm_model_config *c, slm_err *err) {
    static const char *const keys[4] = {"embedding_multiplier", "attention_multiplier", "residual_multiplier",
                                        "logits_scaling"};
    double v[4] = {1.0, 1.0, 1.0, 1.0};
    slm_status s;
    for (int i = 0; i < 4; i++) {
        if ((s = cfg_num(root, file, keys[i], &v[i], err))) return s;
        if (!(v[i] > 0.0 && v[i] < 1e6) || (float)v[i] == 0.0f)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g is out of range (above 0, below 1e6)", file, keys[i],
                            v[i]);
    }
    if (item(root, "head_dim") && c->head_dim * c->n_heads != c->dim)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'head_dim' = %d: granite's head size is hidden_size / "
                        "num_attention_heads (llama.cpp's converter ignores head_dim)", file, c->head_dim);
    const float es = (float)v[0], rs = (float)v[2], ls = (float)v[3];
    c->embed_scale = es == 1.0f ? 0.0f : es;
    c->attn_scale = (float)v[1];
    c->residual_scale = rs == 1.0f ? 0.0f : rs;
    c->logit_scale = ls == 1.0f ? 0.0f : ls;
    return SLM_OK;
}

/* qwen2_moe's shared expert (Qwen2MoeSparseMoeBlock): a SwiGLU FFN of width
 * shared_expert_intermediate_size (required: Qwen2MoeConfig's default 5632
 * and llama.cpp's, intermediate_size, differ) behind its sigmoid gate
 * mlp.shared_expert_gate, both in every layer; qkv_bias (transformers v5's
 * key, absent: true) false is refused, llama.cpp's qwen2moe needs the
 * biases. */
static slm_status qwen2moe_shared(const cJSON *root, const char *file, slm_model_config *c, slm_err *err) {
    slm_status s;
    int bias = 1;
    if ((s = cfg_int(root, file, "shared_expert_intermediate_size", 1, &c->shared_ffn, err)) ||
        (s = cfg_bool(root, file, "qkv_bias", &bias, err)))
        return s;
    if (!bias)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'qkv_bias' = false: qwen2_moe without Q/K/V biases is not "
                        "supported (llama.cpp's qwen2moe has them)", file);
    c->shared_gate = 1;
    return SLM_OK;
}

/* Mixture of experts, every layer's FFN: qwen3_moe (Qwen3MoeForCausalLM:
 * num_experts, num_experts_per_tok, the experts' width
 * moe_intermediate_size; decoder_sparse_step must be 1 and mlp_only_layers
 * empty, since a layer with a dense MLP is not run) and qwen2_moe (the
 * same keys, plus its shared expert: qwen2moe_shared), mixtral
 * (num_local_experts, num_experts_per_tok, the width intermediate_size; the
 * top-k weights always renormalized, as MixtralSparseMoeBlock does) and
 * olmoe (num_experts, num_experts_per_tok, intermediate_size; clip_qkv
 * refused). norm_topk_prob (qwen3_moe, olmoe) renormalizes the top-k
 * weights as transformers does; absent: false, Qwen3MoeConfig's and
 * OlmoeConfig's default (llama.cpp fixes it per architecture instead: on
 * for qwen3moe, off for olmoe). */
static slm_status moe_params(const cJSON *root, const char *file, slm_arch F, slm_model_config *c, slm_err *err) {
    slm_status s;
    const char *nk = F == SLM_ARCH_LLAMA ? "num_local_experts" : "num_experts";
    int n = 0, used = 0, norm = F == SLM_ARCH_LLAMA, step = 1;
    if ((s = cfg_int(root, file, nk, 1, &n, err)) || (s = cfg_int(root, file, "num_experts_per_tok", 1, &used, err)))
        return s;
    if (n > 1024) return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %d is out of range (1..1024)", file, nk, n);
    if (used > n || used > 64)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'num_experts_per_tok': %d is more than the %d experts (or 64)",
                        file, used, n);
    if (F != SLM_ARCH_LLAMA && (s = cfg_bool(root, file, "norm_topk_prob", &norm, err))) return s;
    if (F == SLM_ARCH_QWEN2MOE && (s = qwen2moe_shared(root, file, c, err))) return s;
    if (F == SLM_ARCH_QWEN3MOE || F == SLM_ARCH_QWEN2MOE) {
        if ((s = cfg_int(root, file, "moe_intermediate_size", 1, &c->hidden_dim, err)) ||
            (s = cfg_int(root, file, "decoder_sparse_step", 0, &step, err)))
            return s;
        if (step != 1)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'decoder_sparse_step': %d makes layer 0 a dense MLP; "
                            "only models whose every layer is sparse (decoder_sparse_step 1) are supported", file, step);
        const cJSON *mo = item(root, "mlp_only_layers");
        if (mo && !cJSON_IsArray(mo))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'mlp_only_layers': expected a list of layer indices", file);
        if (mo && mo->child) {
            const cJSON *e = mo->child;
            if (!cJSON_IsNumber(e) || floor(e->valuedouble) != e->valuedouble || fabs(e->valuedouble) > 1e9)
                return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'mlp_only_layers': item 0 is not a layer index", file);
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'mlp_only_layers': layer %.0f has a dense MLP; only "
                            "models whose every layer is sparse (an empty list) are supported", file, e->valuedouble);
        }
    }
    const cJSON *clip = F == SLM_ARCH_OLMOE ? item(root, "clip_qkv") : NULL;
    if (clip)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'clip_qkv' = %g: clipping Q, K and V is not supported", file,
                        cJSON_IsNumber(clip) ? clip->valuedouble : NAN);
    c->n_experts = n;
    c->n_experts_used = used;
    c->expert_norm = norm;
    return SLM_OK;
}

slm_status slm_hf_config(slm_model_config *c, slm_hf_info *h, const char *json, size_t len, const char *name,
                         slm_err *err) {
    const char *file = name ? name : "config.json";
    slm_status s = SLM_OK;
    memset(h, 0, sizeof *h);
    memset(c, 0, sizeof *c);
    slm_json_init_hooks();
    slm_json_oom_clear();
    cJSON *top = cJSON_ParseWithLength(json, len);
    if (!top && slm_json_oom()) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory parsing the JSON", file);
    if (!top) return slm_errf(err, SLM_ERR_FORMAT, "%s: invalid JSON", file);
    const cJSON *root = top, *rp_g = NULL, *rp_l = NULL;
    slm_arch F = SLM_ARCH_LLAMA;
    double theta = 10000.0;
    int olmo3 = 0, mixtral = 0;
    if (!cJSON_IsObject(top)) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: not a JSON object", file);
        goto done;
    }
    const cJSON *mt = item(top, "model_type"); /* gemma4: the whole config is hf_gemma4.c's */
    if (mt && cJSON_IsString(mt) && mt->valuestring &&
        (!strcmp(mt->valuestring, "gemma4") || !strcmp(mt->valuestring, "gemma4_text"))) {
        s = slm_hf_gemma4_config(top, file, c, h, err);
        goto done;
    }
    if (mt && cJSON_IsString(mt) && mt->valuestring &&
        (!strcmp(mt->valuestring, "bert") || !strcmp(mt->valuestring, "xlm-roberta"))) { /* hf_bert.c */
        s = slm_hf_bert_config(top, file, c, h, err);
        goto done;
    }
    if (mt && cJSON_IsString(mt) && mt->valuestring && !strcmp(mt->valuestring, "modernbert")) { /* hf_modernbert.c */
        s = slm_hf_modernbert_config(top, file, c, h, err);
        goto done;
    }
    if (mt && cJSON_IsString(mt) && mt->valuestring && !strcmp(mt->valuestring, "nomic_bert")) { /* hf_nomic.c */
        s = slm_hf_nomic_config(top, file, c, h, err);
        goto done;
    }
    if ((s = pick_family(top, file, &F, &root, h, err))) goto done;
    olmo3 = F == SLM_ARCH_OLMO2 && !strcmp(item(top, "model_type")->valuestring, "olmo3");
    mixtral = F == SLM_ARCH_LLAMA && !strcmp(item(top, "model_type")->valuestring, "mixtral");
    snprintf(c->arch, sizeof c->arch, "%s", slm_arch_name(F));
    if ((s = rope_parameters(root, file, F, &rp_g, &rp_l, err))) goto done;
    if ((s = base_params(root, rp_g, file, F, c, &theta, h, err))) goto done;
    if (mixtral && !item(root, "rms_norm_eps")) c->norm_eps = 1e-5f; /* MixtralConfig's default */
    c->qk_norm = F == SLM_ARCH_QWEN3 || F == SLM_ARCH_QWEN3MOE; /* olmoe: over whole rows, pre-norms kept */
    if (F == SLM_ARCH_OLMOE) c->qk_norm = 2;
    if ((F == SLM_ARCH_QWEN3MOE || F == SLM_ARCH_QWEN2MOE || F == SLM_ARCH_OLMOE || mixtral) &&
        (s = moe_params(root, file, F, c, err)))
        goto done;
    if (F == SLM_ARCH_OLMO2 || F == SLM_ARCH_EXAONE4) {
        /* OLMo 2 / Olmo 3: Q/K RMSNorm over whole rows; EXAONE 4.0: per head;
         * both: norms after attention and FFN only */
        c->qk_norm = F == SLM_ARCH_OLMO2 ? 2 : 1;
        c->no_pre_norms = 1;
        c->post_norms = 1;
    }
    h->norm_plus_one = F == SLM_ARCH_GEMMA2 || F == SLM_ARCH_GEMMA3;
    if (F == SLM_ARCH_PHI3 && (s = phi3_params(root, rp_g, file, c, h, err))) goto done;
    if (F == SLM_ARCH_SMOLLM3 && (s = smollm3_params(root, file, c, err))) goto done;
    if (F == SLM_ARCH_GRANITE && (s = granite_params(root, file, c, err))) goto done;
    if (F == SLM_ARCH_GPT_OSS) s = slm_hf_oss_config(root, file, c, err); /* experts, biases, sinks, window: hf_oss.c */
    else if (F == SLM_ARCH_EXAONE4) s = exaone4_window(root, file, c, err);
    else if (F == SLM_ARCH_QWEN35 || F == SLM_ARCH_QWEN35MOE) s = slm_hf_q35_config(top, root, rp_g, file, c, h, err);
    else s = parse_window(root, file, F, olmo3, mixtral, c, err);
    if (s) goto done;
    if ((F == SLM_ARCH_GEMMA2 || F == SLM_ARCH_GEMMA3) && (s = gemma_params(root, rp_l, file, F, c, err))) goto done;
    if (F == SLM_ARCH_PHI3) c->sliding_window = 0; /* llama.cpp disables Phi-3's window; so do we, for the same logits */
    if ((s = parse_rope_scaling(root, rp_g, file, F, theta, c, h, err))) goto done;
done:
    cJSON_Delete(top);
    if (s) {
        slm_xfree(h->vecs);
        h->vecs = NULL;
        h->n_vecs = 0;
    }
    return s;
}

#endif

slm_status slm_hf_parse_config(slm_model_config *c, float **rope_freqs, const char *json, size_t len,
                               const char *name, slm_err *err) {
    slm_hf_info h;
    slm_status s = slm_hf_config(c, &h, json, len, name, err);
    *rope_freqs = h.vecs;
    return s;
}
