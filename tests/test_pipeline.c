/* The runtime's features through the public API and the CLI, each checked
 * against the plain path (goldens from llama2.c's run.c where they apply):
 * speculative decoding (stories260K drafting for itself and for rand288),
 * the prefix cache across requests, generate/prefill variants and a
 * separate LM head selected by options, and the overflow policies. */
#include <sys/wait.h>
#include <unistd.h>

#include "staticlm.h"
#include "t.h"

#define M(x) SLM_SHARED_DIR "/models/" x

typedef struct collect {
    int ids[1024];
    int n;
} collect;

static int collect_cb(void *ud, int id, const char *piece, int is_prompt) {
    (void)piece;
    collect *c = ud;
    if (is_prompt == 0 && c->n < 1024) c->ids[c->n++] = id;
    return 0;
}

static slm_engine *load(const char *model, slm_options o) {
    o.tokenizer_path = M("tok512.bin");
    slm_engine *e = NULL;
    slm_status s = slm_load(&e, model, &o);
    CHECKF(s == SLM_OK, "load %s: %s", model, slm_last_error(e));
    if (s) {
        slm_free(e);
        return NULL;
    }
    return e;
}

/* golden next ids after the prompt: what greedy decoding must produce */
static int golden_tokens(const char *dir, int idx, int *out, int cap, int *n_prompt, char **prompt) {
    char path[512];
    snprintf(path, sizeof path, SLM_SHARED_DIR "/models/golden/%s/%d.prompt_ids.txt", dir, idx);
    char *p = t_read_file(path, NULL);
    snprintf(path, sizeof path, SLM_SHARED_DIR "/models/golden/%s/%d.next_ids.txt", dir, idx);
    char *nx = t_read_file(path, NULL);
    snprintf(path, sizeof path, SLM_SHARED_DIR "/models/golden/%s/%d.prompt.txt", dir, idx);
    *prompt = t_read_file(path, NULL);
    int np = 0, n = 0;
    for (char *q = p; q && *q;) {
        char *end;
        strtol(q, &end, 10);
        if (end == q) break;
        np++;
        q = end;
    }
    /* next_ids: the prompt's own tokens first, then the generated ones */
    int k = 0;
    for (char *q = nx; q && *q;) {
        char *end;
        long v = strtol(q, &end, 10);
        if (end == q) break;
        if (k++ >= np - 1 && n < cap) out[n++] = (int)v;
        q = end;
    }
    free(p);
    free(nx);
    *n_prompt = np;
    return n;
}

static void check_spec(const char *model, const char *dir, int idx, int steps) {
    int want[512], np = 0;
    char *prompt = NULL;
    int nw = golden_tokens(dir, idx, want, 512, &np, &prompt);
    slm_options o = slm_default_options();
    o.kv_type = SLM_KV_F32; /* the goldens' arithmetic */
    o.draft_path = M("stories260K.bin");
    o.draft_tokenizer_path = M("tok512.bin");
    o.draft_n = 4;
    o.min_response_len = 256;
    slm_engine *e = load(model, o);
    if (e && prompt) {
        collect c = {.n = 0};
        slm_gen_stats st;
        slm_sampling g = {0};
        int k = steps - np + 1;
        CHECK(slm_generate(e, prompt, k, &g, 1, collect_cb, &c, &st) == SLM_OK);
        CHECKF(c.n == k && nw >= k && memcmp(c.ids, want, sizeof(int) * (size_t)k) == 0,
               "%s/%d: speculative tokens differ from the golden (%d vs %d tokens)", dir, idx, c.n, nw);
        CHECKF(st.n_drafted > 0 && st.n_accepted <= st.n_drafted, "drafted %d accepted %d", st.n_drafted,
               st.n_accepted);
        if (!strcmp(model, M("stories260K.bin")))
            CHECKF(st.n_accepted == st.n_drafted, "self-drafting accepted %d of %d", st.n_accepted, st.n_drafted);
    }
    slm_free(e);
    free(prompt);
}

static void test_speculative_matches_golden(void) {
    for (int i = 0; i < 5; i++) check_spec(M("stories260K.bin"), "stories260K", i, 200);
    for (int i = 0; i < 4; i++) check_spec(M("rand288.bin"), "rand288", i, 256);
}

/* Requests sharing a system prompt: the second restores its rows. */
static void test_prefix_cache_requests(void) {
    slm_options o = slm_default_options();
    o.max_prompt_len = 64;
    slm_engine *plain = load(M("stories260K.bin"), o);
    o.prefix_cache_mb = 8;
    slm_engine *cached = load(M("stories260K.bin"), o);
    if (plain && cached) {
        const char *sys = "Once upon a time, there was a little girl named Lily. She loved to play outside. ";
        char a[256], b[256];
        snprintf(a, sizeof a, "%sOne day, she saw a cat.", sys);
        snprintf(b, sizeof b, "%sOne day, she found a big red ball.", sys);
        slm_sampling g = {0};
        slm_gen_stats st;
        collect c1 = {.n = 0}, c2 = {.n = 0};
        CHECK(slm_generate(cached, a, 30, &g, 1, collect_cb, &c1, &st) == SLM_OK);
        CHECK(st.n_cached == 0);
        CHECK(slm_generate(cached, b, 30, &g, 1, collect_cb, &c2, &st) == SLM_OK);
        CHECKF(st.n_cached >= 15, "restored %d tokens", st.n_cached);
        collect r = {.n = 0};
        CHECK(slm_generate(plain, b, 30, &g, 1, collect_cb, &r, &st) == SLM_OK);
        CHECK(r.n == 30 && c2.n == 30 && memcmp(r.ids, c2.ids, sizeof(int) * 30) == 0);
    }
    slm_free(plain);
    slm_free(cached);
}

/* Variants and a separate LM head, chosen by options, give the plain tokens. */
static void test_option_programs(void) {
    slm_options o = slm_default_options();
    o.max_prompt_len = 64;
    o.min_response_len = 160;
    slm_engine *plain = load(M("rand288.bin"), o);
    o.prefill_variants[0] = 4;
    o.prefill_variants[1] = 16;
    o.generate_variants[0] = 48;
    o.generate_variants[1] = 96;
    o.lm_head_separate = 1;
    o.lm_head_threads = 1;
    slm_engine *var = load(M("rand288.bin"), o);
    if (plain && var) {
        slm_info a, b;
        slm_get_info(plain, &a);
        slm_get_info(var, &b);
        CHECK(a.kv_capacity == b.kv_capacity);
        slm_sampling g = {0};
        slm_gen_stats st;
        collect c1 = {.n = 0}, c2 = {.n = 0};
        CHECK(slm_generate(plain, "Lily and Tom", 150, &g, 1, collect_cb, &c1, &st) == SLM_OK);
        CHECK(slm_generate(var, "Lily and Tom", 150, &g, 1, collect_cb, &c2, &st) == SLM_OK);
        CHECK(c1.n == 150 && c2.n == 150 && memcmp(c1.ids, c2.ids, sizeof c1.ids[0] * 150) == 0);
    }
    slm_free(plain);
    slm_free(var);
}

static char *run_cli(char *const argv[], int *status, char **err_out) {
    int fd[2], fe[2];
    if (pipe(fd) || pipe(fe)) return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fe[1], 2);
        close(fd[0]);
        close(fd[1]);
        close(fe[0]);
        close(fe[1]);
        execv(SLM_CLI_PATH, argv);
        _exit(127);
    }
    close(fd[1]);
    close(fe[1]);
    char *bufs[2] = {NULL, NULL};
    int fds[2] = {fd[0], fe[0]};
    for (int k = 0; k < 2; k++) {
        size_t cap = 1 << 16, n = 0;
        bufs[k] = malloc(cap);
        ssize_t r;
        while ((r = read(fds[k], bufs[k] + n, cap - n - 1)) > 0) {
            n += (size_t)r;
            if (cap - n < 2) bufs[k] = realloc(bufs[k], cap *= 2);
        }
        bufs[k][n] = 0;
        close(fds[k]);
    }
    waitpid(pid, status, 0);
    *err_out = bufs[1];
    return bufs[0];
}

/* error: stop with the numbers; truncate: say so, keep going. */
static void test_overflow_policies(void) {
    char *argv[] = {"staticlm", "run", "-m", M("stories260K.bin"), "-z", M("tok512.bin"), "-p", "Once upon a time",
                    "-n", "100", "--temp", "0", "--ignore-eos", "--max-prompt-len", "16", "--min-response-len", "24",
                    "--on-overflow", "error", NULL};
    int status = 0;
    char *err = NULL;
    char *out = run_cli(argv, &status, &err);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    CHECKF(err && strstr(err, "capacity 40"), "stderr: %s", err ? err : "");
    free(out);
    free(err);
    argv[18] = "truncate";
    out = run_cli(argv, &status, &err);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECKF(err && strstr(err, "context full at 40 tokens") && strstr(err, "dropped the oldest"), "stderr: %s",
           err ? err : "");
    CHECKF(err && strstr(err, "decode: 100 tokens"), "stderr: %s", err ? err : "");
    free(out);
    free(err);
}

/* `bench -o jsonl`: llama-bench's keys per test, and the decode figures
 * (bandwidth, limit, read rate, profile) on the tg object. */
static void test_bench_jsonl(void) {
    char *argv[] = {"staticlm", "bench", "-m", M("stories260K.bin"), "-z", M("tok512.bin"), "-p", "16", "-n", "8",
                    "-r", "2", "-t", "1", "-o", "jsonl", "--bw-mib", "16", NULL};
    int status = 0;
    char *err = NULL;
    char *out = run_cli(argv, &status, &err);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "bench: %s", err ? err : "");
    int lines = 0;
    for (const char *p = out; p && *p; p++) lines += *p == '\n';
    CHECKF(lines == 2, "bench printed %d lines", lines);
    static const char *const keys[] = {"\"n_prompt\": 16", "\"n_gen\": 8", "\"avg_ts\": ", "\"stddev_ts\": ",
                                       "\"samples_ts\": [", "\"bandwidth_gbs\": ", "\"pct_of_limit\": ",
                                       "\"read_gbs\": ", "\"profile_mean_ns\": {"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) CHECKF(out && strstr(out, keys[k]), "no %s", keys[k]);
    free(out);
    free(err);
}

int main(void) {
    T_RUN(test_speculative_matches_golden);
    T_RUN(test_prefix_cache_requests);
    T_RUN(test_option_programs);
    T_RUN(test_overflow_policies);
    T_RUN(test_bench_jsonl);
    T_DONE();
}
