/* Concurrent sequences: an engine with n_seqs KV regions and batch
 * programs (batch.2, and batch.3 for 3 or batch.4 for 4 and more) decodes several sessions in one program call;
 * at temperature 0 each session's tokens equal the tokens it gives alone,
 * whoever shares its steps, whenever it joins (continuous batching), for
 * float weights (stories260K) and repacked Q8_0 ones (the same model
 * converted), on one thread and two. */
#include <unistd.h>

#include "staticlm.h"
#include "t.h"
#include "t_engine.h"
#include "t_batch.h"

#define M(f) T_SHARED("models/" f)
#define NTOK 40

static const char *PROMPTS[] = {"Once upon a time", "Lily and Tom went", "The cat sat", "One day, a big dog",
                                "Sara had a red ball"};
#define NP 5

static int g_kv = SLM_KV_F32; /* the KV type of the engines below */

static slm_engine *load(const char *model, const char *tok, int n_seqs, int threads) {
    slm_options o = slm_default_options();
    o.kv_type = g_kv;
    o.tokenizer_path = tok;
    o.n_threads = threads;
    o.n_seqs = n_seqs;
    o.max_prompt_len = 32;
    o.min_response_len = 64;
    return t_load(model, &o);
}

static slm_session_cfg greedy(void) { return t_greedy(NTOK); }

/* Each prompt alone on a one-sequence engine. */
static void alone(const char *model, const char *tok, int want[NP][NTOK]) {
    slm_engine *e = load(model, tok, 1, 1);
    if (!e) { CHECK(0); return; }
    slm_session_cfg c = greedy();
    t_sessions_alone(e, &c, PROMPTS, NP, NTOK, &want[0][0]);
    slm_free(e);
}

/* Sessions together: session p joins at step join[p] (continuous batching);
 * a session that finished frees its slot for the next prompt. */
static void together(const char *model, const char *tok, int n_seqs, int threads, int want[NP][NTOK]) {
    slm_engine *e = load(model, tok, n_seqs, threads);
    if (!e) { CHECK(0); return; }
    slm_info in;
    slm_get_info(e, &in);
    CHECKF(in.n_seqs == n_seqs && in.batch_max == (n_seqs >= 4 ? 4 : n_seqs >= 2 ? n_seqs : 0), "n_seqs %d batch_max %d",
           in.n_seqs, in.batch_max);
    slm_session_cfg c = greedy();
    int got[NP][NTOK], n_got[NP];
    const int n_batched = t_sessions_together(e, &c, PROMPTS, NP, NTOK, &got[0][0], n_got);
    /* most steps ran several sessions through one batch program */
    CHECKF(n_batched > NP * NTOK / 2, "%d of %d tokens decoded in batches", n_batched, NP * NTOK);
    for (int p = 0; p < NP; p++)
        CHECKF(n_got[p] == NTOK && !memcmp(got[p], want[p], sizeof got[p]),
               "%s n_seqs %d threads %d: prompt %d: %d tokens", model, n_seqs, threads, p, n_got[p]);
    slm_free(e);
}

static void check_model(const char *model, const char *tok) {
    int want[NP][NTOK];
    alone(model, tok, want);
    together(model, tok, 4, 1, want);
    together(model, tok, 3, 2, want);
    together(model, tok, 2, 1, want);
}

static void test_batch_equals_alone_f32(void) { check_model(M("stories260K.bin"), M("tok512.bin")); }

static void test_batch_equals_alone_q8_0(void) {
    char path[256], cmd[1024];
    snprintf(path, sizeof path, "/tmp/slm_test_batch_%d.gguf", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s convert -m %s -z %s -o %s --type q8_0 2>/dev/null", SLM_CLI_PATH,
             M("stories260K.bin"), M("tok512.bin"), path);
    CHECK(system(cmd) == 0);
    check_model(path, NULL);
    unlink(path);
}

/* Random-weight models of other shapes (synth): qwen2 (Q/K/V bias: the
 * bias and RoPE run as tasks on the present rows) and mistral (sliding
 * window), repacked Q8_0. */
static void check_synth(const char *args) {
    char path[256], cmd[2048];
    snprintf(path, sizeof path, "/tmp/slm_test_batch_synth_%d.gguf", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s synth --shape custom %s -o %s --vocab-file %s >/dev/null 2>&1", SLM_CLI_PATH, args,
             path, T_SHARED("vocab/ggml-vocab-llama-spm.gguf"));
    CHECKF(system(cmd) == 0, "%s", cmd);
    int want[NP][NTOK];
    alone(path, NULL, want);
    together(path, NULL, 4, 2, want);
    unlink(path);
}

static void test_batch_equals_alone_archs(void) {
    check_synth("--arch qwen2 --type q8_0 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --n-vocab 320 --ctx 256 "
                "--std 0.5");
    check_synth("--arch mistral --sliding-window 24 --type f32 --dim 64 --layers 2 --heads 4 --kv-heads 1 --ffn 128 "
                "--n-vocab 320 --ctx 256 --std 0.5");
}

/* Batch programs with the KV cache as f16 (stories260K) and q8_0 (a synth
 * llama of head_dim 32): the kv_store tasks write each row into its own
 * sequence's region (DST_CPOS), attention reads the type there. */
static void test_batch_kv_types(void) {
    g_kv = SLM_KV_F16;
    check_model(M("stories260K.bin"), M("tok512.bin"));
    g_kv = SLM_KV_Q8_0;
    check_synth("--arch llama --type f32 --dim 64 --layers 2 --heads 2 --kv-heads 1 --ffn 128 --n-vocab 320 --ctx 256 "
                "--std 0.5");
    g_kv = SLM_KV_F32;
}

static void test_slots_and_errors(void) {
    slm_engine *e = load(M("stories260K.bin"), M("tok512.bin"), 2, 1);
    if (!e) { CHECK(0); return; }
    slm_session_cfg c = greedy();
    slm_session *a = NULL, *b = NULL, *x = NULL;
    CHECK(slm_session_new(e, &c, &a) == SLM_OK && slm_session_new(e, &c, &b) == SLM_OK);
    CHECK(slm_session_new(e, &c, &x) == SLM_ERR_CAPACITY && !x);
    /* a session fed and stepped alone between batch steps keeps its own rows */
    CHECK(slm_session_feed_text(a, "Once upon a time", SLM_FEED_BOS) == SLM_OK);
    CHECK(slm_session_feed_text(b, "The cat sat", SLM_FEED_BOS) == SLM_OK);
    int na = slm_session_n_past(a), nb = slm_session_n_past(b);
    slm_session *both[2] = {a, b};
    int32_t ids[2];
    for (int i = 0; i < 5; i++) CHECK(slm_session_next_batch(both, 2, ids, NULL, NULL) == SLM_OK);
    /* 5 tokens each, the last pending */
    CHECKF(slm_session_n_past(a) == na + 4 && slm_session_n_past(b) == nb + 4, "%d %d", slm_session_n_past(a),
           slm_session_n_past(b));
    slm_session_free(b);
    CHECK(slm_session_new(e, &c, &x) == SLM_OK); /* the freed slot */
    CHECK(slm_session_n_past(x) == 0);
    slm_session_free(x);
    slm_session_free(a);
    slm_free(e);
}

int main(void) {
    T_RUN(test_batch_equals_alone_f32);
    T_RUN(test_batch_equals_alone_q8_0);
    T_RUN(test_batch_equals_alone_archs);
    T_RUN(test_batch_kv_types);
    T_RUN(test_slots_and_errors);
    T_DONE();
}
