/* Runtime and compiler properties: no allocation in the decode loop,
 * capacity errors, reset, the stages of compilation, the sampler. */
#include <math.h>
#include <stdint.h>

#include "compiler/compiler.h"
#include "engine/engine_internal.h"
#include "staticlm.h"
#include "t.h"

#define MODEL SLM_SHARED_DIR "/models/stories260K.bin"
#define TOK SLM_SHARED_DIR "/models/tok512.bin"

static long g_allocs, g_frees, g_new; /* calls of alloc+realloc; frees; new blocks */
static void *count_alloc(void *ud, size_t n) { (void)ud; g_allocs++; g_new++; return malloc(n); }
static void *count_realloc(void *ud, void *p, size_t n) { (void)ud; g_allocs++; if (!p) g_new++; return realloc(p, n); }
static void count_free(void *ud, void *p) { (void)ud; g_frees++; free(p); }

static slm_engine *load(int mpl, int mrl) {
    slm_options o = slm_default_options();
    o.tokenizer_path = TOK;
    o.max_prompt_len = mpl;
    o.min_response_len = mrl;
    slm_engine *e = NULL;
    slm_status s = slm_load(&e, MODEL, &o);
    CHECKF(s == SLM_OK, "load: %s", slm_last_error(e));
    if (s) { slm_free(e); return NULL; }
    return e;
}

static void test_decode_loop_allocates_nothing(void) {
    slm_allocator a = {count_alloc, count_realloc, count_free, NULL};
    slm_set_allocator(&a);
    slm_engine *e = load(32, 160);
    if (!e) { slm_set_allocator(NULL); return; }
    CHECK(g_allocs > 0); /* the hook sees the load */
    int32_t ids[64];
    int n = slm_tokenize(e, "Once upon a time", 1, ids, 64);
    CHECK(n > 1 && n < 64);
    const float *lg;
    CHECK(slm_prefill(e, ids, n, &lg) == SLM_OK);
    slm_info info;
    slm_get_info(e, &info);
    static float logits[512];
    static unsigned char scratch[512 * 16];
    CHECK(slm_sample_scratch_size(info.vocab_size) <= sizeof scratch);
    slm_sampling samp = {.temperature = 0.8f, .top_k = 40, .top_p = 0.9f, .seed = 7};
    uint64_t rng = 7;
    long before = g_allocs;
    int prev = ids[n - 1];
    for (int step = 0; step < 100; step++) {
        memcpy(logits, lg, sizeof(float) * (size_t)info.vocab_size);
        int next = slm_sample(logits, info.vocab_size, &samp, &rng, scratch);
        (void)slm_token_piece(e, prev, next);
        CHECK(slm_decode(e, next, &lg) == SLM_OK);
        prev = next;
    }
    CHECKF(g_allocs == before, "%ld allocations in 100 decode steps", g_allocs - before);
    slm_free(e);
    CHECKF(g_new == g_frees, "leak: %ld blocks allocated, %ld freed", g_new, g_frees);
    slm_set_allocator(NULL);
}

static void test_capacity_errors(void) {
    slm_engine *e = load(8, 4);
    if (!e) return;
    CHECK(slm_capacity(e) == 12);
    int32_t ids[64];
    int n = slm_tokenize(e, "Once upon a time there was a little girl named Lily", 1, ids, 64);
    CHECK(n > 8);
    const float *lg;
    slm_status s = slm_prefill(e, ids, n, &lg);
    CHECK(s == SLM_ERR_CAPACITY);
    CHECKF(strstr(slm_last_error(e), "max_prompt_len") != NULL, "message: %s", slm_last_error(e));
    CHECK(slm_num_stored(e) == 0); /* nothing was written */
    CHECK(slm_prefill(e, ids, 8, &lg) == SLM_OK);
    for (int i = 0; i < 4; i++) CHECK(slm_decode(e, 300, &lg) == SLM_OK);
    CHECK(slm_num_stored(e) == 12);
    s = slm_decode(e, 300, &lg);
    CHECK(s == SLM_ERR_CAPACITY);
    CHECKF(strstr(slm_last_error(e), "capacity 12") != NULL, "message: %s", slm_last_error(e));
    slm_reset(e);
    CHECK(slm_num_stored(e) == 0);
    CHECK(slm_decode(e, 99999, &lg) == SLM_ERR_ARG);
    slm_free(e);
}

/* The generation API reports a capacity overflow after delivering what fit. */
static int count_cb(void *ud, int id, const char *piece, int is_prompt) {
    (void)id; (void)piece;
    if (!is_prompt) (*(int *)ud)++;
    return 0;
}

static void test_generate_past_capacity(void) {
    slm_engine *e = load(16, 8);
    if (!e) return;
    int got = 0;
    slm_sampling g = {0};
    slm_gen_stats st;
    slm_status s = slm_generate(e, "Once upon a time", 100, &g, 1, count_cb, &got, &st);
    CHECK(s == SLM_ERR_CAPACITY);
    CHECKF(got == slm_capacity(e) - st.n_prompt + 1, "got %d tokens, capacity %d, prompt %d", got, slm_capacity(e), st.n_prompt);
    slm_free(e);
}

/* Same tokens after reset: the KV cache and mask are cleared. */
static void test_reset_reproducible(void) {
    slm_engine *e = load(16, 64);
    if (!e) return;
    int32_t ids[32];
    int n = slm_tokenize(e, "Lily and Tom", 1, ids, 32);
    int out[2][20];
    for (int round = 0; round < 2; round++) {
        slm_reset(e);
        const float *lg;
        CHECK(slm_prefill(e, ids, n, &lg) == SLM_OK);
        for (int i = 0; i < 20; i++) {
            int best = 0;
            for (int j = 1; j < 512; j++) if (lg[j] > lg[best]) best = j;
            out[round][i] = best;
            CHECK(slm_decode(e, best, &lg) == SLM_OK);
        }
    }
    CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0);
    slm_free(e);
}

/* Chained prefills append rows where the next call reads them. */
static void test_prefill_appends(void) {
    slm_engine *a = load(32, 64), *b = load(4, 64);
    if (!a || !b) { slm_free(a); slm_free(b); return; }
    int32_t ids[32];
    int n = slm_tokenize(a, "Once upon a time there was", 1, ids, 32);
    const float *la, *lb = NULL;
    CHECK(slm_prefill(a, ids, n, &la) == SLM_OK);
    for (int i = 0; i < n; i += 4) CHECK(slm_prefill(b, ids + i, n - i < 4 ? n - i : 4, &lb) == SLM_OK);
    double maxd = 0;
    for (int j = 0; j < 512 && lb; j++) maxd = fmax(maxd, fabs(la[j] - lb[j]));
    CHECKF(maxd < 1e-4, "max diff %g", maxd);
    slm_free(a);
    slm_free(b);
}

static void test_dumps_show_stages(void) {
    slm_engine *e = load(16, 16);
    if (!e) return;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(slm_dump(e, "ir", f) == SLM_OK);
    CHECK(slm_dump(e, "ir-lowered", f) == SLM_OK);
    CHECK(slm_dump(e, "tasks", f) == SLM_OK);
    CHECK(slm_dump(e, "nonsense", f) == SLM_ERR_ARG);
    fclose(f);
    CHECK(buf && strstr(buf, "ReadValue") && strstr(buf, "Assign"));
    CHECK(buf && strstr(buf, "past_key_values.4.value") && strstr(buf, "present.0.key"));
    CHECK(buf && strstr(buf, "kv_view") && strstr(buf, "last_row"));
    CHECK(buf && strstr(buf, "barrier count=") && strstr(buf, "dst-compact"));
    free(buf);
    slm_info in;
    slm_get_info(e, &in);
    CHECK(in.prefill_tasks > in.n_layers * 10 && in.generate_tasks > in.n_layers * 10);
    /* vertical fusion: every RMSNorm and SwiGLU runs as a matmul's input prologue */
    buf = NULL;
    f = open_memstream(&buf, &len);
    CHECK(slm_dump(e, "tasks", f) == SLM_OK);
    fclose(f);
    CHECK(buf && strstr(buf, "pre=rmsnorm(s0,s2)") && strstr(buf, "pre=swiglu(s0,s2)"));
    CHECK(buf && !strstr(buf, " rmsnorm ") && !strstr(buf, " swiglu "));
    /* and every RoPE as the Q/K matmul's epilogue */
    CHECK(buf && strstr(buf, "post=rope(s3,s4)") && !strstr(buf, " rope "));
    /* and every residual add as the epilogue of the matmul before it */
    CHECK(buf && strstr(buf, "post=add(d)") && !strstr(buf, " add "));
    free(buf);
    slm_free(e);
}

static void test_sampler(void) {
    float l[8] = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f, 0.0f, 0.0f, 0.0f};
    unsigned char scratch[8 * 16];
    slm_sampling g = {0};
    uint64_t rng = 1;
    CHECK(slm_sample(l, 8, &g, &rng, scratch) == 1);
    /* top-k 1 is greedy whatever the temperature */
    slm_sampling k1 = {.temperature = 1.5f, .top_k = 1, .seed = 3};
    for (int i = 0; i < 20; i++) {
        float c[8];
        memcpy(c, l, sizeof c);
        CHECK(slm_sample(c, 8, &k1, &rng, scratch) == 1);
    }
    /* top-k 2 only ever picks 1 or 3; seeded runs repeat */
    slm_sampling k2 = {.temperature = 1.0f, .top_k = 2, .seed = 3};
    int seen[8] = {0}, seq1[50], seq2[50];
    for (int rep = 0; rep < 2; rep++) {
        uint64_t r = 42;
        for (int i = 0; i < 50; i++) {
            float c[8];
            memcpy(c, l, sizeof c);
            int t = slm_sample(c, 8, &k2, &r, scratch);
            (rep ? seq2 : seq1)[i] = t;
            seen[t]++;
        }
    }
    CHECK(seen[1] > 0 && seen[3] > 0 && seen[1] + seen[3] == 100);
    CHECK(memcmp(seq1, seq2, sizeof seq1) == 0);
    /* top-p small keeps only the top token */
    slm_sampling p = {.temperature = 1.0f, .top_p = 0.01f, .seed = 3};
    for (int i = 0; i < 20; i++) {
        float c[8];
        memcpy(c, l, sizeof c);
        CHECK(slm_sample(c, 8, &p, &rng, scratch) == 1);
    }
}

/* The plain reference of slm_sample_adjust: biases, then each distinct token
 * of the last w ids (w < 0: all) counted by a scan of the window. */
static void ref_adjust(float *l, int n, const slm_sampling *s, const int32_t *ids, int nids) {
    for (int i = 0; i < s->n_logit_bias; i++) l[s->logit_bias[i].token] += s->logit_bias[i].bias;
    const int w = s->repeat_last_n < 0 || s->repeat_last_n > nids ? nids : s->repeat_last_n;
    for (int t = 0; t < n; t++) {
        int c = 0;
        for (int i = nids - w; i < nids; i++) c += ids[i] == t;
        if (!c) continue;
        if (s->repeat_penalty != 1.0f) l[t] = l[t] > 0 ? l[t] / s->repeat_penalty : l[t] * s->repeat_penalty;
        l[t] -= (float)c * s->frequency_penalty + s->presence_penalty;
    }
}

static void test_sampler_adjust(void) {
    enum { N = 40 };
    unsigned char scratch[N * 16];
    int32_t ids[30];
    uint64_t r = 5;
    for (int i = 0; i < 30; i++) ids[i] = (int32_t)((r = r * 6364136223846793005ull + 1) >> 59); /* 0..31: repeats */
    slm_sampling s = {.repeat_penalty = 1.7f, .repeat_last_n = 12, .presence_penalty = 0.4f, .frequency_penalty = 0.3f,
                      .n_logit_bias = 2, .logit_bias = {{3, 2.5f}, {39, -100.0f}}};
    for (int split = 0; split <= 30; split += 6) /* the history in two parts, cut anywhere */
        for (int last_n = -1; last_n <= 30; last_n += 31) {
            s.repeat_last_n = last_n < 0 ? -1 : 12;
            float a[N], b[N];
            for (int i = 0; i < N; i++) a[i] = b[i] = (float)((i * 7) % 11) - 5.0f;
            slm_sample_adjust(a, N, &s, ids, split, ids + split, 30 - split, scratch);
            ref_adjust(b, N, &s, ids, 30);
            int same = 1;
            for (int i = 0; i < N; i++) same &= fabsf(a[i] - b[i]) < 1e-5f;
            CHECKF(same, "split %d, last_n %d: adjusted logits differ from the reference", split, s.repeat_last_n);
        }
    /* nothing set: untouched; penalties with a window of 0: only the biases */
    slm_sampling off = {.repeat_penalty = 1.0f, .repeat_last_n = 64};
    CHECK(!slm_sample_adjusts(&off) && slm_sample_adjusts(&s));
    off.repeat_penalty = 2.0f;
    off.repeat_last_n = 0;
    CHECK(!slm_sample_adjusts(&off));
    /* greedy picks the biased token; -100 bans the top one */
    float l[N] = {0};
    slm_sampling g = {.n_logit_bias = 1, .logit_bias = {{17, 1.0f}}};
    slm_sample_adjust(l, N, &g, NULL, 0, NULL, 0, scratch);
    CHECK(slm_sample(l, N, &g, &r, scratch) == 17);
    /* min_p 0.2 over probabilities .5 .3 .15 .05: the last never comes, the
     * others in proportion (.5/.95, .3/.95, .15/.95) */
    const float pr[4] = {0.5f, 0.3f, 0.15f, 0.05f};
    slm_sampling mp = {.temperature = 1.0f, .min_p = 0.2f};
    int seen[4] = {0};
    for (int i = 0; i < 20000; i++) {
        float c[4];
        for (int k = 0; k < 4; k++) c[k] = logf(pr[k]);
        seen[slm_sample(c, 4, &mp, &r, scratch)]++;
    }
    CHECKF(seen[3] == 0 && fabs(seen[2] / 20000.0 - 0.15 / 0.95) < 0.015 && fabs(seen[0] / 20000.0 - 0.5 / 0.95) < 0.02,
           "min_p: %d %d %d %d", seen[0], seen[1], seen[2], seen[3]);
    float d[4];
    for (int k = 0; k < 4; k++) d[k] = logf(pr[k]);
    slm_sample_dist(d, 4, &mp, scratch);
    CHECKF(d[3] == 0.0f && fabsf(d[0] - 0.5f / 0.95f) < 1e-5f, "min_p distribution %g %g", d[0], d[3]);
}

int main(void) {
    T_RUN(test_decode_loop_allocates_nothing);
    T_RUN(test_capacity_errors);
    T_RUN(test_generate_past_capacity);
    T_RUN(test_reset_reproducible);
    T_RUN(test_prefill_appends);
    T_RUN(test_dumps_show_stages);
    T_RUN(test_sampler);
    T_RUN(test_sampler_adjust);
    T_DONE();
}
