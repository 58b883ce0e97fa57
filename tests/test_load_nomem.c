/* Allocation failure over the whole load path: slm_load of (a) stories260K
 * (llama2.c + tokenizer.bin), (b) a GGUF converted from it here (GGUF
 * reader, its SentencePiece vocabulary), (c) a blob of that GGUF, (d) a
 * small Hugging Face folder written here (config.json, safetensors; with
 * tokenizer.bin, then with its own byte-level BPE tokenizer.json), and (e)
 * a chat template's parse and render, with every allocation from the Nth
 * on failing, for every N until the load succeeds. Each failure must be
 * SLM_ERR_NOMEM with a message, and slm_free must give back every
 * allocation (counted here; the ASan build also runs this with leak
 * detection). */
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "staticlm.h"
#include "text/chat_template.h"
#include "t.h"

static char g_dir[256];

static atomic_long g_fail_left = -1; /* allocations left before one fails; -1: never */
static atomic_long g_live;           /* allocations not yet freed */

static int take(void) {
    long left = atomic_load(&g_fail_left);
    if (left == 0) return 0;
    if (left > 0) atomic_fetch_sub(&g_fail_left, 1);
    return 1;
}
static void *nth_alloc(void *ud, size_t n) {
    (void)ud;
    if (!take()) return NULL;
    void *p = malloc(n);
    if (p) atomic_fetch_add(&g_live, 1);
    return p;
}
static void *nth_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    if (!take()) return NULL;
    void *q = realloc(p, n);
    if (q && !p) atomic_fetch_add(&g_live, 1);
    return q;
}
static void nth_free(void *ud, void *p) {
    (void)ud;
    if (p) atomic_fetch_sub(&g_live, 1);
    free(p);
}

/* slm_load(path) with allocation N failing, N = 0, 1, ... until it loads. */
static void load_failing(const char *label, const char *path, const char *tok) {
    slm_options o = slm_default_options();
    o.tokenizer_path = tok;
    o.max_prompt_len = 32;
    o.min_response_len = 16;
    o.n_threads = 1;
    const slm_allocator a = {nth_alloc, nth_realloc, nth_free, NULL};
    int n, done = 0, failures = 0, before = t_checks_failed_;
    for (n = 0; n < 200000 && !done; n++) {
        atomic_store(&g_live, 0);
        slm_set_allocator(&a);
        atomic_store(&g_fail_left, n);
        slm_engine *e = NULL;
        slm_status s = slm_load(&e, path, &o);
        const int reached = atomic_load(&g_fail_left) == 0;
        atomic_store(&g_fail_left, -1);
        if (s == SLM_OK) done = 1;
        else {
            failures++;
            CHECKF(s == SLM_ERR_NOMEM && reached, "%s: allocation %d: status %d: %s", label, n, (int)s,
                   slm_last_error(e));
            CHECKF(strstr(slm_last_error(e), "out of memory") != NULL, "%s: allocation %d: message: %s", label, n,
                   slm_last_error(e));
        }
        slm_free(e);
        slm_set_allocator(NULL);
        CHECKF(atomic_load(&g_live) == 0, "%s: allocation %d failing: %ld allocations leaked", label, n,
               (long)atomic_load(&g_live));
        if (t_checks_failed_ > before) break;
    }
    fprintf(stderr, "  %s: %d allocation failures refused cleanly, then loaded\n", label, failures);
    CHECKF(done && failures > 10, "%s: %d failures, %s", label, failures, done ? "loaded" : "never loaded");
}

static void test_llama2c(void) {
    load_failing("stories260K.bin", T_SHARED("models/stories260K.bin"), T_SHARED("models/tok512.bin"));
}

static void make_gguf(char *path, size_t cap) {
    snprintf(path, cap, "%s/s260k.gguf", g_dir);
    if (access(path, F_OK) == 0) return;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s convert -m %s -z %s -o %s > /dev/null 2>&1", SLM_CLI_PATH,
             T_SHARED("models/stories260K.bin"), T_SHARED("models/tok512.bin"), path);
    CHECKF(system(cmd) == 0, "%s", cmd);
}

static void test_gguf(void) {
    char path[512];
    make_gguf(path, sizeof path);
    load_failing("s260k.gguf", path, NULL);
}

static void test_blob(void) {
    char gguf[512], blob[512];
    make_gguf(gguf, sizeof gguf);
    snprintf(blob, sizeof blob, "%s/s260k.blob", g_dir);
    slm_options o = slm_default_options();
    o.max_prompt_len = 32;
    o.min_response_len = 16;
    o.n_threads = 1;
    slm_engine *e = NULL;
    CHECKF(slm_load(&e, gguf, &o) == SLM_OK, "%s", slm_last_error(e));
    CHECKF(e && slm_save_blob(e, blob) == SLM_OK, "%s", slm_last_error(e));
    slm_free(e);
    load_failing("s260k.blob", blob, NULL);
    unlink(blob);
}

/* A llama folder: 2 layers, dim 32, 4 heads (2 KV), vocab 512 (tok512.bin),
 * all F32, tied embeddings, one model.safetensors. */
static void test_hf(void) {
    char dir[300], path[600];
    snprintf(dir, sizeof dir, "%s/hf", g_dir);
    mkdir(dir, 0755);
    const int D = 32, F = 64, L = 2, V = 512, KVD = 16;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char cfg[800];
    int cn = snprintf(cfg, sizeof cfg,
                      "{\"model_type\": \"llama\", \"hidden_size\": %d, \"intermediate_size\": %d, "
                      "\"num_hidden_layers\": %d, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                      "\"vocab_size\": %d, \"max_position_embeddings\": 256, \"rope_theta\": 10000.0, "
                      "\"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": true}\n",
                      D, F, L, V);
    CHECK(t_write_file(path, cfg, (size_t)cn));
    struct { char name[80]; int r, c; } t[64];
    int nt = 0;
#define T(nm, rr, cc) (snprintf(t[nt].name, sizeof t[nt].name, "%s", nm), t[nt].r = rr, t[nt].c = cc, nt++)
    T("model.embed_tokens.weight", V, D);
    for (int l = 0; l < L; l++) {
        char n[80];
#define NM(x) (snprintf(n, sizeof n, "model.layers.%d." x, l), n)
        T(NM("input_layernorm.weight"), 0, D);
        T(NM("self_attn.q_proj.weight"), D, D);
        T(NM("self_attn.k_proj.weight"), KVD, D);
        T(NM("self_attn.v_proj.weight"), KVD, D);
        T(NM("self_attn.o_proj.weight"), D, D);
        T(NM("post_attention_layernorm.weight"), 0, D);
        T(NM("mlp.gate_proj.weight"), F, D);
        T(NM("mlp.up_proj.weight"), F, D);
        T(NM("mlp.down_proj.weight"), D, F);
#undef NM
    }
    T("model.norm.weight", 0, D);
#undef T
    char *h = malloc(16384);
    size_t hl = (size_t)snprintf(h, 16384, "{\"__metadata__\":{\"format\":\"pt\"}"), off = 0;
    for (int i = 0; i < nt; i++) {
        size_t nb = (size_t)(t[i].r ? t[i].r : 1) * (size_t)t[i].c * 4;
        if (t[i].r)
            hl += (size_t)snprintf(h + hl, 16384 - hl, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                                   t[i].name, t[i].r, t[i].c, off, off + nb);
        else
            hl += (size_t)snprintf(h + hl, 16384 - hl, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
                                   t[i].name, t[i].c, off, off + nb);
        off += nb;
    }
    hl += (size_t)snprintf(h + hl, 16384 - hl, "}");
    while (hl % 8) h[hl++] = ' ';
    uint8_t *img = calloc(1, 8 + hl + off);
    for (int b = 0; b < 8; b++) img[b] = (uint8_t)((uint64_t)hl >> (8 * b));
    memcpy(img + 8, h, hl);
    float *f = (float *)(img + 8 + hl); /* 8 + hl is a multiple of 8 */
    for (size_t i = 0; i < off / 4; i++) f[i] = 0.01f * (float)((i * 7) % 13) + 0.5f;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(t_write_file(path, img, 8 + hl + off));
    free(img);
    free(h);
    load_failing("hf folder", dir, T_SHARED("models/tok512.bin"));
    /* the folder's own tokenizer.json (byte-level BPE, 268 tokens) */
    char tj[600];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    size_t tn = 0;
    char *tb = t_read_file(SLM_TESTS_DIR "/corpus/tokenizers/small_bytelevel.json", &tn);
    CHECK(tb && t_write_file(tj, tb, tn));
    free(tb);
    load_failing("hf folder + tokenizer.json", dir, NULL);
    unlink(tj);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

/* Chat templates: parse and render with allocation N failing. */
static void test_template(void) {
    const slm_allocator a = {nth_alloc, nth_realloc, nth_free, NULL};
    const slm_chat_msg m[2] = {{"system", "be brief", NULL, NULL, NULL, NULL}, {"user", "hello <|im_end|>", NULL, NULL, NULL, NULL}};
    int n, done = 0, failures = 0, before = t_checks_failed_;
    for (n = 0; n < 100000 && !done; n++) {
        atomic_store(&g_live, 0);
        slm_set_allocator(&a);
        atomic_store(&g_fail_left, n);
        slm_err err = {0};
        slm_tmpl *t = slm_tmpl_parse(slm_tmpl_builtin("llama3"), &err);
        char *out = NULL;
        uint8_t *mask = NULL;
        if (t) {
            slm_tmpl_vars v = {.add_generation_prompt = 1};
            out = slm_tmpl_render_mask(t, m, 2, &v, &mask, &err);
        }
        atomic_store(&g_fail_left, -1);
        if (out) done = 1;
        else {
            failures++;
            CHECKF(err.status == SLM_ERR_NOMEM && strstr(err.msg, "out of memory"), "allocation %d: %d %s", n,
                   (int)err.status, err.msg);
        }
        slm_xfree(out);
        slm_xfree(mask);
        slm_tmpl_free(t);
        slm_set_allocator(NULL);
        CHECKF(atomic_load(&g_live) == 0, "template: allocation %d failing: %ld leaked", n, (long)atomic_load(&g_live));
        if (t_checks_failed_ > before) break;
    }
    fprintf(stderr, "  template: %d allocation failures refused cleanly, then rendered\n", failures);
    CHECK(done && failures > 3);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "test_load_nomem.tmp.%d", (int)getpid());
    mkdir(g_dir, 0700);
    T_RUN(test_llama2c);
    T_RUN(test_gguf);
    T_RUN(test_blob);
    T_RUN(test_hf);
    T_RUN(test_template);
    char p[600];
    snprintf(p, sizeof p, "%s/s260k.gguf", g_dir);
    unlink(p);
    rmdir(g_dir);
    T_DONE();
}
