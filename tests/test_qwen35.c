/* qwen35 (Qwen3.5): hybrid models of Gated DeltaNet layers and a full
 * attention layer with a gated query every fourth. Synthetic GGUF files
 * written with the project's writer, against the plain double-precision
 * reference (ref_forward.h: the delta rule written plainly); prefill then
 * decode against one token at a time and against chunks; the recurrent
 * state across chat turns, its reset and its rebuild by trim; the refused
 * variants; the blob's new fields and tasks, each mutation refused. */
#include <math.h>
#include <unistd.h>

#include "blob/blob.h"
#include "blob/format.h"
#include "common/dtype.h"
#include "compiler/compiler.h"
#include "format/gguf.h"
#include "format/model.h"
#include "ref_forward.h"
#include "runtime/runtime.h"
#include "staticlm.h"
#include "text/tokenizer.h"
#include "t.h"
#include "tok_bin.h"
#include "rig.h"
#include "blob_image.h"
#include "ref_check.h"

/* The shape of a test file: 4 layers (DeltaNet 0-2, full attention 3),
 * dim 64, 2 query heads of 32 (8 rotated), 1 KV head; DeltaNet: 2 key and
 * 4 value heads of 16 (the tiled value order matters), conv of 4 taps. */
typedef struct qshape {
    int layers, k_heads, v_heads, state, interval;
    int bad; /* a hostile file: 1 inner_size != v_heads x state, 2 v_heads not a multiple of k_heads,
                3 a recurrent_layers list that disagrees, 4 layer 1 without ssm_a, 5 f16 conv taps,
                6 M-RoPE sections with a pair in the fourth, 7 qwen35moe without experts, 8 ssm_conv 1 */
    int nextn;
} qshape;

static const qshape k_base = {4, 2, 4, 16, 4, 0, 0};
enum { DIM = 64, HEADS = 2, KVH = 1, HD = 32, FFN = 96, VOCAB = 160 };

static uint64_t g_rng = 1;
static double urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((g_rng >> 11) + 0.5) / 9007199254740992.0;
}
static float nrand(void) { return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand())); }

typedef struct bufs {
    void *p[512];
    int n;
} bufs;

/* A tensor [cols, rows] of `type`: bias + scale x normal. */
static void add_t(slm_gguf_writer *w, bufs *b, const char *name, int64_t cols, int64_t rows, uint32_t type, float scale,
                  float bias) {
    const size_t n = (size_t)(cols * rows);
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) f[i] = bias + scale * nrand();
    const uint64_t rb = slm_row_bytes(type, (uint64_t)cols);
    void *data = f;
    if (type != SLM_F32) {
        data = malloc((size_t)(rb * (uint64_t)rows));
        for (int64_t r = 0; r < rows; r++) slm_quantize_row(type, f + r * cols, (uint8_t *)data + r * rb, cols);
        free(f);
    }
    b->p[b->n++] = data;
    int64_t ne[2] = {cols, rows};
    slm_gguf_add_tensor(w, name, type, rows > 1 ? 2 : 1, ne, data, rb * (uint64_t)rows);
}

static int write_q35(const char *path, const qshape *q, uint32_t mt, uint64_t seed) {
    g_rng = seed;
    slm_gguf_writer *w = slm_gguf_writer_new();
    bufs b = {.n = 0};
    const char *A = q->bad == 7 ? "qwen35moe" : "qwen35";
    char k[96], n[64];
#define K(x) (snprintf(k, sizeof k, "%s." x, A), k)
    slm_gguf_set_str(w, "general.architecture", A);
    slm_gguf_set_u32(w, K("embedding_length"), DIM);
    slm_gguf_set_u32(w, K("feed_forward_length"), FFN);
    slm_gguf_set_u32(w, K("block_count"), (uint32_t)(q->layers + q->nextn));
    slm_gguf_set_u32(w, K("attention.head_count"), HEADS);
    slm_gguf_set_u32(w, K("attention.head_count_kv"), KVH);
    slm_gguf_set_u32(w, K("attention.key_length"), HD);
    slm_gguf_set_u32(w, K("attention.value_length"), HD);
    slm_gguf_set_u32(w, K("context_length"), 256);
    slm_gguf_set_f32(w, K("rope.freq_base"), 10000.0f);
    slm_gguf_set_u32(w, K("rope.dimension_count"), HD / 4);
    const int32_t sec[4] = {11, 11, 10, 0}, sec_bad[4] = {1, 1, 0, 2};
    slm_gguf_set_arr(w, K("rope.dimension_sections"), SLM_GGUF_I32, q->bad == 6 ? sec_bad : sec, 4);
    slm_gguf_set_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-6f);
    slm_gguf_set_u32(w, K("ssm.conv_kernel"), q->bad == 8 ? 1 : 4);
    slm_gguf_set_u32(w, K("ssm.state_size"), (uint32_t)q->state);
    slm_gguf_set_u32(w, K("ssm.group_count"), (uint32_t)q->k_heads);
    slm_gguf_set_u32(w, K("ssm.time_step_rank"), (uint32_t)q->v_heads);
    slm_gguf_set_u32(w, K("ssm.inner_size"), (uint32_t)(q->v_heads * q->state + (q->bad == 1 ? 8 : 0)));
    slm_gguf_set_u32(w, K("full_attention_interval"), (uint32_t)q->interval);
    if (q->nextn) slm_gguf_set_u32(w, K("nextn_predict_layers"), (uint32_t)q->nextn);
    if (q->bad == 3) {
        uint8_t rl[16];
        for (int l = 0; l < q->layers + q->nextn; l++) rl[l] = l < q->layers && (l + 1) % q->interval != 0;
        rl[1] = 0;
        slm_gguf_set_arr(w, K("attention.recurrent_layers"), SLM_GGUF_BOOL, rl, (uint64_t)(q->layers + q->nextn));
    }
#undef K
    const float sd = 1.0f / sqrtf((float)DIM);
    const int S = q->state, cd = (2 * q->k_heads + q->v_heads) * S, vd = q->v_heads * S, hv = q->v_heads;
    add_t(w, &b, "token_embd.weight", DIM, VOCAB, mt, 1.0f, 0.0f);
    for (int l = 0; l < q->layers + q->nextn; l++) {
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, l), n)
        add_t(w, &b, NAME("attn_norm.weight"), DIM, 1, SLM_F32, 0.1f, 1.0f);
        if (l < q->layers && (l + 1) % q->interval != 0) {
            add_t(w, &b, NAME("attn_qkv.weight"), DIM, cd, mt, sd, 0.0f);
            add_t(w, &b, NAME("attn_gate.weight"), DIM, vd, mt, sd, 0.0f);
            add_t(w, &b, NAME("ssm_conv1d.weight"), 4, cd, q->bad == 5 ? SLM_F16 : SLM_F32, 0.5f, 0.0f);
            add_t(w, &b, NAME("ssm_dt.bias"), hv, 1, SLM_F32, 0.5f, 0.0f);
            if (!(q->bad == 4 && l == 1)) add_t(w, &b, NAME("ssm_a"), hv, 1, SLM_F32, 0.3f, -0.6f);
            add_t(w, &b, NAME("ssm_beta.weight"), DIM, hv, mt, sd, 0.0f);
            add_t(w, &b, NAME("ssm_alpha.weight"), DIM, hv, mt, sd, 0.0f);
            add_t(w, &b, NAME("ssm_norm.weight"), S, 1, SLM_F32, 0.1f, 1.0f);
            add_t(w, &b, NAME("ssm_out.weight"), vd, DIM, mt, 1.0f / sqrtf((float)vd), 0.0f);
        } else { /* full attention (and the MTP layer, never run) */
            add_t(w, &b, NAME("attn_q.weight"), DIM, 2 * HEADS * HD, mt, sd, 0.0f);
            add_t(w, &b, NAME("attn_k.weight"), DIM, KVH * HD, mt, sd, 0.0f);
            add_t(w, &b, NAME("attn_v.weight"), DIM, KVH * HD, mt, sd, 0.0f);
            add_t(w, &b, NAME("attn_q_norm.weight"), HD, 1, SLM_F32, 0.1f, 1.0f);
            add_t(w, &b, NAME("attn_k_norm.weight"), HD, 1, SLM_F32, 0.1f, 1.0f);
            add_t(w, &b, NAME("attn_output.weight"), HEADS * HD, DIM, mt, 1.0f / sqrtf((float)(HEADS * HD)), 0.0f);
        }
        add_t(w, &b, NAME("post_attention_norm.weight"), DIM, 1, SLM_F32, 0.1f, 1.0f);
        add_t(w, &b, NAME("ffn_gate.weight"), DIM, FFN, mt, sd, 0.0f);
        add_t(w, &b, NAME("ffn_up.weight"), DIM, FFN, mt, sd, 0.0f);
        add_t(w, &b, NAME("ffn_down.weight"), FFN, DIM, mt, 1.0f / sqrtf((float)FFN), 0.0f);
#undef NAME
    }
    add_t(w, &b, "output_norm.weight", DIM, 1, SLM_F32, 0.1f, 1.0f);
    add_t(w, &b, "output.weight", DIM, VOCAB, mt, sd * 4.0f, 0.0f);
    slm_err err = {0};
    const int ok = slm_gguf_write(w, path, &err) == SLM_OK;
    CHECKF(ok, "%s: %s", path, err.msg);
    slm_gguf_writer_free(w);
    for (int i = 0; i < b.n; i++) free(b.p[i]);
    return ok;
}

static void ids_of(int32_t *ids, int n, uint64_t seed) {
    g_rng = seed;
    for (int i = 0; i < n; i++) ids[i] = 1 + (int32_t)(urand() * (VOCAB - 2));
}

/* Every position's logits against the reference: a prefill of 1, 5 and all
 * 24 rows (chunks of 8: the state carried from chunk to chunk), then decode;
 * one thread and two (the heads' tiles on both); F32 and Q8_0 weights. */
static void test_vs_reference(void) {
    int32_t ids[24];
    ids_of(ids, 24, 7);
    CHECK(write_q35("q35.gguf", &k_base, SLM_F32, 3));
    static const int firsts[3] = {1, 5, 24};
    for (int f = 0; f < 3; f++)
        for (int th = 1; th <= 2; th++) {
            const double e = rig_vs_reference("q35.gguf", ids, 24, firsts[f], 8, th);
            CHECKF(e < 2e-5, "f32, prefill %d, %d threads: relative error %g", firsts[f], th, e);
        }
    qshape q = k_base;
    q.k_heads = q.v_heads = 2; /* one value head per key head; another interval */
    q.interval = 2;
    CHECK(write_q35("q35b.gguf", &q, SLM_F16, 4));
    const double e = rig_vs_reference("q35b.gguf", ids, 24, 9, 16, 1);
    CHECKF(e < 1e-3, "f16, interval 2: relative error %g", e);
    unlink("q35b.gguf");
}

/* Prefill of all the ids then the logits of the last equal a prefill of one
 * id then decode steps (the same bits are not expected: the prefill and
 * decode kernels differ; 1e-5 of the range), and a single prefill equals
 * chunked ones (--max-prompt-len 4: six chunks). */
static void test_prefill_vs_decode(void) {
    int32_t ids[24];
    ids_of(ids, 24, 9);
    rig a, b, c;
    if (!rig_open(&a, "q35.gguf", 24, 8) || !rig_open(&b, "q35.gguf", 24, 8) || !rig_open(&c, "q35.gguf", 4, 28)) return;
    slm_err err = {0};
    /* KV rows only for the attention layer (3): the DeltaNet layers keep their state instead */
    const size_t rb = (size_t)slm_row_bytes((uint32_t)a.rt.kv_type, KVH * HD);
    CHECKF(a.rt.kv_rb[0] == 0 && a.rt.kv_rb[1] == 0 && a.rt.kv_rb[2] == 0 && a.rt.kv_rb[3] == rb &&
               a.rt.kv_bytes == 2 * (uint64_t)a.rt.cap * rb,
           "KV rows %zu %zu %zu %zu (want 0 0 0 %zu), %llu bytes", a.rt.kv_rb[0], a.rt.kv_rb[1], a.rt.kv_rb[2],
           a.rt.kv_rb[3], rb, (unsigned long long)a.rt.kv_bytes);
    CHECK(slm_rt_prefill(&a.rt, ids, 24, &err) == SLM_OK);
    CHECK(slm_rt_prefill(&b.rt, ids, 1, &err) == SLM_OK);
    for (int p = 1; p < 24; p++) CHECK(slm_rt_decode(&b.rt, ids[p], &err) == SLM_OK);
    CHECK(slm_rt_prefill(&c.rt, ids, 24, &err) == SLM_OK && c.rt.chunks == 6);
    double md = 0, mc = 0, mr = 1e-6;
    for (int i = 0; i < VOCAB; i++) {
        md = fmax(md, fabs(a.rt.logits[i] - b.rt.logits[i]));
        mc = fmax(mc, fabs(a.rt.logits[i] - c.rt.logits[i]));
        mr = fmax(mr, fabs(a.rt.logits[i]));
    }
    CHECKF(md / mr < 1e-5 && mc / mr < 1e-5, "prefill vs decode %g, vs chunks %g", md / mr, mc / mr);
    /* reset zeroes the state: the same prompt again gives the same logits, bit for bit */
    float keep[VOCAB];
    memcpy(keep, a.rt.logits, sizeof keep);
    slm_rt_reset(&a.rt);
    CHECK(slm_rt_prefill(&a.rt, ids, 24, &err) == SLM_OK);
    CHECK(!memcmp(keep, a.rt.logits, sizeof keep));
    /* trim rebuilds the state: keep 10 rows, decode ids 10.. again: as if never past 10 */
    CHECK(slm_rt_trim(&b.rt, 10) == SLM_OK && b.rt.num_stored == 10);
    for (int p = 10; p < 24; p++) CHECK(slm_rt_decode(&b.rt, ids[p], &err) == SLM_OK);
    md = 0;
    for (int i = 0; i < VOCAB; i++) md = fmax(md, fabs(a.rt.logits[i] - b.rt.logits[i]));
    CHECKF(md / mr < 1e-5, "after trim to 10 and decoding again: %g", md / mr);
    rig_close(&a);
    rig_close(&b);
    rig_close(&c);
}

/* The engine tests load: q35_tok.bin, 8 prefill rows, 56 more, one thread;
 * checkpoints: --checkpoints (0: the default). */
static slm_options engine_opts(int prefix_mb, const char *draft, int n_seqs, int checkpoints) {
    slm_options o = slm_default_options();
    o.tokenizer_path = "q35_tok.bin";
    o.max_prompt_len = 8;
    o.min_response_len = 56;
    o.n_threads = 1;
    o.prefix_cache_mb = prefix_mb;
    o.draft_path = draft;
    o.n_seqs = n_seqs;
    o.recur_checkpoints = checkpoints;
    return o;
}

static slm_engine *load_engine(const char *path, int prefix_mb, const char *draft, int n_seqs) {
    slm_options o = engine_opts(prefix_mb, draft, n_seqs, 0);
    slm_engine *e = NULL;
    if (slm_load(&e, path, &o) != SLM_OK) {
        if (!draft) CHECKF(0, "load: %s", slm_last_error(e));
        slm_free(e);
        return NULL;
    }
    return e;
}

/* n greedy tokens of a session into out. */
static int greedy(slm_session *s, int32_t *out, int n) {
    for (int i = 0; i < n; i++)
        if (slm_session_next(s, &out[i], NULL) != SLM_OK) return 0;
    return 1;
}

/* A conversation keeps its state between turns: turn two equals a reset
 * session given the whole history at once; a new prompt that shares only
 * part of the history starts over (the state cannot be cut back) and equals
 * a fresh start, unless the cut is at or after the last prompt's end: its
 * checkpoint. Two sessions of an engine of two sequences (serve's slots)
 * decoded together through the batch program, each with its own state, give
 * what each gives alone. Speculative decoding is refused, as target and as
 * draft. */
static void test_sessions(void) {
    if (!write_tok("q35_tok.bin", VOCAB)) return;
    slm_engine *e = load_engine("q35.gguf", 16, NULL, 2);
    if (!e) return;
    slm_session_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.ignore_eos = 1;
    slm_session *s1 = NULL, *s2 = NULL;
    CHECK(slm_session_new(e, &cfg, &s1) == SLM_OK && slm_session_new(e, &cfg, &s2) == SLM_OK);
    if (!s1 || !s2) {
        slm_session_free(s1);
        slm_free(e);
        return;
    }
    int32_t t1[6], t2[6], hist[64], r1[5], r2[5], q2[5], a[5], b[5];
    ids_of(t1, 6, 21);
    ids_of(t2, 6, 22);
    CHECK(slm_session_feed(s1, t1, 6) == SLM_OK && greedy(s1, r1, 5) && slm_session_feed(s1, t2, 6) == SLM_OK &&
          greedy(s1, r2, 5));
    int nh = 0;
    memcpy(hist + nh, t1, sizeof t1), nh += 6;
    memcpy(hist + nh, r1, sizeof r1), nh += 5;
    memcpy(hist + nh, t2, sizeof t2), nh += 6;
    slm_session_reset(s1);
    CHECK(slm_session_set_prompt(s1, hist, nh) == SLM_OK && greedy(s1, q2, 5));
    CHECKF(!memcmp(r2, q2, sizeof r2), "turn two: %d %d %d vs %d %d %d", r2[0], r2[1], r2[2], q2[0], q2[1], q2[2]);
    /* the last turn changed: the held rows share 14 of them; it goes back to the checkpoint 4 rows before
     * the last prompt's end (row 13) */
    hist[14] = (hist[14] + 7) % (VOCAB - 1) + 1;
    CHECK(slm_session_set_prompt(s1, hist, nh) == SLM_OK && greedy(s1, a, 5));
    CHECK(slm_session_set_prompt(s2, hist, nh) == SLM_OK && greedy(s2, b, 5));
    CHECK(!memcmp(a, b, sizeof a));
    /* the checkpoint: a prompt's end keeps its state; a new prompt cut back to it (or a few rows
     * after it) starts from there, not from row 0, and equals a fresh session given it whole */
    {
        int32_t p[12], q[20], x[6], g[5], c1[5], c2[5];
        ids_of(p, 12, 31);
        slm_session_reset(s1);
        CHECK(slm_session_set_prompt(s1, p, 12) == SLM_OK && greedy(s1, g, 5)); /* rows: p, g[0..3] */
        for (int cut = 12; cut <= 14; cut += 2) {
            ids_of(x, 6, 40 + cut);
            memcpy(q, p, sizeof p);
            memcpy(q + 12, g, (size_t)(cut - 12) * sizeof *g);
            memcpy(q + cut, x, sizeof x);
            if (q[cut] == g[cut - 12]) q[cut] = q[cut] % (VOCAB - 1) + 1;
            slm_session_stats st0, st1;
            slm_session_get_stats(s1, &st0);
            CHECK(slm_session_set_prompt(s1, q, cut + 6) == SLM_OK);
            slm_session_get_stats(s1, &st1);
            /* from the checkpoint at the prompt's end: the rows after it prefilled again */
            CHECKF(st1.n_reused - st0.n_reused == 12 && st1.n_prefilled - st0.n_prefilled == cut + 6 - 12,
                   "cut at %d: %d rows kept, %d prefilled", cut, st1.n_reused - st0.n_reused, st1.n_prefilled - st0.n_prefilled);
            CHECK(greedy(s1, c1, 5));
            slm_session_reset(s2);
            CHECK(slm_session_set_prompt(s2, q, cut + 6) == SLM_OK && greedy(s2, c2, 5));
            CHECKF(!memcmp(c1, c2, sizeof c1), "cut at %d: %d %d %d vs %d %d %d", cut, c1[0], c1[1], c1[2], c2[0], c2[1], c2[2]);
            if (cut == 12) { /* back to the first prompt's state for the next cut */
                slm_session_reset(s1);
                CHECK(slm_session_set_prompt(s1, p, 12) == SLM_OK && greedy(s1, g, 5));
            }
        }
    }
    /* both sequences decoded together (the batch program: each row its own state) */
    int32_t alone1[6], alone2[6], both[2], tog1[6], tog2[6];
    slm_session_reset(s1);
    slm_session_reset(s2);
    CHECK(slm_session_set_prompt(s1, t1, 6) == SLM_OK && greedy(s1, alone1, 6));
    CHECK(slm_session_set_prompt(s2, t2, 6) == SLM_OK && greedy(s2, alone2, 6));
    slm_session_reset(s1);
    slm_session_reset(s2);
    CHECK(slm_session_set_prompt(s1, t1, 6) == SLM_OK && slm_session_set_prompt(s2, t2, 6) == SLM_OK);
    slm_session *const ss[2] = {s1, s2};
    for (int i = 0; i < 6; i++) {
        CHECK(slm_session_next_batch(ss, 2, both, NULL, NULL) == SLM_OK);
        tog1[i] = both[0];
        tog2[i] = both[1];
    }
    CHECKF(!memcmp(alone1, tog1, sizeof tog1) && !memcmp(alone2, tog2, sizeof tog2), "batched: %d %d vs %d %d", alone1[1],
           alone2[1], tog1[1], tog2[1]);
    slm_session_free(s1);
    slm_session_free(s2);
    slm_free(e);
    CHECK(load_engine("q35.gguf", 0, "q35.gguf", 1) == NULL);
    unlink("q35_tok.bin");
}

/* rows reused and prefilled by set_prompt(ids[n]) on s; the first n_gen greedy tokens after it into out */
static void prompt_rows(slm_session *s, const int32_t *ids, int n, int *reused, int *prefilled, int32_t *out, int n_gen) {
    slm_session_stats a, b;
    slm_session_get_stats(s, &a);
    CHECK(slm_session_set_prompt(s, ids, n) == SLM_OK);
    slm_session_get_stats(s, &b);
    *reused = b.n_reused - a.n_reused;
    *prefilled = b.n_prefilled - a.n_prefilled;
    CHECK(greedy(s, out, n_gen));
}

/* The checkpoints of a conversation (--checkpoints): besides the one at a
 * prompt's end, one 4 rows before it; a next prompt that renders the last
 * generation prompt otherwise (Qwen3.5 writes "<think>\n" in the generation
 * prompt, not in the history) resumes from it, an edit of the last user
 * message from an older one while the slots hold it, a stepped prompt
 * (serve's pieces) takes its checkpoint across pieces; every result equals a
 * fresh session given the prompt whole. One slot (--checkpoints 1) keeps the
 * prompt's end only; 17 is refused; the budget counts each. */
static void test_checkpoints(void) {
    if (!write_tok("q35_tok.bin", VOCAB)) return;
    slm_engine *e = load_engine("q35.gguf", 0, NULL, 2);
    if (!e) return;
    slm_session_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.ignore_eos = 1;
    slm_session *s = NULL, *f = NULL;
    CHECK(slm_session_new(e, &cfg, &s) == SLM_OK && slm_session_new(e, &cfg, &f) == SLM_OK);
    if (!s || !f) {
        slm_session_free(s);
        slm_free(e);
        return;
    }
    int32_t p[20], q[40], r[4], a[5], b[5];
    int reused, pre, fr, fp;
    ids_of(p, 20, 51); /* its last 5: the "generation prompt" */
    prompt_rows(s, p, 20, &reused, &pre, r, 4);
    /* turn two: p without its last two rows, the reply, a user turn, the generation prompt again */
    memcpy(q, p, 18 * sizeof *q);
    memcpy(q + 18, r, sizeof r);
    ids_of(q + 22, 6, 52);
    memcpy(q + 28, p + 15, 5 * sizeof *q);
    if (q[18] == p[18]) q[18] = q[18] % (VOCAB - 1) + 1;
    prompt_rows(s, q, 33, &reused, &pre, a, 5);
    prompt_rows(f, q, 33, &fr, &fp, b, 5);
    CHECKF(reused == 16 && pre == 33 - 16, "turn two: %d rows reused, %d prefilled (want 16, 17)", reused, pre);
    CHECKF(!memcmp(a, b, sizeof a) && fr == 0, "turn two: %d %d %d vs fresh %d %d %d", a[0], a[1], a[2], b[0], b[1], b[2]);
    /* the last user turn edited: back to the checkpoint at row 16, kept beside turn two's 29 and 33 */
    q[24] = q[24] % (VOCAB - 1) + 1;
    prompt_rows(s, q, 33, &reused, &pre, a, 5);
    slm_session_reset(f);
    prompt_rows(f, q, 33, &fr, &fp, b, 5);
    CHECKF(reused == 16, "edited turn: %d rows reused (want 16)", reused);
    CHECKF(!memcmp(a, b, sizeof a), "edited turn: %d %d %d vs fresh %d %d %d", a[0], a[1], a[2], b[0], b[1], b[2]);
    /* a stepped prompt of 23 in pieces of 5: the piece that would pass row 19 stops there */
    int32_t w[23], c[5], d[5];
    ids_of(w, 23, 53);
    slm_session_reset(s);
    int left = 1;
    CHECK(slm_session_begin_prompt(s, w, 23, 5, &left) == SLM_OK);
    while (left > 0) CHECK(slm_session_prompt_step(s, 5, &left) == SLM_OK);
    CHECK(greedy(s, c, 2));
    w[21] = w[21] % (VOCAB - 1) + 1;
    prompt_rows(s, w, 23, &reused, &pre, c, 5);
    slm_session_reset(f);
    prompt_rows(f, w, 23, &fr, &fp, d, 5);
    CHECKF(reused == 19, "stepped prompt: %d rows reused (want 19)", reused);
    CHECKF(!memcmp(c, d, sizeof c), "after the stepped prompt: %d %d vs fresh %d %d", c[0], c[1], d[0], d[1]);
    slm_session_free(s);
    slm_session_free(f);
    slm_free(e);
    /* one slot: the end only, so the edited turn starts over (and still equals a fresh start) */
    slm_options o = engine_opts(0, NULL, 1, 1);
    e = NULL;
    CHECKF(slm_load(&e, "q35.gguf", &o) == SLM_OK, "--checkpoints 1: %s", slm_last_error(e));
    if (e && slm_session_new(e, &cfg, &s) == SLM_OK) {
        prompt_rows(s, p, 20, &reused, &pre, r, 4);
        q[24] = q[24] % (VOCAB - 1) + 1;
        prompt_rows(s, q, 33, &reused, &pre, a, 5); /* from the checkpoint at 16: taken, then replaced by 20's */
        CHECKF(reused == 0 && pre == 33, "one checkpoint: %d rows reused, %d prefilled (want 0, 33)", reused, pre);
        slm_session_free(s);
    }
    slm_free(e);
    e = NULL;
    o.recur_checkpoints = SLM_RT_SNAPS_MAX + 1;
    CHECK(slm_load(&e, "q35.gguf", &o) != SLM_OK && strstr(slm_last_error(e), "--checkpoints 17"));
    slm_free(e);
    /* the memory budget: each checkpoint is one more state per sequence */
    rig rg;
    if (rig_open(&rg, "q35.gguf", 8, 56)) {
        uint64_t n1 = 0, n3 = 0;
        slm_err err = {0};
        CHECK(slm_rt_budget(&rg.c, "q35", -1, 2, 1, 0, &n1, &err) == SLM_OK &&
              slm_rt_budget(&rg.c, "q35", -1, 2, 3, 0, &n3, &err) == SLM_OK);
        CHECKF(n3 - n1 == 2 * 2 * slm_rt_recur_floats(&rg.c.cfg) * sizeof(float), "budget: %llu vs %llu",
               (unsigned long long)n1, (unsigned long long)n3);
        /* and slm_info counts the state with its checkpoints: 2 sequences x (1 + 3) buffers */
        slm_options o3 = engine_opts(0, NULL, 2, 3);
        e = NULL;
        CHECKF(slm_load(&e, "q35.gguf", &o3) == SLM_OK, "--parallel 2 --checkpoints 3: %s", slm_last_error(e));
        if (e) {
            slm_info in;
            slm_get_info(e, &in);
            CHECKF(in.state_bytes == 2 * 4 * slm_rt_recur_floats(&rg.c.cfg) * sizeof(float), "state_bytes %zu",
                   in.state_bytes);
        }
        slm_free(e);
        rig_close(&rg);
    }
    unlink("q35_tok.bin");
}

/* The prefix cache with recurrent layers: a prompt's prefix shared with an
 * earlier prompt (a system prompt) is kept with the state after it by the
 * second conversation and restored whole by the third on, through
 * set_prompt and through a stepped prompt (serve's pieces), each reply
 * equal to an engine's without the cache; a prefix shorter than 32 rows
 * is not kept. */
static void test_prefix_cache(void) {
    if (!write_tok("q35_tok.bin", VOCAB)) return;
    slm_engine *e = load_engine("q35.gguf", 16, NULL, 2), *r = load_engine("q35.gguf", 0, NULL, 1);
    slm_session_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.ignore_eos = 1;
    slm_session *a = NULL, *b = NULL, *f = NULL;
    if (!e || !r || slm_session_new(e, &cfg, &a) || slm_session_new(e, &cfg, &b) || slm_session_new(r, &cfg, &f)) {
        CHECK(0);
        slm_session_free(a);
        slm_session_free(b);
        slm_free(e);
        slm_free(r);
        return;
    }
    int32_t p[4][50], x[5], y[5];
    for (int i = 0; i < 4; i++) {
        ids_of(p[i], 40, 61); /* the shared "system prompt" */
        ids_of(p[i] + 40, 10, 70 + (uint64_t)i);
        if (i && p[i][40] == p[0][40]) p[i][40] = p[i][40] % (VOCAB - 1) + 1;
    }
    int reused, pre, fr, fp;
    for (int i = 0; i < 4; i++) {
        slm_session *s = i % 2 ? b : a;
        slm_session_reset(s); /* a new conversation on the slot: its own rows are no use */
        slm_session_stats s0, s1;
        slm_session_get_stats(s, &s0);
        if (i < 3) {
            prompt_rows(s, p[i], 50, &reused, &pre, x, 5);
        } else { /* serve's way: pieces of 7 */
            int left = 1;
            CHECK(slm_session_begin_prompt(s, p[i], 50, 7, &left) == SLM_OK);
            while (left > 0) CHECK(slm_session_prompt_step(s, 7, &left) == SLM_OK);
            CHECK(greedy(s, x, 5));
        }
        slm_session_get_stats(s, &s1);
        const int cached = s1.n_cached - s0.n_cached;
        /* the first two prefill all (the second keeps the shared 40 rows' state), the rest restore it */
        CHECKF(cached == (i < 2 ? 0 : 40) && s1.n_prefilled - s0.n_prefilled == 50 - cached, "prompt %d: %d rows from the cache",
               i, cached);
        slm_session_reset(f);
        prompt_rows(f, p[i], 50, &fr, &fp, y, 5);
        CHECKF(!memcmp(x, y, sizeof x), "prompt %d: %d %d %d vs without the cache %d %d %d", i, x[0], x[1], x[2], y[0], y[1], y[2]);
    }
    /* a shared prefix of 20 rows: too short to keep */
    int32_t q[2][30];
    for (int i = 0; i < 2; i++) {
        ids_of(q[i], 20, 81);
        ids_of(q[i] + 20, 10, 90 + (uint64_t)i);
        if (i && q[i][20] == q[0][20]) q[i][20] = q[i][20] % (VOCAB - 1) + 1;
    }
    slm_session_stats s0, s1;
    slm_session_get_stats(a, &s0);
    for (int k = 0; k < 3; k++) prompt_rows(a, q[k % 2], 30, &reused, &pre, x, 1), slm_session_reset(a);
    slm_session_get_stats(a, &s1);
    CHECKF(s1.n_cached == s0.n_cached, "a prefix of 20 rows: %d rows from the cache", s1.n_cached - s0.n_cached);
    slm_session_free(a);
    slm_session_free(b);
    slm_session_free(f);
    slm_free(e);
    slm_free(r);
    unlink("q35_tok.bin");
}

/* The keys: interval, heads, MTP layers skipped; hostile files refused
 * naming the key or tensor; a qwen35moe file without its experts refused naming
 * expert_count. */
static void test_config(void) {
    slm_model_file m;
    slm_err err = {0};
    qshape q = k_base;
    q.nextn = 1;
    CHECK(write_q35("q35c.gguf", &q, SLM_F32, 5));
    if (slm_model_open(&m, "q35c.gguf", &err) == SLM_OK) {
        const slm_model_config *c = &m.cfg;
        CHECK(!strcmp(c->arch, "qwen35") && c->n_layers == 4 && c->nextn_layers == 1 && c->recur_interval == 4);
        CHECK(c->ssm_conv == 4 && c->ssm_state == 16 && c->ssm_k_heads == 2 && c->ssm_v_heads == 4 && c->attn_gate == 1);
        CHECK(c->rope_neox && c->qk_norm == 1 && c->rope_dims == HD / 4);
        CHECK(slm_layer_recurrent(c, 0) && slm_layer_recurrent(c, 2) && !slm_layer_recurrent(c, 3));
        slm_model_close(&m);
    } else {
        CHECKF(0, "%s", err.msg);
    }
    static const struct { int bad; const char *want; } cases[] = {
        {1, "ssm.inner_size"}, {2, "ssm_v_heads"}, {3, "attention.recurrent_layers"}, {4, "blk.1.ssm_a"},
        {5, "blk.0.ssm_conv1d.weight"}, {6, "rope.dimension_sections"}, {7, "qwen35moe.expert_count"}, {8, "ssm_conv"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        q = k_base;
        q.bad = cases[i].bad;
        if (q.bad == 2) q.v_heads = 3;
        memset(&err, 0, sizeof err);
        CHECK(write_q35("q35c.gguf", &q, SLM_F32, 5));
        const slm_status s = slm_model_open(&m, "q35c.gguf", &err);
        CHECKF(s != SLM_OK && strstr(err.msg, cases[i].want), "bad %d: %s", q.bad, err.msg);
        if (s == SLM_OK) slm_model_close(&m);
    }
    unlink("q35c.gguf");
}

/* The blob: written, read back and run, the model file's logits bit for bit;
 * the family record's new fields, the state I/O and the recurrent tasks
 * validated: each mutation refused with a message naming it. */
static void test_blob(void) {
    if (!write_tok("q35_tok.bin", VOCAB)) return;
    rig r;
    if (!rig_open(&r, "q35.gguf", 8, 24)) return;
    int32_t ids[20];
    ids_of(ids, 20, 5);
    rig_blob_trip(&r, "test_qwen35", "q35_tok.bin", VOCAB, "q35.slmblob", ids, 11, 20);
    rig_close(&r);
    size_t n = 0;
    uint8_t *img = (uint8_t *)t_read_file("q35.slmblob", &n);
    unlink("q35.slmblob");
    unlink("q35_tok.bin");
    uint64_t len = 0, clen = 0;
    uint8_t *tasks = img ? t_blob_section(img, n, ".slm.tasks.prefill.8", &len) : NULL;
    uint8_t *cfg = img ? t_blob_section(img, n, ".slm.config", &clen) : NULL;
    char msg[512];
    int at[5] = {-1, -1, -1, -1, -1}; /* slice, ssm_conv, delta_gate, delta_net, sigmoid swiglu */
    for (uint64_t i = 0; tasks && i < len / 160; i++) {
        const uint8_t *e = tasks + i * 160;
        int32_t a;
        memcpy(&a, e + 28, 4);
        const int k = e[0] == SLM_T_SLICE ? 0 : e[0] == SLM_T_SSM_CONV ? 1 : e[0] == SLM_T_DELTA_GATE ? 2
                    : e[0] == SLM_T_DELTA_NET ? 3 : e[0] == SLM_T_SWIGLU && a == 1 ? 4 : -1;
        if (k >= 0 && at[k] < 0) at[k] = (int)i;
    }
    CHECKF(tasks && cfg && clen == BLOB_CONFIG_SIZE && at[0] >= 0 && at[1] >= 0 && at[2] >= 0 && at[3] >= 0 && at[4] >= 0,
           "config %llu bytes; tasks %d %d %d %d %d", (unsigned long long)clen, at[0], at[1], at[2], at[3], at[4]);
    if (!tasks || !cfg || clen != BLOB_CONFIG_SIZE || at[0] < 0 || at[1] < 0 || at[2] < 0 || at[3] < 0 || at[4] < 0) {
        free(img);
        return;
    }
    CHECKF(t_blob_opens(img, n, "q35.blob", msg, sizeof msg), "pristine: %s", msg);
    static const int F = 224 + 152; /* the family record's qwen35 fields in .slm.config (gemma4's after them) */
    /* task fields: 12 n, 16 k, 20 n0, 24 n1, 28 a, 32 b, 36 c, 40 f0, 48 window; refs at 56 + 16 x k */
    static const struct { int task, off; int32_t v; const char *want; } muts[] = {
        {0, 28, 40, "runs of"},                  /* slice: taken beyond the run */
        {0, 16, 99, "incoherent"},               /* slice: source width */
        {1, 36, 3, "taps"},                      /* conv: not the config's taps */
        {1, 24, 1 << 20, "channels"},            /* conv: tile beyond */
        {1, 48, 2, "sequences 2"},               /* conv: two sequences of state */
        {1, 16, 7, "region 7"},                  /* conv: region */
        {1, 56 + 16 + 2, 0, "conv_state"},       /* conv: src1 another I/O (io index 0) */
        {2, 12, 5, "5 heads"},                   /* gate: heads */
        {3, 28, 1, "not the config's"},          /* delta: key heads */
        {3, 24, 5, "heads [0,5)"},               /* delta: heads beyond */
        {3, 56 + 48 + 2, 0, "recurrent_state"},  /* delta: src3 another I/O */
        {3, 56 + 48 + 8, 1 << 30, "beyond"},     /* delta: the state's offset */
        {4, 28, 2, "gate kind"},                 /* swiglu: a 2 */
        {-1, F + 0, 0, "ssm_conv 4 out of range"}, /* config: no recurrent layers but their shapes */
        {-1, F + 4, 1, "ssm_conv"},
        {-1, F + 8, 513, "ssm_state"},
        {-1, F + 16, 3, "ssm_v_heads"},
        {-1, F + 20, 2, "attn_gate"},
        {-1, F + 24, 256, "gemma4's per-kind layer fields"}, /* config: gemma4's head_dim_swa on qwen35 */
        {-1, F + 24 + 12, 1, "gemma4's per-kind layer fields"}, /* kv_shared */
        {-1, F + 24 + 32, 1, "gemma4's per-kind layer fields"}, /* layer_scale */
    };
    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        uint8_t *e = muts[i].task < 0 ? cfg + muts[i].off : tasks + (size_t)at[muts[i].task] * 160 + muts[i].off;
        uint8_t keep[4];
        memcpy(keep, e, 4);
        if (muts[i].off % 16 == 2 && muts[i].task >= 0) memcpy(e, &muts[i].v, 2); /* an I/O index (u16) */
        else memcpy(e, &muts[i].v, 4);
        CHECKF(!t_blob_opens(img, n, "q35.blob", msg, sizeof msg) && strstr(msg, muts[i].want), "mutation %zu: %s", i,
               msg);
        memcpy(e, keep, 4);
    }
    CHECKF(t_blob_opens(img, n, "q35.blob", msg, sizeof msg), "restored: %s", msg);
    free(img);
}

int main(void) {
    T_RUN(test_vs_reference);
    T_RUN(test_prefill_vs_decode);
    T_RUN(test_sessions);
    T_RUN(test_checkpoints);
    T_RUN(test_prefix_cache);
    T_RUN(test_config);
    T_RUN(test_blob);
    unlink("q35.gguf");
    T_DONE();
}
