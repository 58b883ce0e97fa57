/* Loading a blob: map, check, validate everything, then build the heap
 * copies of the programs (immutable; the device binds its own copies).
 * Nothing from the file is used before it has been checked; every message
 * names the section and the field. */
#include <fcntl.h>
#include <unistd.h>

#include "blob/format.h"
#include "compiler/amx_plan.h"
#include "device/kernels.h"
#include "blob/blob_check.h"


static const char *sect_name(const rctx *r, uint32_t i) { return r->shstr + r->sh[i].sh_name; }

static const uint8_t *sect_data(const rctx *r, uint32_t i) { return r->b->data + r->sh[i].sh_offset; }

/* Find a section by name; 0 if absent, -1 (with err set) if duplicated. */
static int64_t find_sect(rctx *r, const char *name) {
    int64_t found = 0;
    for (uint32_t i = 1; i < r->shnum; i++)
        if (!strcmp(sect_name(r, i), name)) {
            if (found) {
                rbad(r, "section %s: appears twice (sections %lld and %u)", name, (long long)found, i);
                return -1;
            }
            found = i;
        }
    return found;
}

static slm_status need_sect(rctx *r, const char *name, uint32_t *idx) {
    int64_t i = find_sect(r, name);
    if (i < 0) return SLM_ERR_FORMAT;
    if (i == 0) return rbad(r, "section %s: missing", name);
    if (r->sh[i].sh_type != SHT_PROGBITS) return rbad(r, "section %s: sh_type %u, want PROGBITS", name, r->sh[i].sh_type);
    *idx = (uint32_t)i;
    return SLM_OK;
}

static int nul_within(const uint8_t *p, size_t n) { return memchr(p, 0, n) != NULL; }

/* ---- ELF structure ------------------------------------------------------ */

static slm_status read_elf(rctx *r, Elf64_Shdr **out_sh) {
    const slm_blob *b = r->b;
    Elf64_Ehdr eh;
    if (b->size < sizeof eh) return rbad(r, "ELF header: file is %llu bytes, need %zu", (unsigned long long)b->size, sizeof eh);
    memcpy(&eh, b->data, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return rbad(r, "ELF header: e_ident: no ELF magic");
    if (eh.e_ident[EI_CLASS] != ELFCLASS64) return rbad(r, "ELF header: e_ident[EI_CLASS] %u, want ELFCLASS64", eh.e_ident[EI_CLASS]);
    if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return rbad(r, "ELF header: e_ident[EI_DATA] %u, want little endian", eh.e_ident[EI_DATA]);
    if (eh.e_ident[EI_VERSION] != EV_CURRENT || eh.e_version != EV_CURRENT) return rbad(r, "ELF header: e_version not EV_CURRENT");
    if (eh.e_ehsize != sizeof eh) return rbad(r, "ELF header: e_ehsize %u, want %zu", eh.e_ehsize, sizeof eh);
    if (eh.e_shentsize != sizeof(Elf64_Shdr)) return rbad(r, "ELF header: e_shentsize %u, want %zu", eh.e_shentsize, sizeof(Elf64_Shdr));
    if (eh.e_shnum < 2 || eh.e_shnum > BLOB_MAX_SECTIONS) return rbad(r, "ELF header: e_shnum %u out of range (2..%d)", eh.e_shnum, BLOB_MAX_SECTIONS);
    uint64_t end;
    if (eh.e_shoff % 8 || !slm_add_ok(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), &end) || end > b->size)
        return rbad(r, "ELF header: e_shoff 0x%llx: section header table (%u entries) beyond end of file (%llu bytes)",
                   (unsigned long long)eh.e_shoff, eh.e_shnum, (unsigned long long)b->size);
    if (eh.e_shstrndx == 0 || eh.e_shstrndx >= eh.e_shnum) return rbad(r, "ELF header: e_shstrndx %u out of range", eh.e_shstrndx);
    Elf64_Shdr *sh = slm_calloc(eh.e_shnum, sizeof *sh);
    if (!sh) return slm_errf(r->err, SLM_ERR_NOMEM, "%s: out of memory", r->name);
    *out_sh = sh;
    memcpy(sh, b->data + eh.e_shoff, (size_t)eh.e_shnum * sizeof *sh);
    r->sh = sh;
    r->shnum = eh.e_shnum;
    const Elf64_Shdr *ss = &sh[eh.e_shstrndx];
    if (!slm_add_ok(ss->sh_offset, ss->sh_size, &end) || end > b->size)
        return rbad(r, "section header %u (.shstrtab): sh_offset 0x%llx + sh_size 0x%llx beyond end of file (%llu bytes)",
                   eh.e_shstrndx, (unsigned long long)ss->sh_offset, (unsigned long long)ss->sh_size,
                   (unsigned long long)b->size);
    if (ss->sh_type != SHT_STRTAB || ss->sh_size < 1 || b->data[ss->sh_offset + ss->sh_size - 1] != 0)
        return rbad(r, "section header %u (.shstrtab): not a NUL-terminated string table", eh.e_shstrndx);
    r->shstr = (const char *)b->data + ss->sh_offset;
    r->shstr_size = ss->sh_size;
    for (uint32_t i = 1; i < r->shnum; i++)
        if (sh[i].sh_name >= r->shstr_size)
            return rbad(r, "section header %u: sh_name %u beyond .shstrtab (%llu bytes)", i, sh[i].sh_name,
                       (unsigned long long)r->shstr_size);
    for (uint32_t i = 1; i < r->shnum; i++) {
        if (sh[i].sh_type == SHT_NOBITS) continue;
        if (!slm_add_ok(sh[i].sh_offset, sh[i].sh_size, &end) || end > b->size)
            return rbad(r, "section %s (header %u): sh_offset 0x%llx + sh_size 0x%llx beyond end of file (%llu bytes)%s",
                       sect_name(r, i), i, (unsigned long long)sh[i].sh_offset, (unsigned long long)sh[i].sh_size,
                       (unsigned long long)b->size, end > b->size ? ": truncated" : "");
    }
    return SLM_OK;
}

/* ---- identity, config ---------------------------------------------------- */

static slm_status read_ident(rctx *r, uint32_t si) {
    const Elf64_Shdr *s = &r->sh[si];
    if (s->sh_size != BLOB_IDENT_SIZE) return rbad(r, "section .slm.ident: sh_size %llu, want %d", (unsigned long long)s->sh_size, BLOB_IDENT_SIZE);
    const uint8_t *p = sect_data(r, si);
    if (memcmp(p, BLOB_IDENT_MAGIC, 8) != 0) return rbad(r, "section .slm.ident: magic: not a staticlm blob");
    slm_blob_ident *id = &r->b->ident;
    id->format_version = rd32(p + 8);
    if (id->format_version != SLM_BLOB_FORMAT_VERSION)
        return rbad(r, "section .slm.ident: format_version %u, this build reads %u (recompile the blob)", id->format_version,
                   SLM_BLOB_FORMAT_VERSION);
    if (rd32(p + 12) != BLOB_IDENT_SIZE) return rbad(r, "section .slm.ident: record_size %u, want %d", rd32(p + 12), BLOB_IDENT_SIZE);
    id->identity = rd64u(p + 24);
    id->model_hash = rd64u(p + 32);
    id->model_bytes = rd64u(p + 40);
    id->tok_hash = rd64u(p + 48);
    id->tok_bytes = rd64u(p + 56);
    id->options_hash = rd64u(p + 64);
    id->weights_hash = rd64u(p + 72);
    if (!nul_within(p + 80, 64)) return rbad(r, "section .slm.ident: source: not NUL-terminated");
    if (!nul_within(p + 144, 32)) return rbad(r, "section .slm.ident: compiler: not NUL-terminated");
    memcpy(id->source, p + 80, 64);
    memcpy(id->compiler, p + 144, 32);
    return SLM_OK;
}

#define RANGE(v, lo, hi, what) SRANGE(".slm.config", v, lo, hi, what)

/* The encoder kind (.slm.embed) into the config: an encoder only with its
 * own arch, and no encoder arch as a decoder. */
static slm_status encoder_kind(rctx *r, slm_model_config *m, int enc) {
    static const char *const enc_arch[7] = {"", "bert", "nomic-bert", "gemma-embedding", "modern-bert", "jina-bert-v2",
                                            "nomic-bert-moe"};
    for (int k = 1; k < 7; k++)
        if (!strcmp(m->arch, enc_arch[k]) != (enc == k))
            return rbad(r, "section .slm.config: arch '%s' with encoder kind %d (.slm.embed): an encoder's arch goes with "
                       "its kind (%s: %d)", m->arch, enc, enc_arch[k], k);
    m->encoder = (int16_t)enc;
    return SLM_OK;
}

/* nomic-bert-moe's layer rule (.slm.embed) into the config: experts on
 * layer l when l % moe_every == 1, each ungated; exactly on that encoder
 * with experts, and beside no other MoE layout. */
static slm_status layer_rule(rctx *r, slm_model_config *m, int enc) {
    const int rule = enc == 6 && m->n_experts > 0;
    m->moe_every = (uint8_t)r->b->embed.moe_every; /* 0..255: blob_read_embed */
    m->expert_ungated = (uint8_t)r->b->embed.expert_ungated;
    SRANGE(".slm.embed", m->moe_every, rule ? 2 : 0, rule ? 255 : 0, "moe_every (with the config's encoder and experts)");
    SRANGE(".slm.embed", m->expert_ungated, rule, rule, "expert_ungated (with the config's encoder and experts)");
    if (rule && (m->moe_dense || m->expert_bias || m->dense_lead || m->shared_ffn || m->expert_sigmoid ||
                 m->expert_sel_bias || m->swiglu_limit != 0.0f || m->expert_down_scale))
        return rbad(r, "section .slm.config: experts every %d layers (ungated, .slm.embed) beside another expert "
                   "layout", m->moe_every);
    return SLM_OK;
}

static slm_status read_config(rctx *r, uint32_t si) {
    const Elf64_Shdr *s = &r->sh[si];
    if (s->sh_size != BLOB_CONFIG_SIZE) return rbad(r, "section .slm.config: sh_size %llu, want %d", (unsigned long long)s->sh_size, BLOB_CONFIG_SIZE);
    const uint8_t *p = sect_data(r, si);
    slm_compiled *c = r->c;
    slm_model_config *m = &c->cfg;
    blob_get_config(p, m);
    if (!nul_within((const uint8_t *)m->arch, sizeof m->arch)) return rbad(r, "section .slm.config: arch: not NUL-terminated");
    const int enc = r->b->has_embed ? r->b->embed.encoder : 0;
    const slm_status es = encoder_kind(r, m, enc);
    if (es) return es;
    RANGE(m->dim, 1, BLOB_MAX_DIM, "dim");
    RANGE(m->hidden_dim, 1, BLOB_MAX_DIM, "hidden_dim");
    RANGE(m->n_layers, 1, BLOB_MAX_LAYERS, "n_layers");
    RANGE(m->n_heads, 1, 65536, "n_heads");
    RANGE(m->n_kv_heads, 1, m->n_heads, "n_kv_heads");
    RANGE(m->head_dim, 2, 65536, "head_dim");
    RANGE(m->vocab_size, 1, BLOB_MAX_DIM, "vocab_size");
    RANGE(m->context_len, 0, INT32_MAX, "context_len");
    RANGE(m->tied_embeddings, 0, 1, "tied_embeddings");
    RANGE(m->rope_neox, 0, 1, "rope_neox");
    RANGE(m->qkv_bias, 0, 1, "qkv_bias");
    RANGE(m->rope_freqs, 0, 1, "rope_freqs");
    RANGE(m->sliding_window, 0, INT32_MAX, "sliding_window");
    if (m->n_heads % m->n_kv_heads) return rbad(r, "section .slm.config: n_heads %d not a multiple of n_kv_heads %d", m->n_heads, m->n_kv_heads);
    if (m->head_dim % 2) return rbad(r, "section .slm.config: head_dim %d is odd", m->head_dim);
    if ((int64_t)m->n_kv_heads * m->head_dim > BLOB_MAX_DIM) return rbad(r, "section .slm.config: kv_dim too large");
    blob_get_options(p + BLOB_CFG_OPTIONS, &c->opt);
    c->kv_capacity = rdi32(p + BLOB_CFG_TAIL);
    int32_t n_progs = rdi32(p + BLOB_CFG_TAIL + 4);
    c->consts.rope_pos = rdi32(p + BLOB_CFG_TAIL + 8);
    c->consts.rope_pairs = rdi32(p + BLOB_CFG_TAIL + 12);
    r->const_bytes = rd64u(p + BLOB_CFG_CONST_BYTES);
    RANGE(c->kv_capacity, 1, BLOB_MAX_CAPACITY, "kv_capacity");
    RANGE(n_progs, enc ? 1 : 2, BLOB_MAX_PROGS, "n_progs");
    if (enc) { /* embedding programs alone: the cache holds one input, nothing is generated or drafted */
        RANGE(c->opt.min_response_len, 0, 0, "min_response_len (an encoder's)");
        RANGE(c->opt.draft_n, 0, 0, "draft_n (an encoder's)");
    }
    if (r->b->has_embed) RANGE(r->b->embed.sep, -1, m->vocab_size - 1, "sep (.slm.embed)");
    RANGE(c->opt.max_prompt_len, 1, c->kv_capacity, "max_prompt_len");
    RANGE(c->opt.min_response_len, 0, c->kv_capacity, "min_response_len");
    RANGE(c->opt.lm_head_separate, 0, 0, "lm_head_separate");
    RANGE(c->opt.tile_kb, 0, 1 << 20, "tile_kb");
    RANGE(c->opt.prefetch_off, 0, 1, "prefetch_off");
    if (!slm_kv_type_ok(c->opt.kv_type) || (c->opt.kv_type == SLM_Q8_0 && m->head_dim % SLM_QK8_0) || (c->opt.kv_type && m->head_dim > 512))
        return rbad(r, "section .slm.config: kv_type %d with head_dim %d: not f32 (0), f16 (1, head_dim <= 512) or q8_0 (8, head_dim a multiple of 32 up to 512)", c->opt.kv_type, m->head_dim);
    if (c->opt.max_prompt_len + c->opt.min_response_len != c->kv_capacity)
        return rbad(r, "section .slm.config: max_prompt_len %d + min_response_len %d != kv_capacity %d", c->opt.max_prompt_len,
                   c->opt.min_response_len, c->kv_capacity);
    if (c->consts.rope_pos != c->kv_capacity) return rbad(r, "section .slm.config: rope_pos %d != kv_capacity %d", c->consts.rope_pos, c->kv_capacity);
    blob_get_family(p + BLOB_CFG_FAMILY, m, &c->consts.rope_pairs_swa);
    RANGE(m->rope_dims, 0, m->head_dim, "rope_dims");
    if (m->rope_dims % 2 || (m->rope_dims && !m->rope_neox)) return rbad(r, "section .slm.config: rope_dims %d odd or not neox", m->rope_dims);
    RANGE(m->qk_norm, 0, 2, "qk_norm");
    RANGE(m->no_pre_norms, 0, 1, "no_pre_norms");
    if (!(m->residual_scale >= 0.0f && m->residual_scale < 1e9f) || !(m->logit_scale >= 0.0f && m->logit_scale < 1e9f))
        return rbad(r, "section .slm.config: residual_scale %g / logit_scale %g out of range", (double)m->residual_scale,
                   (double)m->logit_scale);
    RANGE(m->post_norms, 0, 1, "post_norms");
    RANGE(m->ffn_gelu, 0, 1, "ffn_gelu");
    RANGE(m->swa_pattern, 0, 65536, "swa_pattern");
    RANGE(m->rope_long, 0, 2, "rope_long");
    RANGE(m->rope_orig_ctx, 0, INT32_MAX, "rope_orig_ctx");
    RANGE(m->nope_step, 0, 65536, "nope_step");
    RANGE(m->rope_yarn, 0, 1, "rope_yarn");
    RANGE(m->n_experts, 0, 1024, "n_experts");
    RANGE(m->n_experts_used, m->n_experts ? 1 : 0, m->n_experts < 64 ? m->n_experts : 64, "n_experts_used");
    RANGE(m->expert_norm, 0, 1, "expert_norm");
    RANGE(m->attn_sinks, 0, 1, "attn_sinks");
    RANGE(m->o_bias, 0, 1, "o_bias");
    RANGE(m->expert_bias, 0, 1, "expert_bias");
    RANGE(m->shared_ffn, 0, m->n_experts ? BLOB_MAX_DIM : 0, "shared_ffn");
    RANGE(m->shared_gate, 0, m->shared_ffn ? 1 : 0, "shared_gate");
    RANGE(m->dense_lead, 0, m->n_experts ? m->n_layers : 0, "dense_lead");
    /* the leading dense layers' width (glm4moe) or every MoE layer's dense branch (gemma4: moe_dense) */
    RANGE(m->dense_ffn, m->n_experts && (m->dense_lead || m->moe_dense) ? 1 : 0,
          m->n_experts && (m->dense_lead || m->moe_dense) ? BLOB_MAX_DIM : 0, "dense_ffn");
    RANGE(m->expert_sigmoid, 0, m->n_experts ? 1 : 0, "expert_sigmoid");
    RANGE(m->expert_sel_bias, 0, m->n_experts ? 1 : 0, "expert_sel_bias");
    RANGE(m->nextn_layers, 0, 65536, "nextn_layers");
    RANGE(m->recur_interval, 0, 65536, "recur_interval");
    RANGE(m->attn_gate, 0, 1, "attn_gate");
    if (m->recur_interval) { /* qwen35: the shapes the runtime sizes its state by (format/model.c's limits) */
        RANGE(m->ssm_conv, 2, 16, "ssm_conv");
        RANGE(m->ssm_state, 1, 512, "ssm_state");
        RANGE(m->ssm_k_heads, 1, 4096, "ssm_k_heads");
        RANGE(m->ssm_v_heads, m->ssm_k_heads, 4096, "ssm_v_heads");
        if (m->ssm_v_heads % m->ssm_k_heads)
            return rbad(r, "section .slm.config: ssm_v_heads %d not a multiple of ssm_k_heads %d", m->ssm_v_heads,
                       m->ssm_k_heads);
        if (m->qk_norm == 2 || m->no_pre_norms)
            return rbad(r, "section .slm.config: recurrent layers with whole-row Q/K norms (qk_norm %d) or without "
                       "pre-norms (no_pre_norms %d)", m->qk_norm, m->no_pre_norms);
    } else {
        RANGE(m->ssm_conv, 0, 0, "ssm_conv");
        RANGE(m->ssm_state, 0, 0, "ssm_state");
        RANGE(m->ssm_k_heads, 0, 0, "ssm_k_heads");
        RANGE(m->ssm_v_heads, 0, 0, "ssm_v_heads");
    }
    const slm_status rs = r->b->has_embed ? layer_rule(r, m, enc) : SLM_OK;
    if (rs) return rs;
    if (!(m->expert_scale >= 0.0f && m->expert_scale < 1e6f) || (m->expert_scale != 0.0f && !m->n_experts))
        return rbad(r, "section .slm.config: expert_scale %g out of range", (double)m->expert_scale);
    if (!(m->swiglu_alpha >= 0.0f && m->swiglu_alpha < 1e6f) || !(m->swiglu_limit >= 0.0f && m->swiglu_limit < 1e6f))
        return rbad(r, "section .slm.config: swiglu_alpha %g / swiglu_limit %g out of range", (double)m->swiglu_alpha,
                   (double)m->swiglu_limit);
    {
        const float f[] = {m->embed_scale, m->attn_scale, m->attn_softcap, m->final_softcap, m->rope_base_swa,
                           m->rope_scale_swa, m->rope_attn_factor, m->yarn_beta_fast, m->yarn_beta_slow,
                           m->yarn_ext_factor};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            if (!(f[i] >= 0.0f && f[i] < 1e9f)) return rbad(r, "section .slm.config: family value %zu (%g) out of range", i, (double)f[i]);
    }
    {   /* gemma4's per-kind layer fields (zero elsewhere), as the model loader checks them */
        slm_err e2 = {0};
        if (slm_gemma4_check_config(m, "section .slm.config", &e2)) return rbad(r, "%s", e2.msg);
        if ((c->opt.kv_type == SLM_Q8_0 && m->head_dim_swa % SLM_QK8_0) || (c->opt.kv_type && m->head_dim_swa > 512))
            return rbad(r, "section .slm.config: kv_type %d with head_dim_swa %d", c->opt.kv_type, m->head_dim_swa);
    }
    const int rot = m->rope_dims ? m->rope_dims : m->head_dim;
    if (c->consts.rope_pairs != rot / 2) return rbad(r, "section .slm.config: rope_pairs %d != rotated dims / 2 (%d)", c->consts.rope_pairs, rot / 2);
    r->table_bytes = (uint64_t)c->kv_capacity * (uint64_t)c->consts.rope_pairs * 8;
    /* table 1 (the window layers' own): gemma4's of their rotated dims when those differ */
    int swa_l = -1;
    for (int l = 0; l < m->n_layers && swa_l < 0; l++)
        if (slm_layer_swa(m, l)) swa_l = l;
    const int rot1 = swa_l >= 0 && m->head_dim_swa ? slm_layer_rope_dims(m, swa_l) : rot;
    if (c->consts.rope_pairs_swa != (rot1 != rot ? rot1 / 2 : 0))
        return rbad(r, "section .slm.config: rope_pairs_swa %d, the window layers rotate %d of %d dims", c->consts.rope_pairs_swa, rot1, rot);
    r->table1_bytes = (uint64_t)c->kv_capacity * (uint64_t)(rot1 / 2) * 8;
    if (r->const_bytes != r->table_bytes && r->const_bytes != r->table_bytes + r->table1_bytes)
        return rbad(r, "section .slm.config: const_bytes %llu != one or two tables of kv_capacity * rope_pairs * 8", (unsigned long long)r->const_bytes);
    /* the KV regions of the batch programs (format 22) */
    c->n_seqs = rdi32(p + BLOB_CFG_NSEQS);
    RANGE(c->n_seqs, 1, BLOB_MAX_SEQS, "n_seqs");
    if ((int64_t)c->n_seqs * c->kv_capacity > (1 << 24))
        return rbad(r, "section .slm.config: n_seqs %d x kv_capacity %d above %d KV rows", c->n_seqs, c->kv_capacity, 1 << 24);
    if (rd32(p + BLOB_CFG_NSEQS + 4) != 0) return rbad(r, "section .slm.config: reserved field after n_seqs not zero");
    uint64_t kv;
    const int kvh_max = m->n_kv_heads_swa > m->n_kv_heads ? m->n_kv_heads_swa : m->n_kv_heads;
    if (!slm_mul_ok((uint64_t)m->n_layers * 8 * (uint64_t)c->n_seqs, (uint64_t)c->kv_capacity, &kv) ||
        !slm_mul_ok(kv, (uint64_t)kvh_max * (uint64_t)slm_max_head_dim(m), &kv) || kv > (1ull << 40))
        return rbad(r, "section .slm.config: KV cache of n_layers x n_seqs x kv_capacity x kv_dim too large");
    c->n_progs = n_progs;
    return SLM_OK;
}

/* ---- programs ------------------------------------------------------------- */

static int io_dtype_for(const pctx *q, int role) {
    switch (role) {
    case SLM_IO_INPUT_IDS: case SLM_IO_POSITION_IDS: case SLM_IO_CACHE_POSITION: case SLM_IO_ATTENTION_MASK:
        return SLM_I32;
    case SLM_IO_PAST_KEY: case SLM_IO_PAST_VALUE: case SLM_IO_PRESENT_KEY: case SLM_IO_PRESENT_VALUE:
        return q->r->c->opt.kv_type;
    default: return SLM_F32;
    }
}

static slm_status read_io(pctx *q, const uint8_t *d) {
    slm_program *p = q->p;
    const slm_model_config *m = &q->r->c->cfg;
    const int L = m->n_layers, embed = p->kind == SLM_PROG_EMBED || p->kind == SLM_PROG_EMBED_BATCH;
    /* a batch program: logits of every row, a recurrent state row per sequence */
    const int batch = p->kind == SLM_PROG_BATCH, seqs = batch ? q->r->c->n_seqs : 1;
    p->io = slm_calloc((size_t)p->n_io, sizeof *p->io);
    uint8_t *seen = slm_calloc((size_t)SLM_IO_ROLE_COUNT * (size_t)L + 1, 1);
    if (!p->io || !seen) {
        slm_xfree(seen);
        return slm_errf(q->r->err, SLM_ERR_NOMEM, "out of memory");
    }
    slm_status s = SLM_OK;
    for (int i = 0; i < p->n_io && !s; i++) {
        const uint8_t *e = d + (size_t)i * BLOB_IO_SIZE;
        slm_io_desc *io = &p->io[i];
        if (!nul_within(e, 48)) { s = pbad(q, "I/O %d: name not NUL-terminated", i); break; }
        memcpy(io->name, e, 48);
        io->role = e[48];
        io->is_output = e[49];
        io->dtype = rd16(e + 50);
        io->layer = rdi32(e + 52);
        io->rows = rdi32(e + 56);
        io->cols = rdi32(e + 60);
        int role = io->role;
        int kvrole = role >= SLM_IO_PAST_KEY && role <= SLM_IO_PRESENT_VALUE;
        const int strole = role == SLM_IO_CONV_STATE || role == SLM_IO_RECUR_STATE; /* a recurrent layer's state */
        int want_out = role == SLM_IO_PRESENT_KEY || role == SLM_IO_PRESENT_VALUE || role == SLM_IO_LOGITS ||
                       role == SLM_IO_HIDDEN;
        int want_rows = 0, want_cols = 1;
        if (role <= SLM_IO_NONE || role >= SLM_IO_ROLE_COUNT) { s = pbad(q, "I/O %d (%s): role %d unknown", i, io->name, role); break; }
        /* an embedding program's output is every row's hidden state, the others' the logits */
        if ((role == SLM_IO_HIDDEN || role == SLM_IO_LOGITS) && (role == SLM_IO_HIDDEN) != embed) {
            s = pbad(q, "I/O %d (%s): role %s in a program of kind %d", i, io->name, slm_io_role_name((slm_io_role)role),
                     p->kind);
            break;
        }
        if (io->is_output != want_out) { s = pbad(q, "I/O %d (%s): is_output %d, want %d", i, io->name, io->is_output, want_out); break; }
        if (io->dtype != io_dtype_for(q, role)) { s = pbad(q, "I/O %d (%s): dtype %u, want %s", i, io->name, io->dtype, slm_dtype_name((uint32_t)io_dtype_for(q, role))); break; }
        if (kvrole || strole ? (io->layer < 0 || io->layer >= L || slm_layer_recurrent(m, io->layer) != strole ||
                                (kvrole && !slm_layer_has_kv(m, io->layer)))
                             : io->layer != -1) {
            s = pbad(q, "I/O %d (%s): layer %d out of range (or not a %s layer)", i, io->name, io->layer,
                     strole ? "recurrent" : "attention layer with K/V of its own: not recurrent, not KV-shared");
            break;
        }
        const int kv_dim = kvrole ? slm_layer_kv_dim(m, io->layer) : 0;
        switch (role) {
        case SLM_IO_INPUT_IDS: case SLM_IO_POSITION_IDS: case SLM_IO_CACHE_POSITION: want_rows = p->rows; break;
        case SLM_IO_ATTENTION_MASK: want_rows = p->kv_capacity; break;
        case SLM_IO_PAST_KEY: case SLM_IO_PAST_VALUE: want_rows = p->kv_capacity; want_cols = kv_dim; break;
        case SLM_IO_PRESENT_KEY: case SLM_IO_PRESENT_VALUE: want_rows = p->rows; want_cols = kv_dim; break;
        case SLM_IO_LOGITS: want_rows = p->kind == SLM_PROG_VERIFY || batch ? p->rows : 1; want_cols = m->vocab_size; break;
        case SLM_IO_HIDDEN: want_rows = p->rows; want_cols = m->dim; break;
        case SLM_IO_CONV_STATE: want_rows = seqs; want_cols = (int)slm_conv_state_floats(m); break;
        case SLM_IO_RECUR_STATE: want_rows = seqs; want_cols = (int)slm_delta_state_floats(m); break;
        default: break;
        }
        if (io->rows != want_rows || io->cols != want_cols) {
            s = pbad(q, "I/O %d (%s): shape [%d,%d], want [%d,%d]", i, io->name, io->rows, io->cols, want_rows, want_cols);
            break;
        }
        size_t slot = (size_t)role * (size_t)L + (size_t)(kvrole || strole ? io->layer : 0);
        if (seen[slot]) { s = pbad(q, "I/O %d (%s): role %s appears twice", i, io->name, slm_io_role_name((slm_io_role)role)); break; }
        seen[slot] = 1;
    }
    int want_io = 5;
    for (int l = 0; l < L; l++) want_io += slm_layer_recurrent(m, l) ? 2 : slm_layer_has_kv(m, l) ? 4 : 0;
    if (!s && p->n_io != want_io)
        s = pbad(q, "n_io %d, want %d (ids, positions, cache positions, mask, logits or hidden, 4 per attention layer with K/V, "
                 "2 per recurrent layer)", p->n_io, want_io);
    slm_xfree(seen);
    return s;
}

static slm_status read_tasks(pctx *q, const uint8_t *d) {
    slm_program *p = q->p;
    p->tasks = slm_calloc((size_t)p->n_tasks, sizeof *p->tasks);
    if (!p->tasks) return slm_errf(q->r->err, SLM_ERR_NOMEM, "%s: out of memory for %d tasks", q->r->name, p->n_tasks);
    for (int i = 0; i < p->n_tasks; i++) {
        const uint8_t *e = d + (size_t)i * BLOB_TASK_SIZE;
        slm_task *t = &p->tasks[i];
        t->op = e[0];
        t->wtype = e[1];
        t->flags = rd16(e + 2);
        t->count = rd32(e + 4);
        int32_t v[8];
        memcpy(v, e + 8, sizeof v);
        t->m = v[0]; t->n = v[1]; t->k = v[2]; t->n0 = v[3]; t->n1 = v[4]; t->a = v[5]; t->b = v[6]; t->c = v[7];
        memcpy(&t->f0, e + 40, 4);
        t->layer = rdi32(e + 44);
        t->window = rdi32(e + 48);
        memcpy(&t->f1, e + 52, 4);
        for (int k = 0; k < SLM_TASK_NREF; k++) {
            const uint8_t *f = e + 56 + 16 * k;
            t->ref[k].space = f[0];
            t->ref[k].pad = 0;
            t->ref[k].io = rd16(f + 2);
            t->ref[k].ld = rd32(f + 4);
            t->ref[k].off = rd64u(f + 8);
        }
        t->lane = e[152];
        memcpy(t->tiles, e + 153, 3);
        memcpy(&t->f2, e + 156, 4);
    }
    slm_status s;
    int n_io_refs = 0;
    uint32_t stage = 0;
    for (int i = 0; i < p->n_tasks; i++) {
        if ((s = blob_check_task(q, i))) return s;
        const slm_task *t = &p->tasks[i];
        for (int k = 0; k < SLM_TASK_NREF; k++) n_io_refs += t->ref[k].space == SLM_SPACE_IO;
        if (t->op == SLM_T_BARRIER) {
            if (t->count != stage) return pbad(q, "task %d (barrier): count %u, the stage has %u tasks", i, t->count, stage);
            stage = 0;
        } else {
            stage++;
        }
    }
    if (p->tasks[p->n_tasks - 1].op != SLM_T_BARRIER) return pbad(q, "task %d: the list does not end with a barrier", p->n_tasks - 1);
    char why[160];
    if (slm_program_check_schedule(p, why, sizeof why)) return pbad(q, "%s", why);
    if (p->n_relocs != n_io_refs)
        return pbad(q, "n_relocs %d, but the tasks have %d I/O operands", p->n_relocs, n_io_refs);
    return SLM_OK;
}

static slm_status read_relocs(pctx *q, const uint8_t *d) {
    slm_program *p = q->p;
    p->relocs = slm_calloc((size_t)p->n_relocs + 1, sizeof *p->relocs);
    if (!p->relocs) return slm_errf(q->r->err, SLM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < p->n_relocs; i++) {
        slm_reloc *rl = &p->relocs[i];
        rl->task = rd32(d + 8 * (size_t)i);
        rl->field = rd16(d + 8 * (size_t)i + 4);
        rl->io = rd16(d + 8 * (size_t)i + 6);
        if (rl->task >= (uint32_t)p->n_tasks) return pbad(q, "relocation %d: task %u >= n_tasks %d", i, rl->task, p->n_tasks);
        if (rl->field >= SLM_TASK_NREF) return pbad(q, "relocation %d: field %u >= %d", i, rl->field, SLM_TASK_NREF);
        if (rl->io >= p->n_io) return pbad(q, "relocation %d: io %u >= n_io %d", i, rl->io, p->n_io);
        const slm_ref *rf = &p->tasks[rl->task].ref[rl->field];
        if (rf->space != SLM_SPACE_IO || rf->io != rl->io)
            return pbad(q, "relocation %d: task %u field %u is not an operand on I/O %u", i, rl->task, rl->field, rl->io);
        if (i > 0) {
            const slm_reloc *pr = &p->relocs[i - 1];
            int order = pr->io != rl->io ? (pr->io < rl->io ? -1 : 1)
                        : pr->task != rl->task ? (pr->task < rl->task ? -1 : 1)
                        : (pr->field < rl->field ? -1 : pr->field > rl->field);
            if (order >= 0) return pbad(q, "relocation %d: not sorted by (io, task, field) or duplicated", i);
        }
    }
    return SLM_OK;
}

static slm_status read_program_sect(rctx *r, pctx *q, uint32_t idx, const char *prefix, uint64_t recsize, uint64_t n,
                                    uint32_t *out) {
    char want[64];
    snprintf(want, sizeof want, "%s%s", prefix, q->p->name);
    if (idx == 0 || idx >= r->shnum) return pbad(q, "program %d (%s): section index %u for %s out of range", q->idx, q->p->name, idx, want);
    if (strcmp(sect_name(r, idx), want) != 0)
        return pbad(q, "program %d: section %u is named '%s', want '%s'", q->idx, idx, sect_name(r, idx), want);
    if (r->sh[idx].sh_type != SHT_PROGBITS || r->sh[idx].sh_size != recsize * n)
        return pbad(q, "program %d (%s): section %s: sh_size %llu, want %llu", q->idx, q->p->name, want,
                    (unsigned long long)r->sh[idx].sh_size, (unsigned long long)(recsize * n));
    *out = idx;
    return SLM_OK;
}

/* The compiler's program order: prefill, generate, verify, embed, embed
 * batch, then the batch decode programs (compiled last, at load). */
static int prog_order(int kind) { return kind == SLM_PROG_BATCH ? 8 : kind; }

static slm_status read_programs(rctx *r, uint32_t si) {
    slm_compiled *c = r->c;
    const Elf64_Shdr *s = &r->sh[si];
    if (s->sh_size != (uint64_t)c->n_progs * BLOB_PROG_SIZE)
        return rbad(r, "section .slm.programs: sh_size %llu, want n_progs %d x %d", (unsigned long long)s->sh_size, c->n_progs, BLOB_PROG_SIZE);
    const int n = c->n_progs;
    c->n_progs = 0;
    c->progs = slm_calloc((size_t)n, sizeof *c->progs);
    if (!c->progs) return slm_errf(r->err, SLM_ERR_NOMEM, "out of memory");
    const uint8_t *d = sect_data(r, si);
    slm_status st;
    int n_pre = 0, n_gen = 0, n_emb = 0, n_batch = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *e = d + (size_t)i * BLOB_PROG_SIZE;
        slm_program *p = &c->progs[i];
        c->n_progs = i + 1; /* freed on failure */
        pctx q = {r, p, i, ".slm.programs"};
        if (!nul_within(e, 24) || !e[0]) return pbad(&q, "program %d: name empty or not NUL-terminated", i);
        memcpy(p->name, e, 24);
        int32_t v[6];
        memcpy(v, e + 24, sizeof v);
        p->kind = (uint8_t)v[0];
        p->rows = v[1];
        p->kv_capacity = v[2];
        p->n_tasks = v[3];
        p->n_io = v[4];
        p->n_relocs = v[5];
        p->arena_bytes = rd64u(e + 48);
        const int embed = v[0] == SLM_PROG_EMBED || v[0] == SLM_PROG_EMBED_BATCH;
        if ((v[0] < SLM_PROG_PREFILL || v[0] > SLM_PROG_VERIFY) && !embed && v[0] != SLM_PROG_BATCH)
            return pbad(&q, "program %d (%s): kind %d unknown (1 prefill, 2 generate, 3 verify, 5 batch, 6 embed, 7 embed "
                        "batch)", i, p->name, v[0]);
        if (embed != 0 && !r->b->has_embed) return pbad(&q, "program %d (%s): an embedding program without .slm.embed", i, p->name);
        if (!embed && c->cfg.encoder) return pbad(&q, "program %d (%s): kind %d in an encoder's blob (embedding programs only)", i, p->name, v[0]);
        /* EMBED_BATCH: B regions of S rows (region S, rows B x S); the others none */
        p->region = rdi32(e + 68);
        if (v[0] == SLM_PROG_EMBED_BATCH ? p->region < 1 || p->rows % p->region || p->rows / p->region < 2 : p->region != 0)
            return pbad(&q, "program %d (%s): region %d with rows %d (embed batch: at least 2 regions; else 0)", i, p->name,
                        p->region, p->rows);
        if (p->kind == SLM_PROG_BATCH) { /* B rows of B sequences over n_seqs regions of kv_capacity rows */
            if (c->n_seqs < 2 || p->rows < 2 || p->rows > c->n_seqs)
                return pbad(&q, "program %d (%s): a batch program of rows %d, the config's n_seqs %d (want 2..n_seqs)", i,
                            p->name, p->rows, c->n_seqs);
            if ((int64_t)p->kv_capacity != (int64_t)c->n_seqs * c->kv_capacity)
                return pbad(&q, "program %d (%s): kv_capacity %d != n_seqs %d x kv_capacity %d", i, p->name,
                            p->kv_capacity, c->n_seqs, c->kv_capacity);
        } else {
            if (p->rows < 1 || p->rows > c->opt.max_prompt_len) return pbad(&q, "program %d (%s): rows %d out of range (1..%d)", i, p->name, p->rows, c->opt.max_prompt_len);
            if (p->kv_capacity < 1 || p->kv_capacity > c->kv_capacity)
                return pbad(&q, "program %d (%s): kv_capacity %d out of range (1..%d)", i, p->name, p->kv_capacity, c->kv_capacity);
            if (p->kind == SLM_PROG_GENERATE && p->rows != 1) return pbad(&q, "program %d (%s): a generate program has rows %d, want 1", i, p->name, p->rows);
            if (p->kind != SLM_PROG_GENERATE && p->kv_capacity != c->kv_capacity)
                return pbad(&q, "program %d (%s): kv_capacity %d != %d", i, p->name, p->kv_capacity, c->kv_capacity);
        }
        if (p->n_tasks < 1 || p->n_tasks > BLOB_MAX_TASKS) return pbad(&q, "program %d (%s): n_tasks %d out of range", i, p->name, p->n_tasks);
        if (p->n_io < 1 || p->n_io > BLOB_MAX_IO) return pbad(&q, "program %d (%s): n_io %d out of range", i, p->name, p->n_io);
        if (p->n_relocs < 0 || (int64_t)p->n_relocs > (int64_t)p->n_tasks * SLM_TASK_NREF)
            return pbad(&q, "program %d (%s): n_relocs %d out of range", i, p->name, p->n_relocs);
        if (p->arena_bytes > (1ull << 40)) return pbad(&q, "program %d (%s): arena_bytes %llu too large", i, p->name, (unsigned long long)p->arena_bytes);
        if (i > 0) {
            const slm_program *pp = &c->progs[i - 1];
            int ok = prog_order(pp->kind) < prog_order(p->kind) ||
                     (pp->kind == p->kind && (p->kind == SLM_PROG_GENERATE ? pp->kv_capacity < p->kv_capacity
                                              : p->kind == SLM_PROG_EMBED_BATCH ? pp->region < p->region
                                                                                : pp->rows < p->rows));
            if (!ok) return pbad(&q, "program %d (%s): programs not ordered (prefill by rows, generate by capacity, verify, "
                                 "embed by rows, embed batch by region, batch by rows)", i, p->name);
        }
        n_pre += p->kind == SLM_PROG_PREFILL;
        n_gen += p->kind == SLM_PROG_GENERATE;
        n_emb += p->kind == SLM_PROG_EMBED;
        n_batch += p->kind == SLM_PROG_BATCH;
        uint32_t ti, ii, ri;
        if ((st = read_program_sect(r, &q, rd32(e + 56), ".slm.tasks.", BLOB_TASK_SIZE, (uint64_t)p->n_tasks, &ti)) ||
            (st = read_program_sect(r, &q, rd32(e + 60), ".slm.io.", BLOB_IO_SIZE, (uint64_t)p->n_io, &ii)) ||
            (st = read_program_sect(r, &q, rd32(e + 64), ".slm.reloc.", BLOB_RELOC_SIZE, (uint64_t)p->n_relocs, &ri)))
            return st;
        pctx qi = {r, p, i, sect_name(r, ii)};
        if ((st = read_io(&qi, sect_data(r, ii)))) return st;
        pctx qt = {r, p, i, sect_name(r, ti)};
        if ((st = read_tasks(&qt, sect_data(r, ti)))) return st;
        pctx qr = {r, p, i, sect_name(r, ri)};
        if ((st = read_relocs(&qr, sect_data(r, ri)))) return st;
    }
    if ((c->n_seqs > 1) != (n_batch > 0))
        return rbad(r, "section .slm.programs: %d batch programs, the config's n_seqs is %d (batch programs exactly when "
                   "n_seqs > 1)", n_batch, c->n_seqs);
    if (r->b->has_embed) {
        if (!n_emb) return rbad(r, "section .slm.programs: .slm.embed without an embed program");
        const slm_program *eb = slm_largest(c, SLM_PROG_EMBED);
        if (eb->rows != c->opt.max_prompt_len)
            return rbad(r, "section .slm.programs: largest embed program has %d rows, max_prompt_len is %d", eb->rows,
                       c->opt.max_prompt_len);
        if (c->cfg.encoder) return SLM_OK;
    }
    if (!n_pre || !n_gen) return rbad(r, "section .slm.programs: needs a prefill and a generate program (%d, %d)", n_pre, n_gen);
    const slm_program *big = slm_largest(c, SLM_PROG_PREFILL), *gen = slm_largest(c, SLM_PROG_GENERATE);
    if (big->rows != c->opt.max_prompt_len) return rbad(r, "section .slm.programs: largest prefill has %d rows, max_prompt_len is %d", big->rows, c->opt.max_prompt_len);
    if (gen->kv_capacity != c->kv_capacity) return rbad(r, "section .slm.programs: largest generate has capacity %d, want %d", gen->kv_capacity, c->kv_capacity);
    return SLM_OK;
}

/* ---- tensors, meta -------------------------------------------------------- */

static slm_status read_tensors(rctx *r, uint32_t si) {
    const Elf64_Shdr *s = &r->sh[si];
    if (s->sh_size % BLOB_TENSOR_SIZE) return rbad(r, "section .slm.tensors: sh_size %llu not a multiple of %d", (unsigned long long)s->sh_size, BLOB_TENSOR_SIZE);
    uint64_t n = s->sh_size / BLOB_TENSOR_SIZE;
    if (n > 1000000) return rbad(r, "section .slm.tensors: %llu entries", (unsigned long long)n);
    const uint8_t *d = sect_data(r, si);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *e = d + i * BLOB_TENSOR_SIZE;
        uint64_t off = rd64u(e + 104), nb = rd64u(e + 112), end;
        if (!nul_within(e, 64)) return rbad(r, "section .slm.tensors: entry %llu: name not NUL-terminated", (unsigned long long)i);
        if (!slm_add_ok(off, nb, &end) || end > r->b->weights_size)
            return rbad(r, "section .slm.tensors: entry %llu (%s): offset 0x%llx + %llu beyond the weights section", (unsigned long long)i,
                       (const char *)e, (unsigned long long)off, (unsigned long long)nb);
        if (rd32(e + 68) > 4) return rbad(r, "section .slm.tensors: entry %llu (%s): n_dims %u", (unsigned long long)i, (const char *)e, rd32(e + 68));
    }
    r->b->tensors = d;
    r->b->n_tensors = (uint32_t)n;
    return SLM_OK;
}

static slm_status read_meta(rctx *r, uint32_t si) {
    const Elf64_Shdr *s = &r->sh[si];
    const uint8_t *d = sect_data(r, si);
    uint64_t n = s->sh_size;
    if (n < 4) return rbad(r, "section .slm.meta: sh_size %llu, need 4", (unsigned long long)n);
    uint32_t count = rd32(d);
    uint64_t o = 4;
    for (uint32_t i = 0; i < count; i++) {
        for (int kv = 0; kv < 2; kv++) {
            if (n - o < 4) return rbad(r, "section .slm.meta: entry %u: length beyond end", i);
            uint32_t len = rd32(d + o);
            o += 4;
            if (n - o < len) return rbad(r, "section .slm.meta: entry %u: %u bytes beyond end", i, len);
            o += len;
        }
    }
    if (o != n) return rbad(r, "section .slm.meta: %llu trailing bytes", (unsigned long long)(n - o));
    r->b->meta = d;
    r->b->meta_size = n;
    return SLM_OK;
}

int slm_blob_meta(const slm_blob *b, const char *key, const char **val, uint64_t *len) {
    if (!b->meta) return 0;
    const uint8_t *d = b->meta;
    uint32_t count = rd32(d);
    uint64_t o = 4;
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t klen = rd32(d + o);
        const uint8_t *k = d + o + 4;
        o += 4 + klen;
        uint32_t vlen = rd32(d + o);
        const uint8_t *v = d + o + 4;
        o += 4 + vlen;
        if (klen == kl && memcmp(k, key, kl) == 0) {
            *val = (const char *)v;
            *len = vlen;
            return 1;
        }
    }
    return 0;
}

/* ---- open ------------------------------------------------------------------ */

static slm_status open_impl(rctx *r, unsigned flags, slm_tokenizer **tok) {
    slm_blob *b = r->b;
    slm_compiled *c = r->c;
    Elf64_Shdr *sh = NULL;
    slm_status s;
    uint32_t s_ident, s_config, s_progs, s_const, s_tens, s_tok, s_meta, s_w;
    if ((s = read_elf(r, &sh))) goto out;
    if ((s = need_sect(r, ".slm.ident", &s_ident)) || (s = need_sect(r, ".slm.config", &s_config)) ||
        (s = need_sect(r, ".slm.programs", &s_progs)) || (s = need_sect(r, ".slm.const", &s_const)) ||
        (s = need_sect(r, ".slm.tensors", &s_tens)) || (s = need_sect(r, ".slm.tok", &s_tok)) ||
        (s = need_sect(r, ".slm.meta", &s_meta)) || (s = need_sect(r, ".slm.weights", &s_w)))
        goto out;
    if ((s = read_ident(r, s_ident))) goto out;
    const int64_t s_embed = find_sect(r, ".slm.embed"); /* only with embedding programs */
    if (s_embed < 0) {
        s = SLM_ERR_FORMAT;
        goto out;
    }
    if (s_embed && sh[s_embed].sh_type != SHT_PROGBITS) {
        s = rbad(r, "section .slm.embed: sh_type %u, want PROGBITS", sh[s_embed].sh_type);
        goto out;
    }
    /* the weights: last, page-aligned, up to the end of the file; everything
     * else (and the section header table) before them */
    const Elf64_Shdr *w = &sh[s_w];
    if (w->sh_offset % SLM_BLOB_PAGE || w->sh_size == 0 || w->sh_offset + w->sh_size != b->size) {
        s = rbad(r, "section .slm.weights: sh_offset 0x%llx, sh_size 0x%llx: must be page-aligned and end the file (%llu bytes)",
                (unsigned long long)w->sh_offset, (unsigned long long)w->sh_size, (unsigned long long)b->size);
        goto out;
    }
    Elf64_Ehdr eh;
    memcpy(&eh, b->data, sizeof eh);
    if (eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > w->sh_offset) {
        s = rbad(r, "ELF header: e_shoff: the section header table overlaps the weights");
        goto out;
    }
    for (uint32_t i = 1; i < r->shnum; i++) {
        if (i == s_w || sh[i].sh_type == SHT_NOBITS || sh[i].sh_size == 0) continue;
        if (sh[i].sh_offset + sh[i].sh_size > w->sh_offset) {
            s = rbad(r, "section %s: sh_offset 0x%llx overlaps the weights", sect_name(r, i), (unsigned long long)sh[i].sh_offset);
            goto out;
        }
    }
    b->weights = b->data + w->sh_offset;
    b->weights_size = w->sh_size;
    if (!(flags & SLM_BLOB_NO_CHECKSUM)) {
        uint64_t at = sh[s_ident].sh_offset + BLOB_IDENT_CHECKSUM_OFF;
        static const uint8_t zero[8];
        slm_hash h;
        slm_hash_init(&h, 0x636b736dull);
        slm_hash_update(&h, b->data, (size_t)at);
        slm_hash_update(&h, zero, 8);
        slm_hash_update(&h, b->data + at + 8, (size_t)(w->sh_offset - at - 8));
        uint64_t want = rd64u(b->data + at), got = slm_hash_final(&h);
        if (want != got) {
            s = rbad(r, "section .slm.ident: checksum %016llx, the bytes before the weights hash to %016llx (the file is damaged)",
                    (unsigned long long)want, (unsigned long long)got);
            goto out;
        }
    }
    if ((s_embed && (s = blob_read_embed(r, sect_data(r, (uint32_t)s_embed), sh[s_embed].sh_size))) || (s = read_config(r, s_config))) goto out;
    if (sh[s_const].sh_size != r->const_bytes || sh[s_const].sh_offset % 4) {
        s = rbad(r, "section .slm.const: sh_size %llu, want const_bytes %llu", (unsigned long long)sh[s_const].sh_size,
                (unsigned long long)r->const_bytes);
        goto out;
    }
    if ((s = read_programs(r, s_progs))) goto out;
    if ((s = read_tensors(r, s_tens)) || (s = read_meta(r, s_meta))) goto out;
    if (b->has_embed && (s = blob_check_heads(r))) goto out;
    c->consts.bytes = r->const_bytes;
    c->consts.rope = slm_aligned_alloc((size_t)r->const_bytes + 64);
    if (!c->consts.rope) {
        s = slm_errf(r->err, SLM_ERR_NOMEM, "%s: out of memory", r->name);
        goto out;
    }
    memcpy(c->consts.rope, sect_data(r, s_const), (size_t)r->const_bytes);
    char tname[160];
    snprintf(tname, sizeof tname, "%s: section .slm.tok", r->name);
    if ((s = slm_tok_load_mem(tok, sect_data(r, s_tok), (size_t)sh[s_tok].sh_size, tname, r->err))) goto out;
    if (!slm_tok_fits_vocab(*tok, c->cfg.vocab_size)) { /* the source's load's rule */
        s = rbad(r, "section .slm.tok: %d tokens, the model's vocabulary is %d%s", slm_tok_vocab_size(*tok), c->cfg.vocab_size,
                 slm_tok_is_bpe(*tok) ? "" : " (only a BPE vocabulary may be shorter)");
        goto out;
    }
    b->n_sections = r->shnum;
out:
    slm_xfree(sh);
    return s;
}

slm_status slm_blob_open_mem(slm_blob *b, const void *data, uint64_t size, const char *name, unsigned flags,
                             slm_compiled *comp, slm_tokenizer **tok, slm_err *err) {
    memset(b, 0, sizeof *b);
    memset(comp, 0, sizeof *comp);
    *tok = NULL;
    snprintf(b->name, sizeof b->name, "%s", name ? name : "blob");
    b->data = data;
    b->size = size;
    rctx r;
    memset(&r, 0, sizeof r);
    r.b = b;
    r.err = err;
    r.name = b->name;
    r.c = comp;
    slm_status s = open_impl(&r, flags, tok);
    if (s) {
        slm_tok_free(*tok);
        *tok = NULL;
        slm_compiled_free(comp);
        b->data = NULL;
        b->size = 0;
    }
    return s;
}

slm_status slm_blob_open(slm_blob *b, const char *path, unsigned flags, slm_compiled *comp, slm_tokenizer **tok,
                         slm_err *err) {
    slm_map map;
    memset(b, 0, sizeof *b);
    slm_status s = slm_map_file(&map, path, err);
    if (s) {
        memset(comp, 0, sizeof *comp);
        *tok = NULL;
        return s;
    }
    s = slm_blob_open_mem(b, map.data, map.size, slm_basename(path), flags, comp, tok, err);
    if (s) {
        slm_unmap(&map);
        return s;
    }
    b->map = map;
    return SLM_OK;
}

void slm_blob_close(slm_blob *b) {
    if (!b) return;
    slm_unmap(&b->map);
    memset(b, 0, sizeof *b);
}

int slm_blob_is_elf(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    unsigned char m[4];
    ssize_t n = read(fd, m, 4);
    close(fd);
    return n == 4 && memcmp(m, ELFMAG, SELFMAG) == 0;
}

slm_status slm_blob_verify_weights(const slm_blob *b, slm_err *err) {
    uint64_t h = slm_hash64(b->weights, (size_t)b->weights_size, 0x77656967ull);
    if (h != b->ident.weights_hash)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: section .slm.weights: hash %016llx, the identity record says %016llx",
                        b->name, (unsigned long long)h, (unsigned long long)b->ident.weights_hash);
    return SLM_OK;
}
