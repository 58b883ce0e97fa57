/* The memory budget: what the runtime will allocate for a compiled model
 * (KV cache, activation arena, logits, per-vocabulary buffers, the prefix
 * cache), computed from the compiled shapes before any of it is allocated
 * and refused, with the numbers, when it exceeds the limit. A model's
 * header claims its shapes; the weights it claims are already bounded by
 * the file (every tensor inside the mapping, no two sharing bytes), but the
 * KV cache and arena grow with layers x heads x rows, which a small hostile
 * file can claim by the thousand. */
#include <stdio.h>
#include <sys/sysinfo.h>

#include "runtime/runtime.h"

uint64_t slm_rt_default_memory_limit(void) {
    struct sysinfo si;
    if (sysinfo(&si) != 0 || si.totalram == 0) return 0; /* unknown: no limit */
    uint64_t total = (uint64_t)si.totalram * (uint64_t)(si.mem_unit ? si.mem_unit : 1);
    return total / 4 * 3;
}

/* a + b, saturating (the sum only feeds a comparison and a message). */
static uint64_t sat_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }
static uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return slm_mul_ok(a, b, &r) ? r : UINT64_MAX;
}
static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

int slm_rt_snaps(int n) { return n <= 0 ? SLM_RT_SNAPS_DEFAULT : n > SLM_RT_SNAPS_MAX ? SLM_RT_SNAPS_MAX : n; }

slm_status slm_rt_budget(const slm_compiled *c, const char *name, long long max_memory_mb, int n_seqs, int n_snaps,
                         uint64_t extra_bytes, uint64_t *need_out, slm_err *err) {
    if (n_seqs < 1) n_seqs = 1;
    const slm_model_config *cfg = &c->cfg;
    if (!name) name = "model";
    const uint64_t kv_dim = sat_mul((uint64_t)(cfg->n_kv_heads > 0 ? cfg->n_kv_heads : 0),
                                    (uint64_t)(cfg->head_dim > 0 ? cfg->head_dim : 0));
    const uint64_t cap = (uint64_t)(c->kv_capacity > 0 ? c->kv_capacity : 0);
    /* a row of the KV type: f32, f16, or q8_0's 34 bytes per 32 elements (f32 when unknown) */
    const uint32_t kt = slm_kv_type_ok(c->opt.kv_type) ? (uint32_t)c->opt.kv_type : SLM_F32;
    const slm_dtype_info *ti = slm_dtype_get(kt);
    uint64_t rows_all = 0; /* every layer's K and V row bytes (gemma4: layers differ, shared ones have none;
                              qwen35's recurrent layers none) */
    int kv_layers = 0;
    for (int l = 0; l < cfg->n_layers; l++) {
        const int d = slm_layer_kv_dim(cfg, l);
        kv_layers += d > 0;
        rows_all = sat_add(rows_all, sat_mul(((uint64_t)(d > 0 ? d : 0) + ti->block - 1) / ti->block, ti->bytes));
    }
    const uint64_t kv = sat_mul(sat_mul(sat_mul(rows_all, 2), cap), (uint64_t)n_seqs);
    uint64_t arena = 0;
    int rows = 1, hrows = 1; /* logit rows; hidden rows (embedding programs: every row's) */
    for (int i = 0; i < c->n_progs; i++) {
        if (c->progs[i].arena_bytes > arena) arena = c->progs[i].arena_bytes;
        if (c->progs[i].kind == SLM_PROG_VERIFY && c->progs[i].rows > rows) rows = c->progs[i].rows;
        if ((c->progs[i].kind == SLM_PROG_EMBED || c->progs[i].kind == SLM_PROG_EMBED_BATCH) && c->progs[i].rows > hrows)
            hrows = c->progs[i].rows;
    }
    if (hrows < rows) hrows = rows;
    const uint64_t voc = (uint64_t)(cfg->vocab_size > 0 ? cfg->vocab_size : 0);
    /* logits and hidden rows, and about four words per token for the
     * sampler's scratch and the token history */
    const uint64_t vocab = sat_add(sat_mul(sat_mul((uint64_t)rows, voc), sizeof(float)), sat_mul(voc, 16));
    const uint64_t hidden = sat_mul(sat_mul((uint64_t)hrows, (uint64_t)(cfg->dim > 0 ? cfg->dim : 0)), sizeof(float));
    const uint64_t recur = sat_mul(sat_mul(slm_rt_recur_floats(cfg), (uint64_t)(1 + slm_rt_snaps(n_snaps)) * sizeof(float)),
                                   (uint64_t)n_seqs); /* the state and its checkpoints */
    const uint64_t need = sat_add(
        sat_add(sat_add(sat_add(sat_add(kv, arena), vocab), sat_add(hidden, c->consts.bytes)), extra_bytes), recur);
    if (need_out) *need_out = need;
    if (max_memory_mb < 0) return SLM_OK; /* no limit */
    const int deflt = max_memory_mb == 0;
    const uint64_t limit = deflt ? slm_rt_default_memory_limit() : sat_mul((uint64_t)max_memory_mb, 1u << 20);
    if (limit == 0 || need <= limit) return SLM_OK;
    return slm_errf(err, SLM_ERR_CAPACITY,
                    "%s: needs %.1f MiB (KV cache %.1f MiB: %d layers with K/V x %llu rows x %llu kv_dim x 2 x %s x %d KV regions; arena %.1f "
                    "MiB; vocabulary %.1f MiB; other (recurrent state included) %.1f MiB) but the memory limit is %.1f MiB (%s; set --max-memory "
                    "/ max_memory_mb)",
                    name, mib(need), mib(kv), kv_layers, (unsigned long long)cap, (unsigned long long)kv_dim, slm_dtype_name(kt), n_seqs,
                    mib(arena), mib(vocab), mib(sat_add(sat_add(sat_add(hidden, c->consts.bytes), extra_bytes), recur)), mib(limit),
                    deflt ? "the default, 75% of RAM" : "max_memory_mb");
}
