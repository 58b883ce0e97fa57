/* Sessions: the one generation loop. A session's tokens equal slm_generate's
 * (run's); feeding a continuation after a reply equals feeding the whole
 * text; the stop set ends replies at a model's end-of-turn id (a GGUF whose
 * EOT differs from its EOS) in sessions and chats; stop strings cut the
 * text; the overflow policies. stories260K + tok512. */
#include <sys/wait.h>
#include <unistd.h>

#include "engine/chat.h"
#include "staticlm.h"
#include "t.h"
#include "t_engine.h"

#define M(f) T_SHARED("models/" f)

static char dir[256];

static slm_engine *load(const char *model, const char *tok, slm_options o) {
    o.tokenizer_path = tok;
    o.n_threads = 1;
    return t_load(model, &o);
}

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

/* Up to cap tokens of a session after feeding text. */
static int session_tokens(slm_session *s, const char *text, int flags, int *out, int cap) {
    if (slm_session_feed_text(s, text, flags)) return -1;
    int n = 0;
    for (;;) {
        int32_t id;
        if (slm_session_next(s, &id, NULL)) return -1;
        if (id < 0 || n >= cap) break;
        out[n++] = id;
    }
    return n;
}

static void test_session_equals_generate(void) {
    slm_engine *e = load(M("stories260K.bin"), M("tok512.bin"), slm_default_options());
    if (!e) { CHECK(0); return; }
    slm_sampling g = {0};
    collect c = {.n = 0};
    CHECK(slm_generate(e, "Once upon a time", 60, &g, 1, collect_cb, &c, NULL) == SLM_OK);
    CHECK(c.n == 60);
    slm_session_cfg cfg = {0};
    cfg.n_predict = 60;
    cfg.ignore_eos = 1;
    slm_session *s = NULL;
    CHECK(slm_session_new(e, &cfg, &s) == SLM_OK);
    int got[128];
    int n = session_tokens(s, "Once upon a time", SLM_FEED_BOS, got, 128);
    CHECKF(n == 60 && !memcmp(got, c.ids, sizeof(int) * 60), "session %d tokens vs generate %d", n, c.n);
    CHECK(slm_session_stop_reason(s) == SLM_STOP_LENGTH);
    slm_session_stats st;
    slm_session_get_stats(s, &st);
    CHECK(st.n_generated == 60 && st.n_prefilled > 3);
    /* the last token is pending: 59 decoded rows after the prompt */
    CHECKF(slm_session_n_past(s) == st.n_prefilled + 59, "n_past %d prefilled %d", slm_session_n_past(s),
           st.n_prefilled);
    /* a second session cannot take the only slot */
    slm_session *s2 = NULL;
    CHECK(slm_session_new(e, &cfg, &s2) == SLM_ERR_CAPACITY && s2 == NULL);
    CHECK(strstr(slm_last_error(e), "KV slots are in use") != NULL);

    /* a continuation equals the whole text fed at once (greedy) */
    slm_session_reset(s);
    int a[64], b[64];
    cfg.n_predict = 10;
    slm_session_configure(s, &cfg);
    int na = session_tokens(s, "Lily and Tom", SLM_FEED_BOS, a, 64);
    CHECK(na == 10);
    /* reply + " went home" continues: rows kept */
    slm_session_stats s0, s1;
    slm_session_get_stats(s, &s0);
    int nb = session_tokens(s, " They went to the park.", 0, b, 64);
    slm_session_get_stats(s, &s1);
    CHECK(nb == 10);
    CHECKF(s1.n_reused - s0.n_reused == slm_session_n_past(s) - s1.n_prefilled + s0.n_prefilled - 9,
           "reused %d", s1.n_reused - s0.n_reused);
    int32_t hist[256];
    int nh = slm_session_tokens(s, hist, 256);
    CHECK(nh > 20 && nh < 256);
    /* the same ids fed whole into a fresh session give the same next tokens */
    slm_session_reset(s);
    int nhist = nh - 10; /* without this reply */
    CHECK(slm_session_feed(s, hist, nhist) == SLM_OK);
    int cmp[16], k = 0;
    for (; k < 10; k++) {
        int32_t id;
        CHECK(slm_session_next(s, &id, NULL) == SLM_OK);
        if (id < 0) break;
        cmp[k] = id;
    }
    CHECKF(k == 10 && !memcmp(cmp, b, sizeof(int) * 10), "continuation differs from the whole text");
    slm_session_free(s);
    /* the slot is free again */
    CHECK(slm_session_new(e, &cfg, &s2) == SLM_OK);
    slm_session_free(s2);
    slm_free(e);
}

/* 20 greedy tokens after a prompt put in with set_prompt (budget 0) or in
 * steps of the given budgets (cycled); the session's statistics after it. */
static int g_steps; /* prompt steps after begin_prompt in the last stepped() */
static int stepped(slm_session *s, const int32_t *ids, int n, const int *budgets, int nb, int32_t *out,
                   slm_session_stats *st) {
    g_steps = 0;
    slm_session_stats s0;
    slm_session_get_stats(s, &s0);
    if (!nb) {
        if (slm_session_set_prompt(s, ids, n)) return 0;
    } else {
        int left = -1, k = 0, steps = 0;
        if (slm_session_begin_prompt(s, ids, n, budgets[k++ % nb], &left)) return 0;
        while (left > 0) {
            int32_t id;
            /* not all in yet: no token */
            CHECK(slm_session_next(s, &id, NULL) == SLM_ERR_ARG && strstr(slm_session_error(s), "not all prefilled"));
            const int before = left;
            if (slm_session_prompt_step(s, budgets[k++ % nb], &left)) return 0;
            CHECK(left < before);
            steps++;
        }
        g_steps = steps;
    }
    for (int i = 0; i < 20; i++)
        if (slm_session_next(s, &out[i], NULL) || out[i] < 0) return 0;
    slm_session_get_stats(s, st);
    st->n_prefilled -= s0.n_prefilled;
    st->n_reused -= s0.n_reused;
    st->n_cached -= s0.n_cached;
    return 1;
}

/* A prompt put in in steps (slm_session_begin_prompt, then
 * slm_session_prompt_step) gives set_prompt's tokens and statistics: from
 * an empty session, over rows a session keeps (a longer prompt after a
 * shorter one), and from the prefix cache (rows restored up front, over
 * the whole prompt); a feed drops what is left. */
static void test_stepped_prompt(void) {
    slm_options o = slm_default_options();
    o.prefix_cache_mb = 16;
    slm_engine *e = load(M("stories260K.bin"), M("tok512.bin"), o);
    if (!e) { CHECK(0); return; }
    int32_t ids[200];
    const int n = slm_tokenize(e, "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
                                  "sun with her friends. One day, she saw a big red ball in the park.", 1, ids, 200);
    CHECK(n > 30 && n < 200);
    slm_session_cfg cfg = {0};
    cfg.ignore_eos = 1;
    slm_session *s = NULL;
    CHECK(slm_session_new(e, &cfg, &s) == SLM_OK);
    if (!s) { slm_free(e); return; }
    static const int b1[] = {7}, b2[] = {1, 3, 100}, b3[] = {16};
    const int *bs[] = {NULL, b1, b2, b3};
    const int nbs[] = {0, 1, 3, 1};
    int32_t want[20], got[20];
    slm_session_stats sw, sg;
    /* from empty (prefix cache off for this engine: o2) */
    slm_options o2 = slm_default_options();
    slm_engine *e2 = load(M("stories260K.bin"), M("tok512.bin"), o2);
    slm_session *s2 = NULL;
    CHECK(e2 && slm_session_new(e2, &cfg, &s2) == SLM_OK);
    for (int v = 0; s2 && v < 4; v++) {
        slm_session_reset(s2);
        CHECK(stepped(s2, ids, n, bs[v], nbs[v], v ? got : want, v ? &sg : &sw));
        CHECK(!v || g_steps >= 2);
        if (v)
            CHECKF(!memcmp(got, want, sizeof want) && sg.n_prefilled == sw.n_prefilled && sg.n_reused == sw.n_reused,
                   "budgets %d: tokens %s, prefilled %d / %d, reused %d / %d", v, memcmp(got, want, sizeof want) ? "differ" : "equal",
                   sg.n_prefilled, sw.n_prefilled, sg.n_reused, sw.n_reused);
    }
    /* rows kept: a prompt of n - 10 ids, then the whole one in steps, against set_prompt the same way */
    for (int v = 0; s2 && v < 4; v++) {
        slm_session_reset(s2);
        int32_t tmp[20];
        slm_session_stats t;
        CHECK(stepped(s2, ids, n - 10, NULL, 0, tmp, &t));
        CHECK(stepped(s2, ids, n, bs[v], nbs[v], v ? got : want, v ? &sg : &sw));
        CHECK(sw.n_reused >= n - 11);
        if (v)
            CHECKF(!memcmp(got, want, sizeof want) && sg.n_prefilled == sw.n_prefilled && sg.n_reused == sw.n_reused,
                   "kept rows, budgets %d: prefilled %d / %d, reused %d / %d", v, sg.n_prefilled, sw.n_prefilled,
                   sg.n_reused, sw.n_reused);
    }
    slm_session_free(s2);
    slm_free(e2);
    /* the prefix cache: the prompt stored once, then restored whole before the steps */
    CHECK(stepped(s, ids, n, NULL, 0, want, &sw));
    for (int v = 1; v < 4; v++) {
        slm_session_reset(s);
        CHECK(stepped(s, ids, n, bs[v], nbs[v], got, &sg));
        CHECKF(sg.n_cached >= n - 1 - 16 && !memcmp(got, want, sizeof want), "prefix cache, budgets %d: cached %d of %d",
               v, sg.n_cached, n);
    }
    /* ... and a longer prompt over a cached prefix, in steps of 5 */
    int32_t longer[220];
    memcpy(longer, ids, sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < 12; i++) longer[n + i] = ids[5 + i];
    slm_session_reset(s);
    CHECK(stepped(s, longer, n + 12, b1, 1, got, &sg) && g_steps >= 1);
    /* the stepped prompt was offered to the cache whole: set_prompt restores all but its end */
    slm_session_reset(s);
    CHECK(stepped(s, longer, n + 12, NULL, 0, want, &sw));
    CHECKF(sw.n_cached >= n + 12 - 1 - 16 && sw.n_cached > sg.n_cached && !memcmp(got, want, sizeof want),
           "the stepped prompt's rows: cached %d then %d of %d", sg.n_cached, sw.n_cached, n + 12);
    slm_session_reset(s);
    for (int i = 0; i < 12; i++) longer[n + i] = ids[20 + i]; /* a tail the cache has not seen */
    int left = 0;
    CHECK(slm_session_begin_prompt(s, longer, n + 12, 5, &left) == SLM_OK && left > 0 && left <= 13);
    /* a feed drops what is left */
    CHECK(slm_session_feed(s, ids, 3) == SLM_OK);
    CHECK(slm_session_prompt_step(s, 5, &left) == SLM_ERR_ARG && left == 0);
    int32_t id;
    CHECK(slm_session_next(s, &id, NULL) == SLM_OK && id >= 0);
    CHECK(slm_session_begin_prompt(s, ids, n, 0, &left) == SLM_ERR_ARG);
    slm_session_free(s);
    slm_free(e);
}

static void test_stop_strings(void) {
    slm_engine *e = load(M("stories260K.bin"), M("tok512.bin"), slm_default_options());
    if (!e) { CHECK(0); return; }
    slm_session_cfg cfg = {0};
    cfg.n_predict = 80;
    cfg.ignore_eos = 1;
    slm_session *s = NULL;
    CHECK(slm_session_new(e, &cfg, &s) == SLM_OK);
    int ids[128];
    session_tokens(s, "Once upon a time", SLM_FEED_BOS, ids, 128);
    size_t len, safe;
    char full[4096];
    snprintf(full, sizeof full, "%s", slm_session_text(s, &len, &safe));
    CHECK(len == safe && len > 40);
    /* stop at a word from the middle of the text */
    char word[32];
    const char *mid = full + len / 2;
    while (*mid && *mid != ' ') mid++;
    snprintf(word, sizeof word, "%.6s", mid);
    const char *stops[] = {word};
    cfg.stop = stops;
    cfg.n_stop = 1;
    slm_session_configure(s, &cfg);
    slm_session_reset(s);
    session_tokens(s, "Once upon a time", SLM_FEED_BOS, ids, 128);
    const char *t = slm_session_text(s, &len, &safe);
    CHECK(slm_session_stop_reason(s) == SLM_STOP_STRING);
    size_t at = (size_t)(strstr(full, word) - full);
    CHECKF(len == at && !strncmp(t, full, at) && safe == len, "cut at %zu, want %zu ('%s')", len, at, word);
    CHECK(slm_session_stop_index(s) == 0);
    /* which one ended it: the earliest to start (an empty one skipped), the first listed on a tie */
    char later[32], same[32];
    snprintf(later, sizeof later, "%.5s", mid + 1); /* starts a byte later than word */
    snprintf(same, sizeof same, "%.3s", mid);       /* starts where word does */
    const char *stops3[] = {later, "", same, word};
    cfg.stop = stops3;
    cfg.n_stop = 4;
    slm_session_configure(s, &cfg);
    slm_session_reset(s);
    session_tokens(s, "Once upon a time", SLM_FEED_BOS, ids, 128);
    CHECKF(slm_session_stop_index(s) == 2, "%d", slm_session_stop_index(s));
    cfg.n_stop = 0;
    slm_session_configure(s, &cfg);
    slm_session_reset(s);
    session_tokens(s, "Once upon a time", SLM_FEED_BOS, ids, 128);
    CHECK(slm_session_stop_reason(s) != SLM_STOP_STRING && slm_session_stop_index(s) == -1);
    slm_session_free(s);
    slm_free(e);
}

/* Patch a converted stories260K GGUF in place: its tokenizer.ggml.bos_token_id
 * key (BOS then defaults to 1, the same) becomes tokenizer.ggml.eot_token_id
 * with the value eot. */
static int make_eot_gguf(const char *path, int eot) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s convert -m %s -z %s -o %s 2>/dev/null", SLM_CLI_PATH, M("stories260K.bin"),
             M("tok512.bin"), path);
    if (system(cmd) != 0) return 0;
    size_t n;
    char *b = t_read_file(path, &n);
    if (!b) return 0;
    const char *key = "tokenizer.ggml.bos_token_id";
    char *p = NULL;
    for (size_t i = 0; i + 27 + 8 <= n && !p; i++)
        if (!memcmp(b + i, key, 27)) p = b + i;
    int ok = 0;
    if (p) {
        memcpy(p, "tokenizer.ggml.eot_token_id", 27);
        uint32_t type, v = (uint32_t)eot;
        memcpy(&type, p + 27, 4);
        if (type == 4) { /* GGUF_TYPE_UINT32 */
            memcpy(p + 31, &v, 4);
            ok = t_write_file(path, b, n);
        }
    }
    free(b);
    return ok;
}

static void test_eot_stops(void) {
    char gguf[300];
    snprintf(gguf, sizeof gguf, "%s/eot.gguf", dir);
    /* the reply of a chat turn without an EOT, then with its 4th token as EOT */
    slm_options o = slm_default_options();
    if (!make_eot_gguf(gguf, 1)) { CHECKF(0, "could not write %s", gguf); return; }
    slm_engine *e = load(gguf, NULL, o);
    if (!e) { CHECK(0); return; }
    slm_tmpl *tm = slm_chat_template_open(e, "chatml", NULL, 0);
    slm_chat_cfg cc = {0};
    cc.n_predict = 24;
    cc.on_overflow = SLM_OVERFLOW_ERROR;
    slm_chat *c = slm_chat_new(e, tm, &cc);
    collect r1 = {.n = 0};
    slm_err err = {0};
    char note[256];
    slm_chat_stats st;
    CHECK(c && slm_chat_turn(c, "Tell me a story", collect_cb, &r1, &st, &err, note, sizeof note) == SLM_OK);
    slm_chat_free(c);
    slm_free(e);
    CHECKF(r1.n >= 6, "reply of %d tokens", r1.n);
    if (r1.n < 6) { slm_tmpl_free(tm); return; }
    int x = -1, at = -1;
    for (int i = 3; i < r1.n && x < 0; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= r1.ids[j] == r1.ids[i];
        if (!seen && r1.ids[i] > 2) { x = r1.ids[i]; at = i; }
    }
    CHECK(x > 2);
    if (!make_eot_gguf(gguf, x)) { CHECK(0); slm_tmpl_free(tm); return; }
    e = load(gguf, NULL, o);
    if (!e) { CHECK(0); slm_tmpl_free(tm); return; }
    CHECK(slm_is_stop_token(e, x) && slm_is_stop_token(e, 2));
    int32_t set[16];
    int ns = slm_stop_tokens(e, set, 16);
    CHECKF(ns >= 2, "stop set of %d", ns);
    /* chat: the reply ends right before the EOT */
    c = slm_chat_new(e, tm, &cc);
    collect r2 = {.n = 0};
    CHECK(c && slm_chat_turn(c, "Tell me a story", collect_cb, &r2, &st, &err, note, sizeof note) == SLM_OK);
    CHECKF(r2.n == at && !memcmp(r2.ids, r1.ids, sizeof(int) * (size_t)at), "chat reply %d tokens, EOT at %d", r2.n, at);
    CHECK(slm_session_stop_reason(slm_chat_session(c)) == SLM_STOP_TOKEN);
    /* the EOT never entered the KV: the next turn keeps every row */
    slm_chat_free(c);
    slm_free(e);
    slm_tmpl_free(tm);
}

/* Both policies, with the KV cache as f32, f16 (stories260K) and q8_0 (a
 * synth llama of head_dim 32; the prefix-cache and truncation re-prefill
 * copy rows of the type). */
static void overflow_policies(const char *model, const char *tok, int kv_type) {
    slm_options o = slm_default_options();
    o.kv_type = kv_type;
    o.max_prompt_len = 16;
    o.min_response_len = 24; /* capacity 40 */
    o.on_overflow = SLM_OVERFLOW_ERROR;
    slm_engine *e = load(model, tok, o);
    if (!e) { CHECK(0); return; }
    slm_session_cfg cfg = {0};
    cfg.ignore_eos = 1;
    cfg.n_predict = 100;
    slm_session *s = NULL;
    CHECK(slm_session_new(e, &cfg, &s) == SLM_OK);
    CHECK(slm_session_feed_text(s, "Once upon a time", SLM_FEED_BOS) == SLM_OK);
    slm_status st = SLM_OK;
    int n = 0;
    for (; n < 100; n++) {
        int32_t id;
        if ((st = slm_session_next(s, &id, NULL)) || id < 0) break;
    }
    CHECKF(st == SLM_ERR_CAPACITY && slm_session_stop_reason(s) == SLM_STOP_CAPACITY, "st %d", st);
    CHECK(slm_session_n_past(s) == 40);
    CHECK(strstr(slm_session_error(s), "KV cache full") != NULL);
    slm_session_free(s);
    slm_free(e);
    o.on_overflow = SLM_OVERFLOW_TRUNCATE;
    e = load(model, tok, o);
    if (!e) { CHECK(0); return; }
    CHECK(slm_session_new(e, &cfg, &s) == SLM_OK);
    n = 0;
    int ids[128];
    n = session_tokens(s, "Once upon a time", SLM_FEED_BOS, ids, 128);
    slm_session_stats ss;
    slm_session_get_stats(s, &ss);
    CHECKF(n == 100 && ss.n_truncations >= 2, "n %d truncations %d", n, ss.n_truncations);
    slm_session_free(s);
    slm_free(e);
}

static void test_overflow_policies(void) {
    overflow_policies(M("stories260K.bin"), M("tok512.bin"), SLM_KV_F32);
    overflow_policies(M("stories260K.bin"), M("tok512.bin"), SLM_KV_F16);
    char path[300], cmd[2048];
    snprintf(path, sizeof path, "%s/synth_kv.gguf", dir);
    snprintf(cmd, sizeof cmd, "%s synth --shape custom --arch llama --type f32 --dim 64 --layers 2 --heads 2 --kv-heads 1 "
             "--ffn 128 --n-vocab 320 --ctx 256 --std 0.5 -o %s --vocab-file %s >/dev/null 2>&1", SLM_CLI_PATH, path,
             T_SHARED("vocab/ggml-vocab-llama-spm.gguf"));
    CHECKF(system(cmd) == 0, "%s", cmd);
    overflow_policies(path, NULL, SLM_KV_Q8_0);
    unlink(path);
}

/* Speculative sampling: with temperature > 0 the draft's proposals pass the
 * rejection rule, so the tokens follow the target's distribution. The
 * second token's marginal is computed exactly (sum over the first token of
 * p(t1) p(t2 | t1)) and compared with 2000 seeded runs, speculative and
 * plain; a poor draft (rand288, random weights) makes most proposals fail,
 * so the residual distribution is exercised. */
#include <math.h>

static void softmax_t(const float *lg, int n, float t, double *p) {
    double m = lg[0], sum = 0;
    for (int i = 1; i < n; i++)
        if (lg[i] > m) m = lg[i];
    for (int i = 0; i < n; i++) sum += p[i] = exp((lg[i] - m) / t);
    for (int i = 0; i < n; i++) p[i] /= sum;
}

static double tv(const double *a, const double *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) d += fabs(a[i] - b[i]);
    return d / 2;
}

/* Empirical distribution of the 2nd token (and the 3rd) over runs seeds. */
static void sample_dist(slm_engine *e, int runs, double *d2, double *d3, int V, int *drafted, int *accepted) {
    slm_session_cfg cfg = {0};
    cfg.samp.temperature = 1.0f;
    cfg.ignore_eos = 1;
    cfg.n_predict = 3;
    slm_session *s = NULL;
    if (slm_session_new(e, &cfg, &s)) { CHECK(0); return; }
    for (int i = 0; i < V; i++) d2[i] = d3[i] = 0;
    for (int r = 0; r < runs; r++) {
        cfg.samp.seed = 1000 + (uint64_t)r * 7919;
        slm_session_configure(s, &cfg);
        slm_session_reset(s);
        int32_t t1, t2, t3;
        if (slm_session_feed_text(s, "Once upon a time", SLM_FEED_BOS) || slm_session_next(s, &t1, NULL) ||
            slm_session_next(s, &t2, NULL) || slm_session_next(s, &t3, NULL) || t2 < 0 || t3 < 0) {
            CHECK(0);
            break;
        }
        d2[t2] += 1.0 / runs;
        d3[t3] += 1.0 / runs;
    }
    slm_session_stats st;
    slm_session_get_stats(s, &st);
    *drafted = st.n_drafted;
    *accepted = st.n_accepted;
    slm_session_free(s);
}

static void test_speculative_sampling(void) {
    slm_options o = slm_default_options();
    slm_engine *plain = load(M("stories260K.bin"), M("tok512.bin"), o);
    o.draft_path = M("rand288.bin"); /* its tokenizer defaults to the target's */
    o.draft_n = 3;
    slm_engine *spec = load(M("stories260K.bin"), M("tok512.bin"), o);
    if (!plain || !spec) { CHECK(0); slm_free(plain); slm_free(spec); return; }
    slm_info in;
    slm_get_info(plain, &in);
    const int V = in.vocab_size;
    double *exact = calloc((size_t)V, sizeof(double)), *p1 = calloc((size_t)V, sizeof(double)),
           *p2 = calloc((size_t)V, sizeof(double)), *a2 = calloc((size_t)V, sizeof(double)),
           *a3 = calloc((size_t)V, sizeof(double)), *b2 = calloc((size_t)V, sizeof(double)),
           *b3 = calloc((size_t)V, sizeof(double));
    /* exact: p(t2) = sum over t1 of p(t1) p(t2 | t1) */
    int32_t ids[64];
    int n = slm_tokenize(plain, "Once upon a time", 1, ids, 64);
    const float *lg;
    slm_reset(plain);
    CHECK(slm_prefill(plain, ids, n, &lg) == SLM_OK);
    softmax_t(lg, V, 1.0f, p1);
    for (int t1 = 0; t1 < V; t1++) {
        if (p1[t1] < 1e-5) continue; /* at most 512e-5 of the mass left out */
        ids[n] = t1;
        slm_reset(plain);
        if (slm_prefill(plain, ids, n + 1, &lg)) { CHECK(0); break; }
        softmax_t(lg, V, 1.0f, p2);
        for (int i = 0; i < V; i++) exact[i] += p1[t1] * p2[i];
    }
    const int runs = 2000;
    int dr = 0, ac = 0, dr0 = 0, ac0 = 0;
    sample_dist(spec, runs, a2, a3, V, &dr, &ac);
    sample_dist(plain, runs, b2, b3, V, &dr0, &ac0);
    double tv_spec = tv(a2, exact, V), tv_plain = tv(b2, exact, V), tv3 = tv(a3, b3, V);
    fprintf(stderr, "  speculative sampling: %d drafted, %d accepted; TV(2nd token) speculative %.4f, plain %.4f; "
                    "TV(3rd token) speculative vs plain %.4f\n", dr, ac, tv_spec, tv_plain, tv3);
    CHECKF(dr > runs && ac > 0 && ac < dr, "drafted %d accepted %d", dr, ac);
    /* the tolerance: total variation 0.06 for the 2nd token against the exact
     * marginal (2000 samples: plain sampling measures ~0.01 here), 0.09 for the
     * 3rd between two sampled sets; with this draft nearly every proposal is
     * rejected, so a wrong residual (e.g. sampling p instead of max(0, p - q))
     * shifts the mass the draft's q covers */
    CHECKF(tv_spec < 0.06 && tv_plain < 0.06, "TV %.4f / %.4f", tv_spec, tv_plain);
    CHECKF(tv3 < 0.09, "3rd token TV %.4f", tv3);
    free(exact); free(p1); free(p2); free(a2); free(a3); free(b2); free(b3);
    slm_free(plain);
    slm_free(spec);
}

/* A draft whose vocabulary differs is refused: same size (512), other
 * tokens (the first 512 of Llama 2's vocabulary). */
static void test_draft_vocab_refused(void) {
    slm_options o = slm_default_options();
    o.draft_path = M("rand288.bin");
    o.draft_tokenizer_path = M("llama2-tokenizer.bin");
    o.tokenizer_path = M("tok512.bin");
    o.n_threads = 1;
    slm_engine *e = NULL;
    slm_status st = slm_load(&e, M("stories260K.bin"), &o);
    CHECKF(st == SLM_ERR_ARG && strstr(slm_last_error(e), "draft model") && strstr(slm_last_error(e), "token"),
           "%d: %s", st, slm_last_error(e));
    slm_free(e);
}

/* Options a blob fixed are honoured or refused by name, never ignored. */
static void test_blob_options_refused(void) {
    char blob[300], cmd[2048], err[300];
    snprintf(blob, sizeof blob, "%s/s.blob", dir);
    snprintf(err, sizeof err, "%s/err.txt", dir);
    snprintf(cmd, sizeof cmd, "%s compile -m %s -z %s --max-prompt-len 64 --kv-type f16 -o %s 2>/dev/null", SLM_CLI_PATH,
             M("stories260K.bin"), M("tok512.bin"), blob);
    CHECK(system(cmd) == 0);
    static const struct { const char *args, *want1, *want2; } k[] = {
        {"--max-prompt-len 32", "--max-prompt-len 32", "max_prompt_len 64"},
        {"--min-response-len 7", "--min-response-len 7", "min_response_len 128"},
        {"-z " M("tok512.bin"), "-z ", "carries its own tokenizer"},
        {"--lm-head-separate", "--lm-head-separate", "LM head inside"},
        {"--generate-variants 100", "--generate-variants", "KV capacity 192"},
        {"--prefill-variants 8", "--prefill-variants", "of 64 rows"},
        {"--draft " M("stories260K.bin") " --draft-n 2", "--draft-n 2", "draft_n 0"},
        {"--draft-n 2", "--draft-n 2", "needs a draft model"},
        {"--lm-head-threads 2", "--lm-head-threads 2", "not a separate program"},
        {"--kv-type q8_0", "--kv-type q8_0", "kv_type f16"},
        {"--kv-type f32", "--kv-type f32", "kv_type f16"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s run -m %s %s -n 4 --temp 0 >/dev/null 2>%s", SLM_CLI_PATH, blob, k[i].args, err);
        int rc = system(cmd);
        char *e = t_read_file(err, NULL);
        CHECKF(rc != 0 && e && strstr(e, k[i].want1) && strstr(e, k[i].want2), "%s: rc %d: %s", k[i].args, rc,
               e ? e : "");
        free(e);
    }
    /* the same values are honoured */
    snprintf(cmd, sizeof cmd, "%s run -m %s --max-prompt-len 64 --min-response-len 128 --kv-type f16 -n 4 --temp 0 >/dev/null 2>%s",
             SLM_CLI_PATH, blob, err);
    CHECK(system(cmd) == 0);
}

/* Penalties and biases in the session: each greedy token equals the argmax
 * of a fresh prefill of everything before it (prompt included) with the
 * penalties recomputed here over its last 16 ids; the same with a draft model
 * (speculative rounds: a draft that is always rejected, and the target itself,
 * always accepted); a banned token never comes. */
static void test_penalties(void) {
    slm_options o = slm_default_options();
    slm_engine *ref = load(M("stories260K.bin"), M("tok512.bin"), o);
    slm_engine *plain = load(M("stories260K.bin"), M("tok512.bin"), o);
    o.draft_n = 3;
    o.draft_path = M("rand288.bin");
    slm_engine *rej = load(M("stories260K.bin"), M("tok512.bin"), o);
    o.draft_path = M("stories260K.bin");
    slm_engine *acc = load(M("stories260K.bin"), M("tok512.bin"), o);
    if (!ref || !plain || !rej || !acc) { CHECK(0); goto done; }
    enum { GEN = 40 };
    const char *prompt = "Once upon a time";
    slm_session_cfg cfg = {.n_predict = GEN, .ignore_eos = 1};
    cfg.samp = (slm_sampling){.repeat_penalty = 1.6f, .repeat_last_n = 16, .frequency_penalty = 0.4f,
                              .presence_penalty = 0.2f};
    /* the reference: prefill everything so far, penalize, argmax */
    slm_info in;
    slm_get_info(ref, &in);
    const int V = in.vocab_size;
    int32_t hist[128];
    int nh = slm_tokenize(ref, prompt, 1, hist, 64), want[GEN];
    float *l = malloc(sizeof(float) * (size_t)V);
    for (int g = 0; g < GEN && l; g++) {
        const float *lg;
        slm_reset(ref);
        if (slm_prefill(ref, hist, nh, &lg)) { CHECK(0); break; }
        memcpy(l, lg, sizeof(float) * (size_t)V);
        for (int t = 0; t < V; t++) {
            int c = 0;
            for (int i = nh - 16; i < nh; i++) c += i >= 0 && hist[i] == t;
            if (c) l[t] = (l[t] > 0 ? l[t] / 1.6f : l[t] * 1.6f) - 0.4f * (float)c - 0.2f;
        }
        int b = 0;
        for (int t = 1; t < V; t++) b = l[t] > l[b] ? t : b;
        want[g] = hist[nh++] = b;
    }
    slm_engine *es[3] = {plain, rej, acc};
    int unpen[GEN];
    for (int k = 0; k < 3; k++) {
        slm_session *s = NULL;
        int got[GEN + 8];
        CHECK(slm_session_new(es[k], &cfg, &s) == SLM_OK);
        const int n = s ? session_tokens(s, prompt, SLM_FEED_BOS, got, GEN + 8) : -1;
        CHECKF(n == GEN && !memcmp(got, want, sizeof want), "engine %d: %d tokens, not the penalized reference's", k, n);
        slm_session_stats st = {0};
        if (s) slm_session_get_stats(s, &st);
        CHECKF(k == 0 || (st.n_drafted > 0 && (k == 1 ? st.n_accepted < st.n_drafted / 2 : st.n_accepted > st.n_drafted / 2)),
               "engine %d: %d drafted, %d accepted", k, st.n_drafted, st.n_accepted);
        if (k == 0 && s) { /* the penalties changed something */
            slm_session_cfg c0 = {.n_predict = GEN, .ignore_eos = 1};
            slm_session_reset(s);
            slm_session_configure(s, &c0);
            CHECK(session_tokens(s, prompt, SLM_FEED_BOS, unpen, GEN) == GEN && memcmp(unpen, want, sizeof want));
            /* ban the unpenalized first token: it never comes */
            c0.samp.n_logit_bias = 1;
            c0.samp.logit_bias[0] = (slm_logit_bias){unpen[0], -100.0f};
            slm_session_reset(s);
            slm_session_configure(s, &c0);
            const int nb = session_tokens(s, prompt, SLM_FEED_BOS, got, GEN);
            int banned = 0;
            for (int i = 0; i < nb; i++) banned += got[i] == unpen[0];
            CHECKF(nb == GEN && !banned, "banned token %d came %d times", unpen[0], banned);
        }
        slm_session_free(s);
    }
    free(l);
done:
    slm_free(ref);
    slm_free(plain);
    slm_free(rej);
    slm_free(acc);
}

/* The chat's history keeps a thinking reply's answer and reasoning apart:
 * with a template whose generation prompt opens <think> (the server test's
 * tests/serve/think.jinja), auto picks deepseek, the whole reply is
 * reasoning (sent to the text callback as such) and the stored content is
 * empty; with {"enable_thinking": false} there is no reasoning; format none
 * keeps the reply as generated. */
typedef struct split_text {
    char s[2][2048];
    size_t n[2];
} split_text;

static void split_cb(void *ud, int kind, const char *s, size_t n) {
    split_text *t = ud;
    if (t->n[kind] + n < sizeof t->s[kind]) {
        memcpy(t->s[kind] + t->n[kind], s, n);
        t->n[kind] += n;
    }
}

static void chat_reply(slm_engine *e, const slm_tmpl *tm, int fmt, const char *kw, split_text *t, char *content,
                       char *reasoning, size_t cap) {
    slm_chat_cfg cc = {0};
    cc.n_predict = 24;
    cc.reasoning = fmt;
    cc.kwargs = &kw;
    cc.n_kwargs = kw ? 1 : 0;
    slm_chat *c = slm_chat_new(e, tm, &cc);
    memset(t, 0, sizeof *t);
    content[0] = reasoning[0] = 0;
    if (!c) { CHECK(0); return; }
    slm_chat_on_text(c, split_cb, t);
    slm_err err = {0};
    slm_chat_stats st;
    CHECKF(slm_chat_turn(c, "Hello", NULL, NULL, &st, &err, NULL, 0) == SLM_OK, "%s", err.msg);
    CHECK(slm_chat_count(c) == 2);
    const slm_chat_msg *m = slm_chat_messages(c);
    if (slm_chat_count(c) == 2) {
        snprintf(content, cap, "%s", m[1].content);
        snprintf(reasoning, cap, "%s", m[1].reasoning_content ? m[1].reasoning_content : "<none>");
    }
    CHECK(fmt != SLM_REASON_AUTO || slm_chat_reasoning(c) == SLM_REASON_DEEPSEEK);
    slm_chat_free(c);
}

static void test_chat_reasoning(void) {
    slm_options o = slm_default_options();
    o.kv_type = SLM_KV_F32;
    slm_engine *e = load(M("stories260K.bin"), M("tok512.bin"), o);
    if (!e) { CHECK(0); return; }
    slm_tmpl *tm = slm_chat_template_open(e, SLM_TESTS_DIR "/serve/think.jinja", NULL, 0);
    split_text t;
    char c1[2048], r1[2048], c0[2048], r0[2048], c2[2048], r2[2048];
    chat_reply(e, tm, SLM_REASON_AUTO, NULL, &t, c1, r1, sizeof c1);
    CHECKF(!c1[0] && r1[0] && strcmp(r1, "<none>"), "content [%s] reasoning [%s]", c1, r1);
    CHECK(t.n[SLM_REASON_ANSWER] == 0 && t.n[SLM_REASON_THINK] == strlen(r1) && !memcmp(t.s[1], r1, t.n[1]));
    chat_reply(e, tm, SLM_REASON_NONE, NULL, &t, c0, r0, sizeof c0);
    CHECKF(!strcmp(r0, "<none>") && strstr(c0, r1) && strlen(c0) - strlen(r1) <= 4, "none [%s] vs [%s]", c0, r1);
    chat_reply(e, tm, SLM_REASON_DEEPSEEK, "{\"enable_thinking\": false}", &t, c2, r2, sizeof c2);
    CHECKF(c2[0] && !strcmp(r2, "<none>") && t.n[SLM_REASON_THINK] == 0, "content [%s] reasoning [%s]", c2, r2);
    slm_tmpl_free(tm);
    slm_free(e);
}

/* Reference log-probabilities of one golden logits row (double). */
static void ref_logprobs(const float *row, int V, double *lp) {
    double mx = row[0], sum = 0;
    for (int i = 1; i < V; i++) mx = row[i] > mx ? row[i] : mx;
    for (int i = 0; i < V; i++) sum += exp((double)row[i] - mx);
    for (int i = 0; i < V; i++) lp[i] = (double)row[i] - mx - log(sum);
}

/* The log-probabilities a session keeps (cfg.logprobs) against golden
 * logits (run.c's, through an independent PyTorch check): greedy over
 * stories260K's golden prompt 0, every token's and its top 5; under a
 * logit bias that bans the greedy token and a temperature, the chosen
 * token's log-probability is still the raw model's, and the banned token
 * still heads the top; with a draft model, speculation is off and every
 * token has them; off, none are kept. */
static void test_logprobs(void) {
    size_t lb = 0;
    char *pid = t_read_file(T_SHARED("models/golden/stories260K/0.prompt_ids.txt"), NULL);
    float *gold = (float *)t_read_file(T_SHARED("models/golden/stories260K/0.logits.f32"), &lb);
    slm_options o = slm_default_options();
    o.kv_type = SLM_KV_F32;
    slm_engine *e = load(M("stories260K.bin"), M("tok512.bin"), o);
    o.draft_path = M("rand288.bin");
    o.draft_n = 3;
    slm_engine *spec = load(M("stories260K.bin"), M("tok512.bin"), o);
    if (!pid || !gold || !e || !spec) { CHECK(0); goto out; }
    const int V = 512, rows = (int)(lb / (V * sizeof(float)));
    int32_t ids[64];
    int np = 0;
    for (char *q = pid, *end; np < 64; q = end) {
        long v = strtol(q, &end, 10);
        if (end == q) break;
        ids[np++] = (int32_t)v;
    }
    double ref[512];
    slm_session_cfg c = {0};
    c.ignore_eos = 1;
    c.logprobs = 1;
    c.top_logprobs = 5;
    slm_session *s = NULL;
    CHECK(slm_session_new(e, &c, &s) == SLM_OK && slm_session_feed(s, ids, np) == SLM_OK);
    double worst = 0;
    int n = 0, bad_top = 0;
    for (; s && np - 1 + n < rows && n < 40; n++) {
        int32_t id;
        slm_token_logprobs lp;
        if (slm_session_next(s, &id, NULL) || id < 0 || slm_session_logprobs(s, &lp)) { CHECK(0); break; }
        ref_logprobs(gold + (size_t)(np - 1 + n) * V, V, ref);
        CHECK(lp.token.id == id && lp.n_top == 5 && lp.top[0].id == id); /* greedy */
        worst = fmax(worst, fabs(lp.token.logprob - ref[id]));
        for (int k = 0; k < lp.n_top; k++) {
            worst = fmax(worst, fabs(lp.top[k].logprob - ref[lp.top[k].id]));
            bad_top += k > 0 && lp.top[k].logprob > lp.top[k - 1].logprob;
            int above = 0; /* reference tokens clearly above the k-th reported one */
            for (int i = 0; i < V; i++) above += ref[i] > ref[lp.top[k].id] + 1e-3;
            bad_top += above > k;
        }
    }
    CHECKF(n == 40 && worst < 1e-3 && !bad_top, "%d tokens, worst |logprob - ref| %.3g, %d top misorders", n, worst,
           bad_top);
    /* biased and sampled: the chosen token's log-probability is the raw model's */
    c.samp.temperature = 0.7f;
    c.samp.seed = 7;
    c.samp.n_logit_bias = 1;
    c.samp.logit_bias[0].bias = -100;
    ref_logprobs(gold + (size_t)(np - 1) * V, V, ref);
    for (int i = 0; i < V; i++) c.samp.logit_bias[0].token = ref[i] > ref[c.samp.logit_bias[0].token] ? i : c.samp.logit_bias[0].token;
    int32_t id = -1;
    slm_token_logprobs lp;
    CHECK(slm_session_configure(s, &c) == SLM_OK);
    slm_session_reset(s);
    CHECK(slm_session_feed(s, ids, np) == SLM_OK && slm_session_next(s, &id, NULL) == SLM_OK && id >= 0);
    CHECK(slm_session_logprobs(s, &lp) == SLM_OK && lp.token.id == id && id != c.samp.logit_bias[0].token);
    CHECKF(id >= 0 && fabs(lp.token.logprob - ref[id]) < 1e-3 && lp.top[0].id == c.samp.logit_bias[0].token,
           "sampled %d: %g vs %g; top %d", id, lp.token.logprob, id >= 0 ? ref[id] : 0.0, lp.top[0].id);
    c.logprobs = 0; /* off: none kept */
    CHECK(slm_session_configure(s, &c) == SLM_OK && slm_session_next(s, &id, NULL) == SLM_OK && id >= 0);
    CHECK(slm_session_logprobs(s, &lp) == SLM_ERR_ARG);
    c.top_logprobs = SLM_MAX_TOP_LOGPROBS + 1;
    CHECK(slm_session_configure(s, &c) == SLM_ERR_ARG);
    slm_session_free(s);
    /* a draft: no speculation under logprobs, every token has them */
    memset(&c, 0, sizeof c);
    c.ignore_eos = 1;
    c.logprobs = 1;
    CHECK(slm_session_new(spec, &c, &s) == SLM_OK && slm_session_feed(s, ids, np) == SLM_OK);
    int with = 0;
    for (int k = 0; s && k < 20; k++)
        with += slm_session_next(s, &id, NULL) == SLM_OK && id >= 0 && slm_session_logprobs(s, &lp) == SLM_OK &&
                lp.token.id == id && lp.n_top == 0;
    slm_session_stats st;
    slm_session_get_stats(s, &st);
    CHECKF(with == 20 && st.n_drafted == 0, "%d of 20 tokens with logprobs, %d drafted", with, st.n_drafted);
    slm_session_free(s);
out:
    free(pid);
    free(gold);
    slm_free(e);
    slm_free(spec);
}

/* Characters made of byte tokens keep their bytes in the reply: a grammar
 * that asks for "héllo 🙂" gets exactly that from a random-weight model
 * with Llama's SentencePiece vocabulary or GPT-2's byte-level BPE one cut
 * to 320 ids (so no token holds "é" or the emoji whole: SPM's <0xXX> byte
 * tokens make them, BPE's 256 single-byte tokens); a llama2.c
 * tokenizer.bin keeps run.c's rule (a lone high byte is not shown). */
static void test_byte_tokens_shown(void) {
    static const char *const vocabs[] = {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf"};
    const char *want = "h\xc3\xa9llo \xf0\x9f\x99\x82";
    for (int v = 0; v < 2; v++) {
        char path[256], cmd[2048];
        snprintf(path, sizeof path, "/tmp/slm_test_bytes_%d_%d.gguf", (int)getpid(), v);
        snprintf(cmd, sizeof cmd,
                 "%s synth --shape custom --arch llama --type f32 --dim 64 --layers 1 --heads 2 --kv-heads 1 --ffn 128 "
                 "--n-vocab 320 --ctx 128 -o %s --vocab-file %s/%s >/dev/null 2>&1",
                 SLM_CLI_PATH, path, SLM_SHARED_DIR, vocabs[v]);
        CHECKF(system(cmd) == 0, "%s", cmd);
        slm_options o = slm_default_options();
        o.n_threads = 1;
        slm_engine *e = NULL;
        if (slm_load(&e, path, &o)) {
            CHECKF(0, "load %s: %s", path, slm_last_error(e));
            slm_free(e);
            unlink(path);
            continue;
        }
        slm_info in;
        slm_get_info(e, &in);
        int whole = 0; /* the tokens that hold "é" or the emoji whole */
        for (int id = 0; id < in.vocab_size; id++) {
            const char *p = slm_token_piece(e, 0, id);
            whole += strstr(p, "\xc3\xa9") || strstr(p, "\xf0\x9f\x99\x82");
        }
        CHECKF(in.vocab_size == 320 && whole == 0, "%s: %d tokens of %d hold them", vocabs[v], whole, in.vocab_size);
        slm_session_cfg c = {0};
        c.n_predict = 40;
        c.samp.grammar = "root ::= \"h\xc3\xa9llo \xf0\x9f\x99\x82\"";
        slm_session *s = NULL;
        int n = 0;
        CHECK(slm_session_new(e, &c, &s) == SLM_OK && slm_session_feed_text(s, "Hi", SLM_FEED_BOS) == SLM_OK);
        for (int32_t id = 0; s && id >= 0 && n < 40; n++)
            if (slm_session_next(s, &id, NULL)) break;
        size_t len = 0, safe = 0;
        const char *text = s ? slm_session_text(s, &len, &safe) : "";
        CHECKF(len == strlen(want) && !memcmp(text, want, len), "%s: the reply is '%.*s' (%zu bytes, %d steps)", vocabs[v],
               (int)len, text, len, n);
        CHECK(slm_piece_shown(e, "\xf0") && slm_piece_shown(e, "a") && !slm_piece_shown(e, "\x01"));
        slm_session_free(s);
        slm_free(e);
        unlink(path);
    }
    slm_engine *e = load(M("stories260K.bin"), M("tok512.bin"), slm_default_options());
    CHECK(e && !slm_piece_shown(e, "\xf0") && slm_piece_shown(e, "a") && slm_piece_shown(e, "\xc3\xa9"));
    slm_free(e);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/slm_test_session_%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd) != 0) return 1;
    T_RUN(test_session_equals_generate);
    T_RUN(test_stop_strings);
    T_RUN(test_stepped_prompt);
    T_RUN(test_eot_stops);
    T_RUN(test_chat_reasoning);
    T_RUN(test_overflow_policies);
    T_RUN(test_speculative_sampling);
    T_RUN(test_draft_vocab_refused);
    T_RUN(test_penalties);
    T_RUN(test_blob_options_refused);
    T_RUN(test_logprobs);
    T_RUN(test_byte_tokens_shown);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    T_DONE();
}
