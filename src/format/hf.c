/* Hugging Face folders: config.json + safetensors (one file, or shards named
 * by model.safetensors.index.json) -> slm_model_file with GGUF names, for
 * the llama, mistral and qwen2 families.
 *
 * One mapping for many shards: each shard is first mapped on its own and its
 * header parsed (slm_st_parse); then one address range is reserved
 * (PROT_NONE) for all shards, page-rounded, plus an anonymous area; each
 * shard is mapped again read-only with MAP_FIXED at its place in the range,
 * and the anonymous area receives what must be converted: norm and bias
 * vectors stored as BF16/F16 become F32 (the kernels take f32 vectors), a
 * tensor whose data is not aligned to its element size is copied, and Llama
 * 3 scaling gets its rope_freqs.weight. The range is laid out without gaps,
 * so all of m->map is readable, and slm_unmap releases it in one call.
 *
 * HF matrices are [out, in] row-major, which is GGUF's ne {in, out}: nothing
 * is transposed. HF Q/K rows are in the "rotate half" RoPE layout (pairs
 * (i, i + head_dim/2)); llama.cpp's converter permutes them to adjacent
 * pairs instead, here cfg.rope_neox = 1 and nothing is permuted.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/model.h"
#include "format/safetensors.h"

#ifndef SLM_HAVE_CJSON

slm_status slm_hf_parse_config(slm_model_config *c, float **rope_freqs, const char *json, size_t len,
                               const char *name, slm_err *err) {
    (void)c;
    (void)json;
    (void)len;
    if (rope_freqs) *rope_freqs = NULL;
    return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: built without JSON support (cJSON not found)",
                    name ? name : "config.json");
}

slm_status slm_hf_model_load(slm_model_file *m, slm_err *err) {
    return slm_errf(err, SLM_ERR_UNSUPPORTED,
                    "%s: a Hugging Face folder needs JSON support: built without JSON support (cJSON not found)",
                    slm_basename(m->path));
}

#else

#include <cJSON.h>

#include "common/json.h"

#define HF_MAX_JSON (64u << 20)
#define HF_MAX_SHARDS 4096

/* ---- config.json ----------------------------------------------------------- */

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

/* A string for messages: printable ASCII, at most 40 bytes. */
static const char *pstr(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    for (; s[n] && n + 4 < cap && n < 40; n++) {
        unsigned char ch = (unsigned char)s[n];
        buf[n] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (s[n]) buf[n++] = '.', buf[n++] = '.', buf[n++] = '.';
    buf[n] = 0;
    return buf;
}

/* Llama 3 RoPE scaling: llama.cpp's converter (LlamaModel, rope_freqs) in
 * float32 as it computes them: freqs = 1 / base^(2i/d); wavelen = 2 pi /
 * freq; below old_ctx/high_freq_factor -> 1; above old_ctx/low_freq_factor ->
 * factor; between -> 1 / ((1 - smooth)/factor + smooth), smooth =
 * (old_ctx/wavelen - low)/(high - low). */
static slm_status llama3_factors(const cJSON *rs, const char *file, int head_dim, double base, float **out,
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
    *out = f;
    return SLM_OK;
}

/* Sliding window: mistral when set; qwen2 only with use_sliding_window,
 * and then on the layers from max_window_layers on (all of them or none
 * is what we run). */
static slm_status parse_window(const cJSON *root, const char *file, const char *A, slm_model_config *c,
                               slm_err *err) {
    slm_status s;
    int win = 0;
    const cJSON *sw = item(root, "sliding_window");
    if (sw && !(cJSON_IsNumber(sw) && sw->valuedouble == 0) && (s = cfg_int(root, file, "sliding_window", 0, &win, err)))
        return s; /* 0 (or null): none */
    if (!strcmp(A, "mistral")) c->sliding_window = win;
    else if (!strcmp(A, "qwen2") && win) {
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
    }
    return SLM_OK;
}

/* rope_scaling: none, "linear" (c->rope_scale) or "llama3" (*rope_freqs,
 * heap, head_dim/2 divisors; c->rope_freqs = 1). */
static slm_status parse_rope_scaling(const cJSON *root, const char *file, double theta, slm_model_config *c,
                                     float **rope_freqs, slm_err *err) {
    slm_status s;
    const cJSON *rs = item(root, "rope_scaling");
    if (!rs) return SLM_OK;
    if (!cJSON_IsObject(rs)) return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_scaling': expected an object", file);
    const cJSON *t = item(rs, "rope_type");
    if (!t) t = item(rs, "type");
    const char *ts = t && cJSON_IsString(t) && t->valuestring ? t->valuestring : NULL;
    if (t && !ts) return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_scaling': 'rope_type' is not a string", file);
    if (!ts || !strcmp(ts, "default")) return SLM_OK;
    if (!strcmp(ts, "linear")) {
        double f = 1.0;
        if ((s = cfg_num(rs, file, "factor", &f, err))) return s;
        if (!(f >= 1.0 && f <= 1024.0))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_scaling': factor %g is out of range (1..1024)", file, f);
        c->rope_scale = (float)f;
        return SLM_OK;
    }
    if (!strcmp(ts, "llama3")) {
        if (c->dim % c->n_heads || c->head_dim < 2 || c->head_dim % 2 || c->head_dim > (1 << 20))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'rope_scaling': head size %d/%d is not an even integer", file,
                            c->dim, c->n_heads);
        if ((s = llama3_factors(rs, file, c->head_dim, theta, rope_freqs, err))) return s;
        c->rope_freqs = 1;
        return SLM_OK;
    }
    char b[64];
    return slm_errf(err, SLM_ERR_UNSUPPORTED,
                    "%s: key 'rope_scaling': type '%s' is not supported (supported: linear, llama3)", file,
                    pstr(ts, b, sizeof b));
}

slm_status slm_hf_parse_config(slm_model_config *c, float **rope_freqs, const char *json, size_t len,
                               const char *name, slm_err *err) {
    const char *file = name ? name : "config.json";
    slm_status s = SLM_OK;
    *rope_freqs = NULL;
    memset(c, 0, sizeof *c);
    slm_json_init_hooks();
    slm_json_oom_clear();
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root && slm_json_oom()) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory parsing the JSON", file);
    if (!root) return slm_errf(err, SLM_ERR_FORMAT, "%s: invalid JSON", file);
    if (!cJSON_IsObject(root)) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: not a JSON object", file);
        goto done;
    }
    const cJSON *mt = item(root, "model_type");
    if (!mt) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key 'model_type'", file);
        goto done;
    }
    if (!cJSON_IsString(mt) || !mt->valuestring) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: key 'model_type': expected a string", file);
        goto done;
    }
    static const char *const types[] = {"llama", "mistral", "qwen2"};
    const char *A = NULL;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(mt->valuestring, types[i])) A = types[i];
    if (!A) {
        char b[64];
        s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'model_type': '%s' is not supported (supported: %s)", file,
                     pstr(mt->valuestring, b, sizeof b), SLM_SUPPORTED_ARCHS);
        goto done;
    }
    snprintf(c->arch, sizeof c->arch, "%s", A);
    double theta = 10000.0, eps = 1e-6;
    int tie = 0;
    if ((s = cfg_int(root, file, "hidden_size", 1, &c->dim, err)) ||
        (s = cfg_int(root, file, "intermediate_size", 1, &c->hidden_dim, err)) ||
        (s = cfg_int(root, file, "num_hidden_layers", 1, &c->n_layers, err)) ||
        (s = cfg_int(root, file, "num_attention_heads", 1, &c->n_heads, err)))
        goto done;
    c->n_kv_heads = c->n_heads;
    if ((s = cfg_int(root, file, "num_key_value_heads", 0, &c->n_kv_heads, err)) ||
        (s = cfg_int(root, file, "vocab_size", 1, &c->vocab_size, err)) ||
        (s = cfg_int(root, file, "max_position_embeddings", 1, &c->context_len, err)) ||
        (s = cfg_num(root, file, "rope_theta", &theta, err)) || (s = cfg_num(root, file, "rms_norm_eps", &eps, err)) ||
        (s = cfg_bool(root, file, "tie_word_embeddings", &tie, err)))
        goto done;
    if (!(theta > 0 && theta < 1e30) || !(eps > 0 && eps < 1)) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g is out of range", file,
                     !(theta > 0 && theta < 1e30) ? "rope_theta" : "rms_norm_eps",
                     !(theta > 0 && theta < 1e30) ? theta : eps);
        goto done;
    }
    c->rope_base = (float)theta;
    c->norm_eps = (float)eps;
    c->tied_embeddings = tie;
    c->rope_scale = 1.0f;
    c->rope_neox = 1; /* HF checkpoints rotate halves; llama.cpp permutes Q/K instead */
    c->qkv_bias = !strcmp(A, "qwen2");
    c->head_dim = c->dim / c->n_heads;

    const cJSON *act = item(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || !act->valuestring || strcmp(act->valuestring, "silu"))) {
        char b[64];
        s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'hidden_act': '%s' is not supported (silu only)", file,
                     cJSON_IsString(act) && act->valuestring ? pstr(act->valuestring, b, sizeof b) : "?");
        goto done;
    }
    int hd = 0;
    if ((s = cfg_int(root, file, "head_dim", 0, &hd, err))) goto done;
    if (hd && (c->dim % c->n_heads || hd != c->dim / c->n_heads)) {
        s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key 'head_dim' = %d: only hidden_size / num_attention_heads = %d/%d "
                     "is supported", file, hd, c->dim, c->n_heads);
        goto done;
    }
    int ab = 0, mb = 0;
    if ((s = cfg_bool(root, file, "attention_bias", &ab, err)) || (s = cfg_bool(root, file, "mlp_bias", &mb, err)))
        goto done;
    if ((ab && strcmp(A, "qwen2")) || mb) {
        s = slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = true: biases are supported on Q/K/V only (qwen2)",
                     file, mb ? "mlp_bias" : "attention_bias");
        goto done;
    }

    if ((s = parse_window(root, file, A, c, err))) goto done;
    if ((s = parse_rope_scaling(root, file, theta, c, rope_freqs, err))) goto done;
done:
    cJSON_Delete(root);
    if (s) {
        slm_xfree(*rope_freqs);
        *rope_freqs = NULL;
    }
    return s;
}

/* ---- files ------------------------------------------------------------------ */

/* Read a whole (small) file with slm_malloc; *buf NULL and SLM_OK when it
 * does not exist and !required. */
static slm_status read_small(const char *path, const char *shown, int required, char **buf, size_t *len,
                             slm_err *err) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && !required) return SLM_OK;
        return slm_errf(err, errno == ENOENT ? SLM_ERR_FORMAT : SLM_ERR_IO, "%s: cannot open: %s", shown,
                        strerror(errno));
    }
    struct stat st;
    slm_status s = SLM_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        s = slm_errf(err, SLM_ERR_IO, "%s: not a regular file", shown);
        goto out;
    }
    if ((uint64_t)st.st_size > HF_MAX_JSON) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: %lld bytes: larger than the limit (%u)", shown, (long long)st.st_size,
                     HF_MAX_JSON);
        goto out;
    }
    *buf = slm_malloc((size_t)st.st_size + 1);
    if (!*buf) {
        s = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", shown);
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, *buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            s = slm_errf(err, SLM_ERR_IO, "%s: read failed: %s", shown, r < 0 ? strerror(errno) : "short read");
            goto out;
        }
        got += (size_t)r;
    }
    (*buf)[got] = 0;
    *len = got;
out:
    close(fd);
    if (s) {
        slm_xfree(*buf);
        *buf = NULL;
    }
    return s;
}

typedef struct shard {
    char file[256];   /* name inside the folder */
    char shown[320];  /* "folder/file" for messages */
    int fd;
    uint64_t size;
    void *tmp;        /* the first, temporary mapping */
    slm_st st;
    uint64_t off;     /* place in the range */
} shard;

/* The GGUF name of an HF tensor; 0 when unknown, 2 when ignorable. *vec: a
 * norm or bias vector (must be f32). */
static int gguf_name(const char *hf, char *out, size_t cap, int *vec) {
    static const struct { const char *hf, *gg; int vec; } top[] = {
        {"model.embed_tokens.weight", "token_embd.weight", 0},
        {"model.norm.weight", "output_norm.weight", 1},
        {"lm_head.weight", "output.weight", 0},
    };
    static const struct { const char *hf, *gg; int vec; } layer[] = {
        {"input_layernorm.weight", "attn_norm.weight", 1},
        {"self_attn.q_proj.weight", "attn_q.weight", 0},
        {"self_attn.k_proj.weight", "attn_k.weight", 0},
        {"self_attn.v_proj.weight", "attn_v.weight", 0},
        {"self_attn.q_proj.bias", "attn_q.bias", 1},
        {"self_attn.k_proj.bias", "attn_k.bias", 1},
        {"self_attn.v_proj.bias", "attn_v.bias", 1},
        {"self_attn.o_proj.weight", "attn_output.weight", 0},
        {"post_attention_layernorm.weight", "ffn_norm.weight", 1},
        {"mlp.gate_proj.weight", "ffn_gate.weight", 0},
        {"mlp.up_proj.weight", "ffn_up.weight", 0},
        {"mlp.down_proj.weight", "ffn_down.weight", 0},
    };
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(hf, top[i].hf)) {
            *vec = top[i].vec;
            snprintf(out, cap, "%s", top[i].gg);
            return 1;
        }
    const char *pre = "model.layers.";
    if (strncmp(hf, pre, strlen(pre))) return 0;
    const char *p = hf + strlen(pre);
    long n = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 6; p++, digits++) n = n * 10 + (*p - '0');
    if (!digits || *p != '.' || (digits > 1 && hf[strlen(pre)] == '0') || n > 65535) return 0;
    p++;
    if (!strcmp(p, "self_attn.rotary_emb.inv_freq")) return 2; /* recomputed from the config */
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
        if (!strcmp(p, layer[i].hf)) {
            *vec = layer[i].vec;
            snprintf(out, cap, "blk.%ld.%s", n, layer[i].gg);
            return 1;
        }
    return 0;
}

static uint32_t elem_size(uint32_t t) { return t == SLM_F32 ? 4 : 2; }

/* One tensor of the result, before placing. */
typedef struct pending {
    const slm_st_tensor *src;
    char name[64];    /* GGUF name */
    int shard;
    int convert;      /* 1: to f32; 2: copied as is (misaligned) */
    uint64_t extra_off, extra_bytes;
} pending;

static slm_status folder_name(const slm_model_file *m, const char *file, char *out, size_t cap, slm_err *err) {
    int n = snprintf(out, cap, "%s/%s", m->path, file);
    if (n < 0 || (size_t)n >= cap)
        return slm_errf(err, SLM_ERR_ARG, "%s: path too long for '%s'", slm_basename(m->path), file);
    return SLM_OK;
}

/* A shard name from the index: a plain file name inside the folder. */
static int shard_name_ok(const char *s) {
    size_t n = strlen(s);
    return n > 0 && n < 256 && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/* A folder being loaded: what the steps of slm_hf_model_load share. */
typedef struct hf_load {
    slm_model_file *m;
    const char *dir;          /* the folder's base name, for messages */
    char path[1400];          /* scratch: a file in the folder */
    char idx_shown[320];      /* "folder/model.safetensors.index.json" */
    char *idx_json;           /* the index (NULL: one model.safetensors) */
    cJSON *index;
    const cJSON *wm;          /* the index's weight_map */
    shard *sh;
    int n_sh;
    pending *pend;            /* the tensors taken, in shard order */
    int n_pend, cap_pend;
    float *rope;              /* Llama 3 rope_freqs (head_dim/2), or NULL */
    uint64_t extra;           /* bytes of the anonymous area */
    uint64_t rope_off;        /* rope_freqs' place in it */
    uint8_t *ex;              /* the anonymous area, once mapped */
    slm_err *err;
} hf_load;

/* The shards: those model.safetensors.index.json names, else
 * model.safetensors alone. */
static slm_status find_shards(hf_load *L) {
    slm_status s;
    size_t idx_len = 0;
    const char *shown = L->idx_shown;
    snprintf(L->idx_shown, sizeof L->idx_shown, "%s/model.safetensors.index.json", L->dir);
    if ((s = folder_name(L->m, "model.safetensors.index.json", L->path, sizeof L->path, L->err))) return s;
    if ((s = read_small(L->path, shown, 0, &L->idx_json, &idx_len, L->err))) return s;
    if (!L->idx_json) {
        L->sh = slm_calloc(1, sizeof *L->sh);
        if (!L->sh) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory", L->dir);
        snprintf(L->sh[0].file, sizeof L->sh[0].file, "model.safetensors");
        snprintf(L->sh[0].shown, sizeof L->sh[0].shown, "%s/model.safetensors", L->dir);
        L->sh[0].fd = -1;
        L->n_sh = 1;
        if ((s = folder_name(L->m, "model.safetensors", L->path, sizeof L->path, L->err))) return s;
        if (access(L->path, F_OK) != 0)
            return slm_errf(L->err, SLM_ERR_FORMAT, "%s: neither model.safetensors nor model.safetensors.index.json found",
                            L->dir);
        return SLM_OK;
    }
    slm_json_init_hooks();
    slm_json_oom_clear();
    L->index = cJSON_ParseWithLength(L->idx_json, idx_len);
    if (!L->index && slm_json_oom()) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory parsing the JSON", shown);
    if (!L->index || !cJSON_IsObject(L->index)) return slm_errf(L->err, SLM_ERR_FORMAT, "%s: invalid JSON", shown);
    L->wm = cJSON_GetObjectItemCaseSensitive(L->index, "weight_map");
    if (!L->wm || !cJSON_IsObject(L->wm))
        return slm_errf(L->err, SLM_ERR_FORMAT, "%s: missing key 'weight_map' (an object)", shown);
    shard *sh = L->sh = slm_calloc(HF_MAX_SHARDS, sizeof *sh);
    if (!sh) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory", shown);
    for (const cJSON *e = L->wm->child; e; e = e->next) {
        char b1[64], b2[64];
        if (!cJSON_IsString(e) || !e->valuestring || !shard_name_ok(e->valuestring))
            return slm_errf(L->err, SLM_ERR_FORMAT,
                            "%s: key 'weight_map': tensor '%s': expected a file name in the folder", shown,
                            e->string ? pstr(e->string, b1, sizeof b1) : "?");
        int k = 0;
        while (k < L->n_sh && strcmp(sh[k].file, e->valuestring)) k++;
        if (k < L->n_sh) continue;
        if (L->n_sh == HF_MAX_SHARDS)
            return slm_errf(L->err, SLM_ERR_FORMAT, "%s: more than %d shards", shown, HF_MAX_SHARDS);
        shard *d = &sh[L->n_sh++];
        snprintf(d->file, sizeof d->file, "%s", e->valuestring);
        snprintf(d->shown, sizeof d->shown, "%s/%s", L->dir, pstr(e->valuestring, b2, sizeof b2));
        d->fd = -1;
    }
    if (!L->n_sh) return slm_errf(L->err, SLM_ERR_FORMAT, "%s: key 'weight_map' names no tensor", shown);
    return SLM_OK;
}

/* Open, map (on its own, for now) and parse each shard; check that every
 * tensor the index names is in its shard. */
static slm_status open_shards(hf_load *L) {
    slm_status s;
    for (int i = 0; i < L->n_sh; i++) {
        shard *d = &L->sh[i];
        if ((s = folder_name(L->m, d->file, L->path, sizeof L->path, L->err))) return s;
        d->fd = open(L->path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (d->fd < 0 || fstat(d->fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
            const char *why = d->fd < 0 ? strerror(errno) : "not a non-empty regular file";
            if (L->idx_json)
                return slm_errf(L->err, SLM_ERR_FORMAT, "%s: key 'weight_map': shard '%s' cannot be opened: %s",
                                L->idx_shown, d->shown, why);
            return slm_errf(L->err, SLM_ERR_IO, "%s: cannot open: %s", d->shown, why);
        }
        d->size = (uint64_t)st.st_size;
        d->tmp = mmap(NULL, (size_t)d->size, PROT_READ, MAP_PRIVATE, d->fd, 0);
        if (d->tmp == MAP_FAILED) {
            d->tmp = NULL;
            return slm_errf(L->err, SLM_ERR_IO, "%s: cannot map: %s", d->shown, strerror(errno));
        }
        if ((s = slm_st_parse(&d->st, d->tmp, d->size, d->shown, L->err))) return s;
    }
    for (const cJSON *e = L->wm ? L->wm->child : NULL; e; e = e->next) {
        int k = 0;
        while (strcmp(L->sh[k].file, e->valuestring)) k++;
        if (!e->string || !slm_st_find(&L->sh[k].st, e->string)) {
            char b[64];
            return slm_errf(L->err, SLM_ERR_FORMAT, "%s: key 'weight_map': tensor '%s' is not in shard %s", L->idx_shown,
                            e->string ? pstr(e->string, b, sizeof b) : "?", L->sh[k].shown);
        }
    }
    return SLM_OK;
}

/* Take tensor t of shard i (GGUF name gn) and reserve what it needs in
 * the anonymous area. */
static slm_status take_tensor(hf_load *L, int i, const slm_st_tensor *t, const char *gn, int vec) {
    const shard *sh = L->sh;
    char b[64];
    if (L->n_pend == L->cap_pend) {
        int nc = L->cap_pend ? L->cap_pend * 2 : 64;
        pending *np = slm_realloc(L->pend, (size_t)nc * sizeof *np);
        if (!np) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory", L->dir);
        L->pend = np;
        L->cap_pend = nc;
    }
    pending *p = &L->pend[L->n_pend++];
    memset(p, 0, sizeof *p);
    p->src = t;
    p->shard = i;
    snprintf(p->name, sizeof p->name, "%s", gn);
    uint64_t addr_off = sh[i].st.data_start + t->begin, nbytes = t->end - t->begin;
    if (vec && t->type != SLM_F32) p->convert = 1, p->extra_bytes = nbytes / 2 * 4;
    else if (addr_off % elem_size(t->type)) p->convert = 2, p->extra_bytes = nbytes;
    if (p->convert) {
        p->extra_off = L->extra;
        if (!slm_add_ok(L->extra, (p->extra_bytes + 63) & ~(uint64_t)63, &L->extra) || p->extra_bytes > (1ull << 40))
            return slm_errf(L->err, SLM_ERR_FORMAT, "%s: tensor '%s': too large", sh[i].shown, pstr(t->name, b, sizeof b));
    }
    /* the same GGUF name twice (across shards) */
    for (int q = 0; L->n_sh > 1 && q + 1 < L->n_pend; q++)
        if (!strcmp(L->pend[q].name, gn))
            return slm_errf(L->err, SLM_ERR_FORMAT, "%s: tensor '%s' is also in %s", sh[i].shown,
                            pstr(t->name, b, sizeof b), sh[L->pend[q].shard].shown);
    return SLM_OK;
}

/* The tensors we take (GGUF names), and what the anonymous area must hold. */
static slm_status plan_tensors(hf_load *L) {
    slm_status s;
    for (int i = 0; i < L->n_sh; i++)
        for (int j = 0; j < L->sh[i].st.n_tensors; j++) {
            const slm_st_tensor *t = &L->sh[i].st.tensors[j];
            char gn[64], b[64];
            int vec = 0, r = gguf_name(t->name, gn, sizeof gn, &vec);
            if (r == 2) continue;
            if (r == 0)
                return slm_errf(L->err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': not part of a %s model that staticlm runs",
                                L->sh[i].shown, pstr(t->name, b, sizeof b), L->m->cfg.arch);
            if (!strcmp(gn, "output.weight") && L->m->cfg.tied_embeddings) continue; /* tie_word_embeddings */
            if ((s = take_tensor(L, i, t, gn, vec))) return s;
        }
    L->rope_off = L->extra;
    if (L->rope) L->extra += (uint64_t)(L->m->cfg.head_dim / 2) * 4;
    return SLM_OK;
}

/* One range: the shards mapped again side by side, then the anonymous
 * area (L->ex, writable until fill_tensors is done). */
static slm_status map_range(hf_load *L) {
    const long page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    shard *sh = L->sh;
    uint64_t total = 0, pg = (uint64_t)page;
    for (int i = 0; i < L->n_sh; i++) {
        sh[i].off = total;
        if (!slm_add_ok(total, (sh[i].size + pg - 1) / pg * pg, &total))
            return slm_errf(L->err, SLM_ERR_FORMAT, "%s: shards too large", L->dir);
    }
    const uint64_t extra_at = total, extra_mapped = (L->extra + pg - 1) / pg * pg;
    if (!slm_add_ok(total, extra_mapped, &total) || total > SIZE_MAX / 2)
        return slm_errf(L->err, SLM_ERR_FORMAT, "%s: shards too large", L->dir);
    void *base = mmap(NULL, (size_t)total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return slm_errf(L->err, SLM_ERR_IO, "%s: cannot reserve %llu bytes of address space: %s", L->dir,
                        (unsigned long long)total, strerror(errno));
    L->m->map.data = base; /* from here on slm_unmap (slm_model_close) releases it all */
    L->m->map.size = total;
    uint8_t *b8 = base;
    for (int i = 0; i < L->n_sh; i++) {
        void *p = mmap(b8 + sh[i].off, (size_t)sh[i].size, PROT_READ, MAP_PRIVATE | MAP_FIXED, sh[i].fd, 0);
        if (p == MAP_FAILED) return slm_errf(L->err, SLM_ERR_IO, "%s: cannot map: %s", sh[i].shown, strerror(errno));
        slm_st_rebase(&sh[i].st, p);
        munmap(sh[i].tmp, (size_t)sh[i].size);
        sh[i].tmp = NULL;
    }
    L->ex = b8 + extra_at;
    if (extra_mapped &&
        mmap(L->ex, (size_t)extra_mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
            MAP_FAILED)
        return slm_errf(L->err, SLM_ERR_IO, "%s: cannot map %llu bytes: %s", L->dir, (unsigned long long)extra_mapped,
                        strerror(errno));
    return SLM_OK;
}

/* m->tensors from the plan, converting into the anonymous area; then the
 * area becomes read-only. */
static slm_status fill_tensors(hf_load *L) {
    slm_model_file *m = L->m;
    uint8_t *ex = L->ex;
    int n_t = L->n_pend + (L->rope ? 1 : 0);
    m->tensors = slm_calloc(n_t ? (size_t)n_t : 1, sizeof *m->tensors);
    if (!m->tensors) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory for %d tensors", L->dir, n_t);
    for (int i = 0; i < L->n_pend; i++) {
        const pending *p = &L->pend[i];
        const slm_st_tensor *t = p->src;
        slm_tensor *o = &m->tensors[i];
        memcpy(o->name, p->name, sizeof o->name);
        o->type = t->type;
        o->n_dims = t->n_dims ? t->n_dims : 1;
        for (int d = 0; d < 4; d++) o->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) o->ne[d] = t->shape[t->n_dims - 1 - d];
        o->data = t->data;
        o->nbytes = t->end - t->begin;
        if (p->convert == 1) {
            float *f = (float *)(ex + p->extra_off);
            uint64_t n = o->nbytes / 2;
            const uint8_t *src = t->data;
            for (uint64_t k = 0; k < n; k++) {
                uint16_t h = (uint16_t)(src[2 * k] | src[2 * k + 1] << 8);
                f[k] = t->type == SLM_BF16 ? slm_bf16_to_f32(h) : slm_f16_to_f32(h);
            }
            o->type = SLM_F32;
            o->data = f;
            o->nbytes = n * 4;
        } else if (p->convert == 2) {
            memcpy(ex + p->extra_off, t->data, (size_t)o->nbytes);
            o->data = ex + p->extra_off;
        }
    }
    if (L->rope) {
        slm_tensor *o = &m->tensors[L->n_pend];
        snprintf(o->name, sizeof o->name, "rope_freqs.weight");
        o->type = SLM_F32;
        o->n_dims = 1;
        o->ne[0] = m->cfg.head_dim / 2;
        o->ne[1] = o->ne[2] = o->ne[3] = 1;
        o->nbytes = (uint64_t)o->ne[0] * 4;
        memcpy(ex + L->rope_off, L->rope, (size_t)o->nbytes);
        o->data = ex + L->rope_off;
    }
    m->n_tensors = n_t;
    const long page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    const uint64_t pg = (uint64_t)page, extra_mapped = (L->extra + pg - 1) / pg * pg;
    if (extra_mapped) mprotect(ex, (size_t)extra_mapped, PROT_READ);
    return SLM_OK;
}

slm_status slm_hf_model_load(slm_model_file *m, slm_err *err) {
    /* "dir/" -> "dir" so that messages name the folder */
    size_t pl = strlen(m->path);
    while (pl > 1 && m->path[pl - 1] == '/') m->path[--pl] = 0;
    hf_load load, *L = &load;
    memset(L, 0, sizeof *L);
    L->m = m;
    L->dir = slm_basename(m->path);
    L->err = err;
    slm_status s;
    char shown[320], *cfg_json = NULL;
    size_t cfg_len = 0;

    snprintf(shown, sizeof shown, "%s/config.json", L->dir);
    if ((s = folder_name(m, "config.json", L->path, sizeof L->path, err))) goto out;
    if ((s = read_small(L->path, shown, 1, &cfg_json, &cfg_len, err))) goto out;
    if ((s = slm_hf_parse_config(&m->cfg, &L->rope, cfg_json, cfg_len, shown, err))) goto out;
    if ((s = find_shards(L)) || (s = open_shards(L)) || (s = plan_tensors(L)) || (s = map_range(L)) ||
        (s = fill_tensors(L)))
        goto out;

    /* no lm_head: tied */
    if (!slm_model_tensor(m, "output.weight")) m->cfg.tied_embeddings = 1;
    /* Q/K/V biases on a llama/mistral checkpoint are used too */
    if (slm_model_tensor(m, "blk.0.attn_q.bias")) m->cfg.qkv_bias = 1;
    /* tokenizer.json beside, for the pipeline */
    if (folder_name(m, "tokenizer.json", L->path, sizeof L->path, NULL) == SLM_OK &&
        strlen(L->path) < sizeof m->tokenizer_json) {
        struct stat st;
        if (stat(L->path, &st) == 0 && S_ISREG(st.st_mode)) memcpy(m->tokenizer_json, L->path, strlen(L->path) + 1);
    }
    m->kind = SLM_MODEL_HF;

out:
    for (int i = 0; L->sh && i < L->n_sh; i++) {
        if (L->sh[i].tmp) munmap(L->sh[i].tmp, (size_t)L->sh[i].size);
        if (L->sh[i].fd >= 0) close(L->sh[i].fd);
        slm_st_free(&L->sh[i].st);
    }
    slm_xfree(L->sh);
    slm_xfree(L->pend);
    slm_xfree(L->rope);
    slm_xfree(L->idx_json);
    cJSON_Delete(L->index);
    slm_xfree(cfg_json);
    return s;
}

#endif
