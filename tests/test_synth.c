/* staticlm synth: tiny custom shapes written by the CLI round-trip through
 * our GGUF reader and the engine (load, generate), the metadata says what
 * was asked, q4_0 files get llama.cpp's type mix, the vocabulary is copied
 * (truncated or padded with unique tokens; SentencePiece or byte-level BPE,
 * whose synth file tokenizes the vocabulary's own test pairs alike), and a
 * seed gives the same bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "common/dtype.h"
#include "format/gguf.h"
#include "compiler/compiler.h"
#include "format/model.h"
#include "staticlm.h"
#include "t.h"
#include "run_cmd.h"
#include "vocab_pairs.h"

#define VOCAB_FILE T_SHARED("vocab/ggml-vocab-llama-spm.gguf")
#define GPT2_VOCAB T_SHARED("vocab/ggml-vocab-gpt-2.gguf")

static char g_dir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* Run `staticlm synth ARGS -o OUT --vocab-file VOCAB` (VOCAB NULL: no
 * --vocab-file); returns the exit code (and prints the command's output
 * when it fails unexpectedly). */
static int synth_run_v(const char *args, const char *out, const char *vocab, int expect_fail) {
    char cmd[2048], vf[600] = "";
    if (vocab) snprintf(vf, sizeof vf, " --vocab-file \"%s\"", vocab);
    snprintf(cmd, sizeof cmd, "\"%s\" synth %s -o \"%s\"%s >\"%s/synth.log\" 2>&1", SLM_CLI_PATH, args, out, vf,
             g_dir);
    int rc = system(cmd);
    if (rc != 0 && !expect_fail) {
        char log[512];
        snprintf(log, sizeof log, "%s/synth.log", g_dir);
        char *text = t_read_file(log, NULL);
        fprintf(stderr, "  synth %s: exit %d\n%s", args, rc, text ? text : "");
        free(text);
    }
    return rc;
}
#define synth_run(args, out, expect_fail) synth_run_v(args, out, VOCAB_FILE, expect_fail)
#define synth(args, out) synth_run(args, out, 0)
#define synth_bad(args, out) synth_run(args, out, 1)

typedef struct opened {
    slm_map map;
    slm_gguf *g;
} opened;

static int open_gguf(opened *o, const char *path) {
    memset(o, 0, sizeof *o);
    slm_err err;
    memset(&err, 0, sizeof err);
    if (slm_map_file(&o->map, path, &err) || slm_gguf_open(&o->g, o->map.data, o->map.size, path, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        slm_unmap(&o->map);
        return 0;
    }
    return 1;
}

static void close_gguf(opened *o) {
    slm_gguf_close(o->g);
    slm_unmap(&o->map);
}

static uint32_t u32(const slm_gguf *g, const char *key) {
    uint32_t v = 0xFFFFFFFFu;
    slm_gguf_get_u32(g, key, &v);
    return v;
}

static int tensor_type(const slm_gguf *g, const char *name) {
    const slm_gguf_tensor *t = slm_gguf_find_tensor(g, name);
    return t ? (int)t->type : -1;
}

static int tok_eq(const slm_gguf *g, uint64_t i, const char *s) {
    slm_gguf_str v;
    return slm_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &v) && slm_gguf_str_eq(v, s);
}

static int count_piece(void *ud, int id, const char *piece, int is_prompt) {
    (void)id;
    (void)piece;
    if (!is_prompt) (*(int *)ud)++;
    return 0;
}

/* Load, check the engine's view of the shape, generate n tokens greedily. */
static void load_and_generate(const char *path, int dim, int layers, int heads, int kv_heads, int ffn, int vocab) {
    slm_options opt = slm_default_options();
    opt.max_prompt_len = 16;
    opt.min_response_len = 16;
    opt.n_threads = 2;
    slm_engine *e = NULL;
    slm_status s = slm_load(&e, path, &opt);
    CHECKF(s == SLM_OK, "%s", slm_last_error(e));
    if (s == SLM_OK) {
        slm_info in;
        slm_get_info(e, &in);
        CHECK(in.dim == dim && in.n_layers == layers && in.n_heads == heads && in.n_kv_heads == kv_heads);
        CHECK(in.hidden_dim == ffn && in.vocab_size == vocab && in.bos_id == 1 && in.eos_id == 2);
        int n = 0;
        slm_gen_stats st;
        s = slm_generate(e, "Once upon a time", 8, NULL, 1, count_piece, &n, &st);
        CHECKF(s == SLM_OK, "%s", slm_last_error(e));
        CHECK(n == 8 && st.n_generated == 8 && st.n_prompt > 1);
    }
    slm_free(e);
}

static void test_custom_f32_roundtrip(void) {
    const char *f = tmp_path("custom-f32.gguf");
    CHECK(synth("--shape custom --type f32 --seed 7", f) == 0);
    opened o;
    if (!open_gguf(&o, f)) {
        CHECK(0);
        return;
    }
    slm_gguf_str a;
    CHECK(slm_gguf_get_str(o.g, "general.architecture", &a) && slm_gguf_str_eq(a, "llama"));
    CHECK(u32(o.g, "llama.embedding_length") == 64 && u32(o.g, "llama.block_count") == 2);
    CHECK(u32(o.g, "llama.attention.head_count") == 4 && u32(o.g, "llama.attention.head_count_kv") == 2);
    CHECK(u32(o.g, "llama.feed_forward_length") == 160 && u32(o.g, "llama.vocab_size") == 512);
    CHECK(u32(o.g, "llama.context_length") == 256 && u32(o.g, "llama.rope.dimension_count") == 16);
    CHECK(u32(o.g, "general.file_type") == 0);
    float eps = 0, base = 0;
    CHECK(slm_gguf_get_f32(o.g, "llama.attention.layer_norm_rms_epsilon", &eps) && fabsf(eps - 1e-5f) < 1e-9f);
    CHECK(slm_gguf_get_f32(o.g, "llama.rope.freq_base", &base) && base == 10000.0f);
    slm_gguf_type et;
    uint64_t n = 0;
    CHECK(slm_gguf_get_arr(o.g, "tokenizer.ggml.tokens", &et, &n, NULL) && et == SLM_GGUF_STRING && n == 512);
    CHECK(tok_eq(o.g, 0, "<unk>") && tok_eq(o.g, 1, "<s>") && tok_eq(o.g, 2, "</s>") && tok_eq(o.g, 3, "<0x00>"));
    CHECK(u32(o.g, "tokenizer.ggml.bos_token_id") == 1 && u32(o.g, "tokenizer.ggml.eos_token_id") == 2);
    /* 1 + 9 per layer + output_norm + output */
    CHECK(slm_gguf_n_tensors(o.g) == 2 + 2 * 9 + 1);
    CHECK(tensor_type(o.g, "blk.1.ffn_down.weight") == SLM_F32 && tensor_type(o.g, "output.weight") == SLM_F32);
    /* norms are ones; weights have a small std */
    const slm_gguf_tensor *t = slm_gguf_find_tensor(o.g, "blk.0.attn_norm.weight");
    CHECK(t && t->ne[0] == 64 && ((const float *)t->data)[0] == 1.0f && ((const float *)t->data)[63] == 1.0f);
    t = slm_gguf_find_tensor(o.g, "blk.0.ffn_gate.weight");
    if (t) {
        const float *w = t->data;
        double s = 0, s2 = 0;
        const int64_t cnt = t->ne[0] * t->ne[1];
        for (int64_t i = 0; i < cnt; i++) s += w[i], s2 += (double)w[i] * w[i];
        double mean = s / cnt, sd = sqrt(s2 / cnt - mean * mean);
        CHECKF(fabs(mean) < 0.002 && fabs(sd - 0.02) < 0.002, "mean %g std %g", mean, sd);
    }
    close_gguf(&o);
    load_and_generate(f, 64, 2, 4, 2, 160, 512);
}

static void test_same_seed_same_bytes(void) {
    const char *a = tmp_path("seed-a.gguf"), *b = tmp_path("seed-b.gguf"), *c = tmp_path("seed-c.gguf");
    CHECK(synth("--shape custom --type q8_0 --seed 3", a) == 0);
    CHECK(synth("--shape custom --type q8_0 --seed 3", b) == 0);
    CHECK(synth("--shape custom --type q8_0 --seed 4", c) == 0);
    size_t la = 0, lb = 0, lc = 0;
    char *da = t_read_file(a, &la), *db = t_read_file(b, &lb), *dc = t_read_file(c, &lc);
    CHECK(da && db && dc && la == lb && la == lc);
    if (da && db && dc && la == lb && la == lc) {
        CHECK(memcmp(da, db, la) == 0);
        CHECK(memcmp(da, dc, la) != 0);
    }
    free(da);
    free(db);
    free(dc);
    opened o;
    if (open_gguf(&o, a)) {
        CHECK(u32(o.g, "general.file_type") == 7 && u32(o.g, "general.quantization_version") == 2);
        CHECK(tensor_type(o.g, "token_embd.weight") == SLM_Q8_0 && tensor_type(o.g, "output.weight") == SLM_Q8_0);
        CHECK(tensor_type(o.g, "blk.0.attn_q.weight") == SLM_Q8_0);
        CHECK(tensor_type(o.g, "blk.0.ffn_norm.weight") == SLM_F32);
        close_gguf(&o);
    }
    load_and_generate(a, 64, 2, 4, 2, 160, 512);
}

/* Q4_0 files mirror llama.cpp's mix: output Q6_K when its width is a multiple
 * of 256, else Q8_0; the tied embedding is the output. */
static void test_q4_0_mix(void) {
    const char *u = tmp_path("q4-untied.gguf"), *t = tmp_path("q4-tied.gguf");
    CHECK(synth("--shape custom --type q4_0 --dim 256 --heads 4 --kv-heads 1 --ffn 512 --n-vocab 300 --untied", u) ==
          0);
    CHECK(synth("--shape custom --type q4_0 --tied", t) == 0);
    opened o;
    if (open_gguf(&o, u)) {
        CHECK(u32(o.g, "general.file_type") == 2);
        CHECK(tensor_type(o.g, "token_embd.weight") == SLM_Q4_0);
        CHECK(tensor_type(o.g, "output.weight") == SLM_Q6_K);
        CHECK(tensor_type(o.g, "blk.0.attn_k.weight") == SLM_Q4_0 && tensor_type(o.g, "blk.1.ffn_down.weight") == SLM_Q4_0);
        close_gguf(&o);
    }
    if (open_gguf(&o, t)) {
        CHECK(tensor_type(o.g, "output.weight") == -1);
        CHECK(tensor_type(o.g, "token_embd.weight") == SLM_Q8_0); /* 64 is not a multiple of 256 */
        CHECK(tensor_type(o.g, "blk.0.ffn_up.weight") == SLM_Q4_0);
        close_gguf(&o);
    }
    /* the engine runs them once Q4_0/Q6_K weights are supported */
    const char *files[2] = {u, t};
    const int dims[2] = {256, 64}, heads[2][2] = {{4, 1}, {4, 2}}, ffn[2] = {512, 160}, voc[2] = {300, 512};
    for (int i = 0; i < 2; i++) {
        slm_engine *e = NULL;
        slm_options opt = slm_default_options();
        opt.max_prompt_len = 16;
        opt.min_response_len = 16;
        slm_status s = slm_load(&e, files[i], &opt);
        if (s == SLM_ERR_UNSUPPORTED) {
            fprintf(stderr, "  note: %s not loaded yet: %s\n", files[i], slm_last_error(e));
            slm_free(e);
            continue;
        }
        slm_free(e);
        load_and_generate(files[i], dims[i], 2, heads[i][0], heads[i][1], ffn[i], voc[i]);
    }
}

/* Q4_K_M files mirror llama.cpp's mix: Q4_K, with Q6_K for the output and
 * for attn_v / ffn_down of the layers use_more_bits picks (8 layers: 0, 3,
 * 6, 7); they load repacked (q4_k_r16, q6_k_r16) and generate; K-quant
 * matrices of other widths fall back to Q5_0 / Q8_0 (q5_0_r16 when repacked). */
static void test_q4_k_m_mix(void) {
    const char *f = tmp_path("q4km.gguf");
    CHECK(synth("--shape custom --type q4_k_m --dim 256 --heads 4 --kv-heads 1 --ffn 512 --layers 8 --n-vocab 320 "
                "--untied", f) == 0);
    opened o;
    if (open_gguf(&o, f)) {
        CHECK(u32(o.g, "general.file_type") == 15);
        CHECK(tensor_type(o.g, "token_embd.weight") == SLM_Q4_K);
        CHECK(tensor_type(o.g, "output.weight") == SLM_Q6_K);
        for (int l = 0; l < 8; l++) {
            char n[64];
            const int more = l == 0 || l == 3 || l == 6 || l == 7;
            snprintf(n, sizeof n, "blk.%d.attn_v.weight", l);
            CHECKF(tensor_type(o.g, n) == (more ? SLM_Q6_K : SLM_Q4_K), "%s", n);
            snprintf(n, sizeof n, "blk.%d.ffn_down.weight", l);
            CHECKF(tensor_type(o.g, n) == (more ? SLM_Q6_K : SLM_Q4_K), "%s", n);
            snprintf(n, sizeof n, "blk.%d.attn_q.weight", l);
            CHECKF(tensor_type(o.g, n) == SLM_Q4_K, "%s", n);
        }
        close_gguf(&o);
    }
    slm_model_file m;
    slm_err err = {0};
    if (slm_model_open(&m, f, &err) == SLM_OK) {
        CHECK(slm_model_repack(&m, &err) == SLM_OK);
        CHECK(slm_model_tensor(&m, "blk.1.attn_q.weight")->type == SLM_Q4_K_R16);
        CHECK(slm_model_tensor(&m, "blk.0.ffn_down.weight")->type == SLM_Q6_K_R16);
        CHECK(slm_model_tensor(&m, "output.weight")->type == SLM_Q6_K_R16);
        slm_model_close(&m);
    }
    load_and_generate(f, 256, 8, 4, 1, 512, 320);
    /* widths not a multiple of 256: Q4_K falls back to Q5_0, Q6_K to Q8_0 */
    const char *g = tmp_path("q4km-64.gguf");
    CHECK(synth("--shape custom --type q4_k_m --untied", g) == 0);
    if (open_gguf(&o, g)) {
        CHECK(tensor_type(o.g, "blk.0.attn_q.weight") == SLM_Q5_0 && tensor_type(o.g, "blk.0.ffn_down.weight") == SLM_Q5_0);
        /* 2 layers: use_more_bits picks layer 1 */
        CHECK(tensor_type(o.g, "blk.1.attn_v.weight") == SLM_Q8_0 && tensor_type(o.g, "blk.1.ffn_down.weight") == SLM_Q8_0);
        CHECK(tensor_type(o.g, "output.weight") == SLM_Q8_0);
        close_gguf(&o);
    }
    if (slm_model_open(&m, g, &err) == SLM_OK) {
        CHECK(slm_model_repack(&m, &err) == SLM_OK);
        CHECK(slm_model_tensor(&m, "blk.1.attn_q.weight")->type == SLM_Q5_0_R16);
        slm_model_close(&m);
    }
    load_and_generate(g, 64, 2, 4, 2, 160, 512);
}

/* --type bf16: every matrix BF16 (GGUF type 30; file type 32, MOSTLY_BF16,
 * no quantization_version, as convert_hf_to_gguf.py --outtype bf16 writes
 * it), norms f32; the values are the f32 file's rounded to bf16 (the same
 * seed); the compiler keeps the matrices BF16 (no repacking) and the
 * engine runs the file. */
static void test_bf16(void) {
    const char *f = tmp_path("bf16.gguf"), *g = tmp_path("bf16-f32.gguf");
    CHECK(synth("--shape custom --type bf16 --dim 128 --ffn 256 --n-vocab 300 --untied --seed 9", f) == 0);
    CHECK(synth("--shape custom --type f32 --dim 128 --ffn 256 --n-vocab 300 --untied --seed 9", g) == 0);
    opened o, r;
    if (open_gguf(&o, f)) {
        CHECK(u32(o.g, "general.file_type") == 32 && u32(o.g, "general.quantization_version") == 0xFFFFFFFFu);
        static const char *const mats[] = {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_v.weight",
                                           "blk.1.attn_output.weight", "blk.1.ffn_down.weight", "output.weight"};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) CHECKF(tensor_type(o.g, mats[i]) == SLM_BF16, "%s", mats[i]);
        CHECK(tensor_type(o.g, "blk.0.attn_norm.weight") == SLM_F32 && tensor_type(o.g, "output_norm.weight") == SLM_F32);
        if (open_gguf(&r, g)) {
            const slm_gguf_tensor *tb = slm_gguf_find_tensor(o.g, "blk.1.ffn_down.weight"),
                                  *tf = slm_gguf_find_tensor(r.g, "blk.1.ffn_down.weight");
            CHECK(tb && tf && tb->ne[0] == 256 && tb->ne[1] == 128 && tf->ne[0] == 256 && tf->ne[1] == 128);
            int bad = 0;
            for (int64_t i = 0; tb && tf && i < 256 * 128; i++) {
                uint16_t h;
                float x;
                memcpy(&h, (const uint8_t *)tb->data + 2 * i, 2);
                memcpy(&x, (const uint8_t *)tf->data + 4 * i, 4);
                bad += h != slm_f32_to_bf16(x);
            }
            CHECKF(bad == 0, "%d bf16 values are not the f32 file's rounded", bad);
            close_gguf(&r);
        }
        close_gguf(&o);
    }
    slm_model_file m;
    slm_err err = {0};
    if (slm_model_open(&m, f, &err) == SLM_OK) {
        CHECK(slm_model_repack(&m, &err) == SLM_OK);
        CHECK(slm_model_tensor(&m, "blk.0.attn_q.weight")->type == SLM_BF16);
        CHECK(slm_model_tensor(&m, "output.weight")->type == SLM_BF16);
        slm_model_close(&m);
    } else
        CHECKF(0, "open: %s", err.msg);
    load_and_generate(f, 128, 2, 4, 2, 256, 300);
}

/* The compiler's repacking of a Q4_0 file's matrices: types become *_r16,
 * an untied embedding stays, a second call changes nothing; matrices that
 * share bytes (a malformed file) are refused with their names. */
static void test_repack_model(void) {
    const char *f = tmp_path("q4-repack.gguf");
    CHECK(synth("--shape custom --type q4_0 --dim 256 --heads 4 --kv-heads 1 --ffn 512 --n-vocab 320 --untied", f) == 0);
    slm_model_file m;
    slm_err err = {0};
    if (slm_model_open(&m, f, &err) != SLM_OK) {
        CHECKF(0, "open: %s", err.msg);
        return;
    }
    CHECK(slm_model_repack(&m, &err) == SLM_OK);
    CHECK(slm_model_tensor(&m, "blk.0.attn_q.weight")->type == SLM_Q4_0_R16);
    CHECK(slm_model_tensor(&m, "output.weight")->type == SLM_Q6_K_R16);
    CHECK(slm_model_tensor(&m, "token_embd.weight")->type == SLM_Q4_0);
    const slm_tensor *q = slm_model_tensor(&m, "blk.1.attn_q.weight");
    uint8_t *before = malloc(q->nbytes);
    memcpy(before, q->data, q->nbytes);
    CHECK(slm_model_repack(&m, &err) == SLM_OK); /* idempotent */
    CHECK(memcmp(before, q->data, q->nbytes) == 0);
    free(before);
    slm_model_close(&m);
    if (slm_model_open(&m, f, &err) != SLM_OK) return;
    slm_tensor *a = (slm_tensor *)slm_model_tensor(&m, "blk.0.attn_output.weight");
    slm_tensor *b = (slm_tensor *)slm_model_tensor(&m, "blk.1.attn_output.weight");
    b->data = (const uint8_t *)a->data + 64; /* as if the file's offsets overlapped */
    memset(&err, 0, sizeof err);
    CHECK(slm_model_repack(&m, &err) == SLM_ERR_FORMAT);
    CHECKF(strstr(err.msg, "attn_output.weight") && strstr(err.msg, "share data bytes"), "%s", err.msg);
    slm_model_close(&m);
}

/* A vocabulary bigger than the SPM file is padded with unique normal tokens;
 * the tokenizer and the engine accept it. */
static void test_padded_vocab(void) {
    const char *f = tmp_path("padded.gguf");
    CHECK(synth("--shape custom --type f16 --dim 32 --heads 2 --kv-heads 1 --ffn 64 --layers 1 --n-vocab 32010 --tied",
                f) == 0);
    opened o;
    if (open_gguf(&o, f)) {
        slm_gguf_type et;
        uint64_t n = 0;
        const void *types = NULL;
        CHECK(slm_gguf_get_arr(o.g, "tokenizer.ggml.tokens", &et, &n, NULL) && n == 32010);
        CHECK(tok_eq(o.g, 32000, "<synth_32000>") && tok_eq(o.g, 32009, "<synth_32009>"));
        CHECK(slm_gguf_get_arr(o.g, "tokenizer.ggml.token_type", &et, &n, &types) && et == SLM_GGUF_I32 &&
              n == 32010);
        if (types) {
            int32_t ty;
            memcpy(&ty, (const char *)types + 4 * 32005, 4);
            CHECK(ty == 1);
        }
        CHECK(tensor_type(o.g, "output.weight") == -1 && tensor_type(o.g, "token_embd.weight") == SLM_F16);
        close_gguf(&o);
    }
    load_and_generate(f, 32, 1, 2, 1, 64, 32010);
}

/* --arch qwen2 adds Q/K/V biases; --arch mistral writes the sliding window. */
static void test_archs(void) {
    const char *q = tmp_path("qwen2.gguf"), *m = tmp_path("mistral.gguf");
    CHECK(synth("--shape custom --arch qwen2 --type q8_0 --tied", q) == 0);
    CHECK(synth("--shape custom --arch mistral --sliding-window 8 --type f16", m) == 0);
    opened o;
    if (open_gguf(&o, q)) {
        slm_gguf_str a;
        CHECK(slm_gguf_get_str(o.g, "general.architecture", &a) && slm_gguf_str_eq(a, "qwen2"));
        CHECK(u32(o.g, "qwen2.embedding_length") == 64 && u32(o.g, "qwen2.attention.head_count_kv") == 2);
        CHECK(tensor_type(o.g, "blk.1.attn_q.bias") == SLM_F32 && tensor_type(o.g, "blk.1.attn_v.bias") == SLM_F32);
        const slm_gguf_tensor *t = slm_gguf_find_tensor(o.g, "blk.0.attn_k.bias");
        CHECK(t && t->ne[0] == 32 && t->n_dims == 1);
        close_gguf(&o);
    }
    if (open_gguf(&o, m)) {
        slm_gguf_str a;
        CHECK(slm_gguf_get_str(o.g, "general.architecture", &a) && slm_gguf_str_eq(a, "mistral"));
        CHECK(u32(o.g, "mistral.attention.sliding_window") == 8 && u32(o.g, "mistral.block_count") == 2);
        close_gguf(&o);
    }
    load_and_generate(q, 64, 2, 4, 2, 160, 512);
    load_and_generate(m, 64, 2, 4, 2, 160, 512);
    /* olmo-3-7b's family at the custom size: no pre-norms, whole-row Q/K
     * norms, the window as a per-layer list, YaRN's keys */
    const char *o3 = tmp_path("olmo3.gguf");
    CHECK(synth("--shape olmo-3-7b --dim 64 --heads 4 --kv-heads 2 --ffn 160 --layers 4 --n-vocab 512 --ctx 256 "
                "--sliding-window 8 --type f16", o3) == 0);
    if (open_gguf(&o, o3)) {
        slm_gguf_str a, y;
        CHECK(slm_gguf_get_str(o.g, "general.architecture", &a) && slm_gguf_str_eq(a, "olmo2"));
        CHECK(u32(o.g, "olmo2.attention.sliding_window") == 8);
        CHECK(slm_gguf_get_str(o.g, "olmo2.rope.scaling.type", &y) && slm_gguf_str_eq(y, "yarn"));
        CHECK(u32(o.g, "olmo2.rope.scaling.original_context_length") == 256); /* 8192, cut to the context */
        slm_gguf_type et;
        uint64_t n = 0;
        const void *d = NULL;
        CHECK(slm_gguf_get_arr(o.g, "olmo2.attention.sliding_window_pattern", &et, &n, &d) && et == SLM_GGUF_BOOL &&
              n == 4 && ((const uint8_t *)d)[2] == 1 && ((const uint8_t *)d)[3] == 0);
        CHECK(tensor_type(o.g, "blk.0.attn_norm.weight") == -1 && tensor_type(o.g, "blk.0.post_ffw_norm.weight") == SLM_F32);
        const slm_gguf_tensor *t = slm_gguf_find_tensor(o.g, "blk.0.attn_q_norm.weight"),
                              *k = slm_gguf_find_tensor(o.g, "blk.0.attn_k_norm.weight");
        CHECK(t && t->ne[0] == 64 && k && k->ne[0] == 32);
        close_gguf(&o);
    }
    load_and_generate(o3, 64, 4, 4, 2, 160, 512);
    /* granite: Granite 3's multipliers as the converter's keys */
    const char *gr = tmp_path("granite.gguf");
    CHECK(synth("--shape granite-3.3-2b --dim 64 --heads 4 --kv-heads 2 --ffn 160 --layers 2 --n-vocab 512 --ctx 256 "
                "--type q8_0", gr) == 0);
    if (open_gguf(&o, gr)) {
        float v[4] = {0};
        CHECK(slm_gguf_get_f32(o.g, "granite.embedding_scale", &v[0]) && v[0] == 12.0f);
        CHECK(slm_gguf_get_f32(o.g, "granite.attention.scale", &v[1]) && v[1] == 0.015625f);
        CHECK(slm_gguf_get_f32(o.g, "granite.residual_scale", &v[2]) && v[2] == 0.22f);
        CHECK(slm_gguf_get_f32(o.g, "granite.logit_scale", &v[3]) && v[3] == 8.0f);
        close_gguf(&o);
    }
    load_and_generate(gr, 64, 2, 4, 2, 160, 512);
    /* qwen1.5-moe-a2.7b's family: Q/K/V biases, the experts' width, the
     * shared expert's width and its gate [dim] (f32); --shared-ffn only
     * where a family has one */
    const char *q2 = tmp_path("qwen2moe.gguf");
    CHECK(synth("--shape qwen1.5-moe-a2.7b --dim 64 --heads 4 --kv-heads 2 --ffn 160 --layers 2 --n-vocab 512 --ctx 256 "
                "--experts 4 --expert-ffn 32 --shared-ffn 96 --type q8_0", q2) == 0);
    if (open_gguf(&o, q2)) {
        CHECK(u32(o.g, "qwen2moe.expert_count") == 4 && u32(o.g, "qwen2moe.expert_used_count") == 4);
        CHECK(u32(o.g, "qwen2moe.expert_feed_forward_length") == 32 && u32(o.g, "qwen2moe.feed_forward_length") == 160);
        CHECK(u32(o.g, "qwen2moe.expert_shared_feed_forward_length") == 96);
        const slm_gguf_tensor *g = slm_gguf_find_tensor(o.g, "blk.1.ffn_gate_inp_shexp.weight"),
                              *d = slm_gguf_find_tensor(o.g, "blk.1.ffn_down_shexp.weight");
        CHECK(g && g->n_dims == 1 && g->ne[0] == 64 && g->type == SLM_F32);
        CHECK(d && d->ne[0] == 96 && d->ne[1] == 64 && tensor_type(o.g, "blk.0.attn_q.bias") == SLM_F32);
        close_gguf(&o);
    }
    load_and_generate(q2, 64, 2, 4, 2, 32, 512);
    CHECK(synth_bad("--shape custom --arch qwen3moe --experts 4 --shared-ffn 64", tmp_path("bad_shared.gguf")) != 0);
    /* glm-4.5-air's family: a dense layer 0, the selection bias (f32), the
     * shared expert of one expert's width, the MTP layer written (block_count
     * counts it) and not run, half of each head rotated */
    const char *glm = tmp_path("glm4moe.gguf");
    CHECK(synth("--shape glm-4.5-air --dim 64 --heads 4 --kv-heads 2 --ffn 160 --layers 2 --n-vocab 512 --ctx 256 "
                "--experts 4 --experts-used 2 --expert-ffn 32 --type q8_0", glm) == 0);
    if (open_gguf(&o, glm)) {
        CHECK(u32(o.g, "glm4moe.block_count") == 3 && u32(o.g, "glm4moe.nextn_predict_layers") == 1);
        CHECK(u32(o.g, "glm4moe.leading_dense_block_count") == 1 && u32(o.g, "glm4moe.expert_shared_count") == 1);
        CHECKF(u32(o.g, "glm4moe.expert_gating_func") == 2 && u32(o.g, "glm4moe.rope.dimension_count") == 8,
               "gating %u, rotated %u", u32(o.g, "glm4moe.expert_gating_func"), u32(o.g, "glm4moe.rope.dimension_count"));
        CHECK(tensor_type(o.g, "blk.1.exp_probs_b.bias") == SLM_F32 && slm_gguf_find_tensor(o.g, "blk.0.ffn_gate.weight"));
        CHECK(slm_gguf_find_tensor(o.g, "blk.2.nextn.eh_proj.weight") && !slm_gguf_find_tensor(o.g, "blk.0.ffn_gate_inp.weight"));
        close_gguf(&o);
    }
    load_and_generate(glm, 64, 2, 4, 2, 32, 512);
    CHECK(synth_bad("--shape glm-4.5-air --dim 64 --heads 4 --layers 2 --experts 4 --experts-used 2 --expert-ffn 32 --shared-ffn 48",
                    tmp_path("bad_glm.gguf")) != 0);
    /* qwen3.5-0.8b's family (narrowed): 3 DeltaNet layers and a full attention layer of 4, the
     * DeltaNet keys as the converter writes them, the conv taps f32 in a q8_0 file, the gated
     * query twice the query's rows, a quarter of each head rotated, an MTP layer not run */
    const char *q35 = tmp_path("qwen35.gguf");
    CHECK(synth("--shape qwen3.5-0.8b --dim 128 --heads 2 --kv-heads 1 --ffn 160 --layers 4 --n-vocab 512 --ctx 256 "
                "--nextn 1 --type q8_0", q35) == 0);
    if (open_gguf(&o, q35)) {
        CHECK(u32(o.g, "qwen35.block_count") == 5 && u32(o.g, "qwen35.nextn_predict_layers") == 1);
        CHECK(u32(o.g, "qwen35.ssm.conv_kernel") == 4 && u32(o.g, "qwen35.ssm.state_size") == 32 &&
              u32(o.g, "qwen35.ssm.group_count") == 2 && u32(o.g, "qwen35.ssm.time_step_rank") == 4 &&
              u32(o.g, "qwen35.ssm.inner_size") == 128 && u32(o.g, "qwen35.full_attention_interval") == 4);
        CHECK(u32(o.g, "qwen35.rope.dimension_count") == 16);
        CHECK(tensor_type(o.g, "blk.0.ssm_conv1d.weight") == SLM_F32 && tensor_type(o.g, "blk.0.attn_qkv.weight") == SLM_Q8_0);
        const slm_gguf_tensor *aq = slm_gguf_find_tensor(o.g, "blk.3.attn_q.weight");
        CHECK(aq && aq->ne[1] == 2 * 2 * 64 && !slm_gguf_find_tensor(o.g, "blk.0.attn_q.weight"));
        close_gguf(&o);
    }
    load_and_generate(q35, 128, 4, 2, 1, 160, 512);
    /* qwen3.5-35b-a3b's family (narrowed): qwen35's layers with the experts (3-D, the router f32),
     * the shared expert and its gate [dim] f32 in every layer; no feed_forward_length (the
     * experts' and the shared expert's widths have their keys), an MTP layer with its experts */
    const char *q35m = tmp_path("qwen35moe.gguf");
    CHECK(synth("--shape qwen3.5-35b-a3b --dim 128 --heads 2 --kv-heads 1 --layers 4 --n-vocab 512 --ctx 256 "
                "--experts 8 --experts-used 2 --expert-ffn 64 --shared-ffn 96 --nextn 1 --type q8_0", q35m) == 0);
    if (open_gguf(&o, q35m)) {
        CHECK(u32(o.g, "qwen35moe.block_count") == 5 && u32(o.g, "qwen35moe.nextn_predict_layers") == 1);
        CHECK(u32(o.g, "qwen35moe.expert_count") == 8 && u32(o.g, "qwen35moe.expert_used_count") == 2 &&
              u32(o.g, "qwen35moe.expert_feed_forward_length") == 64 &&
              u32(o.g, "qwen35moe.expert_shared_feed_forward_length") == 96);
        CHECK(slm_gguf_find(o.g, "qwen35moe.feed_forward_length") < 0);
        CHECK(u32(o.g, "qwen35moe.ssm.group_count") == 2 && u32(o.g, "qwen35moe.ssm.time_step_rank") == 4 &&
              u32(o.g, "qwen35moe.full_attention_interval") == 4 && u32(o.g, "qwen35moe.rope.dimension_count") == 16);
        const slm_gguf_tensor *ge = slm_gguf_find_tensor(o.g, "blk.0.ffn_gate_exps.weight"),
                              *sg = slm_gguf_find_tensor(o.g, "blk.2.ffn_gate_inp_shexp.weight");
        CHECK(ge && ge->n_dims == 3 && ge->ne[0] == 128 && ge->ne[1] == 64 && ge->ne[2] == 8 && ge->type == SLM_Q8_0);
        CHECK(sg && sg->n_dims == 1 && sg->ne[0] == 128 && sg->type == SLM_F32);
        CHECK(tensor_type(o.g, "blk.1.ffn_gate_inp.weight") == SLM_F32 && tensor_type(o.g, "blk.4.ffn_down_exps.weight") == SLM_Q8_0);
        CHECK(!slm_gguf_find_tensor(o.g, "blk.0.ffn_gate.weight") && slm_gguf_find_tensor(o.g, "blk.0.attn_qkv.weight"));
        close_gguf(&o);
    }
    load_and_generate(q35m, 128, 4, 2, 1, 64, 512);
    CHECK(synth_bad("--shape qwen3.5-35b-a3b --dim 128 --heads 2 --layers 4 --experts 4 --experts-used 5",
                    tmp_path("bad_q35m.gguf")) != 0);
}

/* gemma-4-e2b's and gemma-4-31b's families cut to a few layers: the keys
 * llama.cpp's converter writes (the window list, the window layers' head
 * size, per-layer FFN widths and KV heads where the kinds differ, the shared
 * KV layers, the per-layer embeddings), the proportional RoPE factors, the
 * 31B's global layers without attn_v; both load and generate. */
static void test_gemma4(void) {
    const char *e2 = tmp_path("gemma4_e2b.gguf"), *b31 = tmp_path("gemma4_31b.gguf");
    CHECK(synth("--shape gemma-4-e2b --dim 64 --heads 2 --kv-heads 1 --ffn 96 --layers 7 --n-vocab 512 --ctx 256 "
                "--type q8_0", e2) == 0);
    opened o;
    if (open_gguf(&o, e2)) {
        CHECK(u32(o.g, "gemma4.block_count") == 7 && u32(o.g, "gemma4.attention.shared_kv_layers") == 2);
        CHECK(u32(o.g, "gemma4.attention.key_length") == 64 && u32(o.g, "gemma4.attention.key_length_swa") == 32);
        CHECK(u32(o.g, "gemma4.embedding_length_per_layer_input") == 256 && u32(o.g, "gemma4.attention.sliding_window") == 512);
        slm_gguf_type et;
        uint64_t n = 0;
        const void *d = NULL;
        CHECK(slm_gguf_get_arr(o.g, "gemma4.attention.sliding_window_pattern", &et, &n, &d) && et == SLM_GGUF_BOOL && n == 7 &&
              ((const uint8_t *)d)[3] == 1 && ((const uint8_t *)d)[4] == 0 && ((const uint8_t *)d)[5] == 1);
        uint32_t ff[7] = {0};
        CHECK(slm_gguf_get_arr(o.g, "gemma4.feed_forward_length", &et, &n, &d) && et == SLM_GGUF_U32 && n == 7);
        if (n == 7) memcpy(ff, d, sizeof ff);
        CHECKF(ff[4] == 96 && ff[5] == 192 && ff[6] == 192, "ffn %u %u %u", ff[4], ff[5], ff[6]);
        const slm_gguf_tensor *pe = slm_gguf_find_tensor(o.g, "per_layer_token_embd.weight"),
                              *rf = slm_gguf_find_tensor(o.g, "rope_freqs.weight");
        CHECK(pe && pe->ne[0] == 256 * 7 && pe->ne[1] == 512 && rf && rf->ne[0] == 32 && rf->type == SLM_F32);
        float f78[2] = {0, 0}; /* GGUF data need not be 4-aligned */
        if (rf) memcpy(f78, (const float *)rf->data + 7, sizeof f78);
        CHECK(f78[0] == 1.0f && f78[1] == 1e30f);
        CHECK(tensor_type(o.g, "blk.6.layer_output_scale.weight") == SLM_F32 && slm_gguf_find_tensor(o.g, "blk.4.attn_v.weight"));
        close_gguf(&o);
    }
    load_and_generate(e2, 64, 7, 2, 1, 96, 512);
    CHECK(synth("--shape gemma-4-31b --dim 64 --heads 4 --kv-heads 2 --ffn 96 --layers 6 --n-vocab 512 --ctx 256 "
                "--type f16", b31) == 0);
    if (open_gguf(&o, b31)) {
        slm_gguf_type et;
        uint64_t n = 0;
        const void *d = NULL;
        uint32_t kv[6] = {0};
        CHECK(slm_gguf_get_arr(o.g, "gemma4.attention.head_count_kv", &et, &n, &d) && n == 6);
        if (n == 6) memcpy(kv, d, sizeof kv);
        CHECK(kv[0] == 2 && kv[5] == 4);
        CHECK(!slm_gguf_find_tensor(o.g, "blk.5.attn_v.weight") && slm_gguf_find_tensor(o.g, "blk.4.attn_v.weight"));
        CHECK(u32(o.g, "gemma4.embedding_length_per_layer_input") == 0 && u32(o.g, "gemma4.attention.shared_kv_layers") == 0);
        close_gguf(&o);
    }
    load_and_generate(b31, 64, 6, 4, 4, 96, 512);
    /* 4 shared of 7: the last layer with K/V would be a window layer */
    CHECK(synth_bad("--shape gemma-4-e2b --dim 64 --heads 2 --layers 7 --kv-shared 4", tmp_path("bad_g4.gguf")) != 0);
}

/* `staticlm tokenize -m MODEL -p TEXT --no-bos` gives the pair's ids. */
static int tokenize_pair(void *ud, const char *text, size_t len, const int32_t *exp, int ne) {
    (void)len;
    char *const argv[] = {"staticlm", "tokenize", "-m", (char *)ud, "-p", (char *)text, "--no-bos", NULL};
    char *out = NULL;
    const int rc = t_run_capture(g_dir, SLM_CLI_PATH, argv, &out, NULL);
    int ok = rc == 0 && out, k = 0;
    for (char *e = out; ok && *e != '\n' && *e;) {
        int32_t id = (int32_t)strtol(e, &e, 10);
        ok = k < ne && id == exp[k++];
        while (*e == ' ') e++;
    }
    ok = ok && k == ne;
    if (!ok) fprintf(stderr, "  tokenize [%s]: exit %d, ids %s", text, rc, out ? out : "(none)\n");
    free(out);
    return ok;
}

/* Each merge "a b" of a GGUF names kept tokens, and so does its result. */
static int merges_kept(const slm_gguf *g, uint64_t *n_merges) {
    slm_gguf_type et;
    uint64_t n_tok = 0, n_m = 0;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok, NULL) ||
        !slm_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n_m, NULL) || et != SLM_GGUF_STRING)
        return 0;
    *n_merges = n_m;
    for (uint64_t m = 0; m < n_m; m++) {
        slm_gguf_str s;
        char a[256], b[256], ab[512];
        if (!slm_gguf_arr_str(g, "tokenizer.ggml.merges", m, &s) || s.len >= sizeof a) return 0;
        const char *sp = s.len > 1 ? memchr(s.s + 1, ' ', (size_t)s.len - 1) : NULL;
        if (!sp) return 0;
        snprintf(a, sizeof a, "%.*s", (int)(sp - s.s), s.s);
        snprintf(b, sizeof b, "%.*s", (int)(s.s + s.len - sp - 1), sp + 1);
        snprintf(ab, sizeof ab, "%s%s", a, b);
        int found = 0;
        for (uint64_t i = 0; i < n_tok && found < 7; i++)
            found |= (tok_eq(g, i, a) ? 1 : 0) | (tok_eq(g, i, b) ? 2 : 0) | (tok_eq(g, i, ab) ? 4 : 0);
        if (found != 7) {
            fprintf(stderr, "  merge '%.*s': parts or result not a token\n", (int)s.len, s.s);
            return 0;
        }
    }
    return 1;
}

/* A byte-level BPE vocabulary (gpt-2's): whole, its own test pairs tokenize
 * the same through the synth file; cut, the merges among the kept tokens
 * stay, EOS moves to the last id; padded, unique tokens follow; a cut that
 * would drop a single-byte token is refused. */
static void test_bpe_vocab(void) {
    const char *shape = "--shape custom --type f16 --dim 32 --heads 2 --kv-heads 1 --ffn 64 --layers 1 --tied";
    char args[512];
    const char *f = tmp_path("gpt2-full.gguf");
    snprintf(args, sizeof args, "%s --n-vocab 50257", shape);
    CHECK(synth_run_v(args, f, GPT2_VOCAB, 0) == 0);
    opened o;
    uint64_t n = 0, n_m = 0;
    slm_gguf_type et;
    slm_gguf_str str;
    if (open_gguf(&o, f)) {
        CHECK(slm_gguf_get_str(o.g, "tokenizer.ggml.model", &str) && slm_gguf_str_eq(str, "gpt2"));
        CHECK(slm_gguf_get_str(o.g, "tokenizer.ggml.pre", &str) && slm_gguf_str_eq(str, "gpt-2"));
        CHECK(slm_gguf_get_arr(o.g, "tokenizer.ggml.tokens", &et, &n, NULL) && n == 50257);
        CHECK(slm_gguf_get_arr(o.g, "tokenizer.ggml.merges", &et, &n_m, NULL) && n_m == 50000);
        CHECK(u32(o.g, "tokenizer.ggml.eos_token_id") == 50256 && u32(o.g, "tokenizer.ggml.bos_token_id") == 50256);
        CHECK(slm_gguf_find(o.g, "tokenizer.ggml.scores") < 0 && slm_gguf_find(o.g, "tokenizer.ggml.add_bos_token") < 0);
        close_gguf(&o);
    }
    slm_options opt = slm_default_options();
    opt.n_threads = 2;
    slm_engine *e = NULL;
    CHECKF(slm_load(&e, f, &opt) == SLM_OK, "%s", slm_last_error(e));
    if (e) {
        slm_info in;
        slm_get_info(e, &in);
        CHECK(in.vocab_size == 50257 && in.eos_id == 50256);
        int32_t ids[8];
        CHECK(slm_tokenize(e, "Hello world", 0, ids, 8) == 2 && ids[0] == 15496 && ids[1] == 995);
    }
    slm_free(e);
    int total = 0, pass = vocab_pairs("ggml-vocab-gpt-2.gguf", tokenize_pair, (void *)f, &total);
    fprintf(stderr, "  synth file with gpt-2's vocabulary: %d/%d test pairs\n", pass, total);
    CHECK(total > 40 && pass == total);

    f = tmp_path("gpt2-cut.gguf");
    snprintf(args, sizeof args, "%s --n-vocab 320", shape);
    CHECK(synth_run_v(args, f, GPT2_VOCAB, 0) == 0);
    if (open_gguf(&o, f)) {
        CHECK(slm_gguf_get_arr(o.g, "tokenizer.ggml.tokens", &et, &n, NULL) && n == 320);
        CHECK(merges_kept(o.g, &n_m) && n_m > 10 && n_m < 64);
        CHECK(u32(o.g, "tokenizer.ggml.eos_token_id") == 319 && tok_eq(o.g, 319, "<|endoftext|>"));
        CHECK(tok_eq(o.g, 0, "!") && tok_eq(o.g, 256, "\xc4\xa0t") && tok_eq(o.g, 318, "\xc4\xa0is")); /* the file's */
        close_gguf(&o);
    }
    e = NULL;
    CHECKF(slm_load(&e, f, &opt) == SLM_OK, "%s", slm_last_error(e));
    if (e) {
        slm_info in;
        slm_get_info(e, &in);
        CHECK(in.vocab_size == 320 && in.eos_id == 319);
        int32_t ids[8];
        CHECK(slm_tokenize(e, "\xc3\xa9", 0, ids, 8) == 2); /* two single-byte tokens */
    }
    slm_free(e);

    f = tmp_path("gpt2-padded.gguf");
    snprintf(args, sizeof args, "%s --n-vocab 50260", shape);
    CHECK(synth_run_v(args, f, GPT2_VOCAB, 0) == 0);
    if (open_gguf(&o, f)) {
        CHECK(slm_gguf_get_arr(o.g, "tokenizer.ggml.tokens", &et, &n, NULL) && n == 50260);
        CHECK(tok_eq(o.g, 50256, "<|endoftext|>") && tok_eq(o.g, 50259, "<synth_50259>"));
        CHECK(slm_gguf_get_arr(o.g, "tokenizer.ggml.merges", &et, &n_m, NULL) && n_m == 50000);
        close_gguf(&o);
    }
    e = NULL;
    CHECKF(slm_load(&e, f, &opt) == SLM_OK, "%s", slm_last_error(e));
    slm_free(e);

    /* starcoder's single-byte tokens run to id 279, after its special tokens */
    snprintf(args, sizeof args, "%s --n-vocab 279", shape);
    CHECK(synth_run_v(args, tmp_path("bad-bpe.gguf"), T_SHARED("vocab/ggml-vocab-starcoder.gguf"), 1) != 0);
    char log[600];
    snprintf(log, sizeof log, "%s/synth.log", g_dir);
    char *text = t_read_file(log, NULL);
    CHECKF(text && strstr(text, "--n-vocab 280 or more"), "%s", text ? text : "");
    free(text);
    snprintf(args, sizeof args, "%s --n-vocab 280", shape);
    CHECK(synth_run_v(args, tmp_path("ok-bpe.gguf"), T_SHARED("vocab/ggml-vocab-starcoder.gguf"), 0) == 0);
}

/* ---- encoders ------------------------------------------------------------ */

#define WS "\xe2\x96\x81" /* U+2581: a word-start piece */

static float f32key(const slm_gguf *g, const char *key) {
    float v = -1.0f;
    slm_gguf_get_f32(g, key, &v);
    return v;
}

/* The id of token spelling s in the file's list (a plain scan), -1: none. */
static int tok_id(const slm_gguf *g, const char *s) {
    slm_gguf_type et;
    uint64_t n = 0;
    if (!slm_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, NULL)) return -1;
    for (uint64_t i = 0; i < n; i++)
        if (tok_eq(g, i, s)) return (int)i;
    return -1;
}

/* A vector tensor's f32 values within [lo, hi], and not all equal. */
static int vec_in(const slm_gguf *g, const char *name, float lo, float hi) {
    const slm_gguf_tensor *t = slm_gguf_find_tensor(g, name);
    if (!t || t->type != SLM_F32 || t->n_dims != 1) return 0;
    const float *v = (const float *)t->data;
    int differ = 0;
    for (int64_t i = 0; i < t->ne[0]; i++) {
        if (!(v[i] >= lo && v[i] <= hi)) return 0;
        differ |= v[i] != v[0];
    }
    return differ;
}

/* Load with embeddings (dim), tokenize and embed `text`: [CLS], the ids
 * `want` (n_want, found in the file's list by spelling), [SEP] (the
 * embedding's: slm_tokenize adds [CLS] only); the text's embedding is that
 * of those ids, finite and not zero. */
static void embed_check(const char *path, int dim, const char *text, const char *const *want, int n_want) {
    opened o;
    int32_t exp[16];
    if (!open_gguf(&o, path)) {
        CHECK(0);
        return;
    }
    exp[0] = 101;
    for (int i = 0; i < n_want; i++) CHECKF((exp[1 + i] = tok_id(o.g, want[i])) > 103, "%s", want[i]);
    exp[n_want + 1] = 102;
    close_gguf(&o);
    slm_options opt = slm_default_options();
    opt.embeddings = 1;
    opt.max_prompt_len = 16;
    opt.n_threads = 2;
    slm_engine *e = NULL;
    slm_status st = slm_load(&e, path, &opt);
    CHECKF(st == SLM_OK, "%s", slm_last_error(e));
    slm_session *s = NULL;
    if (st == SLM_OK) CHECK(slm_session_new(e, NULL, &s) == SLM_OK);
    if (s) {
        slm_info in;
        slm_get_info(e, &in);
        CHECK(in.dim == dim && slm_model_is_encoder(e));
        int32_t ids[16];
        const int n = slm_tokenize(e, text, 1, ids, 16); /* [CLS] and the text's (embedding adds [SEP]) */
        CHECKF(n == n_want + 1, "%s: %d tokens", text, n);
        for (int i = 0; i < n && i < n_want + 1; i++) CHECKF(ids[i] == exp[i], "token %d: %d, want %d", i, ids[i], exp[i]);
        float *a = calloc((size_t)dim, sizeof(float)), *b = calloc((size_t)dim, sizeof(float));
        int nt = 0;
        CHECKF(slm_session_embed_text(s, text, SLM_POOLING_CLS, a, (size_t)dim, &nt) == SLM_OK, "%s", slm_session_error(s));
        CHECK(nt == n_want + 2);
        CHECK(slm_session_embed(s, exp, n_want + 2, SLM_POOLING_CLS, b, (size_t)dim) == SLM_OK);
        CHECK(!memcmp(a, b, (size_t)dim * sizeof(float)));
        double sq = 0;
        for (int i = 0; i < dim; i++) sq += (double)a[i] * a[i];
        CHECKF(isfinite(sq) && sq > 1.0, "|embedding|^2 %g", sq);
        free(a), free(b);
        slm_session_free(s);
    }
    slm_free(e);
}

/* bert, nomic-bert, modern-bert and jina-bert-v2: a custom shape's keys as asked, the converter's
 * tensors and types, a WordPiece vocabulary (BERT's special ids, words and
 * continuations) that texts tokenize into; a real shape cut to one layer. */
static void test_encoders(void) {
    const char *b = tmp_path("bert.gguf"), *nb = tmp_path("nomic.gguf");
    CHECK(synth_run_v("--shape custom --arch bert --dim 64 --heads 4 --layers 2 --ffn 96 --ctx 48 --n-vocab 600 "
                      "--type f32 --pooling cls", b, NULL, 0) == 0);
    opened o;
    if (open_gguf(&o, b)) {
        slm_gguf_str a;
        int causal = 1;
        CHECK(slm_gguf_get_str(o.g, "general.architecture", &a) && slm_gguf_str_eq(a, "bert"));
        CHECK(u32(o.g, "bert.embedding_length") == 64 && u32(o.g, "bert.block_count") == 2);
        CHECK(u32(o.g, "bert.attention.head_count") == 4 && u32(o.g, "bert.feed_forward_length") == 96);
        CHECK(u32(o.g, "bert.context_length") == 48 && u32(o.g, "bert.pooling_type") == 2);
        CHECK(f32key(o.g, "bert.attention.layer_norm_epsilon") == 1e-12f);
        CHECK(slm_gguf_get_bool(o.g, "bert.attention.causal", &causal) && !causal);
        CHECK(u32(o.g, "tokenizer.ggml.token_type_count") == 2 && slm_gguf_find(o.g, "bert.rope.freq_base") < 0);
        CHECK(slm_gguf_get_str(o.g, "tokenizer.ggml.model", &a) && slm_gguf_str_eq(a, "bert"));
        CHECK(u32(o.g, "tokenizer.ggml.bos_token_id") == 101 && u32(o.g, "tokenizer.ggml.seperator_token_id") == 102);
        CHECK(u32(o.g, "tokenizer.ggml.unknown_token_id") == 100 && u32(o.g, "tokenizer.ggml.padding_token_id") == 0);
        CHECK(tok_eq(o.g, 0, "[PAD]") && tok_eq(o.g, 100, "[UNK]") && tok_eq(o.g, 101, "[CLS]") &&
              tok_eq(o.g, 102, "[SEP]") && tok_eq(o.g, 103, "[MASK]") && tok_eq(o.g, 1, WS "[unused0]"));
        CHECK(tok_eq(o.g, 599, WS "the") == 0 && tok_id(o.g, WS "the") > 103 && tok_id(o.g, "ing") > 103);
        const slm_gguf_tensor *p = slm_gguf_find_tensor(o.g, "position_embd.weight"),
                              *t = slm_gguf_find_tensor(o.g, "token_types.weight");
        CHECK(p && p->type == SLM_F32 && p->ne[0] == 64 && p->ne[1] == 48);
        CHECK(t && t->type == SLM_F32 && t->ne[0] == 64 && t->ne[1] == 2);
        CHECK(tensor_type(o.g, "blk.1.attn_k.bias") == SLM_F32 && tensor_type(o.g, "blk.1.ffn_up.bias") == SLM_F32);
        CHECK(tensor_type(o.g, "blk.1.ffn_gate.weight") == -1 && tensor_type(o.g, "output_norm.weight") == -1);
        /* LayerNorm gains near 1, biases near 0 */
        CHECK(vec_in(o.g, "token_embd_norm.weight", 0.94f, 1.06f) && vec_in(o.g, "blk.1.layer_output_norm.weight", 0.94f, 1.06f));
        CHECK(vec_in(o.g, "token_embd_norm.bias", -0.15f, 0.15f) && vec_in(o.g, "blk.0.attn_output.bias", -0.15f, 0.15f));
        close_gguf(&o);
    }
    static const char *const w1[] = {WS "the", WS "quick", WS "fox", "ing",
                                     WS "z", "y", "x", WS "!"};
    embed_check(b, 64, "The quick foxing zyx!", w1, 8);

    CHECK(synth_run_v("--shape custom --arch nomic-bert --dim 64 --heads 4 --layers 2 --ffn 96 --ctx 48 --n-vocab 600 "
                      "--type f16", nb, NULL, 0) == 0);
    if (open_gguf(&o, nb)) {
        CHECK(u32(o.g, "nomic-bert.pooling_type") == 1 && f32key(o.g, "nomic-bert.rope.freq_base") == 1000.0f);
        const slm_gguf_tensor *q = slm_gguf_find_tensor(o.g, "blk.0.attn_qkv.weight");
        CHECK(q && q->type == SLM_F16 && q->ne[0] == 64 && q->ne[1] == 192);
        CHECK(tensor_type(o.g, "blk.1.ffn_gate.weight") == SLM_F16 && tensor_type(o.g, "position_embd.weight") == -1);
        CHECK(tensor_type(o.g, "blk.0.attn_q.weight") == -1 && tensor_type(o.g, "blk.0.attn_output.bias") == -1 &&
              tensor_type(o.g, "blk.0.ffn_up.bias") == -1 && tensor_type(o.g, "blk.0.ffn_down.bias") == -1);
        CHECK(tensor_type(o.g, "token_types.weight") == SLM_F32 && tensor_type(o.g, "token_embd.weight") == SLM_F16);
        close_gguf(&o);
    }
    static const char *const w2[] = {WS "hello", WS "world", WS ",", WS "cat", WS "q", "x"};
    embed_check(nb, 64, "Hello world, cat QX", w2, 6);

    /* real shapes cut to a layer: bge-small's 384 (Q4_K_M: K-quant rows fall back, token_embd as the output
     * matrix: Q8_0), nomic-embed's fused QKV by attn_v's rules (llama-quant.cpp since March 2026): Q6_K in
     * its one layer (the last eighth), at width 256 */
    const char *bs = tmp_path("bge-small.gguf"), *ne = tmp_path("nomic-embed.gguf");
    CHECK(synth_run_v("--shape bge-small-en-v1.5 --layers 1 --type q4_k_m", bs, NULL, 0) == 0);
    if (open_gguf(&o, bs)) {
        CHECK(u32(o.g, "bert.embedding_length") == 384 && u32(o.g, "bert.attention.head_count") == 12);
        CHECK(u32(o.g, "bert.feed_forward_length") == 1536 && u32(o.g, "bert.context_length") == 512);
        CHECK(u32(o.g, "bert.pooling_type") == 2 && tok_eq(o.g, 30521, WS "the") == 0);
        CHECK(tensor_type(o.g, "token_embd.weight") == SLM_Q8_0 && tensor_type(o.g, "blk.0.attn_q.weight") == SLM_Q5_0);
        CHECK(tensor_type(o.g, "blk.0.attn_v.weight") == SLM_Q8_0 && tensor_type(o.g, "blk.0.ffn_down.weight") == SLM_Q6_K);
        CHECK(tensor_type(o.g, "position_embd.weight") == SLM_F32);
        slm_gguf_type et;
        uint64_t n = 0;
        CHECK(slm_gguf_get_arr(o.g, "tokenizer.ggml.tokens", &et, &n, NULL) && n == 30522);
        close_gguf(&o);
    }
    embed_check(bs, 384, "The quick foxing zyx!", w1, 8);
    CHECK(synth_run_v("--shape nomic-embed-text-v1.5 --layers 1 --dim 256 --heads 4 --ffn 512 --n-vocab 1000 "
                      "--type q4_k_m", ne, NULL, 0) == 0);
    if (open_gguf(&o, ne)) {
        CHECK(u32(o.g, "nomic-bert.context_length") == 2048 && u32(o.g, "nomic-bert.pooling_type") == 1);
        CHECK(tensor_type(o.g, "blk.0.attn_qkv.weight") == SLM_Q6_K && tensor_type(o.g, "token_embd.weight") == SLM_Q6_K);
        CHECK(tensor_type(o.g, "blk.0.ffn_gate.weight") == SLM_Q4_K);
        close_gguf(&o);
    }
    embed_check(ne, 256, "Hello world, cat QX", w2, 6);

    /* --pooling rank: a cross-encoder's head, cls [dim, dim] + bias, cls.output [dim, 1] + bias */
    const char *rr = tmp_path("rr-enc.gguf");
    CHECK(synth_run_v("--shape custom --arch nomic-bert --pooling rank --type q8_0", rr, NULL, 0) == 0);
    if (open_gguf(&o, rr)) {
        CHECK(u32(o.g, "nomic-bert.pooling_type") == 4);
        CHECK(tensor_type(o.g, "cls.weight") == SLM_Q8_0 && tensor_type(o.g, "cls.output.weight") == SLM_Q8_0);
        CHECK(tensor_type(o.g, "cls.bias") == SLM_F32 && tensor_type(o.g, "cls.output.bias") == SLM_F32);
        const slm_gguf_tensor *t = slm_gguf_find_tensor(o.g, "cls.output.weight");
        CHECK(t && t->ne[0] == 64 && t->ne[1] == 1);
        close_gguf(&o);
    }
    unlink(rr);
    /* modern-bert: ModernBertModel's keys (two RoPE bases, the window and its period, no token types), no
     * norm biases, layer 0 without attn_norm, the fused QKV and gate/up; modernbert-embed-base cut to 4 layers */
    const char *mb = tmp_path("modernbert.gguf");
    CHECK(synth_run_v("--shape modernbert-embed-base --layers 4 --dim 64 --heads 4 --ffn 96 --n-vocab 600 --type q8_0",
                      mb, NULL, 0) == 0);
    if (open_gguf(&o, mb)) {
        CHECK(f32key(o.g, "modern-bert.rope.freq_base") == 160000.0f && f32key(o.g, "modern-bert.rope.freq_base_swa") == 10000.0f);
        CHECK(u32(o.g, "modern-bert.attention.sliding_window") == 128 &&
              u32(o.g, "modern-bert.attention.sliding_window_pattern") == 3);
        CHECK(f32key(o.g, "modern-bert.attention.layer_norm_epsilon") == 1e-5f && u32(o.g, "modern-bert.pooling_type") == 1);
        CHECK(slm_gguf_find(o.g, "tokenizer.ggml.token_type_count") < 0 && tensor_type(o.g, "token_types.weight") == -1);
        CHECK(tensor_type(o.g, "blk.0.attn_norm.weight") == -1 && tensor_type(o.g, "blk.1.attn_norm.weight") == SLM_F32);
        CHECK(tensor_type(o.g, "token_embd_norm.bias") == -1 && tensor_type(o.g, "output_norm.weight") == SLM_F32);
        const slm_gguf_tensor *q = slm_gguf_find_tensor(o.g, "blk.3.attn_qkv.weight"),
                              *u = slm_gguf_find_tensor(o.g, "blk.3.ffn_up.weight");
        CHECK(q && q->type == SLM_Q8_0 && q->ne[0] == 64 && q->ne[1] == 192);
        CHECK(u && u->type == SLM_Q8_0 && u->ne[0] == 64 && u->ne[1] == 192);
        CHECK(tensor_type(o.g, "blk.0.ffn_gate.weight") == -1 && vec_in(o.g, "blk.2.ffn_norm.weight", 0.94f, 1.06f));
        close_gguf(&o);
    }
    embed_check(mb, 64, "Hello world, cat QX", w2, 6);

    /* jina-bert-v2: bert's keys and tensors without learned positions or a RoPE base, GeGLU's fused up and
     * its bias of twice the width; jina-embeddings-v2-base-en cut to 2 layers */
    const char *jb = tmp_path("jina.gguf");
    CHECK(synth_run_v("--shape jina-embeddings-v2-base-en --layers 2 --dim 64 --heads 4 --ffn 96 --n-vocab 600 "
                      "--type q8_0", jb, NULL, 0) == 0);
    if (open_gguf(&o, jb)) {
        CHECK(u32(o.g, "jina-bert-v2.context_length") == 8192 && u32(o.g, "jina-bert-v2.pooling_type") == 1);
        CHECK(f32key(o.g, "jina-bert-v2.attention.layer_norm_epsilon") == 1e-12f &&
              slm_gguf_find(o.g, "jina-bert-v2.rope.freq_base") < 0);
        CHECK(u32(o.g, "tokenizer.ggml.token_type_count") == 2 && tensor_type(o.g, "token_types.weight") == SLM_F32);
        CHECK(tensor_type(o.g, "position_embd.weight") == -1 && tensor_type(o.g, "blk.1.ffn_gate.weight") == -1);
        const slm_gguf_tensor *u = slm_gguf_find_tensor(o.g, "blk.1.ffn_up.weight"),
                              *ub = slm_gguf_find_tensor(o.g, "blk.1.ffn_up.bias");
        CHECK(u && u->type == SLM_Q8_0 && u->ne[0] == 64 && u->ne[1] == 192);
        CHECK(ub && ub->type == SLM_F32 && ub->ne[0] == 192);
        CHECK(tensor_type(o.g, "blk.0.attn_q.bias") == SLM_F32 && tensor_type(o.g, "blk.0.ffn_down.weight") == SLM_Q8_0);
        close_gguf(&o);
    }
    embed_check(jb, 64, "Hello world, cat QX", w2, 6);

    /* an XLM-RoBERTa shape with a unigram vocabulary (--vocab-file t5): its tokens, normalizer and flags
     * copied, one token type, the context less the converter's 2 rows; a text embeds as <s> pieces </s> */
    const char *xl = tmp_path("xlmr.gguf");
    CHECK(synth_run_v("--shape multilingual-e5-base --layers 1 --dim 64 --heads 4 --ffn 96 --n-vocab 900 --type q8_0", xl,
                      SLM_TESTS_DIR "/corpus/ugm/xlmr.gguf", 0) == 0);
    if (open_gguf(&o, xl)) {
        slm_gguf_str m;
        slm_gguf_type et;
        uint64_t n = 0, nc = 0;
        int ab = 0;
        CHECK(slm_gguf_get_str(o.g, "tokenizer.ggml.model", &m) && slm_gguf_str_eq(m, "t5"));
        CHECK(slm_gguf_get_arr(o.g, "tokenizer.ggml.tokens", &et, &n, NULL) && n == 900);
        CHECK(slm_gguf_get_arr(o.g, "tokenizer.ggml.precompiled_charsmap", &et, &nc, NULL) && et == SLM_GGUF_U8 && nc > 1000);
        CHECK(slm_gguf_get_bool(o.g, "tokenizer.ggml.add_eos_token", &ab) && ab == 1 && u32(o.g, "tokenizer.ggml.eos_token_id") == 2);
        CHECK(u32(o.g, "bert.context_length") == 512 && u32(o.g, "tokenizer.ggml.token_type_count") == 1);
        close_gguf(&o);
    }
    slm_options xo = slm_default_options();
    xo.embeddings = 1;
    xo.max_prompt_len = 32;
    xo.n_threads = 2;
    slm_engine *xe = NULL;
    slm_session *xs = NULL;
    CHECKF(slm_load(&xe, xl, &xo) == SLM_OK && slm_session_new(xe, NULL, &xs) == SLM_OK, "%s", slm_last_error(xe));
    if (xs) {
        int32_t ids[34];
        const int np = slm_tokenize(xe, "Hello world, Katze!", 0, ids + 1, 32);
        CHECK(np > 2 && np < 30 && ids[1] > 3);
        ids[0] = 0, ids[np + 1] = 2;
        float a[64], b2[64];
        int nt = 0;
        CHECK(slm_session_embed_text(xs, "Hello world, Katze!", SLM_POOLING_CLS, a, 64, &nt) == SLM_OK && nt == np + 2);
        CHECK(slm_session_embed(xs, ids, np + 2, SLM_POOLING_CLS, b2, 64) == SLM_OK && !memcmp(a, b2, sizeof a));
    }
    slm_session_free(xs);
    slm_free(xe);
    unlink(xl);
    CHECK(synth_run_v("--shape bge-m3 --layers 1", tmp_path("bad-xl.gguf"), T_SHARED("vocab/ggml-vocab-gpt-2.gguf"), 1) != 0);
    const char *bad = tmp_path("bad-enc.gguf");
    CHECK(synth_run_v("--shape custom --arch bert --kv-heads 2", bad, NULL, 1) != 0);     /* GQA */
    CHECK(synth_run_v("--shape custom --arch bert --n-vocab 291", bad, NULL, 1) != 0);    /* too few for WordPiece */
    CHECK(synth_bad("--shape bge-small-en-v1.5", bad) != 0);                             /* --vocab-file */
    CHECK(access(bad, F_OK) != 0);
}

static void test_bad_args(void) {
    const char *f = tmp_path("bad.gguf");
    CHECK(synth_bad("--shape nosuch --type f16", f) != 0);
    CHECK(synth_bad("--shape custom --type q5_9", f) != 0);
    CHECK(synth_bad("--shape custom --heads 3", f) != 0); /* 64 / 3 */
    CHECK(synth_bad("--shape custom --n-vocab 100", f) != 0); /* < 259: no byte fallback */
    CHECK(access(f, F_OK) != 0);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/slm-test-synth-%d", (int)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p \"%s\"", g_dir);
    if (system(cmd) != 0) return 1;
    T_RUN(test_custom_f32_roundtrip);
    T_RUN(test_same_seed_same_bytes);
    T_RUN(test_q4_0_mix);
    T_RUN(test_q4_k_m_mix);
    T_RUN(test_bf16);
    T_RUN(test_repack_model);
    T_RUN(test_padded_vocab);
    T_RUN(test_bpe_vocab);
    T_RUN(test_archs);
    T_RUN(test_gemma4);
    T_RUN(test_encoders);
    T_RUN(test_bad_args);
    snprintf(cmd, sizeof cmd, "rm -rf \"%s\"", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    T_DONE();
}
