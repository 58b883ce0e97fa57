/* blob/ — the compiled model as a file: a standard ELF64 object whose
 * sections hold the weights (page-aligned, in the layout the kernels read)
 * and their tensor table, one task list, I/O table and relocation table per
 * program, the program table, the constants (RoPE table), the tokenizer,
 * the model config and compile options, the model's string metadata, and
 * an identity record. docs/blob.md documents every section byte by byte.
 *
 * Loading maps the file read-only (MAP_PRIVATE), checks the checksum of
 * everything before the weights, then validates every section bound,
 * count, offset and every task operand BEFORE anything uses it; tasks,
 * I/O tables, relocations and the constants are copied to the heap (as
 * immutable programs; the device resolves its own copy of the tasks), the
 * weights stay mapped.
 */
#ifndef SLM_BLOB_H
#define SLM_BLOB_H

#include <stdio.h>

#include "common/common.h"
#include "compiler/compiler.h"
#include "format/model.h"
#include "text/tokenizer.h"

/* Bump whenever the layout of any section, or what the compiler emits for
 * the same inputs, changes: blobs of another version are recompiled. */
#define SLM_BLOB_FORMAT_VERSION 24u
#define SLM_BLOB_PAGE 4096u

/* ---- hashing ------------------------------------------------------------ */

/* A fast 64-bit hash: four lanes of multiply/rotate over 8-byte words
 * (32 bytes per step), a final avalanche. Streaming. */
typedef struct slm_hash {
    uint64_t v[4];
    uint8_t buf[32];
    uint32_t nbuf;
    uint64_t total;
    uint64_t seed;
} slm_hash;
void slm_hash_init(slm_hash *h, uint64_t seed);
void slm_hash_update(slm_hash *h, const void *data, size_t n);
uint64_t slm_hash_final(const slm_hash *h);
uint64_t slm_hash64(const void *data, size_t n, uint64_t seed);
/* Hash a whole file by reading it (no mapping); *bytes = its size. */
slm_status slm_hash_file(const char *path, uint64_t *hash, uint64_t *bytes, slm_err *err);
/* A file's quick identity: a hash of its size, mtime, ctime, inode and
 * device, its first and last 64 KiB and 64 pages of 4 KiB spread evenly
 * between (at most 384 KiB read, whatever the size). It changes when the
 * file is rewritten, replaced or touched; it stands for the full hash only
 * where a record made from both says so (engine cache mode). changed_s:
 * the later of mtime and ctime, in seconds since the epoch. */
typedef struct slm_file_quick {
    uint64_t key, bytes;
    double changed_s;
} slm_file_quick;
slm_status slm_hash_file_quick(const char *path, slm_file_quick *q, slm_err *err);

/* ---- identity ----------------------------------------------------------- */

typedef struct slm_blob_ident {
    uint32_t format_version;
    uint64_t identity;      /* hash of every field below (the cache key) */
    uint64_t model_hash, model_bytes;
    uint64_t tok_hash, tok_bytes; /* 0, 0: tokenizer from the model file */
    uint64_t options_hash;  /* of the requested compile options */
    uint64_t weights_hash;  /* of the weights section (checked by inspect --verify) */
    char source[64];        /* the model file's base name */
    char compiler[32];      /* "staticlm 0.1.0" */
} slm_blob_ident;

/* Hash of the requested compile options (every field, fixed order). */
uint64_t slm_blob_options_hash(const slm_compile_options *o);
/* Fill format_version, compiler and identity from the other fields. */
void slm_blob_ident_seal(slm_blob_ident *id);

/* ---- embeddings (.slm.embed) ------------------------------------------- */

/* What a blob with embedding programs (kinds EMBED, EMBED_BATCH) keeps
 * beside them for the session: the config's encoder kind and its experts'
 * layer rule (slm_model_config .encoder, .moe_every, .expert_ungated, not
 * in .slm.config), the model's default pooling, how a text and a rerank
 * pair are tokenized, and the heads applied after the programs (their
 * tensors, by their GGUF names, in the weights section and the tensor
 * table: the classifier cls.weight, cls.bias, cls.norm.weight,
 * cls.output.weight, cls.output.bias; sentence-transformers' Dense modules
 * dense_K.weight and dense_K.bias, K each module's place). docs/blob.md has
 * the record. */
#define SLM_BLOB_EMBED_CLS1_B 0x1   /* cls.bias */
#define SLM_BLOB_EMBED_CLS_NORM 0x2 /* cls.norm.weight */
#define SLM_BLOB_EMBED_CLS_W 0x4    /* cls.output.weight */
#define SLM_BLOB_EMBED_CLS_B 0x8    /* cls.output.bias */
#define SLM_BLOB_EMBED_MAX_MODULE 63 /* a Dense module's place in modules.json (< 64 modules) */
typedef struct slm_blob_embed_dense {
    int32_t module;    /* K: its tensors dense_K.weight [in, out] and dense_K.bias [out] */
    int32_t in, out;   /* its widths: in the previous one's out (the first: dim), the last's out dim */
    int32_t act;       /* SLM_DENSE_IDENTITY, SLM_DENSE_TANH */
    int32_t bias;      /* 1: dense_K.bias present */
} slm_blob_embed_dense;
typedef struct slm_blob_embed {
    int32_t encoder;   /* 0 a decoder's embeddings, 1..6 slm_model_config.encoder */
    int32_t pooling;   /* the model's pooling (slm_pooling, 0..4) */
    int32_t add_eos;   /* tokenizer.ggml.add_eos_token of a non-BPE vocabulary */
    int32_t pair_bos, pair_eos, pair_sep, sep; /* a rerank pair: [BOS] q [EOS] [SEP] d [EOS]; sep -1: none */
    int32_t n_cls1;    /* rows of cls.weight (0: none) */
    int32_t n_cls;     /* scores of the classifier (0: not a reranker) */
    int32_t n_dense;   /* Dense modules after pooling (0..SLM_MAX_DENSE), dense[0..n_dense) */
    uint32_t heads;    /* SLM_BLOB_EMBED_* : the optional classifier tensors present */
    int32_t moe_every, expert_ungated; /* slm_model_config's (nomic-bert-moe; else 0) */
    int32_t cls_pool;  /* the rows the classifier reads: 0 the architecture's, 1 mean, 2 first, 3 last */
    slm_blob_embed_dense dense[SLM_MAX_DENSE];
} slm_blob_embed;

/* ---- writing ------------------------------------------------------------ */

/* Called once per program written and once per 64 MiB of weights. */
typedef void (*slm_blob_progress)(void *ud, const char *what, int done, int total);

/* Write c (compiled from m, with tokenizer tok) to path atomically: a
 * temporary file in the same folder, fsync, rename (on failure neither is
 * left). The weights the tasks reference are copied, each tensor
 * page-aligned; the tasks' weight offsets are rewritten to section offsets.
 * The string metadata of m's GGUF (if any) is kept for slm_model_meta. id:
 * sealed by the caller; weights_hash is filled in here. */
slm_status slm_blob_write(const char *path, const slm_compiled *c, const slm_model_file *m,
                          const slm_tokenizer *tok, slm_blob_ident *id, slm_blob_progress progress,
                          void *ud, slm_err *err);

/* The same with embedding programs: emb (NULL: none) is written as
 * .slm.embed, and the head tensors it names are kept in the weights. */
slm_status slm_blob_write_embed(const char *path, const slm_compiled *c, const slm_model_file *m,
                                const slm_tokenizer *tok, const slm_blob_embed *emb, slm_blob_ident *id,
                                slm_blob_progress progress, void *ud, slm_err *err);

/* ---- loading ------------------------------------------------------------ */

#define SLM_BLOB_NO_CHECKSUM 0x1 /* skip the checksum (fuzzing the validator) */

typedef struct slm_blob {
    slm_map map;             /* the whole file, read-only (unset for _mem) */
    const uint8_t *data;     /* file bytes */
    uint64_t size;
    char name[128];          /* base name, for messages */
    const uint8_t *weights;  /* the weights section, in place */
    uint64_t weights_size;
    slm_blob_ident ident;
    const uint8_t *meta;     /* the meta section, in place */
    uint64_t meta_size;
    const uint8_t *tensors;  /* the tensor table, in place */
    uint32_t n_tensors;
    uint32_t n_sections;
    int has_embed;           /* a .slm.embed section (embedding programs) */
    slm_blob_embed embed;
} slm_blob;

/* 1 when the file starts with the ELF magic. */
int slm_blob_is_elf(const char *path);
/* Map and validate path; on success fill comp (heap copies of tasks, I/O,
 * relocations, constants; consts.rope is heap) and *tok. On failure
 * everything is released and err names the section and field. */
slm_status slm_blob_open(slm_blob *b, const char *path, unsigned flags, slm_compiled *comp,
                         slm_tokenizer **tok, slm_err *err);
/* The same over bytes in memory (not copied; must outlive b). */
slm_status slm_blob_open_mem(slm_blob *b, const void *data, uint64_t size, const char *name, unsigned flags,
                             slm_compiled *comp, slm_tokenizer **tok, slm_err *err);
void slm_blob_close(slm_blob *b);
/* A string kept from the model file's metadata; 1 if present. */
int slm_blob_meta(const slm_blob *b, const char *key, const char **val, uint64_t *len);
/* A tensor of the tensor table by name (data in the weights section, name
 * NUL-terminated, type, dims and bytes as stored: checked by the reader to
 * lie in the section); 1 if present. */
int slm_blob_tensor(const slm_blob *b, const char *name, slm_tensor *t);
/* Print programs, I/O, task counts by kind, memory needs and identity. */
void slm_blob_print(const slm_blob *b, const slm_compiled *comp, FILE *f);
/* Hash the weights section and compare with the identity record. */
slm_status slm_blob_verify_weights(const slm_blob *b, slm_err *err);

#endif
