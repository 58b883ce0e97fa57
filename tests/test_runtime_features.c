/* The runtime's answers to static shapes, each checked against the plain
 * path (one prefill program, one generate program) on stories260K and
 * rand288: chunked prefill, prefill and generate variants (zero KV bytes
 * moved), the prefix cache, verify + trim for speculative decoding, and
 * garbage in padding rows and unused KV rows. All of it again with the KV
 * cache as f16 (the same models) and q8_0 (random-weight llama and qwen2
 * models of head_dim 32 from staticlm synth: q8_0 blocks need it). */
#include <math.h>
#include <unistd.h>

#include "compiler/compiler.h"
#include "format/model.h"
#include "runtime/prefix_cache.h"
#include "runtime/runtime.h"
#include "t.h"
#include "rig.h"


static int g_kv = SLM_F32; /* the KV type of every program below */

static slm_compile_options opts(int mpl, int mrl) {
    slm_compile_options o = rig_opts(mpl, mrl);
    o.kv_type = g_kv;
    return o;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

/* A deterministic pseudo-prompt of n ids in [3, vocab). */
static void make_ids(int32_t *ids, int n, int vocab, uint32_t seed) {
    ids[0] = 1;
    for (int i = 1; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = 3 + (int32_t)((seed >> 8) % (uint32_t)(vocab - 3));
    }
}

/* Prefill ids, then greedy-decode `steps` tokens into out[]. */
static int greedy(rig *r, const int32_t *ids, int n, int steps, int *out) {
    slm_err err = {0};
    slm_rt_reset(&r->rt);
    if (slm_rt_prefill(&r->rt, ids, n, &err)) { CHECKF(0, "prefill: %s", err.msg); return 0; }
    int V = r->c.cfg.vocab_size;
    for (int i = 0; i < steps; i++) {
        out[i] = argmax(r->rt.logits, V);
        if (i + 1 < steps && slm_rt_decode(&r->rt, out[i], &err)) { CHECKF(0, "decode %d: %s", i, err.msg); return 0; }
    }
    return 1;
}

static const char *k_models[2] = {SLM_SHARED_DIR "/models/stories260K.bin", SLM_SHARED_DIR "/models/rand288.bin"};

static void test_chunked_prefill(void) {
    for (int mi = 0; mi < 2; mi++) {
        rig plain, chunked;
        if (!rig_open_opts(&plain, k_models[mi], opts(160, 64))) continue;
        if (!rig_open_opts(&chunked, k_models[mi], opts(16, 200))) { rig_close(&plain); continue; }
        int32_t ids[150];
        make_ids(ids, 150, 512, 7 + mi);
        int a[40], b[40];
        if (greedy(&plain, ids, 150, 40, a) && greedy(&chunked, ids, 150, 40, b)) {
            CHECKF(memcmp(a, b, sizeof a) == 0, "%s: chunked tokens differ", k_models[mi]);
            CHECKF(chunked.rt.chunks == 10, "chunks %d (150 tokens / 16 rows)", chunked.rt.chunks);
            CHECK(plain.rt.chunks == 1);
        }
        rig_close(&plain);
        rig_close(&chunked);
    }
}

static void test_variants_zero_copy(void) {
    for (int mi = 0; mi < 2; mi++) {
        rig plain, var;
        if (!rig_open_opts(&plain, k_models[mi], opts(64, 128))) continue;
        slm_compile_options o = opts(64, 128);
        o.n_prefill_variants = 3;
        o.prefill_variants[0] = 4;
        o.prefill_variants[1] = 16;
        o.prefill_variants[2] = 32;
        o.n_generate_variants = 2;
        o.generate_variants[0] = 40;
        o.generate_variants[1] = 80;
        if (!rig_open_opts(&var, k_models[mi], o)) { rig_close(&plain); continue; }
        CHECK(var.c.n_progs == 4 + 3); /* 4, 16, 32, 64 + 40, 80, 192 */
        int32_t ids[12];
        make_ids(ids, 12, 512, 3);
        /* min_response_len 128 would pick the largest variant at once: force small ones */
        var.c.opt.min_response_len = 1;
        int a[150], b[150];
        if (greedy(&plain, ids, 12, 150, a) && greedy(&var, ids, 12, 150, b)) {
            CHECKF(memcmp(a, b, sizeof a) == 0, "%s: variant tokens differ", k_models[mi]);
            CHECKF(var.rt.variant_switches == 2, "switches %d", var.rt.variant_switches);
            CHECK(var.rt.gen && var.rt.gen->kv_capacity == 192);
            CHECK(var.rt.kv_bytes_copied == 0 && plain.rt.kv_bytes_copied == 0);
            /* every program's past_key_values.L.* is bound to the one KV
             * buffer: variants are views of the same memory */
            for (int pi = 0; pi < var.c.n_progs; pi++) {
                slm_program *p = &var.c.progs[pi];
                for (int l = 0; l < var.c.cfg.n_layers; l++) {
                    int k = slm_program_find_io(p, SLM_IO_PAST_KEY, l), v = slm_program_find_io(p, SLM_IO_PAST_VALUE, l);
                    CHECK(k >= 0 && v >= 0);
                    if (k < 0 || v < 0) continue;
                    size_t layer = (size_t)var.rt.cap * slm_rt_kv_row_bytes(&var.rt, 0);
                    CHECK(var.rt.exec[pi].io_ptr[k] == var.rt.kv + (2 * (size_t)l) * layer);
                    CHECK(var.rt.exec[pi].io_ptr[v] == var.rt.kv + (2 * (size_t)l + 1) * layer);
                }
            }
            /* the last step's present.0.key view is the row just written */
            int pk = slm_program_find_io(var.rt.gen, SLM_IO_PRESENT_KEY, 0);
            CHECK(pk >= 0 && var.rt.exec[var.rt.gen - var.c.progs].io_ptr[pk] == var.rt.kv + (size_t)(var.rt.num_stored - 1) * slm_rt_kv_row_bytes(&var.rt, 0));
        }
        /* the 12-token prompt ran through the 16-row variant */
        CHECK(slm_pick_prefill(&var.c, 12)->rows == 16);
        rig_close(&plain);
        rig_close(&var);
    }
}

static void test_prefix_cache(void) {
    rig r, plain;
    if (!rig_open_opts(&r, k_models[1], opts(64, 64))) return;
    if (!rig_open_opts(&plain, k_models[1], opts(64, 64))) { rig_close(&r); return; }
    slm_prefix_cache pc;
    slm_pc_init(&pc, 64u << 20);
    int32_t sys[40], req[60];
    make_ids(sys, 40, 512, 11);
    memcpy(req, sys, sizeof sys);
    make_ids(req + 40, 20, 512, 12);
    req[40] = 77;
    slm_err err = {0};
    /* first request: the system prompt alone, then stored */
    slm_rt_reset(&r.rt);
    CHECK(slm_pc_restore(&pc, &r.rt, sys, 40, 39) == 0);
    CHECK(slm_rt_prefill(&r.rt, sys, 40, &err) == SLM_OK);
    /* storing copies 40 rows of K and V of every layer out of the KV buffer, counted */
    const uint64_t rows40 = (uint64_t)2 * r.rt.comp->cfg.n_layers * 40 * slm_rt_kv_row_bytes(&r.rt, 0);
    CHECK(slm_rt_kv_row_bytes(&r.rt, 0) == slm_row_bytes((uint32_t)g_kv, (uint64_t)(r.rt.comp->cfg.n_kv_heads * r.rt.comp->cfg.head_dim)));
    uint64_t before = r.rt.kv_bytes_copied;
    CHECK(slm_pc_store(&pc, &r.rt, 40) == 1);
    CHECKF(r.rt.kv_bytes_copied - before == rows40, "store copied %llu bytes, want %llu",
           (unsigned long long)(r.rt.kv_bytes_copied - before), (unsigned long long)rows40);
    /* second request shares 40 tokens: restore them (40 rows copied in), prefill 20 */
    int a[30], b[30];
    slm_rt_reset(&r.rt);
    before = r.rt.kv_bytes_copied;
    int got = slm_pc_restore(&pc, &r.rt, req, 60, 59);
    CHECK(got == 40);
    CHECK(r.rt.kv_bytes_copied - before == rows40);
    CHECK(slm_rt_prefill(&r.rt, req + got, 60 - got, &err) == SLM_OK);
    for (int i = 0; i < 30; i++) {
        a[i] = argmax(r.rt.logits, 512);
        CHECK(slm_rt_decode(&r.rt, a[i], &err) == SLM_OK);
    }
    if (greedy(&plain, req, 60, 30, b)) CHECKF(memcmp(a, b, sizeof a) == 0, "prefix-cache tokens differ");
    CHECK(pc.hits == 1 && pc.rows_restored == 40);
    /* a longer entry supersedes its prefix; a tiny limit evicts LRU */
    CHECK(slm_pc_store(&pc, &r.rt, 60) == 1);
    CHECK(pc.n == 1);
    slm_pc_free(&pc);
    uint64_t one = (uint64_t)2 * r.rt.comp->cfg.n_layers * 30 * slm_rt_kv_row_bytes(&r.rt, 0) + 30 * 4;
    slm_pc_init(&pc, one + one / 2);
    slm_rt_reset(&r.rt);
    CHECK(slm_rt_prefill(&r.rt, req, 30, &err) == SLM_OK);
    CHECK(slm_pc_store(&pc, &r.rt, 30) == 1);
    slm_rt_reset(&r.rt);
    int32_t other[30];
    make_ids(other, 30, 512, 99);
    CHECK(slm_rt_prefill(&r.rt, other, 30, &err) == SLM_OK);
    CHECK(slm_pc_store(&pc, &r.rt, 30) == 1);
    CHECK(pc.n == 1 && pc.evictions == 1 && pc.used_bytes <= pc.limit_bytes);
    slm_rt_reset(&r.rt);
    CHECK(slm_pc_restore(&pc, &r.rt, req, 30, 29) <= 1); /* evicted (only BOS may match) */
    slm_pc_free(&pc);
    rig_close(&r);
    rig_close(&plain);
}

static void test_verify_and_trim(void) {
    for (int mi = 0; mi < 2; mi++) {
        rig r, plain;
        slm_compile_options o = opts(32, 96);
        o.draft_n = 4;
        if (!rig_open_opts(&r, k_models[mi], o)) continue;
        if (!rig_open_opts(&plain, k_models[mi], opts(32, 96))) { rig_close(&r); continue; }
        int32_t ids[10];
        make_ids(ids, 10, 512, 5);
        int ref[20];
        if (!greedy(&plain, ids, 10, 20, ref)) goto next;
        slm_err err = {0};
        slm_rt_reset(&r.rt);
        CHECK(slm_rt_prefill(&r.rt, ids, 10, &err) == SLM_OK);
        int y0 = argmax(r.rt.logits, 512);
        CHECK(y0 == ref[0]);
        /* propose ref[1], ref[2], then two wrong tokens */
        int32_t prop[5] = {y0, ref[1], ref[2], (ref[3] + 1) % 512, 5};
        const float *lg;
        CHECK(slm_rt_verify(&r.rt, prop, 5, &lg, &err) == SLM_OK);
        CHECK(r.rt.num_stored == 15);
        int accepted = 0;
        while (accepted < 4 && argmax(lg + (size_t)accepted * 512, 512) == prop[accepted + 1]) accepted++;
        CHECKF(accepted == 2, "accepted %d", accepted);
        int next = argmax(lg + (size_t)accepted * 512, 512);
        CHECK(next == ref[3]);
        slm_rt_trim(&r.rt, 10 + 1 + accepted);
        CHECK(r.rt.num_stored == 13);
        /* continue plainly: same tokens as the reference */
        int cur = next;
        for (int i = 3; i < 19; i++) {
            CHECK(slm_rt_decode(&r.rt, cur, &err) == SLM_OK);
            cur = argmax(r.rt.logits, 512);
            CHECKF(cur == ref[i + 1], "%s: step %d after trim: %d vs %d", k_models[mi], i, cur, ref[i + 1]);
        }
    next:
        rig_close(&r);
        rig_close(&plain);
    }
}

static void fill_nan(void *p, size_t bytes) {
    float nan = NAN;
    for (size_t i = 0; i < bytes / 4; i++) memcpy((char *)p + i * 4, &nan, 4);
}

/* DynamicDataMask: padding rows and unused KV rows never reach a result.
 * (staticlm skips padding rows instead of zeroing them: they are never
 * computed, and masked KV rows are never read.) */
static void test_garbage_padding(void) {
    for (int mi = 0; mi < 2; mi++) {
        rig r;
        if (!rig_open_opts(&r, k_models[mi], opts(64, 64))) continue;
        int32_t ids[9];
        make_ids(ids, 9, 512, 21);
        int a[30], b[30];
        int ok = greedy(&r, ids, 9, 30, a);
        slm_err err = {0};
        slm_rt_reset(&r.rt);
        fill_nan(r.rt.arena, (size_t)r.rt.arena_bytes);
        fill_nan(r.rt.kv, (size_t)r.rt.kv_bytes); /* mask is 0 everywhere after reset */
        /* padding rows of the inputs hold garbage too */
        for (int i = 0; i < 64; i++) r.rt.position_ids[i] = 1 << 30;
        ok = ok && slm_rt_prefill(&r.rt, ids, 9, &err) == SLM_OK;
        for (int i = 0; ok && i < 30; i++) {
            b[i] = argmax(r.rt.logits, 512);
            ok = i + 1 == 30 || slm_rt_decode(&r.rt, b[i], &err) == SLM_OK;
        }
        CHECKF(ok, "run failed: %s", err.msg);
        if (ok) CHECKF(memcmp(a, b, sizeof a) == 0, "%s: NaN padding changed the result", k_models[mi]);
        for (int j = 0; ok && j < 512; j++) CHECK(!isnan(r.rt.logits[j]));
        rig_close(&r);
    }
}

/* LM head separation: same tokens; the head runs once per chunked prefill
 * (not per chunk), and on its own thread count. */
static void test_lm_head_separate(void) {
    for (int mi = 0; mi < 2; mi++) {
        rig plain, sep;
        if (!rig_open_opts(&plain, k_models[mi], opts(16, 128))) continue;
        slm_compile_options o = opts(16, 128);
        o.lm_head_separate = 1;
        o.draft_n = 3;
        if (!rig_open_opts(&sep, k_models[mi], o)) { rig_close(&plain); continue; }
        slm_err err = {0};
        CHECK(slm_rt_set_head_threads(&sep.rt, 2, &err) == SLM_OK);
        CHECK(slm_pick_lm_head(&sep.c, 1) && slm_pick_lm_head(&sep.c, 4));
        int32_t ids[40];
        make_ids(ids, 40, 512, 17);
        int a[30], b[30];
        if (greedy(&plain, ids, 40, 30, a) && greedy(&sep, ids, 40, 30, b)) {
            CHECKF(memcmp(a, b, sizeof a) == 0, "%s: separate LM head changed tokens", k_models[mi]);
            CHECKF(sep.rt.chunks == 3 && sep.rt.head_runs == 1 + 29, "chunks %d head runs %d", sep.rt.chunks,
                   sep.rt.head_runs);
        }
        /* verify through the separate head: row logits equal decode logits */
        int ref[5];
        if (greedy(&plain, ids, 10, 5, ref)) {
            slm_rt_reset(&sep.rt);
            CHECK(slm_rt_prefill(&sep.rt, ids, 10, &err) == SLM_OK);
            int32_t v[4] = {ref[0], ref[1], ref[2], ref[3]};
            const float *lg;
            CHECK(slm_rt_verify(&sep.rt, v, 4, &lg, &err) == SLM_OK);
            for (int r = 0; r < 4; r++) CHECK(argmax(lg + (size_t)r * 512, 512) == ref[r + 1]);
        }
        rig_close(&plain);
        rig_close(&sep);
    }
}

static void run_all(void) {
    T_RUN(test_chunked_prefill);
    T_RUN(test_variants_zero_copy);
    T_RUN(test_prefix_cache);
    T_RUN(test_verify_and_trim);
    T_RUN(test_garbage_padding);
    T_RUN(test_lm_head_separate);
}

/* A random-weight model of head_dim 32 and 512 tokens (staticlm synth). */
static int synth(char *path, size_t cap, const char *arch) {
    char cmd[2048];
    snprintf(path, cap, "/tmp/slm_test_rtf_%s_%d.gguf", arch, (int)getpid());
    snprintf(cmd, sizeof cmd, "%s synth --shape custom --arch %s --type f32 --dim 64 --layers 2 --heads 2 --kv-heads 1 "
             "--ffn 128 --n-vocab 512 --ctx 512 --std 0.5 -o %s --vocab-file %s >/dev/null 2>&1", SLM_CLI_PATH, arch,
             path, SLM_SHARED_DIR "/vocab/ggml-vocab-llama-spm.gguf");
    const int ok = system(cmd) == 0;
    CHECKF(ok, "%s", cmd);
    return ok;
}

int main(void) {
    run_all();
    printf("-- KV f16\n");
    g_kv = SLM_F16;
    run_all();
    char a[256], b[256];
    if (synth(a, sizeof a, "llama") && synth(b, sizeof b, "qwen2")) {
        printf("-- KV q8_0 (synth llama, qwen2)\n");
        k_models[0] = a;
        k_models[1] = b;
        g_kv = SLM_Q8_0;
        run_all();
    }
    unlink(a);
    unlink(b);
    T_DONE();
}
