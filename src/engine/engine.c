/* The engine: the public API over the layers (format -> compiler ->
 * device -> runtime): loading, the stop set, the raw runtime calls, and
 * what sessions take from it (KV slots, tokenizing their feeds through
 * text/chat_tok.h). The bottom of engine/: session.c (sessions, the
 * generation loop) and chat.c (conversations) stand on it. A model is
 * either compiled from its source file (llama2.c .bin, GGUF) or loaded
 * from a blob (ELF, src/blob/); in cache mode (slm_options.cache_dir) the
 * first start compiles and writes the blob, later starts map it. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob/blob.h"
#include "common/common.h"
#include "common/trace.h"
#include "compiler/compiler.h"
#include "format/model.h"
#include "engine/hash_memo.h"
#include "text/tokenizer.h"
#include "runtime/prefix_cache.h"
#include "runtime/runtime.h"
#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "text/chat_tok.h"

/* The KV element type of a source model when the caller leaves it to us
 * (SLM_KV_DEFAULT): chosen by tg at depth 4096 (docs/benchmarks.md). */
#define SLM_KV_DEFAULT_DTYPE SLM_F16



slm_options slm_default_options(void) {
    slm_options o;
    memset(&o, 0, sizeof o);
    o.max_prompt_len = 0;    /* 1024, or what a blob holds */
    o.min_response_len = -1; /* 128, or what a blob holds */
    return o;
}

const char *slm_last_error(const slm_engine *e) {
    if (!e) return "out of memory";
    return e->err.msg[0] ? e->err.msg : slm_status_str(e->err.status);
}

const char *slm_cache_note(const slm_engine *e) { return e ? e->note : ""; }

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The tokenizer file a source model uses, if any: -z, else tokenizer.bin
 * beside a llama2.c model. NULL: the GGUF's own vocabulary (or none). */
static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static const char *tokenizer_file(const slm_options *o, const char *model_path, int is_gguf, char *buf, size_t cap) {
    if (o->tokenizer_path) return o->tokenizer_path;
    if (is_gguf || is_dir(model_path)) return NULL; /* GGUF vocabulary / the folder's tokenizer.json */
    const char *slash = strrchr(model_path, '/');
    int dirlen = slash ? (int)(slash - model_path) + 1 : 0;
    snprintf(buf, cap, "%.*stokenizer.bin", dirlen, model_path);
    return file_exists(buf) ? buf : NULL;
}

static slm_status load_tokenizer(slm_engine *e) {
    const slm_options *o = &e->opt;
    char path[1100];
    const char *tf = tokenizer_file(o, e->model.path, e->model.gguf != NULL, path, sizeof path);
    if (tf) return slm_tok_load_llama2c(&e->tok, tf, e->model.cfg.vocab_size, &e->err);
    if (e->model.gguf) return slm_tok_load_gguf(&e->tok, e->model.gguf, slm_basename(e->model.path), &e->err);
    if (e->model.kind == SLM_MODEL_HF) {
        if (!e->model.tokenizer_json[0] && e->model.tok_unigram)
            return slm_errf(&e->err, SLM_ERR_UNSUPPORTED, "%s: no tokenizer.json in the folder: an XLM-RoBERTa "
                            "tokenizer is read from it (sentencepiece.bpe.model is not read)", slm_basename(e->model.path));
        if (!e->model.tokenizer_json[0])
            return slm_errf(&e->err, SLM_ERR_ARG, "%s: no tokenizer.json%s in the folder (or pass -z tokenizer.bin)",
                            slm_basename(e->model.path), slm_encoder_graph(&e->model.cfg) ? " or vocab.txt" : "");
        if (slm_encoder_graph(&e->model.cfg)) /* BERT / XLM-R: Unigram or WordPiece (tokenizer.json or vocab.txt) */
            return slm_tok_load_hf_encoder(&e->tok, e->model.tokenizer_json, e->model.cfg.vocab_size,
                                           e->model.tok_unigram, &e->err);
        return slm_tok_load_hf_json(&e->tok, e->model.tokenizer_json, &e->err);
    }
    return slm_errf(&e->err, SLM_ERR_ARG, "%s: a llama2.c model needs a tokenizer: pass -z tokenizer.bin",
                    slm_basename(e->model.path));
}

int slm_kv_type_parse(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "f32")) return SLM_KV_F32;
    if (!strcmp(name, "f16")) return SLM_KV_F16;
    if (!strcmp(name, "q8_0")) return SLM_KV_Q8_0;
    return -1;
}

/* The element type of an slm_kv_type (SLM_KV_DEFAULT: the default for a
 * source model, chosen by the depth benchmark in docs/benchmarks.md). */
static int32_t kv_dtype(int kv) {
    switch (kv) {
    case SLM_KV_F32: return SLM_F32;
    case SLM_KV_Q8_0: return SLM_Q8_0;
    case SLM_KV_F16: return SLM_F16;
    default: return SLM_KV_DEFAULT_DTYPE;
    }
}

static void compile_options(const slm_options *o, slm_compile_options *co) {
    memset(co, 0, sizeof *co);
    co->max_prompt_len = o->max_prompt_len > 0 ? o->max_prompt_len : 1024;
    co->min_response_len = o->min_response_len >= 0 ? o->min_response_len : 128;
    for (int i = 0; i < 8 && i < SLM_MAX_VARIANTS - 1; i++) {
        if (o->prefill_variants[i] > 0) co->prefill_variants[co->n_prefill_variants++] = o->prefill_variants[i];
        if (o->generate_variants[i] > 0) co->generate_variants[co->n_generate_variants++] = o->generate_variants[i];
    }
    if (o->draft_path) co->draft_n = o->draft_n > 0 ? o->draft_n : 4;
    co->lm_head_separate = o->lm_head_separate != 0;
    co->tile_kb = o->tile_kb > 0 ? o->tile_kb : 0;
    co->kv_type = kv_dtype(o->kv_type);
    co->prefetch_off = o->prefetch == SLM_PREFETCH_OFF;
}

/* Open the source model, its tokenizer, and compile. */
static slm_status open_source(slm_engine *e, const char *model_path) {
    slm_status s;
    if ((s = slm_model_open(&e->model, model_path, &e->err))) return s;
    if (e->opt.weight_type != SLM_WEIGHTS_AS_IS &&
        (s = slm_model_quantize(&e->model, e->opt.weight_type, e->opt.n_threads, isatty(2) ? 2 : e->opt.verbose, &e->err)))
        return s;
    if ((s = slm_model_repack(&e->model, &e->err))) return s;
    if ((s = load_tokenizer(e))) return s;
    if (!slm_tok_fits_vocab(e->tok, e->model.cfg.vocab_size))
        return slm_errf(&e->err, SLM_ERR_FORMAT, "%s: tokenizer has %d tokens but the model's vocabulary is %d",
                        slm_basename(model_path), slm_tok_vocab_size(e->tok), e->model.cfg.vocab_size);
    slm_compile_options co;
    compile_options(&e->opt, &co);
    if (e->opt.verbose && e->model.cfg.nextn_layers) /* glm4moe: as llama.cpp, loaded and not run */
        fprintf(stderr, "note: %s: %d multi-token-prediction layer%s after layer %d not compiled (nextn_predict_layers)\n",
                slm_basename(model_path), e->model.cfg.nextn_layers, e->model.cfg.nextn_layers > 1 ? "s" : "",
                e->model.cfg.n_layers - 1);
    if ((s = slm_compile(&e->comp, &e->model, &co, &e->err))) return s;
    const int mpl = e->comp.opt.max_prompt_len, mrl = e->comp.opt.min_response_len, ctx = e->model.cfg.context_len;
    if (e->model.cfg.encoder) { /* the cache holds one input; nothing is generated */
        if (e->opt.max_prompt_len > mpl)
            fprintf(stderr, "staticlm: note: the encoder's context length %d bounds an input: max_prompt_len %d "
                            "(asked: %d)\n", ctx, mpl, e->opt.max_prompt_len);
        if (e->opt.min_response_len > 0)
            fprintf(stderr, "staticlm: note: min_response_len %d: an encoder generates nothing, its cache holds one "
                            "input (min_response_len 0)\n", e->opt.min_response_len);
    } else if ((e->opt.min_response_len >= 0 && mrl < e->opt.min_response_len) ||
        (e->opt.max_prompt_len > 0 && mpl < e->opt.max_prompt_len)) /* asked for, not granted: always said */
        fprintf(stderr,
                "staticlm: note: the model's context length %d bounds the KV capacity: max_prompt_len %d + "
                "min_response_len %d (asked: %d + %d). Room for the response comes from a lower "
                "--max-prompt-len; --on-overflow truncate goes on past the capacity\n",
                ctx, mpl, mrl, co.max_prompt_len, co.min_response_len);
    else if (e->opt.verbose && (co.max_prompt_len != mpl || co.min_response_len != mrl))
        fprintf(stderr, "note: clamped to the model's context length %d: max_prompt_len %d, min_response_len %d\n",
                ctx, mpl, mrl);
    e->cfg = e->model.cfg;
    e->weights = e->model.map.data;
    e->from_blob = 0;
    return SLM_OK;
}

/* A list of variants as the compiler keeps it (sorted, clamped, with the
 * largest added), for comparing with a blob's. */
static int same_variants(const int *want, const int32_t *have, int n_have, int largest) {
    slm_compile_options tmp;
    memset(&tmp, 0, sizeof tmp);
    int32_t v[SLM_MAX_VARIANTS];
    int n = 0;
    for (int i = 0; i < 8 && n < SLM_MAX_VARIANTS - 1; i++)
        if (want[i] > 0) v[n++] = want[i] < largest ? want[i] : largest;
    v[n++] = largest;
    for (int i = 0; i < n; i++) /* sort + unique */
        for (int j = i + 1; j < n; j++)
            if (v[j] < v[i]) { int32_t t = v[i]; v[i] = v[j]; v[j] = t; }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || v[i] != v[k - 1]) v[k++] = v[i];
    if (k != n_have) return 0;
    for (int i = 0; i < k; i++)
        if (v[i] != have[i]) return 0;
    return 1;
}

static void list_str(const int32_t *v, int n, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o + 12 < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%d", i ? "," : "", v[i]);
}

/* Options a blob fixed at compile time: honoured (equal) or refused. */
static slm_status check_blob_options(slm_engine *e, const char *path) {
    const slm_options *o = &e->opt;
    const slm_compile_options *b = &e->comp.opt;
    const char *name = slm_basename(path);
    char have[128];
    if (o->tokenizer_path)
        return slm_errf(&e->err, SLM_ERR_ARG, "-z %s: the blob %s carries its own tokenizer (fixed at compile time); "
                        "leave -z out or recompile", o->tokenizer_path, name);
    if (o->weight_type != SLM_WEIGHTS_AS_IS)
        return slm_errf(&e->err, SLM_ERR_ARG, "--weight-type %s: the blob %s holds the weights it was compiled with "
                        "(leave the option out, or compile the source model with it)", slm_weight_type_name(o->weight_type),
                        name);
    if (o->max_prompt_len > 0 && o->max_prompt_len != b->max_prompt_len)
        return slm_errf(&e->err, SLM_ERR_ARG, "--max-prompt-len %d: the blob %s was compiled with max_prompt_len %d "
                        "(leave the option out or recompile)", o->max_prompt_len, name, b->max_prompt_len);
    if (o->min_response_len >= 0 && o->min_response_len != b->min_response_len)
        return slm_errf(&e->err, SLM_ERR_ARG, "--min-response-len %d: the blob %s was compiled with min_response_len %d "
                        "(leave the option out or recompile)", o->min_response_len, name, b->min_response_len);
    int any = 0;
    for (int i = 0; i < 8; i++) any |= o->prefill_variants[i] > 0;
    if (any && !same_variants(o->prefill_variants, b->prefill_variants, b->n_prefill_variants, b->max_prompt_len)) {
        list_str(b->prefill_variants, b->n_prefill_variants, have, sizeof have);
        return slm_errf(&e->err, SLM_ERR_ARG, "--prefill-variants: the blob %s holds prefill programs of %s rows "
                        "(leave the option out or recompile)", name, have);
    }
    any = 0;
    for (int i = 0; i < 8; i++) any |= o->generate_variants[i] > 0;
    if (any && !same_variants(o->generate_variants, b->generate_variants, b->n_generate_variants, e->comp.kv_capacity)) {
        list_str(b->generate_variants, b->n_generate_variants, have, sizeof have);
        return slm_errf(&e->err, SLM_ERR_ARG, "--generate-variants: the blob %s holds generate programs of KV capacity "
                        "%s (leave the option out or recompile)", name, have);
    }
    if (o->draft_n > 0 && o->draft_n != b->draft_n)
        return slm_errf(&e->err, SLM_ERR_ARG, "--draft-n %d: the blob %s was compiled with draft_n %d (its verify "
                        "program checks %d tokens; leave the option out or recompile)", o->draft_n, name, b->draft_n,
                        b->draft_n + 1);
    if (o->lm_head_separate && !b->lm_head_separate)
        return slm_errf(&e->err, SLM_ERR_ARG, "--lm-head-separate: the blob %s was compiled with the LM head inside "
                        "its programs (recompile with --lm-head-separate)", name);
    if (o->kv_type != SLM_KV_DEFAULT && kv_dtype(o->kv_type) != b->kv_type)
        return slm_errf(&e->err, SLM_ERR_ARG, "--kv-type %s: the blob %s was compiled with kv_type %s (leave the "
                        "option out or recompile)", slm_dtype_name((uint32_t)kv_dtype(o->kv_type)), name,
                        slm_dtype_name((uint32_t)b->kv_type));
    if (o->prefetch != SLM_PREFETCH_DEFAULT && (o->prefetch == SLM_PREFETCH_OFF) != (b->prefetch_off != 0))
        return slm_errf(&e->err, SLM_ERR_ARG, "--prefetch %s: the blob %s was compiled with prefetch %s (leave the "
                        "option out or recompile)", o->prefetch == SLM_PREFETCH_OFF ? "off" : "on", name,
                        b->prefetch_off ? "off" : "on");
    if (o->tile_kb > 0 && o->tile_kb != b->tile_kb)
        return slm_errf(&e->err, SLM_ERR_ARG, "--tile-kb %d: the blob %s was compiled with tile_kb %d (leave the "
                        "option out or recompile)", o->tile_kb, name, b->tile_kb);
    return SLM_OK;
}

/* A blob's batch programs against --parallel M (slm_options.n_seqs): kept
 * when 1 < M <= their n_seqs N, as they are shapes over N KV regions: the
 * runtime allocates all N (slm_load) and the engine hands out M slots
 * (e->n_slots), the other N - M regions held unused; dropped for M = 1 (the
 * single-sequence programs run as from any blob); M > N refused, as they
 * cannot address more regions. A blob without them decodes the sessions one
 * by one (with a note). */
static slm_status blob_seqs(slm_engine *e, const char *path) {
    slm_compiled *c = &e->comp;
    const int want = e->opt.n_seqs > 0 ? e->opt.n_seqs : 1, have = c->n_seqs > 1 ? c->n_seqs : 1;
    if (c->cfg.encoder) return SLM_OK; /* no decode: its sessions take turns with the embedding programs */
    if (have > 1 && want > have)
        return slm_errf(&e->err, SLM_ERR_ARG, "--parallel %d: the blob %s was compiled for --parallel %d (its batch "
                        "programs address %d KV regions); use --parallel %d or fewer, or recompile with --parallel %d",
                        want, slm_basename(path), have, have, have, want);
    if (have > 1 && want == 1) {
        while (c->n_progs > 0 && c->progs[c->n_progs - 1].kind == SLM_PROG_BATCH) slm_program_free(&c->progs[--c->n_progs]);
        c->n_seqs = 1;
        if (e->opt.verbose)
            fprintf(stderr, "note: one sequence: the blob's batch programs (--parallel %d) are not used\n", have);
    } else if (have == 1 && want > 1) { /* said always: 4 clients would wait in line */
        fprintf(stderr, "staticlm: note: %d sessions decode one by one: the blob %s holds no batch programs (compile it with "
                        "--parallel %d)\n", want, slm_basename(path), want);
    }
    return SLM_OK;
}

static slm_status open_blob(slm_engine *e, const char *path) {
    slm_status s = slm_blob_open(&e->blob, path, 0, &e->comp, &e->tok, &e->err);
    if (s) return s;
    e->cfg = e->comp.cfg;
    e->weights = e->blob.weights;
    e->from_blob = 1;
    return SLM_OK;
}

/* Drop whatever open_source / open_blob built (before a retry). */
static void close_model(slm_engine *e) {
    slm_compiled_free(&e->comp);
    slm_tok_free(e->tok);
    e->tok = NULL;
    slm_model_close(&e->model);
    memset(&e->model, 0, sizeof e->model);
    slm_blob_close(&e->blob);
    e->from_blob = 0;
    e->weights = NULL;
}

/* A file's content hash for the identity: in cache mode through the memo
 * in the cache folder (engine/hash_memo.h; --verify-cache rehashes), else
 * by reading the file. A stale memo record is said on stderr. */
static slm_status file_hash(slm_engine *e, const char *path, uint64_t *hash, uint64_t *bytes) {
    if (!e->opt.cache_dir || !e->opt.cache_dir[0] || (mkdir(e->opt.cache_dir, 0777) != 0 && errno != EEXIST))
        return slm_hash_file(path, hash, bytes, &e->err);
    int how = SLM_MEMO_HASHED;
    slm_status s = slm_memo_hash_file(e->opt.cache_dir, path, e->opt.verify_cache, hash, bytes, &how, &e->err);
    if (!s && how == SLM_MEMO_STALE)
        fprintf(stderr, "staticlm: note: %s changed without its size, times or sampled pages changing; rehashed\n",
                path);
    return s;
}

/* The identity of (model bytes, tokenizer bytes, requested options, format). */
/* A Hugging Face folder's identity: every regular file in it, by name. */
static int regular_file(const struct dirent *d) { return d->d_name[0] != '.'; }

static slm_status hash_dir(slm_engine *e, const char *dir, uint64_t *hash, uint64_t *bytes) {
    struct dirent **list = NULL;
    int n = scandir(dir, &list, regular_file, alphasort);
    if (n < 0) return slm_errf(&e->err, SLM_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    uint64_t acc = 0x5a17d1a5u, total = 0;
    slm_status s = SLM_OK;
    for (int i = 0; i < n; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        struct stat st;
        if (!s && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            uint64_t h = 0, b = 0;
            if ((s = file_hash(e, path, &h, &b)) == SLM_OK) {
                acc = slm_hash64(list[i]->d_name, strlen(list[i]->d_name), acc);
                acc = slm_hash64(&h, sizeof h, acc);
                total += b;
            }
        }
        free(list[i]);
    }
    free(list);
    *hash = acc;
    *bytes = total;
    return s;
}

static slm_status source_identity(slm_engine *e, const char *model_path, slm_blob_ident *id) {
    memset(id, 0, sizeof *id);
    slm_status s;
    if (is_dir(model_path)) s = hash_dir(e, model_path, &id->model_hash, &id->model_bytes);
    else s = file_hash(e, model_path, &id->model_hash, &id->model_bytes);
    if (s) return s;
    int is_gguf = 0;
    FILE *f = fopen(model_path, "rb");
    if (f) {
        char m[4];
        is_gguf = fread(m, 1, 4, f) == 4 && !memcmp(m, "GGUF", 4);
        fclose(f);
    }
    char buf[1100];
    const char *tf = tokenizer_file(&e->opt, model_path, is_gguf, buf, sizeof buf);
    if (tf && (s = file_hash(e, tf, &id->tok_hash, &id->tok_bytes))) return s;
    slm_compile_options co;
    compile_options(&e->opt, &co);
    id->options_hash = slm_blob_options_hash(&co);
    /* --parallel N: the batch programs for N KV regions make another blob */
    const int32_t seqs = e->opt.n_seqs;
    if (seqs > 1) id->options_hash = slm_hash64(&seqs, sizeof seqs, id->options_hash);
    if (e->opt.embeddings) id->options_hash = slm_hash64("embeddings", 10, id->options_hash); /* its embed programs */
    const int32_t wt = e->opt.weight_type; /* quantized at load: other weights */
    if (wt) id->options_hash = slm_hash64(&wt, sizeof wt, id->options_hash);
    snprintf(id->source, sizeof id->source, "%s", slm_basename(model_path));
    slm_blob_ident_seal(id);
    return SLM_OK;
}

static void progress_tty(void *ud, const char *what, int done, int total) {
    (void)ud;
    if (!strcmp(what, "weights"))
        fprintf(stderr, "\rcompile: weights %d / %d MiB%s", done, total, done == total ? "\n" : "");
    else
        fprintf(stderr, "compile: program %d/%d %s written\n", done, total, what);
    fflush(stderr);
}

/* The identity fields that must agree for a cached blob to be used. */
static const char *ident_mismatch(const slm_blob_ident *want, const slm_blob_ident *got) {
    if (got->format_version != want->format_version) return "format version";
    if (got->model_hash != want->model_hash || got->model_bytes != want->model_bytes) return "model bytes";
    if (got->tok_hash != want->tok_hash || got->tok_bytes != want->tok_bytes) return "tokenizer bytes";
    if (got->options_hash != want->options_hash) return "compile options";
    if (got->identity != want->identity) return "identity";
    return NULL;
}

/* With embeddings: the embedding programs (slm_compile_embed) and their
 * record. e loaded from the source model. */
static slm_status write_blob_to(slm_engine *e, const char *path, slm_blob_ident *id, int show_progress, slm_err *err) {
    slm_blob_embed rec;
    if (e->opt.embeddings) slm_engine_embed_record(e, &rec);
    return slm_blob_write_embed(path, &e->comp, &e->model, e->tok, e->opt.embeddings ? &rec : NULL, id,
                                show_progress ? progress_tty : NULL, NULL, err);
}

static slm_status write_blob(slm_engine *e, const char *path, slm_blob_ident *id, int show_progress) {
    return write_blob_to(e, path, id, show_progress, &e->err);
}

/* The embedding keys and heads, then the embedding programs (once: a
 * cache-mode load that falls back to the source comes here twice). */
static slm_status source_embed(slm_engine *e, const char *model_path) {
    slm_status s = slm_engine_embed_init(e, model_path);
    if (!s && e->opt.embeddings && !slm_largest(&e->comp, SLM_PROG_EMBED)) s = slm_compile_embed(&e->comp, &e->model, &e->err);
    return s;
}

/* The batch programs of --parallel N (N > 1; not for an encoder, which has
 * no decode to batch): batch.2, and batch.3 for N = 3 or batch.4 for N >= 4
 * (three sequences in batch.2 and a single step took 1.6x the time of one
 * batch.3 step: docs/benchmarks.md). */
static slm_status compile_batch(slm_engine *e) {
    const int n_seqs = e->opt.n_seqs > 0 ? e->opt.n_seqs : 1;
    if (n_seqs <= 1 || !e->model.map.data || e->cfg.encoder) return SLM_OK;
    const int batches[] = {2, n_seqs < 4 ? n_seqs : 4};
    return slm_compile_batch(&e->comp, &e->model, n_seqs, batches, n_seqs == 2 ? 1 : 2, &e->err);
}

/* Cache mode: DIR/<model file name>.<identity>.slmblob */
static slm_status load_cached(slm_engine *e, const char *model_path) {
    slm_status s;
    const char *dir = e->opt.cache_dir;
    slm_blob_ident id;
    if ((s = source_identity(e, model_path, &id))) return s;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return slm_errf(&e->err, SLM_ERR_IO, "cache dir %s: cannot create: %s", dir, strerror(errno));
    char path[1400];
    snprintf(path, sizeof path, "%s/%s.%016llx.slmblob", dir, slm_basename(model_path), (unsigned long long)id.identity);
    const int tty = isatty(2);
    if (file_exists(path)) {
        s = open_blob(e, path);
        const char *why = s ? NULL : ident_mismatch(&id, &e->blob.ident);
        if (!s && !why) {
            snprintf(e->note, sizeof e->note, "loaded cached blob %s", path);
            if (e->opt.verbose) fprintf(stderr, "note: %s\n", e->note);
            return SLM_OK;
        }
        if (s) snprintf(e->note, sizeof e->note, "cached blob refused (%s); recompiling", e->err.msg);
        else snprintf(e->note, sizeof e->note, "cached blob %s is stale (%s differ); recompiling", path, why);
        fprintf(stderr, "staticlm: note: %s\n", e->note);
        close_model(e);
        memset(&e->err, 0, sizeof e->err);
    } else {
        snprintf(e->note, sizeof e->note, "no cached blob for this model and these options; compiling into %s", path);
        if (tty || e->opt.verbose) fprintf(stderr, "staticlm: note: %s\n", e->note);
    }
    if ((s = open_source(e, model_path)) || (e->opt.embeddings && (s = source_embed(e, model_path))) ||
        (s = compile_batch(e)))
        return s;
    if (tty) fprintf(stderr, "compile: %d programs compiled\n", e->comp.n_progs);
    slm_err werr = {0};
    s = write_blob_to(e, path, &id, tty, &werr);
    if (s) {
        /* keep running from the source model */
        size_t n = strlen(e->note);
        snprintf(e->note + n, sizeof e->note - n, "; writing it failed: %s", werr.msg);
        fprintf(stderr, "staticlm: note: could not write the cached blob: %s\n", werr.msg);
        return SLM_OK;
    }
    close_model(e);
    return open_blob(e, path);
}

/* ---- the stop set ------------------------------------------------------------ */

/* The ids that end a reply (slm_load builds it once). */
static void build_stop_set(slm_engine *e) {
    e->n_stop_ids = 0;
    const int V = e->cfg.vocab_size;
#define ADD_STOP(id)                                                                                \
    do {                                                                                            \
        int id_ = (id), dup_ = 0;                                                                   \
        for (int k_ = 0; k_ < e->n_stop_ids; k_++) dup_ |= e->stop_ids[k_] == id_;                  \
        if (id_ >= 0 && id_ < V && !dup_ && e->n_stop_ids < SLM_MAX_STOP_IDS) e->stop_ids[e->n_stop_ids++] = id_; \
    } while (0)
    ADD_STOP(slm_tok_eos(e->tok));
    ADD_STOP(slm_tok_bos(e->tok)); /* llama2.c's run.c stops at BOS too */
    ADD_STOP(slm_tok_eot(e->tok));
    ADD_STOP(e->fim.pad); /* as llama.cpp: FIM's pad, repo and file separator end a reply */
    ADD_STOP(e->fim.rep);
    ADD_STOP(e->fim.sep);
    /* GGUF: every id the model lists as an end of generation */
    if (!e->from_blob && e->model.gguf) {
        slm_gguf_type et;
        uint64_t n = 0;
        const void *data = NULL;
        if (slm_gguf_get_arr(e->model.gguf, "tokenizer.ggml.eos_token_ids", &et, &n, &data) &&
            (et == SLM_GGUF_U32 || et == SLM_GGUF_I32))
            for (uint64_t i = 0; i < n && i < 64; i++) {
                int32_t v;
                memcpy(&v, (const uint8_t *)data + 4 * i, 4);
                ADD_STOP(v);
            }
        uint32_t v32;
        if (slm_gguf_get_u32(e->model.gguf, "tokenizer.ggml.eot_token_id", &v32)) ADD_STOP((int)v32);
        if (slm_gguf_get_u32(e->model.gguf, "tokenizer.ggml.eom_token_id", &v32)) ADD_STOP((int)v32);
    }
    /* the families' end-of-turn tokens, by their text (control tokens only) */
    static const char *const names[] = {"<|im_end|>", "<end_of_turn>", "<|end|>", "<|eot_id|>", "<|eom_id|>",
                                        "<|endoftext|>", "<turn|>", "<|tool_response>"}; /* the last two: gemma4 */
    int harmony = 0; /* gpt-oss: <|end|> ends a message, <|return|> the reply */
    int g4tool = 0;  /* gemma4: a call is followed by <|tool_response>, which ends the reply */
    for (int id = 0; id < V; id++) {
        const char *s = slm_tok_str(e->tok, id);
        if (!s || s[0] != '<') continue;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (!strcmp(s, names[k])) ADD_STOP(id);
        harmony |= !strcmp(s, "<|return|>") || !strcmp(s, "<|call|>");
        g4tool |= !strcmp(s, "<|tool_response>");
    }
#undef ADD_STOP
    /* as llama.cpp: with <|return|> or <|call|> in the vocabulary, <|end|>
     * (the end of the analysis message) must not end the reply */
    for (int k = 0; harmony && k < e->n_stop_ids; k++) {
        const char *s = slm_tok_str(e->tok, e->stop_ids[k]);
        if (s && !strcmp(s, "<|end|>")) e->stop_ids[k--] = e->stop_ids[--e->n_stop_ids];
    }
    /* as llama.cpp: with <|tool_response>, </s> is an ordinary token (gemma4) */
    for (int k = 0; g4tool && k < e->n_stop_ids; k++) {
        const char *s = slm_tok_str(e->tok, e->stop_ids[k]);
        if (s && !strcmp(s, "</s>")) e->stop_ids[k--] = e->stop_ids[--e->n_stop_ids];
    }
}

int slm_is_stop_token(const slm_engine *e, int id) {
    if (!e) return 0;
    for (int k = 0; k < e->n_stop_ids; k++)
        if (e->stop_ids[k] == id) return 1;
    return 0;
}

int slm_stop_tokens(const slm_engine *e, int32_t *ids, int cap) {
    if (!e) return 0;
    for (int k = 0; k < e->n_stop_ids && k < cap; k++) ids[k] = e->stop_ids[k];
    return e->n_stop_ids;
}


slm_status slm_load(slm_engine **out, const char *model_path, const slm_options *opt) {
    slm_engine *e = slm_calloc(1, sizeof *e);
    *out = e;
    if (!e) return SLM_ERR_NOMEM;
    e->opt = opt ? *opt : slm_default_options();
    if (e->opt.cache_dir) {
        snprintf(e->cache_dir_buf, sizeof e->cache_dir_buf, "%s", e->opt.cache_dir);
        e->opt.cache_dir = e->cache_dir_buf;
    }
    if (e->opt.tokenizer_path) { /* the caller's strings need not outlive the call */
        snprintf(e->tok_path_buf, sizeof e->tok_path_buf, "%s", e->opt.tokenizer_path);
        e->opt.tokenizer_path = e->tok_path_buf;
    }
    if (!model_path) return slm_errf(&e->err, SLM_ERR_ARG, "no model path");
    /* options that mean nothing alone are refused, not ignored */
    if (!e->opt.draft_path && e->opt.draft_n > 0)
        return slm_errf(&e->err, SLM_ERR_ARG, "--draft-n %d: speculative decoding needs a draft model (--draft)",
                        e->opt.draft_n);
    if (e->opt.prefetch < SLM_PREFETCH_DEFAULT || e->opt.prefetch > SLM_PREFETCH_OFF)
        return slm_errf(&e->err, SLM_ERR_ARG, "prefetch %d: not an slm_prefetch (default, on, off)", e->opt.prefetch);
    if (e->opt.kv_type < SLM_KV_DEFAULT || e->opt.kv_type > SLM_KV_Q8_0)
        return slm_errf(&e->err, SLM_ERR_ARG, "kv_type %d: not an slm_kv_type (f32, f16, q8_0)", e->opt.kv_type);
    if (e->opt.weight_type < SLM_WEIGHTS_AS_IS || e->opt.weight_type >= SLM_WEIGHTS_COUNT)
        return slm_errf(&e->err, SLM_ERR_ARG, "weight_type %d: not an slm_weight_type (%s)", e->opt.weight_type,
                        SLM_WEIGHT_TYPE_NAMES);
    if (e->opt.recur_checkpoints < 0 || e->opt.recur_checkpoints > SLM_RT_SNAPS_MAX)
        return slm_errf(&e->err, SLM_ERR_ARG, "--checkpoints %d: 1 to %d (0: the default %d)", e->opt.recur_checkpoints,
                        SLM_RT_SNAPS_MAX, SLM_RT_SNAPS_DEFAULT);
    if (!e->opt.draft_path && opt && opt->draft_tokenizer_path)
        return slm_errf(&e->err, SLM_ERR_ARG, "--draft-tokenizer %s: there is no draft model (--draft)",
                        opt->draft_tokenizer_path);
    slm_status s;
    const int blob = slm_blob_is_elf(model_path);
    if (blob) {
        if (!(s = open_blob(e, model_path)) && !(s = check_blob_options(e, model_path))) s = blob_seqs(e, model_path);
    }
    else if (e->opt.cache_dir && e->opt.cache_dir[0]) s = load_cached(e, model_path);
    else s = open_source(e, model_path);
    if (s) return s;
    slm_tok_set_max_input(e->tok, e->opt.max_prompt_bytes);
    if (e->from_blob && e->opt.verbose)
        fprintf(stderr, "note: running the blob's programs (max_prompt_len %d, min_response_len %d); its "
                        "tokenizer and options were fixed at compile time\n",
                e->comp.opt.max_prompt_len, e->comp.opt.min_response_len);
    /* auto threads: a tiny model (stories260K) runs faster on one thread than
     * it synchronizes on two */
    int threads = e->opt.n_threads;
    if (threads <= 0) {
        const slm_model_config *c = &e->cfg;
        double params = (double)c->vocab_size * c->dim +
                        (double)c->n_layers * (2.0 * c->dim * c->dim + 2.0 * c->dim * c->n_kv_heads * c->head_dim +
                                               3.0 * c->dim * c->hidden_dim);
        if (params < 2e6) threads = 1;
    }
    if (e->cfg.encoder && !e->opt.embeddings)
        return slm_errf(&e->err, SLM_ERR_UNSUPPORTED, "%s: %s is an encoder (an embedding model): it makes embeddings, "
                        "not text; use `staticlm embed` or `staticlm serve --embeddings`", slm_basename(model_path),
                        e->cfg.arch);
    /* from a blob (or the cache) the embedding programs and heads are the blob's */
    if ((s = e->from_blob ? slm_engine_embed_init(e, model_path) : source_embed(e, model_path))) return s;
    /* slots: the sessions at once (--parallel M); KV regions: what the batch programs address (a blob's N >= M,
     * else M), all of them allocated and counted by the budget */
    e->n_slots = e->opt.n_seqs > 0 ? e->opt.n_seqs : 1;
    /* from a blob: its batch programs (blob_seqs; cache mode compiled them into it); from the source: compiled
     * here, unless cache mode did before writing the blob and then ran from the source */
    if (!e->from_blob && e->comp.n_seqs <= 1 && (s = compile_batch(e))) return s;
    const int regions = e->comp.n_seqs > e->n_slots ? e->comp.n_seqs : e->n_slots;
    if ((s = slm_rt_budget(&e->comp, slm_basename(model_path), e->opt.max_memory_mb, regions, e->opt.recur_checkpoints, (uint64_t)(e->opt.prefix_cache_mb > 0 ? e->opt.prefix_cache_mb : 0) << 20, NULL, &e->err))) return s;
    if ((s = slm_rt_init_seqs(&e->rt, &e->comp, e->weights, threads, regions, e->opt.recur_checkpoints, &e->err))) return s;
    if (regions > e->n_slots) { /* said always, as the note on a blob without batch programs: memory held for nothing */
        const double per = ((double)e->rt.kv_bytes + (double)e->rt.rstate_bytes * (1 + e->rt.n_snaps)) / regions;
        fprintf(stderr, "staticlm: note: %d slots; the blob %s's batch programs address %d KV regions (compile --parallel "
                        "%d): %d of them held unused, %.1f MiB of KV cache%s; recompile with --parallel %d to free %s\n",
                e->n_slots, slm_basename(model_path), regions, regions, regions - e->n_slots,
                per * (regions - e->n_slots) / (1024.0 * 1024.0), e->rt.rstate_bytes ? " and recurrent state" : "",
                e->n_slots, regions - e->n_slots > 1 ? "them" : "it");
    }
    e->rt.chunking = !e->opt.no_chunking;
    slm_pool_set_schedule(e->rt.pool, e->opt.schedule);
    if (!e->comp.opt.lm_head_separate && e->opt.lm_head_threads > 0)
        return slm_errf(&e->err, SLM_ERR_ARG, "--lm-head-threads %d: the LM head is not a separate program "
                        "(--lm-head-separate)", e->opt.lm_head_threads);
    if (e->comp.opt.lm_head_separate && e->opt.lm_head_threads > 0 &&
        (s = slm_rt_set_head_threads(&e->rt, e->opt.lm_head_threads, &e->err)))
        return s;
    slm_pool_set_schedule(e->rt.head_pool, e->opt.schedule); /* NULL: none */
    slm_engine_fim_detect(e);
    build_stop_set(e);
    if (!e->cfg.recur_interval && e->opt.recur_checkpoints > 0)
        fprintf(stderr, "staticlm: note: --checkpoints %d: %s has no recurrent layers; its KV rows are kept as they are\n",
                e->opt.recur_checkpoints, e->cfg.arch);
    slm_pc_init(&e->pc, (uint64_t)(e->opt.prefix_cache_mb > 0 ? e->opt.prefix_cache_mb : 0) << 20);
    if (e->opt.draft_path) {
        if (!slm_largest(&e->comp, SLM_PROG_VERIFY))
            return slm_errf(&e->err, SLM_ERR_ARG, "speculative decoding needs a verify program: this blob was "
                                                  "compiled without a draft (recompile with --draft)");
        slm_options d = e->opt;
        d.draft_path = NULL;
        d.draft_n = 0;
        d.draft_tokenizer_path = NULL;
        d.lm_head_threads = 0;
        d.n_seqs = 1;
        d.prefix_cache_mb = 0;
        d.weight_type = SLM_WEIGHTS_AS_IS; /* the draft as its file has it */
        d.lm_head_separate = 0;
        /* the draft's tokenizer defaults to the target's */
        d.tokenizer_path = opt && opt->draft_tokenizer_path ? opt->draft_tokenizer_path : e->opt.tokenizer_path;
        if ((s = slm_load(&e->draft, e->opt.draft_path, &d))) {
            slm_errf(&e->err, s, "draft model: %s", slm_last_error(e->draft));
            slm_free(e->draft);
            e->draft = NULL;
            return s;
        }
        if (e->draft->cfg.recur_interval)
            return slm_errf(&e->err, SLM_ERR_UNSUPPORTED, "draft model: %s's recurrent layers keep a state that rejected "
                            "tokens cannot be taken back from; it cannot be a draft", e->draft->cfg.arch);
        if (e->draft->cfg.vocab_size != e->cfg.vocab_size)
            return slm_errf(&e->err, SLM_ERR_ARG, "draft model: vocabulary of %d tokens, the model has %d",
                            e->draft->cfg.vocab_size, e->cfg.vocab_size);
        /* the same ids must mean the same tokens */
        const int nv = slm_tok_vocab_size(e->tok) < slm_tok_vocab_size(e->draft->tok) ? slm_tok_vocab_size(e->tok)
                                                                                     : slm_tok_vocab_size(e->draft->tok);
        for (int i = 0; i < nv; i++) {
            const char *a = slm_tok_str(e->tok, i), *b = slm_tok_str(e->draft->tok, i);
            if (!a || !b || strcmp(a, b))
                return slm_errf(&e->err, SLM_ERR_ARG,
                                "draft model: its vocabulary differs from the model's (token %d is '%.40s', not "
                                "'%.40s'); a draft must share the tokenizer",
                                i, b ? b : "?", a ? a : "?");
        }
    }
    e->loaded = 1;
    return SLM_OK;
}

slm_status slm_save_blob(slm_engine *e, const char *path) {
    if (!e || !e->loaded || !path) return SLM_ERR_ARG;
    if (e->from_blob)
        return slm_errf(&e->err, SLM_ERR_ARG, "%s: this engine was loaded from a blob; copy that file instead",
                        path);
    /* the identity of the file on disk (the mapping holds repacked weights) */
    slm_blob_ident id;
    slm_status s = source_identity(e, e->model.path, &id);
    if (s) return s;
    return write_blob(e, path, &id, isatty(2));
}

slm_status slm_inspect_blob(const char *path, void *file, int verify_weights, char *errbuf, size_t cap) {
    slm_err err = {0};
    slm_blob b;
    slm_compiled c;
    slm_tokenizer *tok = NULL;
    slm_status s = slm_blob_open(&b, path, 0, &c, &tok, &err);
    if (!s) {
        slm_blob_print(&b, &c, file);
        fprintf(file, "tokenizer: %d tokens, bos %d, eos %d\n", slm_tok_vocab_size(tok), slm_tok_bos(tok), slm_tok_eos(tok));
        if (verify_weights) {
            s = slm_blob_verify_weights(&b, &err);
            if (!s) fprintf(file, "weights: hash verified\n");
        }
        slm_tok_free(tok);
        slm_compiled_free(&c);
        slm_blob_close(&b);
    }
    if (s && errbuf && cap) snprintf(errbuf, cap, "%s", err.msg[0] ? err.msg : slm_status_str(s));
    return s;
}

void slm_free(slm_engine *e) {
    if (!e) return;
    slm_free(e->draft);
    slm_pc_free(&e->pc);
    slm_chat_tok_free(e->ctok);
    slm_gvocab_free(e->gvocab);
    slm_engine_embed_free(e);
    slm_xfree(e->slot_used);
    slm_rt_free(&e->rt);
    close_model(e);
    slm_xfree(e);
}

void slm_get_info(const slm_engine *e, slm_info *info) {
    memset(info, 0, sizeof *info);
    if (!e || !e->loaded) return;
    const slm_model_config *c = &e->cfg;
    info->dim = c->dim;
    info->hidden_dim = c->hidden_dim;
    info->n_layers = c->n_layers;
    info->n_heads = c->n_heads;
    info->n_kv_heads = c->n_kv_heads;
    info->head_dim = c->head_dim;
    info->vocab_size = c->vocab_size;
    info->context_len = c->context_len;
    info->max_prompt_len = e->comp.opt.max_prompt_len;
    info->min_response_len = e->comp.opt.min_response_len;
    info->kv_capacity = e->comp.kv_capacity;
    info->bos_id = slm_tok_bos(e->tok);
    info->eos_id = slm_tok_eos(e->tok);
    uint64_t w = 0;
    if (e->from_blob) w = e->blob.weights_size;
    else
        for (int i = 0; i < e->model.n_tensors; i++) w += e->model.tensors[i].nbytes;
    info->weight_bytes = (size_t)w;
    info->kv_bytes = (size_t)e->rt.kv_bytes;
    info->kv_type = slm_dtype_name((uint32_t)e->comp.opt.kv_type);
    info->arena_bytes = (size_t)e->rt.arena_bytes;
    const slm_program *pp = slm_largest((slm_compiled *)&e->comp, SLM_PROG_PREFILL),
                      *gp = slm_largest((slm_compiled *)&e->comp, SLM_PROG_GENERATE); /* none: an encoder */
    info->prefill_tasks = pp ? pp->n_tasks : 0;
    info->generate_tasks = gp ? gp->n_tasks : 0;
    info->n_seqs = e->n_slots;
    info->kv_regions = e->rt.n_seqs;
    info->state_bytes = (size_t)(e->rt.rstate_bytes * (uint64_t)(1 + e->rt.n_snaps));
    info->batch_max = e->rt.batch_max;
}

long slm_model_meta(const slm_engine *e, const char *key, char *buf, size_t cap) {
    if (!e || !e->loaded || !key) return -1;
    const char *str;
    uint64_t len;
    char num[64];
    if (e->from_blob) {
        if (!slm_blob_meta(&e->blob, key, &str, &len)) return -1;
    } else {
        slm_gguf_str v;
        int k = 0, n;
        while (k < e->model.n_meta && strcmp(e->model.meta[k].key, key)) k++;
        if (k < e->model.n_meta) str = e->model.meta[k].val, len = strlen(str); /* a folder's (generation_config.json) */
        else if (!e->model.gguf) return -1;
        else if (slm_gguf_get_str(e->model.gguf, key, &v)) str = v.s, len = v.len;
        else if ((n = slm_gguf_get_text(e->model.gguf, key, num, sizeof num)) >= 0) str = num, len = (uint64_t)n; /* a number */
        else return -1;
    }
    if (buf && cap) {
        size_t n = len < cap - 1 ? (size_t)len : cap - 1;
        memcpy(buf, str, n);
        buf[n] = 0;
    }
    return (long)len;
}

int slm_tokenize(slm_engine *e, const char *text, int add_bos, int32_t *ids, int cap) {
    if (!e || !e->loaded || !text) return -1;
    return slm_tok_encode(e->tok, text, add_bos, 0, ids, cap);
}

int slm_tokenize_masked(slm_engine *e, const char *text, const unsigned char *plain, int add_bos, int32_t *ids, int cap) {
    if (!e || !e->loaded || !text) return -1;
    return slm_tok_encode_masked(e->tok, text, plain, add_bos, 0, ids, cap);
}

const char *slm_token_piece(const slm_engine *e, int prev, int id) {
    if (!e || !e->loaded) return "";
    return slm_tok_decode(e->tok, prev, id);
}

const slm_tokenizer *slm_engine_tokenizer(const slm_engine *e) { return e && e->loaded ? e->tok : NULL; }

int slm_piece_printable(const char *piece) {
    if (!piece || !piece[0]) return 0;
    if (piece[1] == '\0') {
        unsigned char b = (unsigned char)piece[0];
        /* run.c's safe_printf: a lone byte prints only if printable or space */
        return (b >= 0x20 && b < 0x7f) || b == ' ' || (b >= '\t' && b <= '\r');
    }
    return 1;
}

int slm_piece_shown(const slm_engine *e, const char *piece) {
    if (!piece || !piece[0]) return 0;
    if (!e || !e->loaded || slm_tok_runc(e->tok) || piece[1]) return slm_piece_printable(piece);
    return (unsigned char)piece[0] >= 0x80 || slm_piece_printable(piece); /* a byte of a UTF-8 character */
}

/* The raw runtime calls work on KV region 0 (sessions select their own). */
void slm_reset(slm_engine *e) {
    if (!e || !e->loaded) return;
    slm_rt_select(&e->rt, 0);
    slm_rt_reset(&e->rt);
}

int slm_num_stored(const slm_engine *e) {
    if (!e || !e->loaded) return 0;
    slm_rt_select(&((slm_engine *)e)->rt, 0);
    return e->rt.num_stored;
}
slm_status slm_trim(slm_engine *e, int n_keep) {
    if (!e || !e->loaded) return SLM_ERR_ARG;
    slm_rt_select(&e->rt, 0);
    if (n_keep < 0 || n_keep > e->rt.num_stored) return SLM_OK;
    const slm_status s = slm_rt_trim(&e->rt, n_keep);
    return s ? slm_errf(&e->err, s, "trim to %d tokens: prefilling them again failed", n_keep) : SLM_OK;
}

int slm_capacity(const slm_engine *e) { return e && e->loaded ? e->rt.cap : 0; }

/* Prefill through the prefix cache: on an empty KV cache, restore the
 * longest cached prefix (at most n - 1 rows: one token must run to give
 * logits), prefill the rest, then remember this prompt's rows. */
static slm_status engine_prefill(slm_engine *e, const int32_t *ids, int n, int *n_cached) {
    int got = 0;
    if (e->pc.limit_bytes && e->rt.num_stored == 0 && n > 1) got = slm_pc_restore(&e->pc, &e->rt, ids, n, n - 1);
    if (n_cached) *n_cached = got;
    if (got > 0)
        slm_trace_instant("engine", "prefix_cache_hit", &(slm_trace_args){{"rows", "prompt"}, {got, n}, NULL, NULL});
    slm_status s = slm_rt_prefill(&e->rt, ids + got, n - got, &e->err);
    if (!s && e->pc.limit_bytes && e->rt.num_stored == n) slm_pc_store(&e->pc, &e->rt, n);
    return s;
}

slm_status slm_prefill(slm_engine *e, const int32_t *ids, int n, const float **logits) {
    if (!e || !e->loaded) return SLM_ERR_ARG;
    slm_rt_select(&e->rt, 0);
    slm_status s = engine_prefill(e, ids, n, NULL);
    if (logits) *logits = s ? NULL : e->rt.logits;
    return s;
}

slm_status slm_decode(slm_engine *e, int32_t id, const float **logits) {
    if (!e || !e->loaded) return SLM_ERR_ARG;
    slm_rt_select(&e->rt, 0);
    slm_status s = slm_rt_decode(&e->rt, id, &e->err);
    if (logits) *logits = s ? NULL : e->rt.logits;
    return s;
}

slm_status slm_dump(slm_engine *e, const char *what, void *file) {
    FILE *f = file;
    if (!e || !e->loaded) return SLM_ERR_ARG;
    if (e->from_blob && (!strcmp(what, "ir") || !strcmp(what, "ir-lowered")))
        return slm_errf(&e->err, SLM_ERR_ARG, "dump '%s': a blob keeps no graphs; compile from the source model", what);
    if (!strcmp(what, "ir")) {
        slm_graph_dump(&e->comp.stateful, f);
    } else if (!strcmp(what, "ir-lowered")) {
        for (int i = 0; i < e->comp.n_progs; i++) slm_graph_dump(&e->comp.progs[i].graph, f);
    } else if (!strcmp(what, "tasks")) {
        for (int i = 0; i < e->comp.n_progs; i++) slm_program_dump_tasks(&e->comp.progs[i], f);
    } else if (!strcmp(what, "io")) {
        for (int i = 0; i < e->comp.n_progs; i++) slm_program_dump_io(&e->comp.progs[i], f);
    } else {
        return slm_errf(&e->err, SLM_ERR_ARG, "unknown dump '%s' (ir, ir-lowered, tasks, io)", what);
    }
    return SLM_OK;
}

void slm_variant_get(const slm_engine *e, slm_variant_state *out) {
    memset(out, 0, sizeof *out);
    if (!e || !e->loaded) return;
    out->current = e->rt.gen ? e->rt.gen->kv_capacity : 0;
    out->switches = e->rt.variant_switches;
    out->at = e->rt.switch_at;
    out->from = e->rt.switch_from;
    out->to = e->rt.switch_to;
}

/* ---- slots and tokenization for sessions ---------------------------------------- */

int slm_engine_claim_slot(slm_engine *e) {
    const int n = e->n_slots > 0 ? e->n_slots : 1;
    if (!e->slot_used && !(e->slot_used = slm_calloc((size_t)n, sizeof(int)))) return -1;
    for (int i = 0; i < n; i++)
        if (!e->slot_used[i]) {
            e->slot_used[i] = 1;
            return i;
        }
    return -1;
}

void slm_engine_release_slot(slm_engine *e, int slot) {
    if (e && e->slot_used && slot >= 0 && slot < (e->n_slots > 0 ? e->n_slots : 1)) e->slot_used[slot] = 0;
}

int slm_engine_tokenize(slm_engine *e, const char *text, int flags, int32_t **ids) {
    *ids = NULL;
    const int bos = (flags & SLM_FEED_BOS) != 0;
    if (!(flags & SLM_FEED_SPECIAL) && bos) {
        int n = slm_tok_encode(e->tok, text, 1, 0, NULL, 0);
        if (n < 0) return n;
        if (!(*ids = slm_malloc((size_t)(n ? n : 1) * sizeof(int32_t)))) return SLM_TOK_ENOMEM;
        slm_tok_encode(e->tok, text, 1, 0, *ids, n);
        return n;
    }
    if (!e->ctok && !(e->ctok = slm_chat_tok_new(e->tok))) return -1;
    return slm_chat_tokenize_ex(e->ctok, text, bos, (flags & SLM_FEED_SPECIAL) != 0, ids);
}
