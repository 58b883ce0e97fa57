/* staticlm bench-features: what the runtime's answers to static shapes
 * save on a given model (issue: variants, prefix cache):
 *   - decode step time with the smallest fitting generate variant vs the
 *     largest program,
 *   - prefill time of a short prompt with prefill variants vs one
 *     max_prompt_len-row program,
 *   - time to first token of a second request sharing a long prefix, with
 *     and without the prefix cache.
 * The model is driven through the public API only; one line per
 * measurement. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "common/common.h"
#include "staticlm.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct bf_args {
    const char *model, *tok;
    int threads, max_prompt_len, min_response_len, short_prompt, prefix, steps, reps;
} bf_args;

static slm_engine *open_engine(const bf_args *a, slm_options o) {
    o.tokenizer_path = a->tok;
    o.n_threads = a->threads;
    o.max_prompt_len = a->max_prompt_len;
    o.min_response_len = a->min_response_len;
    slm_engine *e = NULL;
    if (slm_load(&e, a->model, &o)) {
        fprintf(stderr, "staticlm: %s\n", slm_last_error(e));
        slm_free(e);
        return NULL;
    }
    return e;
}

/* Deterministic ids in [3, vocab) (BOS first). */
static void fill_ids(int32_t *ids, int n, int vocab, unsigned seed) {
    ids[0] = 1;
    for (int i = 1; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        ids[i] = 3 + (int32_t)((seed >> 8) % (unsigned)(vocab - 3));
    }
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Best-of-reps mean decode step (ms) after a prompt of n ids. */
static double decode_step_ms(slm_engine *e, const int32_t *ids, int n, int steps, int reps, int vocab) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        slm_reset(e);
        const float *lg;
        if (slm_prefill(e, ids, n, &lg)) return -1;
        int t = argmax(lg, vocab);
        double t0 = now_ms();
        for (int i = 0; i < steps; i++) {
            if (slm_decode(e, t, &lg)) return -1;
            t = argmax(lg, vocab);
        }
        double ms = (now_ms() - t0) / steps;
        if (ms < best) best = ms;
    }
    return best;
}

static double prefill_ms(slm_engine *e, const int32_t *ids, int n, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        slm_reset(e);
        const float *lg;
        double t0 = now_ms();
        if (slm_prefill(e, ids, n, &lg)) return -1;
        double ms = now_ms() - t0;
        if (ms < best) best = ms;
    }
    return best;
}

static int parse_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 0 || v > (1 << 24)) return 0;
    *out = (int)v;
    return 1;
}

int slm_cli_bench_features(int argc, char **argv) {
    bf_args a = {NULL, NULL, 0, 1024, 128, 20, 400, 16, 3};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: staticlm bench-features -m MODEL [-z TOK] [-t N] [--max-prompt-len L]\n"
                   "       [--min-response-len R] [--short N] [--prefix N] [--steps N] [-r REPS]\n\n"
                   "Measures what the runtime's options save on MODEL:\n"
                   "  decode step: smallest fitting generate variant vs the full-capacity program\n"
                   "  prefill of a --short token prompt (default 20): prefill variants vs one L-row program\n"
                   "  second request sharing a --prefix token prefix (default 400): time to first\n"
                   "  token with and without the prefix cache\n");
            return 0;
        }
        if (!v) {
            fprintf(stderr, "staticlm: %s needs a value\n", o);
            return 2;
        }
        int ok = 1;
        if (!strcmp(o, "-m")) a.model = v;
        else if (!strcmp(o, "-z")) a.tok = v;
        else if (!strcmp(o, "-t")) ok = parse_int(v, &a.threads);
        else if (!strcmp(o, "--max-prompt-len")) ok = parse_int(v, &a.max_prompt_len);
        else if (!strcmp(o, "--min-response-len")) ok = parse_int(v, &a.min_response_len);
        else if (!strcmp(o, "--short")) ok = parse_int(v, &a.short_prompt);
        else if (!strcmp(o, "--prefix")) ok = parse_int(v, &a.prefix);
        else if (!strcmp(o, "--steps")) ok = parse_int(v, &a.steps);
        else if (!strcmp(o, "-r")) ok = parse_int(v, &a.reps);
        else {
            fprintf(stderr, "staticlm: unknown option '%s' (see staticlm bench-features --help)\n", o);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "staticlm: %s: bad value '%s'\n", o, v);
            return 2;
        }
        i++;
    }
    if (!a.model) {
        fprintf(stderr, "staticlm: bench-features needs -m MODEL\n");
        return 2;
    }
    if (a.steps < 1) a.steps = 1;
    if (a.reps < 1) a.reps = 1;
    int rc = 1;
    slm_options base = slm_default_options();
    slm_engine *plain = open_engine(&a, base), *var = NULL, *pc = NULL;
    if (!plain) return 1;
    slm_info info;
    slm_get_info(plain, &info);
    const int V = info.vocab_size, cap = info.kv_capacity, L = info.max_prompt_len;
    int n_short = a.short_prompt < 2 ? 2 : a.short_prompt;
    if (n_short > L) n_short = L;
    int n_prefix = a.prefix;
    if (n_prefix + 40 > cap) n_prefix = cap - 40;
    if (n_prefix < 8) n_prefix = 8;

    slm_options vo = base;
    /* powers of two below max_prompt_len; generate capacities 256, 512 below the capacity */
    int k = 0;
    for (int r = 16; r < L && k < 7; r *= 2) vo.prefill_variants[k++] = r;
    k = 0;
    for (int c = 256; c < cap && k < 7; c *= 2) vo.generate_variants[k++] = c;
    var = open_engine(&a, vo);
    slm_options po = base;
    po.prefix_cache_mb = 4096;
    pc = open_engine(&a, po);
    if (!var || !pc) goto done;

    int32_t *ids = slm_malloc(sizeof(int32_t) * (size_t)(cap + 1));
    if (!ids) goto done;
    fill_ids(ids, cap, V, 7);
    printf("model %s: capacity %d (max_prompt_len %d + min_response_len %d), %d threads\n\n", a.model, cap, L,
           info.min_response_len, a.threads);
    printf("| measurement | without | with | saved |\n| --- | ---: | ---: | ---: |\n");

    /* 1. decode step: the largest program vs the smallest fitting variant */
    double d_big = decode_step_ms(plain, ids, n_short, a.steps, a.reps, V);
    double d_small = decode_step_ms(var, ids, n_short, a.steps, a.reps, V);
    printf("| decode step after a %d-token prompt (ms): generate.%d vs smallest fitting variant | %.2f | %.2f | "
           "%.2fx |\n", n_short, cap, d_big, d_small, d_small > 0 ? d_big / d_small : 0);

    /* 2. prefill of a short prompt: one L-row program vs prefill variants */
    double p_big = prefill_ms(plain, ids, n_short, a.reps);
    double p_small = prefill_ms(var, ids, n_short, a.reps);
    printf("| prefill of a %d-token prompt (ms): prefill.%d vs prefill variants | %.2f | %.2f | %.2fx |\n", n_short,
           L, p_big, p_small, p_small > 0 ? p_big / p_small : 0);

    /* 3. a second request sharing an n_prefix-token prefix */
    int32_t *second = slm_malloc(sizeof(int32_t) * (size_t)(n_prefix + 20));
    if (!second) {
        slm_xfree(ids);
        goto done;
    }
    memcpy(second, ids, sizeof(int32_t) * (size_t)n_prefix);
    fill_ids(second + n_prefix - 1, 21, V, 99); /* a different tail */
    second[n_prefix - 1] = ids[n_prefix - 1];
    double t_plain = 1e30, t_cached = 1e30;
    for (int r = 0; r < a.reps; r++) {
        const float *lg;
        slm_reset(plain);
        slm_prefill(plain, ids, n_prefix + 10, &lg); /* the first request */
        double t0 = now_ms();
        slm_reset(plain);
        slm_prefill(plain, second, n_prefix + 20, &lg);
        argmax(lg, V);
        double t1 = now_ms() - t0;
        if (t1 < t_plain) t_plain = t1;
        slm_reset(pc);
        slm_prefill(pc, ids, n_prefix + 10, &lg);
        t0 = now_ms();
        slm_reset(pc);
        slm_prefill(pc, second, n_prefix + 20, &lg);
        argmax(lg, V);
        t1 = now_ms() - t0;
        if (t1 < t_cached) t_cached = t1;
    }
    printf("| time to first token of a second request sharing %d prompt tokens (ms): prefix cache | %.2f | %.2f | "
           "%.2fx |\n", n_prefix, t_plain, t_cached, t_cached > 0 ? t_plain / t_cached : 0);
    slm_xfree(second);
    slm_xfree(ids);
    rc = 0;
done:
    slm_free(plain);
    slm_free(var);
    slm_free(pc);
    return rc;
}
