/* Model files: open by content, the GGUF llama loader, and the validation
 * both loaders share (config ranges, required tensors, shapes, types). */
#include <math.h>
#include <stdio.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "format/model.h"

/* ---- open / close --------------------------------------------------------- */

slm_status slm_model_open(slm_model_file *m, const char *path, slm_err *err) {
    slm_status s;
    memset(m, 0, sizeof *m);
    if (!path) return slm_errf(err, SLM_ERR_ARG, "model: NULL path");
    if (strlen(path) >= sizeof m->path)
        return slm_errf(err, SLM_ERR_ARG, "%s: path too long (%zu bytes, at most %zu)", slm_basename(path),
                        strlen(path), sizeof m->path - 1);
    memcpy(m->path, path, strlen(path) + 1);
    struct stat st; /* hf: a folder is a Hugging Face model (config.json + safetensors) */
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) s = slm_hf_model_load(m, err);
    else if ((s = slm_map_file(&m->map, path, err))) return s;
    else if (m->map.size >= 4 && memcmp(m->map.data, "GGUF", 4) == 0) s = slm_gguf_model_load(m, err);
    else s = slm_llama2c_load(m, err);
    if (s) goto fail_close_model;
    if ((s = slm_model_validate(m, err))) goto fail_close_model;
    return SLM_OK;

fail_close_model:
    slm_model_close(m);
    return s;
}

void slm_model_close(slm_model_file *m) {
    if (!m) return;
    slm_gguf_close(m->gguf);
    m->gguf = NULL;
    slm_xfree(m->tensors);
    m->tensors = NULL;
    m->n_tensors = 0;
    slm_unmap(&m->map);
}

const slm_tensor *slm_model_tensor(const slm_model_file *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

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

/* ---- validation ----------------------------------------------------------- */

/* ---- the compiler's weight layout ------------------------------------------- */

/* Matrices a matmul reads: every 2-D tensor but an untied embedding table
 * (only read by row, where the layout gains nothing). */
static uint32_t repack_type_of(const slm_model_file *m, const slm_tensor *t) {
    if (t->n_dims != 2) return 0;
    if (!m->cfg.tied_embeddings && !strcmp(t->name, "token_embd.weight")) return 0;
    return slm_repack_type(t->type, t->ne[0], t->ne[1]);
}

/* Threads share the tensors to repack (a tensor at a time, claimed with a
 * counter): the work is page faults (private copies) and byte shuffling. */
typedef struct repack_job {
    slm_model_file *m;
    _Atomic int next;
    _Atomic int failed; /* a temporary buffer could not be allocated */
} repack_job;

static void *repack_worker(void *arg) {
    repack_job *j = arg;
    for (;;) {
        const int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->m->n_tensors) return NULL;
        slm_tensor *t = &j->m->tensors[i];
        const uint32_t rt = repack_type_of(j->m, t);
        if (!rt) continue;
        void *tmp = slm_malloc((size_t)slm_row_bytes(t->type, (uint64_t)t->ne[0]) * 16);
        if (!tmp) {
            atomic_store(&j->failed, 1);
            return NULL;
        }
        slm_repack_r16(t->type, (void *)(uintptr_t)t->data, t->ne[0], t->ne[1], tmp);
        slm_xfree(tmp);
        t->type = rt;
    }
}

static int by_data(const void *a, const void *b) {
    const slm_tensor *x = *(const slm_tensor *const *)a, *y = *(const slm_tensor *const *)b;
    return (const uint8_t *)x->data < (const uint8_t *)y->data ? -1 : (const uint8_t *)x->data > (const uint8_t *)y->data;
}

slm_status slm_model_repack(slm_model_file *m, slm_err *err) {
    if (!m->map.data) return SLM_OK; /* e.g. a Hugging Face folder: float weights, nothing to repack */
    /* Repacking rewrites bytes in place, a tensor per thread: tensors that
     * share bytes (a malformed file) would corrupt each other, so refuse them. */
    {
        const slm_tensor **v = slm_malloc(sizeof *v * (size_t)(m->n_tensors + 1));
        if (!v) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", slm_basename(m->path));
        int n = 0;
        for (int i = 0; i < m->n_tensors; i++)
            if (repack_type_of(m, &m->tensors[i])) v[n++] = &m->tensors[i];
        qsort(v, (size_t)n, sizeof *v, by_data);
        for (int i = 1; i < n; i++)
            if ((const uint8_t *)v[i - 1]->data + v[i - 1]->nbytes > (const uint8_t *)v[i]->data) {
                slm_status s = slm_errf(err, SLM_ERR_FORMAT, "%s: tensors '%s' and '%s' share data bytes",
                                        slm_basename(m->path), v[i - 1]->name, v[i]->name);
                slm_xfree(v);
                return s;
            }
        slm_xfree(v);
    }
    const uint8_t *lo = m->map.data, *hi = lo + m->map.size;
    const uint8_t *first = hi, *last = lo; /* the span of the tensors to repack */
    for (int i = 0; i < m->n_tensors; i++) {
        const slm_tensor *t = &m->tensors[i];
        if (!repack_type_of(m, t)) continue;
        const uint8_t *d = t->data;
        if (d < lo || d > hi || t->nbytes > (uint64_t)(hi - d))
            return slm_errf(err, SLM_ERR_INTERNAL, "%s: tensor '%s' outside the mapping", slm_basename(m->path), t->name);
        if (d < first) first = d;
        if (d + t->nbytes > last) last = d + t->nbytes;
    }
    if (first >= last) return SLM_OK;
    if (mprotect(m->map.data, (size_t)m->map.size, PROT_READ | PROT_WRITE) != 0)
        return slm_errf(err, SLM_ERR_IO, "%s: cannot make the mapping writable to repack weights: %s",
                        slm_basename(m->path), strerror(errno));
    /* Private copies of the pages up front, in one call: a page first read
     * (mapped from the file) and then written is copied again and its old
     * mapping shot down on every CPU of the process, which measured slower
     * than repacking itself. (Best effort: Linux 5.14+.) */
#ifdef MADV_POPULATE_WRITE
    {
        const long pg = sysconf(_SC_PAGESIZE);
        const uintptr_t a = (uintptr_t)first & ~(uintptr_t)(pg - 1);
        madvise((void *)a, (size_t)((uintptr_t)last - a), MADV_POPULATE_WRITE);
    }
#endif
    repack_job job = {.m = m};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = ncpu > 1 ? (int)(ncpu > 8 ? 8 : ncpu) : 1;
    pthread_t th[8];
    int started = 0;
    for (int i = 1; i < nt; i++)
        if (pthread_create(&th[started], NULL, repack_worker, &job) == 0) started++;
    repack_worker(&job);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    mprotect(m->map.data, (size_t)m->map.size, PROT_READ);
    if (atomic_load(&job.failed))
        return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory repacking the weights", slm_basename(m->path));
    return SLM_OK;
}

int slm_matrix_type_supported(uint32_t t) {
    switch (t) {
    case SLM_F32: case SLM_F16: case SLM_BF16: case SLM_Q8_0: case SLM_Q4_0: case SLM_Q4_1:
    case SLM_Q4_K: case SLM_Q5_K: case SLM_Q6_K: case SLM_Q4_0_R16: case SLM_Q6_K_R16:
    case SLM_Q8_0_R16: case SLM_F16_R16:
        return 1;
    default:
        return 0;
    }
}

static int fmt_shape(char *buf, size_t cap, const int64_t *ne, uint32_t n_dims) {
    int o = snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < n_dims && o > 0 && (size_t)o < cap; d++)
        o += snprintf(buf + o, cap - (size_t)o, d ? ", %lld" : "%lld", (long long)ne[d]);
    if (o > 0 && (size_t)o < cap) o += snprintf(buf + o, cap - (size_t)o, "]");
    return o;
}

/* One required tensor: present, expected shape, a supported type, and its
 * bytes inside the mapping when there is one. */
static slm_status check_tensor(const slm_model_file *m, const char *file, const char *name, int64_t ne0,
                               int64_t ne1, int is_vector, slm_err *err) {
    const slm_tensor *t = slm_model_tensor(m, name);
    if (!t) return slm_errf(err, SLM_ERR_FORMAT, "%s: missing tensor '%s'", file, name);
    int64_t want[4] = {ne0, ne1, 1, 1};
    uint32_t want_dims = is_vector ? 1 : 2;
    int ok = t->n_dims >= 1 && t->n_dims <= 4;
    for (uint32_t d = 0; ok && d < 4; d++) ok = (d < t->n_dims ? t->ne[d] : 1) == want[d];
    if (!ok) {
        char have[96], need[96];
        fmt_shape(have, sizeof have, t->ne, t->n_dims >= 1 && t->n_dims <= 4 ? t->n_dims : 4);
        fmt_shape(need, sizeof need, want, want_dims);
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': shape %s but the config needs %s", file, name, have,
                        need);
    }
    if (is_vector && t->type != SLM_F32)
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': type %s is not supported for norm weights (f32 only)",
                        file, name, slm_dtype_name(t->type));
    if (!is_vector && !slm_matrix_type_supported(t->type))
        return slm_errf(err, SLM_ERR_UNSUPPORTED,
                        "%s: tensor '%s': type %s is not supported for matrices (supported: %s)", file, name,
                        slm_dtype_name(t->type), SLM_MATRIX_TYPES);
    uint64_t rows = (uint64_t)ne1, nbytes;
    if (!slm_mul_ok(slm_row_bytes(t->type, (uint64_t)ne0), rows, &nbytes) || nbytes == 0 || nbytes != t->nbytes)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': %llu bytes but a %s tensor of this shape needs %llu",
                        file, name, (unsigned long long)t->nbytes, slm_dtype_name(t->type),
                        (unsigned long long)nbytes);
    if (!t->data) return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': no data", file, name);
    if (m->map.data) {
        const uint8_t *b = m->map.data, *p = t->data;
        if (p < b || (uint64_t)(p - b) > m->map.size || t->nbytes > m->map.size - (uint64_t)(p - b))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor '%s': data outside the file", file, name);
    }
    return SLM_OK;
}

slm_status slm_model_validate(slm_model_file *m, slm_err *err) {
    const char *file = slm_basename(m->path);
    const slm_model_config *c = &m->cfg;
    slm_status s;

    if (strcmp(c->arch, "llama") && strcmp(c->arch, "mistral") && strcmp(c->arch, "qwen2"))
        return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: architecture '%.31s' is not supported (supported: %s)", file,
                        c->arch, SLM_SUPPORTED_ARCHS);
#define RANGE(field, lo, hi)                                                                               \
    if (c->field < (lo) || c->field > (hi))                                                                \
    return slm_errf(err, SLM_ERR_FORMAT, "%s: config " #field " = %d is out of range (%d..%d)", file, c->field, \
                    (int)(lo), (int)(hi))
    RANGE(dim, 1, 1 << 20);
    RANGE(hidden_dim, 1, 1 << 22);
    RANGE(n_layers, 1, 1 << 16);
    RANGE(n_heads, 1, 1 << 16);
    RANGE(n_kv_heads, 1, c->n_heads);
    RANGE(vocab_size, 1, 1 << 24);
    RANGE(context_len, 1, 1 << 24);
    RANGE(sliding_window, 0, 1 << 24);
#undef RANGE
    if (!(c->rope_scale >= 1.0f && c->rope_scale <= 1024.0f))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config rope_scale = %g is out of range (1..1024)", file,
                        (double)c->rope_scale);
    if (c->dim % c->n_heads)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config n_heads = %d does not divide dim = %d", file, c->n_heads,
                        c->dim);
    if (c->n_heads % c->n_kv_heads)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config n_kv_heads = %d does not divide n_heads = %d", file,
                        c->n_kv_heads, c->n_heads);
    if (c->head_dim != c->dim / c->n_heads || c->head_dim % 2)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config head_dim = %d (must be dim / n_heads = %d, and even)", file,
                        c->head_dim, c->dim / c->n_heads);
    if (!(c->rope_base > 0.0f) || !isfinite(c->rope_base))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config rope_base = %g (must be positive)", file, (double)c->rope_base);
    if (!(c->norm_eps > 0.0f) || !(c->norm_eps < 1.0f))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: config norm_eps = %g (must be in (0, 1))", file, (double)c->norm_eps);

    int64_t dim = c->dim, hid = c->hidden_dim, kv_dim = (int64_t)c->head_dim * c->n_kv_heads, voc = c->vocab_size;
    if ((s = check_tensor(m, file, "token_embd.weight", dim, voc, 0, err))) return s;
    for (int l = 0; l < c->n_layers; l++) {
        static const struct { const char *fmt; int ne0, ne1, vec; } k[] = {
            /* ne in units: 0 dim, 1 kv_dim, 2 hidden */
            {"blk.%d.attn_norm.weight", 0, -1, 1}, {"blk.%d.attn_q.weight", 0, 0, 0},
            {"blk.%d.attn_k.weight", 0, 1, 0},     {"blk.%d.attn_v.weight", 0, 1, 0},
            {"blk.%d.attn_output.weight", 0, 0, 0}, {"blk.%d.ffn_norm.weight", 0, -1, 1},
            {"blk.%d.ffn_gate.weight", 0, 2, 0},   {"blk.%d.ffn_down.weight", 2, 0, 0},
            {"blk.%d.ffn_up.weight", 0, 2, 0},
        };
        const int64_t unit[3] = {dim, kv_dim, hid};
        for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) {
            char name[64];
            snprintf(name, sizeof name, k[j].fmt, l);
            if ((s = check_tensor(m, file, name, unit[k[j].ne0], k[j].ne1 < 0 ? 1 : unit[k[j].ne1], k[j].vec, err)))
                return s;
        }
    }
    if (c->qkv_bias)
        for (int l = 0; l < c->n_layers; l++) {
            static const char *const bias[3] = {"blk.%d.attn_q.bias", "blk.%d.attn_k.bias", "blk.%d.attn_v.bias"};
            for (int j = 0; j < 3; j++) {
                char name[64];
                snprintf(name, sizeof name, bias[j], l);
                if ((s = check_tensor(m, file, name, j ? kv_dim : dim, 1, 1, err))) return s;
            }
        }
    if (c->rope_freqs && (s = check_tensor(m, file, "rope_freqs.weight", c->head_dim / 2, 1, 1, err))) return s;
    if (c->rope_freqs) {
        const float *f = slm_model_tensor(m, "rope_freqs.weight")->data;
        for (int i = 0; i < c->head_dim / 2; i++) {
            float v;
            memcpy(&v, f + i, sizeof v);
            if (!(v > 0.0f) || !isfinite(v))
                return slm_errf(err, SLM_ERR_FORMAT, "%s: tensor 'rope_freqs.weight': element %d = %g (must be positive)",
                                file, i, (double)v);
        }
    }
    if ((s = check_tensor(m, file, "output_norm.weight", dim, 1, 1, err))) return s;
    if (!c->tied_embeddings && (s = check_tensor(m, file, "output.weight", dim, voc, 0, err))) return s;
    return SLM_OK;
}
