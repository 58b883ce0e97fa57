/* The special-token partition (st_partition.h). */
#include <string.h>

#include "common/common.h"
#include "text/st_partition.h"

static int frags_add(slm_st_frags *f, int32_t id, int32_t start, int32_t len) {
    if (f->n == f->cap) {
        const int nc = f->cap ? 2 * f->cap : 16;
        slm_st_frag *na = slm_realloc(f->a, (size_t)nc * sizeof *na);
        if (!na) return 0;
        f->a = na;
        f->cap = nc;
    }
    f->a[f->n++] = (slm_st_frag){id, start, len};
    return 1;
}

/* First occurrence of nd[0..nn) in h[0..hn), or NULL. */
static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0 || nn > hn) return NULL;
    const char *end = h + hn - nn;
    for (const char *p = h; p <= end; p++) {
        p = memchr(p, nd[0], (size_t)(end - p) + 1);
        if (!p) return NULL;
        if (memcmp(p, nd, nn) == 0) return p;
    }
    return NULL;
}

/* 1 when any of plain[s, s + l) is set. */
static int any_plain(const uint8_t *plain, int32_t s, size_t l) {
    if (!plain) return 0;
    for (size_t i = 0; i < l; i++)
        if (plain[(size_t)s + i]) return 1;
    return 0;
}

int slm_st_partition(const char *text, int32_t n, int parse_special, const uint8_t *plain, const int32_t *special,
                     int n_special, slm_st_token_fn tok, const void *vocab, slm_st_frags *out) {
    slm_st_frags cur = {0}, nxt = {0};
    uint8_t seen[256] = {0}; /* the bytes the text holds: a token starting with another is skipped at once */
    for (int32_t i = 0; i < n; i++) seen[(uint8_t)text[i]] = 1;
    if (n > 0 && !frags_add(&cur, -1, 0, n)) return 0;
    for (int si = 0; si < n_special; si++) {
        const int32_t id = special[si];
        const char *tx;
        size_t tl;
        const int ctl = tok(vocab, id, &tx, &tl);
        if ((ctl && !parse_special) || tl == 0 || tl > (size_t)n || !seen[(uint8_t)tx[0]]) continue;
        int any = 0;
        for (int f = 0; f < cur.n && !any; f++)
            any = cur.a[f].id < 0 && find_bytes(text + cur.a[f].start, (size_t)cur.a[f].len, tx, tl);
        if (!any) continue;
        nxt.n = 0;
        for (int f = 0; f < cur.n; f++) {
            const slm_st_frag fr = cur.a[f];
            if (fr.id >= 0) {
                if (!frags_add(&nxt, fr.id, 0, 0)) goto oom;
                continue;
            }
            int32_t s = fr.start, from = s;
            const int32_t e = fr.start + fr.len;
            for (;;) {
                const char *m = find_bytes(text + from, (size_t)(e - from), tx, tl);
                if (!m) {
                    if (e > s && !frags_add(&nxt, -1, s, e - s)) goto oom;
                    break;
                }
                const int32_t ms = (int32_t)(m - text);
                if (ctl && any_plain(plain, ms, tl)) { /* content's text: stays text */
                    from = ms + 1;
                    continue;
                }
                if (ms > s && !frags_add(&nxt, -1, s, ms - s)) goto oom;
                if (!frags_add(&nxt, id, 0, 0)) goto oom;
                s = from = ms + (int32_t)tl;
            }
        }
        const slm_st_frags tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    slm_xfree(nxt.a);
    *out = cur;
    return 1;
oom:
    slm_xfree(cur.a);
    slm_xfree(nxt.a);
    return 0;
}
