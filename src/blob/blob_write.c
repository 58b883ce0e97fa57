/* Writing a blob: collect the sections in memory (all but the weights),
 * lay them out after the ELF header, put the section header table after
 * them, pad to a page and append the referenced weight tensors, each
 * page-aligned. The checksum covers every byte before the weights. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/format.h"

typedef struct sect {
    char name[160];
    uint32_t type, flags, link, info;
    uint64_t align, entsize;
    uint8_t *data;     /* heap (NULL for the weights) */
    uint64_t size;
    uint64_t off;      /* file offset (assigned by layout) */
} sect;

typedef struct sbuf {      /* a growable byte buffer */
    uint8_t *p;
    uint64_t n, cap;
    int oom;
} sbuf;

static uint8_t *sb_grow(sbuf *b, uint64_t n) {
    if (b->oom) return NULL;
    if (b->n + n > b->cap) {
        uint64_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *q = slm_realloc(b->p, (size_t)cap);
        if (!q) {
            b->oom = 1;
            return NULL;
        }
        b->p = q;
        b->cap = cap;
    }
    uint8_t *r = b->p + b->n;
    memset(r, 0, (size_t)n);
    b->n += n;
    return r;
}

static uint32_t sb_str(sbuf *b, const char *s) {
    uint32_t at = (uint32_t)b->n;
    size_t n = strlen(s) + 1;
    uint8_t *p = sb_grow(b, n);
    if (p) memcpy(p, s, n);
    return at;
}

typedef struct wctx {
    sect *s;
    int n, cap;
    sbuf sym, str;          /* .symtab, .strtab */
    int oom;
} wctx;

static int add_sect(wctx *w, const char *name, uint32_t type, uint64_t align, uint64_t entsize, uint8_t *data,
                    uint64_t size) {
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 32;
        sect *s = slm_realloc(w->s, (size_t)cap * sizeof *s);
        if (!s) {
            slm_xfree(data);
            w->oom = 1;
            return -1;
        }
        w->s = s;
        w->cap = cap;
    }
    sect *s = &w->s[w->n];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->type = type;
    s->align = align;
    s->entsize = entsize;
    s->data = data;
    s->size = size;
    return w->n++;
}

/* A global data symbol in section index shndx (ELF index = our index + 1). */
static void add_sym(wctx *w, const char *name, int sect_idx, uint64_t value, uint64_t size) {
    Elf64_Sym sy;
    memset(&sy, 0, sizeof sy);
    sy.st_name = sb_str(&w->str, name);
    sy.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT);
    sy.st_other = STV_DEFAULT;
    sy.st_shndx = (uint16_t)(sect_idx + 1);
    sy.st_value = value;
    sy.st_size = size;
    uint8_t *p = sb_grow(&w->sym, sizeof sy);
    if (p) memcpy(p, &sy, sizeof sy);
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* ---- weights: which tensors the tasks reference ------------------------- */

typedef struct wtensor {
    const slm_tensor *t;
    uint64_t src;      /* offset in the source mapping */
    uint64_t dst;      /* offset in the weights section */
    int used;
} wtensor;

static int wt_cmp(const void *a, const void *b) {
    const wtensor *x = a, *y = b;
    return x->src < y->src ? -1 : x->src > y->src;
}

static wtensor *find_tensor(wtensor *wt, int n, uint64_t off) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (off < wt[mid].src) hi = mid - 1;
        else if (off >= wt[mid].src + wt[mid].t->nbytes) lo = mid + 1;
        else return &wt[mid];
    }
    return NULL;
}

/* ---- records ------------------------------------------------------------ */

static void put_task(uint8_t *p, const slm_task *t, wtensor *wt, int n_wt, int *bad) {
    p[0] = t->op;
    p[1] = t->wtype;
    wr16(p + 2, t->flags);
    wr32(p + 4, t->count);
    int32_t v[8] = {t->m, t->n, t->k, t->n0, t->n1, t->a, t->b, t->c};
    memcpy(p + 8, v, sizeof v);
    memcpy(p + 40, &t->f0, 4);
    memcpy(p + 44, &t->layer, 4);
    memcpy(p + 48, &t->window, 4);
    memcpy(p + 52, &t->f1, 4);
    for (int k = 0; k < SLM_TASK_NREF; k++) {
        const slm_ref *r = &t->ref[k];
        uint8_t *q = p + 56 + 16 * k;
        uint64_t off = r->off;
        if (r->space == SLM_SPACE_WEIGHTS) {
            wtensor *w = find_tensor(wt, n_wt, off);
            if (!w) *bad = 1;
            else off = w->dst + (off - w->src);
        }
        q[0] = r->space;
        q[1] = 0;
        wr16(q + 2, r->io);
        wr32(q + 4, r->ld);
        wr64(q + 8, off);
    }
    p[152] = t->lane;
    memcpy(p + 153, t->tiles, 3);
    memcpy(p + 156, &t->f2, 4);
}

static void put_io(uint8_t *p, const slm_io_desc *d) {
    memcpy(p, d->name, sizeof d->name);
    p[47] = 0;
    p[48] = d->role;
    p[49] = d->is_output;
    wr16(p + 50, d->dtype);
    memcpy(p + 52, &d->layer, 4);
    memcpy(p + 56, &d->rows, 4);
    memcpy(p + 60, &d->cols, 4);
}

static void put_ident(uint8_t *p, const slm_blob_ident *id) {
    memcpy(p, BLOB_IDENT_MAGIC, 8);
    wr32(p + 8, id->format_version);
    wr32(p + 12, BLOB_IDENT_SIZE);
    wr64(p + 16, 0); /* checksum, patched last */
    wr64(p + 24, id->identity);
    wr64(p + 32, id->model_hash);
    wr64(p + 40, id->model_bytes);
    wr64(p + 48, id->tok_hash);
    wr64(p + 56, id->tok_bytes);
    wr64(p + 64, id->options_hash);
    wr64(p + 72, id->weights_hash);
    memcpy(p + 80, id->source, 64);
    p[80 + 63] = 0;
    memcpy(p + 144, id->compiler, 32);
    p[144 + 31] = 0;
}

uint64_t slm_blob_options_hash(const slm_compile_options *o) {
    uint8_t b[BLOB_OPTIONS_SIZE];
    blob_put_options(b, o);
    return slm_hash64(b, sizeof b, 0x6f707473ull);
}

void slm_blob_ident_seal(slm_blob_ident *id) {
    id->format_version = SLM_BLOB_FORMAT_VERSION;
    snprintf(id->compiler, sizeof id->compiler, "staticlm %s", SLM_VERSION);
    uint64_t v[8] = {id->format_version, id->model_hash, id->model_bytes, id->tok_hash,
                     id->tok_bytes,      id->options_hash, BLOB_TASK_SIZE, sizeof(slm_compile_options)};
    id->identity = slm_hash64(v, sizeof v, 0x6964656eull);
}

/* ---- the writer --------------------------------------------------------- */

static slm_status write_all(int fd, const void *p, uint64_t n, const char *path, slm_err *err) {
    const uint8_t *b = p;
    while (n) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t w = write(fd, b, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return slm_errf(err, SLM_ERR_IO, "%s: write error: %s", path, strerror(errno));
        b += w;
        n -= (uint64_t)w;
    }
    return SLM_OK;
}

/* One .slm.meta entry: u32 key length, key, u32 value length, value. */
static void put_meta(sbuf *b, uint32_t *count, const char *k, size_t kl, const char *v, size_t vl) {
    uint8_t *p = sb_grow(b, 8 + kl + vl);
    if (!p) return;
    wr32(p, (uint32_t)kl);
    memcpy(p + 4, k, kl);
    wr32(p + 4 + kl, (uint32_t)vl);
    memcpy(p + 8 + kl, v, vl);
    (*count)++;
}

static slm_status build_meta(const slm_model_file *m, uint8_t **out, uint64_t *size) {
    sbuf b = {0};
    uint32_t count = 0;
    sb_grow(&b, 4);
    for (uint64_t i = 0; m->gguf && i < slm_gguf_n_kv(m->gguf); i++) {
        slm_gguf_str k = slm_gguf_key(m->gguf, (int64_t)i), v;
        char key[256], val[64];
        if (k.len == 0 || k.len >= sizeof key) continue;
        memcpy(key, k.s, (size_t)k.len);
        key[k.len] = 0;
        int vl;
        if (slm_gguf_get_str(m->gguf, key, &v)) {
            if (v.len <= UINT32_MAX) put_meta(&b, &count, key, (size_t)k.len, v.s, (size_t)v.len);
        } else if ((!strcmp(key, "general.file_type") || !strncmp(key, "general.sampling.", 17)) &&
                   (vl = slm_gguf_get_text(m->gguf, key, val, sizeof val)) >= 0) {
            /* numbers as text (slm_model_meta's form): llama_ftype (bench names a blob's type by it) and the
             * model's recommended sampling (the CLI's defaults) */
            put_meta(&b, &count, key, (size_t)k.len, val, (size_t)vl);
        }
    }
    for (int k = 0; k < m->n_meta; k++) /* a folder's, as its GGUF would hold them */
        put_meta(&b, &count, m->meta[k].key, strlen(m->meta[k].key), m->meta[k].val, strlen(m->meta[k].val));
    if (b.oom) {
        slm_xfree(b.p);
        return SLM_ERR_NOMEM;
    }
    wr32(b.p, count);
    *out = b.p;
    *size = b.n;
    return SLM_OK;
}

/* Everything the steps of slm_blob_write share. */
typedef struct blob_job {
    const char *path;
    const slm_compiled *c;
    const slm_model_file *m;
    const uint8_t *src;        /* the model's mapping */
    wtensor *wt;               /* the model's tensors, in file order */
    int n_wt;
    uint64_t wsize;            /* bytes of the weights section */
    slm_blob_progress progress;
    void *ud;
    slm_err *err;
    const slm_blob_embed *emb; /* NULL: no embedding programs */
} blob_job;

#define BLOB_NOMEM(j) slm_errf((j)->err, SLM_ERR_NOMEM, "%s: out of memory building the blob", (j)->path)

/* Mark the tensors any task references and give each a page-aligned offset
 * in the weights section (in file order). */
static slm_status select_weights(blob_job *j) {
    const int n_wt = j->n_wt;
    wtensor *wt = j->wt;
    for (int i = 0; i < n_wt; i++) {
        wt[i].t = &j->m->tensors[i];
        wt[i].src = (uint64_t)((const uint8_t *)j->m->tensors[i].data - j->src);
    }
    qsort(wt, (size_t)n_wt, sizeof *wt, wt_cmp);
    for (int pi = 0; pi < j->c->n_progs; pi++) {
        const slm_program *p = &j->c->progs[pi];
        for (int i = 0; i < p->n_tasks; i++)
            for (int k = 0; k < SLM_TASK_NREF; k++)
                if (p->tasks[i].ref[k].space == SLM_SPACE_WEIGHTS) {
                    wtensor *t = find_tensor(wt, n_wt, p->tasks[i].ref[k].off);
                    if (!t)
                        return slm_errf(j->err, SLM_ERR_INTERNAL, "%s: task %d refers to weights outside every tensor",
                                        p->name, i);
                    t->used = 1;
                }
    }
    /* the heads the session applies after the embedding programs: kept by name */
    for (int i = 0; j->emb && i < n_wt; i++) {
        for (int k = 0; k < BLOB_EMBED_N_HEADS; k++)
            if (!strcmp(wt[i].t->name, blob_embed_head(k))) wt[i].used = 1;
        for (int k = 0; k < j->emb->n_dense && k < SLM_MAX_DENSE; k++) /* the Dense modules' */
            for (int b = 0; b < 2; b++) {
                char dn[32];
                blob_dense_name(dn, j->emb->dense[k].module, b);
                if (!strcmp(wt[i].t->name, dn) && (!b || j->emb->dense[k].bias)) wt[i].used = 1;
            }
    }
    uint64_t wsize = 0;
    for (int i = 0; i < n_wt; i++) {
        if (!wt[i].used) continue;
        wt[i].dst = wsize;
        wsize = align_up(wsize + wt[i].t->nbytes, SLM_BLOB_PAGE);
    }
    j->wsize = wsize ? wsize : SLM_BLOB_PAGE; /* never an empty section */
    return SLM_OK;
}

/* The hash of the weights section exactly as written (for inspect --verify). */
static uint64_t hash_weights(const blob_job *j) {
    slm_hash h;
    slm_hash_init(&h, 0x77656967ull);
    static const uint8_t zero[SLM_BLOB_PAGE];
    uint64_t at = 0;
    for (int i = 0; i < j->n_wt; i++) {
        const wtensor *t = &j->wt[i];
        if (!t->used) continue;
        slm_hash_update(&h, j->src + t->src, (size_t)t->t->nbytes);
        at = t->dst + t->t->nbytes;
        uint64_t pad = align_up(at, SLM_BLOB_PAGE) - at;
        slm_hash_update(&h, zero, (size_t)pad);
        at += pad;
    }
    if (at < j->wsize) slm_hash_update(&h, zero, (size_t)(j->wsize - at));
    return slm_hash_final(&h);
}

/* Add a section of size bytes (owning data) and a symbol over all of it;
 * its index, or -1 when out of memory (data is freed). */
static int add_sect_sym(wctx *w, const char *name, const char *sym, uint64_t align, uint64_t entsize, uint8_t *data,
                        uint64_t size) {
    int si = add_sect(w, name, SHT_PROGBITS, align, entsize, data, size);
    if (si >= 0) add_sym(w, sym, si, 0, size);
    return si;
}

/* .slm.ident and .slm.config; *ident_idx = the identity's section. */
static slm_status add_ident_config(wctx *w, const blob_job *j, const slm_blob_ident *id, int *ident_idx) {
    const slm_compiled *c = j->c;
    uint8_t *b = slm_calloc(1, BLOB_IDENT_SIZE);
    if (!b) return BLOB_NOMEM(j);
    put_ident(b, id);
    if ((*ident_idx = add_sect_sym(w, ".slm.ident", "identity", 8, 0, b, BLOB_IDENT_SIZE)) < 0) return BLOB_NOMEM(j);
    if (!(b = slm_calloc(1, BLOB_CONFIG_SIZE))) return BLOB_NOMEM(j);
    blob_put_config(b, &c->cfg);
    blob_put_options(b + BLOB_CFG_OPTIONS, &c->opt);
    int32_t cv[4] = {c->kv_capacity, c->n_progs, c->consts.rope_pos, c->consts.rope_pairs};
    memcpy(b + BLOB_CFG_TAIL, cv, sizeof cv);
    wr64(b + BLOB_CFG_CONST_BYTES, c->consts.bytes);
    blob_put_family(b + BLOB_CFG_FAMILY, &c->cfg, c->consts.rope_pairs_swa);
    wr32(b + BLOB_CFG_NSEQS, (uint32_t)(c->n_seqs > 1 ? c->n_seqs : 1));
    if (add_sect_sym(w, ".slm.config", "config", 8, 0, b, BLOB_CONFIG_SIZE) < 0) return BLOB_NOMEM(j);
    if (j->emb) {
        if (!(b = slm_calloc(1, BLOB_EMBED_SIZE))) return BLOB_NOMEM(j);
        blob_put_embed(b, j->emb);
        if (add_sect_sym(w, ".slm.embed", "embed", 8, 0, b, BLOB_EMBED_SIZE) < 0) return BLOB_NOMEM(j);
    }
    return SLM_OK;
}

/* One program's sections (.slm.tasks.P, .slm.io.P, .slm.reloc.P) and its
 * record pr in .slm.programs. */
static slm_status add_program(wctx *w, const blob_job *j, const slm_program *p, uint8_t *pr) {
    char nm[128];
    int bad = 0;
    if (p->n_tasks < 1 || p->n_io < 1) return slm_errf(j->err, SLM_ERR_INTERNAL, "%s: empty program", p->name);
    uint8_t *tb = slm_calloc((size_t)p->n_tasks, BLOB_TASK_SIZE);
    if (!tb) return BLOB_NOMEM(j);
    for (int i = 0; i < p->n_tasks; i++)
        put_task(tb + (size_t)i * BLOB_TASK_SIZE, &p->tasks[i], j->wt, j->n_wt, &bad);
    snprintf(nm, sizeof nm, ".slm.tasks.%s", p->name);
    int ti = add_sect_sym(w, nm, p->name, 8, BLOB_TASK_SIZE, tb, (uint64_t)p->n_tasks * BLOB_TASK_SIZE);
    if (ti < 0) return BLOB_NOMEM(j);
    uint8_t *ib = slm_calloc((size_t)p->n_io, BLOB_IO_SIZE);
    if (!ib) return BLOB_NOMEM(j);
    for (int i = 0; i < p->n_io; i++) put_io(ib + (size_t)i * BLOB_IO_SIZE, &p->io[i]);
    snprintf(nm, sizeof nm, ".slm.io.%s", p->name);
    int ii = add_sect(w, nm, SHT_PROGBITS, 8, BLOB_IO_SIZE, ib, (uint64_t)p->n_io * BLOB_IO_SIZE);
    if (ii < 0) return BLOB_NOMEM(j);
    for (int i = 0; i < p->n_io; i++) {
        snprintf(nm, sizeof nm, "%s.%s", p->name, p->io[i].name);
        add_sym(w, nm, ii, (uint64_t)i * BLOB_IO_SIZE, BLOB_IO_SIZE);
    }
    uint8_t *rb = slm_calloc((size_t)p->n_relocs + 1, BLOB_RELOC_SIZE);
    if (!rb) return BLOB_NOMEM(j);
    for (int i = 0; i < p->n_relocs; i++) {
        wr32(rb + 8 * (size_t)i, p->relocs[i].task);
        wr16(rb + 8 * (size_t)i + 4, p->relocs[i].field);
        wr16(rb + 8 * (size_t)i + 6, p->relocs[i].io);
    }
    snprintf(nm, sizeof nm, ".slm.reloc.%s", p->name);
    char sym[128];
    snprintf(sym, sizeof sym, "%s.relocs", p->name);
    int ri = add_sect_sym(w, nm, sym, 8, BLOB_RELOC_SIZE, rb, (uint64_t)p->n_relocs * BLOB_RELOC_SIZE);
    if (ri < 0) return BLOB_NOMEM(j);
    if (bad) return slm_errf(j->err, SLM_ERR_INTERNAL, "%s: a weight reference is outside every tensor", p->name);
    memcpy(pr, p->name, sizeof p->name);
    pr[23] = 0;
    int32_t pv[6] = {p->kind, p->rows, p->kv_capacity, p->n_tasks, p->n_io, p->n_relocs};
    memcpy(pr + 24, pv, sizeof pv);
    wr64(pr + 48, p->arena_bytes);
    wr32(pr + 68, (uint32_t)p->region); /* EMBED_BATCH: one text's rows; else 0 */
    /* ELF section indices (ours + 1) */
    wr32(pr + 56, (uint32_t)ti + 1);
    wr32(pr + 60, (uint32_t)ii + 1);
    wr32(pr + 64, (uint32_t)ri + 1);
    return SLM_OK;
}

/* .slm.programs and every program's sections. */
static slm_status add_programs(wctx *w, const blob_job *j) {
    const slm_compiled *c = j->c;
    uint8_t *progs = slm_calloc((size_t)c->n_progs, BLOB_PROG_SIZE);
    if (!progs) return BLOB_NOMEM(j);
    const int progs_idx = add_sect_sym(w, ".slm.programs", "programs", 8, BLOB_PROG_SIZE, progs,
                                       (uint64_t)c->n_progs * BLOB_PROG_SIZE);
    if (progs_idx < 0) return BLOB_NOMEM(j);
    for (int pi = 0; pi < c->n_progs; pi++) {
        /* w->s moves as sections are added: find the record afresh */
        slm_status s = add_program(w, j, &c->progs[pi], w->s[progs_idx].data + (size_t)pi * BLOB_PROG_SIZE);
        if (s) return s;
        if (j->progress) j->progress(j->ud, c->progs[pi].name, pi + 1, c->n_progs);
    }
    return SLM_OK;
}

/* .slm.tensors: one record per tensor written, in file order. */
static slm_status add_tensor_table(wctx *w, const blob_job *j) {
    const wtensor *wt = j->wt;
    int n_used = 0;
    for (int i = 0; i < j->n_wt; i++) n_used += wt[i].used;
    uint8_t *b = slm_calloc((size_t)n_used + 1, BLOB_TENSOR_SIZE);
    if (!b) return BLOB_NOMEM(j);
    for (int i = 0, k = 0; i < j->n_wt; i++) {
        if (!wt[i].used) continue;
        uint8_t *q = b + (size_t)k++ * BLOB_TENSOR_SIZE;
        memcpy(q, wt[i].t->name, 64);
        q[63] = 0;
        wr32(q + 64, wt[i].t->type);
        wr32(q + 68, wt[i].t->n_dims);
        memcpy(q + 72, wt[i].t->ne, 32);
        wr64(q + 104, wt[i].dst);
        wr64(q + 112, wt[i].t->nbytes);
    }
    if (add_sect_sym(w, ".slm.tensors", "tensors", 8, BLOB_TENSOR_SIZE, b, (uint64_t)n_used * BLOB_TENSOR_SIZE) < 0)
        return BLOB_NOMEM(j);
    return SLM_OK;
}

/* .slm.const, .slm.tensors, .slm.tok, .slm.meta, then .slm.weights (no
 * data: written from the mapping) with a symbol per tensor;
 * *weights_idx = its index. */
static slm_status add_data_sections(wctx *w, const blob_job *j, const slm_tokenizer *tok, int *weights_idx) {
    const slm_compiled *c = j->c;
    slm_status s;
    uint8_t *b = slm_malloc((size_t)c->consts.bytes + 1);
    if (!b) return BLOB_NOMEM(j);
    memcpy(b, c->consts.rope, (size_t)c->consts.bytes);
    if (add_sect_sym(w, ".slm.const", "rope", 64, 0, b, c->consts.bytes) < 0) return BLOB_NOMEM(j);
    if ((s = add_tensor_table(w, j))) return s;
    uint8_t *tokb = NULL;
    size_t tokn = 0;
    if ((s = slm_tok_save(tok, &tokb, &tokn, j->err))) return s;
    if (add_sect_sym(w, ".slm.tok", "tokenizer", 8, 0, tokb, tokn) < 0) return BLOB_NOMEM(j);
    uint8_t *meta;
    uint64_t metan;
    if (build_meta(j->m, &meta, &metan)) return BLOB_NOMEM(j);
    if (add_sect_sym(w, ".slm.meta", "meta", 8, 0, meta, metan) < 0) return BLOB_NOMEM(j);
    *weights_idx = w->n; /* added last; its symbols refer to it now */
    for (int i = 0; i < j->n_wt; i++)
        if (j->wt[i].used) add_sym(w, j->wt[i].t->name, *weights_idx, j->wt[i].dst, j->wt[i].t->nbytes);
    if (add_sect(w, ".slm.weights", SHT_PROGBITS, SLM_BLOB_PAGE, 0, NULL, j->wsize) != *weights_idx)
        return BLOB_NOMEM(j);
    w->s[*weights_idx].flags = SHF_ALLOC;
    return SLM_OK;
}

/* .symtab, .strtab and .shstrtab; *name_off (heap, one per section) = each
 * section's name in .shstrtab; *shstr_idx = its index. */
static slm_status add_link_sections(wctx *w, const blob_job *j, uint32_t **name_off, int *shstr_idx) {
    *name_off = NULL;
    if (w->sym.oom || w->str.oom) return BLOB_NOMEM(j);
    int symtab_idx = add_sect(w, ".symtab", SHT_SYMTAB, 8, sizeof(Elf64_Sym), w->sym.p, w->sym.n);
    w->sym.p = NULL;
    if (symtab_idx < 0) return BLOB_NOMEM(j);
    int strtab_idx = add_sect(w, ".strtab", SHT_STRTAB, 1, 0, w->str.p, w->str.n);
    w->str.p = NULL;
    if (strtab_idx < 0) return BLOB_NOMEM(j);
    w->s[symtab_idx].link = (uint32_t)strtab_idx + 1;
    w->s[symtab_idx].info = 1; /* first non-local symbol */
    sbuf shs = {0};
    sb_grow(&shs, 1);
    uint32_t *off = slm_calloc((size_t)w->n + 2, sizeof *off);
    if (!off) {
        slm_xfree(shs.p);
        return BLOB_NOMEM(j);
    }
    for (int i = 0; i < w->n; i++) off[i] = sb_str(&shs, w->s[i].name);
    uint32_t shs_name = sb_str(&shs, ".shstrtab");
    if (shs.oom) {
        slm_xfree(off);
        slm_xfree(shs.p);
        return BLOB_NOMEM(j);
    }
    if ((*shstr_idx = add_sect(w, ".shstrtab", SHT_STRTAB, 1, 0, shs.p, shs.n)) < 0) {
        slm_xfree(off);
        return BLOB_NOMEM(j);
    }
    off[*shstr_idx] = shs_name;
    *name_off = off;
    return SLM_OK;
}

/* Lay out the file: ELF header, the sections but the weights, the section
 * header table, then the weights at a page boundary. Returns the bytes
 * before the weights (heap, *woff long, checksum patched in), or NULL when
 * out of memory. */
static uint8_t *layout_prefix(wctx *w, const uint32_t *name_off, int weights_idx, int shstr_idx, int ident_idx,
                              uint64_t *woff_out) {
    uint64_t off = sizeof(Elf64_Ehdr);
    for (int i = 0; i < w->n; i++) {
        if (i == weights_idx) continue;
        off = align_up(off, w->s[i].align);
        w->s[i].off = off;
        off += w->s[i].size;
    }
    off = align_up(off, 8);
    const uint64_t shoff = off;
    const int shnum = w->n + 1;
    off += (uint64_t)shnum * sizeof(Elf64_Shdr);
    const uint64_t woff = align_up(off, SLM_BLOB_PAGE);
    w->s[weights_idx].off = woff;
    uint8_t *prefix = slm_calloc(1, (size_t)woff);
    if (!prefix) return NULL;
    Elf64_Ehdr eh;
    memset(&eh, 0, sizeof eh);
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
    eh.e_type = ET_REL;
    eh.e_machine = EM_NONE;
    eh.e_version = EV_CURRENT;
    eh.e_shoff = shoff;
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = (uint16_t)shnum;
    eh.e_shstrndx = (uint16_t)(shstr_idx + 1);
    memcpy(prefix, &eh, sizeof eh);
    for (int i = 0; i < w->n; i++) {
        Elf64_Shdr sh;
        memset(&sh, 0, sizeof sh);
        sh.sh_name = name_off[i];
        sh.sh_type = w->s[i].type;
        sh.sh_flags = w->s[i].flags;
        sh.sh_offset = w->s[i].off;
        sh.sh_size = w->s[i].size;
        sh.sh_link = w->s[i].link;
        sh.sh_info = w->s[i].info;
        sh.sh_addralign = w->s[i].align;
        sh.sh_entsize = w->s[i].entsize;
        memcpy(prefix + shoff + (uint64_t)(i + 1) * sizeof sh, &sh, sizeof sh);
        if (i != weights_idx && w->s[i].size) memcpy(prefix + w->s[i].off, w->s[i].data, (size_t)w->s[i].size);
    }
    wr64(prefix + w->s[ident_idx].off + BLOB_IDENT_CHECKSUM_OFF, slm_hash64(prefix, (size_t)woff, 0x636b736dull));
    *woff_out = woff;
    return prefix;
}

/* The weights section from the mapping, each tensor at its offset, zeros
 * between; progress every 64 MiB. */
static slm_status write_weights(int fd, const blob_job *j, const char *tmp) {
    static const uint8_t zero[SLM_BLOB_PAGE];
    slm_status s;
    uint64_t at = 0, last_report = 0;
    for (int i = 0; i < j->n_wt; i++) {
        const wtensor *t = &j->wt[i];
        if (!t->used) continue;
        if ((s = write_all(fd, zero, t->dst - at, tmp, j->err))) return s;
        if ((s = write_all(fd, j->src + t->src, t->t->nbytes, tmp, j->err))) return s;
        at = t->dst + t->t->nbytes;
        if (j->progress && at - last_report >= (64u << 20)) {
            last_report = at;
            j->progress(j->ud, "weights", (int)(at >> 20), (int)(j->wsize >> 20));
        }
    }
    if ((s = write_all(fd, zero, j->wsize - at, tmp, j->err))) return s;
    if (j->progress) j->progress(j->ud, "weights", (int)(j->wsize >> 20), (int)(j->wsize >> 20));
    return SLM_OK;
}

/* Write prefix and the weights to a temporary file beside path, fsync it
 * and rename it into place; on failure the temporary file is removed. */
static slm_status write_file(const blob_job *j, const uint8_t *prefix, uint64_t woff) {
    const char *path = j->path;
    slm_status s = SLM_OK;
    size_t plen = strlen(path);
    char *tmp = slm_malloc(plen + 16);
    if (!tmp) return BLOB_NOMEM(j);
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        s = slm_errf(j->err, SLM_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
        slm_xfree(tmp);
        return s;
    }
    (void)fchmod(fd, 0644); /* mkstemp makes 0600; a blob is as readable as a model file */
    if ((s = write_all(fd, prefix, woff, tmp, j->err))) goto fail_unlink;
    if ((s = write_weights(fd, j, tmp))) goto fail_unlink;
    if (fsync(fd) != 0) {
        s = slm_errf(j->err, SLM_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
        goto fail_unlink;
    }
    int rc = close(fd);
    fd = -1;
    if (rc != 0) {
        s = slm_errf(j->err, SLM_ERR_IO, "%s: close: %s", tmp, strerror(errno));
        goto fail_unlink;
    }
    if (rename(tmp, path) != 0) {
        s = slm_errf(j->err, SLM_ERR_IO, "%s: cannot rename into place: %s", path, strerror(errno));
        goto fail_unlink;
    }
    slm_xfree(tmp);
    return SLM_OK;
fail_unlink:
    if (fd >= 0) close(fd);
    unlink(tmp);
    slm_xfree(tmp);
    return s;
}

slm_status slm_blob_write(const char *path, const slm_compiled *c, const slm_model_file *m,
                          const slm_tokenizer *tok, slm_blob_ident *id, slm_blob_progress progress,
                          void *ud, slm_err *err) {
    return slm_blob_write_embed(path, c, m, tok, NULL, id, progress, ud, err);
}

slm_status slm_blob_write_embed(const char *path, const slm_compiled *c, const slm_model_file *m,
                                const slm_tokenizer *tok, const slm_blob_embed *emb, slm_blob_ident *id,
                                slm_blob_progress progress, void *ud, slm_err *err) {
    if (c->n_progs < 1 || c->n_progs > BLOB_MAX_PROGS)
        return slm_errf(err, SLM_ERR_ARG, "%s: %d programs (1..%d)", path, c->n_progs, BLOB_MAX_PROGS);
    int n_embed = 0;
    for (int i = 0; i < c->n_progs; i++) {
        const int k = c->progs[i].kind, embed = k == SLM_PROG_EMBED || k == SLM_PROG_EMBED_BATCH;
        n_embed += embed;
        if (k != SLM_PROG_PREFILL && k != SLM_PROG_GENERATE && k != SLM_PROG_VERIFY && k != SLM_PROG_BATCH &&
            !(embed && emb))
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: program %s: this kind cannot be stored in a blob yet "
                            "(format %u: prefill, generate, verify, batch, and with their record embed, embed batch)", path,
                            c->progs[i].name, SLM_BLOB_FORMAT_VERSION);
    }
    if (emb && (!n_embed || emb->encoder != c->cfg.encoder || emb->moe_every != c->cfg.moe_every ||
                emb->expert_ungated != c->cfg.expert_ungated || emb->n_dense < 0 || emb->n_dense > SLM_MAX_DENSE))
        return slm_errf(err, SLM_ERR_INTERNAL, "%s: an embedding record without embedding programs (%d) or of another "
                        "encoder kind (%d, the config's %d), layer rule (experts every %d, ungated %d; the config's %d, "
                        "%d) or %d Dense modules", path, n_embed, emb->encoder, c->cfg.encoder, emb->moe_every,
                        emb->expert_ungated, c->cfg.moe_every, c->cfg.expert_ungated, emb->n_dense);
    blob_job j = {.path = path, .c = c, .m = m, .src = m->map.data, .n_wt = m->n_tensors,
                  .progress = progress, .ud = ud, .err = err, .emb = emb};
    slm_status s = SLM_OK;
    wctx w;
    memset(&w, 0, sizeof w);
    uint32_t *name_off = NULL;
    uint8_t *prefix = NULL;
    int ident_idx = 0, weights_idx = 0, shstr_idx = 0;
    uint64_t woff = 0;

    j.wt = slm_calloc((size_t)j.n_wt + 1, sizeof *j.wt);
    if (!j.wt) return BLOB_NOMEM(&j);
    if ((s = select_weights(&j))) goto out;
    id->weights_hash = hash_weights(&j);
    sb_grow(&w.sym, sizeof(Elf64_Sym)); /* symbol 0: null */
    sb_grow(&w.str, 1);
    if ((s = add_ident_config(&w, &j, id, &ident_idx))) goto out;
    if ((s = add_programs(&w, &j))) goto out;
    if ((s = add_data_sections(&w, &j, tok, &weights_idx))) goto out;
    if ((s = add_link_sections(&w, &j, &name_off, &shstr_idx))) goto out;
    if (!(prefix = layout_prefix(&w, name_off, weights_idx, shstr_idx, ident_idx, &woff))) s = BLOB_NOMEM(&j);
    else s = write_file(&j, prefix, woff);
out:
    for (int i = 0; i < w.n; i++) slm_xfree(w.s[i].data);
    slm_xfree(w.s);
    slm_xfree(w.sym.p);
    slm_xfree(w.str.p);
    slm_xfree(name_off);
    slm_xfree(prefix);
    slm_xfree(j.wt);
    return s;
}
