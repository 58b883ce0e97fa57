/* The blob (src/blob/, docs/blob.md): an ELF file readelf reads; the golden
 * texts from compiled blobs; every damaged or truncated blob refused with a
 * message (or, when only weight bytes changed, loaded) and none crashing;
 * cache mode recompiling stale and damaged blobs; the tokenizer section
 * round trip. */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blob/blob.h"
#include "blob/format.h"
#include "runtime/runtime.h"
#include "staticlm.h"
#include "t.h"
#include "run_cmd.h"

static char g_tmp[256];
static char g_blob260[512], g_blob288[512];

/* Run argv (argv[0] = program path), capture stdout and stderr. */
static int run_cmd(const char *prog, char *const argv[], char **out, char **errs) { return t_run_capture(g_tmp, prog, argv, out, errs); }

static int compile_blob(const char *model, const char *tok, const char *out) {
    /* f32 KV: the blobs run the f32 goldens */
    char *argv[] = {"staticlm", "compile", "-m", (char *)model, "-z", (char *)tok, "-o", (char *)out, "--kv-type", "f32", NULL};
    char *o = NULL, *e = NULL;
    int rc = run_cmd(SLM_CLI_PATH, argv, &o, &e);
    if (rc) fprintf(stderr, "compile failed: %s\n", e ? e : "");
    free(o);
    free(e);
    return rc == 0;
}

static void test_setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/slm_test_blob.XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL);
    snprintf(g_blob260, sizeof g_blob260, "%s/stories260K.blob", g_tmp);
    snprintf(g_blob288, sizeof g_blob288, "%s/rand288.blob", g_tmp);
    CHECK(compile_blob(T_SHARED("models/stories260K.bin"), T_SHARED("models/tok512.bin"), g_blob260));
    CHECK(compile_blob(T_SHARED("models/rand288.bin"), T_SHARED("models/tok512.bin"), g_blob288));
}

/* ---- readelf ------------------------------------------------------------- */

static const char *find_readelf(void) {
    static const char *const c[] = {"/usr/bin/readelf", "/bin/readelf", "/usr/local/bin/readelf"};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (access(c[i], X_OK) == 0) return c[i];
    return NULL;
}

static void test_readelf(void) {
    const char *re = find_readelf();
    if (!re) {
        fprintf(stderr, "  readelf not found: skipping (install binutils)\n");
        return;
    }
    char *argv[] = {"readelf", "-W", "-h", "-S", "-s", g_blob260, NULL};
    char *out = NULL, *err = NULL;
    int rc = run_cmd(re, argv, &out, &err);
    CHECKF(rc == 0, "readelf exit %d: %s", rc, err ? err : "");
    CHECKF(err && err[0] == 0, "readelf complained: %s", err ? err : "");
    static const char *const want[] = {".slm.ident", ".slm.config", ".slm.programs", ".slm.tasks.prefill.384",
                                       ".slm.io.prefill.384", ".slm.reloc.prefill.384", ".slm.tasks.generate.512",
                                       ".slm.const", ".slm.tensors", ".slm.tok", ".slm.meta", ".slm.weights",
                                       ".symtab", ".strtab", ".shstrtab", "ELF64", "prefill.384.input_ids",
                                       "generate.512.logits", "token_embd.weight", "blk.4.ffn_down.weight"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECKF(out && strstr(out, want[i]), "readelf output lacks %s", want[i]);
    free(out);
    free(err);
}

/* ---- golden texts from blobs ------------------------------------------------ */

static int count_ids(const char *s) {
    int n = 0;
    for (const char *p = s; *p;) {
        while (*p == ' ' || *p == '\n') p++;
        if (!*p) break;
        n++;
        while (*p && *p != ' ' && *p != '\n') p++;
    }
    return n;
}

static void golden_from_blob(const char *dir, const char *blob, int steps, int count) {
    for (int i = 0; i < count; i++) {
        char path[512], nbuf[32];
        snprintf(path, sizeof path, SLM_SHARED_DIR "/models/golden/%s/%d.prompt.txt", dir, i);
        char *prompt = t_read_file(path, NULL);
        snprintf(path, sizeof path, SLM_SHARED_DIR "/models/golden/%s/%d.prompt_ids.txt", dir, i);
        char *pids = t_read_file(path, NULL);
        snprintf(path, sizeof path, SLM_SHARED_DIR "/models/golden/%s/%d.txt", dir, i);
        char *want = t_read_file(path, NULL);
        CHECKF(prompt && pids && want, "missing golden %s/%d", dir, i);
        if (prompt && pids && want) {
            snprintf(nbuf, sizeof nbuf, "%d", steps - count_ids(pids) + 1);
            char *argv[] = {"staticlm", "run", "-m", (char *)blob, "-p", prompt, "-n", nbuf, "--temp", "0",
                            "--ignore-eos", NULL};
            char *got = NULL, *err = NULL;
            int rc = run_cmd(SLM_CLI_PATH, argv, &got, &err);
            CHECKF(rc == 0, "%s/%d from blob: exit %d: %s", dir, i, rc, err ? err : "");
            CHECKF(got && strcmp(got, want) == 0, "%s/%d from blob: output differs\n--- want\n%s\n--- got\n%s", dir, i,
                   want, got ? got : "");
            free(got);
            free(err);
        }
        free(prompt);
        free(pids);
        free(want);
    }
}

static void test_golden_stories260K(void) { golden_from_blob("stories260K", g_blob260, 200, 5); }
static void test_golden_rand288(void) { golden_from_blob("rand288", g_blob288, 256, 4); }

/* ---- damage ------------------------------------------------------------------- */

static uint64_t g_rng = 0x1234567;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

typedef struct damage_stats {
    int cases, refused, loaded_weights_only, validated_nochk, ran_nochk;
} damage_stats;

/* Try one damaged image (an exact-size heap copy, so ASan sees overreads).
 * weights_only: the damage is confined to the weights section. */
static void try_image(const uint8_t *img, size_t n, int weights_only, const char *what, damage_stats *st) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, img, n);
    slm_blob b;
    slm_compiled c;
    slm_tokenizer *tok = NULL;
    slm_err err = {0};
    st->cases++;
    slm_status s = slm_blob_open_mem(&b, copy, n, "damaged.blob", 0, &c, &tok, &err);
    if (weights_only) {
        if (s != SLM_OK && st->cases - st->refused - st->loaded_weights_only > 5) {
            t_checks_failed_++; /* already reported five */
        } else
            CHECKF(s == SLM_OK, "%s: weights-only damage refused: %s", what, err.msg);
        if (!s) st->loaded_weights_only++;
    } else {
        CHECKF(s != SLM_OK, "%s: damaged blob accepted", what);
        CHECKF(s == SLM_OK || err.msg[0], "%s: refused without a message", what);
        if (s) st->refused++;
    }
    if (!s) {
        slm_tok_free(tok);
        slm_compiled_free(&c);
    }
    /* the validator alone (no checksum): must refuse or produce programs that run */
    memset(&err, 0, sizeof err);
    s = slm_blob_open_mem(&b, copy, n, "damaged.blob", SLM_BLOB_NO_CHECKSUM, &c, &tok, &err);
    if (s) CHECKF(err.msg[0], "%s: refused without a message (no checksum)", what);
    if (!s) {
        st->validated_nochk++;
        slm_runtime rt;
        if (slm_rt_init(&rt, &c, b.weights, 1, &err) == SLM_OK) {
            int32_t ids[3] = {1, 2, 3};
            for (int i = 0; i < 3; i++) ids[i] = ids[i] % c.cfg.vocab_size;
            if (slm_rt_prefill(&rt, ids, 3, &err) == SLM_OK) (void)slm_rt_decode(&rt, ids[0], &err);
            st->ran_nochk++;
            slm_rt_free(&rt);
        }
        slm_tok_free(tok);
        slm_compiled_free(&c);
    }
    free(copy);
}

static void test_damage(void) {
    size_t n = 0;
    uint8_t *img = (uint8_t *)t_read_file(g_blob260, &n);
    CHECK(img != NULL);
    if (!img) return;
    /* the pristine blob loads */
    damage_stats st = {0};
    {
        slm_blob b;
        slm_compiled c;
        slm_tokenizer *tok;
        slm_err err = {0};
        CHECKF(slm_blob_open_mem(&b, img, n, "ok.blob", 0, &c, &tok, &err) == SLM_OK, "%s", err.msg);
        slm_tok_free(tok);
        slm_compiled_free(&c);
    }
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    Elf64_Shdr *sh = calloc(eh.e_shnum, sizeof *sh);
    memcpy(sh, img + eh.e_shoff, eh.e_shnum * sizeof *sh);
    const char *shstr = (const char *)img + sh[eh.e_shstrndx].sh_offset;
    uint64_t w_lo = 0, w_hi = 0;
    for (int i = 1; i < eh.e_shnum; i++)
        if (!strcmp(shstr + sh[i].sh_name, ".slm.weights")) {
            w_lo = sh[i].sh_offset;
            w_hi = sh[i].sh_offset + sh[i].sh_size;
        }
    CHECK(w_hi == n && w_lo > 0);
    /* boundaries: every section's start and end, the section header table */
    uint64_t *bounds = calloc((size_t)eh.e_shnum * 2 + 8, sizeof *bounds);
    int nb = 0;
    for (int i = 1; i < eh.e_shnum; i++) {
        bounds[nb++] = sh[i].sh_offset;
        bounds[nb++] = sh[i].sh_offset + sh[i].sh_size;
    }
    bounds[nb++] = eh.e_shoff;
    bounds[nb++] = eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr);
    bounds[nb++] = 0;
    bounds[nb++] = 1;
    bounds[nb++] = 63;
    bounds[nb++] = 64;
    char what[128];
    uint8_t *work = malloc(n);
    for (int i = 0; i < nb; i++) {
        uint64_t at = bounds[i];
        /* truncation at the boundary (and one byte either side) */
        for (int d = -1; d <= 1; d++) {
            uint64_t cut = at + (uint64_t)(int64_t)d;
            if ((int64_t)at + d < 0 || cut >= n) continue;
            snprintf(what, sizeof what, "truncated at %llu", (unsigned long long)cut);
            try_image(img, (size_t)cut, 0, what, &st);
        }
        /* a flipped byte at the boundary and just before it */
        for (int d = -1; d <= 0; d++) {
            if ((int64_t)at + d < 0 || at + (uint64_t)(int64_t)d >= n) continue;
            uint64_t pos = at + (uint64_t)(int64_t)d;
            memcpy(work, img, n);
            work[pos] ^= (uint8_t)(1u << (rnd() % 8));
            snprintf(what, sizeof what, "byte %llu flipped", (unsigned long long)pos);
            try_image(work, n, pos >= w_lo, what, &st);
        }
    }
    /* random truncations and flips (fixed seed): half over the whole file,
     * half over the bytes before the weights */
    for (int i = 0; i < 200; i++) {
        uint64_t cut = rnd() % n;
        snprintf(what, sizeof what, "truncated at %llu", (unsigned long long)cut);
        try_image(img, (size_t)cut, 0, what, &st);
    }
    for (int i = 0; i < 400; i++) {
        uint64_t pos = (i % 2) ? rnd() % n : rnd() % w_lo;
        int nflip = 1 + (int)(rnd() % 3);
        memcpy(work, img, n);
        int only_w = 1;
        for (int k = 0; k < nflip; k++) {
            uint64_t p = k == 0 ? pos : (pos + rnd() % 64) % n;
            work[p] ^= (uint8_t)(1 + rnd() % 255);
            if (p < w_lo) only_w = 0;
        }
        snprintf(what, sizeof what, "%d bytes flipped near %llu", nflip, (unsigned long long)pos);
        try_image(work, n, only_w, what, &st);
    }
    /* structured damage with a valid checksum-free path: field values set to
     * extremes inside the task, I/O and relocation sections */
    for (int i = 0; i < 300; i++) {
        memcpy(work, img, n);
        uint64_t pos = 64 + rnd() % (w_lo - 64);
        static const uint32_t vals[] = {0, 1, 0xffffffffu, 0x7fffffffu, 0x80000000u, 4096, 65535};
        uint32_t v = vals[rnd() % (sizeof vals / sizeof vals[0])];
        pos &= ~(uint64_t)3;
        if (pos + 4 > w_lo) continue;
        memcpy(work + pos, &v, 4);
        if (!memcmp(work + pos, img + pos, 4)) continue;
        snprintf(what, sizeof what, "u32 at %llu set to 0x%x", (unsigned long long)pos, v);
        try_image(work, n, 0, what, &st);
    }
    fprintf(stderr, "  %d damaged blobs: %d refused, %d with damaged weights loaded; without the checksum %d "
                    "validated, %d of them ran\n",
            st.cases, st.refused, st.loaded_weights_only, st.validated_nochk, st.ran_nochk);
    CHECK(st.cases >= 500);
    free(work);
    free(bounds);
    free(sh);
    free(img);
}

/* A refusal names the section and field. */
static void test_messages(void) {
    size_t n = 0;
    uint8_t *img = (uint8_t *)t_read_file(g_blob260, &n);
    if (!img) return;
    slm_blob b;
    slm_compiled c;
    slm_tokenizer *tok;
    slm_err err = {0};
    CHECK(slm_blob_open_mem(&b, img, n - 1, "x.blob", 0, &c, &tok, &err) != SLM_OK);
    CHECKF(strstr(err.msg, ".slm.weights") != NULL, "truncation message: %s", err.msg);
    img[100] ^= 1;
    memset(&err, 0, sizeof err);
    CHECK(slm_blob_open_mem(&b, img, n, "x.blob", 0, &c, &tok, &err) != SLM_OK);
    CHECKF(strstr(err.msg, "checksum") != NULL, "flip message: %s", err.msg);
    free(img);
}

/* ---- cache mode ------------------------------------------------------------- */

static int count_files(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    size_t sl = strlen(suffix);
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l >= sl && !strcmp(de->d_name + l - sl, suffix)) n++;
    }
    closedir(d);
    return n;
}

/* The one cached blob's path (first match). */
static int find_blob(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    int ok = 0;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".slmblob") && !strstr(de->d_name, ".tmp.")) {
            snprintf(out, cap, "%s/%s", dir, de->d_name);
            ok = 1;
            break;
        }
    closedir(d);
    return ok;
}

/* Load with the cache; return the note (copied) and the first greedy token. */
static int cache_load(const char *model, const char *dir, int mrl, char *note, size_t cap) {
    slm_options o = slm_default_options();
    o.tokenizer_path = T_SHARED("models/tok512.bin");
    o.cache_dir = dir;
    o.min_response_len = mrl;
    o.n_threads = 1;
    slm_engine *e = NULL;
    slm_status s = slm_load(&e, model, &o);
    CHECKF(s == SLM_OK, "cache load: %s", slm_last_error(e));
    snprintf(note, cap, "%s", slm_cache_note(e));
    int tok = -1;
    if (!s) {
        int32_t ids[2] = {1, 400};
        const float *lg = NULL;
        if (slm_prefill(e, ids, 2, &lg) == SLM_OK) {
            slm_info in;
            slm_get_info(e, &in);
            tok = 0;
            for (int i = 1; i < in.vocab_size; i++)
                if (lg[i] > lg[tok]) tok = i;
        }
    }
    slm_free(e);
    return tok;
}

static void test_cache(void) {
    char dir[300], model[300], note[2048], blob[600];
    snprintf(dir, sizeof dir, "%s/cache", g_tmp);
    snprintf(model, sizeof model, "%s/model.bin", g_tmp);
    size_t n = 0;
    char *m = t_read_file(T_SHARED("models/stories260K.bin"), &n);
    CHECK(m && t_write_file(model, m, n));
    /* first start compiles, second loads */
    int t0 = cache_load(model, dir, 128, note, sizeof note);
    CHECKF(strstr(note, "compiling"), "first start: %s", note);
    CHECK(count_files(dir, ".slmblob") == 1);
    int t1 = cache_load(model, dir, 128, note, sizeof note);
    CHECKF(strstr(note, "loaded cached blob"), "second start: %s", note);
    CHECK(t0 == t1 && t0 >= 0);
    /* a changed option: another identity, compiled */
    cache_load(model, dir, 64, note, sizeof note);
    CHECKF(strstr(note, "compiling"), "changed option: %s", note);
    CHECK(count_files(dir, ".slmblob") == 2);
    /* a changed model byte: another identity, compiled, never the old blob */
    CHECK(find_blob(dir, blob, sizeof blob));
    m[n - 1] ^= 0x40;
    CHECK(t_write_file(model, m, n));
    cache_load(model, dir, 128, note, sizeof note);
    CHECKF(strstr(note, "compiling"), "changed model byte: %s", note);
    CHECK(count_files(dir, ".slmblob") == 3);
    /* an old blob put under the new identity's name: stale, recompiled */
    char fresh[600];
    {
        /* the blob just written for the changed model is the newest name; find it */
        char want[64];
        const char *p = strstr(note, "compiling into ");
        CHECK(p != NULL);
        snprintf(fresh, sizeof fresh, "%s", p ? p + strlen("compiling into ") : "");
        (void)want;
    }
    size_t on = 0;
    char *old = NULL;
    {
        /* the blob of the original model with mrl 128: compile it once more by restoring the byte */
        m[n - 1] ^= 0x40;
        CHECK(t_write_file(model, m, n));
        cache_load(model, dir, 128, note, sizeof note);
        CHECKF(strstr(note, "loaded cached blob"), "original model again: %s", note);
        const char *p = strstr(note, "loaded cached blob ");
        char orig[600];
        snprintf(orig, sizeof orig, "%s", p ? p + strlen("loaded cached blob ") : "");
        old = t_read_file(orig, &on);
        CHECK(old != NULL);
        m[n - 1] ^= 0x40;
        CHECK(t_write_file(model, m, n));
    }
    if (old) CHECK(t_write_file(fresh, old, on));
    cache_load(model, dir, 128, note, sizeof note);
    CHECKF(strstr(note, "stale") && strstr(note, "model bytes"), "old blob under the new name: %s", note);
    cache_load(model, dir, 128, note, sizeof note);
    CHECKF(strstr(note, "loaded cached blob"), "after recompiling the stale blob: %s", note);
    /* a damaged cached blob: refused with a message and replaced */
    size_t bn = 0;
    char *bb = t_read_file(fresh, &bn);
    CHECK(bb != NULL);
    if (bb) {
        bb[200] ^= 0x10;
        CHECK(t_write_file(fresh, bb, bn));
        cache_load(model, dir, 128, note, sizeof note);
        CHECKF(strstr(note, "refused") && strstr(note, "checksum"), "damaged cached blob: %s", note);
        cache_load(model, dir, 128, note, sizeof note);
        CHECKF(strstr(note, "loaded cached blob"), "after replacing the damaged blob: %s", note);
        /* truncated (as a non-atomic writer would leave it): refused, replaced */
        CHECK(t_write_file(fresh, bb, bn / 2));
        cache_load(model, dir, 128, note, sizeof note);
        CHECKF(strstr(note, "refused"), "truncated cached blob: %s", note);
        free(bb);
    }
    /* an interrupted write leaves only a temporary file: ignored, compiled */
    char dir2[320], tmpf[700];
    snprintf(dir2, sizeof dir2, "%s/cache2", g_tmp);
    mkdir(dir2, 0777);
    {
        /* what slm_blob_write leaves when killed mid-way: NAME.tmp.XXXXXX, half written */
        const char *base = strrchr(fresh, '/');
        snprintf(tmpf, sizeof tmpf, "%s%s.tmp.abc123", dir2, base ? base : "/x");
        CHECK(old && t_write_file(tmpf, old, on / 3));
    }
    cache_load(model, dir2, 128, note, sizeof note);
    CHECKF(strstr(note, "compiling"), "leftover temporary file: %s", note);
    cache_load(model, dir2, 128, note, sizeof note);
    CHECKF(strstr(note, "loaded cached blob"), "after the leftover: %s", note);
    free(old);
    free(m);
}

/* The CLI prints the note when it recompiles. */
static void test_cache_cli_note(void) {
    char dir[300], model[300];
    snprintf(dir, sizeof dir, "%s/cache3", g_tmp);
    snprintf(model, sizeof model, "%s/model3.bin", g_tmp);
    size_t n = 0;
    char *m = t_read_file(T_SHARED("models/stories260K.bin"), &n);
    CHECK(m && t_write_file(model, m, n));
    char *argv[] = {"staticlm", "run", "-m", model, "-z", (char *)T_SHARED("models/tok512.bin"), "--cache-dir", dir,
                    "-n", "5", "--temp", "0", "-p", "Once", NULL};
    char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL;
    CHECK(run_cmd(SLM_CLI_PATH, argv, &o1, &e1) == 0);
    char blob[600];
    CHECK(find_blob(dir, blob, sizeof blob));
    size_t bn = 0;
    char *bb = t_read_file(blob, &bn);
    if (bb) {
        bb[300] ^= 1;
        CHECK(t_write_file(blob, bb, bn));
    }
    CHECK(run_cmd(SLM_CLI_PATH, argv, &o2, &e2) == 0);
    CHECKF(e2 && strstr(e2, "note:") && strstr(e2, "recompiling"), "stderr: %s", e2 ? e2 : "");
    CHECKF(o1 && o2 && !strcmp(o1, o2), "outputs differ: '%s' vs '%s'", o1, o2);
    free(bb);
    free(o1);
    free(e1);
    free(o2);
    free(e2);
    free(m);
}

/* ---- inspect, tokenizer section ---------------------------------------------- */

static void test_inspect(void) {
    char *argv[] = {"staticlm", "inspect", g_blob260, "--verify", NULL};
    char *out = NULL, *err = NULL;
    CHECK(run_cmd(SLM_CLI_PATH, argv, &out, &err) == 0);
    static const char *const want[] = {"identity", "prefill.384", "generate.512", "matmul", "attention",
                                       "past_key_values.4.value", "KV cache", "arena", "weights: hash verified",
                                       "stories260K.bin"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECKF(out && strstr(out, want[i]), "inspect output lacks '%s'", want[i]);
    free(out);
    free(err);
}

static void roundtrip(slm_tokenizer *t, const char *name) {
    uint8_t *buf = NULL;
    size_t n = 0;
    slm_err err = {0};
    CHECK(slm_tok_save(t, &buf, &n, &err) == SLM_OK);
    slm_tokenizer *u = NULL;
    CHECKF(slm_tok_load_mem(&u, buf, n, name, &err) == SLM_OK, "%s", err.msg);
    if (u) {
        CHECK(slm_tok_vocab_size(u) == slm_tok_vocab_size(t));
        CHECK(slm_tok_bos(u) == slm_tok_bos(t) && slm_tok_eos(u) == slm_tok_eos(t));
        for (int id = 0; id < slm_tok_vocab_size(t); id++) {
            if (strcmp(slm_tok_str(u, id), slm_tok_str(t, id)) || slm_tok_type(u, id) != slm_tok_type(t, id) ||
                slm_tok_score(u, id) != slm_tok_score(t, id) || strcmp(slm_tok_decode(u, 1, id), slm_tok_decode(t, 1, id))) {
                CHECKF(0, "%s: token %d differs", name, id);
                break;
            }
        }
        static const char *const texts[] = {"", "Hello world", "Once upon a time, there was a little girl named Lily.",
                                            "  spaces\tand\ttabs\n\nnewlines  ", "caf\xc3\xa9 \xf0\x9f\x98\x80 emoji",
                                            "<s>special</s> text"};
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            int32_t a[256], b[256];
            int na = slm_tok_encode(t, texts[i], 1, 0, a, 256), nb = slm_tok_encode(u, texts[i], 1, 0, b, 256);
            CHECKF(na == nb && na <= 256 && !memcmp(a, b, (size_t)na * 4), "%s: '%s' encodes differently", name, texts[i]);
        }
        /* every truncation of the record is refused */
        for (size_t cut = 0; cut < n; cut += 1 + cut / 8) {
            slm_tokenizer *v = NULL;
            uint8_t *c = malloc(cut ? cut : 1);
            memcpy(c, buf, cut);
            CHECK(slm_tok_load_mem(&v, c, cut, name, &err) != SLM_OK);
            slm_tok_free(v);
            free(c);
        }
    }
    slm_tok_free(u);
    slm_xfree(buf);
}

static void test_tokenizer_section(void) {
    slm_err err = {0};
    slm_tokenizer *t = NULL;
    CHECK(slm_tok_load_llama2c(&t, T_SHARED("models/tok512.bin"), 512, &err) == SLM_OK);
    if (t) roundtrip(t, "tok512");
    slm_tok_free(t);
    t = NULL;
    CHECK(slm_tok_load_llama2c(&t, T_SHARED("models/llama2-tokenizer.bin"), 32000, &err) == SLM_OK);
    if (t) roundtrip(t, "llama2");
    slm_tok_free(t);
    slm_map map;
    if (slm_map_file(&map, T_SHARED("vocab/ggml-vocab-llama-spm.gguf"), &err) == SLM_OK) {
        slm_gguf *g = NULL;
        if (slm_gguf_open(&g, map.data, map.size, "spm", &err) == SLM_OK) {
            t = NULL;
            CHECKF(slm_tok_load_gguf(&t, g, "spm", &err) == SLM_OK, "%s", err.msg);
            if (t) roundtrip(t, "llama-spm");
            slm_tok_free(t);
            slm_gguf_close(g);
        }
        slm_unmap(&map);
    }
}

/* GGUF metadata strings survive (slm_model_meta from a blob). */
static void test_gguf_meta(void) {
    char gguf[300], blob[300];
    snprintf(gguf, sizeof gguf, "%s/s.gguf", g_tmp);
    snprintf(blob, sizeof blob, "%s/s_gguf.blob", g_tmp);
    char *argv[] = {"staticlm", "convert", "-m", (char *)T_SHARED("models/stories260K.bin"), "-z",
                    (char *)T_SHARED("models/tok512.bin"), "-o", gguf, NULL};
    CHECK(run_cmd(SLM_CLI_PATH, argv, NULL, NULL) == 0);
    char *argv2[] = {"staticlm", "compile", "-m", gguf, "-o", blob, NULL};
    CHECK(run_cmd(SLM_CLI_PATH, argv2, NULL, NULL) == 0);
    slm_engine *a = NULL, *b = NULL;
    slm_options o = slm_default_options();
    o.n_threads = 1;
    CHECK(slm_load(&a, gguf, &o) == SLM_OK);
    CHECK(slm_load(&b, blob, &o) == SLM_OK);
    char va[256], vb[256];
    long la = slm_model_meta(a, "general.architecture", va, sizeof va);
    long lb = slm_model_meta(b, "general.architecture", vb, sizeof vb);
    CHECKF(la > 0 && la == lb && !strcmp(va, vb), "general.architecture: '%s' vs '%s'", va, vb);
    /* the same logits, bit for bit */
    int32_t ids[4] = {1, 400, 300, 77};
    const float *lgA = NULL, *lgB = NULL;
    CHECK(slm_prefill(a, ids, 4, &lgA) == SLM_OK && slm_prefill(b, ids, 4, &lgB) == SLM_OK);
    if (lgA && lgB) CHECK(memcmp(lgA, lgB, 512 * sizeof(float)) == 0);
    slm_free(a);
    slm_free(b);
}

/* Repacked weights: the blob stores the compiler's layout (q4_0_r16,
 * q6_k_r16, q8_0_r16 for a tied embedding, f16_r16), inspect names it, and
 * the blob's logits equal the source model's (repacked at load) bit for bit,
 * in prefill and decode. */
static void test_repacked_blob(void) {
    static const struct { const char *args, *want[2]; } k[] = {
        {"--shape custom --type q4_0 --dim 256 --heads 4 --kv-heads 1 --ffn 512 --n-vocab 320 --untied",
         {"q4_0_r16 x14", "q6_k_r16 x1"}},
        {"--shape custom --type q4_0 --tied", {"q4_0_r16", "q8_0_r16 x1"}},
        {"--shape custom --type f16 --untied", {"f16_r16", NULL}},
        {"--shape custom --type q4_k_m --dim 256 --heads 4 --kv-heads 1 --ffn 512 --n-vocab 320 --untied",
         {"q4_k_r16 x", "q6_k_r16 x"}},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char gguf[300], blob[300], cmd[1200];
        snprintf(gguf, sizeof gguf, "%s/r%zu.gguf", g_tmp, i);
        snprintf(blob, sizeof blob, "%s/r%zu.blob", g_tmp, i);
        snprintf(cmd, sizeof cmd, "\"%s\" synth %s -o \"%s\" --vocab-file \"%s\" >/dev/null 2>&1", SLM_CLI_PATH, k[i].args,
                 gguf, T_SHARED("vocab/ggml-vocab-llama-spm.gguf"));
        const int rc = system(cmd);
        CHECKF(rc == 0, "%s", cmd);
        if (rc != 0) continue;
        char *argv[] = {"staticlm", "compile", "-m", gguf, "-o", blob, NULL};
        CHECK(run_cmd(SLM_CLI_PATH, argv, NULL, NULL) == 0);
        char *argv2[] = {"staticlm", "inspect", blob, NULL}, *out = NULL;
        CHECK(run_cmd(SLM_CLI_PATH, argv2, &out, NULL) == 0);
        for (int w = 0; w < 2; w++)
            if (k[i].want[w]) CHECKF(out && strstr(out, k[i].want[w]), "%s: inspect lacks '%s'", k[i].args, k[i].want[w]);
        free(out);
        slm_engine *a = NULL, *b = NULL;
        slm_options o = slm_default_options();
        o.n_threads = 2;
        o.max_prompt_len = 16;
        o.min_response_len = 16;
        /* a blob refuses options it fixed otherwise, naming the option and its value */
        CHECK(slm_load(&b, blob, &o) == SLM_ERR_ARG && strstr(slm_last_error(b), "--max-prompt-len 16") &&
              strstr(slm_last_error(b), "max_prompt_len 128"));
        slm_free(b);
        b = NULL;
        slm_options ob = slm_default_options();
        ob.n_threads = 2;
        /* the same capacity: the programs (decode attention in key parts from 256 KV rows) match */
        const slm_status sa = slm_load(&a, gguf, &ob), sb = slm_load(&b, blob, &ob);
        CHECKF(sa == SLM_OK && sb == SLM_OK, "%s: load %s / %s", k[i].args, slm_last_error(a), slm_last_error(b));
        if (sa || sb) {
            slm_free(a);
            slm_free(b);
            continue;
        }
        slm_info in;
        slm_get_info(a, &in);
        int32_t ids[5] = {1, 40, 30, 77, 5};
        const float *la = NULL, *lb = NULL;
        CHECK(slm_prefill(a, ids, 5, &la) == SLM_OK && slm_prefill(b, ids, 5, &lb) == SLM_OK);
        if (la && lb) CHECK(memcmp(la, lb, (size_t)in.vocab_size * sizeof(float)) == 0);
        for (int step = 0; step < 4 && la && lb; step++) {
            CHECK(slm_decode(a, 10 + step, &la) == SLM_OK && slm_decode(b, 10 + step, &lb) == SLM_OK);
            if (la && lb) CHECK(memcmp(la, lb, (size_t)in.vocab_size * sizeof(float)) == 0);
        }
        slm_free(a);
        slm_free(b);
    }
}

/* ---- out of memory while writing ------------------------------------------- */

static long g_fail_left = -1; /* allocations left before one fails; -1: never */
static void *nth_alloc(void *ud, size_t n) {
    (void)ud;
    if (g_fail_left == 0) return NULL;
    if (g_fail_left > 0) g_fail_left--;
    return malloc(n);
}
static void *nth_realloc(void *ud, void *p, size_t n) {
    (void)ud;
    if (g_fail_left == 0) return NULL;
    if (g_fail_left > 0) g_fail_left--;
    return realloc(p, n);
}
static void nth_free(void *ud, void *p) {
    (void)ud;
    free(p);
}

/* slm_save_blob with the Nth allocation failing, for every N until it
 * succeeds: each failure is SLM_ERR_NOMEM with a message, leaves no file
 * behind (neither the blob nor its temporary), and the
 * blob finally written is the one written without failures. */
static void test_write_nomem(void) {
    slm_options opt = slm_default_options();
    opt.tokenizer_path = T_SHARED("models/tok512.bin");
    opt.max_prompt_len = 32;
    opt.min_response_len = 16;
    opt.n_threads = 1;
    slm_engine *e = NULL;
    CHECK(slm_load(&e, T_SHARED("models/stories260K.bin"), &opt) == SLM_OK);
    if (!e) return;
    char ref[300], path[300];
    snprintf(ref, sizeof ref, "%s/ref.blob", g_tmp);
    snprintf(path, sizeof path, "%s/nomem.blob", g_tmp);
    CHECK(slm_save_blob(e, ref) == SLM_OK);
    /* installed after slm_load (the engine's threads are idle: nothing else
     * allocates now); it frees with free() as the default allocator does */
    const slm_allocator a = {nth_alloc, nth_realloc, nth_free, NULL};
    slm_set_allocator(&a);
    int n, failures = 0, done = 0;
    for (n = 0; n < 100000 && !done; n++) {
        g_fail_left = n;
        slm_status s = slm_save_blob(e, path);
        int failed = g_fail_left == 0; /* the Nth allocation was reached */
        g_fail_left = -1;
        if (s == SLM_OK) {
            done = 1;
            break;
        }
        failures++;
        CHECKF(s == SLM_ERR_NOMEM && failed, "allocation %d: status %d: %s", n, s, slm_last_error(e));
        CHECKF(strstr(slm_last_error(e), "out of memory"), "allocation %d: message: %s", n, slm_last_error(e));
        CHECKF(access(path, F_OK) != 0, "allocation %d: %s written", n, path);
        DIR *d = opendir(g_tmp);
        for (struct dirent *de; d && (de = readdir(d));)
            CHECKF(!strstr(de->d_name, ".tmp."), "allocation %d left %s behind", n, de->d_name);
        if (d) closedir(d);
        if (t_checks_failed_) break;
    }
    slm_set_allocator(NULL);
    CHECKF(done && failures > 10, "%d allocations failed, then %s", failures, done ? "written" : "never written");
    size_t n1 = 0, n2 = 0;
    char *b1 = t_read_file(ref, &n1), *b2 = t_read_file(path, &n2);
    CHECK(b1 && b2 && n1 == n2 && !memcmp(b1, b2, n1));
    free(b1);
    free(b2);
    unlink(ref);
    unlink(path);
    slm_free(e);
}

static void cleanup(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", g_tmp);
}

int main(void) {
    T_RUN(test_setup);
    T_RUN(test_readelf);
    T_RUN(test_golden_stories260K);
    T_RUN(test_golden_rand288);
    T_RUN(test_messages);
    T_RUN(test_damage);
    T_RUN(test_cache);
    T_RUN(test_cache_cli_note);
    T_RUN(test_inspect);
    T_RUN(test_tokenizer_section);
    T_RUN(test_gguf_meta);
    T_RUN(test_repacked_blob);
    T_RUN(test_write_nomem);
    cleanup();
    T_DONE();
}
