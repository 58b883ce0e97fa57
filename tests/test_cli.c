/* The staticlm command as a new user meets it: every option a command's
 * parser accepts is in its --help, --version says what was built, bench
 * reads a blob's size and parameter count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "staticlm.h"
#include "t.h"
#include "run_cmd.h"

static char g_tmp[256];

static int run_cmd(char *const argv[], char **out, char **errs) { return t_run_capture(g_tmp, SLM_CLI_PATH, argv, out, errs); }

/* The same with stdout and stderr into one file, as on a terminal. */
static int run_cmd_shared(char *const argv[], char **both) {
    char of[300];
    snprintf(of, sizeof of, "%s/cmd.both", g_tmp);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(of, "w", stdout) || dup2(1, 2) < 0) _exit(127);
        execv(SLM_CLI_PATH, argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (both) *both = t_read_file(of, NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* ---- --help lists every option the parser accepts ------------------------ */

/* 1 when opt appears in text as a whole word (not as the start of a longer
 * option: "--draft" inside "--draft-n" does not count). */
static int has_word(const char *text, const char *opt) {
    size_t n = strlen(opt);
    for (const char *p = strstr(text, opt); p; p = strstr(p + 1, opt)) {
        char before = p == text ? ' ' : p[-1], after = p[n];
        int wb = !(before == '-' || (before >= 'a' && before <= 'z'));
        int wa = !(after == '-' || after == '_' || (after >= 'a' && after <= 'z') || (after >= '0' && after <= '9'));
        if (wb && wa) return 1;
    }
    return 0;
}

/* The option literals compared with strcmp in the body of the function
 * whose definition starts with sig in a src/cli file: "-x" / "--xyz" after
 * `strcmp(NAME, `. skip_guard: lines holding it are skipped (the shared
 * run/compile parser guards per-command options with is_compile). Returns
 * the number found; calls check(opt) on each. */
static int for_each_option(const char *file, const char *sig, const char *skip_guard, const char *help,
                           const char *cmd) {
    char path[512];
    snprintf(path, sizeof path, "%s/../src/cli/%s", SLM_TESTS_DIR, file);
    char *src = t_read_file(path, NULL);
    CHECKF(src != NULL, "%s", path);
    if (!src) return 0;
    char *body = strstr(src, sig);
    CHECKF(body != NULL, "%s: no '%s'", file, sig);
    if (!body) { free(src); return 0; }
    char *end = strstr(body, "\n}\n");
    if (end) *end = 0;
    int found = 0;
    for (char *p = strstr(body, "strcmp("); p; p = strstr(p + 1, "strcmp(")) {
        char *comma = strchr(p, ',');
        if (!comma || comma - p > 24 || comma[1] != ' ' || comma[2] != '"' || comma[3] != '-') continue;
        char *q = comma + 3, *qe = strchr(q, '"');
        if (!qe || qe - q > 40) continue;
        char *ls = p;
        while (ls > body && ls[-1] != '\n') ls--;
        char *le = strchr(p, '\n');
        if (skip_guard) {
            size_t gl = strlen(skip_guard);
            int guarded = 0;
            for (char *g = ls; g && g + gl <= (le ? le : g + gl); g++)
                if (!strncmp(g, skip_guard, gl) && (g == ls || g[-1] != '!')) { guarded = 1; break; }
            if (guarded) continue;
        }
        char opt[48];
        snprintf(opt, sizeof opt, "%.*s", (int)(qe - q), q);
        found++;
        CHECKF(has_word(help, opt), "staticlm %s --help does not mention %s (accepted in %s)", cmd, opt, file);
    }
    /* options a shared helper accepts for the command (cli/args.c) */
    const char *tr = strstr(body, "slm_cli_trace_opt(");
    if (tr) {
        const char *ls = tr;
        while (ls > body && ls[-1] != '\n') ls--;
        int off = skip_guard && !strcmp(skip_guard, "!is_compile &&") && strstr(ls, "is_compile ? 0") &&
                  strstr(ls, "is_compile ? 0") < tr; /* run only */
        if (!off) {
            CHECKF(has_word(help, "--trace"), "staticlm %s --help does not mention --trace", cmd);
            CHECKF(has_word(help, "--trace-mb"), "staticlm %s --help does not mention --trace-mb", cmd);
            found += 2;
        }
    }
    free(src);
    return found;
}

static char *help_of(const char *cmd) {
    char *argv[] = {"staticlm", (char *)cmd, "--help", NULL};
    char *out = NULL;
    int rc = run_cmd(argv, &out, NULL);
    CHECKF(rc == 0 && out && out[0], "staticlm %s --help: rc %d", cmd, rc);
    return out ? out : calloc(1, 1);
}

static void test_help_lists_every_option(void) {
    static const struct { const char *cmd, *file, *sig, *skip; int min; } c[] = {
        {"run", "main.c", "static int parse_args(", "is_compile &&", 25},
        {"compile", "main.c", "static int parse_args(", "!is_compile &&", 20},
        {"inspect", "main.c", "static int cmd_inspect(", NULL, 2},
        {"bench-startup", "main.c", "static int cmd_bench_startup(", NULL, 8},
        {"convert", "convert.c", "int slm_cli_convert(", NULL, 2},
        {"synth", "synth.c", "static int parse_args(", NULL, 8},
        {"tokenize", "tokenize.c", "int slm_cli_tokenize(", NULL, 3},
        {"bench", "bench.c", "static int parse_args(", NULL, 8},
        {"bench-features", "bench_features.c", "int slm_cli_bench_features(", NULL, 8},
        {"perplexity", "perplexity.c", "static int parse_args(ppl_args", NULL, 4},
        {"chat", "chat.c", "static int parse_chat(", NULL, 8},
        {"chat", "chat.c", "int slm_cli_common_opt(", NULL, 12},
        {"chat", "chat.c", "static int reasoning_opt(", NULL, 3},
#ifdef SLM_HAVE_SERVE
        {"serve", "serve.c", "slm_server_cfg_init(&cfg);", NULL, 9},
        {"serve", "chat.c", "int slm_cli_common_opt(", NULL, 12},
        {"serve", "chat.c", "static int reasoning_opt(", NULL, 3},
#endif
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *help = help_of(c[i].cmd);
        int n = for_each_option(c[i].file, c[i].sig, c[i].skip, help, c[i].cmd);
        /* the extraction itself must see the parser (not pass on nothing) */
        CHECKF(n >= c[i].min, "%s: %d options found in %s, expected at least %d", c[i].cmd, n, c[i].sig, c[i].min);
        free(help);
    }
    /* the extraction catches a missing option */
    CHECK(!has_word("  --draft-n K\n", "--draft"));
    CHECK(has_word("  --draft MODEL\n", "--draft"));
}

/* ---- --version -------------------------------------------------------------- */

static void test_version(void) {
    char *argv[] = {"staticlm", "--version", NULL};
    char *out = NULL;
    CHECK(run_cmd(argv, &out, NULL) == 0);
    CHECKF(out && !strncmp(out, "staticlm ", 9), "%s", out ? out : "(none)");
    CHECKF(out && strstr(out, "commit "), "%s", out ? out : "(none)");
    CHECKF(out && strstr(out, "kernels: ") && strstr(out, "scalar"), "%s", out ? out : "(none)");
    CHECKF(out && strstr(out, "cpu: "), "%s", out ? out : "(none)");
#ifdef SLM_GIT_COMMIT
    CHECKF(out && strstr(out, SLM_GIT_COMMIT), "%s (expected %s)", out ? out : "(none)", SLM_GIT_COMMIT);
#endif
    free(out);
}

/* ---- bench on a blob ----------------------------------------------------------- */

/* The "| NAME TYPE | SIZE MiB | PARAMS M |" of bench's first table row. */
static int bench_row(const char *model, int blob, char *row, size_t cap) {
    char *argv[] = {"staticlm", "bench", "-m", (char *)model, "-p", "4", "-n", "2", "-r", "1", "--bw-mib", "0",
                    "--no-profile", "-t", "1", "-z", T_SHARED("models/tok512.bin"), NULL};
    if (blob) argv[15] = NULL; /* a blob carries its tokenizer */
    char *out = NULL;
    int rc = run_cmd(argv, &out, NULL);
    const char *p = out ? strstr(out, "MiB |") : NULL;
    if (rc || !p) {
        fprintf(stderr, "bench %s: rc %d\n%s\n", model, rc, out ? out : "");
        free(out);
        return 0;
    }
    const char *s = p;
    while (s > out && s[-1] != '\n') s--;
    s = strchr(s + 1, '|'); /* after the name */
    const char *e = strstr(p + 5, "|");
    snprintf(row, cap, "%.*s", s && e && e > s ? (int)(e - s) : 0, s ? s : "");
    free(out);
    return 1;
}

static void test_bench_blob_size(void) {
    char blob[300];
    snprintf(blob, sizeof blob, "%s/s.blob", g_tmp);
    char *argv[] = {"staticlm", "compile", "-m", T_SHARED("models/stories260K.bin"), "-z", T_SHARED("models/tok512.bin"),
                    "-o", blob, NULL};
    CHECK(run_cmd(argv, NULL, NULL) == 0);
    char a[128] = "", b[128] = "";
    CHECK(bench_row(T_SHARED("models/stories260K.bin"), 0, a, sizeof a));
    CHECK(bench_row(blob, 1, b, sizeof b));
    CHECKF(a[0] && !strcmp(a, b), "source '%s' vs blob '%s'", a, b);
    CHECKF(!strstr(b, "0.00 MiB") && !strstr(b, "0.00 M"), "%s", b);
}

/* ---- -v says when decoding moves to a larger generate variant ------------ */

static void test_variant_notes(void) {
    char *argv[] = {"staticlm", "run", "-m", T_SHARED("models/stories260K.bin"), "-z", T_SHARED("models/tok512.bin"),
                    "--max-prompt-len", "200", "--min-response-len", "20", "--generate-variants", "32,64,128",
                    "-n", "200", "--temp", "0", "--ignore-eos", "-p", "Once upon", "-t", "1", "-v", NULL};
    char *out = NULL, *err = NULL;
    CHECK(run_cmd(argv, &out, &err) == 0);
    /* "Once upon" is 3 tokens with BOS: 3 + 20 rows fit the 32-row variant */
    CHECKF(err && strstr(err, "[generate variant: decoding on capacity 32 of 220]"), "%s", err ? err : "");
    CHECKF(err && strstr(err, "[generate variant: KV full at 32 stored tokens, moved from capacity 32 to 64]"), "%s",
           err ? err : "");
    CHECKF(err && strstr(err, "moved from capacity 64 to 128]"), "%s", err ? err : "");
    CHECKF(err && strstr(err, "[generate variant: KV full at 128 stored tokens, moved from capacity 128 to 220]"),
           "%s", err ? err : "");
    free(out);
    free(err);
    /* without -v: no note */
    argv[sizeof argv / sizeof argv[0] - 2] = NULL;
    CHECK(run_cmd(argv, &out, &err) == 0);
    CHECKF(err && !strstr(err, "generate variant"), "%s", err ? err : "");
    free(out);
    free(err);
}

/* ---- cache mode: the model's hash is remembered by its quick identity ---- */

/* Load in cache mode; the engine's cache note into note. */
static int cache_load(const char *dir, int verify, char *note, size_t cap) {
    slm_options o = slm_default_options();
    o.tokenizer_path = T_SHARED("models/tok512.bin");
    o.cache_dir = dir;
    o.verify_cache = verify;
    o.n_threads = 1;
    slm_engine *e = NULL;
    slm_status s = slm_load(&e, T_SHARED("models/stories260K.bin"), &o);
    snprintf(note, cap, "%s", s ? slm_last_error(e) : slm_cache_note(e));
    slm_free(e);
    return s == SLM_OK;
}

/* The memo record (".slmhash.*") in dir whose size field is bytes. */
static int find_record(const char *dir, unsigned long long bytes, char *path, size_t cap, char *text, size_t tcap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d))) {
        if (strncmp(de->d_name, ".slmhash.", 9)) continue;
        snprintf(path, cap, "%s/%s", dir, de->d_name);
        char *t = t_read_file(path, NULL);
        unsigned long long h, b;
        if (t && sscanf(t, "slmhash 1 %llx %llu", &h, &b) == 2 && b == bytes) {
            snprintf(text, tcap, "%s", t);
            found = 1;
        }
        free(t);
    }
    closedir(d);
    return found;
}

static void test_cache_hash_memo(void) {
    char dir[300], note[2400], first[2400], rec[600], good[128], tampered[128];
    snprintf(dir, sizeof dir, "%s/cache", g_tmp);
    struct stat st;
    CHECK(stat(T_SHARED("models/stories260K.bin"), &st) == 0);
    CHECK(cache_load(dir, 0, note, sizeof note));
    CHECKF(strstr(note, "compiling into"), "%s", note);
    /* the shared model has not changed in the last seconds: its hash is kept */
    CHECK(find_record(dir, (unsigned long long)st.st_size, rec, sizeof rec, good, sizeof good));
    CHECK(cache_load(dir, 0, first, sizeof first));
    CHECKF(strstr(first, "loaded cached blob"), "%s", first);
    /* a record saying another hash is believed: the identity changes, so the
     * start compiles anew (proof that the model was not rehashed) */
    unsigned long long h = 0, b = 0;
    CHECK(sscanf(good, "slmhash 1 %llx %llu", &h, &b) == 2);
    snprintf(tampered, sizeof tampered, "slmhash 1 %016llx %llu\n", h ^ 1ull, b);
    CHECK(t_write_file(rec, tampered, strlen(tampered)));
    CHECK(cache_load(dir, 0, note, sizeof note));
    CHECKF(strstr(note, "no cached blob") && strstr(note, "compiling into"), "%s", note);
    /* --verify-cache rehashes: the first blob again, and the record repaired */
    CHECK(cache_load(dir, 1, note, sizeof note));
    CHECKF(!strcmp(note, first), "%s vs %s", note, first);
    char *now = t_read_file(rec, NULL);
    CHECKF(now && !strcmp(now, good), "%s vs %s", now ? now : "(none)", good);
    free(now);
    /* a damaged record is ignored (the model is hashed) */
    CHECK(t_write_file(rec, "slmhash 1 zz\n", 13));
    CHECK(cache_load(dir, 0, note, sizeof note));
    CHECKF(!strcmp(note, first), "%s vs %s", note, first);
}

/* ---- bench-features compares only what ran ------------------------------ */

static void test_bench_features_rows(void) {
    /* capacity 512, prompt 20 + min_response_len 256 = 276 rows: the 256-row
     * variant does not hold it, so decoding runs on generate.512 both ways */
    char *argv[] = {"staticlm", "bench-features", "-m", T_SHARED("models/stories260K.bin"), "-z",
                    T_SHARED("models/tok512.bin"), "-t", "1", "--max-prompt-len", "256", "--min-response-len", "256",
                    "--prefix", "64", "--steps", "4", "-r", "3", NULL};
    char *out = NULL;
    CHECK(run_cmd(argv, &out, NULL) == 0);
    CHECKF(out && strstr(out, "decode step after a 20-token prompt: no generate variant smaller than the capacity 512"),
           "%s", out ? out : "");
    CHECKF(out && !strstr(out, "vs generate."), "%s", out ? out : "");
    CHECKF(out && strstr(out, "prefill.256 vs prefill.32 | "), "%s", out ? out : "");
    CHECKF(out && strstr(out, "median (min-max)"), "%s", out ? out : "");
    free(out);
    /* the defaults (384 + 128): the 256-row variant holds 20 + 128 rows */
    char *argv2[] = {"staticlm", "bench-features", "-m", T_SHARED("models/stories260K.bin"), "-z",
                     T_SHARED("models/tok512.bin"), "-t", "1", "--prefix", "64", "--steps", "4", "-r", "3", NULL};
    CHECK(run_cmd(argv2, &out, NULL) == 0);
    CHECKF(out && strstr(out, "generate.512 vs generate.256 | "), "%s", out ? out : "");
    free(out);
}

/* ---- run: the text ends its line before the timings ---------------------- */

static void test_run_text_then_timings(void) {
    char *argv[] = {"staticlm", "run", "-m", T_SHARED("models/stories260K.bin"), "-z", T_SHARED("models/tok512.bin"),
                    "-n", "12", "--temp", "0", "-p", "Once upon a time", "-t", "1", NULL};
    char *both = NULL;
    CHECK(run_cmd_shared(argv, &both) == 0);
    const char *p = both ? strstr(both, "prefill: ") : NULL;
    CHECKF(p && p > both && p[-1] == '\n', "%s", both ? both : "");
    CHECKF(both && !strncmp(both, "Once upon a time", 16), "%s", both ? both : "");
    free(both);
}

/* ---- run: capacity, overflow, prefix cache -------------------------------- */

/* run stories260K with extra options (NULL-terminated, at most 12); stderr into *err. */
static int run_story(const char *const *extra, char **err) {
    char *argv[32] = {"staticlm", "run", "-m", T_SHARED("models/stories260K.bin"), "-z", T_SHARED("models/tok512.bin"),
                      "--temp", "0", "--ignore-eos", "-t", "1", "-p", "Once upon a time"};
    int n = 13;
    for (int i = 0; extra[i] && n < 30; i++) argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    char *out = NULL;
    int rc = run_cmd(argv, &out, err);
    free(out);
    return rc;
}

static void test_run_capacity_messages(void) {
    char *err = NULL;
    /* at the context length: no option raises the capacity */
    const char *a[] = {"--min-response-len", "2000", "-n", "600", NULL};
    CHECK(run_story(a, &err) == 1);
    CHECKF(err && strstr(err, "context length 512 bounds the KV capacity: max_prompt_len 512 + min_response_len 0"),
           "%s", err ? err : "");
    CHECKF(err && strstr(err, "the model's context length 512 is reached and no option raises it"), "%s",
           err ? err : "");
    CHECKF(err && !strstr(err, "raise --min-response-len"), "%s", err ? err : "");
    free(err);
    /* below it: raising --min-response-len helps, by up to 480 rows */
    const char *b[] = {"--max-prompt-len", "16", "--min-response-len", "16", "-n", "100", NULL};
    CHECK(run_story(b, &err) == 1);
    CHECKF(err && strstr(err, "raise --min-response-len (up to 480 more rows fit the model's context length 512)"),
           "%s", err ? err : "");
    CHECKF(err && !strstr(err, "bounds the KV capacity"), "%s", err ? err : "");
    free(err);
}

static void test_run_truncate_no_chunking(void) {
    char *err = NULL;
    /* capacity 26: each truncation keeps at most the 6 rows one prefill call holds */
    const char *a[] = {"--max-prompt-len", "6", "--min-response-len", "20", "--no-chunking", "--on-overflow",
                       "truncate", "-n", "80", NULL};
    CHECK(run_story(a, &err) == 0);
    CHECKF(err && !strstr(err, "exceeds max_prompt_len"), "%s", err ? err : "");
    CHECKF(err && strstr(err, "overflow: context truncated") && strstr(err, "decode: 80 tokens"), "%s",
           err ? err : "");
    free(err);
}

static void test_run_prefix_cache_note(void) {
    char *err = NULL;
    const char *a[] = {"--prefix-cache-mb", "8", "-n", "4", NULL};
    CHECK(run_story(a, &err) == 0);
    CHECKF(err && strstr(err, "--prefix-cache-mb: one run serves one prompt"), "%s", err ? err : "");
    free(err);
}

/* ---- an option accepted and then ignored is refused (exit 2, named) ------ */

static void test_ignored_options_refused(void) {
    char blob[300], gguf[300], trace[300], text[300];
    snprintf(blob, sizeof blob, "%s/r.blob", g_tmp);
    snprintf(gguf, sizeof gguf, "%s/r.gguf", g_tmp);
    snprintf(trace, sizeof trace, "%s/r.json", g_tmp);
    snprintf(text, sizeof text, "%s/r.txt", g_tmp);
    FILE *f = fopen(text, "w");
    if (f) fputs("hello", f), fclose(f);
    char *mk[] = {"staticlm", "compile", "-m", T_SHARED("models/stories260K.bin"), "-z", T_SHARED("models/tok512.bin"),
                  "-o", blob, NULL};
    CHECK(run_cmd(mk, NULL, NULL) == 0);
    char *const M = T_SHARED("models/stories260K.bin"), *const Z = T_SHARED("models/tok512.bin");
    static const int N = 16;
    struct { char *argv[16]; const char *says; } c[] = {
        /* compile: how the programs run is not in them */
        {{"compile", "-m", M, "-z", Z, "-t", "2"}, "-t is an option of run"},
        {{"compile", "-m", M, "-z", Z, "--schedule", "counted"}, "--schedule is an option of run"},
        {{"compile", "-m", M, "-z", Z, "--kernels", "scalar"}, "--kernels is an option of run"},
        {{"compile", "-m", M, "-z", Z, "--on-overflow", "truncate"}, "--on-overflow is an option of run"},
        {{"compile", "-m", M, "-z", Z, "--no-chunking"}, "--no-chunking is an option of run"},
        {{"compile", "-m", M, "-z", Z, "--prefix-cache-mb", "8"}, "--prefix-cache-mb is an option of run"},
        /* run: the cache options without a cache */
        {{"run", "-m", M, "-z", Z, "-n", "1", "--verify-cache"}, "--verify-cache checks the blob cached in --cache-dir"},
        {{"run", "-m", blob, "-n", "1", "--cache-dir", g_tmp}, "is a compiled blob already"},
        /* tokenize: one text */
        {{"tokenize", "-m", M, "-z", Z, "-p", "hi", "-f", text}, "-p and -f both give the text"},
        /* simulate: each mode's own options */
        {{"simulate", "-m", M, "--sweep", "max_prompt_len", "--prompt-lens", "10", "--gen", "4"}, "--gen: --sweep"},
        {{"simulate", "-m", M, "--sweep", "max_prompt_len", "--prompt-lens", "10", "--trace", trace}, "--trace: --sweep"},
        {{"simulate", "-m", M, "--prompt-lens", "10,20"}, "--prompt-lens is read by --sweep"},
        {{"simulate", "-m", M, "--trace-steps", "2"}, "--trace-steps: the decode steps of the --trace FILE"},
        /* synth: a family's part on another family */
        {{"synth", "--shape", "custom", "--arch", "llama", "--sliding-window", "8", "-o", gguf}, "--sliding-window: only for"},
        {{"synth", "--shape", "custom", "--arch", "qwen3", "--nextn", "1", "-o", gguf}, "--nextn: only for"},
        {{"synth", "--shape", "custom", "--arch", "llama", "--qk-norm", "-o", gguf}, "--qk-norm: only for glm4moe"},
        {{"synth", "--shape", "custom", "--arch", "qwen3", "--kv-shared", "1", "-o", gguf}, "--kv-shared: only for gemma4"},
        {{"synth", "--shape", "custom", "--arch", "qwen3", "--expert-ffn", "32", "-o", gguf}, "--expert-ffn: qwen3 has no experts"},
        {{"synth", "--shape", "gemma-4-e2b", "--dim", "64", "--heads", "2", "--layers", "6", "--kv-shared", "6", "-o", gguf},
         "--kv-shared 6: at most"},
        /* bench-features: values it used to move */
        {{"bench-features", "-m", M, "-z", Z, "-r", "0"}, "-r expects an integer in [1, 64]"},
        {{"bench-features", "-m", M, "-z", Z, "--steps", "0"}, "--steps expects an integer in [1,"},
        /* trace: an empty or unbounded window */
        {{"trace", trace, "--to", "0"}, "--to 0: the window ends after --from"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *argv[18] = {"staticlm"};
        for (int k = 0; k < N && c[i].argv[k]; k++) argv[k + 1] = c[i].argv[k];
        char *out = NULL, *err = NULL;
        const int rc = run_cmd(argv, &out, &err);
        CHECKF(rc == 2 && err && strstr(err, c[i].says), "staticlm %s %s ... %s: rc %d, '%s' (want 2, '%s')",
               c[i].argv[0], c[i].argv[1], c[i].argv[5] ? c[i].argv[5] : "", rc, err ? err : "", c[i].says);
        free(out);
        free(err);
    }
    /* compile's help no longer offers what it refuses */
    char *help = help_of("compile");
    CHECKF(!strstr(help, "  -t, --threads") && !strstr(help, "  --schedule S") && strstr(help, "--tile-kb"), "%s", help);
    free(help);
}

/* chat --bench: its greedy 64-token first reply gives way to --temp and -n */
static void test_chat_bench_options(void) {
    char *argv[] = {"staticlm", "chat", "-m", T_SHARED("models/stories260K.bin"), "-z", T_SHARED("models/tok512.bin"),
                    "-t", "1", "--bench", NULL, NULL, NULL, NULL, NULL};
    char *out = NULL;
    CHECK(run_cmd(argv, &out, NULL) == 0);
    CHECKF(out && strstr(out, "+ 64 generated tokens (greedy)"), "%s", out ? out : "");
    free(out);
    argv[9] = "--temp", argv[10] = "0.7", argv[11] = "-n", argv[12] = "20";
    CHECK(run_cmd(argv, &out, NULL) == 0);
    CHECKF(out && strstr(out, "+ 20 generated tokens (temperature 0.7)"), "%s", out ? out : "");
    free(out);
    /* -n 256 is taken as given (it was read as "not given" and made 64) */
    argv[9] = "-n", argv[10] = "256", argv[11] = NULL;
    char *err = NULL;
    CHECK(run_cmd(argv, &out, &err) == 1);
    CHECKF(err && strstr(err, "464 tokens stored"), "%s", err ? err : "");
    free(out);
    free(err);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/slm_test_cli.XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    T_RUN(test_help_lists_every_option);
    T_RUN(test_version);
    T_RUN(test_bench_blob_size);
    T_RUN(test_variant_notes);
    T_RUN(test_cache_hash_memo);
    T_RUN(test_bench_features_rows);
    T_RUN(test_run_text_then_timings);
    T_RUN(test_run_capacity_messages);
    T_RUN(test_run_truncate_no_chunking);
    T_RUN(test_run_prefix_cache_note);
    T_RUN(test_ignored_options_refused);
    T_RUN(test_chat_bench_options);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", g_tmp);
    T_DONE();
}
