#include <stdio.h>

#include "runtime/prefix_cache.h"

void slm_pc_init(slm_prefix_cache *pc, uint64_t limit_bytes) {
    memset(pc, 0, sizeof *pc);
    pc->limit_bytes = limit_bytes;
}

static void drop(slm_prefix_cache *pc, int i) {
    pc->used_bytes -= pc->e[i].bytes;
    slm_xfree(pc->e[i].tokens);
    slm_aligned_free(pc->e[i].kv);
    slm_aligned_free(pc->e[i].state);
    pc->e[i] = pc->e[--pc->n];
}

void slm_pc_free(slm_prefix_cache *pc) {
    while (pc->n) drop(pc, pc->n - 1);
    slm_xfree(pc->e);
    memset(pc, 0, sizeof *pc);
}

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* n KV rows of every layer's K and V, in the cache's type. */
static size_t rows_bytes(const slm_runtime *rt, int n) {
    size_t b = 0;
    for (int l = 0; l < rt->comp->cfg.n_layers; l++) b += 2 * (size_t)n * slm_rt_kv_row_bytes(rt, l);
    return b;
}

/* Where layer l's K (s 0) or V (s 1) rows start in an entry of n rows. */
static size_t entry_off(const slm_runtime *rt, int n, int l, int s) {
    size_t b = 0;
    for (int j = 0; j < l; j++) b += 2 * (size_t)n * slm_rt_kv_row_bytes(rt, j);
    return b + (size_t)s * (size_t)n * slm_rt_kv_row_bytes(rt, l);
}

/* Room for `bytes` more: LRU entries evicted, the table grown. 0: no room. */
static int make_room(slm_prefix_cache *pc, uint64_t bytes) {
    while (pc->used_bytes + bytes > pc->limit_bytes && pc->n > 0) {
        int lru = 0;
        for (int i = 1; i < pc->n; i++)
            if (pc->e[i].last_used < pc->e[lru].last_used) lru = i;
        drop(pc, lru);
        pc->evictions++;
    }
    if (pc->n == pc->cap) {
        int cap = pc->cap ? pc->cap * 2 : 8;
        slm_pc_entry *ne = slm_realloc(pc->e, (size_t)cap * sizeof *ne);
        if (!ne) return 0;
        pc->e = ne;
        pc->cap = cap;
    }
    return 1;
}

/* en, of n rows and `bytes` (room made), into the table as the most recently used. */
static int add(slm_prefix_cache *pc, slm_pc_entry *en, int n, uint64_t bytes) {
    en->n = n;
    en->bytes = bytes;
    en->last_used = ++pc->clock;
    pc->e[pc->n++] = *en;
    pc->used_bytes += bytes;
    return 1;
}

/* Entries (kv 1) or seen records (kv 0) that are prefixes of rt->tokens[0..n)
 * dropped: redundant beside the new one. */
static void drop_prefixes(slm_prefix_cache *pc, const slm_runtime *rt, int n, int kv) {
    for (int i = 0; i < pc->n;)
        if ((pc->e[i].kv != NULL) == kv && pc->e[i].n < n && common_prefix(pc->e[i].tokens, pc->e[i].n, rt->tokens, n) == pc->e[i].n)
            drop(pc, i);
        else
            i++;
}

/* A recurrent entry of n rows restores for ids[0..len) when it holds all of
 * its own rows of it; others any common prefix. */
static int usable(const slm_pc_entry *en, const int32_t *ids, int len) {
    if (!en->kv) return 0;
    const int c = common_prefix(en->tokens, en->n, ids, len);
    return en->state ? (c == en->n ? c : 0) : c;
}

int slm_pc_store(slm_prefix_cache *pc, slm_runtime *rt, int n) {
    if (!pc->limit_bytes || n <= 0 || n > rt->num_stored) return 0;
    const int L = rt->comp->cfg.n_layers;
    const uint64_t sb = rt->rstate ? slm_rt_recur_floats(&rt->comp->cfg) * sizeof(float) : 0;
    uint64_t bytes = (uint64_t)rows_bytes(rt, n) + (uint64_t)n * sizeof(int32_t) + sb;
    if (bytes > pc->limit_bytes) {
        if (sb && !pc->said_too_big) {
            pc->said_too_big = 1;
            fprintf(stderr, "staticlm: note: the prefix cache (%llu MiB) cannot hold a prompt prefix of %d rows and "
                            "the recurrent state after it (%.1f MiB): raise --prefix-cache-mb\n",
                    (unsigned long long)(pc->limit_bytes >> 20), n, (double)bytes / (1 << 20));
        }
        return 0;
    }
    /* an entry that already covers these tokens only needs a touch (a recurrent one: of n rows exactly) */
    for (int i = 0; i < pc->n; i++)
        if (pc->e[i].kv && (sb ? pc->e[i].n == n : pc->e[i].n >= n) &&
            common_prefix(pc->e[i].tokens, pc->e[i].n, rt->tokens, n) == n) {
            pc->e[i].last_used = ++pc->clock;
            return 1;
        }
    /* entries that are prefixes of the new one become redundant (a recurrent one restores only its own length) */
    if (!sb) drop_prefixes(pc, rt, n, 1);
    if (!make_room(pc, bytes)) return 0;
    slm_pc_entry en = {0};
    en.tokens = slm_malloc((size_t)n * sizeof(int32_t));
    en.kv = slm_aligned_alloc(rows_bytes(rt, n) ? rows_bytes(rt, n) : 1);
    en.state = sb ? slm_aligned_alloc((size_t)sb) : NULL;
    if (!en.tokens || !en.kv || (sb && (!en.state || !slm_rt_state_get(rt, n, en.state)))) {
        slm_xfree(en.tokens);
        slm_aligned_free(en.kv);
        slm_aligned_free(en.state);
        return 0;
    }
    memcpy(en.tokens, rt->tokens, (size_t)n * sizeof(int32_t));
    for (int l = 0; l < L; l++)
        for (int s = 0; s < 2; s++)
            slm_rt_kv_copy(rt, (uint8_t *)en.kv + entry_off(rt, n, l, s), slm_rt_kv_rows(rt, l, s),
                           (size_t)n * slm_rt_kv_row_bytes(rt, l));
    return add(pc, &en, n, bytes);
}

int slm_pc_seen(slm_prefix_cache *pc, const slm_runtime *rt, int n) {
    if (!pc->limit_bytes || n <= 0 || n > rt->num_stored) return 0;
    const uint64_t bytes = (uint64_t)n * sizeof(int32_t);
    if (bytes > pc->limit_bytes) return 0;
    for (int i = 0; i < pc->n; i++)
        if (!pc->e[i].kv && pc->e[i].n >= n && common_prefix(pc->e[i].tokens, pc->e[i].n, rt->tokens, n) == n) {
            pc->e[i].last_used = ++pc->clock;
            return 1;
        }
    drop_prefixes(pc, rt, n, 0);
    if (!make_room(pc, bytes)) return 0;
    slm_pc_entry en = {0};
    if (!(en.tokens = slm_malloc((size_t)bytes))) return 0;
    memcpy(en.tokens, rt->tokens, (size_t)bytes);
    return add(pc, &en, n, bytes);
}

int slm_pc_match(const slm_prefix_cache *pc, const int32_t *ids, int n) {
    int best = 0;
    for (int i = 0; pc->limit_bytes && i < pc->n; i++) {
        int c = usable(&pc->e[i], ids, n);
        if (c > best) best = c;
    }
    return best;
}

int slm_pc_shared(const slm_prefix_cache *pc, const int32_t *ids, int n) {
    int best = 0;
    for (int i = 0; pc->limit_bytes && i < pc->n; i++) {
        int c = common_prefix(pc->e[i].tokens, pc->e[i].n, ids, n);
        if (c > best) best = c;
    }
    return best;
}

int slm_pc_restore(slm_prefix_cache *pc, slm_runtime *rt, const int32_t *ids, int n, int max_rows) {
    if (!pc->limit_bytes || rt->num_stored != 0 || max_rows <= 0) return 0;
    if (max_rows > rt->cap) max_rows = rt->cap;
    int best = -1, best_len = 0;
    for (int i = 0; i < pc->n; i++) {
        int c = usable(&pc->e[i], ids, n);
        if (pc->e[i].state && c > max_rows) c = 0; /* whole or not at all */
        if (c > best_len) {
            best_len = c;
            best = i;
        }
    }
    if (best_len > max_rows) best_len = max_rows;
    if (best < 0 || best_len <= 0) {
        pc->misses++;
        return 0;
    }
    const slm_pc_entry *en = &pc->e[best];
    const int L = rt->comp->cfg.n_layers;
    for (int l = 0; l < L; l++)
        for (int s = 0; s < 2; s++)
            slm_rt_kv_copy(rt, slm_rt_kv_rows(rt, l, s), (const uint8_t *)en->kv + entry_off(rt, en->n, l, s),
                           (size_t)best_len * slm_rt_kv_row_bytes(rt, l));
    for (int j = 0; j < best_len; j++) {
        rt->mask[j] = 1;
        rt->tokens[j] = ids[j];
    }
    rt->num_stored = best_len;
    rt->gen = NULL;
    if (en->state) slm_rt_state_set(rt, en->state); /* and checkpointed: a trim may come back to it */
    pc->e[best].last_used = ++pc->clock;
    pc->hits++;
    pc->rows_restored += (uint64_t)best_len;
    return best_len;
}
