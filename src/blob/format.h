/* The blob's on-disk records (private to blob/). Little endian, fixed
 * sizes, explicit offsets; docs/blob.md is the reference. */
#ifndef SLM_BLOB_FORMAT_H
#define SLM_BLOB_FORMAT_H

#include <elf.h>

#include "blob/blob.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the blob reader and writer assume a little-endian host"
#endif

/* The serializers below list every field of these structs; a new field
 * must be added to them (and to docs/blob.md, and the version bumped). */
_Static_assert(sizeof(slm_compile_options) == 26 * 4, "update blob options record");
_Static_assert(sizeof(slm_ref) == 16, "update blob task record");
_Static_assert(sizeof(slm_task) == 64 + SLM_TASK_NREF * 16 + SLM_TASK_NREF * sizeof(void *),
               "update blob task record");
_Static_assert(sizeof(slm_io_desc) == 64, "update blob I/O record");
_Static_assert(sizeof(slm_reloc) == 8, "update blob relocation record");
/* the config's last field, encoder, is stored in .slm.embed (a blob of an encoder holds its
 * embedding programs); a blob without that section keeps 0 */
_Static_assert(offsetof(slm_model_config, rope_dims) == 96 && offsetof(slm_model_config, encoder) == 96 + 220 &&
                   sizeof(slm_model_config) == 96 + 224,
               "update blob config and family records");
_Static_assert(SLM_T_OP_COUNT == 20, "update the blob task validator (blob_read.c check_task)");
_Static_assert(SLM_TF_POST_SOFTCAP == 0x200 && SLM_TF_KEY_PARTS == 0x800 && SLM_TF_POST_SCALE == 0x1000 &&
                   SLM_TF_EXPERT == 0x2000 && SLM_TF_EXPERT_GATHER == 0x4000 && SLM_TF_SINKS == 0x8000,
               "update the blob task validator's flags (blob_read.c check_task)");

#define BLOB_IDENT_MAGIC "SLMBLOB"   /* 8 bytes with the NUL */
#define BLOB_IDENT_SIZE 176
#define BLOB_IDENT_CHECKSUM_OFF 16
#define BLOB_PROG_SIZE 72
#define BLOB_TASK_SIZE 160
#define BLOB_IO_SIZE 64
#define BLOB_RELOC_SIZE 8
#define BLOB_TENSOR_SIZE 120
#define BLOB_OPTIONS_SIZE (26 * 4)
/* config record: model config (96), options, kv_capacity, n_progs,
 * rope_pos, rope_pairs (i32 each), const_bytes (u64, 8-aligned) */
#define BLOB_CFG_OPTIONS 96
#define BLOB_CFG_TAIL (BLOB_CFG_OPTIONS + BLOB_OPTIONS_SIZE)
#define BLOB_CFG_CONST_BYTES ((BLOB_CFG_TAIL + 16 + 7) / 8 * 8)
/* then the family record (224 bytes): what the families add to
 * the config (blob_put_family); bytes 216..223 are gemma4's experts' */
#define BLOB_CFG_FAMILY (BLOB_CFG_CONST_BYTES + 8)
#define BLOB_FAMILY_SIZE 224
/* then (format 22) i32 n_seqs (the KV regions the batch programs address;
 * 1: no batch programs) and i32 0 */
#define BLOB_CFG_NSEQS (BLOB_CFG_FAMILY + BLOB_FAMILY_SIZE)
#define BLOB_CONFIG_SIZE (BLOB_CFG_NSEQS + 8)

/* .slm.embed (present with embedding programs): u32 record size, i32
 * encoder, pooling, add_eos, pair_bos, pair_eos, pair_sep, sep, n_cls1,
 * n_cls, n_dense, u32 heads, i32 moe_every, expert_ungated, cls_pool, 4 bytes of
 * zeros; at 64 the Dense table: SLM_MAX_DENSE entries of 24 bytes (i32
 * module, in, out, act, bias, 0), those from n_dense on all zeros. */
#define BLOB_EMBED_DENSE_AT 64
#define BLOB_EMBED_DENSE_SIZE 24
#define BLOB_EMBED_SIZE (BLOB_EMBED_DENSE_AT + SLM_MAX_DENSE * BLOB_EMBED_DENSE_SIZE)
_Static_assert(sizeof(slm_blob_embed) == 14 * 4 + SLM_MAX_DENSE * 5 * 4 && SLM_MAX_DENSE == 8,
               "update the blob embedding record");
/* The classifier's head tensors a blob with embedding programs keeps (by
 * name); the Dense modules' are named by blob_dense_name. */
#define BLOB_EMBED_N_HEADS 5
static inline const char *blob_embed_head(int k) {
    static const char *const names[BLOB_EMBED_N_HEADS] = {
        "cls.weight", "cls.bias", "cls.norm.weight", "cls.output.weight", "cls.output.bias"};
    return k >= 0 && k < BLOB_EMBED_N_HEADS ? names[k] : "";
}
/* Dense module `module`'s matrix (bias 0) or bias (1): "dense_K.weight" / "dense_K.bias". */
static inline void blob_dense_name(char out[32], int module, int bias) {
    snprintf(out, 32, "dense_%d.%s", module, bias ? "bias" : "weight");
}

/* Limits a valid blob stays within (beyond them: refused). */
#define BLOB_MAX_SECTIONS 4096
#define BLOB_MAX_PROGS (3 * SLM_MAX_VARIANTS)
#define BLOB_MAX_TASKS (1 << 24)
#define BLOB_MAX_IO 65535
#define BLOB_MAX_DIM (1 << 24)
#define BLOB_MAX_LAYERS 4096
#define BLOB_MAX_CAPACITY (1 << 22)
#define BLOB_MAX_SEQS 1024          /* KV regions (n_seqs); n_seqs x kv_capacity <= 1 << 24 */

static inline void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline void wr16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline int32_t rdi32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t rd64u(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* Bytes of n elements of an I/O tensor's type (whole q8_0 blocks: the
 * config's head_dim % 32 is checked; 0 when not whole). */
static inline uint64_t blob_io_bytes(uint32_t dtype, uint64_t n) {
    return dtype == SLM_F32 || dtype == SLM_I32 ? n * 4 : slm_row_bytes(dtype, n);
}

/* Extent in bytes of rows [0, rows) of w elements of the KV type kt with
 * stride ld elements, on a past/present I/O of p holding that type; 0 when
 * the reference is anything else. */
static inline int blob_kv_ext(const slm_program *p, const slm_ref *rf, uint32_t kt, uint64_t rows, uint64_t w,
                              uint64_t *ext) {
    if (rf->space != SLM_SPACE_IO || rf->io >= p->n_io || p->io[rf->io].dtype != kt) return 0;
    if (rows == 0 || w == 0 || (rows > 1 && rf->ld < w)) return 0;
    const uint64_t rb = blob_io_bytes(kt, rf->ld), wb = blob_io_bytes(kt, w);
    uint64_t x;
    if (!rb || !wb || !slm_mul_ok(rows - 1, rb, &x) || !slm_add_ok(x, wb, &x)) return 0;
    *ext = x;
    return 1;
}

static inline void blob_put_embed(uint8_t *p, const slm_blob_embed *e) {
    memset(p, 0, BLOB_EMBED_SIZE);
    wr32(p, BLOB_EMBED_SIZE);
    const int32_t v[10] = {e->encoder, e->pooling, e->add_eos, e->pair_bos, e->pair_eos,
                           e->pair_sep, e->sep, e->n_cls1, e->n_cls, e->n_dense};
    memcpy(p + 4, v, sizeof v);
    wr32(p + 44, e->heads);
    wr32(p + 48, (uint32_t)e->moe_every);
    wr32(p + 52, (uint32_t)e->expert_ungated);
    wr32(p + 56, (uint32_t)e->cls_pool);
    for (int k = 0; k < e->n_dense && k < SLM_MAX_DENSE; k++) {
        const slm_blob_embed_dense *d = &e->dense[k];
        const int32_t w[5] = {d->module, d->in, d->out, d->act, d->bias};
        memcpy(p + BLOB_EMBED_DENSE_AT + k * BLOB_EMBED_DENSE_SIZE, w, sizeof w);
    }
}

/* Every field as stored (the whole Dense table: the reader checks the entries past n_dense are zero). */
static inline void blob_get_embed(const uint8_t *p, slm_blob_embed *e) {
    int32_t v[10];
    memcpy(v, p + 4, sizeof v);
    e->encoder = v[0]; e->pooling = v[1]; e->add_eos = v[2]; e->pair_bos = v[3]; e->pair_eos = v[4];
    e->pair_sep = v[5]; e->sep = v[6]; e->n_cls1 = v[7]; e->n_cls = v[8]; e->n_dense = v[9];
    e->heads = rd32(p + 44);
    e->moe_every = rdi32(p + 48);
    e->expert_ungated = rdi32(p + 52);
    e->cls_pool = rdi32(p + 56);
    for (int k = 0; k < SLM_MAX_DENSE; k++) {
        int32_t w[5];
        memcpy(w, p + BLOB_EMBED_DENSE_AT + k * BLOB_EMBED_DENSE_SIZE, sizeof w);
        e->dense[k] = (slm_blob_embed_dense){w[0], w[1], w[2], w[3], w[4]};
    }
}

/* Options record: every field of slm_compile_options, in order. */
static inline void blob_put_options(uint8_t *p, const slm_compile_options *o) {
    int32_t v[26];
    int k = 0;
    v[k++] = o->max_prompt_len;
    v[k++] = o->min_response_len;
    v[k++] = o->matmul_tile_cols;
    v[k++] = o->n_prefill_variants;
    for (int i = 0; i < SLM_MAX_VARIANTS; i++) v[k++] = o->prefill_variants[i];
    v[k++] = o->n_generate_variants;
    for (int i = 0; i < SLM_MAX_VARIANTS; i++) v[k++] = o->generate_variants[i];
    v[k++] = o->draft_n;
    v[k++] = o->lm_head_separate;
    v[k++] = o->tile_kb;
    v[k++] = o->kv_type;
    v[k++] = o->prefetch_off;
    memcpy(p, v, sizeof v);
}

static inline void blob_get_options(const uint8_t *p, slm_compile_options *o) {
    int32_t v[26];
    memcpy(v, p, sizeof v);
    int k = 0;
    memset(o, 0, sizeof *o);
    o->max_prompt_len = v[k++];
    o->min_response_len = v[k++];
    o->matmul_tile_cols = v[k++];
    o->n_prefill_variants = v[k++];
    for (int i = 0; i < SLM_MAX_VARIANTS; i++) o->prefill_variants[i] = v[k++];
    o->n_generate_variants = v[k++];
    for (int i = 0; i < SLM_MAX_VARIANTS; i++) o->generate_variants[i] = v[k++];
    o->draft_n = v[k++];
    o->lm_head_separate = v[k++];
    o->tile_kb = v[k++];
    o->kv_type = v[k++];
    o->prefetch_off = v[k++];
}

/* Config record: every field of slm_model_config, in order (96 bytes). */
static inline void blob_put_config(uint8_t *p, const slm_model_config *m) {
    memset(p, 0, 96);
    memcpy(p, m->arch, 32);
    p[31] = 0;
    int32_t v[8] = {m->dim, m->hidden_dim, m->n_layers, m->n_heads, m->n_kv_heads, m->head_dim, m->vocab_size, m->context_len};
    memcpy(p + 32, v, sizeof v);
    memcpy(p + 64, &m->rope_base, 4);
    memcpy(p + 68, &m->norm_eps, 4);
    int32_t w[4] = {m->tied_embeddings, m->rope_neox, m->qkv_bias, m->sliding_window};
    memcpy(p + 72, w, sizeof w);
    memcpy(p + 88, &m->rope_scale, 4);
    memcpy(p + 92, &m->rope_freqs, 4);
}

/* Family record: i32 rope_dims, qk_norm, post_norms, ffn_gelu, swa_pattern,
 * rope_long, rope_orig_ctx; f32 embed_scale, attn_scale, attn_softcap,
 * final_softcap, rope_base_swa, rope_scale_swa, rope_attn_factor; i32
 * nope_step, rope_yarn; f32 yarn_beta_fast, yarn_beta_slow, yarn_ext_factor;
 * i32 no_pre_norms; f32 residual_scale, logit_scale (granite); i32 n_experts,
 * n_experts_used, expert_norm (MoE); i32 attn_sinks, o_bias, expert_bias; f32
 * swiglu_alpha, swiglu_limit (gpt-oss); i32 shared_ffn, shared_gate (the shared
 * expert); i32 dense_lead, dense_ffn, expert_sigmoid, expert_sel_bias; f32
 * expert_scale; i32 nextn_layers (glm4moe); i32 recur_interval, ssm_conv,
 * ssm_state, ssm_k_heads, ssm_v_heads, attn_gate (qwen35); i32 head_dim_swa,
 * n_kv_heads_swa, rope_dims_swa, kv_shared, hidden_dim_shared, ple_dim, v_norm,
 * rope_freqs_global, layer_scale (gemma4); i32 the constants' rope_pairs_swa
 * (table 1's pairs, 0 = rope_pairs), passed beside m; i32 moe_dense,
 * expert_down_scale (gemma4 with experts: bytes 216..223). */
static inline void blob_put_family(uint8_t *p, const slm_model_config *m, int32_t rope_pairs_swa) {
    memset(p, 0, BLOB_FAMILY_SIZE);
    int32_t v[7] = {m->rope_dims, m->qk_norm, m->post_norms, m->ffn_gelu, m->swa_pattern, m->rope_long, m->rope_orig_ctx};
    memcpy(p, v, sizeof v);
    float f[7] = {m->embed_scale, m->attn_scale, m->attn_softcap, m->final_softcap, m->rope_base_swa, m->rope_scale_swa,
                  m->rope_attn_factor};
    memcpy(p + 28, f, sizeof f);
    memcpy(p + 56, &m->nope_step, 4);
    memcpy(p + 60, &m->rope_yarn, 4);
    const float y[3] = {m->yarn_beta_fast, m->yarn_beta_slow, m->yarn_ext_factor};
    memcpy(p + 64, y, sizeof y);
    memcpy(p + 76, &m->no_pre_norms, 4);
    memcpy(p + 80, &m->residual_scale, 4);
    memcpy(p + 84, &m->logit_scale, 4);
    const int32_t e[6] = {m->n_experts, m->n_experts_used, m->expert_norm, m->attn_sinks, m->o_bias, m->expert_bias};
    memcpy(p + 88, e, sizeof e);
    memcpy(p + 112, &m->swiglu_alpha, 4);
    memcpy(p + 116, &m->swiglu_limit, 4);
    memcpy(p + 120, &m->shared_ffn, 4);
    memcpy(p + 124, &m->shared_gate, 4);
    const int32_t g[4] = {m->dense_lead, m->dense_ffn, m->expert_sigmoid, m->expert_sel_bias};
    memcpy(p + 128, g, sizeof g);
    memcpy(p + 144, &m->expert_scale, 4);
    memcpy(p + 148, &m->nextn_layers, 4);
    const int32_t h[6] = {m->recur_interval, m->ssm_conv, m->ssm_state, m->ssm_k_heads, m->ssm_v_heads, m->attn_gate};
    memcpy(p + 152, h, sizeof h);
    const int32_t g4[10] = {m->head_dim_swa, m->n_kv_heads_swa, m->rope_dims_swa, m->kv_shared, m->hidden_dim_shared,
                            m->ple_dim, m->v_norm, m->rope_freqs_global, m->layer_scale, rope_pairs_swa};
    memcpy(p + 176, g4, sizeof g4);
    const int32_t g4e[2] = {m->moe_dense, m->expert_down_scale};
    memcpy(p + 216, g4e, sizeof g4e);
}

static inline void blob_get_family(const uint8_t *p, slm_model_config *m, int32_t *rope_pairs_swa) {
    int32_t v[7];
    float f[7];
    memcpy(v, p, sizeof v);
    memcpy(f, p + 28, sizeof f);
    m->rope_dims = v[0]; m->qk_norm = v[1]; m->post_norms = v[2]; m->ffn_gelu = v[3];
    m->swa_pattern = v[4]; m->rope_long = v[5]; m->rope_orig_ctx = v[6];
    m->embed_scale = f[0]; m->attn_scale = f[1]; m->attn_softcap = f[2]; m->final_softcap = f[3];
    m->rope_base_swa = f[4]; m->rope_scale_swa = f[5]; m->rope_attn_factor = f[6];
    memcpy(&m->nope_step, p + 56, 4);
    memcpy(&m->rope_yarn, p + 60, 4);
    float y[3];
    memcpy(y, p + 64, sizeof y);
    m->yarn_beta_fast = y[0]; m->yarn_beta_slow = y[1]; m->yarn_ext_factor = y[2];
    memcpy(&m->no_pre_norms, p + 76, 4);
    memcpy(&m->residual_scale, p + 80, 4);
    memcpy(&m->logit_scale, p + 84, 4);
    int32_t e[6];
    memcpy(e, p + 88, sizeof e);
    m->n_experts = e[0]; m->n_experts_used = e[1]; m->expert_norm = e[2];
    m->attn_sinks = e[3]; m->o_bias = e[4]; m->expert_bias = e[5];
    memcpy(&m->swiglu_alpha, p + 112, 4);
    memcpy(&m->swiglu_limit, p + 116, 4);
    memcpy(&m->shared_ffn, p + 120, 4);
    memcpy(&m->shared_gate, p + 124, 4);
    int32_t g[4];
    memcpy(g, p + 128, sizeof g);
    m->dense_lead = g[0]; m->dense_ffn = g[1]; m->expert_sigmoid = g[2]; m->expert_sel_bias = g[3];
    memcpy(&m->expert_scale, p + 144, 4);
    memcpy(&m->nextn_layers, p + 148, 4);
    int32_t h[6];
    memcpy(h, p + 152, sizeof h);
    m->recur_interval = h[0]; m->ssm_conv = h[1]; m->ssm_state = h[2];
    m->ssm_k_heads = h[3]; m->ssm_v_heads = h[4]; m->attn_gate = h[5];
    int32_t g4[10];
    memcpy(g4, p + 176, sizeof g4);
    m->head_dim_swa = g4[0]; m->n_kv_heads_swa = g4[1]; m->rope_dims_swa = g4[2]; m->kv_shared = g4[3];
    m->hidden_dim_shared = g4[4]; m->ple_dim = g4[5]; m->v_norm = g4[6]; m->rope_freqs_global = g4[7]; m->layer_scale = g4[8];
    *rope_pairs_swa = g4[9];
    int32_t g4e[2];
    memcpy(g4e, p + 216, sizeof g4e);
    m->moe_dense = g4e[0]; m->expert_down_scale = g4e[1];
}

static inline void blob_get_config(const uint8_t *p, slm_model_config *m) {
    memset(m, 0, sizeof *m);
    memcpy(m->arch, p, 32);
    int32_t v[8];
    memcpy(v, p + 32, sizeof v);
    m->dim = v[0]; m->hidden_dim = v[1]; m->n_layers = v[2]; m->n_heads = v[3];
    m->n_kv_heads = v[4]; m->head_dim = v[5]; m->vocab_size = v[6]; m->context_len = v[7];
    memcpy(&m->rope_base, p + 64, 4);
    memcpy(&m->norm_eps, p + 68, 4);
    int32_t w[4];
    memcpy(w, p + 72, sizeof w);
    m->tied_embeddings = w[0]; m->rope_neox = w[1]; m->qkv_bias = w[2]; m->sliding_window = w[3];
    memcpy(&m->rope_scale, p + 88, 4);
    memcpy(&m->rope_freqs, p + 92, 4);
}

#endif
