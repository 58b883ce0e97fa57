/* Weight quantization at load (slm_options.weight_type, compile
 * --weight-type): a model's F32 / F16 / BF16 matrices rewritten as one of
 * llama-quantize's file types (Q8_0, Q4_0, Q5_0, Q4_K_S/M, Q5_K_S/M, Q6_K),
 * the types chosen as llama.cpp's llama-quantize chooses them for that file
 * type (the rules below: llama-quant.cpp's llama_tensor_get_type), the K-quants with
 * fitted scales (slm_quantize_row_fit). The result lives in a new anonymous
 * mapping that becomes m->map (the compiler addresses weights within it);
 * the source mapping stays as m->src_map, as the GGUF metadata points into
 * it, and is dropped with the model. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "format/model.h"

/* ---- the types (llama-quant.cpp's llama_tensor_get_type for these file types) ---- */

/* A file type's matrix type, 0 for none. */
static uint32_t base_type(int wt) {
    switch (wt) {
    case SLM_WEIGHTS_Q8_0: return SLM_Q8_0;
    case SLM_WEIGHTS_Q4_0: return SLM_Q4_0;
    case SLM_WEIGHTS_Q5_0: return SLM_Q5_0;
    case SLM_WEIGHTS_Q4_K_M: case SLM_WEIGHTS_Q4_K_S: return SLM_Q4_K;
    case SLM_WEIGHTS_Q5_K_M: case SLM_WEIGHTS_Q5_K_S: return SLM_Q5_K;
    case SLM_WEIGHTS_Q6_K: return SLM_Q6_K;
    case SLM_WEIGHTS_IQ4_NL: return SLM_IQ4_NL;
    case SLM_WEIGHTS_IQ4_XS: return SLM_IQ4_XS;
    default: return 0;
    }
}

/* Type t for rows of `width`: a type whose 256-blocks do not fit falls
 * back to a 32-block type (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
 * IQ4_XS -> IQ4_NL), and what still does not fit to F16 (llama-quantize's
 * last fallback for the K-quants; it refuses the 32-block file types there). */
static uint32_t fit(uint32_t t, int64_t width) {
    if (width % SLM_QK_K && (t == SLM_Q4_K || t == SLM_Q5_K || t == SLM_Q6_K || t == SLM_IQ4_XS))
        t = t == SLM_Q4_K ? SLM_Q5_0 : t == SLM_Q5_K ? SLM_Q5_1 : t == SLM_Q6_K ? SLM_Q8_0 : SLM_IQ4_NL;
    const slm_dtype_info *info = slm_dtype_get(t);
    return info && width % info->block == 0 ? t : SLM_F16;
}

uint32_t slm_quant_output_type(int wt, int64_t width) {
    const uint32_t b = base_type(wt);
    if (!b) return 0;
    /* Q8_0 when the file type's own blocks do not fit the rows or it is Q8_0, else Q6_K */
    return fit(width % slm_dtype_get(b)->block || b == SLM_Q8_0 ? SLM_Q8_0 : SLM_Q6_K, width);
}

/* The layers whose attn_v / ffn_down the *_M file types keep in Q6_K: the
 * first and last eighth, and every third between. */
static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

uint32_t slm_quant_layer_type(int wt, int role, int i, int n, int64_t width, unsigned model) {
    uint32_t t = base_type(wt);
    if (!t) return 0;
    const int mix_m = wt == SLM_WEIGHTS_Q4_K_M || wt == SLM_WEIGHTS_Q5_K_M, q4ks = wt == SLM_WEIGHTS_Q4_K_S;
    const int iq4 = wt == SLM_WEIGHTS_IQ4_NL || wt == SLM_WEIGHTS_IQ4_XS;
    const int e8 = (model & SLM_QMODEL_8_EXPERTS) != 0;
    switch (role) {
    case SLM_QROLE_ATTN_V: /* attn_v, attn_qkv: i of n such tensors */
        if (iq4 && (model & SLM_QMODEL_GQA4)) t = SLM_Q5_K;
        else if (mix_m && use_more_bits(i, n)) t = SLM_Q6_K;
        else if (q4ks && i < 4) t = SLM_Q5_K;
        if ((model & SLM_QMODEL_70B) && t == SLM_Q4_K) t = SLM_Q5_K; /* a V an eighth of Q's size: cheap */
        if (e8) t = SLM_Q8_0;
        break;
    case SLM_QROLE_ATTN_K:
        if (e8) t = SLM_Q8_0;
        break;
    case SLM_QROLE_ATTN_OUTPUT:
        if (e8 && (wt == SLM_WEIGHTS_Q4_K_M || q4ks || iq4)) t = SLM_Q5_K;
        break;
    case SLM_QROLE_FFN_DOWN: /* ffn_down, its experts and shared expert: layer i of n */
        if (iq4 && i < n / 8) t = SLM_Q5_K; /* (llama-quantize: without an importance matrix) */
        else if (mix_m && use_more_bits(i, n)) t = SLM_Q6_K;
        else if (q4ks && i < n / 8) t = SLM_Q5_K;
        break;
    default: break;
    }
    return fit(t, width);
}

unsigned slm_quant_model_flags(const char *arch, int n_layers, int n_heads, int n_kv_heads, int n_experts) {
    unsigned f = n_experts == 8 ? SLM_QMODEL_8_EXPERTS : 0;
    if (n_kv_heads > 0 && n_heads / n_kv_heads >= 4) f |= SLM_QMODEL_GQA4; /* llama.cpp's n_gqa() >= 4 */
    /* llama.cpp's LLM_TYPE_70B: llama's 80 layers with GQA (not 8 experts), qwen2's 80 layers */
    if (n_layers == 80 && ((!strcmp(arch, "llama") && n_heads != n_kv_heads && n_experts != 8) || !strcmp(arch, "qwen2")))
        f |= SLM_QMODEL_70B;
    return f;
}

static const char *const k_wt_names[SLM_WEIGHTS_COUNT] = {
    [SLM_WEIGHTS_AS_IS] = "as is",   [SLM_WEIGHTS_Q8_0] = "q8_0",     [SLM_WEIGHTS_Q4_0] = "q4_0",
    [SLM_WEIGHTS_Q4_K_M] = "q4_k_m", [SLM_WEIGHTS_Q5_K_M] = "q5_k_m", [SLM_WEIGHTS_Q6_K] = "q6_k",
    [SLM_WEIGHTS_Q4_K_S] = "q4_k_s", [SLM_WEIGHTS_Q5_K_S] = "q5_k_s", [SLM_WEIGHTS_Q5_0] = "q5_0",
    [SLM_WEIGHTS_IQ4_NL] = "iq4_nl", [SLM_WEIGHTS_IQ4_XS] = "iq4_xs",
};

/* Either case: llama-quantize lists its types as Q4_K_M. */
int slm_weight_type_parse(const char *name) {
    for (int k = SLM_WEIGHTS_AS_IS + 1; name && k < SLM_WEIGHTS_COUNT; k++)
        if (!strcasecmp(name, k_wt_names[k])) return k;
    return -1;
}

const char *slm_weight_type_name(int wt) { return wt > SLM_WEIGHTS_AS_IS && wt < SLM_WEIGHTS_COUNT ? k_wt_names[wt] : "as is"; }

/* The matrices a file type quantizes (blk.N.<role>.weight): the attention
 * and feed-forward projections, shared experts included, qwen35's Gated
 * DeltaNet projections and gemma4's per-layer input gate and projection,
 * with the role llama-quant.cpp's rules give them; the experts' as the
 * loaders name them (blk.N.ffn_{gate,up,down}.E.weight, from ffn_*_exps).
 * Other tensors (norms, biases, position and type embeddings, routers, the
 * conv taps, per_layer_model_proj) keep their type, as llama-quantize
 * leaves them. */
static const struct {
    const char *name;
    int role;
} k_roles[] = {
    {"attn_q", SLM_QROLE_OTHER},          {"attn_k", SLM_QROLE_ATTN_K},       {"attn_v", SLM_QROLE_ATTN_V},
    {"attn_output", SLM_QROLE_ATTN_OUTPUT}, {"attn_qkv", SLM_QROLE_ATTN_V},   {"ffn_gate", SLM_QROLE_OTHER},
    {"ffn_up", SLM_QROLE_OTHER},          {"ffn_down", SLM_QROLE_FFN_DOWN},   {"ffn_gate_exps", SLM_QROLE_OTHER},
    {"ffn_up_exps", SLM_QROLE_OTHER},     {"ffn_down_exps", SLM_QROLE_FFN_DOWN}, {"ffn_gate_shexp", SLM_QROLE_OTHER},
    {"ffn_up_shexp", SLM_QROLE_OTHER},    {"ffn_down_shexp", SLM_QROLE_FFN_DOWN}, {"attn_gate", SLM_QROLE_OTHER},
    {"ssm_alpha", SLM_QROLE_OTHER},       {"ssm_beta", SLM_QROLE_OTHER},      {"ssm_out", SLM_QROLE_OTHER},
    {"inp_gate", SLM_QROLE_OTHER},        {"proj", SLM_QROLE_OTHER},
};

/* The role of blk.N.<role>.weight (N in *l), else -1. qkv_fused: attn_q,
 * attn_k and attn_v are row ranges of one attn_qkv (the loaders split it),
 * which takes attn_v's rules whole. */
static int role_of(const char *name, int qkv_fused, int *l) {
    int at = 0, e = -1, end = 0;
    char kind[8];
    *l = -1;
    if (sscanf(name, "blk.%d.%n", l, &at) != 1 || at <= 0 || *l < 0) return -1;
    const char *rest = name + at;
    if (sscanf(rest, "ffn_%7[a-z].%d.weight%n", kind, &e, &end) == 2 && end > 0 && !rest[end] && e >= 0)
        return !strcmp(kind, "down") ? SLM_QROLE_FFN_DOWN : !strcmp(kind, "gate") || !strcmp(kind, "up") ? SLM_QROLE_OTHER : -1;
    if (qkv_fused && (!strcmp(rest, "attn_q.weight") || !strcmp(rest, "attn_k.weight") || !strcmp(rest, "attn_v.weight")))
        return SLM_QROLE_ATTN_V;
    const size_t rl = strlen(rest);
    if (rl < 8 || strcmp(rest + rl - 7, ".weight")) return -1;
    for (size_t i = 0; i < sizeof k_roles / sizeof k_roles[0]; i++)
        if (strlen(k_roles[i].name) == rl - 7 && !strncmp(rest, k_roles[i].name, rl - 7)) return k_roles[i].role;
    return -1;
}

/* The type tensor t becomes under file type wt, or 0 when it stays. av /
 * n_av: the place of this layer's attn_v (or attn_qkv) among the model's
 * attn_v and attn_qkv tensors, and their count (hybrid models have some of
 * each, gemma4 none on some layers). */
static uint32_t target_type(const slm_model_file *m, const slm_tensor *t, int wt, int av, int n_av) {
    const slm_model_config *c = &m->cfg;
    const int64_t width = t->ne[0];
    uint32_t out = 0;
    if (t->n_dims < 2) return 0;
    if (!strcmp(t->name, "output.weight")) out = slm_quant_output_type(wt, width);
    else if (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "per_layer_token_embd.weight"))
        /* the output's type when the file has no output.weight (llama-quant.cpp's "tied", encoders too) */
        out = !slm_model_tensor(m, "output.weight") ? slm_quant_output_type(wt, width)
                                                    : slm_quant_layer_type(wt, SLM_QROLE_OTHER, 0, 1, width, 0);
    else {
        int l;
        const int role = role_of(t->name, m->qkv_fused, &l);
        if (role < 0) return 0;
        const unsigned fl = slm_quant_model_flags(c->arch, c->n_layers, c->n_heads, c->n_kv_heads, c->n_experts);
        out = role == SLM_QROLE_ATTN_V ? slm_quant_layer_type(wt, role, av, n_av, width, fl)
                                       : slm_quant_layer_type(wt, role, l, c->n_layers + c->nextn_layers, width, fl);
    }
    /* F16 from F16 stays; BF16 rows no block fits become F16, as llama-quantize's fallback writes them */
    return out == t->type ? 0 : out;
}

/* The layer of a blk.N.attn_v.weight or blk.N.attn_qkv.weight (as
 * llama-quantize counts them; a split attn_qkv counts once, as its attn_v),
 * else -1. */
static int attn_v_layer(const slm_tensor *t) {
    int l, at = 0;
    if (sscanf(t->name, "blk.%d.%n", &l, &at) != 1 || at <= 0 || l < 0) return -1;
    return !strcmp(t->name + at, "attn_v.weight") || !strcmp(t->name + at, "attn_qkv.weight") ? l : -1;
}

/* ---- the work ------------------------------------------------------------------ */

enum { QROWS = 16 }; /* rows per claimed piece */

typedef struct qjob {
    slm_model_file *m;
    const uint32_t *to;         /* [n_tensors] target type, 0: copied */
    const uint8_t *const *src;  /* [n_tensors] source bytes */
    int64_t *piece0;            /* [n_tensors + 1] first piece of each tensor */
    _Atomic int64_t next;       /* pieces claimed */
    _Atomic int64_t done;       /* pieces finished */
    _Atomic int failed;         /* out of memory for a row buffer */
    int64_t width_max;
    int progress, n_q, wt;      /* the calling thread's progress line */
    double said;                /* when it last wrote */
} qjob;

static double quant_clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t rows_of(const slm_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

static void *qwork(qjob *j, int caller) {
    float *row = slm_malloc((size_t)j->width_max * sizeof(float));
    if (!row) atomic_store(&j->failed, 1);
    const int64_t total = j->piece0[j->m->n_tensors];
    for (;;) {
        const int64_t p = atomic_fetch_add(&j->next, 1);
        if (p >= total || !row) break;
        int lo = 0, hi = j->m->n_tensors; /* the tensor of piece p: piece0[i] <= p < piece0[i + 1] */
        while (hi - lo > 1) {
            const int mid = lo + (hi - lo) / 2;
            if (j->piece0[mid] <= p) lo = mid;
            else hi = mid;
        }
        const int i = lo;
        slm_tensor *t = &j->m->tensors[i];
        const int64_t w = t->ne[0], r0 = (p - j->piece0[i]) * QROWS, n = rows_of(t);
        const uint64_t sb = slm_row_bytes(t->type, (uint64_t)w), db = slm_row_bytes(j->to[i], (uint64_t)w);
        for (int64_t r = r0; r < r0 + QROWS && r < n; r++) {
            slm_dequantize_row(t->type, j->src[i] + (uint64_t)r * sb, row, w);
            slm_quantize_row_fit(j->to[i], row, (uint8_t *)(uintptr_t)t->data + (uint64_t)r * db, w);
        }
        const int64_t d = atomic_fetch_add(&j->done, 1) + 1;
        if (caller && j->progress > 1 && quant_clock_s() - j->said > 0.25) {
            j->said = quant_clock_s();
            fprintf(stderr, "\rquantize: %s, %d matrices: %3d%%", slm_weight_type_name(j->wt), j->n_q, (int)(100 * d / total));
        }
    }
    slm_xfree(row);
    return NULL;
}

static void *qworker(void *arg) { return qwork(arg, 0); }

static int int_cmp(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

static int is_float_type(uint32_t t) { return t == SLM_F32 || t == SLM_F16 || t == SLM_BF16; }

slm_status slm_model_quantize(slm_model_file *m, int wt, int n_threads, int progress, slm_err *err) {
    const char *file = slm_basename(m->path);
    if (wt == SLM_WEIGHTS_AS_IS) return SLM_OK;
    if (wt < SLM_WEIGHTS_AS_IS || wt >= SLM_WEIGHTS_COUNT)
        return slm_errf(err, SLM_ERR_ARG, "weight_type %d: not an slm_weight_type (%s)", wt, SLM_WEIGHT_TYPE_NAMES);
    const int n = m->n_tensors;
    uint32_t *to = slm_calloc((size_t)n + 1, sizeof *to);
    const uint8_t **src = slm_calloc((size_t)n + 1, sizeof *src);
    int64_t *piece0 = slm_calloc((size_t)n + 1, sizeof *piece0);
    uint64_t *off = slm_calloc((size_t)n + 1, sizeof *off);
    int *lv = slm_calloc((size_t)n + 1, sizeof *lv);
    slm_status s = SLM_OK;
    if (!to || !src || !piece0 || !off || !lv) {
        s = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", file);
        goto done;
    }
    /* the attn_v tensors' layers, sorted: a layer's attn_v is the count below it among them (llama-quantize
     * walks a converted file in layer order; a folder's table is in its own order) */
    int n_av = 0, n_q = 0;
    for (int i = 0; i < n; i++)
        if ((lv[n_av] = attn_v_layer(&m->tensors[i])) >= 0) n_av++;
    qsort(lv, (size_t)n_av, sizeof *lv, int_cmp);
    uint64_t total = 0, before = 0, after = 0;
    for (int i = 0; i < n; i++) {
        const slm_tensor *t = &m->tensors[i];
        int l = -1, lo = 0, hi = n_av;
        if (sscanf(t->name, "blk.%d.", &l) != 1) l = -1;
        while (lo < hi) { /* the first at or above l */
            const int mid = lo + (hi - lo) / 2;
            if (lv[mid] < l) lo = mid + 1;
            else hi = mid;
        }
        to[i] = target_type(m, t, wt, lo, n_av);
        if (to[i] && !is_float_type(t->type)) {
            /* a quantized matrix quantized again loses twice: refuse, as llama-quantize does unless told */
            s = slm_errf(err, SLM_ERR_ARG, "--weight-type %s: %s is already quantized (tensor '%s' is %s); give its "
                         "F32, F16 or BF16 source", slm_weight_type_name(wt), file, t->name, slm_dtype_name(t->type));
            goto done;
        }
        const uint64_t nb = to[i] ? slm_row_bytes(to[i], (uint64_t)t->ne[0]) * (uint64_t)rows_of(t) : t->nbytes;
        off[i] = total;
        total += (nb + 63) & ~(uint64_t)63;
        before += t->nbytes;
        after += nb;
        n_q += to[i] != 0;
        piece0[i + 1] = piece0[i] + (to[i] ? (rows_of(t) + QROWS - 1) / QROWS : 0);
    }
    if (!n_q) {
        s = slm_errf(err, SLM_ERR_ARG, "--weight-type %s: %s has no F32, F16 or BF16 matrix that type quantizes",
                     slm_weight_type_name(wt), file);
        goto done;
    }
    void *base = mmap(NULL, (size_t)(total ? total : 64), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        s = slm_errf(err, SLM_ERR_NOMEM, "%s: cannot map %llu bytes for the quantized weights", file,
                     (unsigned long long)total);
        goto done;
    }
    qjob j = {.m = m, .to = to, .src = src, .piece0 = piece0};
    for (int i = 0; i < n; i++) {
        slm_tensor *t = &m->tensors[i];
        src[i] = t->data;
        if (t->ne[0] > j.width_max) j.width_max = t->ne[0];
        t->data = (uint8_t *)base + off[i];
        if (!to[i]) memcpy((void *)(uintptr_t)t->data, src[i], (size_t)t->nbytes);
    }
    const double t0 = quant_clock_s();
    j.progress = progress, j.n_q = n_q, j.wt = wt, j.said = t0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = n_threads > 0 ? n_threads : ncpu > 0 ? (int)ncpu : 1;
    if (nt > 64) nt = 64;
    pthread_t th[64];
    int started = 0;
    for (int i = 1; i < nt; i++)
        if (pthread_create(&th[started], NULL, qworker, &j) == 0) started++;
    qwork(&j, 1); /* the calling thread works too, and says how far it got */
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (atomic_load(&j.failed)) {
        for (int i = 0; i < n; i++) m->tensors[i].data = src[i];
        munmap(base, (size_t)(total ? total : 64));
        s = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory quantizing the weights", file);
        goto done;
    }
    for (int i = 0; i < n; i++)
        if (to[i]) {
            m->tensors[i].type = to[i];
            m->tensors[i].nbytes = slm_row_bytes(to[i], (uint64_t)m->tensors[i].ne[0]) * (uint64_t)rows_of(&m->tensors[i]);
        }
    mprotect(base, (size_t)(total ? total : 64), PROT_READ);
    m->src_map = m->map; /* the GGUF metadata points into it */
    m->map.data = base;
    m->map.size = total ? total : 64;
    s = slm_model_validate(m, err); /* the new types in their roles, as any file's */
    if (progress)
        fprintf(stderr, "%squantize: %s, %d matrices, %.1f -> %.1f MiB in %.1f s\n", progress > 1 ? "\r" : "",
                slm_weight_type_name(wt), n_q,
                (double)before / 1048576.0, (double)after / 1048576.0, quant_clock_s() - t0);
done:
    slm_xfree(to);
    slm_xfree((void *)src);
    slm_xfree(piece0);
    slm_xfree(off);
    slm_xfree(lv);
    return s;
}
