/* staticlm perplexity (src/cli/perplexity.c, docs/perplexity.md): the
 * command's PPL over the golden texts equals one computed here from the
 * library's logits, one decode step per token; the chunking rule (count of
 * scored tokens); the base file's layout and its log-probs; KL divergence of
 * a model against its own base is 0 with 100% top-1 agreement; malformed base
 * files and too-short texts are refused with a message. */
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "staticlm.h"
#include "t.h"
#include "run_cmd.h"

#define MODEL T_SHARED("models/stories260K.bin")
#define TOK T_SHARED("models/tok512.bin")
#define NCTX 128

static char g_tmp[256], g_text[320], g_base[320];

/* Run the CLI with args (argv[0] = program path), capture stdout and stderr. */
static int run_cmd(char *const argv[], char **out, char **errs) { return t_run_capture(g_tmp, SLM_CLI_PATH, argv, out, errs); }

/* The five golden texts of stories260K, concatenated (about 1000 tokens). */
static void test_setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/slm_test_ppl.XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL);
    snprintf(g_text, sizeof g_text, "%s/golden.txt", g_tmp);
    snprintf(g_base, sizeof g_base, "%s/base.kld", g_tmp);
    FILE *f = fopen(g_text, "wb");
    CHECK(f != NULL);
    for (int i = 0; f && i < 5; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%d.txt", T_SHARED("models/golden/stories260K"), i);
        size_t n = 0;
        char *s = t_read_file(p, &n);
        CHECK(s != NULL);
        if (s) CHECK(fwrite(s, 1, n, f) == n);
        free(s);
    }
    if (f) fclose(f);
}

/* ---- the reference: decode every token, log-softmax in double ------------ */

typedef struct ref {
    double ppl;
    long count;
    int n_chunk, n_vocab;
    float first_row_lp[4096]; /* log-probs at the first scored row of chunk 0 */
} ref;

static int reference(ref *r) {
    memset(r, 0, sizeof *r);
    slm_options o = slm_default_options();
    o.tokenizer_path = TOK;
    o.max_prompt_len = 16;
    o.min_response_len = NCTX;
    o.n_threads = 1;
    slm_engine *e = NULL;
    if (slm_load(&e, MODEL, &o)) {
        fprintf(stderr, "load: %s\n", slm_last_error(e));
        slm_free(e);
        return 0;
    }
    slm_info info;
    slm_get_info(e, &info);
    r->n_vocab = info.vocab_size;
    char *text = t_read_file(g_text, NULL);
    static int32_t ids[8192];
    int n = text ? slm_tokenize(e, text, 1, ids, 8192) : -1;
    free(text);
    CHECK(n > 2 * NCTX && n <= 8192 && ids[0] == info.bos_id && r->n_vocab <= 4096);
    if (n <= 2 * NCTX || n > 8192 || r->n_vocab > 4096) {
        slm_free(e);
        return 0;
    }
    double nll = 0;
    r->n_chunk = n / NCTX;
    for (int c = 0; c < r->n_chunk; c++) {
        const int32_t *t = ids + (size_t)c * NCTX;
        slm_reset(e);
        for (int p = 0; p < NCTX - 1; p++) {
            const float *lg = NULL;
            if (slm_decode(e, p == 0 ? info.bos_id : t[p], &lg)) {
                fprintf(stderr, "decode: %s\n", slm_last_error(e));
                slm_free(e);
                return 0;
            }
            if (p < NCTX / 2) continue;
            double mx = lg[0], s = 0;
            for (int i = 1; i < r->n_vocab; i++) mx = lg[i] > mx ? lg[i] : mx;
            for (int i = 0; i < r->n_vocab; i++) s += exp(lg[i] - mx);
            const double lse = mx + log(s);
            nll += lse - lg[t[p + 1]];
            r->count++;
            if (c == 0 && p == NCTX / 2)
                for (int i = 0; i < r->n_vocab; i++) r->first_row_lp[i] = (float)(lg[i] - lse);
        }
    }
    r->ppl = exp(nll / r->count);
    slm_free(e);
    return 1;
}

static ref g_ref;

static void test_ppl_matches_reference(void) {
    CHECK(reference(&g_ref));
    /* the chunking rule: every chunk scores n_ctx - 1 - n_ctx / 2 tokens */
    CHECK(g_ref.count == (long)g_ref.n_chunk * (NCTX - 1 - NCTX / 2));
    char *argv[] = {"staticlm", "perplexity", "-m", MODEL, "-z", TOK, "-f", g_text, "-c", "128", "-t", "1",
                    "--kl-divergence-base", g_base, NULL};
    char *out = NULL, *err = NULL;
    CHECKF(run_cmd(argv, &out, &err) == 0, "%s", err ? err : "");
    double ppl = 0, unc = 0;
    long scored = 0;
    int chunks = 0, per = 0;
    const char *fe = out ? strstr(out, "Final estimate: PPL = ") : NULL;
    CHECK(fe && sscanf(fe, "Final estimate: PPL = %lf +/- %lf", &ppl, &unc) == 2);
    const char *sc = out ? strstr(out, "scored tokens: ") : NULL;
    CHECK(sc && sscanf(sc, "scored tokens: %ld (%d chunks of %d)", &scored, &chunks, &per) == 3);
    fprintf(stderr, "  PPL: command %.4f, reference (decode only) %.5f, %ld tokens\n", ppl, g_ref.ppl, scored);
    CHECKF(fabs(ppl - g_ref.ppl) <= 1e-4 * g_ref.ppl + 5e-5, "command %.5f, reference %.5f", ppl, g_ref.ppl);
    CHECK(unc > 0 && unc < ppl);
    CHECK(scored == g_ref.count && chunks == g_ref.n_chunk && per == NCTX - 1 - NCTX / 2);
    /* the running estimate, one per chunk, the last equal to the final one */
    char last[64];
    snprintf(last, sizeof last, "[%d]%.4f,", g_ref.n_chunk, ppl);
    CHECKF(out && strstr(out, "[1]") == out && strstr(out, last), "%s", out ? out : "");
    free(out);
    free(err);
}

/* The base file: llama-perplexity's layout, log-probs within a 16-bit step. */
static void test_base_file_layout(void) {
    size_t n = 0;
    unsigned char *b = (unsigned char *)t_read_file(g_base, &n);
    CHECK(b != NULL);
    if (!b) return;
    uint32_t ctx;
    int32_t nv, nch;
    memcpy(&ctx, b + 8, 4);
    memcpy(&nv, b + 12, 4);
    memcpy(&nch, b + 16, 4);
    CHECK(!memcmp(b, "_logits_", 8) && ctx == NCTX && nv == g_ref.n_vocab && nch == g_ref.n_chunk);
    const size_t row = 2 * (size_t)(2 * ((nv + 1) / 2) + 4);
    const size_t hdr = 20 + 4 * (size_t)nch * ctx;
    CHECK(n == hdr + (size_t)g_ref.count * row);
    int32_t t0;
    memcpy(&t0, b + 20, 4);
    CHECK(t0 == 1); /* the tokens as tokenized: BOS first */
    float sc[2];
    memcpy(sc, b + hdr, 8);
    CHECK(sc[0] > 0 && sc[0] <= 16.0f / 65535 * 1.001f);
    /* every token's log-prob; those below the kept range read as its bottom */
    int kept = 0;
    for (int i = 0; i < nv; i++) {
        uint16_t q;
        memcpy(&q, b + hdr + 8 + 2 * (size_t)i, 2);
        const float lp = sc[0] * q + sc[1], want = g_ref.first_row_lp[i];
        if (want >= sc[1]) {
            kept++;
            CHECKF(fabsf(lp - want) <= sc[0] + 1e-4f, "token %d: file %f, reference %f", i, lp, want);
        } else {
            CHECKF(lp <= sc[1] + sc[0] + 1e-4f, "token %d: file %f, below the range %f", i, lp, sc[1]);
        }
    }
    CHECK(kept >= 2);
    free(b);
}

/* A model against its own base: KL 0, same top token everywhere, ratio 1. */
static void test_kld_self(void) {
    char *argv[] = {"staticlm", "perplexity", "-m", MODEL, "-z", TOK, "--kl-divergence-base", g_base,
                    "--kl-divergence", "-t", "1", NULL};
    char *out = NULL, *err = NULL;
    CHECKF(run_cmd(argv, &out, &err) == 0, "%s", err ? err : "");
    double kl = -1, klu = -1, top = 0, ratio = 0, pq = 0;
    const char *p = out ? strstr(out, "Mean    KLD: ") : NULL;
    CHECK(p && sscanf(p, "Mean    KLD: %lf ± %lf", &kl, &klu) == 2);
    CHECKF(kl >= -1e-6 && kl < 1e-5, "KLD %g", kl);
    p = out ? strstr(out, "Same top p: ") : NULL;
    CHECK(p && sscanf(p, "Same top p: %lf", &top) == 1);
    CHECKF(top == 100.0, "same top %.3f", top);
    p = out ? strstr(out, "Mean PPL(Q)/PPL(base)         : ") : NULL;
    CHECK(p && sscanf(p, "Mean PPL(Q)/PPL(base)         : %lf", &ratio) == 1);
    CHECKF(fabs(ratio - 1) < 1e-4, "ratio %f", ratio);
    p = out ? strstr(out, "Mean PPL(Q)                   : ") : NULL;
    CHECK(p && sscanf(p, "Mean PPL(Q)                   : %lf", &pq) == 1);
    CHECKF(fabs(pq - g_ref.ppl) <= 1e-4 * g_ref.ppl, "PPL(Q) %f, reference %f", pq, g_ref.ppl);
    /* one line per chunk after the header */
    char line[32];
    snprintf(line, sizeof line, "\n%4d    ", g_ref.n_chunk);
    CHECK(out && strstr(out, "Same top p\n") && strstr(out, line));
    free(out);
    free(err);
}

/* Write a damaged copy of the base file and expect a refusal naming the problem. */
static void expect_refused(const char *what, const unsigned char *data, size_t n, const char *msg) {
    char path[400];
    snprintf(path, sizeof path, "%s/bad.kld", g_tmp);
    CHECK(t_write_file(path, data, n));
    char *argv[] = {"staticlm", "perplexity", "-m", MODEL, "-z", TOK, "--kl-divergence-base", path,
                    "--kl-divergence", "-t", "1", NULL};
    char *out = NULL, *err = NULL;
    const int rc = run_cmd(argv, &out, &err);
    CHECKF(rc != 0 && rc != 128 && err && strstr(err, msg), "%s: rc %d, stderr: %s", what, rc, err ? err : "");
    free(out);
    free(err);
}

static void test_malformed_base(void) {
    size_t n = 0;
    unsigned char *b = (unsigned char *)t_read_file(g_base, &n);
    CHECK(b != NULL && n > 100);
    if (!b) return;
    unsigned char *c = calloc(3, n);
    CHECK(c != NULL);
    if (!c) { free(b); return; }
    memcpy(c, b, n);
    c[0] = 'X';
    expect_refused("magic", c, n, "not a log-probabilities file");
    expect_refused("empty", c, 0, "not a log-probabilities file");
    expect_refused("truncated", b, n - 1, "truncated");
    expect_refused("header only", b, 20, "truncated");
    memcpy(c, b, n);
    int32_t v = 1 << 30;
    memcpy(c + 16, &v, 4);
    expect_refused("n_chunk", c, n, "n_chunk");
    memcpy(c, b, n);
    uint32_t u = 2;
    memcpy(c + 8, &u, 4);
    expect_refused("n_ctx", c, n, "n_ctx");
    memcpy(c, b, n);
    v = 9999;
    memcpy(c + 20 + 4 * 5, &v, 4);
    expect_refused("token id", c, n, "outside the vocabulary");
    /* a consistent file of another vocabulary: header and size agree */
    memcpy(c, b, n);
    v = g_ref.n_vocab * 2;
    memcpy(c + 12, &v, 4);
    const size_t hdr = 20 + 4 * (size_t)g_ref.n_chunk * NCTX;
    const size_t n2 = hdr + (size_t)g_ref.count * 2 * (size_t)(2 * ((v + 1) / 2) + 4);
    CHECK(n2 <= 3 * n);
    char msg[64];
    snprintf(msg, sizeof msg, "vocabulary of %d tokens", v);
    expect_refused("vocabulary", c, n2, msg);
    free(c);
    free(b);
}

static void test_refusals(void) {
    char *a1[] = {"staticlm", "perplexity", "-m", MODEL, "-z", TOK, "-f", g_text, "-c", "512", NULL};
    char *out = NULL, *err = NULL;
    CHECK(run_cmd(a1, &out, &err) != 0 && err && strstr(err, "you need at least 1024 tokens"));
    free(out);
    free(err);
    char *a2[] = {"staticlm", "perplexity", "-m", MODEL, "-z", TOK, "--kl-divergence", NULL};
    CHECK(run_cmd(a2, &out, &err) == 2 && err && strstr(err, "--kl-divergence needs --kl-divergence-base"));
    free(out);
    free(err);
}

/* With --kl-divergence the base file gives the tokens and the context: -f
 * is refused, a -c other than the file's too, and --chunks keeps the first
 * N chunks (they were ignored). */
static void test_kld_options(void) {
    char *out = NULL, *err = NULL;
    char *a1[] = {"staticlm", "perplexity", "-m", MODEL, "-z", TOK, "--kl-divergence-base", g_base, "--kl-divergence",
                  "-f", g_text, NULL};
    CHECKF(run_cmd(a1, &out, &err) == 2 && err && strstr(err, "-f: with --kl-divergence"), "%s", err ? err : "");
    free(out);
    free(err);
    char *a2[] = {"staticlm", "perplexity", "-m", MODEL, "-z", TOK, "--kl-divergence-base", g_base, "--kl-divergence",
                  "-c", "64", NULL};
    CHECKF(run_cmd(a2, &out, &err) == 2 && err && strstr(err, "-c 64: the base file") && strstr(err, "context of 128"),
           "%s", err ? err : "");
    free(out);
    free(err);
    char *a3[] = {"staticlm", "perplexity", "-m", MODEL, "-z", TOK, "--kl-divergence-base", g_base, "--kl-divergence",
                  "-c", "128", "--chunks", "1", "-t", "1", NULL};
    CHECKF(run_cmd(a3, &out, &err) == 0 && err && strstr(err, "computing over 1 chunks, n_ctx=128"), "%s",
           err ? err : "");
    CHECKF(g_ref.n_chunk > 1 && out && strstr(out, "\n   1    ") && !strstr(out, "\n   2    "), "%s", out ? out : "");
    free(out);
    free(err);
}

/* A compiled blob: the same PPL as its source (the reference); -b is refused
 * (its prefill programs are fixed) and so is a context past its KV capacity. */
static void test_blob(void) {
    char blob[320], *out = NULL, *err = NULL;
    snprintf(blob, sizeof blob, "%s/s.blob", g_tmp);
    char *c[] = {"staticlm", "compile", "-m", MODEL, "-z", TOK, "--max-prompt-len", "48", "--min-response-len", "100",
                 "-o", blob, NULL};
    CHECKF(run_cmd(c, NULL, &err) == 0, "%s", err ? err : "");
    free(err);
    char *a1[] = {"staticlm", "perplexity", "-m", blob, "-f", g_text, "-c", "128", "-t", "1", NULL};
    CHECKF(run_cmd(a1, &out, &err) == 0, "%s", err ? err : "");
    double ppl = 0;
    const char *fe = out ? strstr(out, "Final estimate: PPL = ") : NULL;
    CHECKF(fe && sscanf(fe, "Final estimate: PPL = %lf", &ppl) == 1 && fabs(ppl - g_ref.ppl) <= 1e-4 * g_ref.ppl + 5e-5,
           "blob PPL %.5f, reference %.5f", ppl, g_ref.ppl);
    free(out);
    free(err);
    char *a2[] = {"staticlm", "perplexity", "-m", blob, "-f", g_text, "-c", "128", "-b", "16", NULL};
    CHECKF(run_cmd(a2, NULL, &err) != 0 && err && strstr(err, "-b 16: the blob"), "%s", err ? err : "");
    free(err);
    char *a3[] = {"staticlm", "perplexity", "-m", blob, "-f", g_text, "-c", "256", NULL};
    CHECKF(run_cmd(a3, NULL, &err) != 0 && err && strstr(err, "the blob's KV capacity of 148"), "%s", err ? err : "");
    free(err);
}

int main(void) {
    T_RUN(test_setup);
    T_RUN(test_ppl_matches_reference);
    T_RUN(test_base_file_layout);
    T_RUN(test_kld_self);
    T_RUN(test_malformed_base);
    T_RUN(test_refusals);
    T_RUN(test_kld_options);
    T_RUN(test_blob);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    T_DONE();
}
