/* A model file's recommended sampling (general.sampling.*, which llama.cpp's
 * converter writes from generation_config.json and llama.cpp's tools take
 * for the options not given): stories260K converted to GGUF, then copied
 * with general.sampling.temp 0 (greedy), top_k, an out-of-range top_p and
 * mirostat. run without --temp samples greedily there (the same text as
 * --temp 0) and not from the file without the keys; --temp given wins over
 * the file's and its top_k still stands (as --top-k 20 on the plain file); -v
 * names the values taken, the one ignored and the one not applied; a blob
 * compiled from the file keeps them; slm_model_meta gives numbers as text
 * from the GGUF and the blob alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "run_cmd.h"
#include "format/gguf.h"
#include "staticlm.h"

static char g_tmp[256], g_plain[300], g_keys[300], g_blob[300];

static int run_cmd(char *const argv[], char **out, char **errs) { return t_run_capture(g_tmp, SLM_CLI_PATH, argv, out, errs); }

/* Every key of g (strings, numbers, bools, arrays) and its tensors into w. */
static int copy_gguf(const slm_gguf *g, slm_gguf_writer *w) {
    for (int64_t i = 0; i < (int64_t)slm_gguf_n_kv(g); i++) {
        const slm_gguf_str k = slm_gguf_key(g, i);
        char key[256];
        if (k.len >= sizeof key) return 0;
        memcpy(key, k.s, (size_t)k.len);
        key[k.len] = 0;
        slm_gguf_str s;
        uint32_t u;
        int64_t v;
        float f;
        int b;
        slm_gguf_type et;
        uint64_t n;
        const void *data;
        slm_status st = SLM_OK;
        switch (slm_gguf_kv_type(g, i)) {
        case SLM_GGUF_STRING: {
            char *c = slm_gguf_get_str(g, key, &s) ? strndup(s.s, (size_t)s.len) : NULL;
            st = c ? slm_gguf_set_str(w, key, c) : SLM_ERR_FORMAT;
            free(c);
            break;
        }
        case SLM_GGUF_U32: st = slm_gguf_get_u32(g, key, &u) ? slm_gguf_set_u32(w, key, u) : SLM_ERR_FORMAT; break;
        case SLM_GGUF_I32: st = slm_gguf_get_i64(g, key, &v) ? slm_gguf_set_i32(w, key, (int32_t)v) : SLM_ERR_FORMAT; break;
        case SLM_GGUF_F32: st = slm_gguf_get_f32(g, key, &f) ? slm_gguf_set_f32(w, key, f) : SLM_ERR_FORMAT; break;
        case SLM_GGUF_BOOL: st = slm_gguf_get_bool(g, key, &b) ? slm_gguf_set_bool(w, key, b) : SLM_ERR_FORMAT; break;
        case SLM_GGUF_ARRAY:
            if (!slm_gguf_get_arr(g, key, &et, &n, &data)) return 0;
            if (et == SLM_GGUF_STRING) {
                const char **p = malloc((size_t)n * sizeof *p);
                uint64_t *l = malloc((size_t)n * sizeof *l);
                for (uint64_t j = 0; p && l && j < n; j++) {
                    slm_gguf_arr_str(g, key, j, &s);
                    p[j] = s.s, l[j] = s.len;
                }
                st = p && l ? slm_gguf_set_arr_str(w, key, p, l, n) : SLM_ERR_NOMEM;
                free(p), free(l);
            } else
                st = slm_gguf_set_arr(w, key, et, data, n);
            break;
        default: return 0;
        }
        if (st) return 0;
    }
    for (uint64_t i = 0; i < slm_gguf_n_tensors(g); i++) {
        const slm_gguf_tensor *t = slm_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.s);
        if (slm_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes)) return 0;
    }
    return 1;
}

/* stories260K as GGUF (g_plain), and its copy with the sampling keys (g_keys). */
static int make_files(void) {
    char *conv[] = {"staticlm", "convert", "-m", T_SHARED("models/stories260K.bin"), "-z", T_SHARED("models/tok512.bin"),
                    "-o", g_plain, NULL};
    CHECK(run_cmd(conv, NULL, NULL) == 0);
    size_t len = 0;
    char *img = t_read_file(g_plain, &len);
    slm_gguf *g = NULL;
    slm_err err = {0};
    CHECKF(img && slm_gguf_open(&g, img, len, "plain.gguf", &err) == SLM_OK, "%s", err.msg);
    if (!g) return free(img), 0;
    slm_gguf_writer *w = slm_gguf_writer_new();
    int ok = copy_gguf(g, w);
    CHECK(ok);
    slm_gguf_set_f32(w, "general.sampling.temp", 0.0f);
    slm_gguf_set_i32(w, "general.sampling.top_k", 20);
    slm_gguf_set_f32(w, "general.sampling.top_p", 3.0f); /* out of range: ignored with a note */
    slm_gguf_set_i32(w, "general.sampling.mirostat", 2);  /* not a stage staticlm has */
    ok = ok && slm_gguf_write(w, g_keys, &err) == SLM_OK;
    CHECKF(ok, "%s", err.msg);
    slm_gguf_writer_free(w);
    slm_gguf_close(g);
    free(img);
    return ok;
}

/* The generated text of `run` on model (with --temp T unless NULL, and --top-k K unless NULL); stderr into
 * *err when given. */
static char *story_k(const char *model, const char *temp, const char *top_k, int verbose, char **err) {
    char *argv[24] = {"staticlm", "run", "-m", (char *)model, "-n", "40", "--seed", "7", "--ignore-eos", "-t", "1",
                      "-p", "Once upon a time"};
    int n = 13;
    if (temp) argv[n++] = "--temp", argv[n++] = (char *)temp;
    if (top_k) argv[n++] = "--top-k", argv[n++] = (char *)top_k;
    if (verbose) argv[n++] = "-v";
    argv[n] = NULL;
    char *out = NULL, *e = NULL;
    const int rc = run_cmd(argv, &out, &e);
    CHECKF(rc == 0, "run %s: rc %d: %s", model, rc, e ? e : "");
    if (err) *err = e;
    else free(e);
    return out;
}

static char *story(const char *model, const char *temp, int verbose, char **err) {
    return story_k(model, temp, NULL, verbose, err);
}

static int same(const char *a, const char *b) { return a && b && !strcmp(a, b); }

static void test_run(void) {
    char *greedy = story(g_plain, "0", 0, NULL), *sampled = story(g_plain, NULL, 0, NULL), *err = NULL;
    char *keyed = story(g_keys, NULL, 1, &err), *keyed_t1 = story(g_keys, "1", 0, NULL);
    char *plain_t1 = story_k(g_plain, "1", "20", 0, NULL), *plain_t1_all = story(g_plain, "1", 0, NULL);
    CHECKF(greedy && sampled && !same(greedy, sampled), "the plain file's default sampling gave the greedy text: %s",
           sampled ? sampled : "");
    CHECKF(same(keyed, greedy), "general.sampling.temp 0 not taken: '%s' against greedy '%s'", keyed ? keyed : "",
           greedy ? greedy : "");
    /* --temp 1 given: the file's top_k 20 still stands (its top_p 3 does not) */
    CHECKF(same(keyed_t1, plain_t1), "--temp 1 given did not win over the file's temp (or top_p 3 was taken)");
    CHECKF(plain_t1_all && !same(plain_t1, plain_t1_all), "top_k 20 changes nothing here: the check above is blind");
    CHECKF(err && strstr(err, "general.sampling.*): --temp 0 --top-k 20") && strstr(err, "general.sampling.top_p '3'") &&
           strstr(err, "ignored") && strstr(err, "general.sampling.mirostat '2' is not applied"), "-v: %s", err ? err : "");
    free(err);
    /* a blob keeps them */
    char *comp[] = {"staticlm", "compile", "-m", g_keys, "--max-prompt-len", "32", "-o", g_blob, NULL};
    char *ce = NULL;
    CHECKF(run_cmd(comp, NULL, &ce) == 0, "compile: %s", ce ? ce : "");
    free(ce);
    char *blob = story(g_blob, NULL, 0, NULL);
    CHECKF(same(blob, greedy), "the blob's run did not take its temp 0: '%s'", blob ? blob : "");
    free(greedy), free(sampled), free(keyed), free(keyed_t1), free(plain_t1), free(plain_t1_all), free(blob);
}

static void test_meta(void) {
    const char *files[2] = {g_keys, g_blob};
    for (int i = 0; i < 2; i++) {
        slm_options o = slm_default_options();
        o.max_prompt_len = 32;
        slm_engine *e = NULL;
        CHECKF(slm_load(&e, files[i], &o) == SLM_OK, "%s: %s", files[i], slm_last_error(e));
        char v[64] = "";
        CHECKF(slm_model_meta(e, "general.sampling.top_k", v, sizeof v) == 2 && !strcmp(v, "20"), "%s: top_k '%s'",
               files[i], v);
        CHECKF(slm_model_meta(e, "general.sampling.top_p", v, sizeof v) == 1 && !strcmp(v, "3"), "%s: top_p '%s'",
               files[i], v);
        CHECKF(slm_model_meta(e, "general.architecture", v, sizeof v) == 5 && !strcmp(v, "llama"), "%s", files[i]);
        CHECKF(slm_model_meta(e, "tokenizer.ggml.tokens", v, sizeof v) == -1, "%s: an array as text", files[i]);
        CHECKF(slm_model_meta(e, "general.sampling.min_p", v, sizeof v) == -1, "%s: an absent key", files[i]);
        slm_free(e);
    }
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/slm_sampling_defaults_%d", (int)getpid());
    mkdir(g_tmp, 0700);
    snprintf(g_plain, sizeof g_plain, "%s/plain.gguf", g_tmp);
    snprintf(g_keys, sizeof g_keys, "%s/keys.gguf", g_tmp);
    snprintf(g_blob, sizeof g_blob, "%s/keys.slmblob", g_tmp);
    if (make_files()) {
        T_RUN(test_run);
        T_RUN(test_meta);
    }
    const char *const rm[] = {g_plain, g_keys, g_blob};
    for (int i = 0; i < 3; i++) unlink(rm[i]);
    char p[320];
    snprintf(p, sizeof p, "%s/cmd.out", g_tmp), unlink(p);
    snprintf(p, sizeof p, "%s/cmd.err", g_tmp), unlink(p);
    rmdir(g_tmp);
    T_DONE();
}
