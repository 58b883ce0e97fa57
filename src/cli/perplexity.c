/* staticlm perplexity: perplexity of a model over a text, and the KL
 * divergence of a model's next-token distributions from a base model's, the
 * way llama.cpp's llama-perplexity computes them (docs/perplexity.md).
 *
 * Chunking (as llama-perplexity's default mode): the text is tokenized with
 * BOS; it is cut into n_chunk = n_tokens / n_ctx chunks of n_ctx tokens (the
 * tail is dropped; at least 2 * n_ctx tokens are needed). Each chunk runs from
 * an empty KV cache with its first token replaced by BOS (when the vocabulary
 * adds one); only the second half is scored: with first = n_ctx / 2, the
 * logits at positions [first, n_ctx - 1) predict tokens [first + 1, n_ctx).
 * PPL = exp(mean NLL) over all scored tokens; its uncertainty is
 * PPL * sqrt(var(NLL) / (count - 1)).
 *
 * Evaluation uses the public API only: one prefill of the chunk's first
 * first + 1 tokens (its logits are those of position first; prefilled in
 * pieces of -b rows when -b is smaller), then one decode step per position
 * up to n_ctx - 2, each giving the next row of logits.
 *
 * --kl-divergence-base FILE (with -f): also write every scored row's
 * log-probabilities to FILE, in llama-perplexity's own layout, so either tool
 * can read the other's file (little-endian):
 *   "_logits_", uint32 n_ctx, int32 n_vocab, int32 n_chunk,
 *   int32 tokens[n_chunk * n_ctx] (as tokenized, before the BOS replacement),
 *   then per chunk, per scored row (n_ctx - 1 - n_ctx/2 rows):
 *   float scale, float min_log_prob, uint16 q[nv - 4] with
 *   nv = 2 * ((n_vocab + 1) / 2) + 4; log p[i] = scale * q[i] + min_log_prob.
 *   The range kept is [max - 16, max] in logit units (log p below it reads as
 *   the bottom), quantized to 16 bits: a round trip is within scale / 2 <=
 *   1.3e-4 nats of the float log-prob.
 * --kl-divergence-base FILE --kl-divergence: read FILE (tokens and context
 * size come from it; -f is refused, -c must match it; --chunks keeps the
 * first N of its chunks), run this model on the same
 * tokens, and report per chunk and at the end the statistics of
 * llama-perplexity: PPL of both, their ratio, mean KL(base || model) with its
 * uncertainty and percentiles, the probability differences of the right
 * token (delta p), and how often both rank the same token first (Same top p;
 * where the base's 16-bit codes tie for first, the model's top token counts
 * as the same when it is one of them, so a model against its own base scores
 * 100%; llama-perplexity takes the lowest-numbered tied token instead).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "blob/blob.h"
#include "cli/cli.h"
#include "common/common.h"
#include "staticlm.h"
#include "text/bpe.h" /* slm_tok_encode_error */

static void usage(FILE *f) {
    fprintf(f,
            "usage: staticlm perplexity -m MODEL -f TEXT [-c CTX] [-b BATCH] [-t THREADS] [options]\n"
            "       staticlm perplexity -m MODEL -f TEXT --kl-divergence-base FILE   (save the logits)\n"
            "       staticlm perplexity -m MODEL --kl-divergence-base FILE --kl-divergence\n"
            "\n"
            "Perplexity of MODEL over TEXT as llama-perplexity computes it: chunks of CTX\n"
            "tokens, each from an empty cache starting with BOS, the second half of each\n"
            "scored. Prints the running estimate per chunk ([1]x,[2]y,...) and\n"
            "'Final estimate: PPL = X +/- Y'.\n"
            "\n"
            "  -m, --model PATH            model (.gguf, llama2.c .bin, blob, Hugging Face folder)\n"
            "  -z, --tokenizer PATH        llama2.c tokenizer.bin (llama2.c models)\n"
            "  -f, --file PATH             the text\n"
            "  -c, --ctx-size N            tokens per chunk (default 512)\n"
            "  -b, --batch-size N          prefill rows per program call (default: half a chunk;\n"
            "                              a blob runs its own prefill programs: no -b, and -c\n"
            "                              within its KV capacity)\n"
            "  -t, --threads N             worker threads (default: one per CPU)\n"
            "      --kv-type T             KV cache element type: f32 | f16 | q8_0 (default f16)\n"
            "      --weight-type T         quantize the model's F32/F16/BF16 matrices at load: q8_0 |\n"
            "                              q4_0 | q5_0 | q4_k_s | q4_k_m | q5_k_s | q5_k_m | q6_k | iq4_nl |\n"
            "                              iq4_xs (with\n"
            "                              --kl-divergence-base: what that costs)\n"
            "      --chunks N              score at most N chunks (default: all)\n"
            "      --kl-divergence-base F  alone: save the log-probs of the scored tokens to F\n"
            "                              (llama-perplexity's file layout; either tool reads it)\n"
            "      --kl-divergence         with --kl-divergence-base: compare MODEL against the\n"
            "                              saved base (mean KLD, Same top p, PPL ratio, delta p);\n"
            "                              the tokens and -c come from the base file (no -f)\n"
            "      --kernels NAME          scalar | avx2 | avx512 | amx (default: best for this CPU)\n"
            "  -v, --verbose               model and program facts on stderr\n"
            "  -h, --help                  this text\n");
}

typedef struct ppl_args {
    const char *model, *tok, *text, *kernels, *base;
    int n_ctx, n_batch, threads, n_chunks, kld, verbose, kv_type, weight_type;
    int ctx_set; /* -c given (with --kl-divergence it must match the base file's) */
} ppl_args;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- per-row arithmetic ------------------------------------------------ */

/* max logit (and its index), log of sum exp(l - max) */
static float row_lse(const float *l, int n, int *imax) {
    float mx = l[0];
    int im = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > mx) { mx = l[i]; im = i; }
    double s = 0.0;
    for (int i = 0; i < n; i++) s += expf(l[i] - mx);
    if (imax) *imax = im;
    return mx + (float)log(s);
}

/* The row's log-probs quantized to 16 bits into q[nv] (2 floats + nv - 4 codes). */
static void row_quantize(const float *l, int n, int nv, uint16_t *q) {
    float mx = l[0], mn = l[0];
    for (int i = 1; i < n; i++) {
        if (l[i] > mx) mx = l[i];
        if (l[i] < mn) mn = l[i];
    }
    if (mn < mx - 16) mn = mx - 16;
    double s = 0.0;
    for (int i = 0; i < n; i++) s += expf(l[i] - mx);
    const float lse = (float)log(s);
    const float hdr[2] = {(mx - mn) / 65535.f, mn - mx - lse};
    memcpy(q, hdr, sizeof hdr);
    uint16_t *c = q + 4;
    memset(c, 0, (size_t)(nv - 4) * sizeof *c);
    if (hdr[0] > 0) {
        const float inv = 1.0f / hdr[0];
        for (int i = 0; i < n; i++)
            if (l[i] > mn) {
                long v = lrintf(inv * (l[i] - mn));
                c[i] = (uint16_t)(v < 0 ? 0 : v > 65535 ? 65535 : v);
            }
    }
}

/* ---- KL divergence accumulators (llama-perplexity's statistics) -------- */

typedef struct kld_acc {
    double nll, nll2, nll_base, nll_base2, nll_nll_base, kld, kld2, pd, pd2, pd4;
    size_t same_top, count;
    float *kld_v, *pd_v; /* per scored row, for percentiles */
} kld_acc;

static void kld_row(kld_acc *a, const float *l, int n, const uint16_t *q, int tok) {
    int imax;
    const float lse = row_lse(l, n, &imax);
    float hdr[2];
    memcpy(hdr, q, sizeof hdr);
    const uint16_t *c = q + 4;
    const float nll = lse - l[tok];
    const float nll_base = -(hdr[0] * c[tok] + hdr[1]);
    a->nll += nll;
    a->nll2 += (double)nll * nll;
    a->nll_base += nll_base;
    a->nll_base2 += (double)nll_base * nll_base;
    a->nll_nll_base += (double)nll * nll_base;
    double sum = 0.0;
    uint16_t best = 0;
    for (int i = 0; i < n; i++) {
        const float lpb = hdr[0] * c[i] + hdr[1];
        if (c[i] > best) best = c[i];
        if (lpb > -16.f) sum += expf(lpb) * (lpb - (l[i] - lse));
    }
    a->kld += sum;
    a->kld2 += sum * sum;
    /* the model's top token is (one of) the base's top: the 16-bit codes can tie
     * where the float logits did not, and then any of the tied tokens counts */
    a->same_top += c[imax] == best;
    const float pd = expf(-nll) - expf(-nll_base);
    a->pd += pd;
    a->pd2 += (double)pd * pd;
    a->pd4 += (double)pd * pd * pd * pd;
    a->kld_v[a->count] = (float)sum;
    a->pd_v[a->count] = pd;
    a->count++;
}

/* mean and its standard error, as llama-perplexity: 0 error under 11 values */
static void mean_unc(double sum, double sum2, size_t n, double *m, double *u) {
    *m = *u = 0;
    if (n < 1) return;
    *m = sum / n;
    double v = sum2 / n - *m * *m;
    *u = v > 0 && n > 10 ? sqrt(v / (n - 1)) : 0.0;
}

static double covar(double sa, double sb, double sab, size_t n) {
    if (n < 10) return 0.0;
    return (sab / n - (sa / n) * (sb / n)) / (n - 1);
}

/* ---- the base file ------------------------------------------------------ */

typedef struct base_file {
    FILE *f;
    int n_ctx, n_vocab, n_chunk, nv;
    int32_t *tokens; /* [n_chunk * n_ctx] */
} base_file;

static uint64_t base_size(int n_ctx, int n_vocab, int n_chunk) {
    const uint64_t nv = 2 * (((uint64_t)n_vocab + 1) / 2) + 4;
    const uint64_t rows = (uint64_t)n_chunk * (uint64_t)(n_ctx - 1 - n_ctx / 2);
    return 20 + 4 * (uint64_t)n_chunk * (uint64_t)n_ctx + 2 * nv * rows;
}

/* Open and check a base file: header ranges, exact size, token ids. */
static int base_open(base_file *b, const char *path) {
    memset(b, 0, sizeof *b);
    struct stat st;
    if (stat(path, &st) != 0 || !(b->f = fopen(path, "rb"))) {
        fprintf(stderr, "staticlm: %s: cannot open the KL divergence base file\n", path);
        return 0;
    }
    unsigned char h[20];
    if (fread(h, 1, sizeof h, b->f) != sizeof h || memcmp(h, "_logits_", 8) != 0) {
        fprintf(stderr, "staticlm: %s: not a log-probabilities file (no '_logits_' magic and header)\n", path);
        return 0;
    }
    uint32_t ctx;
    int32_t nvoc, nch;
    memcpy(&ctx, h + 8, 4);
    memcpy(&nvoc, h + 12, 4);
    memcpy(&nch, h + 16, 4);
    if (ctx < 4 || ctx > (1u << 20)) {
        fprintf(stderr, "staticlm: %s: header field n_ctx = %u is out of range [4, %d]\n", path, ctx, 1 << 20);
        return 0;
    }
    if (nvoc < 2 || nvoc > (1 << 24)) {
        fprintf(stderr, "staticlm: %s: header field n_vocab = %d is out of range [2, %d]\n", path, nvoc, 1 << 24);
        return 0;
    }
    if (nch < 1 || nch > (1 << 24)) {
        fprintf(stderr, "staticlm: %s: header field n_chunk = %d is out of range [1, %d]\n", path, nch, 1 << 24);
        return 0;
    }
    b->n_ctx = (int)ctx;
    b->n_vocab = nvoc;
    b->n_chunk = nch;
    b->nv = 2 * ((nvoc + 1) / 2) + 4;
    const uint64_t want = base_size(b->n_ctx, nvoc, nch);
    if ((uint64_t)st.st_size != want) {
        fprintf(stderr,
                "staticlm: %s: size %lld bytes, but its header (n_ctx %d, n_vocab %d, n_chunk %d) "
                "makes it %llu bytes: truncated or not a base file\n",
                path, (long long)st.st_size, b->n_ctx, nvoc, nch, (unsigned long long)want);
        return 0;
    }
    const size_t nt = (size_t)nch * (size_t)ctx;
    if (!(b->tokens = slm_calloc(nt, sizeof *b->tokens))) {
        fprintf(stderr, "staticlm: out of memory\n");
        return 0;
    }
    if (fread(b->tokens, sizeof *b->tokens, nt, b->f) != nt) {
        fprintf(stderr, "staticlm: %s: cannot read the %zu tokens\n", path, nt);
        return 0;
    }
    for (size_t i = 0; i < nt; i++)
        if (b->tokens[i] < 0 || b->tokens[i] >= nvoc) {
            fprintf(stderr, "staticlm: %s: token %zu is %d, outside the vocabulary [0, %d)\n", path, i,
                    b->tokens[i], nvoc);
            return 0;
        }
    return 1;
}

static void base_close(base_file *b) {
    if (b->f) fclose(b->f);
    slm_xfree(b->tokens);
    memset(b, 0, sizeof *b);
}

/* ---- evaluation --------------------------------------------------------- */

typedef struct ppl_run {
    slm_engine *e;
    int n_vocab, n_ctx, first, bos, add_bos, nv;
    int32_t *buf;    /* [first + 1] the chunk's prefix with BOS */
    uint16_t *q;     /* [nv] one row of quantized log-probs */
    FILE *save;      /* writing a base file */
    base_file *base; /* reading one */
    kld_acc acc;
    double nll, nll2;
    long count;
} ppl_run;

/* One scored row: logits l predict token tok. */
static int score_row(ppl_run *r, const float *l, int tok) {
    if (r->base) {
        if (fread(r->q, sizeof *r->q, (size_t)r->nv, r->base->f) != (size_t)r->nv) {
            fprintf(stderr, "staticlm: the base file ended early\n");
            return 0;
        }
        kld_row(&r->acc, l, r->n_vocab, r->q, tok);
        return 1;
    }
    const double v = (double)row_lse(l, r->n_vocab, NULL) - l[tok];
    r->nll += v;
    r->nll2 += v * v;
    r->count++;
    if (r->save) {
        row_quantize(l, r->n_vocab, r->nv, r->q);
        if (fwrite(r->q, sizeof *r->q, (size_t)r->nv, r->save) != (size_t)r->nv) {
            fprintf(stderr, "staticlm: cannot write the base file\n");
            return 0;
        }
    }
    return 1;
}

/* Evaluate one chunk of n_ctx tokens from an empty cache, scoring its second half. */
static int eval_chunk(ppl_run *r, const int32_t *t) {
    const float *lg = NULL;
    slm_reset(r->e);
    memcpy(r->buf, t, (size_t)(r->first + 1) * sizeof *t);
    if (r->add_bos) r->buf[0] = r->bos;
    if (slm_prefill(r->e, r->buf, r->first + 1, &lg)) {
        fprintf(stderr, "staticlm: prefill: %s\n", slm_last_error(r->e));
        return 0;
    }
    if (!score_row(r, lg, t[r->first + 1])) return 0;
    for (int p = r->first + 1; p < r->n_ctx - 1; p++) {
        if (slm_decode(r->e, t[p], &lg)) {
            fprintf(stderr, "staticlm: decode at position %d: %s\n", p, slm_last_error(r->e));
            return 0;
        }
        if (!score_row(r, lg, t[p + 1])) return 0;
    }
    return 1;
}

/* ---- the two modes ------------------------------------------------------ */

static void print_eta(double t, int n_chunk) {
    fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.2f minutes\n", t, t * n_chunk / 60.0);
}

static int run_ppl(ppl_run *r, const int32_t *tok, int n_chunk) {
    fprintf(stderr, "perplexity: calculating perplexity over %d chunks, n_ctx=%d, scoring %d tokens per chunk\n",
            n_chunk, r->n_ctx, r->n_ctx - 1 - r->first);
    for (int i = 0; i < n_chunk; i++) {
        const double t0 = now_s();
        if (!eval_chunk(r, tok + (size_t)i * r->n_ctx)) return 0;
        if (i == 0) print_eta(now_s() - t0, n_chunk);
        printf("[%d]%.4f,", i + 1, exp(r->nll / r->count));
        fflush(stdout);
    }
    printf("\n");
    const double nll = r->nll / r->count, ppl = exp(nll);
    double v = r->nll2 / r->count - nll * nll;
    if (v > 0) v = sqrt(v / (r->count - 1));
    else v = 0;
    printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, v * ppl);
    printf("scored tokens: %ld (%d chunks of %d)\n", r->count, n_chunk, r->n_ctx - 1 - r->first);
    return 1;
}

static float pctl(const float *v, size_t n, float frac) {
    if (frac <= 0) return v[0];
    if (frac >= 1) return v[n - 1];
    float p = frac * (float)(n - 1);
    size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static float median(const float *v, size_t n) { return n % 2 ? v[n / 2] : 0.5f * (v[n / 2] + v[n / 2 - 1]); }

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void kld_chunk_line(const kld_acc *a, int chunk) {
    double lp, lpu, lb, lbu, kl, klu, ms, msu;
    mean_unc(a->nll, a->nll2, a->count, &lp, &lpu);
    mean_unc(a->nll_base, a->nll_base2, a->count, &lb, &lbu);
    const double cov = covar(a->nll, a->nll_base, a->nll_nll_base, a->count);
    mean_unc(a->kld, a->kld2, a->count, &kl, &klu);
    mean_unc(a->pd2, a->pd4, a->count, &ms, &msu);
    const double rms = sqrt(ms), rmsu = rms > 0 ? 0.5 / rms * msu : 0;
    const double top = (double)a->same_top / a->count;
    const double topu = a->count > 1 ? sqrt(top * (1 - top) / (a->count - 1)) : 0;
    printf("%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
           chunk, exp(lp), exp(lp) * lpu, lp - lb, sqrt(lpu * lpu + lbu * lbu - 2 * cov), kl, klu, 100 * rms,
           100 * rmsu, 100 * top, 100 * topu);
}

/* Long because it prints llama-perplexity's three summary blocks in order. */
static void kld_summary(kld_acc *a) {
    const size_t n = a->count;
    double lp, lpu, lb, lbu, kl, klu, m, mu;
    mean_unc(a->nll, a->nll2, n, &lp, &lpu);
    mean_unc(a->nll_base, a->nll_base2, n, &lb, &lbu);
    const double cov = covar(a->nll, a->nll_base, a->nll_nll_base, n);
    const double ppl = exp(lp), pplu = ppl * lpu, pb = exp(lb), pbu = pb * lbu;
    printf("====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, pplu);
    printf("Mean PPL(base)                : %10.6f ± %10.6f\n", pb, pbu);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", lpu > 0 && lbu > 0 ? 100.0 * cov / (lpu * lbu) : 100.0);
    const double lr = lp - lb, lru2 = lpu * lpu + lbu * lbu - 2 * cov, lru = lru2 > 0 ? sqrt(lru2) : 0;
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", lr, lru);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", exp(lr), exp(lr) * lru);
    const double du2 = pplu * pplu + pbu * pbu - 2 * ppl * pb * cov;
    printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n\n", ppl - pb, du2 > 0 ? sqrt(du2) : 0);
    qsort(a->kld_v, n, sizeof *a->kld_v, cmp_float);
    qsort(a->pd_v, n, sizeof *a->pd_v, cmp_float);
    mean_unc(a->kld, a->kld2, n, &kl, &klu);
    printf("====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f ± %10.6f\n", kl, klu);
    printf("Maximum KLD: %10.6f\n", a->kld_v[n - 1]);
    static const float kf[] = {0.999f, 0.99f, 0.95f, 0.90f};
    static const char *const kn[] = {"99.9%", "99.0%", "95.0%", "90.0%"};
    for (int i = 0; i < 4; i++) printf("%s   KLD: %10.6f\n", kn[i], pctl(a->kld_v, n, kf[i]));
    printf("Median  KLD: %10.6f\n", median(a->kld_v, n));
    static const float lf[] = {0.10f, 0.05f, 0.01f, 0.001f};
    static const char *const ln[] = {"10.0%", " 5.0%", " 1.0%", " 0.1%"};
    for (int i = 0; i < 4; i++) printf("%s   KLD: %10.6f\n", ln[i], pctl(a->kld_v, n, lf[i]));
    printf("Minimum KLD: %10.6f\n\n", a->kld_v[0]);
    mean_unc(a->pd, a->pd2, n, &m, &mu);
    printf("====== Token probability statistics ======\n");
    printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * m, 100 * mu);
    printf("Maximum Δp: %6.3f%%\n", 100.0 * a->pd_v[n - 1]);
    static const float pf[] = {0.999f, 0.99f, 0.95f, 0.90f, 0.75f};
    static const char *const pn[] = {"99.9%", "99.0%", "95.0%", "90.0%", "75.0%"};
    for (int i = 0; i < 5; i++) printf("%s   Δp: %6.3f%%\n", pn[i], 100.0 * pctl(a->pd_v, n, pf[i]));
    printf("Median  Δp: %6.3f%%\n", 100.0 * median(a->pd_v, n));
    static const float qf[] = {0.25f, 0.10f, 0.05f, 0.01f, 0.001f};
    static const char *const qn[] = {"25.0%", "10.0%", " 5.0%", " 1.0%", " 0.1%"};
    for (int i = 0; i < 5; i++) printf("%s   Δp: %6.3f%%\n", qn[i], 100.0 * pctl(a->pd_v, n, qf[i]));
    printf("Minimum Δp: %6.3f%%\n", 100.0 * a->pd_v[0]);
    mean_unc(a->pd2, a->pd4, n, &m, &mu);
    const double rms = sqrt(m);
    printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * rms, rms > 0 ? 100 * 0.5 / rms * mu : 0.0);
    const double top = (double)a->same_top / n;
    printf("Same top p: %6.3f ± %5.3f %%\n", 100 * top, n > 1 ? 100 * sqrt(top * (1 - top) / (n - 1)) : 0.0);
}

/* The first n_chunk chunks of the base (--chunks), or all. */
static int run_kld(ppl_run *r, base_file *b, int n_chunk) {
    if (n_chunk <= 0 || n_chunk > b->n_chunk) n_chunk = b->n_chunk;
    const size_t rows = (size_t)n_chunk * (size_t)(r->n_ctx - 1 - r->first);
    r->acc.kld_v = slm_calloc(rows, sizeof(float));
    r->acc.pd_v = slm_calloc(rows, sizeof(float));
    if (!r->acc.kld_v || !r->acc.pd_v) {
        fprintf(stderr, "staticlm: out of memory\n");
        return 0;
    }
    r->base = b;
    fprintf(stderr, "kl_divergence: computing over %d chunks, n_ctx=%d\n", n_chunk, r->n_ctx);
    for (int i = 0; i < n_chunk; i++) {
        const double t0 = now_s();
        if (!eval_chunk(r, b->tokens + (size_t)i * r->n_ctx)) return 0;
        if (i == 0) {
            print_eta(now_s() - t0, n_chunk);
            printf("\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence"
                   "              Δp RMS            Same top p\n");
        }
        kld_chunk_line(&r->acc, i + 1);
    }
    printf("\n");
    if (r->acc.count < 100) {
        printf("(%zu scored tokens: too few for the summary statistics, which need 100)\n", r->acc.count);
        return 1;
    }
    kld_summary(&r->acc);
    return 1;
}

/* ---- the command -------------------------------------------------------- */

static int parse_args(ppl_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->n_ctx = 512;
    a->n_chunks = -1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) { usage(stdout); return 0; }
        if (!strcmp(o, "--kl-divergence")) { a->kld = 1; continue; }
        if (!strcmp(o, "-v") || !strcmp(o, "--verbose")) { a->verbose = 1; continue; }
        if (!v) { fprintf(stderr, "staticlm: %s needs a value\n", o); return -1; }
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "-z") || !strcmp(o, "--tokenizer")) a->tok = v;
        else if (!strcmp(o, "-f") || !strcmp(o, "--file")) a->text = v;
        else if (!strcmp(o, "--kl-divergence-base")) a->base = v;
        else if (!strcmp(o, "--kernels")) a->kernels = v;
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) { if (!slm_cli_parse_int(v, o, 4, 1 << 20, &a->n_ctx)) return -1; a->ctx_set = 1; }
        else if (!strcmp(o, "-b") || !strcmp(o, "--batch-size")) { if (!slm_cli_parse_int(v, o, 1, 1 << 20, &a->n_batch)) return -1; }
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) { if (!slm_cli_parse_int(v, o, 0, 1024, &a->threads)) return -1; }
        else if (!strcmp(o, "--kv-type")) { if (!slm_cli_parse_kv_type(v, o, &a->kv_type)) return -1; }
        else if (!strcmp(o, "--weight-type")) { if (!slm_cli_parse_weight_type(v, o, &a->weight_type)) return -1; }
        else if (!strcmp(o, "--chunks")) { if (!slm_cli_parse_int(v, o, 1, 1 << 24, &a->n_chunks)) return -1; }
        else { fprintf(stderr, "staticlm: unknown option '%s' (see staticlm perplexity --help)\n", o); return -1; }
        i++;
    }
    if (a->kld && !a->base) {
        fprintf(stderr, "staticlm: --kl-divergence needs --kl-divergence-base FILE (written by a run without "
                        "--kl-divergence, or by llama-perplexity)\n");
        return -1;
    }
    if (a->kld && a->text) {
        fprintf(stderr, "staticlm: -f: with --kl-divergence the tokens come from the base file %s; leave -f out\n",
                a->base);
        return -1;
    }
    if (!a->kld && !a->text) {
        fprintf(stderr, "staticlm: perplexity needs -f TEXT\n");
        return -1;
    }
    return 1;
}

/* Tokenize the text file with BOS; *n tokens in a slm_malloc'd array. */
static int32_t *tokenize_file(slm_engine *e, const char *path, int *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "staticlm: %s: cannot open the text\n", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = len >= 0 && len < (1L << 30) ? slm_malloc((size_t)len + 1) : NULL;
    if (!text || fread(text, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "staticlm: %s: cannot read the text (%ld bytes)\n", path, len);
        fclose(f);
        slm_xfree(text);
        return NULL;
    }
    fclose(f);
    text[len] = 0;
    int cap = (int)len + 16;
    int32_t *ids = slm_malloc((size_t)cap * sizeof *ids);
    int k = ids ? slm_tokenize(e, text, 1, ids, cap) : -1;
    if (k > cap) {
        slm_xfree(ids);
        cap = k;
        ids = slm_malloc((size_t)cap * sizeof *ids);
        k = ids ? slm_tokenize(e, text, 1, ids, cap) : -1;
    }
    slm_xfree(text);
    if (k < 0) {
        fprintf(stderr, "staticlm: %s: cannot tokenize: %s\n", path, slm_tok_encode_error(k));
        slm_xfree(ids);
        return NULL;
    }
    *n = k;
    return ids;
}

static slm_engine *open_engine(ppl_args *a, int n_ctx) {
    slm_options opt = slm_default_options();
    const int pre = n_ctx / 2 + 1;
    if (!slm_blob_is_elf(a->model)) {
        opt.max_prompt_len = a->n_batch > 0 && a->n_batch < pre ? a->n_batch : pre;
        opt.min_response_len = n_ctx - opt.max_prompt_len;
    } else if (a->n_batch > 0) { /* a blob's prefill programs are fixed; a context must fit its KV (below) */
        fprintf(stderr, "staticlm: -b %d: the blob %s has its prefill programs (compiled with --max-prompt-len); "
                        "leave -b out\n", a->n_batch, a->model);
        return NULL;
    }
    opt.n_threads = a->threads;
    opt.verbose = a->verbose;
    opt.kv_type = a->kv_type;
    opt.weight_type = a->weight_type;
    struct stat st; /* a corpus may be longer than the longest prompt the tokenizer takes by default */
    if (a->text && !a->kld && stat(a->text, &st) == 0 && st.st_size >= (off_t)(8u << 20))
        opt.max_prompt_bytes = (size_t)st.st_size + 1;
    slm_engine *e = slm_cli_open(&a->model, &a->tok, a->kernels, &opt);
    if (e && slm_capacity(e) < n_ctx) {
        slm_info info;
        slm_get_info(e, &info);
        if (slm_blob_is_elf(a->model))
            fprintf(stderr, "staticlm: a context of %d tokens does not fit the blob's KV capacity of %d (-c)\n", n_ctx,
                    slm_capacity(e));
        else
            fprintf(stderr, "staticlm: a context of %d tokens does not fit: the model's context length is %d (-c)\n",
                    n_ctx, info.context_len);
        slm_free(e);
        return NULL;
    }
    return e;
}

/* Long because it wires the two modes: load, tokens, files, then the run. */
static int perplexity_main(ppl_args *a) {
    base_file b;
    memset(&b, 0, sizeof b);
    if (a->kld && !base_open(&b, a->base)) { base_close(&b); return 1; }
    if (a->kld && a->ctx_set && a->n_ctx != b.n_ctx) {
        fprintf(stderr, "staticlm: -c %d: the base file %s was written with a context of %d; leave -c out or give "
                        "%d\n", a->n_ctx, a->base, b.n_ctx, b.n_ctx);
        base_close(&b);
        return 2;
    }
    const int n_ctx = a->kld ? b.n_ctx : a->n_ctx;
    slm_engine *e = open_engine(a, n_ctx);
    if (!e) { base_close(&b); return 1; }
    slm_info info;
    slm_get_info(e, &info);
    ppl_run r;
    memset(&r, 0, sizeof r);
    r.e = e;
    r.n_vocab = info.vocab_size;
    r.n_ctx = n_ctx;
    r.first = n_ctx / 2;
    r.bos = info.bos_id;
    r.nv = 2 * ((r.n_vocab + 1) / 2) + 4;
    int rc = 1, n_tok = 0, n_chunk = 0;
    int32_t *tok = NULL;
    r.buf = slm_malloc((size_t)(r.first + 1) * sizeof *r.buf);
    r.q = slm_malloc((size_t)r.nv * sizeof *r.q);
    if (!r.buf || !r.q) { fprintf(stderr, "staticlm: out of memory\n"); goto done; }
    if (a->kld) {
        if (b.n_vocab != r.n_vocab) {
            fprintf(stderr, "staticlm: %s: vocabulary of %d tokens, the model has %d\n", a->base, b.n_vocab, r.n_vocab);
            goto done;
        }
        int32_t probe[4];
        r.add_bos = slm_tokenize(e, "", 1, probe, 4) >= 1 && probe[0] == r.bos;
        rc = run_kld(&r, &b, a->n_chunks) ? 0 : 1;
        goto done;
    }
    if (!(tok = tokenize_file(e, a->text, &n_tok))) goto done;
    r.add_bos = n_tok > 0 && tok[0] == r.bos;
    fprintf(stderr, "perplexity: %s: %d tokens%s\n", a->text, n_tok, r.add_bos ? " (BOS first)" : "");
    if (n_tok < 2 * n_ctx) {
        fprintf(stderr, "staticlm: you need at least %d tokens to evaluate perplexity with a context of %d; "
                        "%s tokenizes to only %d\n", 2 * n_ctx, n_ctx, a->text, n_tok);
        goto done;
    }
    n_chunk = n_tok / n_ctx;
    if (a->n_chunks > 0 && a->n_chunks < n_chunk) n_chunk = a->n_chunks;
    if (a->base) {
        if (!(r.save = fopen(a->base, "wb"))) {
            fprintf(stderr, "staticlm: %s: cannot create the KL divergence base file\n", a->base);
            goto done;
        }
        uint32_t hdr[3] = {(uint32_t)n_ctx, (uint32_t)r.n_vocab, (uint32_t)n_chunk};
        if (fwrite("_logits_", 1, 8, r.save) != 8 || fwrite(hdr, 4, 3, r.save) != 3 ||
            fwrite(tok, 4, (size_t)n_chunk * n_ctx, r.save) != (size_t)n_chunk * n_ctx) {
            fprintf(stderr, "staticlm: %s: cannot write the KL divergence base file\n", a->base);
            goto done;
        }
        fprintf(stderr, "perplexity: saving the log-probs of the scored tokens to %s\n", a->base);
    }
    rc = run_ppl(&r, tok, n_chunk) ? 0 : 1;
done:
    if (r.save && fclose(r.save) != 0 && rc == 0) {
        fprintf(stderr, "staticlm: %s: cannot write the KL divergence base file\n", a->base);
        rc = 1;
    }
    slm_xfree(tok);
    slm_xfree(r.buf);
    slm_xfree(r.q);
    slm_xfree(r.acc.kld_v);
    slm_xfree(r.acc.pd_v);
    base_close(&b);
    slm_free(e);
    return rc;
}

int slm_cli_perplexity(int argc, char **argv) {
    ppl_args a;
    const int p = parse_args(&a, argc, argv);
    if (p <= 0) return p == 0 ? 0 : 2;
    return perplexity_main(&a);
}
