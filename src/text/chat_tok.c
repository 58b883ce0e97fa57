/* Tokenizing rendered conversations (see chat_tok.h): the BOS / EOS texts,
 * a raw piece -> id map for continuations, and the masked tokenization
 * that keeps message bytes text. Built on slm_tokenizer alone. */
#include "text/chat_tok.h"

#include <string.h>

#include "common/common.h"

struct slm_chat_tok {
    const slm_tokenizer *tok; /* NULL: no vocabulary */
    char bos[64], eos[64];
    int bos_id, eos_id, V;
    /* raw piece -> id, built on first use */
    char *blob;
    uint32_t *off;
    uint32_t *plen;
    int32_t *slot;
    uint32_t nslot;
    int maxlen;
    int built;
};

static void trim_copy(char *dst, size_t cap, const char *s) {
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    if (n >= cap) n = 0; /* not a sensible special token text */
    memcpy(dst, s, n);
    dst[n] = 0;
}

slm_chat_tok *slm_chat_tok_new(const slm_tokenizer *tok) {
    slm_chat_tok *t = slm_calloc(1, sizeof *t);
    if (!t || !tok) return t; /* no tokenizer (an engine not loaded): ids 0, texts "" */
    t->tok = tok;
    t->bos_id = slm_tok_bos(tok);
    t->eos_id = slm_tok_eos(tok);
    t->V = slm_tok_vocab_size(tok);
    trim_copy(t->bos, sizeof t->bos, slm_tok_decode(tok, -1, t->bos_id));
    trim_copy(t->eos, sizeof t->eos, slm_tok_decode(tok, -1, t->eos_id));
    if (!strcmp(t->bos, t->eos)) t->eos[0] = 0;
    return t;
}

void slm_chat_tok_free(slm_chat_tok *t) {
    if (!t) return;
    slm_xfree(t->blob);
    slm_xfree(t->off);
    slm_xfree(t->plen);
    slm_xfree(t->slot);
    slm_xfree(t);
}

const char *slm_chat_tok_bos_text(const slm_chat_tok *t) { return t ? t->bos : ""; }
const char *slm_chat_tok_eos_text(const slm_chat_tok *t) { return t ? t->eos : ""; }

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int build_map(slm_chat_tok *t) {
    if (t->built) return t->built > 0;
    t->built = -1;
    int V = t->V;
    size_t total = 0;
    for (int i = 0; i < V; i++) total += strlen(slm_tok_decode(t->tok, -1, i));
    t->blob = slm_malloc(total + 1);
    t->off = slm_malloc((size_t)V * sizeof(uint32_t));
    t->plen = slm_malloc((size_t)V * sizeof(uint32_t));
    t->nslot = 1;
    while (t->nslot < (uint32_t)V * 2) t->nslot <<= 1;
    t->slot = slm_malloc((size_t)t->nslot * sizeof(int32_t));
    if (!t->blob || !t->off || !t->plen || !t->slot || total > UINT32_MAX) return 0;
    for (uint32_t i = 0; i < t->nslot; i++) t->slot[i] = -1;
    size_t o = 0;
    for (int i = 0; i < V; i++) {
        const char *p = slm_tok_decode(t->tok, -1, i);
        size_t n = strlen(p);
        memcpy(t->blob + o, p, n);
        t->off[i] = (uint32_t)o;
        t->plen[i] = (uint32_t)n;
        o += n;
        if ((int)n > t->maxlen) t->maxlen = (int)n;
    }
    /* highest id first, first insert wins: char pieces beat byte tokens */
    for (int i = V - 1; i >= 0; i--) {
        if (!t->plen[i] || i == t->bos_id || i == t->eos_id) continue;
        uint32_t h = hash_bytes(t->blob + t->off[i], t->plen[i]) & (t->nslot - 1);
        int dup = 0;
        while (t->slot[h] >= 0) {
            int j = t->slot[h];
            if (t->plen[j] == t->plen[i] && !memcmp(t->blob + t->off[j], t->blob + t->off[i], t->plen[i])) { dup = 1; break; }
            h = (h + 1) & (t->nslot - 1);
        }
        if (!dup) t->slot[h] = i;
    }
    t->built = 1;
    return 1;
}

static int lookup_piece(const slm_chat_tok *t, const char *s, size_t n) {
    uint32_t h = hash_bytes(s, n) & (t->nslot - 1);
    while (t->slot[h] >= 0) {
        int j = t->slot[h];
        if (t->plen[j] == n && !memcmp(t->blob + t->off[j], s, n)) return j;
        h = (h + 1) & (t->nslot - 1);
    }
    return -1;
}

typedef struct ivec {
    int32_t *v;
    int n, cap;
    int oom;
} ivec;
static void iv_push(ivec *v, int32_t x) {
    if (v->oom) return;
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 64;
        int32_t *nv = slm_realloc(v->v, (size_t)nc * sizeof(int32_t));
        if (!nv) { v->oom = 1; return; }
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
}

/* slm_tok_encode of a NUL-terminated segment into *ids; special-token
 * text on bytes marked in plain (NULL: none) stays text. */
static int tok_segment(slm_chat_tok *t, const char *seg, const uint8_t *plain, int add_bos, int32_t **ids) {
    int n = slm_tok_encode_masked(t->tok, seg, plain, add_bos, 0, NULL, 0);
    if (n < 0) return -1;
    *ids = slm_malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!*ids) return -1;
    slm_tok_encode_masked(t->tok, seg, plain, add_bos, 0, *ids, n);
    return n;
}

/* A continuation segment: tokens whose pieces concatenate to exactly seg
 * (SentencePiece would add a dummy-prefix space; take it out again). */
static int tok_continue(slm_chat_tok *t, const char *seg, const uint8_t *plain, ivec *out) {
    int32_t *ids = NULL;
    int n = tok_segment(t, seg, plain, 0, &ids);
    if (n < 0) return -1;
    size_t sl = strlen(seg), cl = 0;
    for (int i = 0; i < n; i++) cl += strlen(slm_tok_decode(t->tok, -1, ids[i]));
    int start = 0, save = out->n;
    if (cl == sl + 1 && n > 0 && build_map(t)) {
        const char *p0 = slm_tok_decode(t->tok, -1, ids[0]);
        if (p0[0] == ' ') {
            /* first piece " xyz": replace it with a greedy tokenization of "xyz" */
            size_t rl = strlen(p0 + 1);
            const char *rest = p0 + 1;
            size_t i = 0;
            while (i < rl) {
                size_t k = rl - i < (size_t)t->maxlen ? rl - i : (size_t)t->maxlen;
                int id = -1;
                for (; k > 0; k--)
                    if ((id = lookup_piece(t, rest + i, k)) >= 0) break;
                if (id < 0) break; /* no token for this byte: keep the original */
                iv_push(out, id);
                i += k;
            }
            if (i == rl) start = 1;
            else out->n = save;
        }
    }
    for (int i = start; i < n; i++) iv_push(out, ids[i]);
    slm_xfree(ids);
    return out->oom ? -1 : 0;
}

/* 1 when any of plain[0, n) is set. */
static int marked(const uint8_t *plain, size_t n) {
    for (size_t i = 0; plain && i < n; i++)
        if (plain[i]) return 1;
    return 0;
}

/* The first BOS / EOS text in s whose bytes are not marked in plain (s's
 * mask; NULL: none): message content never becomes BOS / EOS. */
static const char *find_special(const slm_chat_tok *t, const char *s, const uint8_t *plain, int *id, size_t *len) {
    const char *best = NULL;
    const char *texts[2] = {t->bos, t->eos};
    int ids[2] = {t->bos_id, t->eos_id};
    for (int k = 0; k < 2; k++) {
        if (!texts[k][0]) continue;
        const size_t tl = strlen(texts[k]);
        const char *p = strstr(s, texts[k]);
        while (p && plain && marked(plain + (p - s), tl)) p = strstr(p + 1, texts[k]);
        if (p && (!best || p < best)) {
            best = p;
            *id = ids[k];
            *len = strlen(texts[k]);
        }
    }
    return best;
}

static int tokenize_core(slm_chat_tok *t, const char *text, const uint8_t *plain, int start, int special,
                         int32_t **ids_out);

int slm_chat_tokenize(slm_chat_tok *t, const char *text, int start, int32_t **ids_out) {
    return tokenize_core(t, text, NULL, start, 1, ids_out);
}

int slm_chat_tokenize_ex(slm_chat_tok *t, const char *text, int start, int special, int32_t **ids_out) {
    return tokenize_core(t, text, NULL, start, special, ids_out);
}

int slm_chat_tokenize_masked(slm_chat_tok *t, const char *text, const uint8_t *plain, int start, int32_t **ids_out) {
    return tokenize_core(t, text, plain, start, 1, ids_out);
}

/* special = 0: BOS / EOS text is not split out; plain: see slm_chat_tokenize_masked. */
static int tokenize_core(slm_chat_tok *t, const char *text, const uint8_t *plain, int start, int special,
                         int32_t **ids_out) {
    *ids_out = NULL;
    if (!t || !text) return -1;
    ivec out = {0};
    size_t bl = strlen(t->bos);
    if (start && bl && !strncmp(text, t->bos, bl) && !marked(plain, bl)) {
        text += bl;
        if (plain) plain += bl;
    }
    char *buf = slm_strdup(text);
    if (!buf) return -1;
    char *s = buf;
    int first = 1;
    while (!out.oom) {
        int sid = -1;
        size_t slen = 0;
        const uint8_t *sm = plain ? plain + (s - buf) : NULL; /* s's mask */
        char *sp = special ? (char *)find_special(t, s, sm, &sid, &slen) : NULL;
        if (sp) *sp = 0;
        if (first && start) {
            int32_t *ids = NULL;
            int n = *s ? tok_segment(t, s, sm, 1, &ids) : 0;
            if (n < 0) { out.oom = 1; break; }
            if (!*s) iv_push(&out, t->bos_id);
            for (int i = 0; i < n; i++) iv_push(&out, ids[i]);
            slm_xfree(ids);
        } else if (*s) {
            if (tok_continue(t, s, sm, &out)) { out.oom = 1; break; }
        }
        first = 0;
        if (!sp) break;
        iv_push(&out, sid);
        s = sp + slen;
    }
    slm_xfree(buf);
    if (out.oom) {
        slm_xfree(out.v);
        return -1;
    }
    if (!out.v) out.v = slm_malloc(sizeof(int32_t));
    *ids_out = out.v;
    return out.n;
}

char *slm_chat_render(const slm_tmpl *tm, const slm_chat_tok *t, const slm_chat_msg *msgs, int n,
                      int add_generation_prompt, slm_err *err) {
    return slm_chat_render_mask(tm, t, msgs, n, add_generation_prompt, NULL, err);
}

char *slm_chat_render_mask(const slm_tmpl *tm, const slm_chat_tok *t, const slm_chat_msg *msgs, int n,
                           int add_generation_prompt, uint8_t **mask, slm_err *err) {
    slm_tmpl_vars v = {0};
    v.bos_token = t ? t->bos : "";
    v.eos_token = t ? t->eos : "";
    v.add_generation_prompt = add_generation_prompt;
    slm_err e;
    char *out = slm_tmpl_render_mask(tm, msgs, n, &v, mask, &e);
    if (!out && err) *err = e;
    return out;
}
