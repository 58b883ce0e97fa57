/* The byte-level BPE tokenizer's serialized form (the blob's tokenizer
 * section): written by slm_bpe_serialize, read back and checked by
 * slm_bpe_load_mem.
 *
 * "SLMBPE\0\1", u32 version, u32 n_vocab, u32 n_merges, i32 bos eos eot unk
 * pad, u8 add_bos add_eos byte_level ignore_merges add_prefix_space
 * spm_prepend spm_split 0, u32 pre_name length + bytes, u32 n_regex + (u32
 * length + bytes) each, per token u32 length, the token bytes, per token u8
 * type, per merge i32 left i32 right, u64 FNV-1a of everything before.
 */
#include <stdlib.h>

#include "text/bpe_internal.h"

#define SER_MAGIC "SLMBPE\0\1"
#define SER_VERSION 1u

typedef struct wbuf {
    uint8_t *p;
    size_t cap, n;
} wbuf;

static void wb(wbuf *w, const void *d, size_t n) {
    if (w->p && w->n + n <= w->cap) memcpy(w->p + w->n, d, n);
    w->n += n;
}
static void wb32(wbuf *w, uint32_t v) { wb(w, &v, 4); }

size_t slm_bpe_serialize(const slm_bpe *t, void *buf, size_t cap) {
    wbuf w = {buf, cap, 0};
    /* first pass sizes, second writes */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            if (!buf || w.n > cap) return w.n;
            w.n = 0;
        } else
            w.p = NULL;
        if (pass == 1) w.p = buf;
        wb(&w, SER_MAGIC, 8);
        wb32(&w, SER_VERSION);
        wb32(&w, (uint32_t)t->n_vocab);
        wb32(&w, (uint32_t)t->n_merges);
        int32_t sp[5] = {t->bos, t->eos, t->eot, t->unk, t->pad};
        wb(&w, sp, sizeof sp);
        uint8_t fl[8] = {(uint8_t)t->add_bos, (uint8_t)t->add_eos, (uint8_t)t->byte_level,
                         (uint8_t)t->ignore_merges, (uint8_t)t->add_prefix_space, (uint8_t)t->spm_prepend,
                         (uint8_t)t->spm_split, (uint8_t)t->nl_split};
        wb(&w, fl, 8);
        uint32_t pl = (uint32_t)strlen(t->pre_name);
        wb32(&w, pl);
        wb(&w, t->pre_name, pl);
        wb32(&w, (uint32_t)t->n_regex);
        for (int i = 0; i < t->n_regex; i++) {
            uint32_t l = (uint32_t)strlen(t->regex[i]);
            wb32(&w, l);
            wb(&w, t->regex[i], l);
        }
        wb(&w, t->len, (size_t)t->n_vocab * 4);
        for (int i = 0; i < t->n_vocab; i++) wb(&w, slm_bpe__tok(t, i), t->len[i]);
        wb(&w, t->type, (size_t)t->n_vocab);
        for (int m = 0; m < t->n_merges; m++) {
            wb32(&w, (uint32_t)t->merge_l[m]);
            wb32(&w, (uint32_t)t->merge_r[m]);
        }
        uint64_t h = w.p ? slm_bpe__fnv64(w.p, w.n) : 0;
        wb(&w, &h, 8);
    }
    return w.n;
}

slm_status slm_bpe_load_mem(slm_bpe **out, const void *data, size_t size, const char *name, slm_err *err) {
    *out = NULL;
    if (!name) name = "tokenizer";
    if (!data || size < 8 + 8 || memcmp(data, SER_MAGIC, 8) != 0)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: not a serialized BPE tokenizer (bad magic or size)", name);
    uint64_t h;
    memcpy(&h, (const uint8_t *)data + size - 8, 8);
    if (h != slm_bpe__fnv64(data, size - 8))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE tokenizer checksum mismatch (corrupted)", name);
    slm_rd r = {data, size - 8, 8};
    uint32_t ver, nv, nm, pl, nr;
    int32_t sp[5];
    uint8_t fl[8];
    if (!slm_rd_u32(&r, &ver) || ver != SER_VERSION)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE tokenizer version unsupported", name);
    if (!slm_rd_u32(&r, &nv) || !slm_rd_u32(&r, &nm) || !slm_rd_bytes(&r, sp, sizeof sp) ||
        !slm_rd_bytes(&r, fl, 8))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE tokenizer header truncated", name);
    if (nv == 0 || nv > BPE_MAX_VOCAB || nm > BPE_MAX_MERGES)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE tokenizer counts out of range (%u tokens, %u merges)", name,
                        nv, nm);
    for (int i = 0; i < 5; i++)
        if (sp[i] < -1 || sp[i] >= (int32_t)nv)
            return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE special id %d out of range", name, sp[i]);
    for (int i = 0; i < 8; i++)
        if (fl[i] > (i == 5 ? 2 : 1))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE flag %d has value %u", name, i, fl[i]);
    const uint8_t *pn;
    if (!slm_rd_u32(&r, &pl) || pl > 63 || !slm_rd_ptr(&r, pl, &pn) || !slm_rd_u32(&r, &nr) ||
        nr > BPE_MAX_REGEX)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE pre-tokenizer record malformed", name);
    /* token lengths: bounds before allocation */
    if (!slm_rd_need(&r, (uint64_t)nv * 4)) return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE token table truncated", name);
    slm_rd rr = r;
    for (uint32_t i = 0; i < nr; i++) {
        uint32_t l;
        const uint8_t *p;
        if (!slm_rd_u32(&rr, &l) || l > BPE_MAX_REGEX_LEN || !slm_rd_ptr(&rr, l, &p))
            return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE regex %u truncated", name, i);
    }
    const uint8_t *lens;
    if (!slm_rd_ptr(&rr, (uint64_t)nv * 4, &lens))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE token table truncated", name);
    uint64_t blob = 0;
    for (uint32_t i = 0; i < nv; i++) {
        uint32_t l;
        memcpy(&l, lens + 4 * (size_t)i, 4);
        if (l > BPE_MAX_TOKEN_LEN) return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE token %u too long", name, i);
        blob += l;
    }
    if (!slm_rd_need(&rr, blob + nv + (uint64_t)nm * 8))
        return slm_errf(err, SLM_ERR_FORMAT, "%s: BPE tokenizer truncated (tokens/merges)", name);
    slm_bpe *t = slm_bpe__alloc((int)nv, blob + nv);
    if (!t) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", name);
    slm_status st;
    t->bos = sp[0]; t->eos = sp[1]; t->eot = sp[2]; t->unk = sp[3]; t->pad = sp[4];
    t->add_bos = fl[0]; t->add_eos = fl[1]; t->byte_level = fl[2]; t->ignore_merges = fl[3];
    t->add_prefix_space = fl[4]; t->spm_prepend = fl[5]; t->spm_split = fl[6]; t->nl_split = fl[7];
    memcpy(t->pre_name, pn, pl);
    t->pre_name[pl] = 0;
    for (uint32_t i = 0; i < nr; i++) {
        uint32_t l = 0;
        const uint8_t *p = NULL;
        slm_rd_u32(&r, &l);
        slm_rd_ptr(&r, l, &p); /* checked above */
        if ((st = slm_bpe__add_regex(t, (const char *)p, l, name, err))) goto fail;
    }
    r.pos += (uint64_t)nv * 4;
    uint64_t o = 0;
    for (uint32_t i = 0; i < nv; i++) {
        uint32_t l;
        const uint8_t *p = NULL;
        memcpy(&l, lens + 4 * (size_t)i, 4);
        slm_rd_ptr(&r, l, &p); /* checked above */
        t->off[i] = (uint32_t)o;
        t->len[i] = l;
        memcpy(t->blob + o, p, l);
        t->blob[o + l] = 0;
        o += l + 1;
    }
    slm_rd_bytes(&r, t->type, nv);
    for (uint32_t i = 0; i < nv; i++)
        if (t->type[i] > 6) {
            st = slm_errf(err, SLM_ERR_FORMAT, "%s: BPE token %u has type %u", name, i, t->type[i]);
            goto fail;
        }
    t->n_merges = (int)nm;
    t->merge_l = slm_malloc((size_t)(nm ? nm : 1) * sizeof *t->merge_l);
    t->merge_r = slm_malloc((size_t)(nm ? nm : 1) * sizeof *t->merge_r);
    if (!t->merge_l || !t->merge_r) {
        st = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    for (uint32_t m = 0; m < nm; m++) {
        slm_rd_i32(&r, &t->merge_l[m]);
        slm_rd_i32(&r, &t->merge_r[m]);
    }
    if (r.pos != r.len) {
        st = slm_errf(err, SLM_ERR_FORMAT, "%s: %llu trailing bytes after the BPE tokenizer", name,
                      (unsigned long long)(r.len - r.pos));
        goto fail;
    }
    if ((st = slm_bpe__finish(t, name, err))) goto fail;
    *out = t;
    return SLM_OK;
fail:
    slm_bpe_free(t);
    return st;
}
