/* The model from a GGUF file: hyperparameters from the metadata, tensors
 * from the tensor table (format/gguf.c parses and checks the file itself). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "format/model.h"

/* ---- GGUF ----------------------------------------------------------------- */

/* A required or optional integer key into *v, checked to fit 1..INT32_MAX
 * (range checks proper are slm_model_validate's). */
static slm_status get_int(const slm_gguf *g, const char *file, const char *key, int required, int *v,
                          slm_err *err) {
    int64_t i = slm_gguf_find(g, key), x;
    if (i < 0) {
        if (required) return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key '%s'", file, key);
        return SLM_OK;
    }
    if (!slm_gguf_get_i64(g, key, &x))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected an integer, found %s", file, key,
                        slm_gguf_type_name(slm_gguf_kv_type(g, i)));
    if (x <= 0 || x > INT32_MAX)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %lld is out of range (1..%d)", file, key, (long long)x,
                        INT32_MAX);
    *v = (int)x;
    return SLM_OK;
}

static slm_status get_float(const slm_gguf *g, const char *file, const char *key, float *v, slm_err *err) {
    int64_t i = slm_gguf_find(g, key);
    if (i < 0) return SLM_OK; /* keep the default */
    if (!slm_gguf_get_f32(g, key, v))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': expected a float, found %s", file, key,
                        slm_gguf_type_name(slm_gguf_kv_type(g, i)));
    return SLM_OK;
}

slm_status slm_gguf_model_load(slm_model_file *m, slm_err *err) {
    const char *file = slm_basename(m->path);
    slm_model_config *c = &m->cfg;
    slm_status s;

    if ((s = slm_gguf_open(&m->gguf, m->map.data, m->map.size, file, err))) return s;
    const slm_gguf *g = m->gguf;

    slm_gguf_str arch;
    if (slm_gguf_find(g, "general.architecture") < 0)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: missing required key 'general.architecture'", file);
    if (!slm_gguf_get_str(g, "general.architecture", &arch))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'general.architecture': expected a string, found %s", file,
                        slm_gguf_type_name(slm_gguf_kv_type(g, slm_gguf_find(g, "general.architecture"))));
    static const char *const archs[] = {"llama", "mistral", "qwen2"};
    const char *A = NULL;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (slm_gguf_str_eq(arch, archs[i])) A = archs[i];
    if (!A) {
        char a[40];
        size_t n = 0;
        for (; n < arch.len && n < sizeof a - 1; n++) {
            unsigned char ch = (unsigned char)arch.s[n];
            a[n] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
        }
        a[n] = 0;
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: architecture '%s%s' is not supported (supported: %s)", file,
                        a, arch.len > n ? "..." : "", SLM_SUPPORTED_ARCHS);
    }

    memset(c, 0, sizeof *c);
    snprintf(c->arch, sizeof c->arch, "%s", A);
    c->rope_base = 10000.0f;
    c->norm_eps = 1e-5f;
    c->rope_scale = 1.0f;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, A), key)
    if ((s = get_int(g, file, KEY("embedding_length"), 1, &c->dim, err))) return s;
    if ((s = get_int(g, file, KEY("feed_forward_length"), 1, &c->hidden_dim, err))) return s;
    if ((s = get_int(g, file, KEY("block_count"), 1, &c->n_layers, err))) return s;
    if ((s = get_int(g, file, KEY("attention.head_count"), 1, &c->n_heads, err))) return s;
    c->n_kv_heads = c->n_heads;
    if ((s = get_int(g, file, KEY("attention.head_count_kv"), 0, &c->n_kv_heads, err))) return s;
    if ((s = get_int(g, file, KEY("context_length"), 1, &c->context_len, err))) return s;
    if ((s = get_float(g, file, KEY("rope.freq_base"), &c->rope_base, err))) return s;
    if ((s = get_float(g, file, KEY("attention.layer_norm_rms_epsilon"), &c->norm_eps, err))) return s;
    if ((s = get_int(g, file, KEY("attention.sliding_window"), 0, &c->sliding_window, err))) return s;
    slm_gguf_str stype;
    if (slm_gguf_get_str(g, KEY("rope.scaling.type"), &stype) && slm_gguf_str_eq(stype, "linear")) {
        float f = 1.0f;
        if ((s = get_float(g, file, KEY("rope.scaling.factor"), &f, err))) return s;
        if (!(f >= 1.0f && f <= 1024.0f))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key '%s': %g is out of range (1..1024)", file, key, (double)f);
        c->rope_scale = f;
    }
    c->head_dim = c->n_heads ? c->dim / c->n_heads : 0;
    c->rope_neox = !strcmp(A, "qwen2");
    c->qkv_bias = !strcmp(A, "qwen2");
    c->rope_freqs = slm_gguf_find_tensor(g, "rope_freqs.weight") != NULL;

    /* Head sizes other than dim / n_heads, and partial RoPE, are not ours. */
    int key_len = 0, rope_dims = 0;
    if ((s = get_int(g, file, KEY("attention.key_length"), 0, &key_len, err))) return s;
    if (key_len && (c->dim % c->n_heads || key_len != c->head_dim))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = %d: only dim / n_heads = %d/%d is supported",
                        file, key, key_len, c->dim, c->n_heads);
    if ((s = get_int(g, file, KEY("rope.dimension_count"), 0, &rope_dims, err))) return s;
    if (rope_dims && (c->dim % c->n_heads || rope_dims != c->head_dim))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: key '%s' = %d: partial RoPE is not supported (head size %d)",
                        file, key, rope_dims, c->head_dim);

    /* The vocabulary size: the key, else the token list, else token_embd. */
    uint64_t n_tok = 0;
    slm_gguf_type et;
    const slm_gguf_tensor *emb = slm_gguf_find_tensor(g, "token_embd.weight");
    if (slm_gguf_find(g, KEY("vocab_size")) >= 0) {
        if ((s = get_int(g, file, key, 1, &c->vocab_size, err))) return s;
    } else if (slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok, NULL) && et == SLM_GGUF_STRING) {
        if (n_tok == 0 || n_tok > INT32_MAX)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: key 'tokenizer.ggml.tokens': %llu tokens", file,
                            (unsigned long long)n_tok);
        c->vocab_size = (int)n_tok;
    } else if (emb && emb->n_dims >= 2 && emb->ne[1] <= INT32_MAX) {
        c->vocab_size = (int)emb->ne[1];
    } else {
        return slm_errf(err, SLM_ERR_FORMAT,
                        "%s: vocabulary size unknown (no 'llama.vocab_size', 'tokenizer.ggml.tokens' or 'token_embd.weight')",
                        file);
    }
    c->tied_embeddings = slm_gguf_find_tensor(g, "output.weight") == NULL;

    /* The tensor table: every tensor of the file, by its GGUF name. */
    uint64_t nt = slm_gguf_n_tensors(g);
    if (nt > INT32_MAX) return slm_errf(err, SLM_ERR_FORMAT, "%s: n_tensors: %llu tensors", file, (unsigned long long)nt);
    m->tensors = slm_calloc(nt ? (size_t)nt : 1, sizeof *m->tensors);
    if (!m->tensors) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for %llu tensors", file, (unsigned long long)nt);
    for (uint64_t i = 0; i < nt; i++) {
        const slm_gguf_tensor *gt = slm_gguf_tensor_at(g, i);
        slm_tensor *t = &m->tensors[i];
        memcpy(t->name, gt->name.s, (size_t)gt->name.len); /* the reader keeps names < 64 bytes */
        t->name[gt->name.len] = 0;
        t->type = gt->type;
        t->n_dims = gt->n_dims;
        memcpy(t->ne, gt->ne, sizeof t->ne);
        t->data = gt->data;
        t->nbytes = gt->nbytes;
    }
    m->n_tensors = (int)nt;
    m->kind = SLM_MODEL_GGUF;
    return SLM_OK;
#undef KEY
}

