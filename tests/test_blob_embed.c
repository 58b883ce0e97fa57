/* Blobs with embedding programs against hostile bytes: every field of the
 * .slm.embed record, the embed batch programs' region, the heads in the
 * tensor table, each out of range, refused with a message naming the
 * section; the encoders' task variants (accumulating EMBED, LayerNorm,
 * ALiBi, attention both ways, rows stored at their cache position) refused
 * where the config or the program is not theirs; random damage to the new
 * sections and the embedding programs' tasks and I/O refused or, when
 * the validator accepts it, run (one text, then a batch) under the
 * sanitizers; the CLI's embed, inspect and compile --embeddings on blobs.
 * Models: a bert cross-encoder written by `staticlm synth` (Q8_0,
 * repacked heads) and stories260K. */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "blob_image.h"
#include "runtime/runtime.h"
#include "t.h"
#include "run_cmd.h"

static char dir[256], g_enc[320], g_dec[320], g_plain[320];

static uint32_t rd32le(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static int cli(char *const argv[], char **out) {
    char *o = NULL, *er = NULL;
    const int rc = t_run_capture(dir, SLM_CLI_PATH, argv, &o, &er);
    if (rc) fprintf(stderr, "  %s %s: %s\n", argv[1], argv[2], er ? er : "");
    if (out) *out = o;
    else free(o);
    free(er);
    return rc;
}

static void test_setup(void) {
    char gguf[320];
    snprintf(gguf, sizeof gguf, "%s/rr.gguf", dir);
    snprintf(g_enc, sizeof g_enc, "%s/rr.blob", dir);
    snprintf(g_dec, sizeof g_dec, "%s/s260-embed.blob", dir);
    snprintf(g_plain, sizeof g_plain, "%s/s260.blob", dir);
    char *synth[] = {"staticlm", "synth", "--shape", "custom", "--arch", "bert", "--dim", "32", "--layers", "2", "--heads",
                     "2", "--ffn", "64", "--ctx", "24", "--n-vocab", "300", "--pooling", "rank", "--type", "q8_0", "-o",
                     gguf, NULL};
    CHECK(cli(synth, NULL) == 0);
    char *par[] = {"staticlm", "compile", "-m", gguf, "--max-prompt-len", "24", "--parallel", "4", "-o", g_enc, NULL};
    CHECK(cli(par, NULL) == 2); /* an encoder has no decode to batch: refused, not ignored */
    CHECK(access(g_enc, F_OK) != 0);
    char *enc[] = {"staticlm", "compile", "-m", gguf, "--max-prompt-len", "24", "-o", g_enc, NULL};
    CHECK(cli(enc, NULL) == 0);
    char *dec[] = {"staticlm", "compile", "-m", T_SHARED("models/stories260K.bin"), "-z", T_SHARED("models/tok512.bin"),
                   "--max-prompt-len", "8", "--min-response-len", "8", "--embeddings", "-o", g_dec, NULL};
    CHECK(cli(dec, NULL) == 0);
    char *plain[] = {"staticlm", "compile", "-m", T_SHARED("models/stories260K.bin"), "-z", T_SHARED("models/tok512.bin"),
                     "--max-prompt-len", "8", "--min-response-len", "8", "-o", g_plain, NULL};
    CHECK(cli(plain, NULL) == 0);
    /* the CLI from the blobs: embed (the blob's own pooling, rank), inspect */
    char *o = NULL;
    char *emb[] = {"staticlm", "embed", "-m", g_enc, "-p", "w5 w7\tw9 w11", "--embd-output-format", "array", NULL};
    CHECK(cli(emb, &o) == 0);
    CHECKF(o && o[0] == '[', "%s", o ? o : "");
    free(o);
    char *ins[] = {"staticlm", "inspect", g_enc, NULL};
    CHECK(cli(ins, &o) == 0);
    CHECK(o && strstr(o, "embeddings: an encoder's programs alone, pooling rank") && strstr(o, "program embed.24") &&
          strstr(o, "embedding of 3 texts in regions of 8 rows"));
    free(o);
    char *ins2[] = {"staticlm", "inspect", g_dec, NULL};
    CHECK(cli(ins2, &o) == 0);
    CHECK(o && strstr(o, "programs beside the decoder's") && strstr(o, "program prefill.8") && strstr(o, "program embed.8"));
    free(o);
}

static uint8_t *image(const char *path, size_t *n) {
    uint8_t *img = (uint8_t *)t_read_file(path, n);
    CHECKF(img != NULL, "%s", path);
    return img;
}

/* Open img with bytes [at, at + len) replaced by v (checksum off): refused, the message naming want. */
static void refuse(const uint8_t *img, size_t n, uint8_t *at, const void *v, size_t len, const char *want, const char *what) {
    uint8_t *copy = malloc(n);
    memcpy(copy, img, n);
    memcpy(copy + (at - img), v, len);
    char msg[512];
    const int ok = t_blob_opens(copy, n, "hostile.blob", msg, sizeof msg);
    CHECKF(!ok, "%s: accepted", what);
    CHECKF(ok || (strstr(msg, "hostile.blob") && strstr(msg, want)), "%s: message '%s' does not name %s", what, msg, want);
    free(copy);
}

static void set_i32(const uint8_t *img, size_t n, uint8_t *at, int32_t v, const char *want, const char *what) {
    refuse(img, n, at, &v, 4, want, what);
}

/* Record k's address in section name of records of size rec (NULL past the end). */
static uint8_t *record(uint8_t *img, size_t n, const char *name, size_t rec, size_t k) {
    uint64_t len = 0;
    uint8_t *p = t_blob_section(img, n, name, &len);
    return p && (k + 1) * rec <= len ? p + k * rec : NULL;
}

static void test_embed_record(void) {
    size_t n = 0;
    uint8_t *img = image(g_enc, &n);
    if (!img) return;
    char msg[512];
    CHECKF(t_blob_opens(img, n, "ok.blob", msg, sizeof msg), "%s", msg);
    uint64_t len = 0;
    uint8_t *e = t_blob_section(img, n, ".slm.embed", &len);
    CHECK(e && len == 64);
    if (!e) goto out;
    set_i32(img, n, e, 60, ".slm.embed", "record size");
    set_i32(img, n, e + 4, 0, ".slm.config", "encoder 0 with arch bert");
    set_i32(img, n, e + 4, 2, ".slm.config", "encoder 2 (nomic-bert) with arch bert");
    set_i32(img, n, e + 4, 9, ".slm.embed", "encoder 9");
    set_i32(img, n, e + 8, 5, ".slm.embed", "pooling 5");
    set_i32(img, n, e + 8, -1, ".slm.embed", "pooling -1");
    set_i32(img, n, e + 12, 2, ".slm.embed", "add_eos 2");
    set_i32(img, n, e + 16, -1, ".slm.embed", "pair_bos -1");
    set_i32(img, n, e + 28, 300, ".slm.config", "sep beyond the vocabulary");
    set_i32(img, n, e + 28, -2, ".slm.config", "sep -2");
    set_i32(img, n, e + 32, -1, ".slm.embed", "n_cls1 -1");
    set_i32(img, n, e + 32, 31, ".slm.tensors", "n_cls1 not cls.weight's rows");
    set_i32(img, n, e + 36, 65, ".slm.embed", "n_cls 65");
    set_i32(img, n, e + 36, 0, ".slm.embed", "n_cls 0 with pooling rank");
    set_i32(img, n, e + 40, 4, ".slm.tensors", "d2 without dense_2");
    set_i32(img, n, e + 44, 0x20, ".slm.embed", "heads: an unknown bit");
    const uint32_t heads = rd32le(e + 44);
    set_i32(img, n, e + 44, (int32_t)(heads ^ SLM_BLOB_EMBED_CLS_B), ".slm.tensors", "heads: cls.output.bias flag off");
    set_i32(img, n, e + 44, (int32_t)(heads | SLM_BLOB_EMBED_DENSE_B), ".slm.embed", "heads: dense_2.bias without dense_2");
    set_i32(img, n, e + 52, 1, ".slm.embed", "reserved bytes");
    /* the section gone (renamed): its programs are refused */
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh.e_shoff);
    char *shstr = (char *)img + sh[eh.e_shstrndx].sh_offset;
    for (int i = 1; i < eh.e_shnum; i++)
        if (!strcmp(shstr + sh[i].sh_name, ".slm.embed")) refuse(img, n, (uint8_t *)shstr + sh[i].sh_name + 9, "x", 1, ".slm.config", "no .slm.embed: an encoder arch without its kind");
    /* the programs: an embed batch program's region; a kind the encoder has not */
    for (size_t k = 0; (e = record(img, n, ".slm.programs", 72, k)); k++) {
        if (rd32le(e + 24) != SLM_PROG_EMBED_BATCH) continue;
        set_i32(img, n, e + 68, 0, ".slm.programs", "embed batch region 0");
        set_i32(img, n, e + 68, 5, ".slm.programs", "embed batch region not dividing its rows");
        set_i32(img, n, e + 68, rd32le(e + 28), ".slm.programs", "embed batch of one region");
        set_i32(img, n, e + 24, SLM_PROG_PREFILL, ".slm.programs", "a prefill in an encoder's blob");
        break;
    }
    e = record(img, n, ".slm.programs", 72, 0);
    if (e) set_i32(img, n, e + 68, 8, ".slm.programs", "embed.T with a region");
    /* the heads in the tensor table */
    for (size_t k = 0; (e = record(img, n, ".slm.tensors", 120, k)); k++) {
        if (strcmp((const char *)e, "cls.output.weight") && strcmp((const char *)e, "cls.weight")) continue;
        const int64_t cols = 16;
        refuse(img, n, e + 72, &cols, 8, ".slm.tensors", "head columns");
        const uint64_t nb = rd32le(e + 112) + 4ull;
        refuse(img, n, e + 112, &nb, 8, ".slm.tensors", "head bytes");
        set_i32(img, n, e + 64, 200, ".slm.tensors", "head type unknown");
    }
out:
    free(img);
}

/* Task ti's field at off set to v, in the first task of op in program prog (kind): refused. */
static void task_case(const char *path, int kind, int op, int off, int32_t v, const char *what) {
    size_t n = 0;
    uint8_t *img = image(path, &n);
    if (!img) return;
    uint8_t *pr;
    int done = 0;
    for (size_t k = 0; !done && (pr = record(img, n, ".slm.programs", 72, k)); k++) {
        if ((int)rd32le(pr + 24) != kind) continue;
        char sec[64];
        snprintf(sec, sizeof sec, ".slm.tasks.%s", (const char *)pr);
        uint8_t *t;
        for (size_t i = 0; !done && (t = record(img, n, sec, 160, i)); i++)
            if (t[0] == op) {
                if (off == 2) { /* flags: a bit more */
                    const uint16_t f = (uint16_t)(t[2] | t[3] << 8 | v);
                    refuse(img, n, t + 2, &f, 2, sec, what);
                } else {
                    set_i32(img, n, t + off, v, sec, what);
                }
                done = 1;
            }
    }
    CHECKF(done, "%s: no such task", what);
    free(img);
}

static void test_tight_tasks(void) {
    /* a decoder's programs: none of the encoders' variants */
    task_case(g_plain, SLM_PROG_PREFILL, SLM_T_EMBED, 28, 1, "accumulating EMBED in a decoder");
    task_case(g_dec, SLM_PROG_EMBED, SLM_T_RMSNORM, 28, 1, "LayerNorm in a decoder's embed program");
    task_case(g_plain, SLM_PROG_PREFILL, SLM_T_ATTENTION, 48, -1, "attention both ways in a decoder");
    task_case(g_plain, SLM_PROG_PREFILL, SLM_T_ATTENTION, 156, 0x41000000, "ALiBi in a decoder");
    task_case(g_plain, SLM_PROG_PREFILL, SLM_T_KV_STORE, 2, SLM_TF_DST_CPOS, "rows at their cache position in a prefill");
    task_case(g_dec, SLM_PROG_EMBED, SLM_T_EMBED, 28, 1, "accumulating EMBED in a decoder's embed program");
    task_case(g_dec, SLM_PROG_EMBED, SLM_T_ATTENTION, 48, -1, "a decoder's embed program attending both ways");
    /* an encoder's: ALiBi is jina-bert-v2's; the window bounded; the accumulation of its width */
    task_case(g_enc, SLM_PROG_EMBED, SLM_T_ATTENTION, 156, 0x41000000, "ALiBi in a bert");
    task_case(g_enc, SLM_PROG_EMBED, SLM_T_ATTENTION, 48, INT32_MIN, "window INT32_MIN");
    task_case(g_enc, SLM_PROG_EMBED, SLM_T_EMBED, 28, 2, "EMBED a 2");
    task_case(g_enc, SLM_PROG_EMBED, SLM_T_EMBED, 12, 64, "EMBED wider than the model (its scratch row)");
    task_case(g_enc, SLM_PROG_EMBED, SLM_T_RMSNORM, 36, 8, "LayerNorm in groups");
    task_case(g_enc, SLM_PROG_EMBED_BATCH, SLM_T_ATTENTION, 16, 24, "a batch attention over the capacity, not its region");
    task_case(g_enc, SLM_PROG_EMBED, SLM_T_KV_STORE, 2, SLM_TF_DST_CPOS, "rows at their cache position in embed.T");
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static volatile float g_sink;
static void take_rows(void *ud, const float *rows, int first, int n_rows, int dim) {
    (void)ud, (void)first;
    for (int i = 0; i < n_rows * dim; i++) g_sink += rows[i];
}
static void take_text(void *ud, int text, const float *rows, int n_rows, int dim) { take_rows(ud, rows, text, n_rows, dim); }

/* Random damage in the sections whose names start with one of pre: with the
 * checksum, refused; without it refused or run. */
static void damage(const char *path, int cases, int *opened, int *ran) {
    size_t n = 0;
    uint8_t *img = image(path, &n);
    if (!img) return;
    static const char *const pre[] = {".slm.embed", ".slm.programs", ".slm.tasks.embed", ".slm.io.embed",
                                      ".slm.reloc.embed", ".slm.tensors"};
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh.e_shoff);
    const char *shstr = (const char *)img + sh[eh.e_shstrndx].sh_offset;
    int idx[256], ni = 0;
    for (int i = 1; i < eh.e_shnum && ni < 256; i++)
        for (size_t k = 0; k < sizeof pre / sizeof pre[0]; k++)
            if (!strncmp(shstr + sh[i].sh_name, pre[k], strlen(pre[k])) && sh[i].sh_size) idx[ni++] = i, k = 99;
    CHECK(ni >= 5);
    uint8_t *copy = malloc(n);
    for (int c = 0; ni && c < cases; c++) {
        memcpy(copy, img, n);
        const Elf64_Shdr *s = &sh[idx[rnd() % (uint64_t)ni]];
        const int hits = 1 + (int)(rnd() % 3);
        for (int h = 0; h < hits; h++) {
            const uint64_t at = s->sh_offset + rnd() % s->sh_size;
            copy[at] = (rnd() & 1) ? (uint8_t)rnd() : copy[at] ^ (uint8_t)(1u << (rnd() % 8));
        }
        slm_blob b;
        slm_compiled comp;
        slm_tokenizer *tok = NULL;
        slm_err err = {0};
        if (memcmp(copy, img, n)) { /* the checksum sees every change before the weights */
            CHECK(slm_blob_open_mem(&b, copy, n, "damaged.blob", 0, &comp, &tok, &err) != SLM_OK);
            CHECK(err.msg[0] != 0);
        }
        memset(&err, 0, sizeof err);
        if (slm_blob_open_mem(&b, copy, n, "damaged.blob", SLM_BLOB_NO_CHECKSUM, &comp, &tok, &err)) {
            CHECKF(strstr(err.msg, "damaged.blob") != NULL, "%s", err.msg);
            continue;
        }
        ++*opened;
        /* as the engine's budget would: no arena or KV of a damaged size (the validator bounds them at 2^40) */
        uint64_t big = (uint64_t)comp.cfg.n_layers * 2 * (uint64_t)comp.kv_capacity * (uint64_t)comp.cfg.n_kv_heads *
                       (uint64_t)comp.cfg.head_dim * 4;
        for (int i = 0; i < comp.n_progs; i++) big = comp.progs[i].arena_bytes > big ? comp.progs[i].arena_bytes : big;
        slm_runtime rt;
        if (big < (64u << 20) && slm_rt_init(&rt, &comp, b.weights, 1, &err) == SLM_OK) {
            int32_t ids[5] = {1, 7, 9, 3, 2};
            for (int i = 0; i < 5; i++) ids[i] %= comp.cfg.vocab_size;
            (void)slm_rt_embed(&rt, ids, 5, take_rows, NULL, &err);
            const int32_t *texts[3] = {ids, ids + 1, ids + 3};
            const int tn[3] = {5, 4, 2};
            if (slm_rt_embed_region_max(&rt) >= 5) (void)slm_rt_embed_batch(&rt, 3, texts, tn, take_text, NULL, &err);
            slm_rt_free(&rt);
            ++*ran;
        }
        slm_tok_free(tok);
        slm_compiled_free(&comp);
    }
    free(copy);
    free(img);
}

static void test_damage(void) {
    int opened = 0, ran = 0;
    damage(g_enc, 400, &opened, &ran);
    damage(g_dec, 200, &opened, &ran);
    printf("  600 damaged images: %d passed the validator (checksum off), %d ran\n", opened, ran);
    CHECK(opened >= 1 && ran >= 1); /* damage to padding and unused bytes passes */
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/slm_blob_embed_%d", (int)getpid());
    if (mkdir(dir, 0700) != 0) return 1;
    T_RUN(test_setup);
    T_RUN(test_embed_record);
    T_RUN(test_tight_tasks);
    T_RUN(test_damage);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    T_DONE();
}
