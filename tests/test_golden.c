/* End to end against llama2.c's run.c goldens (../shared/models/golden):
 * exact text from the CLI, logits from the static programs, and the same
 * tokens whatever max_prompt_len pads to. The goldens are f32 arithmetic:
 * every run here asks for an f32 KV cache (the default is f16). */
#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "staticlm.h"
#include "t.h"

typedef struct golden_set {
    const char *dir;   /* under models/golden */
    const char *model; /* under models */
    int steps;
    int count;
} golden_set;

static const golden_set k_sets[] = {
    {"stories260K", "stories260K.bin", 200, 5},
    {"rand288", "rand288.bin", 256, 4},
};

static int count_ids(const char *s) {
    int n = 0;
    for (const char *p = s; *p;) {
        while (*p == ' ' || *p == '\n') p++;
        if (!*p) break;
        n++;
        while (*p && *p != ' ' && *p != '\n') p++;
    }
    return n;
}

static int parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    char *end;
    for (const char *p = s; *p && n < cap;) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n++] = (int32_t)v;
        p = end;
    }
    return n;
}

/* Run the CLI with argv, capture stdout. Returns malloc'd output or NULL. */
static char *run_cli(char *const argv[], size_t *len, int *status) {
    int fd[2];
    if (pipe(fd)) return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (!freopen("/dev/null", "w", stderr)) _exit(127);
        execv(SLM_CLI_PATH, argv);
        _exit(127);
    }
    close(fd[1]);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd[0], buf + n, cap - n - 1)) > 0) {
        n += (size_t)r;
        if (cap - n < 2) buf = realloc(buf, cap *= 2);
    }
    close(fd[0]);
    waitpid(pid, status, 0);
    buf[n] = 0;
    *len = n;
    return buf;
}

static void check_cli_text(const golden_set *gs, int idx, const char *mpl) {
    char path[512], model[512], tok[512], nbuf[32];
    snprintf(path, sizeof path, SLM_SHARED_DIR "/models/golden/%s/%d.prompt.txt", gs->dir, idx);
    char *prompt = t_read_file(path, NULL);
    snprintf(path, sizeof path, SLM_SHARED_DIR "/models/golden/%s/%d.prompt_ids.txt", gs->dir, idx);
    char *pids = t_read_file(path, NULL);
    snprintf(path, sizeof path, SLM_SHARED_DIR "/models/golden/%s/%d.txt", gs->dir, idx);
    size_t want_len = 0;
    char *want = t_read_file(path, &want_len);
    CHECKF(prompt && pids && want, "missing golden files for %s/%d", gs->dir, idx);
    if (!prompt || !pids || !want) goto done;
    snprintf(model, sizeof model, SLM_SHARED_DIR "/models/%s", gs->model);
    snprintf(tok, sizeof tok, SLM_SHARED_DIR "/models/tok512.bin");
    snprintf(nbuf, sizeof nbuf, "%d", gs->steps - count_ids(pids) + 1);
    char *argv[20] = {"staticlm", "run", "-m", model, "-z", tok, "-p", prompt, "-n", nbuf, "--temp", "0", "--ignore-eos",
                      "--kv-type", "f32", NULL};
    if (mpl) {
        argv[15] = "--max-prompt-len";
        argv[16] = (char *)mpl;
        argv[17] = "--min-response-len";
        argv[18] = "256";
        argv[19] = NULL;
    }
    size_t got_len = 0;
    int status = 0;
    char *got = run_cli(argv, &got_len, &status);
    CHECKF(got && WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s/%d: CLI failed (status %d)", gs->dir, idx, status);
    if (got) {
        int same = got_len == want_len && memcmp(got, want, want_len) == 0;
        CHECKF(same, "%s/%d (max-prompt-len %s): output differs\n--- want (%zu bytes)\n%s\n--- got (%zu bytes)\n%s",
               gs->dir, idx, mpl ? mpl : "default", want_len, want, got_len, got);
    }
    free(got);
done:
    free(prompt);
    free(pids);
    free(want);
}

static void test_cli_golden_text(void) {
    for (size_t s = 0; s < sizeof k_sets / sizeof k_sets[0]; s++)
        for (int i = 0; i < k_sets[s].count; i++) check_cli_text(&k_sets[s], i, NULL);
}

/* Padding never changes results: 8 rows (prompts longer than that run as
 * chunks), 64, 1024 (clamped to the context length). */
static void test_cli_padding_invariance(void) {
    static const char *const lens[] = {"8", "64", "1024"};
    for (size_t s = 0; s < sizeof k_sets / sizeof k_sets[0]; s++)
        for (int i = 0; i < k_sets[s].count; i++)
            for (int l = 0; l < 3; l++) check_cli_text(&k_sets[s], i, lens[l]);
}

/* With --no-chunking a prompt longer than the prefill program is refused
 * with a message, never cut. */
static void test_cli_no_chunking_refuses(void) {
    char *argv[] = {"staticlm", "run", "-m", SLM_SHARED_DIR "/models/stories260K.bin", "-z",
                    SLM_SHARED_DIR "/models/tok512.bin", "-p", "One day, a little girl named Lily", "-n", "5",
                    "--temp", "0", "--max-prompt-len", "4", "--no-chunking", NULL};
    size_t len = 0;
    int status = 0;
    char *got = run_cli(argv, &len, &status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    CHECKF(got && strcmp(got, "\n") == 0, "refused prompt printed '%s'", got ? got : "");
    free(got);
}

/* max |a - b| relative to max |b| over one row */
static double row_rel_err(const float *a, const float *b, int n) {
    double maxd = 0, maxb = 1e-6;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > maxd || isnan(d)) maxd = isnan(d) ? INFINITY : d;
        if (fabs(b[i]) > maxb) maxb = fabs(b[i]);
    }
    return maxd / maxb;
}

static slm_engine *load(const char *model, int mpl, int mrl) {
    slm_options o = slm_default_options();
    o.tokenizer_path = SLM_SHARED_DIR "/models/tok512.bin";
    o.kv_type = SLM_KV_F32;
    o.max_prompt_len = mpl;
    o.min_response_len = mrl;
    slm_engine *e = NULL;
    slm_status s = slm_load(&e, model, &o);
    CHECKF(s == SLM_OK, "load %s: %s", model, slm_last_error(e));
    if (s) {
        slm_free(e);
        return NULL;
    }
    return e;
}

/* Feed prompt (prefill) then next ids one by one (decode); compare every
 * row of logits the golden file has from the prompt's last position on. */
static void check_logits(const char *model, const char *ids_path, const char *next_path, const char *logits_path,
                         int prefill_n, int mpl) {
    size_t lbytes = 0;
    char *idtxt = t_read_file(ids_path, NULL);
    char *nexttxt = next_path ? t_read_file(next_path, NULL) : NULL;
    float *gold = (float *)t_read_file(logits_path, &lbytes);
    CHECKF(idtxt && gold, "missing %s / %s", ids_path, logits_path);
    if (!idtxt || !gold) goto done;
    int32_t seq[1024];
    int n = parse_ids(idtxt, seq, 1024);
    if (nexttxt) { /* sequence = BOS + next ids */
        int32_t nx[1024];
        int m = parse_ids(nexttxt, nx, 1024);
        n = 1;
        for (int i = 0; i < m && n < 1024; i++) seq[n++] = nx[i];
    }
    const int V = 512;
    int rows = (int)(lbytes / (V * sizeof(float)));
    slm_engine *e = load(model, mpl, 512);
    if (!e) goto done;
    if (prefill_n > rows) prefill_n = rows;
    const float *lg = NULL;
    slm_status s = slm_prefill(e, seq, prefill_n, &lg);
    CHECKF(s == SLM_OK, "prefill: %s", slm_last_error(e));
    double worst = 0;
    int worst_row = -1;
    for (int r = prefill_n - 1; r < rows && s == SLM_OK; r++) {
        if (r > prefill_n - 1) {
            s = slm_decode(e, seq[r], &lg);
            CHECKF(s == SLM_OK, "decode at %d: %s", r, slm_last_error(e));
            if (s) break;
        }
        double err = row_rel_err(lg, gold + (size_t)r * V, V);
        if (err > worst) { worst = err; worst_row = r; }
    }
    CHECKF(worst <= 1e-4, "%s: logits rel err %.3g at row %d (prefill %d, mpl %d)", logits_path, worst, worst_row,
           prefill_n, mpl);
    slm_free(e);
done:
    free(idtxt);
    free(nexttxt);
    free(gold);
}

static void test_logits_golden(void) {
    static const struct { const char *dir, *model; int idx; } files[] = {
        {"stories260K", "stories260K.bin", 0}, {"stories260K", "stories260K.bin", 2}, {"rand288", "rand288.bin", 0}};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char model[512], ids[512], next[512], lg[512], pids[512];
        snprintf(model, sizeof model, SLM_SHARED_DIR "/models/%s", files[f].model);
        snprintf(ids, sizeof ids, SLM_SHARED_DIR "/models/golden/%s/%d.prompt_ids.txt", files[f].dir, files[f].idx);
        snprintf(next, sizeof next, SLM_SHARED_DIR "/models/golden/%s/%d.next_ids.txt", files[f].dir, files[f].idx);
        snprintf(lg, sizeof lg, SLM_SHARED_DIR "/models/golden/%s/%d.logits.f32", files[f].dir, files[f].idx);
        snprintf(pids, sizeof pids, "%s", ids);
        char *p = t_read_file(pids, NULL);
        int np = p ? count_ids(p) : 1;
        free(p);
        /* whole prompt in one prefill, then decode; and with small prefill programs */
        check_logits(model, ids, next, lg, np, 64);
        check_logits(model, ids, next, lg, 1, 8);
    }
    /* rand288's 132-token sequence: decode every row, and prefill all 132 at once */
    check_logits(SLM_SHARED_DIR "/models/rand288.bin", SLM_SHARED_DIR "/models/golden/rand288/sequence.ids.txt", NULL,
                 SLM_SHARED_DIR "/models/golden/rand288/sequence.logits.f32", 1, 8);
    check_logits(SLM_SHARED_DIR "/models/rand288.bin", SLM_SHARED_DIR "/models/golden/rand288/sequence.ids.txt", NULL,
                 SLM_SHARED_DIR "/models/golden/rand288/sequence.logits.f32", 132, 132);
    check_logits(SLM_SHARED_DIR "/models/rand288.bin", SLM_SHARED_DIR "/models/golden/rand288/sequence.ids.txt", NULL,
                 SLM_SHARED_DIR "/models/golden/rand288/sequence.logits.f32", 77, 100);
}

int main(void) {
    T_RUN(test_logits_golden);
    T_RUN(test_cli_golden_text);
    T_RUN(test_cli_padding_invariance);
    T_RUN(test_cli_no_chunking_refuses);
    T_DONE();
}
