/* Loading a blob: map, check, validate everything, then build the heap
 * copies of the programs (immutable; the device binds its own copies).
 * Nothing from the file is used before it has been checked; every message
 * names the section and the field. */
#include <fcntl.h>
#include <unistd.h>

#include "blob/format.h"
#include "compiler/amx_plan.h"
#include "device/kernels.h"

typedef struct rctx {
    slm_blob *b;
    slm_err *err;
    const char *name;
    const Elf64_Shdr *sh;   /* [shnum], copied out of the file */
    uint32_t shnum;
    const char *shstr;
    uint64_t shstr_size;
    slm_compiled *c;
    uint64_t const_bytes;
    uint64_t table_bytes;   /* one RoPE table (const_bytes holds one or two) */
} rctx;

static slm_status bad(rctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static slm_status bad(rctx *r, const char *fmt, ...) {
    char msg[SLM_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return slm_errf(r->err, SLM_ERR_FORMAT, "%s: %s", r->name, msg);
}

static const char *sect_name(const rctx *r, uint32_t i) { return r->shstr + r->sh[i].sh_name; }

static const uint8_t *sect_data(const rctx *r, uint32_t i) { return r->b->data + r->sh[i].sh_offset; }

/* Find a section by name; 0 if absent, -1 (with err set) if duplicated. */
static int64_t find_sect(rctx *r, const char *name) {
    int64_t found = 0;
    for (uint32_t i = 1; i < r->shnum; i++)
        if (!strcmp(sect_name(r, i), name)) {
            if (found) {
                bad(r, "section %s: appears twice (sections %lld and %u)", name, (long long)found, i);
                return -1;
            }
            found = i;
        }
    return found;
}

static slm_status need_sect(rctx *r, const char *name, uint32_t *idx) {
    int64_t i = find_sect(r, name);
    if (i < 0) return SLM_ERR_FORMAT;
    if (i == 0) return bad(r, "section %s: missing", name);
    if (r->sh[i].sh_type != SHT_PROGBITS) return bad(r, "section %s: sh_type %u, want PROGBITS", name, r->sh[i].sh_type);
    *idx = (uint32_t)i;
    return SLM_OK;
}

static int nul_within(const uint8_t *p, size_t n) { return memchr(p, 0, n) != NULL; }

/* ---- ELF structure ------------------------------------------------------ */

static slm_status read_elf(rctx *r, Elf64_Shdr **out_sh) {
    const slm_blob *b = r->b;
    Elf64_Ehdr eh;
    if (b->size < sizeof eh) return bad(r, "ELF header: file is %llu bytes, need %zu", (unsigned long long)b->size, sizeof eh);
    memcpy(&eh, b->data, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return bad(r, "ELF header: e_ident: no ELF magic");
    if (eh.e_ident[EI_CLASS] != ELFCLASS64) return bad(r, "ELF header: e_ident[EI_CLASS] %u, want ELFCLASS64", eh.e_ident[EI_CLASS]);
    if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return bad(r, "ELF header: e_ident[EI_DATA] %u, want little endian", eh.e_ident[EI_DATA]);
    if (eh.e_ident[EI_VERSION] != EV_CURRENT || eh.e_version != EV_CURRENT) return bad(r, "ELF header: e_version not EV_CURRENT");
    if (eh.e_ehsize != sizeof eh) return bad(r, "ELF header: e_ehsize %u, want %zu", eh.e_ehsize, sizeof eh);
    if (eh.e_shentsize != sizeof(Elf64_Shdr)) return bad(r, "ELF header: e_shentsize %u, want %zu", eh.e_shentsize, sizeof(Elf64_Shdr));
    if (eh.e_shnum < 2 || eh.e_shnum > BLOB_MAX_SECTIONS) return bad(r, "ELF header: e_shnum %u out of range (2..%d)", eh.e_shnum, BLOB_MAX_SECTIONS);
    uint64_t end;
    if (eh.e_shoff % 8 || !slm_add_ok(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), &end) || end > b->size)
        return bad(r, "ELF header: e_shoff 0x%llx: section header table (%u entries) beyond end of file (%llu bytes)",
                   (unsigned long long)eh.e_shoff, eh.e_shnum, (unsigned long long)b->size);
    if (eh.e_shstrndx == 0 || eh.e_shstrndx >= eh.e_shnum) return bad(r, "ELF header: e_shstrndx %u out of range", eh.e_shstrndx);
    Elf64_Shdr *sh = slm_calloc(eh.e_shnum, sizeof *sh);
    if (!sh) return slm_errf(r->err, SLM_ERR_NOMEM, "%s: out of memory", r->name);
    *out_sh = sh;
    memcpy(sh, b->data + eh.e_shoff, (size_t)eh.e_shnum * sizeof *sh);
    r->sh = sh;
    r->shnum = eh.e_shnum;
    const Elf64_Shdr *ss = &sh[eh.e_shstrndx];
    if (!slm_add_ok(ss->sh_offset, ss->sh_size, &end) || end > b->size)
        return bad(r, "section header %u (.shstrtab): sh_offset 0x%llx + sh_size 0x%llx beyond end of file (%llu bytes)",
                   eh.e_shstrndx, (unsigned long long)ss->sh_offset, (unsigned long long)ss->sh_size,
                   (unsigned long long)b->size);
    if (ss->sh_type != SHT_STRTAB || ss->sh_size < 1 || b->data[ss->sh_offset + ss->sh_size - 1] != 0)
        return bad(r, "section header %u (.shstrtab): not a NUL-terminated string table", eh.e_shstrndx);
    r->shstr = (const char *)b->data + ss->sh_offset;
    r->shstr_size = ss->sh_size;
    for (uint32_t i = 1; i < r->shnum; i++)
        if (sh[i].sh_name >= r->shstr_size)
            return bad(r, "section header %u: sh_name %u beyond .shstrtab (%llu bytes)", i, sh[i].sh_name,
                       (unsigned long long)r->shstr_size);
    for (uint32_t i = 1; i < r->shnum; i++) {
        if (sh[i].sh_type == SHT_NOBITS) continue;
        if (!slm_add_ok(sh[i].sh_offset, sh[i].sh_size, &end) || end > b->size)
            return bad(r, "section %s (header %u): sh_offset 0x%llx + sh_size 0x%llx beyond end of file (%llu bytes)%s",
                       sect_name(r, i), i, (unsigned long long)sh[i].sh_offset, (unsigned long long)sh[i].sh_size,
                       (unsigned long long)b->size, end > b->size ? ": truncated" : "");
    }
    return SLM_OK;
}

/* ---- identity, config ---------------------------------------------------- */

static slm_status read_ident(rctx *r, uint32_t si) {
    const Elf64_Shdr *s = &r->sh[si];
    if (s->sh_size != BLOB_IDENT_SIZE) return bad(r, "section .slm.ident: sh_size %llu, want %d", (unsigned long long)s->sh_size, BLOB_IDENT_SIZE);
    const uint8_t *p = sect_data(r, si);
    if (memcmp(p, BLOB_IDENT_MAGIC, 8) != 0) return bad(r, "section .slm.ident: magic: not a staticlm blob");
    slm_blob_ident *id = &r->b->ident;
    id->format_version = rd32(p + 8);
    if (id->format_version != SLM_BLOB_FORMAT_VERSION)
        return bad(r, "section .slm.ident: format_version %u, this build reads %u (recompile the blob)", id->format_version,
                   SLM_BLOB_FORMAT_VERSION);
    if (rd32(p + 12) != BLOB_IDENT_SIZE) return bad(r, "section .slm.ident: record_size %u, want %d", rd32(p + 12), BLOB_IDENT_SIZE);
    id->identity = rd64u(p + 24);
    id->model_hash = rd64u(p + 32);
    id->model_bytes = rd64u(p + 40);
    id->tok_hash = rd64u(p + 48);
    id->tok_bytes = rd64u(p + 56);
    id->options_hash = rd64u(p + 64);
    id->weights_hash = rd64u(p + 72);
    if (!nul_within(p + 80, 64)) return bad(r, "section .slm.ident: source: not NUL-terminated");
    if (!nul_within(p + 144, 32)) return bad(r, "section .slm.ident: compiler: not NUL-terminated");
    memcpy(id->source, p + 80, 64);
    memcpy(id->compiler, p + 144, 32);
    return SLM_OK;
}

#define RANGE(v, lo, hi, what)                                                                          \
    do {                                                                                                \
        if ((int64_t)(v) < (int64_t)(lo) || (int64_t)(v) > (int64_t)(hi))                              \
            return bad(r, "section .slm.config: %s %lld out of range (%lld..%lld)", what, (long long)(v), \
                       (long long)(lo), (long long)(hi));                                               \
    } while (0)

static slm_status read_config(rctx *r, uint32_t si) {
    const Elf64_Shdr *s = &r->sh[si];
    if (s->sh_size != BLOB_CONFIG_SIZE) return bad(r, "section .slm.config: sh_size %llu, want %d", (unsigned long long)s->sh_size, BLOB_CONFIG_SIZE);
    const uint8_t *p = sect_data(r, si);
    slm_compiled *c = r->c;
    slm_model_config *m = &c->cfg;
    blob_get_config(p, m);
    if (!nul_within((const uint8_t *)m->arch, sizeof m->arch)) return bad(r, "section .slm.config: arch: not NUL-terminated");
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
    if (m->n_heads % m->n_kv_heads) return bad(r, "section .slm.config: n_heads %d not a multiple of n_kv_heads %d", m->n_heads, m->n_kv_heads);
    if (m->head_dim % 2) return bad(r, "section .slm.config: head_dim %d is odd", m->head_dim);
    if ((int64_t)m->n_kv_heads * m->head_dim > BLOB_MAX_DIM) return bad(r, "section .slm.config: kv_dim too large");
    blob_get_options(p + BLOB_CFG_OPTIONS, &c->opt);
    c->kv_capacity = rdi32(p + BLOB_CFG_TAIL);
    int32_t n_progs = rdi32(p + BLOB_CFG_TAIL + 4);
    c->consts.rope_pos = rdi32(p + BLOB_CFG_TAIL + 8);
    c->consts.rope_pairs = rdi32(p + BLOB_CFG_TAIL + 12);
    r->const_bytes = rd64u(p + BLOB_CFG_CONST_BYTES);
    RANGE(c->kv_capacity, 1, BLOB_MAX_CAPACITY, "kv_capacity");
    RANGE(n_progs, 2, BLOB_MAX_PROGS, "n_progs");
    RANGE(c->opt.max_prompt_len, 1, c->kv_capacity, "max_prompt_len");
    RANGE(c->opt.min_response_len, 0, c->kv_capacity, "min_response_len");
    RANGE(c->opt.lm_head_separate, 0, 0, "lm_head_separate");
    RANGE(c->opt.tile_kb, 0, 1 << 20, "tile_kb");
    RANGE(c->opt.prefetch_off, 0, 1, "prefetch_off");
    if (!slm_kv_type_ok(c->opt.kv_type) || (c->opt.kv_type == SLM_Q8_0 && m->head_dim % SLM_QK8_0) || (c->opt.kv_type && m->head_dim > 512))
        return bad(r, "section .slm.config: kv_type %d with head_dim %d: not f32 (0), f16 (1, head_dim <= 512) or q8_0 (8, head_dim a multiple of 32 up to 512)", c->opt.kv_type, m->head_dim);
    if (c->opt.max_prompt_len + c->opt.min_response_len != c->kv_capacity)
        return bad(r, "section .slm.config: max_prompt_len %d + min_response_len %d != kv_capacity %d", c->opt.max_prompt_len,
                   c->opt.min_response_len, c->kv_capacity);
    if (c->consts.rope_pos != c->kv_capacity) return bad(r, "section .slm.config: rope_pos %d != kv_capacity %d", c->consts.rope_pos, c->kv_capacity);
    blob_get_family(p + BLOB_CFG_FAMILY, m);
    RANGE(m->rope_dims, 0, m->head_dim, "rope_dims");
    if (m->rope_dims % 2 || (m->rope_dims && !m->rope_neox)) return bad(r, "section .slm.config: rope_dims %d odd or not neox", m->rope_dims);
    RANGE(m->qk_norm, 0, 2, "qk_norm");
    RANGE(m->no_pre_norms, 0, 1, "no_pre_norms");
    if (!(m->residual_scale >= 0.0f && m->residual_scale < 1e9f) || !(m->logit_scale >= 0.0f && m->logit_scale < 1e9f))
        return bad(r, "section .slm.config: residual_scale %g / logit_scale %g out of range", (double)m->residual_scale,
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
    if (!(m->swiglu_alpha >= 0.0f && m->swiglu_alpha < 1e6f) || !(m->swiglu_limit >= 0.0f && m->swiglu_limit < 1e6f))
        return bad(r, "section .slm.config: swiglu_alpha %g / swiglu_limit %g out of range", (double)m->swiglu_alpha,
                   (double)m->swiglu_limit);
    {
        const float f[] = {m->embed_scale, m->attn_scale, m->attn_softcap, m->final_softcap, m->rope_base_swa,
                           m->rope_scale_swa, m->rope_attn_factor, m->yarn_beta_fast, m->yarn_beta_slow,
                           m->yarn_ext_factor};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            if (!(f[i] >= 0.0f && f[i] < 1e9f)) return bad(r, "section .slm.config: family value %zu (%g) out of range", i, (double)f[i]);
    }
    const int rot = m->rope_dims ? m->rope_dims : m->head_dim;
    if (c->consts.rope_pairs != rot / 2) return bad(r, "section .slm.config: rope_pairs %d != rotated dims / 2 (%d)", c->consts.rope_pairs, rot / 2);
    r->table_bytes = (uint64_t)c->kv_capacity * (uint64_t)c->consts.rope_pairs * 8;
    if (r->const_bytes != r->table_bytes && r->const_bytes != 2 * r->table_bytes)
        return bad(r, "section .slm.config: const_bytes %llu != one or two tables of kv_capacity * rope_pairs * 8", (unsigned long long)r->const_bytes);
    uint64_t kv;
    if (!slm_mul_ok((uint64_t)m->n_layers * 8, (uint64_t)c->kv_capacity, &kv) ||
        !slm_mul_ok(kv, (uint64_t)m->n_kv_heads * (uint64_t)m->head_dim, &kv) || kv > (1ull << 40))
        return bad(r, "section .slm.config: KV cache of n_layers x kv_capacity x kv_dim too large");
    c->n_progs = n_progs;
    return SLM_OK;
}

/* ---- programs ------------------------------------------------------------- */

typedef struct pctx {
    rctx *r;
    slm_program *p;
    int idx;
    const char *sec;  /* section name for messages */
} pctx;

static slm_status pbad(pctx *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static slm_status pbad(pctx *q, const char *fmt, ...) {
    char msg[SLM_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return slm_errf(q->r->err, SLM_ERR_FORMAT, "%s: section %s: %s", q->r->name, q->sec, msg);
}

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
    const int L = m->n_layers, kv_dim = m->n_kv_heads * m->head_dim;
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
        int want_out = role == SLM_IO_PRESENT_KEY || role == SLM_IO_PRESENT_VALUE || role == SLM_IO_LOGITS;
        int want_rows = 0, want_cols = 1;
        if (role <= SLM_IO_NONE || role >= SLM_IO_ROLE_COUNT) { s = pbad(q, "I/O %d (%s): role %d unknown", i, io->name, role); break; }
        if (io->is_output != want_out) { s = pbad(q, "I/O %d (%s): is_output %d, want %d", i, io->name, io->is_output, want_out); break; }
        if (io->dtype != io_dtype_for(q, role)) { s = pbad(q, "I/O %d (%s): dtype %u, want %s", i, io->name, io->dtype, slm_dtype_name((uint32_t)io_dtype_for(q, role))); break; }
        if (kvrole ? (io->layer < 0 || io->layer >= L) : io->layer != -1) { s = pbad(q, "I/O %d (%s): layer %d out of range", i, io->name, io->layer); break; }
        switch (role) {
        case SLM_IO_INPUT_IDS: case SLM_IO_POSITION_IDS: case SLM_IO_CACHE_POSITION: want_rows = p->rows; break;
        case SLM_IO_ATTENTION_MASK: want_rows = p->kv_capacity; break;
        case SLM_IO_PAST_KEY: case SLM_IO_PAST_VALUE: want_rows = p->kv_capacity; want_cols = kv_dim; break;
        case SLM_IO_PRESENT_KEY: case SLM_IO_PRESENT_VALUE: want_rows = p->rows; want_cols = kv_dim; break;
        case SLM_IO_LOGITS: want_rows = p->kind == SLM_PROG_VERIFY ? p->rows : 1; want_cols = m->vocab_size; break;
        default: break;
        }
        if (io->rows != want_rows || io->cols != want_cols) {
            s = pbad(q, "I/O %d (%s): shape [%d,%d], want [%d,%d]", i, io->name, io->rows, io->cols, want_rows, want_cols);
            break;
        }
        size_t slot = (size_t)role * (size_t)L + (size_t)(kvrole ? io->layer : 0);
        if (seen[slot]) { s = pbad(q, "I/O %d (%s): role %s appears twice", i, io->name, slm_io_role_name((slm_io_role)role)); break; }
        seen[slot] = 1;
    }
    if (!s && p->n_io != 5 + 4 * L)
        s = pbad(q, "n_io %d, want %d (ids, positions, cache positions, mask, logits, 4 per layer)", p->n_io, 5 + 4 * L);
    slm_xfree(seen);
    return s;
}

/* Bytes a reference may touch must lie in its space. */
static slm_status check_ref(pctx *q, int ti, int k, uint64_t ext, int is_dst) {
    const slm_program *p = q->p;
    const slm_task *t = &p->tasks[ti];
    const slm_ref *rf = &t->ref[k];
    static const char *const fn[SLM_TASK_NREF] = {"src0", "src1", "src2", "src3", "src4", "dst"};
    uint64_t limit = 0, end;
    const char *space = "?";
    if (rf->off % 4) return pbad(q, "task %d: %s: offset 0x%llx not 4-byte aligned", ti, fn[k], (unsigned long long)rf->off);
    switch (rf->space) {
    case SLM_SPACE_WEIGHTS: limit = q->r->b->weights_size; space = "weights"; break;
    case SLM_SPACE_CONST: limit = q->r->const_bytes; space = "constants"; break;
    case SLM_SPACE_ARENA: limit = p->arena_bytes; space = "arena"; break;
    case SLM_SPACE_IO: {
        if (rf->io >= p->n_io) return pbad(q, "task %d: %s: I/O index %u >= n_io %d", ti, fn[k], rf->io, p->n_io);
        const slm_io_desc *d = &p->io[rf->io];
        limit = (uint64_t)d->rows * blob_io_bytes(d->dtype, (uint64_t)d->cols);
        space = d->name;
        if (d->role == SLM_IO_PRESENT_KEY || d->role == SLM_IO_PRESENT_VALUE) {
            /* present.* are views at the write index: only compact writes stay in the KV buffer */
            if (!is_dst || !((t->flags & SLM_TF_DST_COMPACT) || (t->flags & SLM_TF_ONE_ROW)) ||
                (d->dtype == SLM_F32 ? t->op != SLM_T_MATMUL && t->op != SLM_T_ROPE && t->op != SLM_T_BIAS && t->op != SLM_T_RMSNORM
                                     : t->op != SLM_T_KV_STORE))
                return pbad(q, "task %d (%s): %s: %s only as a compact %s destination", ti, slm_task_op_name(t->op),
                            fn[k], d->name, d->dtype == SLM_F32 ? "matmul/rope/bias/rmsnorm" : "kv_store");
        }
        break;
    }
    default:
        return pbad(q, "task %d (%s): %s: space %u invalid for this operand", ti, slm_task_op_name(t->op), fn[k], rf->space);
    }
    if (!slm_add_ok(rf->off, ext, &end) || end > limit)
        return pbad(q, "task %d (%s): %s: bytes [0x%llx, +0x%llx) beyond %s (%llu bytes)", ti, slm_task_op_name(t->op), fn[k],
                    (unsigned long long)rf->off, (unsigned long long)ext, space, (unsigned long long)limit);
    return SLM_OK;
}

/* Extent of rows [0, rows) of width w floats with stride ld floats. */
static int mat_ext(uint64_t rows, uint64_t ld, uint64_t w, uint64_t *ext) {
    uint64_t x;
    if (rows == 0 || w == 0) return 0;
    if (rows > 1 && ld < w) return 0;
    if (!slm_mul_ok(rows - 1, ld, &x) || !slm_add_ok(x, w, &x) || !slm_mul_ok(x, 4, &x)) return 0;
    *ext = x;
    return 1;
}

static int embed_type_ok(uint32_t wtype) {
    if (slm_is_r16(wtype)) return slm_matmul_supported(wtype);
    const slm_dtype_info *di = slm_dtype_get(wtype);
    if (!di || !di->name || di->block == 0 || di->block > 256 || di->bytes > 1024) return 0;
    uint8_t zeros[1024];
    float out[256];
    memset(zeros, 0, sizeof zeros);
    return slm_dequantize_row(wtype, zeros, out, di->block) != 0;
}

/* The fields the qwen3 / gemma / phi3 programs use: GeGLU, the logit and
 * score caps (f1), the embedding and query scales (f0). */
static slm_status check_family_fields(pctx *q, int ti) {
    const slm_task *t = &q->p->tasks[ti];
    const char *op = slm_task_op_name(t->op);
    if ((t->flags & SLM_TF_GELU) && t->op != SLM_T_SWIGLU && !(t->op == SLM_T_MATMUL && (t->flags & SLM_TF_PRE_SWIGLU)))
        return pbad(q, "task %d (%s): flag GELU without a swiglu", ti, op);
    const int post_cap = (t->flags & SLM_TF_POST_SOFTCAP) != 0;
    if (post_cap && (t->op != SLM_T_MATMUL || (t->flags & (SLM_TF_POST_ADD | SLM_TF_POST_ROPE))))
        return pbad(q, "task %d (%s): a soft-cap epilogue on a non-matmul task or with another epilogue", ti, op);
    /* f1 on an expert's swiglu prologue: the clamped SwiGLU's limit (gpt-oss) */
    const int oai = t->op == SLM_T_MATMUL && (t->flags & SLM_TF_EXPERT) && (t->flags & SLM_TF_PRE_SWIGLU) && !post_cap;
    if (oai && t->f1 != 0.0f && !(t->f0 > 0.0f && t->f0 < 1e6f))
        return pbad(q, "task %d (%s): clamped swiglu alpha f0 %g out of range", ti, op, (double)t->f0);
    if ((t->flags & SLM_TF_SINKS) && ((t->op != SLM_T_ATTENTION && t->op != SLM_T_ATTN_MERGE) ||
                                      (t->flags & SLM_TF_KEY_PARTS) || t->f1 != 0.0f))
        return pbad(q, "task %d (%s): sinks on a task other than an uncapped attention or a merge", ti, op);
    if (!(t->f1 >= 0.0f && t->f1 < 1e9f) || (post_cap && !(t->f1 > 0.0f)) ||
        (t->f1 != 0.0f && t->op != SLM_T_ATTENTION && !post_cap && !oai))
        return pbad(q, "task %d (%s): f1 %g out of range for this task", ti, op, (double)t->f1);
    const int post_scale = (t->flags & SLM_TF_POST_SCALE) != 0;
    if ((post_scale && (t->op != SLM_T_MATMUL || !(t->f2 > 0.0f && t->f2 < 1e9f))) ||
        (!post_scale && t->f2 != 0.0f && t->op != SLM_T_MOE_COMBINE))
        return pbad(q, "task %d (%s): scale f2 %g out of range for this task", ti, op, (double)t->f2);
    if ((t->op == SLM_T_EMBED || t->op == SLM_T_ATTENTION) && !(t->f0 >= 0.0f && t->f0 < 1e9f))
        return pbad(q, "task %d (%s): scale f0 %g out of range", ti, op, (double)t->f0);
    return SLM_OK;
}

/* The matmul prologue and epilogue flags: on matmuls only, one of each kind. */
static slm_status check_prologue_epilogue(pctx *q, int ti) {
    const slm_task *t = &q->p->tasks[ti];
    const char *op = slm_task_op_name(t->op);
    const unsigned pre = t->flags & (SLM_TF_PRE_NORM | SLM_TF_PRE_SWIGLU);
    if (pre && t->op != SLM_T_MATMUL) return pbad(q, "task %d (%s): an input prologue on a non-matmul task", ti, op);
    if (pre == (SLM_TF_PRE_NORM | SLM_TF_PRE_SWIGLU)) return pbad(q, "task %d (%s): two input prologues", ti, op);
    const int post_rope = (t->flags & SLM_TF_POST_ROPE) != 0;
    if (post_rope && t->op != SLM_T_MATMUL) return pbad(q, "task %d (%s): a rope epilogue on a non-matmul task", ti, op);
    if ((t->flags & SLM_TF_POST_ADD) && (t->op != SLM_T_MATMUL || post_rope))
        return pbad(q, "task %d (%s): an add epilogue on a non-matmul task or with a rope epilogue", ti, op);
    if ((t->flags & SLM_TF_NEOX) && t->op != SLM_T_ROPE && !post_rope)
        return pbad(q, "task %d (%s): flag NEOX on a non-rope task", ti, op);
    return SLM_OK;
}

/* A rope's rotated dimensions (b, or the head size c): the table's pairs;
 * only the neox layout rotates part of a head. */
static int rope_dims_ok(const pctx *q, const slm_task *t) {
    const int rot = t->b ? t->b : t->c;
    if (t->b && (t->b < 0 || t->b > t->c || t->b % 2 || !(t->flags & SLM_TF_NEOX))) return 0;
    return rot / 2 == q->r->c->consts.rope_pairs;
}

/* The checks every task validator uses: a failed condition returns the message; an operand
 * is marked used and its extent checked; MAT: rows of a matrix; KVR: rows of the KV cache. */
#define NEED(cond, ...) do { if (!(cond)) return pbad(q, __VA_ARGS__); } while (0)
#define REF(k, e, dst) do { used |= 1u << (k); if ((s = check_ref(q, ti, k, e, dst))) return s; } while (0)
#define MAT(rows, k, w, dst) do { NEED(mat_ext(rows, t->ref[k].ld, w, &ext), "task %d (%s): operand %d: ld %u / width %llu incoherent", ti, op, k, t->ref[k].ld, (unsigned long long)(w)); REF(k, ext, dst); } while (0)
#define KVR(rows, k, w, dst) do { NEED(blob_kv_ext(q->p, &t->ref[k], t->wtype, rows, w, &ext), "task %d (%s): operand %d not rows of %s KV", ti, op, k, slm_dtype_name(t->wtype)); REF(k, ext, dst); } while (0)

/* A prefetch task: rows [n0, n1) of a matrix in the weights. */
static slm_status check_prefetch(pctx *q, int ti, unsigned *usedp) {
    const slm_task *t = &q->p->tasks[ti];
    const char *op = slm_task_op_name(t->op);
    unsigned used = 0;
    slm_status s;
    NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM && t->k >= 1 && t->k <= BLOB_MAX_DIM, "task %d (%s): n %d / k %d out of range", ti, op, t->n, t->k);
    NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->n, "task %d (%s): rows [%d,%d) not within [0,%d)", ti, op, t->n0, t->n1, t->n);
    NEED(t->flags == 0 && t->a >= 1 && t->b == 0, "task %d (%s): flags 0x%x / distance %d / b %d invalid", ti, op, t->flags, t->a, t->b);
    NEED(slm_matmul_supported(t->wtype), "task %d (%s): wtype %u not supported", ti, op, t->wtype);
    const uint64_t prow = slm_row_bytes(t->wtype, (uint64_t)t->k);
    NEED(prow > 0, "task %d (%s): k %d not a whole number of %s blocks", ti, op, t->k, slm_dtype_name(t->wtype));
    NEED(t->ref[SLM_REF_SRC1].space == SLM_SPACE_WEIGHTS, "task %d (%s): src1 must be in the weights", ti, op);
    REF(SLM_REF_SRC1, (uint64_t)t->n1 * prow, 0);
    *usedp |= used;
    return SLM_OK;
}

static slm_status check_matmul(pctx *q, int ti, unsigned *usedp) {
    const slm_program *p = q->p;
    const slm_task *t = &p->tasks[ti];
    const char *op = slm_task_op_name(t->op);
    const unsigned pre = t->flags & (SLM_TF_PRE_NORM | SLM_TF_PRE_SWIGLU);
    const int post_rope = (t->flags & SLM_TF_POST_ROPE) != 0, post_add = (t->flags & SLM_TF_POST_ADD) != 0;
    const uint64_t R = (t->flags & SLM_TF_ONE_ROW) ? 1 : (uint64_t)p->rows;
    unsigned used = 0;
    uint64_t ext;
    slm_status s;
    NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM && t->k >= 1 && t->k <= BLOB_MAX_DIM, "task %d (%s): n %d / k %d out of range", ti, op, t->n, t->k);
    NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->n, "task %d (%s): tile [%d,%d) not within [0,%d)", ti, op, t->n0, t->n1, t->n);
    NEED(slm_matmul_supported(t->wtype), "task %d (%s): wtype %u not supported", ti, op, t->wtype);
    NEED(t->a >= 0 && t->a <= SLM_STREAM_PREFETCH_MAX && t->a % 64 == 0,
         "task %d (%s): stream prefetch distance %d not a multiple of 64 in [0, %d]", ti, op, t->a, SLM_STREAM_PREFETCH_MAX);
    uint64_t row = slm_row_bytes(t->wtype, (uint64_t)t->k);
    NEED(row > 0, "task %d (%s): k %d not a whole number of %s blocks", ti, op, t->k, slm_dtype_name(t->wtype));
    NEED(t->ref[SLM_REF_SRC1].space == SLM_SPACE_WEIGHTS, "task %d (%s): src1 must be in the weights", ti, op);
    /* repacked weights: whole groups of 16 rows, and a tile reads the groups it cuts */
    NEED(!slm_is_r16(t->wtype) || t->n1 <= t->n / 16 * 16, "task %d (%s): tile [%d,%d) of %s weights beyond the %d "
         "repacked rows", ti, op, t->n0, t->n1, slm_dtype_name(t->wtype), t->n / 16 * 16);
    const int expert = (t->flags & SLM_TF_EXPERT) != 0, gather = (t->flags & SLM_TF_EXPERT_GATHER) != 0;
    NEED(!gather || expert, "task %d (%s): flag EXPERT_GATHER without EXPERT", ti, op);
    /* an expert's rows: the c * m (row, slot) pairs of the program; its table: the route's */
    uint64_t RX = R;
    if (expert) {
        NEED(!(t->flags & (SLM_TF_ONE_ROW | SLM_TF_DST_COMPACT | SLM_TF_SRC_COMPACT | SLM_TF_DST_CPOS | SLM_TF_PRE_NORM |
                           SLM_TF_POST_ROPE | SLM_TF_POST_ADD | SLM_TF_POST_SOFTCAP | SLM_TF_POST_SCALE | SLM_TF_GELU)) &&
             (gather ? pre == 0 : pre == SLM_TF_PRE_SWIGLU),
             "task %d (%s): expert flags 0x%x: gather, or the swiglu prologue, and nothing else", ti, op, t->flags);
        NEED(t->c >= 1 && t->c <= 64 && t->window >= t->c && t->window <= 1024 && t->b >= 0 && t->b < t->window,
             "task %d (%s): expert %d of %d, %d used: out of range", ti, op, t->b, t->window, t->c);
        NEED(t->ref[SLM_REF_SRC3].space == SLM_SPACE_ARENA, "task %d (%s): the routing table must be in the arena", ti, op);
        REF(SLM_REF_SRC3, (SLM_MOE_EXPERT(p->rows, t->c, t->b) + 2) * 4, 0);
        RX = R * (uint64_t)t->c;
        if (t->ref[SLM_REF_SRC4].space != SLM_SPACE_NONE) { /* the expert's bias */
            NEED(t->ref[SLM_REF_SRC4].space == SLM_SPACE_WEIGHTS, "task %d (%s): an expert's bias must be in the weights", ti, op);
            REF(SLM_REF_SRC4, (uint64_t)t->n * 4, 0);
        }
    }
    MAT(gather ? R : RX, SLM_REF_SRC0, (uint64_t)t->k, 0);
    REF(SLM_REF_SRC1, (uint64_t)(slm_is_r16(t->wtype) ? (t->n1 + 15) / 16 * 16 : t->n1) * row, 0);
    if (pre == SLM_TF_PRE_NORM) { /* rmsnorm gains: k floats in the weights */
        NEED(t->ref[SLM_REF_SRC2].space == SLM_SPACE_WEIGHTS, "task %d (%s): norm gains must be in the weights", ti, op);
        NEED(t->f0 >= 0.0f && t->f0 < 1.0f, "task %d (%s): eps %g out of range", ti, op, (double)t->f0);
        REF(SLM_REF_SRC2, (uint64_t)t->k * 4, 0);
    } else if (pre == SLM_TF_PRE_SWIGLU) { /* the up rows, shaped as src0 */
        MAT(RX, SLM_REF_SRC2, (uint64_t)t->k, 0);
    }
    NEED(!post_add || t->n0 % 16 == 0, "task %d (%s): add epilogue on a tile starting at column %d (not a multiple of 16)", ti, op, t->n0);
    if (post_rope) { /* as a ROPE task over the tile's columns */
        const int unit = (t->flags & SLM_TF_NEOX) ? t->c : 2;
        NEED(t->c >= 2 && t->c % 2 == 0 && rope_dims_ok(q, t), "task %d (%s): head_dim c %d / rotated b %d != 2 x rope_pairs", ti, op, t->c, t->b);
        NEED(t->n % t->c == 0 && t->n0 % unit == 0 && (t->n1 % unit == 0),
             "task %d (%s): tile [%d,%d) of width %d cuts a rotation (head_dim %d)", ti, op, t->n0, t->n1, t->n, t->c);
        NEED(t->ref[SLM_REF_SRC4].space == SLM_SPACE_CONST, "task %d (%s): src4 must be the constants", ti, op);
        REF(SLM_REF_SRC3, R * 4, 0);
        NEED(t->ref[SLM_REF_SRC4].off % q->r->table_bytes == 0, "task %d (%s): src4 not at a RoPE table", ti, op);
        REF(SLM_REF_SRC4, q->r->table_bytes, 0);
    }
    MAT(RX, SLM_REF_DST, (uint64_t)t->n1, 1);
    *usedp |= used;
    return SLM_OK;
}

static slm_status check_task(pctx *q, int ti) {
    const slm_program *p = q->p;
    const slm_task *t = &p->tasks[ti];
    const slm_model_config *m = &q->r->c->cfg;
    const char *op = slm_task_op_name(t->op);
    unsigned used = 0; /* bit per operand */
    uint64_t ext;
    slm_status s;
    if (t->op >= SLM_T_OP_COUNT) return pbad(q, "task %d: op %u unknown", ti, t->op);
    if (t->flags & ~(unsigned)(SLM_TF_ONE_ROW | SLM_TF_DST_COMPACT | SLM_TF_SRC_COMPACT | SLM_TF_NEOX | SLM_TF_PRE_NORM |
                               SLM_TF_PRE_SWIGLU | SLM_TF_POST_ROPE | SLM_TF_POST_ADD | SLM_TF_GELU | SLM_TF_POST_SOFTCAP |
                               SLM_TF_KEY_PARTS | SLM_TF_POST_SCALE | SLM_TF_EXPERT | SLM_TF_EXPERT_GATHER | SLM_TF_SINKS))
        return pbad(q, "task %d (%s): flags 0x%x unknown", ti, op, t->flags);
    if ((s = check_family_fields(q, ti)) || (s = check_prologue_epilogue(q, ti))) return s;
    if (t->window && t->op != SLM_T_ATTENTION && !(t->flags & SLM_TF_EXPERT))
        return pbad(q, "task %d (%s): window %d on a non-attention task", ti, op, t->window);
    if (t->m != p->rows) return pbad(q, "task %d (%s): m %d != program rows %d", ti, op, t->m, p->rows);
    if (t->layer < -1 || t->layer >= m->n_layers) return pbad(q, "task %d (%s): layer %d out of range", ti, op, t->layer);
    if (t->op != SLM_T_BARRIER && t->count) return pbad(q, "task %d (%s): count %u on a non-barrier", ti, op, t->count);
    if ((t->flags & SLM_TF_KEY_PARTS) &&
        (t->op != SLM_T_ATTENTION || t->tiles[1] < 2 || t->tiles[0] >= t->tiles[1] || t->tiles[2] || t->f1 != 0.0f))
        return pbad(q, "task %d (%s): key parts {%u, %u, %u} not {part < parts, parts >= 2, 0} of an uncapped attention", ti, op,
                    t->tiles[0], t->tiles[1], t->tiles[2]);
    if (t->op == SLM_T_ATTN_MERGE && (t->tiles[0] || t->tiles[1] < 2 || t->tiles[2]))
        return pbad(q, "task %d (%s): tiles {%u, %u, %u} not {0, parts >= 2, 0}", ti, op, t->tiles[0], t->tiles[1], t->tiles[2]);
    if (t->op == SLM_T_ATTENTION && !(t->flags & SLM_TF_KEY_PARTS) && (t->tiles[0] | t->tiles[1] | t->tiles[2]) &&
        !(t->tiles[1] >= 2 && t->tiles[0] < t->tiles[1] && !t->tiles[2] && p->rows >= 2 && !(t->flags & SLM_TF_ONE_ROW)))
        return pbad(q, "task %d (%s): row part tiles {%u, %u, %u} is not {part < parts, parts >= 2, 0} of a program of several rows",
                    ti, op, t->tiles[0], t->tiles[1], t->tiles[2]);
    if (t->op != SLM_T_MATMUL && t->op != SLM_T_ATTENTION && t->op != SLM_T_ATTN_MERGE && (t->tiles[0] | t->tiles[1] | t->tiles[2]))
        return pbad(q, "task %d (%s): tiles %ux%u k=%u on a task that is not a matrix multiply", ti, op, t->tiles[0], t->tiles[1],
                    t->tiles[2]);
    const uint64_t R = (t->flags & SLM_TF_ONE_ROW) ? 1 : (uint64_t)p->rows;
    const uint64_t C = (uint64_t)p->kv_capacity;
    switch (t->op) {
    case SLM_T_NOP: case SLM_T_BARRIER: break; /* counts: slm_program_check_schedule */
    case SLM_T_PREFETCH:
        if ((s = check_prefetch(q, ti, &used))) return s;
        break;
    case SLM_T_COPY_ROW:
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM, "task %d (%s): n %d out of range", ti, op, t->n);
        MAT((uint64_t)p->rows, SLM_REF_SRC0, (uint64_t)t->n, 0);
        MAT(1, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    case SLM_T_EMBED: {
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM && t->k >= 1 && t->k <= BLOB_MAX_DIM, "task %d (%s): n %d / k %d out of range", ti, op, t->n, t->k);
        NEED(embed_type_ok(t->wtype), "task %d (%s): wtype %u not supported", ti, op, t->wtype);
        uint64_t row = slm_row_bytes(t->wtype, (uint64_t)t->n);
        NEED(row > 0, "task %d (%s): n %d not a whole number of %s blocks", ti, op, t->n, slm_dtype_name(t->wtype));
        NEED(t->ref[SLM_REF_SRC1].space == SLM_SPACE_WEIGHTS, "task %d (%s): src1 must be in the weights", ti, op);
        NEED(!slm_is_r16(t->wtype) || t->k >= 16, "task %d (%s): k %d rows of %s under 16", ti, op, t->k,
             slm_dtype_name(t->wtype));
        REF(SLM_REF_SRC0, R * 4, 0);
        REF(SLM_REF_SRC1, (uint64_t)t->k * row, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    }
    case SLM_T_RMSNORM:
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM, "task %d (%s): n %d out of range", ti, op, t->n);
        NEED(t->c >= 0 && (t->c == 0 || t->n % t->c == 0), "task %d (%s): groups of %d do not divide %d", ti, op, t->c, t->n);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->n, 0);
        REF(SLM_REF_SRC1, (uint64_t)(t->c ? t->c : t->n) * 4, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    case SLM_T_MATMUL: {
        if ((s = check_matmul(q, ti, &used))) return s;
        char why[120];
        if (slm_amx_tiles_check(t->wtype, (int)R, t->n0, t->n1, t->tiles, why, sizeof why))
            return pbad(q, "task %d (%s): %s", ti, op, why);
        break;
    }
    case SLM_T_ROPE:
        NEED(t->c >= 2 && t->c % 2 == 0 && rope_dims_ok(q, t), "task %d (%s): head_dim c %d / rotated b %d != 2 x rope_pairs", ti, op, t->c, t->b);
        NEED(t->n0 >= 0 && t->n0 < t->n1 && (int64_t)t->n1 * t->c <= t->n && t->n <= BLOB_MAX_DIM,
             "task %d (%s): heads [%d,%d) x %d beyond width %d", ti, op, t->n0, t->n1, t->c, t->n);
        NEED(t->ref[SLM_REF_SRC2].space == SLM_SPACE_CONST, "task %d (%s): src2 must be the constants", ti, op);
        REF(SLM_REF_SRC1, R * 4, 0);
        NEED(t->ref[SLM_REF_SRC2].off % q->r->table_bytes == 0, "task %d (%s): src2 not at a RoPE table", ti, op);
        REF(SLM_REF_SRC2, q->r->table_bytes, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    case SLM_T_ATTENTION: {
        NEED(t->a >= 1 && t->b >= 1 && t->b <= t->a && t->a % t->b == 0, "task %d (%s): heads a %d / kv heads b %d incoherent", ti, op, t->a, t->b);
        NEED(t->c >= 1 && (int64_t)t->a * t->c <= BLOB_MAX_DIM, "task %d (%s): head_dim c %d out of range", ti, op, t->c);
        NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->a, "task %d (%s): heads [%d,%d) not within [0,%d)", ti, op, t->n0, t->n1, t->a);
        NEED((uint64_t)t->k == C, "task %d (%s): k %d != program KV capacity %llu", ti, op, t->k, (unsigned long long)C);
        NEED(t->ref[SLM_REF_SRC2].ld == t->ref[SLM_REF_SRC1].ld, "task %d (%s): K and V strides differ", ti, op);
        NEED(t->window >= 0, "task %d (%s): window %d negative", ti, op, t->window);
        NEED(t->wtype == q->r->c->opt.kv_type && (t->wtype != SLM_Q8_0 || t->c % SLM_QK8_0 == 0),
             "task %d (%s): KV type %u (head_dim %d), the config's is %d", ti, op, t->wtype, t->c, q->r->c->opt.kv_type);
        const uint64_t w = (uint64_t)t->n1 * (uint64_t)t->c, kvw = (uint64_t)t->b * (uint64_t)t->c;
        MAT(R, SLM_REF_SRC0, w, 0);
        KVR(C, SLM_REF_SRC1, kvw, 0);
        KVR(C, SLM_REF_SRC2, kvw, 0);
        REF(SLM_REF_SRC3, C * 4, 0);
        if (t->flags & SLM_TF_SINKS) { /* the sinks in place of the cache positions */
            NEED(t->ref[SLM_REF_SRC4].space == SLM_SPACE_WEIGHTS, "task %d (%s): sinks must be in the weights", ti, op);
            REF(SLM_REF_SRC4, (uint64_t)t->a * 4, 0);
        } else {
            REF(SLM_REF_SRC4, R * 4, 0);
        }
        if (t->flags & SLM_TF_KEY_PARTS) { /* the partials: parts x heads x (head_dim + 2) a row */
            NEED(t->ref[SLM_REF_DST].space == SLM_SPACE_ARENA, "task %d (%s): key parts' partials not in the arena", ti, op);
            MAT(R, SLM_REF_DST, (uint64_t)t->tiles[1] * (uint64_t)t->a * (uint64_t)(t->c + 2), 1);
        } else {
            MAT(R, SLM_REF_DST, w, 1);
        }
        break;
    }
    case SLM_T_ATTN_MERGE: {
        NEED(t->a >= 1 && t->c >= 1 && (int64_t)t->a * t->c <= BLOB_MAX_DIM, "task %d (%s): heads a %d x head_dim c %d out of range", ti, op, t->a, t->c);
        NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->a, "task %d (%s): heads [%d,%d) not within [0,%d)", ti, op, t->n0, t->n1, t->a);
        NEED(t->ref[SLM_REF_SRC0].space == SLM_SPACE_ARENA, "task %d (%s): partials not in the arena", ti, op);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->tiles[1] * (uint64_t)t->a * (uint64_t)(t->c + 2), 0);
        if (t->flags & SLM_TF_SINKS) {
            NEED(t->ref[SLM_REF_SRC1].space == SLM_SPACE_WEIGHTS, "task %d (%s): sinks must be in the weights", ti, op);
            REF(SLM_REF_SRC1, (uint64_t)t->a * 4, 0);
        }
        MAT(R, SLM_REF_DST, (uint64_t)t->n1 * (uint64_t)t->c, 1);
        break;
    }
    case SLM_T_ADD:
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM, "task %d (%s): n %d out of range", ti, op, t->n);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->n, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    case SLM_T_BIAS:
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM, "task %d (%s): n %d out of range", ti, op, t->n);
        REF(SLM_REF_SRC1, (uint64_t)t->n * 4, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    case SLM_T_KV_STORE:
        NEED(t->wtype != SLM_F32 && t->wtype == q->r->c->opt.kv_type, "task %d (%s): KV type %u, the config's is %d", ti, op,
             t->wtype, q->r->c->opt.kv_type);
        NEED(t->n == m->n_kv_heads * m->head_dim, "task %d (%s): n %d != kv_dim", ti, op, t->n);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->n, 0);
        KVR(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    case SLM_T_MOE_ROUTE: /* the router's logits [R, E] -> the routing table */
        NEED(t->n >= 1 && t->n <= 1024 && t->c >= 1 && t->c <= 64 && t->c <= t->n && (t->a == 0 || t->a == 1) &&
             !(t->flags & ~(unsigned)SLM_TF_ONE_ROW) && !(t->flags & SLM_TF_ONE_ROW),
             "task %d (%s): %d experts, %d used, norm %d, flags 0x%x out of range", ti, op, t->n, t->c, t->a, t->flags);
        NEED(t->ref[SLM_REF_DST].space == SLM_SPACE_ARENA, "task %d (%s): the routing table must be in the arena", ti, op);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->n, 0);
        REF(SLM_REF_DST, (SLM_MOE_EXPERT(p->rows, t->c, t->n)) * 4, 1);
        break;
    case SLM_T_MOE_COMBINE: /* the experts' down rows [R * c, n] into dst [R, n] */
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM && t->c >= 1 && t->c <= 64 && !t->flags,
             "task %d (%s): n %d / used %d / flags 0x%x out of range", ti, op, t->n, t->c, t->flags);
        NEED(t->n0 >= 0 && t->n0 < t->n1 && t->n1 <= t->n, "task %d (%s): tile [%d,%d) not within [0,%d)", ti, op, t->n0, t->n1, t->n);
        NEED(t->f2 >= 0.0f && t->f2 < 1e9f, "task %d (%s): scale f2 %g out of range", ti, op, (double)t->f2);
        NEED(t->ref[SLM_REF_SRC3].space == SLM_SPACE_ARENA, "task %d (%s): the routing table must be in the arena", ti, op);
        MAT(R * (uint64_t)t->c, SLM_REF_SRC0, (uint64_t)t->n, 0);
        REF(SLM_REF_SRC3, SLM_MOE_EXPERT(p->rows, t->c, 0) * 4, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    case SLM_T_SWIGLU:
        NEED(t->n >= 1 && t->n <= BLOB_MAX_DIM, "task %d (%s): n %d out of range", ti, op, t->n);
        MAT(R, SLM_REF_SRC0, (uint64_t)t->n, 0);
        MAT(R, SLM_REF_SRC1, (uint64_t)t->n, 0);
        MAT(R, SLM_REF_DST, (uint64_t)t->n, 1);
        break;
    default:
        return pbad(q, "task %d: op %u unknown", ti, t->op);
    }
    for (int k = 0; k < SLM_TASK_NREF; k++)
        if (!(used & (1u << k)) && t->ref[k].space != SLM_SPACE_NONE)
            return pbad(q, "task %d (%s): operand %d unused by this op but has space %u", ti, op, k, t->ref[k].space);
#undef NEED
#undef REF
#undef MAT
#undef KVR
    return SLM_OK;
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
        if ((s = check_task(q, i))) return s;
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

static slm_status read_programs(rctx *r, uint32_t si) {
    slm_compiled *c = r->c;
    const Elf64_Shdr *s = &r->sh[si];
    if (s->sh_size != (uint64_t)c->n_progs * BLOB_PROG_SIZE)
        return bad(r, "section .slm.programs: sh_size %llu, want n_progs %d x %d", (unsigned long long)s->sh_size, c->n_progs, BLOB_PROG_SIZE);
    const int n = c->n_progs;
    c->n_progs = 0;
    c->progs = slm_calloc((size_t)n, sizeof *c->progs);
    if (!c->progs) return slm_errf(r->err, SLM_ERR_NOMEM, "out of memory");
    const uint8_t *d = sect_data(r, si);
    slm_status st;
    int n_pre = 0, n_gen = 0;
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
        if (v[0] < SLM_PROG_PREFILL || v[0] > SLM_PROG_VERIFY) return pbad(&q, "program %d (%s): kind %d unknown", i, p->name, v[0]);
        if (p->rows < 1 || p->rows > c->opt.max_prompt_len) return pbad(&q, "program %d (%s): rows %d out of range (1..%d)", i, p->name, p->rows, c->opt.max_prompt_len);
        if (p->kv_capacity < 1 || p->kv_capacity > c->kv_capacity)
            return pbad(&q, "program %d (%s): kv_capacity %d out of range (1..%d)", i, p->name, p->kv_capacity, c->kv_capacity);
        if (p->kind == SLM_PROG_GENERATE && p->rows != 1) return pbad(&q, "program %d (%s): a generate program has rows %d, want 1", i, p->name, p->rows);
        if (p->kind != SLM_PROG_GENERATE && p->kv_capacity != c->kv_capacity)
            return pbad(&q, "program %d (%s): kv_capacity %d != %d", i, p->name, p->kv_capacity, c->kv_capacity);
        if (p->n_tasks < 1 || p->n_tasks > BLOB_MAX_TASKS) return pbad(&q, "program %d (%s): n_tasks %d out of range", i, p->name, p->n_tasks);
        if (p->n_io < 1 || p->n_io > BLOB_MAX_IO) return pbad(&q, "program %d (%s): n_io %d out of range", i, p->name, p->n_io);
        if (p->n_relocs < 0 || (int64_t)p->n_relocs > (int64_t)p->n_tasks * SLM_TASK_NREF)
            return pbad(&q, "program %d (%s): n_relocs %d out of range", i, p->name, p->n_relocs);
        if (p->arena_bytes > (1ull << 40)) return pbad(&q, "program %d (%s): arena_bytes %llu too large", i, p->name, (unsigned long long)p->arena_bytes);
        if (rd32(e + 68) != 0) return pbad(&q, "program %d (%s): reserved field not zero", i, p->name);
        if (i > 0) {
            const slm_program *pp = &c->progs[i - 1];
            int ok = pp->kind < p->kind ||
                     (pp->kind == p->kind && (p->kind == SLM_PROG_GENERATE ? pp->kv_capacity < p->kv_capacity : pp->rows < p->rows));
            if (!ok) return pbad(&q, "program %d (%s): programs not ordered (prefill by rows, generate by capacity, verify)", i, p->name);
        }
        n_pre += p->kind == SLM_PROG_PREFILL;
        n_gen += p->kind == SLM_PROG_GENERATE;
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
    if (!n_pre || !n_gen) return bad(r, "section .slm.programs: needs a prefill and a generate program (%d, %d)", n_pre, n_gen);
    const slm_program *big = slm_largest(c, SLM_PROG_PREFILL), *gen = slm_largest(c, SLM_PROG_GENERATE);
    if (big->rows != c->opt.max_prompt_len) return bad(r, "section .slm.programs: largest prefill has %d rows, max_prompt_len is %d", big->rows, c->opt.max_prompt_len);
    if (gen->kv_capacity != c->kv_capacity) return bad(r, "section .slm.programs: largest generate has capacity %d, want %d", gen->kv_capacity, c->kv_capacity);
    return SLM_OK;
}

/* ---- tensors, meta -------------------------------------------------------- */

static slm_status read_tensors(rctx *r, uint32_t si) {
    const Elf64_Shdr *s = &r->sh[si];
    if (s->sh_size % BLOB_TENSOR_SIZE) return bad(r, "section .slm.tensors: sh_size %llu not a multiple of %d", (unsigned long long)s->sh_size, BLOB_TENSOR_SIZE);
    uint64_t n = s->sh_size / BLOB_TENSOR_SIZE;
    if (n > 1000000) return bad(r, "section .slm.tensors: %llu entries", (unsigned long long)n);
    const uint8_t *d = sect_data(r, si);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *e = d + i * BLOB_TENSOR_SIZE;
        uint64_t off = rd64u(e + 104), nb = rd64u(e + 112), end;
        if (!nul_within(e, 64)) return bad(r, "section .slm.tensors: entry %llu: name not NUL-terminated", (unsigned long long)i);
        if (!slm_add_ok(off, nb, &end) || end > r->b->weights_size)
            return bad(r, "section .slm.tensors: entry %llu (%s): offset 0x%llx + %llu beyond the weights section", (unsigned long long)i,
                       (const char *)e, (unsigned long long)off, (unsigned long long)nb);
        if (rd32(e + 68) > 4) return bad(r, "section .slm.tensors: entry %llu (%s): n_dims %u", (unsigned long long)i, (const char *)e, rd32(e + 68));
    }
    r->b->tensors = d;
    r->b->n_tensors = (uint32_t)n;
    return SLM_OK;
}

static slm_status read_meta(rctx *r, uint32_t si) {
    const Elf64_Shdr *s = &r->sh[si];
    const uint8_t *d = sect_data(r, si);
    uint64_t n = s->sh_size;
    if (n < 4) return bad(r, "section .slm.meta: sh_size %llu, need 4", (unsigned long long)n);
    uint32_t count = rd32(d);
    uint64_t o = 4;
    for (uint32_t i = 0; i < count; i++) {
        for (int kv = 0; kv < 2; kv++) {
            if (n - o < 4) return bad(r, "section .slm.meta: entry %u: length beyond end", i);
            uint32_t len = rd32(d + o);
            o += 4;
            if (n - o < len) return bad(r, "section .slm.meta: entry %u: %u bytes beyond end", i, len);
            o += len;
        }
    }
    if (o != n) return bad(r, "section .slm.meta: %llu trailing bytes", (unsigned long long)(n - o));
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
    /* the weights: last, page-aligned, up to the end of the file; everything
     * else (and the section header table) before them */
    const Elf64_Shdr *w = &sh[s_w];
    if (w->sh_offset % SLM_BLOB_PAGE || w->sh_size == 0 || w->sh_offset + w->sh_size != b->size) {
        s = bad(r, "section .slm.weights: sh_offset 0x%llx, sh_size 0x%llx: must be page-aligned and end the file (%llu bytes)",
                (unsigned long long)w->sh_offset, (unsigned long long)w->sh_size, (unsigned long long)b->size);
        goto out;
    }
    Elf64_Ehdr eh;
    memcpy(&eh, b->data, sizeof eh);
    if (eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > w->sh_offset) {
        s = bad(r, "ELF header: e_shoff: the section header table overlaps the weights");
        goto out;
    }
    for (uint32_t i = 1; i < r->shnum; i++) {
        if (i == s_w || sh[i].sh_type == SHT_NOBITS || sh[i].sh_size == 0) continue;
        if (sh[i].sh_offset + sh[i].sh_size > w->sh_offset) {
            s = bad(r, "section %s: sh_offset 0x%llx overlaps the weights", sect_name(r, i), (unsigned long long)sh[i].sh_offset);
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
            s = bad(r, "section .slm.ident: checksum %016llx, the bytes before the weights hash to %016llx (the file is damaged)",
                    (unsigned long long)want, (unsigned long long)got);
            goto out;
        }
    }
    if ((s = read_config(r, s_config))) goto out;
    if (sh[s_const].sh_size != r->const_bytes || sh[s_const].sh_offset % 4) {
        s = bad(r, "section .slm.const: sh_size %llu, want const_bytes %llu", (unsigned long long)sh[s_const].sh_size,
                (unsigned long long)r->const_bytes);
        goto out;
    }
    if ((s = read_programs(r, s_progs))) goto out;
    if ((s = read_tensors(r, s_tens)) || (s = read_meta(r, s_meta))) goto out;
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
    if (slm_tok_vocab_size(*tok) != c->cfg.vocab_size) {
        s = bad(r, "section .slm.tok: %d tokens, the model's vocabulary is %d", slm_tok_vocab_size(*tok), c->cfg.vocab_size);
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
