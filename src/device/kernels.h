/* Kernels: a scalar reference for each, SIMD variants chosen at run time. */
#ifndef SLM_KERNELS_H
#define SLM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* y = dot(w_row, x) over k elements, w_row of a weight type. */
typedef float (*slm_dot_fn)(const void *w_row, const float *x, int k);

/* One matrix multiply over a tile of output columns:
 *   y[i][j] = sum_e x[i][e] * W[j][e]   for i in [0, rows), j in [n0, n1).
 * Only columns [n0, n1) of each y row are written. */
typedef struct slm_mm {
    const void *w;     /* weight matrix [n][k] of wtype; row j at w + j * wrow bytes */
    uint64_t wrow;     /* bytes per weight row (slm_row_bytes(wtype, k)) */
    uint32_t wtype;    /* slm_dtype of the weights */
    int k;             /* inner dimension, elements (a multiple of the block size) */
    int n0, n1;        /* output columns [n0, n1) */
    int rows;          /* activation rows, >= 1 */
    const float *x;    /* activation row i at x + i * ldx */
    size_t ldx;        /* activation row stride, floats */
    float *y;          /* output row i at y + i * ldy */
    size_t ldy;        /* output row stride, floats */
    void *scratch;     /* >= slm_matmul_scratch_bytes(wtype, k, rows) bytes, 64-byte aligned
                          (may be NULL when that is 0) */
    int pf;            /* stream prefetch distance, bytes (0: none): a kernel touches the
                          weights this far ahead of what it reads (the task's a) */
    int xq_ready;      /* 1: scratch already holds these x rows quantized by a previous
                          call of the same set for weights of the same quantization class
                          (repacked / other quantized): skip quantizing them */
    uint8_t tiles[3];  /* the task's matrix-engine tile step (slm_task.tiles), or zeros:
                          the amx set's own choice */
} slm_mm;

/* A kernel set's matrix multiply: every type of slm_matmul_supported. Decode
 * (rows <= SLM_MM_DECODE_ROWS) and prefill take different paths inside: the
 * SIMD sets quantize activations to int8 blocks for quantized weights (in
 * scratch) and keep exact float arithmetic for F32/F16/BF16 weights.
 * Up to SLM_MM_DECODE_ROWS rows, each output row has the bits that row gets
 * in a one-row call (the same operations in the same order), whatever the
 * other rows hold: a batch program's sequence decodes exactly as it would
 * alone (tests/test_kernels.c checks it for every type and set). */
#define SLM_MM_DECODE_ROWS 4
typedef void (*slm_matmul_fn)(const slm_mm *mm);

struct slm_attn_args; /* device/attention.h */
struct slm_attn_rows;

/* T tokens of one DeltaNet head for the delta rule (slm_k_delta_rule) */
typedef struct slm_delta_steps {
    const float *q, *k;        /* T rows of S each, packed: the L2-normed query (with its scale) and key */
    const float *v;            /* T rows of S, row t at v + t * ldv */
    const float *decay, *beta; /* T each */
    float *o;                  /* T rows of S, row t at o + t * ldo */
    size_t ldv, ldo;
    int T;
} slm_delta_steps;

typedef struct slm_kernel_set {
    const char *name;       /* "scalar", "avx2", "avx512" */
    slm_dot_fn dot_f32;     /* float dot products (decode, and what run_matmul */
    slm_dot_fn dot_f16;     /* falls back to without scratch) */
    slm_dot_fn dot_bf16;
    slm_dot_fn dot_q8_0;
    slm_matmul_fn matmul;   /* the tiled matrix multiply (slm_mm) */
    /* vector kernels (also the matmul input prologues): as slm_k_rmsnorm and
     * slm_k_swiglu below, up to rounding (SIMD sums, a polynomial exp) */
    void (*rmsnorm)(const float *x, const float *g, float *y, int n, float eps);
    void (*swiglu)(const float *gate, const float *up, float *y, int n);
    /* y = silu(x) (y may be x), as slm_k_silu */
    void (*silu)(const float *x, float *y, int n);
    /* gelu(gate) * up with the tanh GELU (Gemma's GeGLU), as slm_k_geglu */
    void (*geglu)(const float *gate, const float *up, float *y, int n);
    /* T steps of the gated delta rule on one head's S x S state (qwen35's
       DeltaNet), as slm_k_delta_rule: up to rounding */
    void (*delta_rule)(float *M, const struct slm_delta_steps *d, int S);
    /* attention for one query row of the query heads sharing a KV head
       (device/attention.h; any head_dim and group, up to rounding) */
    void (*attention)(const struct slm_attn_args *a);
    /* n floats stored as the KV type (SLM_F32, SLM_F16, SLM_Q8_0): the KV_STORE
       task (device/attention.h) */
    void (*kv_store)(int kv_type, const float *x, void *y, int n);
    /* optional (NULL: the executor runs `attention` per row): attention for
       a block of query rows of one KV head group (device/attention.h,
       slm_attn_rows); returns 0, writing nothing, for a block it does not take */
    int (*attention_rows)(const struct slm_attn_rows *a);
} slm_kernel_set;

/* The scalar reference set (kernels_ref.c). */
const slm_kernel_set *slm_kernels_ref(void);
/* Selection (kernels_select.c): the best set this CPU supports (features from
 * common/cpu.h); force a set by name for tests/benchmarks ("scalar",
 * "avx2", "avx512"): returns 0 if the CPU lacks it, NULL restores the best;
 * the active set (the best until one is forced). */
const slm_kernel_set *slm_kernels_best(void);
int slm_kernels_select(const char *name);
const slm_kernel_set *slm_kernels_active(void);
/* The sets compiled into this build, whether or not this CPU runs them
 * ("scalar avx2 avx512"), into buf. */
void slm_kernels_compiled(char *buf, size_t cap);
/* The reference set's float-activation dot product for wtype; NULL if unsupported. */
slm_dot_fn slm_dot_ref_for(uint32_t wtype);
/* A float-activation dot product for wtype (any supported type; the scalar
 * reference for the types without a SIMD dot); NULL if unsupported. */
slm_dot_fn slm_dot_for(const slm_kernel_set *ks, uint32_t wtype);
/* 1 if every set's matmul handles weights of type t: F32, F16, BF16, Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, the
 * i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, and the
 * repacked (r16) types of slm_repack_type. */
int slm_matmul_supported(uint32_t t);
/* Scratch bytes slm_mm needs for (wtype, k, rows) under any kernel set. */
size_t slm_matmul_scratch_bytes(uint32_t wtype, int k, int rows);

/* Per-thread scratch bytes a task needs (e.g. activations quantized for
 * int8 dot products); the runtime allocates the maximum once per thread. */
struct slm_task;
size_t slm_task_scratch_bytes(const struct slm_task *t);
/* A matrix task's scratch for `rows` input rows, in order, each a multiple
 * of 64 bytes: a fused prologue's rows (f32 [rows][k]), the kernel's
 * scratch (slm_matmul_scratch_bytes), a fused residual add's tile product
 * (f32 [rows][n1 - n0]). The one place the executor and the pool's sizing
 * take the layout from. */
typedef struct slm_mm_scratch {
    size_t pre, kernel, post;
} slm_mm_scratch;
slm_mm_scratch slm_task_scratch_layout(const struct slm_task *t, int rows);

/* ---- shared by the kernel files (kernels_util.c; not for other layers) --
 * Quantized weights as int8 codes: every 32-element block b of a row of a
 * quantized type reads as  w[e] = d[e / 16] * q[e] + m  (e in 0..31), with
 * q signed 8-bit. slm_qblock_i8 writes q, d[0..1] and m for block b. */
void slm_qblock_i8(uint32_t t, const void *row, int b, int8_t q[32], float d[2], float *m);
/* 1 if the type's two half-block scales differ (Q6_K, Q3_K, IQ2_XS, IQ2_S,
 * IQ1_M), 2 if it has a min term (Q4_1, Q5_1, Q4_K, Q5_K), 0 otherwise (Q4_0,
 * Q5_0, Q8_0, IQ4_NL, MXFP4, IQ4_XS, IQ2_XXS, IQ3_XXS, IQ3_S, IQ1_S); 3 for two half-block scales and two half-block mins (Q2_K: not
 * expressible by slm_qblock_i8, which writes zeros for it); -1 if not
 * quantized. */
int slm_qtype_kind(uint32_t t);

/* The types of kernels_quant2_ref.c (Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K,
 * Q3_K, the i-quants, MXFP4): their slm_qtype_kind (-1 for any other type), their scalar float
 * dot product (NULL for any other), and block b as int8 codes with a
 * scale and a min per half block:  w[e] = d[e / 16] * q[e] + m[e / 16]. */
int slm_quant2_kind(uint32_t t);
slm_dot_fn slm_quant2_dot_ref(uint32_t t);
void slm_qblock2_i8(uint32_t t, const void *row, int b, int8_t q[32], float d[2], float m[2]);

/* Activations as int8 blocks of 32 (the "xq" format): row i of the
 * quantized activations at q + i * k bytes; block b of row i has scale
 * d[i * nb + b] and code sum s[i * nb + b] (= d * sum of codes, float);
 * codes are round(x / d), d = max|x| / 127, stored as code + offset
 * (offset 128: unsigned bytes, 0: signed). */
void slm_quantize_act_ref(const float *x, size_t ldx, int rows, int k, int offset, uint8_t *q, float *d, float *s);

/* Packed weight panel for the int8 matrix kernels: nc columns (16 for
 * AVX-512, 8 for AVX2) by nb blocks of 32. Block b occupies nc * 52 bytes:
 *   int8  w[8][nc][4]  codes, 4 consecutive elements per column per group
 *   int32 corr[2][nc]  -128 * sum of codes of each half block
 *   float d[2][nc]     half-block scales
 *   float m[nc]        min term (value = d * q + m)
 * Columns past `valid` are zero. */
#define SLM_PANEL_BLOCK_BYTES(nc) ((size_t)(nc) * 52)
void slm_pack_panel(uint32_t t, const uint8_t *w, uint64_t wrow, int c0, int valid, int nc, int nb, uint8_t *panel);

/* The amx set's panel of one column step (up to 3 groups of 16 columns) of
 * repacked weights, unpacked once per step and read by every row step
 * (kernels_amx_body.h): per group and block of 32 a 512-byte signed B tile,
 * its scales wd[2][16] and min terms wm[16] (floats), 64 bytes of
 * alignment slack. */
#define SLM_AMX_PANEL_BYTES(nb) (3 * (size_t)(nb) * (512 + 48 * sizeof(float)) + 64)
/* The AVX-512 prefill panel of repacked weights (kernels_x86_r16p.c), in the
 * same region: per group (up to 3) and block, the 512 code bytes
 * (unsigned, as dpbusd takes them) and two vectors of 16 float scales. */
#define SLM_R16P_BLOCK_BYTES 640
/* Q2_K's (two vectors of scales and two of mins a block): its steps of up
   to 2 groups stay inside the region */
#define SLM_R16P_BLOCK2_BYTES 768
/* After that region, for repacked weights: the integer start of each
 * row's block accumulators (the codes' offset times the activation codes'
 * sum; two per block for Q6_K's halves) and alignment slack. */
#define SLM_R16_OFS_BYTES(rows, nb) (2 * (size_t)(rows) * (size_t)(nb) * sizeof(int32_t) + 64)

/* The int8 dot-product peak of AVX-512 VNNI, operations (2 per
 * multiply-add) per second on one core: 12 independent chains of vpdpbusd
 * for about `seconds` (kernels_x86_dot.c). 0 without AVX-512 VNNI. */
double slm_vnni_int8_peak(double seconds);

/* Reference vector kernels (shared by all sets for now). */
void slm_k_rmsnorm(const float *x, const float *g, float *y, int n, float eps);
void slm_k_rope(float *x, int heads, int head_dim, const float *cs);
void slm_k_swiglu(const float *gate, const float *up, float *y, int n);
void slm_k_silu(const float *x, float *y, int n);
/* gelu(g) * u, gelu(x) = x/2 (1 + tanh(z)) = x sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3) */
void slm_k_geglu(const float *gate, const float *up, float *y, int n);
/* The gated delta rule for one head over T tokens in order: for token t,
 * M (S rows of S, row j for value element j) decays, takes the correction
 * (v - M k) beta along k, and o = M q:
 *   M = decay_t M;  M[j] += beta_t (v_t[j] - M[j].k_t) k_t;  o_t[j] = M[j].q_t.
 * The rows are independent, so a kernel may run a few rows through all T
 * tokens before the next rows (they stay in L1), which is what the sets do. */
void slm_k_delta_rule(float *M, const struct slm_delta_steps *d, int S);
/* its row j (m = M[j], of S): updates m, returns o[j] */
float slm_k_delta_row(float *m, const float *q, const float *k, float vj, float decay, float beta, int S);
void slm_k_add(float *y, const float *x, int n);
/* One query row against KV rows [0, last] where mask[j] != 0; q and out
 * are [head_dim]; K, V rows have stride ld floats. Online softmax. */
void slm_k_attention_head(const float *q, const float *K, const float *V, int ld, const int32_t *mask,
                          int last, int head_dim, float *out);

#endif
