/* Prefix cache: KV rows of token prefixes already computed (a system
 * prompt, earlier turns), kept in bounded memory with least-recently-used
 * eviction. A prompt that starts with a cached prefix restores those rows
 * into the KV cache and prefills only the rest. Matching is by exact token
 * ids; any common prefix of an entry can be used (KV rows depend only on
 * the tokens before them). */
#ifndef SLM_PREFIX_CACHE_H
#define SLM_PREFIX_CACHE_H

#include "runtime/runtime.h"

typedef struct slm_pc_entry {
    int32_t *tokens;      /* [n] */
    int n;
    void *kv;             /* [n_layers][2][n] rows of the KV type (row_bytes each) */
    uint64_t bytes;       /* tokens + kv */
    uint64_t last_used;   /* LRU clock */
} slm_pc_entry;

typedef struct slm_prefix_cache {
    uint64_t limit_bytes; /* 0 = disabled */
    uint64_t used_bytes;
    uint64_t clock;
    slm_pc_entry *e;
    int n, cap;
    /* statistics */
    uint64_t hits, misses, rows_restored, evictions;
} slm_prefix_cache;

void slm_pc_init(slm_prefix_cache *pc, uint64_t limit_bytes);
void slm_pc_free(slm_prefix_cache *pc);
/* Store rows [0, n) of the runtime's KV (which must hold exactly the
 * tokens rt->tokens[0..n)). Evicts LRU entries to fit; an entry larger than
 * the limit is not stored. Returns 1 if stored. Allocates (call between
 * requests, not in the decode loop). */
int slm_pc_store(slm_prefix_cache *pc, slm_runtime *rt, int n);
/* The longest prefix of ids[0..n) an entry holds (0 = none). */
int slm_pc_match(const slm_prefix_cache *pc, const int32_t *ids, int n);
/* After slm_rt_reset: restore the longest cached prefix of ids[0..n) but at
 * most max_rows rows (callers pass n - 1 so one token remains to prefill
 * and produce logits). Returns the number of rows restored (0 = miss). */
int slm_pc_restore(slm_prefix_cache *pc, slm_runtime *rt, const int32_t *ids, int n, int max_rows);

#endif
