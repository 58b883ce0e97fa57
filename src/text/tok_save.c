/* Serialization of a tokenizer (the blob's tokenizer section):
 * slm_tok_save and slm_tok_load_mem (tokenizer.h). */
#include "text/tok_internal.h"

/* ---- serialization (the blob's tokenizer section) ---------------------- */

/* Layout, little endian:
 *   u32 magic 'SLMT' (0x544d4c53), u32 version (1), i32 n_vocab,
 *   u8 mode (0 run.c, 1 SentencePiece/llama.cpp), u8 add_space_prefix, u16 0,
 *   i32 bos, i32 eos, i32 unk,
 *   then per token: f32 score, u8 type, u8 0, u16 0, u32 len, len bytes.
 * Everything else (lookup table, byte ids, " " id, user-defined tokens) is
 * derived again by slm_tok__index. */
#define TOK_SER_MAGIC 0x544d4c53u
#define TOK_SER_MAGIC_BPE 0x42504c53u /* "SLPB" */
#define TOK_SER_MAGIC_WPM 0x57504c53u /* "SLPW", then wpm.c's own checked format */
#define TOK_SER_MAGIC_UGM 0x55504c53u /* "SLPU", then ugm.c's own checked format */
#define TOK_SER_VERSION 1u

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

slm_status slm_tok_save(const slm_tokenizer *t, uint8_t **out, size_t *len, slm_err *err) {
    *out = NULL;
    *len = 0;
    if (!t) return slm_errf(err, SLM_ERR_ARG, "tokenizer: nothing to save");
    if (t->bpe) { /* a BPE record: magic, then bpe.c's own checked format */
        size_t need = slm_bpe_serialize(t->bpe, NULL, 0);
        uint8_t *b = need ? slm_malloc(need + 4) : NULL;
        if (!b) return slm_errf(err, SLM_ERR_NOMEM, "tokenizer: out of memory serializing");
        put_u32(b, TOK_SER_MAGIC_BPE);
        if (slm_bpe_serialize(t->bpe, b + 4, need) != need) {
            slm_xfree(b);
            return slm_errf(err, SLM_ERR_INTERNAL, "tokenizer: BPE serialization changed size");
        }
        *out = b;
        *len = need + 4;
        return SLM_OK;
    }
    if (t->wpm) {
        size_t need = slm_wpm_serialize(t->wpm, NULL, 0);
        uint8_t *b = need ? slm_malloc(need + 4) : NULL;
        if (!b) return slm_errf(err, SLM_ERR_NOMEM, "tokenizer: out of memory serializing");
        put_u32(b, TOK_SER_MAGIC_WPM);
        if (slm_wpm_serialize(t->wpm, b + 4, need) != need) {
            slm_xfree(b);
            return slm_errf(err, SLM_ERR_INTERNAL, "tokenizer: WordPiece serialization changed size");
        }
        *out = b;
        *len = need + 4;
        return SLM_OK;
    }
    if (t->ugm) {
        size_t need = slm_ugm_serialize(t->ugm, NULL, 0);
        uint8_t *b = need ? slm_malloc(need + 4) : NULL;
        if (!b) return slm_errf(err, SLM_ERR_NOMEM, "tokenizer: out of memory serializing");
        put_u32(b, TOK_SER_MAGIC_UGM);
        if (slm_ugm_serialize(t->ugm, b + 4, need) != need) {
            slm_xfree(b);
            return slm_errf(err, SLM_ERR_INTERNAL, "tokenizer: Unigram serialization changed size");
        }
        *out = b;
        *len = need + 4;
        return SLM_OK;
    }
    uint64_t n = 28;
    for (int i = 0; i < t->n_vocab; i++) n += 12 + (uint64_t)t->len[i];
    uint8_t *b = slm_malloc((size_t)n);
    if (!b) return slm_errf(err, SLM_ERR_NOMEM, "tokenizer: out of memory serializing");
    put_u32(b, TOK_SER_MAGIC);
    put_u32(b + 4, TOK_SER_VERSION);
    put_u32(b + 8, (uint32_t)t->n_vocab);
    b[12] = (uint8_t)t->mode;
    b[13] = (uint8_t)(t->add_space_prefix != 0);
    b[14] = b[15] = 0;
    put_u32(b + 16, (uint32_t)t->bos);
    put_u32(b + 20, (uint32_t)t->eos);
    put_u32(b + 24, (uint32_t)t->unk);
    uint64_t o = 28;
    for (int i = 0; i < t->n_vocab; i++) {
        uint32_t sc;
        memcpy(&sc, &t->score[i], 4);
        put_u32(b + o, sc);
        b[o + 4] = t->type[i];
        b[o + 5] = b[o + 6] = b[o + 7] = 0;
        put_u32(b + o + 8, t->len[i]);
        memcpy(b + o + 12, slm_tok__s(t, i), t->len[i]);
        o += 12 + (uint64_t)t->len[i];
    }
    *out = b;
    *len = (size_t)n;
    return SLM_OK;
}

slm_status slm_tok_load_mem(slm_tokenizer **out, const void *data, size_t size, const char *name,
                            slm_err *err) {
    *out = NULL;
    if (!name) name = "tokenizer";
    const uint8_t *d = data;
    if (d && size >= 4 && get_u32(d) == TOK_SER_MAGIC_BPE) {
        slm_bpe *b = NULL;
        slm_status st = slm_bpe_load_mem(&b, d + 4, size - 4, name, err);
        if (st) return st;
        return slm_tok_from_bpe(out, b, err);
    }
    if (d && size >= 4 && get_u32(d) == TOK_SER_MAGIC_WPM) {
        slm_wpm *w = NULL;
        slm_status st = slm_wpm_load_mem(&w, d + 4, size - 4, name, err);
        if (st) return st;
        return slm_tok__from_wpm(out, w, err);
    }
    if (d && size >= 4 && get_u32(d) == TOK_SER_MAGIC_UGM) {
        slm_ugm *u = NULL;
        slm_status st = slm_ugm_load_mem(&u, d + 4, size - 4, name, err);
        if (st) return st;
        return slm_tok__from_ugm(out, u, err);
    }
    if (!d || size < 28) return slm_errf(err, SLM_ERR_FORMAT, "%s: header: %zu bytes, need 28", name, size);
    if (get_u32(d) != TOK_SER_MAGIC) return slm_errf(err, SLM_ERR_FORMAT, "%s: magic: not a tokenizer record", name);
    if (get_u32(d + 4) != TOK_SER_VERSION)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: version %u unsupported (want %u)", name, get_u32(d + 4),
                        TOK_SER_VERSION);
    uint32_t nv = get_u32(d + 8);
    if (nv < 1 || nv > TOK_MAX_VOCAB)
        return slm_errf(err, SLM_ERR_FORMAT, "%s: n_vocab %u out of range (1..%d)", name, nv, TOK_MAX_VOCAB);
    int n = (int)nv;
    uint8_t mode = d[12], asp = d[13];
    if (mode != TOK_RUNC && mode != TOK_SPM) return slm_errf(err, SLM_ERR_FORMAT, "%s: mode %u unknown", name, mode);
    if (asp > 1) return slm_errf(err, SLM_ERR_FORMAT, "%s: add_space_prefix %u not 0/1", name, asp);
    uint32_t ids[3] = {get_u32(d + 16), get_u32(d + 20), get_u32(d + 24)};
    static const char *const idn[3] = {"bos", "eos", "unk"};
    for (int k = 0; k < 3; k++)
        if (ids[k] >= nv) return slm_errf(err, SLM_ERR_FORMAT, "%s: %s id %u not below n_vocab %u", name, idn[k], ids[k], nv);
    /* pass 1: bounds of every record, size of the string blob */
    uint64_t o = 28, blob_size = 0;
    for (int i = 0; i < n; i++) {
        if (size - o < 12) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %d: record beyond end", name, i);
        uint32_t len = get_u32(d + o + 8);
        if (d[o + 4] > TT_BYTE) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %d: type %u invalid", name, i, d[o + 4]);
        if (len > TOK_MAX_LEN) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %d: length %u out of range", name, i, len);
        if (size - o - 12 < len) return slm_errf(err, SLM_ERR_FORMAT, "%s: token %d: %u bytes beyond end", name, i, len);
        o += 12 + (uint64_t)len;
        blob_size += (uint64_t)len + 1;
    }
    if (o != size) return slm_errf(err, SLM_ERR_FORMAT, "%s: %llu trailing bytes", name, (unsigned long long)(size - o));
    if (blob_size > UINT32_MAX) return slm_errf(err, SLM_ERR_FORMAT, "%s: token strings too large", name);
    slm_tokenizer *t = slm_tok__alloc(n, blob_size ? blob_size : 1);
    if (!t) return slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory for the tokenizer", name);
    t->mode = mode;
    t->add_space_prefix = asp;
    t->bos = (int)ids[0];
    t->eos = (int)ids[1];
    t->unk = (int)ids[2];
    o = 28;
    uint32_t bo = 0;
    for (int i = 0; i < n; i++) {
        uint32_t sc = get_u32(d + o), len = get_u32(d + o + 8);
        memcpy(&t->score[i], &sc, 4);
        t->type[i] = d[o + 4];
        t->off[i] = bo;
        t->len[i] = len;
        memcpy(t->blob + bo, d + o + 12, len);
        t->blob[bo + len] = 0;
        bo += len + 1;
        o += 12 + (uint64_t)len;
    }
    slm_status st = slm_tok__index(t, err);
    if (st != SLM_OK) {
        slm_tok_free(t);
        return st;
    }
    *out = t;
    return SLM_OK;
}
