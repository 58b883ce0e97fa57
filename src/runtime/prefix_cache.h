/* Prefix cache: KV rows of token prefixes already computed (a system
 * prompt, earlier turns), kept in bounded memory with least-recently-used
 * eviction. A prompt that starts with a cached prefix restores those rows
 * into the KV cache and prefills only the rest. Matching is by exact token
 * ids; any common prefix of an entry can be used (KV rows depend only on
 * the tokens before them).
 *
 * Models with recurrent layers (qwen35): a state cannot be cut back, so an
 * entry holds the state after its last row too and is restored whole or not
 * at all. Besides such entries the cache keeps "seen" records: a whole
 * prompt's tokens only, no rows. A later prompt's common prefix with one
 * (slm_pc_shared) is where the session stores an entry (a system prompt
 * that several conversations share): the second conversation creates it,
 * the third on restores it. */
#ifndef SLM_PREFIX_CACHE_H
#define SLM_PREFIX_CACHE_H

#include "runtime/runtime.h"

typedef struct slm_pc_entry {
    int32_t *tokens;      /* [n] */
    int n;
    void *kv;             /* [n_layers][2][n] rows of the KV type (row_bytes each); NULL: a seen record */
    float *state;         /* recurrent models: the state after row n (slm_rt_state_get's layout) */
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
    int said_too_big;     /* the note on a recurrent entry over the limit was printed */
} slm_prefix_cache;

void slm_pc_init(slm_prefix_cache *pc, uint64_t limit_bytes);
void slm_pc_free(slm_prefix_cache *pc);
/* Store rows [0, n) of the runtime's KV (which must hold exactly the
 * tokens rt->tokens[0..n)), and for a recurrent model the state after them
 * (the current one or a checkpoint at n; none: nothing stored). Evicts LRU
 * entries to fit; an entry larger than the limit is not stored (a recurrent
 * model's: said once on stderr). Returns 1 if stored. Allocates (call
 * between requests, not in the decode loop). */
int slm_pc_store(slm_prefix_cache *pc, slm_runtime *rt, int n);
/* The longest prefix of ids[0..n) an entry can restore (0 = none). */
int slm_pc_match(const slm_prefix_cache *pc, const int32_t *ids, int n);
/* Recurrent models: keep a seen record of rt->tokens[0..n) (tokens only).
 * Returns 1 if kept. */
int slm_pc_seen(slm_prefix_cache *pc, const slm_runtime *rt, int n);
/* The longest common prefix of ids[0..n) with any entry or seen record. */
int slm_pc_shared(const slm_prefix_cache *pc, const int32_t *ids, int n);
/* After slm_rt_reset: restore the longest cached prefix of ids[0..n) but at
 * most max_rows rows (callers pass n - 1 so one token remains to prefill
 * and produce logits). Returns the number of rows restored (0 = miss). */
int slm_pc_restore(slm_prefix_cache *pc, slm_runtime *rt, const int32_t *ids, int n, int max_rows);

#endif
