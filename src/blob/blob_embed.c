/* The blob reader's embedding record (.slm.embed) and the heads it names
 * in the tensor table: the classifier's tensors and sentence-transformers'
 * Dense modules (format 23: any count up to SLM_MAX_DENSE, each with its
 * activation and optional bias), and nomic-bert-moe's layer rule. */
#include "blob/blob_check.h"

/* .slm.embed's record, before the config (which takes the encoder kind
 * and the experts' layer rule from it): each field's range, the Dense
 * table's entries and their chain (the ends and the tensors: blob_check_heads). */
slm_status blob_read_embed(rctx *r, const uint8_t *p, uint64_t size) {
    if (size != BLOB_EMBED_SIZE) return rbad(r, "section .slm.embed: sh_size %llu, want %d", (unsigned long long)size, BLOB_EMBED_SIZE);
    if (rd32(p) != BLOB_EMBED_SIZE) return rbad(r, "section .slm.embed: record_size %u, want %d", rd32(p), BLOB_EMBED_SIZE);
    for (int i = 60; i < BLOB_EMBED_DENSE_AT; i++)
        if (p[i]) return rbad(r, "section .slm.embed: reserved byte %d not zero", i);
    slm_blob_embed *e = &r->b->embed;
    blob_get_embed(p, e);
#define ERANGE(v, lo, hi, what) SRANGE(".slm.embed", v, lo, hi, what)
    ERANGE(e->encoder, 0, 6, "encoder");
    ERANGE(e->pooling, 0, 4, "pooling");
    ERANGE(e->add_eos, 0, 1, "add_eos");
    ERANGE(e->pair_bos, 0, 1, "pair_bos");
    ERANGE(e->pair_eos, 0, 1, "pair_eos");
    ERANGE(e->pair_sep, 0, 1, "pair_sep");
    ERANGE(e->n_cls1, 0, 65536, "n_cls1");
    ERANGE(e->n_cls, e->n_cls1 ? 1 : 0, 64, "n_cls");
    ERANGE(e->n_dense, 0, SLM_MAX_DENSE, "n_dense");
    ERANGE(e->moe_every, 0, 255, "moe_every");
    ERANGE(e->expert_ungated, 0, 1, "expert_ungated");
    ERANGE(e->cls_pool, 0, e->n_cls ? 3 : 0, "cls_pool (0..3 with a classifier, else 0)");
    for (int k = 0; k < e->n_dense; k++) {
        const slm_blob_embed_dense *d = &e->dense[k];
        char what[64];
#define DRANGE(v, lo, hi, f) do { snprintf(what, sizeof what, "dense[%d].%s", k, f); ERANGE(v, lo, hi, what); } while (0)
        DRANGE(d->module, k ? e->dense[k - 1].module + 1 : 0, SLM_BLOB_EMBED_MAX_MODULE, "module (ascending)");
        DRANGE(d->in, k ? e->dense[k - 1].out : 1, k ? e->dense[k - 1].out : 1 << 20, "in (the previous one's out)");
        DRANGE(d->out, 1, 1 << 20, "out");
        DRANGE(d->act, SLM_DENSE_IDENTITY, SLM_DENSE_TANH, "act (0 Identity, 1 Tanh)");
        DRANGE(d->bias, 0, 1, "bias");
#undef DRANGE
        if (rd32(p + BLOB_EMBED_DENSE_AT + k * BLOB_EMBED_DENSE_SIZE + 20))
            return rbad(r, "section .slm.embed: dense[%d]: reserved field not zero", k);
    }
#undef ERANGE
    for (int i = BLOB_EMBED_DENSE_AT + e->n_dense * BLOB_EMBED_DENSE_SIZE; i < BLOB_EMBED_SIZE; i++)
        if (p[i]) return rbad(r, "section .slm.embed: byte %d of the Dense table past n_dense %d not zero", i, e->n_dense);
    if (e->heads & ~0xfu) return rbad(r, "section .slm.embed: heads 0x%x: unknown bits", e->heads);
    if (e->pooling == 4 && !e->n_cls) return rbad(r, "section .slm.embed: pooling rank without a classifier (n_cls 0)");
    r->b->has_embed = 1;
    return SLM_OK;
}

/* Tensor name of the table's entry i (NUL-terminated: checked). */
static const uint8_t *tensor_entry(const slm_blob *b, uint32_t i) { return b->tensors + (size_t)i * BLOB_TENSOR_SIZE; }

int slm_blob_tensor(const slm_blob *b, const char *name, slm_tensor *t) {
    for (uint32_t i = 0; b->tensors && i < b->n_tensors; i++) {
        const uint8_t *e = tensor_entry(b, i);
        if (strcmp((const char *)e, name)) continue;
        memset(t, 0, sizeof *t);
        memcpy(t->name, e, 64);
        t->type = rd32(e + 64);
        t->n_dims = rd32(e + 68);
        memcpy(t->ne, e + 72, 32);
        t->data = b->weights + rd64u(e + 104);
        t->nbytes = rd64u(e + 112);
        return 1;
    }
    return 0;
}

/* Head tensor t checked against what the record wants: [cols, rows] with
 * its bytes, of a type the session can read (a vector: f32, one dim). */
static slm_status check_head(rctx *r, const slm_tensor *t, const char *name, int64_t cols, int64_t rows_want, int vec) {
    const int64_t rows = t->n_dims > 1 ? t->ne[1] : 1;
    const uint64_t rb = slm_row_bytes(t->type, (uint64_t)cols); /* 0: unknown type or part blocks */
    const int ok = t->ne[0] == cols && rows == rows_want && t->n_dims >= 1 && t->n_dims <= 2 && rb &&
                   t->nbytes == rb * (uint64_t)rows && (!vec || (t->type == SLM_F32 && t->n_dims == 1));
    if (!ok)
        return rbad(r, "section .slm.tensors: head %s: type %u, dims %u [%lld, %lld], %llu bytes; want [%lld, %lld]%s", name,
                   t->type, t->n_dims, (long long)t->ne[0], (long long)rows, (unsigned long long)t->nbytes,
                   (long long)cols, (long long)rows_want, vec ? " f32" : "");
    return SLM_OK;
}

/* The heads .slm.embed names, each in the tensor table exactly when the
 * record says, of its shape ([cols, rows] with its bytes) and a type the
 * session can read: the classifier's, and each Dense module's matrix
 * [in, out] and bias [out] (the chain from dim back to dim; no other
 * dense_* tensor in the table). */
slm_status blob_check_heads(rctx *r) {
    const slm_blob_embed *e = &r->b->embed;
    const int dim = r->c->cfg.dim, h = e->n_cls1 ? e->n_cls1 : dim;
    const int cls_w = (e->heads & SLM_BLOB_EMBED_CLS_W) != 0;
    slm_status s;
    if (e->n_cls && !e->n_cls1 && !cls_w) return rbad(r, "section .slm.embed: n_cls %d without a classifier's tensors", e->n_cls);
    if (e->n_cls1 && !cls_w && e->n_cls != e->n_cls1)
        return rbad(r, "section .slm.embed: n_cls %d, cls.weight alone gives %d scores", e->n_cls, e->n_cls1);
    if ((e->heads & (SLM_BLOB_EMBED_CLS1_B | SLM_BLOB_EMBED_CLS_NORM)) && !e->n_cls1)
        return rbad(r, "section .slm.embed: heads 0x%x: cls.bias or cls.norm without cls.weight", e->heads);
    if ((e->heads & (SLM_BLOB_EMBED_CLS_W | SLM_BLOB_EMBED_CLS_B)) && !e->n_cls)
        return rbad(r, "section .slm.embed: heads 0x%x: cls.output without scores (n_cls 0)", e->heads);
    if (e->n_dense && (e->dense[0].in != dim || e->dense[e->n_dense - 1].out != dim))
        return rbad(r, "section .slm.embed: the Dense modules take %d values and give %d, the embeddings are %d wide",
                   e->dense[0].in, e->dense[e->n_dense - 1].out, dim);
    /* name, wanted (cols, rows; rows 0: absent), a vector (f32, one dim) */
    const struct { const char *name; int64_t cols, rows; int vec; } want[BLOB_EMBED_N_HEADS] = {
        {"cls.weight", dim, e->n_cls1, 0},
        {"cls.bias", e->n_cls1, (e->heads & SLM_BLOB_EMBED_CLS1_B) ? 1 : 0, 1},
        {"cls.norm.weight", e->n_cls1, (e->heads & SLM_BLOB_EMBED_CLS_NORM) ? 1 : 0, 1},
        {"cls.output.weight", h, cls_w ? e->n_cls : 0, 0},
        {"cls.output.bias", e->n_cls, (e->heads & SLM_BLOB_EMBED_CLS_B) ? 1 : 0, 1},
    };
    for (int k = 0; k < BLOB_EMBED_N_HEADS; k++) {
        slm_tensor t;
        const int have = slm_blob_tensor(r->b, want[k].name, &t);
        if (have != (want[k].rows > 0))
            return rbad(r, "section .slm.tensors: head %s %s, .slm.embed says %s", want[k].name, have ? "present" : "absent",
                       want[k].rows > 0 ? "present" : "absent");
        if (have && (s = check_head(r, &t, want[k].name, want[k].cols, want[k].rows, want[k].vec))) return s;
    }
    for (int k = 0; k < e->n_dense; k++)
        for (int b = 0; b < 2; b++) {
            const slm_blob_embed_dense *d = &e->dense[k];
            char name[32];
            blob_dense_name(name, d->module, b);
            slm_tensor t;
            const int have = slm_blob_tensor(r->b, name, &t), wanted = !b || d->bias;
            if (have != wanted)
                return rbad(r, "section .slm.tensors: head %s %s, .slm.embed says %s (dense[%d])", name,
                           have ? "present" : "absent", wanted ? "present" : "absent", k);
            if (have && (s = check_head(r, &t, name, b ? d->out : d->in, b ? 1 : d->out, b))) return s;
        }
    for (uint32_t i = 0; i < r->b->n_tensors; i++) { /* a dense_* tensor the record does not name */
        const char *name = (const char *)tensor_entry(r->b, i);
        if (strncmp(name, "dense_", 6)) continue;
        int named = 0;
        for (int k = 0; k < e->n_dense && !named; k++)
            for (int b = 0; b < 2 && !named; b++) {
                char dn[32];
                blob_dense_name(dn, e->dense[k].module, b);
                named = !strcmp(name, dn);
            }
        if (!named) return rbad(r, "section .slm.tensors: head %s, not in .slm.embed's Dense table (%d modules)", name, e->n_dense);
    }
    return SLM_OK;
}
