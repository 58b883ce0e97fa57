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
    wr32(p + 52, 0);
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

static slm_status build_meta(const slm_model_file *m, uint8_t **out, uint64_t *size) {
    sbuf b = {0};
    uint32_t count = 0;
    sb_grow(&b, 4);
    if (m->gguf) {
        for (uint64_t i = 0; i < slm_gguf_n_kv(m->gguf); i++) {
            if (slm_gguf_kv_type(m->gguf, (int64_t)i) != SLM_GGUF_STRING) continue;
            slm_gguf_str k = slm_gguf_key(m->gguf, (int64_t)i);
            char key[256];
            if (k.len == 0 || k.len >= sizeof key) continue;
            memcpy(key, k.s, (size_t)k.len);
            key[k.len] = 0;
            slm_gguf_str v;
            if (!slm_gguf_get_str(m->gguf, key, &v) || v.len > UINT32_MAX) continue;
            uint8_t *p = sb_grow(&b, 8 + k.len + v.len);
            if (!p) break;
            wr32(p, (uint32_t)k.len);
            memcpy(p + 4, k.s, (size_t)k.len);
            wr32(p + 4 + k.len, (uint32_t)v.len);
            memcpy(p + 8 + k.len, v.s, (size_t)v.len);
            count++;
        }
    }
    if (b.oom) {
        slm_xfree(b.p);
        return SLM_ERR_NOMEM;
    }
    wr32(b.p, count);
    *out = b.p;
    *size = b.n;
    return SLM_OK;
}

slm_status slm_blob_write(const char *path, const slm_compiled *c, const slm_model_file *m,
                          const slm_tokenizer *tok, slm_blob_ident *id, slm_blob_progress progress,
                          void *ud, slm_err *err) {
    slm_status s = SLM_OK;
    wctx w;
    memset(&w, 0, sizeof w);
    wtensor *wt = NULL;
    char *tmp = NULL;
    int fd = -1;
    uint8_t *prefix = NULL;
    const int n_wt = m->n_tensors;
    const uint8_t *src = m->map.data;

    if (!slm_config_plain(&c->cfg))
        return slm_errf(err, SLM_ERR_UNSUPPORTED,
                        "%s: architecture '%s': its features (head size, Q/K norms, soft-capping, per-layer RoPE ...) "
                        "are not stored in blobs yet; run the model file directly",
                        path, c->cfg.arch);
    if (c->n_progs < 1 || c->n_progs > BLOB_MAX_PROGS)
        return slm_errf(err, SLM_ERR_ARG, "%s: %d programs (1..%d)", path, c->n_progs, BLOB_MAX_PROGS);
    for (int i = 0; i < c->n_progs; i++)
        if (c->progs[i].kind != SLM_PROG_PREFILL && c->progs[i].kind != SLM_PROG_GENERATE &&
            c->progs[i].kind != SLM_PROG_VERIFY)
            return slm_errf(err, SLM_ERR_UNSUPPORTED, "%s: program %s: this kind cannot be stored in a blob yet "
                            "(format %u: prefill, generate, verify)", path, c->progs[i].name, SLM_BLOB_FORMAT_VERSION);
    /* the tensors referenced by any task, in file order, page-aligned */
    wt = slm_calloc((size_t)n_wt + 1, sizeof *wt);
    if (!wt) return slm_errf(err, SLM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n_wt; i++) {
        wt[i].t = &m->tensors[i];
        wt[i].src = (uint64_t)((const uint8_t *)m->tensors[i].data - src);
    }
    qsort(wt, (size_t)n_wt, sizeof *wt, wt_cmp);
    for (int pi = 0; pi < c->n_progs; pi++) {
        const slm_program *p = &c->progs[pi];
        for (int i = 0; i < p->n_tasks; i++)
            for (int k = 0; k < SLM_TASK_NREF; k++)
                if (p->tasks[i].ref[k].space == SLM_SPACE_WEIGHTS) {
                    wtensor *t = find_tensor(wt, n_wt, p->tasks[i].ref[k].off);
                    if (!t) {
                        s = slm_errf(err, SLM_ERR_INTERNAL, "%s: task %d refers to weights outside every tensor",
                                     p->name, i);
                        goto out;
                    }
                    t->used = 1;
                }
    }
    uint64_t wsize = 0;
    for (int i = 0; i < n_wt; i++) {
        if (!wt[i].used) continue;
        wt[i].dst = wsize;
        wsize = align_up(wsize + wt[i].t->nbytes, SLM_BLOB_PAGE);
    }
    if (wsize == 0) wsize = SLM_BLOB_PAGE; /* never an empty section */
    /* weights hash (for inspect --verify): the section exactly as written */
    {
        slm_hash h;
        slm_hash_init(&h, 0x77656967ull);
        static const uint8_t zero[SLM_BLOB_PAGE];
        uint64_t at = 0;
        for (int i = 0; i < n_wt; i++) {
            if (!wt[i].used) continue;
            slm_hash_update(&h, src + wt[i].src, (size_t)wt[i].t->nbytes);
            at = wt[i].dst + wt[i].t->nbytes;
            uint64_t pad = align_up(at, SLM_BLOB_PAGE) - at;
            slm_hash_update(&h, zero, (size_t)pad);
            at += pad;
        }
        if (at < wsize) slm_hash_update(&h, zero, (size_t)(wsize - at));
        id->weights_hash = slm_hash_final(&h);
    }

    /* ---- the small sections ---- */
    sb_grow(&w.sym, sizeof(Elf64_Sym)); /* symbol 0: null */
    sb_grow(&w.str, 1);
    int si;
    uint8_t *b;
    if (!(b = slm_calloc(1, BLOB_IDENT_SIZE))) goto nomem;
    put_ident(b, id);
    if ((si = add_sect(&w, ".slm.ident", SHT_PROGBITS, 8, 0, b, BLOB_IDENT_SIZE)) < 0) goto nomem;
    add_sym(&w, "identity", si, 0, BLOB_IDENT_SIZE);
    const int ident_idx = si;

    if (!(b = slm_calloc(1, BLOB_CONFIG_SIZE))) goto nomem;
    blob_put_config(b, &c->cfg);
    blob_put_options(b + BLOB_CFG_OPTIONS, &c->opt);
    int32_t cv[4] = {c->kv_capacity, c->n_progs, c->consts.rope_pos, c->consts.rope_pairs};
    memcpy(b + BLOB_CFG_TAIL, cv, sizeof cv);
    wr64(b + BLOB_CFG_CONST_BYTES, c->consts.bytes);
    if ((si = add_sect(&w, ".slm.config", SHT_PROGBITS, 8, 0, b, BLOB_CONFIG_SIZE)) < 0) goto nomem;
    add_sym(&w, "config", si, 0, BLOB_CONFIG_SIZE);

    uint8_t *progs = slm_calloc((size_t)c->n_progs, BLOB_PROG_SIZE);
    if (!progs) goto nomem;
    const int progs_idx = add_sect(&w, ".slm.programs", SHT_PROGBITS, 8, BLOB_PROG_SIZE, progs,
                                   (uint64_t)c->n_progs * BLOB_PROG_SIZE);
    if (progs_idx < 0) goto nomem;
    add_sym(&w, "programs", progs_idx, 0, (uint64_t)c->n_progs * BLOB_PROG_SIZE);
    for (int pi = 0; pi < c->n_progs; pi++) {
        const slm_program *p = &c->progs[pi];
        char nm[128];
        int bad = 0;
        if (p->n_tasks < 1 || p->n_io < 1) {
            s = slm_errf(err, SLM_ERR_INTERNAL, "%s: empty program", p->name);
            goto out;
        }
        uint8_t *tb = slm_calloc((size_t)p->n_tasks, BLOB_TASK_SIZE);
        if (!tb) goto nomem;
        for (int i = 0; i < p->n_tasks; i++) put_task(tb + (size_t)i * BLOB_TASK_SIZE, &p->tasks[i], wt, n_wt, &bad);
        snprintf(nm, sizeof nm, ".slm.tasks.%s", p->name);
        int ti = add_sect(&w, nm, SHT_PROGBITS, 8, BLOB_TASK_SIZE, tb, (uint64_t)p->n_tasks * BLOB_TASK_SIZE);
        if (ti < 0) goto nomem;
        add_sym(&w, p->name, ti, 0, (uint64_t)p->n_tasks * BLOB_TASK_SIZE);
        uint8_t *ib = slm_calloc((size_t)p->n_io, BLOB_IO_SIZE);
        if (!ib) goto nomem;
        for (int i = 0; i < p->n_io; i++) put_io(ib + (size_t)i * BLOB_IO_SIZE, &p->io[i]);
        snprintf(nm, sizeof nm, ".slm.io.%s", p->name);
        int ii = add_sect(&w, nm, SHT_PROGBITS, 8, BLOB_IO_SIZE, ib, (uint64_t)p->n_io * BLOB_IO_SIZE);
        if (ii < 0) goto nomem;
        for (int i = 0; i < p->n_io; i++) {
            snprintf(nm, sizeof nm, "%s.%s", p->name, p->io[i].name);
            add_sym(&w, nm, ii, (uint64_t)i * BLOB_IO_SIZE, BLOB_IO_SIZE);
        }
        uint8_t *rb = slm_calloc((size_t)p->n_relocs + 1, BLOB_RELOC_SIZE);
        if (!rb) goto nomem;
        for (int i = 0; i < p->n_relocs; i++) {
            wr32(rb + 8 * (size_t)i, p->relocs[i].task);
            wr16(rb + 8 * (size_t)i + 4, p->relocs[i].field);
            wr16(rb + 8 * (size_t)i + 6, p->relocs[i].io);
        }
        snprintf(nm, sizeof nm, ".slm.reloc.%s", p->name);
        int ri = add_sect(&w, nm, SHT_PROGBITS, 8, BLOB_RELOC_SIZE, rb, (uint64_t)p->n_relocs * BLOB_RELOC_SIZE);
        if (ri < 0) goto nomem;
        snprintf(nm, sizeof nm, "%s.relocs", p->name);
        add_sym(&w, nm, ri, 0, (uint64_t)p->n_relocs * BLOB_RELOC_SIZE);
        if (bad) {
            s = slm_errf(err, SLM_ERR_INTERNAL, "%s: a weight reference is outside every tensor", p->name);
            goto out;
        }
        uint8_t *pr = w.s[progs_idx].data + (size_t)pi * BLOB_PROG_SIZE;
        memcpy(pr, p->name, sizeof p->name);
        pr[23] = 0;
        int32_t pv[6] = {p->kind, p->rows, p->kv_capacity, p->n_tasks, p->n_io, p->n_relocs};
        memcpy(pr + 24, pv, sizeof pv);
        wr64(pr + 48, p->arena_bytes);
        /* ELF section indices (ours + 1) */
        wr32(pr + 56, (uint32_t)ti + 1);
        wr32(pr + 60, (uint32_t)ii + 1);
        wr32(pr + 64, (uint32_t)ri + 1);
        if (progress) progress(ud, p->name, pi + 1, c->n_progs);
    }

    if (!(b = slm_malloc((size_t)c->consts.bytes + 1))) goto nomem;
    memcpy(b, c->consts.rope, (size_t)c->consts.bytes);
    if ((si = add_sect(&w, ".slm.const", SHT_PROGBITS, 64, 0, b, c->consts.bytes)) < 0) goto nomem;
    add_sym(&w, "rope", si, 0, c->consts.bytes);

    int n_used = 0;
    for (int i = 0; i < n_wt; i++) n_used += wt[i].used;
    if (!(b = slm_calloc((size_t)n_used + 1, BLOB_TENSOR_SIZE))) goto nomem;
    const int tens_idx = add_sect(&w, ".slm.tensors", SHT_PROGBITS, 8, BLOB_TENSOR_SIZE, b,
                                  (uint64_t)n_used * BLOB_TENSOR_SIZE);
    if (tens_idx < 0) goto nomem;
    add_sym(&w, "tensors", tens_idx, 0, (uint64_t)n_used * BLOB_TENSOR_SIZE);
    for (int i = 0, k = 0; i < n_wt; i++) {
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

    uint8_t *tokb = NULL;
    size_t tokn = 0;
    if ((s = slm_tok_save(tok, &tokb, &tokn, err))) goto out;
    if ((si = add_sect(&w, ".slm.tok", SHT_PROGBITS, 8, 0, tokb, tokn)) < 0) goto nomem;
    add_sym(&w, "tokenizer", si, 0, tokn);

    uint8_t *meta;
    uint64_t metan;
    if (build_meta(m, &meta, &metan)) goto nomem;
    if ((si = add_sect(&w, ".slm.meta", SHT_PROGBITS, 8, 0, meta, metan)) < 0) goto nomem;
    add_sym(&w, "meta", si, 0, metan);

    const int weights_idx = w.n; /* added last; its symbols refer to it now */
    for (int i = 0; i < n_wt; i++)
        if (wt[i].used) add_sym(&w, wt[i].t->name, weights_idx, wt[i].dst, wt[i].t->nbytes);
    if (add_sect(&w, ".slm.weights", SHT_PROGBITS, SLM_BLOB_PAGE, 0, NULL, wsize) != weights_idx) goto nomem;
    w.s[weights_idx].flags = SHF_ALLOC;

    if (w.sym.oom || w.str.oom) goto nomem;
    int symtab_idx = add_sect(&w, ".symtab", SHT_SYMTAB, 8, sizeof(Elf64_Sym), w.sym.p, w.sym.n);
    w.sym.p = NULL;
    if (symtab_idx < 0) goto nomem;
    int strtab_idx = add_sect(&w, ".strtab", SHT_STRTAB, 1, 0, w.str.p, w.str.n);
    w.str.p = NULL;
    if (strtab_idx < 0) goto nomem;
    w.s[symtab_idx].link = (uint32_t)strtab_idx + 1;
    w.s[symtab_idx].info = 1; /* first non-local symbol */
    sbuf shs = {0};
    sb_grow(&shs, 1);
    uint32_t *name_off = slm_calloc((size_t)w.n + 2, sizeof *name_off);
    if (!name_off) goto nomem;
    for (int i = 0; i < w.n; i++) name_off[i] = sb_str(&shs, w.s[i].name);
    uint32_t shs_name = sb_str(&shs, ".shstrtab");
    if (shs.oom) {
        slm_xfree(name_off);
        slm_xfree(shs.p);
        goto nomem;
    }
    int shstr_idx = add_sect(&w, ".shstrtab", SHT_STRTAB, 1, 0, shs.p, shs.n);
    if (shstr_idx < 0) {
        slm_xfree(name_off);
        goto nomem;
    }
    name_off[shstr_idx] = shs_name;

    /* ---- layout: header, sections (all but weights), section headers, weights ---- */
    uint64_t off = sizeof(Elf64_Ehdr);
    for (int i = 0; i < w.n; i++) {
        if (i == weights_idx) continue;
        off = align_up(off, w.s[i].align);
        w.s[i].off = off;
        off += w.s[i].size;
    }
    off = align_up(off, 8);
    const uint64_t shoff = off;
    const int shnum = w.n + 1;
    off += (uint64_t)shnum * sizeof(Elf64_Shdr);
    const uint64_t woff = align_up(off, SLM_BLOB_PAGE);
    w.s[weights_idx].off = woff;
    prefix = slm_calloc(1, (size_t)woff);
    if (!prefix) {
        slm_xfree(name_off);
        goto nomem;
    }
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
    for (int i = 0; i < w.n; i++) {
        Elf64_Shdr sh;
        memset(&sh, 0, sizeof sh);
        sh.sh_name = name_off[i];
        sh.sh_type = w.s[i].type;
        sh.sh_flags = w.s[i].flags;
        sh.sh_offset = w.s[i].off;
        sh.sh_size = w.s[i].size;
        sh.sh_link = w.s[i].link;
        sh.sh_info = w.s[i].info;
        sh.sh_addralign = w.s[i].align;
        sh.sh_entsize = w.s[i].entsize;
        memcpy(prefix + shoff + (uint64_t)(i + 1) * sizeof sh, &sh, sizeof sh);
        if (i != weights_idx && w.s[i].size) memcpy(prefix + w.s[i].off, w.s[i].data, (size_t)w.s[i].size);
    }
    slm_xfree(name_off);
    wr64(prefix + w.s[ident_idx].off + BLOB_IDENT_CHECKSUM_OFF, slm_hash64(prefix, (size_t)woff, 0x636b736dull));

    /* ---- write: a temporary file beside path, then rename ---- */
    size_t plen = strlen(path);
    tmp = slm_malloc(plen + 16);
    if (!tmp) goto nomem;
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    fd = mkstemp(tmp);
    if (fd < 0) {
        s = slm_errf(err, SLM_ERR_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
        slm_xfree(tmp);
        tmp = NULL;
        goto out;
    }
    (void)fchmod(fd, 0644); /* mkstemp makes 0600; a blob is as readable as a model file */
    if ((s = write_all(fd, prefix, woff, tmp, err))) goto out;
    {
        static const uint8_t zero[SLM_BLOB_PAGE];
        uint64_t at = 0, last_report = 0;
        for (int i = 0; i < n_wt; i++) {
            if (!wt[i].used) continue;
            if ((s = write_all(fd, zero, wt[i].dst - at, tmp, err))) goto out;
            if ((s = write_all(fd, src + wt[i].src, wt[i].t->nbytes, tmp, err))) goto out;
            at = wt[i].dst + wt[i].t->nbytes;
            if (progress && at - last_report >= (64u << 20)) {
                last_report = at;
                progress(ud, "weights", (int)(at >> 20), (int)(wsize >> 20));
            }
        }
        if ((s = write_all(fd, zero, wsize - at, tmp, err))) goto out;
        if (progress) progress(ud, "weights", (int)(wsize >> 20), (int)(wsize >> 20));
    }
    if (fsync(fd) != 0) {
        s = slm_errf(err, SLM_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        s = slm_errf(err, SLM_ERR_IO, "%s: close: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        s = slm_errf(err, SLM_ERR_IO, "%s: cannot rename into place: %s", path, strerror(errno));
        goto out;
    }
    slm_xfree(tmp);
    tmp = NULL;
    goto out;
nomem:
    s = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory building the blob", path);
out:
    if (fd >= 0) close(fd);
    if (tmp) {
        unlink(tmp);
        slm_xfree(tmp);
    }
    for (int i = 0; i < w.n; i++) slm_xfree(w.s[i].data);
    slm_xfree(w.s);
    slm_xfree(w.sym.p);
    slm_xfree(w.str.p);
    slm_xfree(prefix);
    slm_xfree(wt);
    return s;
}
