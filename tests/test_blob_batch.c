/* Batch programs (concurrent sequences) in blobs: `compile --parallel 4`
 * stores batch.2 and batch.4 and the KV regions they address (n_seqs);
 * from the blob they give the same logits, bit for bit, as the source
 * model's batch programs compiled afresh (stories260K with f32 KV, a
 * repacked Q8_0 qwen2 with f16 KV, a qwen35 hybrid with its recurrent state
 * rows, a mixture of experts); sessions decoded together from the blob equal
 * each alone; --parallel against the blob's n_seqs (used; fewer slots than
 * its KV regions, 2 and 3 of 4: each session's tokens and log-probabilities
 * as alone, the session past them refused; dropped for one; more refused);
 * cache mode keys the blob by n_seqs and reloads it with
 * its batch programs; inspect shows them; every corrupted batch field or
 * n_seqs is refused with a message naming it, and damaged images that the
 * validator accepts run without a crash (under ASan in CI). */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "blob/format.h"
#include "common/trace.h"
#include "compiler/compiler.h"
#include "format/model.h"
#include "runtime/runtime.h"
#include "staticlm.h"
#include "t.h"
#include "run_cmd.h"
#include "blob_image.h"
#include "t_batch.h"

#define M(f) T_SHARED("models/" f)
#define NTOK 24

static char g_tmp[256];
static char g_blob4[512]; /* stories260K, --parallel 4, f32 KV */

static int cli(char **argv, char **out, char **errs) { return t_run_capture(g_tmp, SLM_CLI_PATH, argv, out, errs); }

/* staticlm compile MODEL [-z TOK] -o OUT --parallel N EXTRA... (f32 KV unless EXTRA says) */
static int compile_blob(const char *model, const char *tok, const char *out, const char *parallel, const char *kv) {
    char *argv[24];
    int k = 0;
    argv[k++] = "staticlm";
    argv[k++] = "compile";
    argv[k++] = "-m";
    argv[k++] = (char *)model;
    if (tok) {
        argv[k++] = "-z";
        argv[k++] = (char *)tok;
    }
    argv[k++] = "-o";
    argv[k++] = (char *)out;
    argv[k++] = "--max-prompt-len";
    argv[k++] = "32";
    argv[k++] = "--min-response-len";
    argv[k++] = "64";
    argv[k++] = "--kv-type";
    argv[k++] = (char *)kv;
    if (parallel) {
        argv[k++] = "--parallel";
        argv[k++] = (char *)parallel;
    }
    argv[k] = NULL;
    char *e = NULL;
    const int rc = cli(argv, NULL, &e);
    if (rc) fprintf(stderr, "  compile %s failed: %s\n", model, e ? e : "");
    free(e);
    return rc == 0;
}

static void test_setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/slm_test_blob_batch.XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL);
    snprintf(g_blob4, sizeof g_blob4, "%s/s4.slmblob", g_tmp);
    CHECK(compile_blob(M("stories260K.bin"), M("tok512.bin"), g_blob4, "4", "f32"));
}

/* ---- logits: the blob's batch programs against the source's -------------------- */

typedef struct rig {
    slm_model_file m;
    slm_blob b;
    slm_compiled c;
    slm_tokenizer *tok;
    slm_runtime rt;
    int from_blob, ok;
} rig;

static void rig_free(rig *r) {
    if (r->ok) slm_rt_free(&r->rt);
    slm_compiled_free(&r->c);
    slm_tok_free(r->tok);
    if (r->from_blob) slm_blob_close(&r->b);
    else slm_model_close(&r->m);
}

/* The blob, or the source compiled afresh with the blob's options (as stored)
 * and its batch programs. */
static int rig_open(rig *r, const char *path, const slm_compiled *like, int threads) {
    memset(r, 0, sizeof *r);
    slm_err err = {0};
    const void *w = NULL;
    if (!like) {
        r->from_blob = 1;
        if (slm_blob_open(&r->b, path, 0, &r->c, &r->tok, &err)) {
            fprintf(stderr, "  %s: %s\n", path, err.msg);
            return 0;
        }
        w = r->b.weights;
    } else {
        static const int batches[] = {2, 4};
        if (slm_model_open(&r->m, path, &err) || slm_model_repack(&r->m, &err) || slm_compile(&r->c, &r->m, &like->opt, &err) ||
            slm_compile_batch(&r->c, &r->m, like->n_seqs, batches, 2, &err)) {
            fprintf(stderr, "  %s: %s\n", path, err.msg);
            return 0;
        }
        w = r->m.map.data;
    }
    if (slm_rt_init_seqs(&r->rt, &r->c, w, threads, r->c.n_seqs, 0, &err)) {
        fprintf(stderr, "  %s: runtime: %s\n", path, err.msg);
        return 0;
    }
    r->ok = 1;
    return 1;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Prefill each sequence (prompts of different lengths), then steps of batch
 * decode over changing sets of sequences (4, 3 of them: batch.4 padded, 2:
 * batch.2), each sequence's next token its greedy one. Every logit row goes
 * to out (n_out floats at most); returns how many were written. */
static size_t drive(rig *r, float *out, size_t n_out) {
    const int V = r->c.cfg.vocab_size, S = r->c.n_seqs;
    slm_err err = {0};
    size_t at = 0;
    int next[8] = {0};
    for (int s = 0; s < S; s++) {
        int32_t ids[12];
        for (int i = 0; i < 3 + 2 * s; i++) ids[i] = (int32_t)((1 + 37 * i + 101 * s) % V);
        slm_rt_select(&r->rt, s);
        if (slm_rt_prefill(&r->rt, ids, 3 + 2 * s, &err)) {
            fprintf(stderr, "  prefill: %s\n", err.msg);
            return 0;
        }
        const float *lg = r->rt.logits;
        next[s] = argmax(lg, V);
        if (at + (size_t)V <= n_out) memcpy(out + at, lg, (size_t)V * sizeof(float)), at += (size_t)V;
    }
    static const int sets[][5] = {{4, 0, 1, 2, 3}, {4, 3, 1, 0, 2}, {3, 2, 0, 3, 0}, {2, 1, 3, 0, 0}, {2, 0, 2, 0, 0},
                                  {4, 0, 1, 2, 3}, {3, 1, 2, 3, 0}};
    for (int step = 0; step < 14; step++) {
        const int *set = sets[step % 7];
        int n = set[0], seqs[4];
        int32_t ids[4];
        for (int i = 0; i < n; i++) {
            seqs[i] = set[1 + i] % S;
            ids[i] = next[seqs[i]];
        }
        if (S < 4 && n > S) n = S;
        const float *lg = NULL;
        if (slm_rt_decode_batch(&r->rt, seqs, ids, n, &lg, &err)) {
            fprintf(stderr, "  decode_batch: %s\n", err.msg);
            return 0;
        }
        for (int i = 0; i < n; i++) {
            next[seqs[i]] = argmax(lg + (size_t)i * V, V);
            if (at + (size_t)V <= n_out) memcpy(out + at, lg + (size_t)i * V, (size_t)V * sizeof(float)), at += (size_t)V;
        }
    }
    return at;
}

/* blob against source: the same logits, bit for bit (1 and 2 threads). */
static void same_logits(const char *what, const char *source, const char *blob) {
    for (int threads = 1; threads <= 2; threads++) {
        rig b, s;
        const int okb = rig_open(&b, blob, NULL, threads);
        CHECKF(okb, "%s: the blob opens", what);
        if (!okb) return;
        CHECKF(b.c.n_seqs == 4 && b.rt.batch_max == 4, "%s: n_seqs %d, batch_max %d", what, b.c.n_seqs, b.rt.batch_max);
        const int oks = rig_open(&s, source, &b.c, threads);
        CHECKF(oks, "%s: the source compiles", what);
        if (oks) {
            const size_t cap = (size_t)b.c.cfg.vocab_size * 80;
            float *x = calloc(cap, sizeof(float)), *y = calloc(cap, sizeof(float));
            const size_t nx = drive(&b, x, cap), ny = drive(&s, y, cap);
            CHECKF(nx > 0 && nx == ny && !memcmp(x, y, nx * sizeof(float)), "%s (%d threads): %zu / %zu logits, %s", what,
                   threads, nx, ny, nx == ny && nx && memcmp(x, y, nx * sizeof(float)) ? "differ" : "");
            int finite = 1;
            for (size_t i = 0; i < nx; i++) finite &= x[i] == x[i] && x[i] > -1e30f && x[i] < 1e30f;
            CHECKF(finite && nx >= (size_t)b.c.cfg.vocab_size * 40, "%s: %zu finite logits", what, nx);
            free(x);
            free(y);
        }
        rig_free(&s);
        rig_free(&b);
    }
}

static int synth(const char *args, const char *out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s synth --shape custom %s -o %s --vocab-file %s >/dev/null 2>&1", SLM_CLI_PATH, args, out,
             T_SHARED("vocab/ggml-vocab-llama-spm.gguf"));
    const int rc = system(cmd);
    CHECKF(rc == 0, "%s", cmd);
    return rc == 0;
}

static void test_logits_stories(void) { same_logits("stories260K f32 KV", M("stories260K.bin"), g_blob4); }

/* Synthetic files of other shapes: a repacked Q8_0 qwen2 (biases and RoPE on
 * the present rows) with f16 KV, a qwen35 hybrid (a recurrent state row per
 * sequence) and a mixture of experts with q8_0 KV. */
static void test_logits_archs(void) {
    static const struct {
        const char *name, *args, *kv;
    } k[] = {
        {"qwen2 q8_0", "--arch qwen2 --type q8_0 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --n-vocab 320 "
                       "--ctx 256 --std 0.5", "f16"},
        {"qwen35", "--arch qwen35 --type f32 --dim 64 --layers 4 --heads 2 --kv-heads 1 --ffn 96 --n-vocab 320 --ctx 256 "
                   "--std 0.5", "f32"},
        {"qwen3moe", "--arch qwen3moe --experts 4 --experts-used 2 --type q8_0 --dim 64 --layers 2 --heads 2 "
                     "--kv-heads 1 --ffn 64 --n-vocab 320 --ctx 256 --std 0.5", "q8_0"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char src[400], blob[400];
        snprintf(src, sizeof src, "%s/synth%zu.gguf", g_tmp, i);
        snprintf(blob, sizeof blob, "%s/synth%zu.slmblob", g_tmp, i);
        if (!synth(k[i].args, src)) continue;
        const int ok = compile_blob(src, NULL, blob, "4", k[i].kv);
        CHECKF(ok, "%s: compile --parallel 4", k[i].name);
        if (ok) same_logits(k[i].name, src, blob);
        unlink(blob);
        unlink(src);
    }
}

/* ---- sessions through the engine -------------------------------------------------- */

static const char *PROMPTS[] = {"Once upon a time", "Lily and Tom went", "The cat sat", "One day, a big dog",
                                "Sara had a red ball"};
#define NP 5

static slm_engine *load(const char *model, int n_seqs, const char *cache_dir, char *msg, size_t cap) {
    slm_options o = slm_default_options();
    const int blob = slm_blob_is_elf(model);
    o.kv_type = blob ? SLM_KV_DEFAULT : SLM_KV_F32;
    o.tokenizer_path = blob ? NULL : M("tok512.bin");
    o.n_threads = 1;
    o.n_seqs = n_seqs;
    o.max_prompt_len = blob ? 0 : 32;
    o.min_response_len = blob ? -1 : 64;
    o.cache_dir = cache_dir;
    slm_engine *e = NULL;
    const slm_status s = slm_load(&e, model, &o);
    if (msg) snprintf(msg, cap, "%s", s ? slm_last_error(e) : slm_cache_note(e));
    if (s) {
        slm_free(e);
        return NULL;
    }
    return e;
}

static slm_session_cfg greedy(void) { return t_greedy(NTOK); }

/* Each prompt alone (one session at a time) on e. */
static void alone(slm_engine *e, int want[NP][NTOK]) {
    slm_session_cfg c = greedy();
    t_sessions_alone(e, &c, PROMPTS, NP, NTOK, &want[0][0]);
}

/* The prompts together on e's slots, joining one a step (continuous
 * batching); each must equal want; most tokens must come from batch steps. */
static void together(slm_engine *e, const char *what, int want[NP][NTOK]) {
    slm_info in;
    slm_get_info(e, &in);
    slm_session_cfg c = greedy();
    int got[NP][NTOK], n_got[NP];
    const int n_batched = t_sessions_together(e, &c, PROMPTS, NP, NTOK, &got[0][0], n_got);
    if (in.batch_max > 1)
        CHECKF(n_batched > NP * NTOK / 2, "%s: %d of %d tokens decoded in batches", what, n_batched, NP * NTOK);
    for (int p = 0; p < NP; p++)
        CHECKF(n_got[p] == NTOK && !memcmp(got[p], want[p], sizeof got[p]), "%s: prompt %d: %d tokens", what, p, n_got[p]);
}

static void test_sessions(void) {
    int want[NP][NTOK];
    char msg[1024];
    slm_engine *a = load(M("stories260K.bin"), 1, NULL, msg, sizeof msg);
    CHECKF(a != NULL, "source: %s", msg);
    if (!a) return;
    alone(a, want);
    slm_free(a);
    /* --parallel 4 from the blob: its batch programs */
    slm_engine *e = load(g_blob4, 4, NULL, msg, sizeof msg);
    CHECKF(e != NULL, "blob, --parallel 4: %s", msg);
    if (e) {
        slm_info in;
        slm_get_info(e, &in);
        CHECKF(in.n_seqs == 4 && in.batch_max == 4, "n_seqs %d, batch_max %d", in.n_seqs, in.batch_max);
        together(e, "blob --parallel 4", want);
        slm_free(e);
    }
    /* one sequence from the same blob: its batch programs dropped, the rest as from any blob */
    e = load(g_blob4, 1, NULL, msg, sizeof msg);
    CHECKF(e != NULL, "blob, one sequence: %s", msg);
    if (e) {
        int got[NP][NTOK];
        slm_info in;
        slm_get_info(e, &in);
        CHECKF(in.n_seqs == 1 && in.batch_max == 0, "n_seqs %d, batch_max %d", in.n_seqs, in.batch_max);
        alone(e, got);
        CHECK(!memcmp(got, want, sizeof got));
        slm_free(e);
    }
    /* more than the blob's regions: refused, saying what the blob holds and what to do (fewer: test_fewer_slots) */
    for (int n = 5; n <= 8; n += 3) {
        e = load(g_blob4, n, NULL, msg, sizeof msg);
        CHECKF(!e && strstr(msg, "compiled for --parallel 4") && strstr(msg, "use --parallel 4 or fewer") &&
                   strstr(msg, "recompile with --parallel"), "--parallel %d: %s", n, msg);
        slm_free(e);
    }
    /* a blob without batch programs and --parallel 4: the sessions decode one by one, as before */
    char b1[400];
    snprintf(b1, sizeof b1, "%s/s1.slmblob", g_tmp);
    CHECK(compile_blob(M("stories260K.bin"), M("tok512.bin"), b1, NULL, "f32"));
    e = load(b1, 4, NULL, msg, sizeof msg);
    CHECKF(e != NULL, "blob without batch programs, --parallel 4: %s", msg);
    if (e) {
        slm_info in;
        slm_get_info(e, &in);
        CHECKF(in.n_seqs == 4 && in.batch_max == 0, "n_seqs %d, batch_max %d", in.n_seqs, in.batch_max);
        together(e, "blob without batch programs", want);
        slm_free(e);
    }
    unlink(b1);
}

/* ---- fewer slots than the blob's KV regions ------------------------------------------ */

#define NL 16 /* tokens compared with their log-probabilities */

typedef struct lp_run {
    int32_t id[NL];
    slm_token_logprobs lp[NL];
    int n, n_batched;
} lp_run;

static slm_session_cfg with_logprobs(void) {
    slm_session_cfg c = t_greedy(NL);
    c.logprobs = 1;
    c.top_logprobs = SLM_MAX_TOP_LOGPROBS;
    return c;
}

/* The same token and log-probabilities, bit for bit (the log-softmax of the raw logits, its top 20). */
static int same_lp(const slm_token_logprobs *a, const slm_token_logprobs *b) {
    if (a->token.id != b->token.id || memcmp(&a->token.logprob, &b->token.logprob, sizeof(float)) || a->n_top != b->n_top)
        return 0;
    for (int i = 0; i < a->n_top; i++)
        if (a->top[i].id != b->top[i].id || memcmp(&a->top[i].logprob, &b->top[i].logprob, sizeof(float))) return 0;
    return 1;
}

/* k sessions on e, prompts 0..k-1, stepped together NL times (slm_session_next_batch). */
static void lp_together(slm_engine *e, int k, lp_run *out) {
    const slm_session_cfg c = with_logprobs();
    slm_session *ss[4] = {0};
    memset(out, 0, (size_t)k * sizeof *out);
    for (int p = 0; p < k; p++) {
        CHECK(slm_session_new(e, &c, &ss[p]) == SLM_OK);
        if (ss[p]) CHECK(slm_session_feed_text(ss[p], PROMPTS[p], SLM_FEED_BOS) == SLM_OK);
    }
    for (int i = 0; i < NL && ss[k - 1]; i++) {
        int32_t ids[4];
        CHECK(slm_session_next_batch(ss, k, ids, NULL, NULL) == SLM_OK);
        for (int p = 0; p < k; p++) {
            out[p].id[out[p].n] = ids[p];
            CHECK(slm_session_logprobs(ss[p], &out[p].lp[out[p].n]) == SLM_OK);
            out[p].n++;
        }
    }
    for (int p = 0; p < k; p++) {
        slm_session_stats st;
        slm_session_get_stats(ss[p], &st);
        out[p].n_batched = st.n_batched;
        slm_session_free(ss[p]);
    }
}

/* The decode_batch slices of the trace at path; -1 if one of them is not k sequences in program prog. */
static int count_batch_steps(const char *path, int k, const char *prog) {
    char *j = t_read_file(path, NULL), want[96];
    snprintf(want, sizeof want, "\"sequences\":%d,\"program\":\"%s\"", k, prog);
    int n = 0;
    for (char *q = j; q && (q = strstr(q, "\"name\":\"decode_batch\"")); q++) {
        char *end = strchr(q, '\n');
        if (end) *end = 0;
        if (!strstr(q, want)) {
            fprintf(stderr, "  %s\n", q);
            n = -1;
            break;
        }
        n++;
        if (!end) break;
        q = end;
    }
    free(j);
    return n;
}

/* A --parallel 4 blob served with M = 2 and 3 slots: the four KV regions are
 * allocated (the batch programs' shapes), M handed out; M sessions decoding
 * together (M = 3: batch.4 with a padded row, M = 2: batch.2) give each the
 * tokens and log-probabilities of its prompt alone, bit for bit; session
 * M + 1 is refused naming M; sessions past M queue on freed slots. */
static void test_fewer_slots(void) {
    char msg[1024];
    lp_run want[4];
    slm_engine *a = load(M("stories260K.bin"), 1, NULL, msg, sizeof msg);
    CHECKF(a != NULL, "source: %s", msg);
    if (!a) return;
    const slm_session_cfg c = with_logprobs();
    for (int p = 0; p < 3; p++) { /* each alone: the single-sequence programs */
        slm_session *s = NULL;
        memset(&want[p], 0, sizeof want[p]);
        CHECK(slm_session_new(a, &c, &s) == SLM_OK);
        if (!s) continue;
        CHECK(slm_session_feed_text(s, PROMPTS[p], SLM_FEED_BOS) == SLM_OK);
        for (int i = 0; i < NL; i++) {
            CHECK(slm_session_next(s, &want[p].id[i], NULL) == SLM_OK);
            CHECK(slm_session_logprobs(s, &want[p].lp[i]) == SLM_OK);
        }
        slm_session_free(s);
    }
    int alone5[NP][NTOK];
    alone(a, alone5);
    slm_free(a);
    slm_info full;
    slm_engine *e = load(g_blob4, 4, NULL, msg, sizeof msg);
    CHECKF(e != NULL, "--parallel 4: %s", msg);
    if (!e) return;
    slm_get_info(e, &full);
    slm_free(e);
    CHECKF(full.n_seqs == 4 && full.kv_regions == 4 && full.state_bytes == 0,
           "--parallel 4: n_seqs %d, kv_regions %d, state_bytes %zu", full.n_seqs, full.kv_regions, full.state_bytes);
    for (int m = 2; m <= 3; m++) {
        e = load(g_blob4, m, NULL, msg, sizeof msg);
        CHECKF(e != NULL, "--parallel %d from a --parallel 4 blob: %s", m, msg);
        if (!e) continue;
        slm_info in;
        slm_get_info(e, &in);
        CHECKF(in.n_seqs == m && in.kv_regions == 4 && in.batch_max == 4 && in.kv_bytes == full.kv_bytes,
               "--parallel %d: n_seqs %d, kv_regions %d, batch_max %d, kv_bytes %zu (4 slots: %zu)", m, in.n_seqs,
               in.kv_regions, in.batch_max, in.kv_bytes, full.kv_bytes);
        /* m slots taken: the next session is refused, naming m */
        slm_session *held[4] = {0}, *extra = NULL;
        for (int i = 0; i < m; i++) CHECK(slm_session_new(e, &c, &held[i]) == SLM_OK);
        char want_msg[64];
        snprintf(want_msg, sizeof want_msg, "all %d KV slots are in use", m);
        CHECKF(slm_session_new(e, &c, &extra) == SLM_ERR_CAPACITY && !extra && strstr(slm_last_error(e), want_msg),
               "--parallel %d: session %d: %s", m, m + 1, slm_last_error(e));
        slm_session_free(extra);
        for (int i = 0; i < m; i++) slm_session_free(held[i]);
        lp_run got[4];
        char trace[400];
        snprintf(trace, sizeof trace, "%s/fewer%d.json", g_tmp, m);
        slm_err terr = {0};
        CHECK(slm_trace_start(trace, 4, &terr) == SLM_OK);
        lp_together(e, m, got);
        CHECK(slm_trace_stop(NULL, NULL, &terr) == SLM_OK);
        /* which program ran the m rows: the smallest batch program that holds them (3: batch.4, a row padded) */
        const char *prog = m == 3 ? "batch.4" : "batch.2";
        const int calls = count_batch_steps(trace, m, prog);
        CHECKF(calls >= NL - 1, "--parallel %d: %d batch steps of %d sequences in %s", m, calls, m, prog);
        unlink(trace);
        for (int p = 0; p < m; p++) {
            int same = got[p].n == NL;
            for (int i = 0; same && i < NL; i++) same = got[p].id[i] == want[p].id[i] && same_lp(&got[p].lp[i], &want[p].lp[i]);
            CHECKF(same, "--parallel %d: prompt %d: %d tokens differ from its run alone", m, p, got[p].n);
            CHECKF(got[p].n_batched >= NL - 1, "--parallel %d: prompt %d: %d of %d tokens from batch steps", m, p,
                   got[p].n_batched, NL);
        }
        /* five prompts through m slots, one joining a step as slots free */
        char what[64];
        snprintf(what, sizeof what, "blob --parallel %d of 4", m);
        together(e, what, alone5);
        slm_free(e);
    }
}

/* ---- cache mode -------------------------------------------------------------------- */

static int count_blobs(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) n += strstr(de->d_name, ".slmblob") && !strstr(de->d_name, ".tmp.");
    closedir(d);
    return n;
}

static void test_cache(void) {
    char dir[400], note[2048];
    snprintf(dir, sizeof dir, "%s/cache", g_tmp);
    int want[NP][NTOK];
    slm_engine *e = load(M("stories260K.bin"), 1, NULL, note, sizeof note);
    if (!e) { CHECK(0); return; }
    alone(e, want);
    slm_free(e);
    /* --parallel 4: compiled with its batch programs into the blob, run from it */
    e = load(M("stories260K.bin"), 4, dir, note, sizeof note);
    CHECKF(e && strstr(note, "compiling"), "first start: %s", note);
    if (e) {
        slm_info in;
        slm_get_info(e, &in);
        CHECKF(in.batch_max == 4 && in.n_seqs == 4, "first start: batch_max %d", in.batch_max);
        together(e, "cache, first start", want);
        slm_free(e);
    }
    CHECK(count_blobs(dir) == 1);
    /* the reload maps it and uses its batch programs */
    e = load(M("stories260K.bin"), 4, dir, note, sizeof note);
    CHECKF(e && strstr(note, "loaded cached blob"), "second start: %s", note);
    if (e) {
        slm_info in;
        slm_get_info(e, &in);
        CHECKF(in.batch_max == 4 && in.n_seqs == 4, "second start: batch_max %d", in.batch_max);
        together(e, "cache, reload", want);
        slm_free(e);
    }
    char blob[600] = "";
    const char *p = strstr(note, "loaded cached blob ");
    snprintf(blob, sizeof blob, "%s", p ? p + strlen("loaded cached blob ") : "");
    /* the identity differs by n_seqs: 2 and 1 sequences are blobs of their own */
    e = load(M("stories260K.bin"), 2, dir, note, sizeof note);
    CHECKF(e && strstr(note, "compiling"), "--parallel 2: %s", note);
    if (e) {
        slm_info in;
        slm_get_info(e, &in);
        CHECKF(in.batch_max == 2 && in.n_seqs == 2, "--parallel 2: batch_max %d", in.batch_max);
        together(e, "cache, --parallel 2", want);
        slm_free(e);
    }
    e = load(M("stories260K.bin"), 1, dir, note, sizeof note);
    CHECKF(e && strstr(note, "compiling"), "one sequence: %s", note);
    slm_free(e);
    CHECK(count_blobs(dir) == 3);
    /* the --parallel 4 blob holds n_seqs 4 and its batch programs */
    char *o = NULL;
    char *argv[] = {"staticlm", "inspect", blob, NULL};
    CHECK(cli(argv, &o, NULL) == 0);
    CHECKF(o && strstr(o, "n_seqs 4") && strstr(o, "program batch.4: rows 4, KV capacity 384"), "inspect %s: %s", blob,
           o ? o : "");
    free(o);
}

/* ---- inspect, the CLI ------------------------------------------------------------------ */

static void test_inspect_cli(void) {
    char *o = NULL, *e = NULL;
    char *argv[] = {"staticlm", "inspect", g_blob4, NULL};
    CHECK(cli(argv, &o, NULL) == 0);
    CHECKF(o && strstr(o, "sequences: n_seqs 4 (KV regions of 96 rows; serve --parallel 4); batch programs batch.2 batch.4") &&
               strstr(o, "program batch.2: rows 2, KV capacity 384") && strstr(o, "program batch.4: rows 4, KV capacity 384") &&
               strstr(o, "attention_mask") && strstr(o, "(4 sequences)"),
           "inspect: %s", o ? o : "");
    free(o);
    o = NULL;
    char *help[] = {"staticlm", "compile", "--help", NULL};
    CHECK(cli(help, &o, NULL) == 0);
    CHECKF(o && strstr(o, "--parallel N"), "compile --help: %s", o ? o : "");
    free(o);
    o = NULL;
    /* out of range: refused by the option parser */
    char out[400];
    snprintf(out, sizeof out, "%s/x.slmblob", g_tmp);
    char *bad[] = {"staticlm", "compile", "-m", M("stories260K.bin"), "-z", M("tok512.bin"), "-o", out, "--parallel", "0", NULL};
    CHECK(cli(bad, NULL, &e) != 0 && access(out, F_OK) != 0);
    CHECKF(e && strstr(e, "--parallel"), "--parallel 0: %s", e ? e : "");
    free(e);
}

/* ---- hostile batch fields ---------------------------------------------------------------- */

/* The program record called name in .slm.programs (NULL if none). */
static uint8_t *prog_record(uint8_t *img, size_t n, const char *name) {
    uint64_t len = 0;
    uint8_t *p = t_blob_section(img, n, ".slm.programs", &len);
    for (uint64_t i = 0; p && i + BLOB_PROG_SIZE <= len; i += BLOB_PROG_SIZE)
        if (!strcmp((const char *)p + i, name)) return p + i;
    return NULL;
}

/* The first task record of program prog with op (and, when flag, that flag). */
static uint8_t *task_record(uint8_t *img, size_t n, const char *prog, int op, unsigned flag) {
    char sec[64];
    snprintf(sec, sizeof sec, ".slm.tasks.%s", prog);
    uint64_t len = 0;
    uint8_t *p = t_blob_section(img, n, sec, &len);
    for (uint64_t i = 0; p && i + BLOB_TASK_SIZE <= len; i += BLOB_TASK_SIZE) {
        uint16_t f;
        memcpy(&f, p + i + 2, 2);
        if (p[i] == op && (!flag || (f & flag))) return p + i;
    }
    return NULL;
}

/* The I/O record of program prog with role. */
static uint8_t *io_record(uint8_t *img, size_t n, const char *prog, int role) {
    char sec[64];
    snprintf(sec, sizeof sec, ".slm.io.%s", prog);
    uint64_t len = 0;
    uint8_t *p = t_blob_section(img, n, sec, &len);
    for (uint64_t i = 0; p && i + BLOB_IO_SIZE <= len; i += BLOB_IO_SIZE)
        if (p[i + 48] == role) return p + i;
    return NULL;
}

static void put32(uint8_t *p, int32_t v) { memcpy(p, &v, 4); }

/* One mutation of a field: refused, the message naming expect (checksum off,
 * so the validator meets it); work is restored from img. */
static void refused(const uint8_t *img, size_t n, uint8_t *work, const char *what, const char *expect) {
    char msg[SLM_ERRLEN];
    const int opens = t_blob_opens(work, n, "hostile.slmblob", msg, sizeof msg);
    CHECKF(!opens && strstr(msg, expect), "%s: %s (want '%s')", what, opens ? "accepted" : msg, expect);
    memcpy(work, img, n);
}

/* Program prog's I/O of role given `rows` rows: refused, the message naming expect. */
static void io_rows_refused(const uint8_t *img, size_t n, uint8_t *w, const char *prog, int role, int32_t rows,
                            const char *expect) {
    uint8_t *io = io_record(w, n, prog, role);
    CHECKF(io != NULL, "%s: no I/O of role %d", prog, role);
    if (!io) return;
    put32(io + 56, rows);
    char what[128];
    snprintf(what, sizeof what, "%s: %s of %d rows", prog, expect, rows);
    refused(img, n, w, what, expect);
}

/* A task record's flags: clear, then set. */
static void task_flags(uint8_t *t, unsigned clear, unsigned set) {
    uint16_t f;
    memcpy(&f, t + 2, 2);
    f = (uint16_t)((f & ~clear) | set);
    memcpy(t + 2, &f, 2);
}

static void test_hostile_fields(void) {
    size_t n = 0;
    uint8_t *img = (uint8_t *)t_read_file(g_blob4, &n);
    CHECK(img != NULL);
    if (!img) return;
    uint8_t *w = malloc(n);
    memcpy(w, img, n);
    char msg[SLM_ERRLEN];
    CHECKF(t_blob_opens(w, n, "ok.slmblob", msg, sizeof msg), "pristine: %s", msg);
    uint64_t clen = 0;
    const size_t cfg_off = (size_t)(t_blob_section(w, n, ".slm.config", &clen) - w);
    CHECK(clen == BLOB_CONFIG_SIZE);
    /* n_seqs */
    static const int32_t seqs[] = {0, -1, 1, 3, 5, 1025, 0x7fffffff};
    for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
        put32(w + cfg_off + BLOB_CFG_NSEQS, seqs[i]);
        char what[64];
        snprintf(what, sizeof what, "n_seqs %d", seqs[i]);
        refused(img, n, w, what, seqs[i] == 3 || seqs[i] == 5 ? "kv_capacity" : "n_seqs");
    }
    put32(w + cfg_off + BLOB_CFG_NSEQS + 4, 7);
    refused(img, n, w, "reserved after n_seqs", "reserved field after n_seqs");
    /* the batch program records */
    const size_t b4 = (size_t)(prog_record(w, n, "batch.4") - w), b2 = (size_t)(prog_record(w, n, "batch.2") - w);
    CHECK(b4 > 0 && b2 > 0);
    put32(w + b4 + 24, 4);
    refused(img, n, w, "batch.4 kind 4 (lm_head)", "kind 4 unknown");
    put32(w + b4 + 24, 6);
    refused(img, n, w, "batch.4 kind 6 (embed)", "an embedding program without .slm.embed");
    put32(w + b4 + 24, 2);
    refused(img, n, w, "batch.4 kind 2", "batch.4");
    put32(w + b2 + 24, 3);
    refused(img, n, w, "batch.2 kind 3 (verify)", "batch.2");
    static const int32_t rows[] = {0, 1, 5, 3};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        put32(w + b4 + 28, rows[i]);
        refused(img, n, w, "batch.4 rows", "batch.4");
    }
    static const int32_t caps[] = {96, 383, 385, 192, 0, -384};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        put32(w + b4 + 32, caps[i]);
        refused(img, n, w, "batch.4 kv_capacity", "kv_capacity");
    }
    put32(w + b4 + 68, 1);
    refused(img, n, w, "batch.4 reserved", "region 1 with rows 4 (embed batch: at least 2 regions; else 0)");
    /* the order: batch.4 before batch.2 (records swapped, names and all) */
    {
        uint8_t t[BLOB_PROG_SIZE];
        memcpy(t, w + b2, BLOB_PROG_SIZE);
        memcpy(w + b2, w + b4, BLOB_PROG_SIZE);
        memcpy(w + b4, t, BLOB_PROG_SIZE);
        refused(img, n, w, "batch programs out of order", "not ordered");
    }
    /* I/O shapes of a batch program */
    io_rows_refused(img, n, w, "batch.4", SLM_IO_ATTENTION_MASK, 96, "attention_mask");
    io_rows_refused(img, n, w, "batch.4", SLM_IO_LOGITS, 1, "logits");
    io_rows_refused(img, n, w, "batch.4", SLM_IO_PAST_KEY, 96, "past_key_values");
    io_rows_refused(img, n, w, "batch.4", SLM_IO_PRESENT_VALUE, 384, "present");
    /* the attention tasks' region (k) */
    uint8_t *t = task_record(w, n, "batch.4", SLM_T_ATTENTION, 0);
    CHECK(t != NULL);
    static const int32_t ks[] = {384, 95, 97, 192, 0, -96};
    for (size_t i = 0; t && i < sizeof ks / sizeof ks[0]; i++) {
        put32(t + 16, ks[i]);
        refused(img, n, w, "batch.4 attention k", "region");
    }
    /* rows at their cache positions: off, on a non-K/V destination, in a single-sequence program, with another stride */
    t = task_record(w, n, "batch.4", SLM_T_MATMUL, SLM_TF_DST_CPOS);
    CHECK(t != NULL);
    if (t) {
        task_flags(t, SLM_TF_DST_CPOS, 0);
        refused(img, n, w, "batch.4 DST_CPOS cleared", "present");
        task_flags(t, 0, SLM_TF_DST_COMPACT);
        refused(img, n, w, "batch.4 DST_CPOS with DST_COMPACT", "DST_CPOS");
        uint32_t ld;
        memcpy(&ld, t + 56 + 16 * SLM_REF_DST + 4, 4);
        ld += 16;
        memcpy(t + 56 + 16 * SLM_REF_DST + 4, &ld, 4);
        refused(img, n, w, "batch.4 present stride", "stride");
    }
    t = task_record(w, n, "batch.4", SLM_T_MATMUL, SLM_TF_POST_ADD);
    if (t) {
        task_flags(t, 0, SLM_TF_DST_CPOS);
        refused(img, n, w, "DST_CPOS on a residual matmul", "DST_CPOS");
    }
    t = task_record(w, n, "generate.96", SLM_T_MATMUL, SLM_TF_DST_COMPACT);
    if (!t) t = task_record(w, n, "generate.96", SLM_T_MATMUL, SLM_TF_ONE_ROW);
    CHECK(t != NULL);
    if (t) {
        task_flags(t, SLM_TF_DST_COMPACT | SLM_TF_ONE_ROW, SLM_TF_DST_CPOS);
        refused(img, n, w, "DST_CPOS in a generate program", "DST_CPOS");
    }
    free(w);
    free(img);
}

/* A qwen35 blob: the recurrent tasks' region and sequences, the state rows. */
static void test_hostile_recurrent(void) {
    char src[400], blob[400];
    snprintf(src, sizeof src, "%s/q35.gguf", g_tmp);
    snprintf(blob, sizeof blob, "%s/q35.slmblob", g_tmp);
    if (!synth("--arch qwen35 --type f32 --dim 64 --layers 4 --heads 2 --kv-heads 1 --ffn 96 --n-vocab 320 --ctx 256 "
               "--std 0.5", src) ||
        !compile_blob(src, NULL, blob, "3", "f32")) {
        CHECK(0);
        return;
    }
    size_t n = 0;
    uint8_t *img = (uint8_t *)t_read_file(blob, &n);
    uint8_t *w = img ? malloc(n) : NULL;
    if (!w) { CHECK(0); free(img); return; }
    memcpy(w, img, n);
    char msg[SLM_ERRLEN];
    CHECKF(t_blob_opens(w, n, "ok.slmblob", msg, sizeof msg), "qwen35 --parallel 3: %s", msg);
    CHECK(prog_record(w, n, "batch.2") && !prog_record(w, n, "batch.4"));
    io_rows_refused(img, n, w, "batch.2", SLM_IO_RECUR_STATE, 1, "recurrent_state");
    io_rows_refused(img, n, w, "batch.2", SLM_IO_CONV_STATE, 2, "conv_state");
    uint8_t *t = task_record(w, n, "batch.2", SLM_T_DELTA_NET, 0);
    CHECK(t != NULL);
    if (t) {
        put32(t + 48, 4); /* window: sequences */
        refused(img, n, w, "delta_net sequences 4", "sequences");
        put32(t + 48, 1);
        refused(img, n, w, "delta_net sequences 1", "sequences");
        put32(t + 16, 96 * 3);
        refused(img, n, w, "delta_net region", "region");
    }
    t = task_record(w, n, "batch.2", SLM_T_SSM_CONV, 0);
    if (t) {
        put32(t + 48, 2);
        refused(img, n, w, "ssm_conv sequences 2", "sequences");
    }
    t = task_record(w, n, "generate.96", SLM_T_DELTA_NET, 0);
    if (t) {
        put32(t + 48, 3);
        refused(img, n, w, "generate's delta_net sequences 3", "sequences");
    }
    free(w);
    free(img);
    unlink(blob);
    unlink(src);
}

/* ---- damage: random flips and extremes in the batch sections --------------------------- */

static uint64_t g_rng = 0x5eed5eedull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* Open without the checksum; what opens is run: each sequence prefilled,
 * then batch steps (an exact-size heap copy, so ASan sees overreads). */
static int try_run(const uint8_t *img, size_t n, int *ran) {
    uint8_t *copy = malloc(n);
    memcpy(copy, img, n);
    slm_blob b;
    slm_compiled c;
    slm_tokenizer *tok = NULL;
    slm_err err = {0};
    const slm_status s = slm_blob_open_mem(&b, copy, n, "damaged.slmblob", SLM_BLOB_NO_CHECKSUM, &c, &tok, &err);
    if (s) CHECKF(err.msg[0], "refused without a message");
    if (!s) {
        slm_runtime rt;
        /* as the engine does: the memory budget first (a damaged arena size may ask for a TiB) */
        if (slm_rt_budget(&c, "damaged.slmblob", 256, c.n_seqs, 0, 0, NULL, &err) == SLM_OK &&
            slm_rt_init_seqs(&rt, &c, b.weights, 1, c.n_seqs, 0, &err) == SLM_OK) {
            int32_t ids[4] = {1, 2, 3, 4};
            for (int q = 0; q < c.n_seqs && q < 4; q++) {
                slm_rt_select(&rt, q);
                (void)slm_rt_prefill(&rt, ids, 3, &err);
            }
            const int seqs[4] = {0, 1, 2, 3};
            const float *lg;
            for (int k = 2; k <= 4 && k <= c.n_seqs; k++) (void)slm_rt_decode_batch(&rt, seqs, ids, k, &lg, &err);
            ++*ran;
            slm_rt_free(&rt);
        }
        slm_tok_free(tok);
        slm_compiled_free(&c);
    }
    free(copy);
    return s == SLM_OK;
}

static void test_damage(void) {
    size_t n = 0;
    uint8_t *img = (uint8_t *)t_read_file(g_blob4, &n);
    if (!img) { CHECK(0); return; }
    uint8_t *w = malloc(n);
    /* the spans: .slm.config and the batch programs' sections */
    static const char *const secs[] = {".slm.config", ".slm.programs", ".slm.tasks.batch.4", ".slm.io.batch.4",
                                       ".slm.reloc.batch.4", ".slm.tasks.batch.2", ".slm.io.batch.2"};
    int cases = 0, accepted = 0, ran = 0;
    for (size_t si = 0; si < sizeof secs / sizeof secs[0]; si++) {
        uint64_t len = 0;
        uint8_t *p = t_blob_section(img, n, secs[si], &len);
        CHECKF(p && len >= 8, "%s", secs[si]);
        if (!p || len < 8) continue;
        const size_t off = (size_t)(p - img);
        for (int i = 0; i < 120; i++) {
            memcpy(w, img, n);
            const size_t at = off + (size_t)(rnd() % (len - 4)) / 4 * 4;
            static const uint32_t vals[] = {0, 1, 2, 3, 4, 5, 96, 384, 0xffffffffu, 0x7fffffffu, 0x80000000u, 65535};
            if (i % 2) {
                const uint32_t v = vals[rnd() % (sizeof vals / sizeof vals[0])];
                memcpy(w + at, &v, 4);
            } else {
                w[at + rnd() % 4] ^= (uint8_t)(1 + rnd() % 255);
            }
            if (!memcmp(w + at, img + at, 4)) continue;
            cases++;
            accepted += try_run(w, n, &ran);
        }
    }
    fprintf(stderr, "  %d damaged batch fields: %d accepted by the validator (checksum off), %d of them ran\n", cases,
            accepted, ran);
    CHECK(cases >= 700 && accepted < cases && ran > accepted / 2);
    free(w);
    free(img);
}

static void cleanup(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    if (system(cmd)) {}
}

int main(void) {
    T_RUN(test_setup);
    T_RUN(test_inspect_cli);
    T_RUN(test_logits_stories);
    T_RUN(test_logits_archs);
    T_RUN(test_sessions);
    T_RUN(test_fewer_slots);
    T_RUN(test_cache);
    T_RUN(test_hostile_fields);
    T_RUN(test_hostile_recurrent);
    T_RUN(test_damage);
    cleanup();
    T_DONE();
}
