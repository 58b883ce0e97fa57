/* Blobs with embedding programs against hostile bytes: every field of the
 * .slm.embed record, the embed batch programs' region, the heads in the
 * tensor table, each out of range, refused with a message naming the
 * section; the encoders' task variants (accumulating EMBED, LayerNorm,
 * ALiBi, attention both ways, rows stored at their cache position) refused
 * where the config or the program is not theirs; random damage to the new
 * sections and the embedding programs' tasks and I/O refused or, when
 * the validator accepts it, run (one text, then a batch) under the
 * sanitizers; the CLI's embed, inspect and compile --embeddings on blobs.
 * Format 23: a nomic-bert-moe (ungated experts on layers 1 and 3) and a
 * BERT folder with three Dense modules, each from a blob and cache mode
 * bit for bit as from its source, and their new fields and tasks out of
 * place. Models: a bert cross-encoder (Q8_0, repacked heads) and the
 * nomic-bert-moe written by `staticlm synth`, the folder written here, and
 * stories260K. */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "format/model.h"
#include "blob_image.h"
#include "t_blob_embed.h"
#include "t_hf_twin.h"
#include "st_write.h"
#include "runtime/runtime.h"
#include "t.h"
#include "run_cmd.h"

static char dir[256], g_enc[320], g_dec[320], g_plain[320], g_moe[320], g_moe_blob[320];

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
    /* compile's encoder test reads the architecture alone: a GGUF's key, a folder's config.json */
    CHECK(slm_model_peek_encoder(gguf) == 1);
    CHECK(slm_model_peek_encoder(T_SHARED("models/stories260K.bin")) == 0);
    char folder[320], cfg[360];
    snprintf(folder, sizeof folder, "%s/bert-folder", dir);
    CHECK(mkdir(folder, 0700) == 0);
    CHECK(slm_model_peek_encoder(folder) == 0); /* no config.json: not known here, the load says why */
    snprintf(cfg, sizeof cfg, "%s/config.json", folder);
    FILE *f = fopen(cfg, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"architectures\": [\"BertModel\"], \"model_type\": \"bert\", \"hidden_size\": 32, "
              "\"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
              "\"max_position_embeddings\": 24, \"vocab_size\": 300, \"type_vocab_size\": 2}\n", f);
        fclose(f);
    }
    CHECK(slm_model_peek_encoder(folder) == 1);
    f = fopen(cfg, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 2, "
              "\"num_attention_heads\": 2, \"vocab_size\": 300}\n", f);
        fclose(f);
    }
    CHECK(slm_model_peek_encoder(folder) == 0);
    unlink(cfg);
    rmdir(folder);
    CHECK(slm_model_peek_encoder(cfg) == 0 && slm_model_peek_encoder(NULL) == 0);
    char *par[] = {"staticlm", "compile", "-m", gguf, "--max-prompt-len", "24", "--parallel", "4", "-o", g_enc, NULL};
    CHECK(cli(par, NULL) == 2); /* an encoder has no decode to batch: refused, not ignored */
    CHECK(access(g_enc, F_OK) != 0);
    char *enc[] = {"staticlm", "compile", "-m", gguf, "--max-prompt-len", "24", "-o", g_enc, NULL};
    CHECK(cli(enc, NULL) == 0);
    char *dec[] = {"staticlm", "compile", "-m", T_SHARED("models/stories260K.bin"), "-z", T_SHARED("models/tok512.bin"),
                   "--max-prompt-len", "8", "--min-response-len", "8", "--embeddings", "-o", g_dec, NULL};
    CHECK(cli(dec, NULL) == 0);
    /* nomic-bert-moe: experts (ungated) on layers 1 and 3 */
    snprintf(g_moe, sizeof g_moe, "%s/moe.gguf", dir);
    snprintf(g_moe_blob, sizeof g_moe_blob, "%s/moe.blob", dir);
    char *msynth[] = {"staticlm", "synth", "--shape", "custom", "--arch", "nomic-bert-moe", "--dim", "32", "--layers", "4",
                      "--heads", "2", "--ffn", "64", "--ctx", "24", "--n-vocab", "300", "--experts", "4",
                      "--experts-used", "2", "-o", g_moe, NULL};
    CHECK(cli(msynth, NULL) == 0);
    char *moe[] = {"staticlm", "compile", "-m", g_moe, "--max-prompt-len", "24", "-o", g_moe_blob, NULL};
    CHECK(cli(moe, NULL) == 0);
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

/* path's image (it opens) and its .slm.embed record (*rec, 256 bytes; NULL when absent). */
static uint8_t *embed_image(const char *path, size_t *n, uint8_t **rec) {
    uint8_t *img = image(path, n);
    *rec = NULL;
    if (!img) return NULL;
    char msg[512];
    CHECKF(t_blob_opens(img, *n, "ok.blob", msg, sizeof msg), "%s", msg);
    uint64_t len = 0;
    *rec = t_blob_section(img, *n, ".slm.embed", &len);
    CHECKF(*rec && len == 256, "%s: .slm.embed of %llu bytes", path, (unsigned long long)len);
    if (len != 256) *rec = NULL;
    return img;
}

static void test_embed_record(void) {
    size_t n = 0;
    uint8_t *e, *img = embed_image(g_enc, &n, &e);
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
    set_i32(img, n, e + 40, 1, ".slm.embed", "n_dense 1 over an empty entry");
    set_i32(img, n, e + 40, -1, ".slm.embed", "n_dense -1");
    set_i32(img, n, e + 44, 0x10, ".slm.embed", "heads: an unknown bit");
    const uint32_t heads = rd32le(e + 44);
    set_i32(img, n, e + 44, (int32_t)(heads ^ SLM_BLOB_EMBED_CLS_B), ".slm.tensors", "heads: cls.output.bias flag off");
    set_i32(img, n, e + 48, 2, ".slm.embed", "moe_every on a bert");
    set_i32(img, n, e + 52, 1, ".slm.embed", "expert_ungated on a bert");
    set_i32(img, n, e + 60, 1, ".slm.embed", "reserved bytes");
    set_i32(img, n, e + 64 + 3 * 24, 7, ".slm.embed", "a Dense entry past n_dense");
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
    damage(g_moe_blob, 200, &opened, &ran);
    printf("  800 damaged images: %d passed the validator (checksum off), %d ran\n", opened, ran);
    CHECK(opened >= 1 && ran >= 1); /* damage to padding and unused bytes passes */
}

/* ---- nomic-bert-moe ------------------------------------------------------- */

/* src's embeddings from a blob (DIR/TAG.slmblob) and from cache mode (DIR/TAG-cache) against the source's. */
static void blob_and_cache(const char *src, const slm_options *o, const char *tag, const int32_t *ids, int n,
                           const int *lens, int n_lens) {
    char blob[320], cdir[320];
    snprintf(blob, sizeof blob, "%s/%s.slmblob", dir, tag);
    t_blob_embed_check(src, o, blob, ids, n, lens, n_lens);
    snprintf(cdir, sizeof cdir, "%s/%s-cache", dir, tag);
    slm_options oc = *o;
    oc.cache_dir = cdir;
    t_blob_embed_cache_check(src, &oc, ids, n);
}

/* nomic-bert-moe (experts on layers 1 and 3, ungated): from the blob
 * (slm_save_blob) and from cache mode bit for bit the GGUF's; the CLI's
 * compile and embed on the blob print the GGUF's numbers. */
static void test_moe(void) {
    int32_t ids[20];
    for (int i = 0; i < 20; i++) ids[i] = i ? 5 + (i * 37) % 290 : 101 % 300;
    static const int lens[] = {1, 8, 3, 16, 5, 12};
    const slm_options o = twin_opts(24, 8);
    blob_and_cache(g_moe, &o, "moe-api", ids, 20, lens, 6);
    char *a = NULL, *b = NULL;
    char *e1[] = {"staticlm", "embed", "-m", g_moe, "-p", "w5 w7 w9\tw11", "--embd-output-format", "array", NULL};
    char *e2[] = {"staticlm", "embed", "-m", g_moe_blob, "-p", "w5 w7 w9\tw11", "--embd-output-format", "array", NULL};
    CHECK(cli(e1, &a) == 0 && cli(e2, &b) == 0);
    CHECKF(a && b && a[0] == '[' && !strcmp(a, b), "the blob's embed output differs from the GGUF's:\n%s\n%s", a ? a : "",
           b ? b : "");
    free(a);
    free(b);
    char *ins[] = {"staticlm", "inspect", g_moe_blob, NULL};
    CHECK(cli(ins, &a) == 0);
    CHECKF(a && strstr(a, "experts: 4 of width 64, 2 per token") && strstr(a, "experts on layers l % 2 == 1, ungated"),
           "%s", a ? a : "");
    free(a);
}

/* The first expert down MATMUL (flag EXPERT without GATHER) of an embed program: its record (its
 * section's name in sec), or NULL. */
static uint8_t *expert_down(uint8_t *img, size_t n, char *sec, size_t cap) {
    uint8_t *pr, *t;
    for (size_t k = 0; (pr = record(img, n, ".slm.programs", 72, k)); k++) {
        if (rd32le(pr + 24) != SLM_PROG_EMBED) continue;
        snprintf(sec, cap, ".slm.tasks.%s", (const char *)pr);
        for (size_t i = 0; (t = record(img, n, sec, 160, i)); i++) {
            const unsigned f = (unsigned)(t[2] | t[3] << 8);
            if (t[0] == SLM_T_MATMUL && (f & SLM_TF_EXPERT) && !(f & SLM_TF_EXPERT_GATHER)) return t;
        }
    }
    return NULL;
}

/* The layer rule's fields and the ungated experts' tasks out of place. */
static void test_moe_record(void) {
    size_t n = 0;
    char sec[64];
    uint8_t *e, *img = embed_image(g_moe_blob, &n, &e);
    CHECK(e && rd32le(e + 4) == 6 && rd32le(e + 48) == 2 && rd32le(e + 52) == 1);
    if (!e) goto out;
    set_i32(img, n, e + 4, 2, ".slm.config", "encoder 2 (nomic-bert) with arch nomic-bert-moe");
    set_i32(img, n, e + 4, 7, ".slm.embed", "encoder 7");
    set_i32(img, n, e + 48, 0, ".slm.embed", "moe_every 0 with experts");
    set_i32(img, n, e + 48, 1, ".slm.embed", "moe_every 1");
    set_i32(img, n, e + 48, 256, ".slm.embed", "moe_every 256");
    set_i32(img, n, e + 48, 3, ".slm.tasks", "moe_every 3: layer 3's experts against the rule");
    set_i32(img, n, e + 52, 0, ".slm.embed", "expert_ungated 0 with the rule");
    set_i32(img, n, e + 52, 2, ".slm.embed", "expert_ungated 2");
    uint8_t *t = expert_down(img, n, sec, sizeof sec);
    CHECKF(t != NULL, "%s: no expert down projection", g_moe_blob);
    if (t) {
        const uint16_t f = (uint16_t)((t[2] | t[3] << 8) & ~SLM_TF_GELU);
        refuse(img, n, t + 2, &f, 2, sec, "an ungated expert's down without GELU (a SwiGLU)");
        refuse(img, n, t + 88, t + 56, 16, sec, "an ungated expert's down with a second operand");
        set_i32(img, n, t + 52, 0x40000000, sec, "an ungated expert's down with a clamp");
    }
out:
    free(img);
}

/* ---- sentence-transformers' Dense modules (a BERT folder) ------------------ */

#ifdef SLM_HAVE_CJSON

enum { FD = 32, FF = 48, FL = 2, FCTX = 16, FNV = 40, FA = 48, FB = 40 };

static int put(const char *d, const char *file, const char *text) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", d, file);
    return t_write_file(p, text, strlen(text));
}

/* A Dense module folder: config.json and model.safetensors (weight [out, in], bias [out]). */
static void dense_module(const char *d, const char *sub, int in, int out, const char *act, weights *w) {
    char p[600], cfg[300];
    snprintf(p, sizeof p, "%s/%s", d, sub);
    mkdir(p, 0700);
    snprintf(cfg, sizeof cfg, "{\"in_features\": %d, \"out_features\": %d, \"bias\": true, \"activation_function\": "
             "\"torch.nn.modules.%s\"}", in, out, act);
    CHECK(put(p, "config.json", cfg));
    const float *mw = add_w(w, "linear.weight", "F32", out, in, 0.3f, 0), *mb = add_w(w, "linear.bias", "F32", 0, out, 0.4f, 0);
    const st_item it[2] = {{"linear.weight", "F32", 2, {out, in}, mw}, {"linear.bias", "F32", 1, {out}, mb}};
    snprintf(p, sizeof p, "%s/%s/model.safetensors", d, sub);
    CHECK(write_st(p, it, 2, 0));
}

/* A BERT folder (WordPiece vocab.txt, mean pooling) whose pooled vector
 * goes through 2_Dense [32 -> 48] Tanh, 3_Dense [48 -> 40] Tanh and
 * 4_Dense [40 -> 32] Identity, each with a bias, then 5_Normalize. */
static void write_dense_folder(const char *d) {
    mkdir(d, 0700);
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"architectures\": [\"BertModel\"], \"model_type\": \"bert\", \"hidden_size\": %d, "
             "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": 2, "
             "\"max_position_embeddings\": %d, \"vocab_size\": %d, \"type_vocab_size\": 2, \"layer_norm_eps\": 1e-12, "
             "\"hidden_act\": \"gelu\", \"position_embedding_type\": \"absolute\", \"pad_token_id\": 0}\n", FD, FF, FL,
             FCTX, FNV);
    CHECK(put(d, "config.json", cfg));
    weights w;
    g_rng = 99;
    w.n = 0;
    add_w(&w, "embeddings.word_embeddings.weight", "F32", FNV, FD, 0.5f, 0);
    add_w(&w, "embeddings.position_embeddings.weight", "F32", FCTX, FD, 0.5f, 0);
    add_w(&w, "embeddings.token_type_embeddings.weight", "F32", 2, FD, 0.5f, 0);
    add_w(&w, "embeddings.LayerNorm.weight", "F32", 0, FD, 0.1f, 1);
    add_w(&w, "embeddings.LayerNorm.bias", "F32", 0, FD, 0.1f, 0);
    static const struct { const char *name; int rows, cols; } t[] = {
        {"attention.self.query", FD, FD}, {"attention.self.key", FD, FD}, {"attention.self.value", FD, FD},
        {"attention.output.dense", FD, FD}, {"attention.output.LayerNorm", 0, FD},
        {"intermediate.dense", FF, FD},    {"output.dense", FD, FF},        {"output.LayerNorm", 0, FD},
    };
    char nm[96];
    for (int l = 0; l < FL; l++)
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            const int ln = t[i].rows == 0;
            snprintf(nm, sizeof nm, "encoder.layer.%d.%s.weight", l, t[i].name);
            add_w(&w, nm, "F32", t[i].rows, t[i].cols, ln ? 0.1f : 0.2f, ln ? 1.0f : 0.0f);
            snprintf(nm, sizeof nm, "encoder.layer.%d.%s.bias", l, t[i].name);
            add_w(&w, nm, "F32", 0, t[i].rows ? t[i].rows : t[i].cols, 0.1f, 0);
        }
    CHECK(st_write_weights(d, w.it, w.n, 0, 0));
    char voc[1024] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 5; i < FNV; i++) snprintf(voc + strlen(voc), sizeof voc - strlen(voc), "w%d\n", i);
    CHECK(put(d, "vocab.txt", voc));
    CHECK(put(d, "tokenizer_config.json", "{\"do_lower_case\": true}"));
    CHECK(put(d, "modules.json", "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": "
              "\"sentence_transformers.models.Transformer\"}, {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", "
              "\"type\": \"sentence_transformers.models.Pooling\"}, {\"idx\": 2, \"name\": \"2\", \"path\": \"2_Dense\", "
              "\"type\": \"sentence_transformers.models.Dense\"}, {\"idx\": 3, \"name\": \"3\", \"path\": \"3_Dense\", "
              "\"type\": \"sentence_transformers.models.Dense\"}, {\"idx\": 4, \"name\": \"4\", \"path\": \"4_Dense\", "
              "\"type\": \"sentence_transformers.models.Dense\"}, {\"idx\": 5, \"name\": \"5\", \"path\": \"5_Normalize\", "
              "\"type\": \"sentence_transformers.models.Normalize\"}]"));
    char sub[600];
    snprintf(sub, sizeof sub, "%s/1_Pooling", d);
    mkdir(sub, 0700);
    CHECK(put(sub, "config.json", "{\"word_embedding_dimension\": 32, \"pooling_mode_cls_token\": false, "
              "\"pooling_mode_mean_tokens\": true, \"pooling_mode_max_tokens\": false}"));
    weights dw;
    dw.n = 0;
    dense_module(d, "2_Dense", FD, FA, "activation.Tanh", &dw);
    dense_module(d, "3_Dense", FA, FB, "activation.Tanh", &dw);
    dense_module(d, "4_Dense", FB, FD, "linear.Identity", &dw);
    free_weights(&dw);
    free_weights(&w);
}

/* The folder's embeddings from a blob and from cache mode, bit for bit;
 * the Dense table and its tensors out of place, each refused by name. */
static void test_dense(void) {
    char fdir[300], blob[320];
    snprintf(fdir, sizeof fdir, "%s/dense3", dir);
    write_dense_folder(fdir);
    const slm_options o = twin_opts(FCTX, 4);
    int32_t ids[12];
    for (int i = 0; i < 12; i++) ids[i] = i ? 5 + (i * 7) % (FNV - 5) : 2;
    static const int lens[] = {4, 10, 2, 7};
    blob_and_cache(fdir, &o, "dense3-api", ids, 12, lens, 4);
    /* a blob for the corruptions */
    snprintf(blob, sizeof blob, "%s/dense3.slmblob", dir);
    slm_engine *e = t_load(fdir, &o);
    CHECK(e && slm_save_blob(e, blob) == SLM_OK);
    slm_free(e);
    size_t n = 0;
    uint8_t *r, *img = embed_image(blob, &n, &r), *d = r ? r + 64 : NULL;
    CHECK(r && rd32le(r + 40) == 3);
    CHECK(d && rd32le(d) == 2 && rd32le(d + 4) == FD && rd32le(d + 8) == FA && rd32le(d + 12) == SLM_DENSE_TANH &&
          rd32le(d + 16) == 1 && rd32le(d + 24) == 3 && rd32le(d + 48) == 4 && rd32le(d + 56) == FD &&
          rd32le(d + 60) == SLM_DENSE_IDENTITY);
    if (!d) goto out;
    set_i32(img, n, r + 40, 2, ".slm.embed", "n_dense 2 (an entry past it)");
    set_i32(img, n, r + 40, 4, ".slm.embed", "n_dense 4 (an empty entry)");
    set_i32(img, n, r + 40, 9, ".slm.embed", "n_dense 9");
    set_i32(img, n, d, 64, ".slm.embed", "module 64");
    set_i32(img, n, d, -1, ".slm.embed", "module -1");
    set_i32(img, n, d + 24, 2, ".slm.embed", "modules not ascending");
    set_i32(img, n, d, 1, ".slm.tensors", "module 1 (no dense_1.weight)");
    set_i32(img, n, d + 4, FD + 1, ".slm.embed", "the first in not dim");
    set_i32(img, n, d + 8, FA + 1, ".slm.embed", "the dims do not join");
    set_i32(img, n, d + 8, 0, ".slm.embed", "out 0");
    set_i32(img, n, d + 8, (1 << 20) + 1, ".slm.embed", "out past 2^20");
    set_i32(img, n, d + 48 + 8, FD + 1, ".slm.embed", "the last out not dim");
    set_i32(img, n, d + 12, 2, ".slm.embed", "act 2");
    set_i32(img, n, d + 12, -1, ".slm.embed", "act -1");
    set_i32(img, n, d + 16, 2, ".slm.embed", "bias 2");
    set_i32(img, n, d + 16, 0, ".slm.tensors", "bias 0, dense_2.bias present");
    set_i32(img, n, d + 20, 1, ".slm.embed", "an entry's reserved field");
    uint8_t *t;
    for (size_t k = 0; (t = record(img, n, ".slm.tensors", 120, k)); k++) {
        if (!strcmp((const char *)t, "dense_3.bias")) {
            refuse(img, n, t + 6, "9", 1, ".slm.tensors", "dense_3.bias renamed dense_9.bias");
            const int64_t cols = FA + 1;
            refuse(img, n, t + 72, &cols, 8, ".slm.tensors", "a bias of another width");
        }
        if (!strcmp((const char *)t, "dense_4.weight")) {
            set_i32(img, n, t + 64, 200, ".slm.tensors", "a Dense matrix of an unknown type");
            const int64_t rows = FD + 1;
            refuse(img, n, t + 80, &rows, 8, ".slm.tensors", "a Dense matrix of other rows");
        }
    }
out:
    free(img);
    st_rm_dir(fdir);
}
#else
static void test_dense(void) { (void)st_rm_dir; }
#endif

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/slm_blob_embed_%d", (int)getpid());
    if (mkdir(dir, 0700) != 0) return 1;
    T_RUN(test_setup);
    T_RUN(test_embed_record);
    T_RUN(test_tight_tasks);
    T_RUN(test_moe);
    T_RUN(test_moe_record);
    T_RUN(test_dense);
    T_RUN(test_damage);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    T_DONE();
}
