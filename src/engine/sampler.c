/* Sampling: greedy, temperature, top-k, top-p, min-p, with run.c's generator
 * and run.c's top-p algorithm so seeded runs match llama2.c; logit biases and
 * repetition penalties before them (slm_sample_adjust). Allocates nothing:
 * the caller passes scratch of slm_sample_scratch_size(n) bytes. */
#include <math.h>
#include <string.h>

#include "common/common.h"
#include "common/trace.h"
#include "engine/engine_internal.h"

typedef struct prob_index {
    float prob;
    int index;
} prob_index;

/* xorshift64*, as run.c */
static uint32_t random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

static float random_f32(uint64_t *state) { return (float)(random_u32(state) >> 8) / 16777216.0f; }

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void softmax(float *x, int n) {
    float maxv = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > maxv) maxv = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - maxv);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

/* Descending by prob; ties keep the lower index first (a total order, so
 * the result does not depend on the sort algorithm). */
static int before(const prob_index *a, const prob_index *b) {
    return a->prob > b->prob || (a->prob == b->prob && a->index < b->index);
}

/* In-place heapsort (no allocation, unlike some qsort implementations). */
static void sift(prob_index *a, int start, int n) {
    int root = start;
    for (;;) {
        int child = 2 * root + 1;
        if (child >= n) return;
        /* min-heap on `before` puts the "smallest" (last in order) on top */
        if (child + 1 < n && before(&a[child], &a[child + 1])) child++;
        if (before(&a[root], &a[child])) {
            prob_index t = a[root];
            a[root] = a[child];
            a[child] = t;
            root = child;
        } else {
            return;
        }
    }
}

static void sort_desc(prob_index *a, int n) {
    for (int i = n / 2 - 1; i >= 0; i--) sift(a, i, n);
    for (int end = n - 1; end > 0; end--) {
        prob_index t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift(a, 0, end);
    }
}

static int sample_mult(const float *p, int n, float coin) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += p[i];
        if (coin < cdf) return i;
    }
    return n - 1;
}

/* run.c's top-p: drop tokens below (1 - topp) / (n - 1), sort, cut where
 * the cumulative probability first exceeds topp, sample within. */
static int sample_topp(const float *p, int n, float topp, prob_index *pi, float coin) {
    int n0 = 0;
    const float cutoff = (1.0f - topp) / (float)(n - 1);
    for (int i = 0; i < n; i++)
        if (p[i] >= cutoff) pi[n0++] = (prob_index){p[i], i};
    if (n0 == 0) return argmax(p, n);
    sort_desc(pi, n0);
    float cum = 0.0f;
    int last = n0 - 1;
    for (int i = 0; i < n0; i++) {
        cum += pi[i].prob;
        if (cum > topp) {
            last = i;
            break;
        }
    }
    float r = coin * cum, cdf = 0.0f;
    for (int i = 0; i <= last; i++) {
        cdf += pi[i].prob;
        if (r < cdf) return pi[i].index;
    }
    return pi[last].index;
}

size_t slm_sample_scratch_size(int n) { return (size_t)(n > 0 ? n : 1) * sizeof(prob_index); }

int slm_sample_adjusts(const slm_sampling *s) {
    const int rep = s->repeat_penalty > 0.0f && s->repeat_penalty != 1.0f;
    const int pen = (rep || s->presence_penalty != 0.0f || s->frequency_penalty != 0.0f) && s->repeat_last_n != 0;
    return pen || s->n_logit_bias > 0;
}

/* The token at place i of hist[0..nh) followed by more[0..nm). */
static int32_t hist_at(const int32_t *hist, int nh, const int32_t *more, int i) {
    return i < nh ? hist[i] : more[i - nh];
}

/* llama.cpp's order: the biases, then the penalties, each distinct token of
 * the window once with its count (counted in scratch, zeroed each call). */
void slm_sample_adjust(float *logits, int n, const slm_sampling *s, const int32_t *hist, int n_hist,
                       const int32_t *more, int n_more, void *scratch) {
    if (n <= 0 || !slm_sample_adjusts(s)) return;
    const int nb = s->n_logit_bias < SLM_MAX_LOGIT_BIAS ? s->n_logit_bias : SLM_MAX_LOGIT_BIAS;
    for (int i = 0; i < nb; i++) {
        const slm_logit_bias *b = &s->logit_bias[i];
        if (b->token >= 0 && b->token < n) logits[b->token] += b->bias;
    }
    if (!hist) n_hist = 0;
    if (!more) n_more = 0;
    const int total = n_hist + n_more;
    const int w = s->repeat_last_n < 0 || s->repeat_last_n > total ? total : s->repeat_last_n;
    const int rep = s->repeat_penalty > 0.0f && s->repeat_penalty != 1.0f;
    if (w == 0 || (!rep && s->presence_penalty == 0.0f && s->frequency_penalty == 0.0f)) return;
    int32_t *cnt = scratch; /* n counts: scratch holds n prob_index */
    memset(cnt, 0, (size_t)n * sizeof(int32_t));
    for (int i = total - w; i < total; i++) {
        const int32_t t = hist_at(hist, n_hist, more, i);
        if (t >= 0 && t < n) cnt[t]++;
    }
    for (int i = total - w; i < total; i++) {
        const int32_t t = hist_at(hist, n_hist, more, i);
        if (t < 0 || t >= n || !cnt[t]) continue;
        float l = logits[t];
        if (rep) l = l > 0.0f ? l / s->repeat_penalty : l * s->repeat_penalty;
        logits[t] = l - (float)cnt[t] * s->frequency_penalty - s->presence_penalty;
        cnt[t] = 0; /* once per distinct token */
    }
}

/* min_p (llama.cpp's, on the logits before the temperature): tokens whose
 * probability is below min_p times the top one's drop out (-inf). */
static void apply_min_p(float *logits, int n, float min_p) {
    if (!(min_p > 0.0f) || n <= 0) return;
    const float cut = logits[argmax(logits, n)] + logf(min_p < 1.0f ? min_p : 1.0f);
    for (int i = 0; i < n; i++)
        if (logits[i] < cut) logits[i] = -INFINITY;
}

static int sample(float *logits, int n, const slm_sampling *s, uint64_t *rng, void *scratch) {
    if (n <= 0) return -1;
    if (s->temperature <= 0.0f) return argmax(logits, n);
    apply_min_p(logits, n, s->min_p);
    for (int i = 0; i < n; i++) logits[i] /= s->temperature;
    if (s->top_k > 0 && s->top_k < n) {
        /* keep the k largest logits: sort candidates, softmax over them */
        prob_index *pi = scratch;
        for (int i = 0; i < n; i++) pi[i] = (prob_index){logits[i], i};
        sort_desc(pi, n);
        const int k = s->top_k;
        float maxv = pi[0].prob, sum = 0.0f;
        for (int i = 0; i < k; i++) {
            pi[i].prob = expf(pi[i].prob - maxv);
            sum += pi[i].prob;
        }
        for (int i = 0; i < k; i++) pi[i].prob /= sum;
        float coin = random_f32(rng);
        int last = k - 1;
        if (s->top_p > 0.0f && s->top_p < 1.0f) {
            float cum = 0.0f;
            for (int i = 0; i < k; i++) {
                cum += pi[i].prob;
                if (cum > s->top_p) {
                    last = i;
                    break;
                }
            }
            coin *= cum < 1.0f ? cum : 1.0f;
        }
        float cdf = 0.0f;
        for (int i = 0; i <= last; i++) {
            cdf += pi[i].prob;
            if (coin < cdf) return pi[i].index;
        }
        return pi[last].index;
    }
    softmax(logits, n);
    float coin = random_f32(rng);
    if (s->top_p <= 0.0f || s->top_p >= 1.0f) return sample_mult(logits, n, coin);
    return sample_topp(logits, n, s->top_p, scratch, coin);
}

int slm_sample(float *logits, int n, const slm_sampling *s, uint64_t *rng, void *scratch) {
    const uint64_t t0 = slm_trace_begin();
    const int id = sample(logits, n, s, rng, scratch);
    slm_trace_end("engine", "sample", t0, &(slm_trace_args){{"token", "top_k"}, {id, s->top_k}, NULL, NULL});
    return id;
}

float slm_random_f32(uint64_t *rng) { return random_f32(rng); }

void slm_sample_dist(float *logits, int n, const slm_sampling *s, void *scratch) {
    if (n <= 0) return;
    if (s->temperature <= 0.0f) { /* greedy: all mass on the argmax */
        int b = argmax(logits, n);
        for (int i = 0; i < n; i++) logits[i] = i == b ? 1.0f : 0.0f;
        return;
    }
    apply_min_p(logits, n, s->min_p);
    for (int i = 0; i < n; i++) logits[i] /= s->temperature;
    softmax(logits, n);
    const int use_k = s->top_k > 0 && s->top_k < n, use_p = s->top_p > 0.0f && s->top_p < 1.0f;
    if (!use_k && !use_p) return;
    /* keep the top k (by probability, ties to the lower id), then the
     * smallest head whose mass exceeds top_p; renormalize */
    prob_index *pi = scratch;
    for (int i = 0; i < n; i++) pi[i] = (prob_index){logits[i], i};
    sort_desc(pi, n);
    int keep = use_k ? s->top_k : n;
    double kept = 0.0;
    for (int i = 0; i < keep; i++) kept += pi[i].prob;
    if (use_p) {
        double cum = 0.0;
        for (int i = 0; i < keep; i++) {
            cum += pi[i].prob / kept;
            if (cum > s->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double sum = 0.0;
    for (int i = 0; i < keep; i++) sum += pi[i].prob;
    for (int i = 0; i < n; i++) logits[i] = 0.0f;
    for (int i = 0; i < keep; i++) logits[pi[i].index] = (float)(pi[i].prob / sum);
}

int slm_sample_from(const float *p, int n, uint64_t *rng) {
    float coin = random_f32(rng);
    float cdf = 0.0f;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] > 0.0f) last = i;
        cdf += p[i];
        if (coin < cdf) return i;
    }
    return last;
}

/* x[i], NaN as -inf */
static float val(const float *x, int i) { return x[i] == x[i] ? x[i] : -INFINITY; }

double slm_logprobs_top(const float *x, int n, int n_top, slm_logprob *top) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (val(x, i) > mx) mx = x[i];
    if (mx == -INFINITY) mx = 0.0f;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        if (val(x, i) > -INFINITY) sum += exp((double)x[i] - mx);
    const double lse = sum > 0 ? mx + log(sum) : INFINITY; /* nothing finite: every value -inf */
    /* the best n_top so far, sorted; an equal value does not pass an earlier id */
    int k = 0;
    for (int i = 0; i < n && n_top > 0; i++) {
        const float v = val(x, i);
        if (k == n_top && !(v > val(x, top[k - 1].id))) continue;
        int p = k < n_top ? k++ : k - 1;
        for (; p > 0 && v > val(x, top[p - 1].id); p--) top[p] = top[p - 1];
        top[p].id = i;
    }
    for (int i = 0; i < k; i++) top[i].logprob = (float)((double)val(x, top[i].id) - lse);
    return lse;
}
