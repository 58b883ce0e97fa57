/* format/hf.h — what the two halves of the Hugging Face loader share
 * (private to format/hf.c and format/hf_config.c).
 *
 * hf_config.c reads config.json into an slm_model_config plus what only the
 * loader needs (slm_hf_info); hf.c maps the safetensors, names the tensors
 * as GGUF does and converts what must change into its anonymous area.
 */
#ifndef SLM_FORMAT_HF_H
#define SLM_FORMAT_HF_H

#include "format/model.h"
#include "format/safetensors.h"

/* What config.json says beyond slm_model_config. */
typedef struct slm_hf_info {
    float *vecs;         /* slm_malloc'd: rope_freqs.weight (c->rope_freqs: head_dim/2 values), or
                            LongRoPE's long then short factors (c->rope_long: rope_dims/2 each) */
    int n_vecs;          /* floats at vecs */
    int norm_plus_one;   /* gemma: RMSNorm gains stored as w, applied as 1 + w */
    int multimodal;      /* gemma3 ConditionalGeneration: text tensors under language_model. prefixes,
                            vision tensors ignored */
    int fused;           /* phi3: self_attn.qkv_proj and mlp.gate_up_proj */
    int vocab_from_embed;/* vocab_size absent (gemma3 text_config): the embedding's rows */
    int k_eq_v;          /* gemma4 attention_k_eq_v: the global layers have no v_proj (V is K) */
    int type_vocab;      /* bert: type_vocab_size (token_types.weight's rows) */
    int classifier;      /* bert: BertForSequenceClassification (a cross-encoder: the pooler and the
                            classifier are its head); 2: XLMRobertaForSequenceClassification (classifier.dense
                            and classifier.out_proj are its head) */
    int xlmr;            /* model_type xlm-roberta: "roberta." prefix, Unigram tokenizer */
    int pos_offset;      /* xlm-roberta: position rows never used (pad_token_id + 1), cut off at load */
    int jina;            /* bert with position_embedding_type alibi (jina-bert-v2): 1 bert's FFN
                            (feed_forward_type original), 2 GeGLU (geglu: the fused mlp.gated_layers) */
    int nomic_bias;      /* nomic_bert: bit 0 qkv_proj_bias, 1 mlp_fc1_bias, 2 mlp_fc2_bias */
    int cls_bias;        /* modernbert ModernBertForSequenceClassification (classifier 1): classifier_bias
                            (head.dense.bias) */
    int n_labels;        /* modernbert's classifier: the scores (id2label's entries, else num_labels, else 2) */
    int cls_pool;        /* modernbert's classifier: the rows its head reads (classifier_pooling: mean
                            SLM_POOLING_MEAN, cls SLM_POOLING_CLS) */
} slm_hf_info;

/* config.json (len bytes; `name` for messages) -> c and *info. On failure
 * info->vecs is NULL. */
slm_status slm_hf_config(slm_model_config *c, slm_hf_info *info, const char *json, size_t len, const char *name,
                         slm_err *err);

/* A string for messages: printable ASCII, at most 40 bytes (then "..."). */
const char *slm_hf_pstr(const char *s, char *buf, size_t cap);
/* A tensor name for messages: as slm_hf_pstr, up to 100 bytes (hf.c). */
const char *slm_hf_tname(const char *s, char *buf, size_t cap);

/* ---- gpt_oss (format/hf_oss.c) ------------------------------------------------
 * OpenAI's gpt-oss folders: the config's keys, the layer tensors' GGUF names,
 * and the experts, which the loader makes in its anonymous area: MXFP4
 * blocks re-packed to GGML's layout, the fused gate/up rows de-interleaved,
 * the bf16 variant's [experts, in, out] stacks transposed. */

struct cJSON;

/* A tensor the loader makes in its anonymous area (hf_oss.c's planner
 * checks the sources; slm_hf_make trusts them). */
typedef struct slm_hf_made {
    const slm_st_tensor *src;    /* blocks, a bias stack, or a bf16/f16/f32 expert stack */
    const slm_st_tensor *scales; /* SLM_HF_MAKE_MXFP4: the E8M0 scales */
    int op;                /* SLM_HF_MAKE_* */
    int64_t e;             /* the expert */
    int64_t first, step;   /* the source rows (MXFP4), entries (VEC) or columns (T) taken: first, step */
    uint32_t type;         /* the result's element type */
    uint32_t n_dims;       /* 1 (a vector) or 2 */
    int64_t ne0, ne1;      /* the result: row length, rows (1 for a vector) */
    uint64_t nbytes;       /* the result's bytes */
    int64_t kh;            /* SLM_HF_MAKE_V*, _NEGEXP: key heads (value heads re-ordered grouped -> tiled); 0: kept */
} slm_hf_made;
enum {
    SLM_HF_MAKE_MXFP4 = 1, /* rows of [E, R, n/32, 16] blocks + [E, R, n/32] scales -> GGML MXFP4 rows */
    SLM_HF_MAKE_VEC = 2,   /* entries of [E, R] -> f32 */
    SLM_HF_MAKE_T = 3,     /* columns of [E, in, R] -> [rows, in] rows, the source's type */
    /* qwen35 (hf_qwen35.c): rows [0, first) kept, then rows in value heads of step re-ordered */
    SLM_HF_MAKE_VROWS = 4,
    SLM_HF_MAKE_VCOLS = 5,  /* each row's columns in value heads of step re-ordered */
    SLM_HF_MAKE_NEGEXP = 6, /* as VROWS, each value -exp(v) (A_log -> ssm_a) */
};
/* Write mk's tensor at dst (mk->nbytes). */
void slm_hf_make(const slm_hf_made *mk, void *dst);

/* What the gpt_oss planner needs from the loader: a tensor by HF name over
 * every shard (NULL when absent; *shown the shard for messages) and a made
 * tensor taken under a GGUF name. */
typedef struct slm_hf_oss_io {
    void *L;
    const slm_st_tensor *(*find)(void *L, const char *hf_name, const char **shown);
    slm_status (*take)(void *L, int shard, const char *gn, const slm_hf_made *mk);
    /* rows [row0, row0 + n_rows) of t's leading dimensions (a vector: its entries) as gn, no copy (vec: to f32) */
    slm_status (*take_range)(void *L, int shard, const slm_st_tensor *t, const char *gn, int vec, int64_t row0, int64_t n_rows);
} slm_hf_oss_io;

/* config.json's keys as hf_config.c reads them (null counts as absent):
 * an integer in 1..INT32_MAX (required: absent is an error), a finite
 * number, true or false; absent keys leave *v. */
slm_status slm_hf_cfg_int(const struct cJSON *o, const char *file, const char *key, int required, int *v, slm_err *err);
slm_status slm_hf_cfg_num(const struct cJSON *o, const char *file, const char *key, double *v, slm_err *err);
slm_status slm_hf_cfg_bool(const struct cJSON *o, const char *file, const char *key, int *v, slm_err *err);

/* config.json's gpt_oss keys (after the sizes every family shares): the
 * experts, biases, sinks, clamped SwiGLU, the window and layer_types,
 * quantization_config. */
slm_status slm_hf_oss_config(const struct cJSON *root, const char *file, slm_model_config *c, slm_err *err);
/* The GGUF name of gpt_oss layer n's tensor p (after "model.layers.N."):
 * 1 a plain tensor (*vec: 1 a bias or sinks, else a matrix), 4 a tensor
 * slm_hf_oss_plan makes, 2 ignorable (MXFP4 scales: read with their
 * blocks), 0 not a gpt_oss name (the names every family shares are
 * hf.c's). */
int slm_hf_oss_name(const char *p, long n, char *out, size_t cap, int *vec);
/* The made tensors of expert tensor t (shard i, shown for messages; gn its
 * name from slm_hf_oss_name), every shape checked against the config. */
slm_status slm_hf_oss_plan(const slm_hf_oss_io *io, int i, const char *shown, const slm_st_tensor *t,
                           const char *gn, const slm_model_config *c, slm_err *err);

/* Each expert's made tensors of mk (src, op, type, n_dims, ne0 set) for
 * layer l: gu, the gate and up parts of a fused stack (else the down);
 * bias, [rows] vectors (hf_oss.c). */
slm_status slm_hf_take_parts(const slm_hf_oss_io *io, int i, const slm_model_config *c, int l, int gu, int bias,
                             slm_hf_made mk, slm_err *err);

/* ---- gemma4 (format/hf_gemma4.c) ----------------------------------------------
 * Gemma 4 folders: config.json (model_type gemma4 or gemma4_text: the
 * whole config, hf_config.c hands it over), the tensors' GGUF names, and
 * the checks that need the loaded tensors. */
enum { SLM_HF_G4_MAT = 1, SLM_HF_G4_VEC, SLM_HF_G4_EXPS_GATE_UP, SLM_HF_G4_EXPS_DOWN };
slm_status slm_hf_gemma4_config(const struct cJSON *top, const char *file, slm_model_config *c, slm_hf_info *h,
                                slm_err *err);
/* The GGUF name of tensor hf: 1 (*kind SLM_HF_G4_*; the experts' stacks
 * under expert 0's name), 2 ignorable (the vision and audio towers), 0 not
 * a gemma4 name. */
int slm_hf_gemma4_name(const char *hf, int multimodal, int n_experts, char *out, size_t cap, int *kind);
/* After the tensors: the layer scales and per-expert scales (all layers or
 * none), K/V present exactly where the config says. */
slm_status slm_hf_gemma4_finish(slm_model_file *m, const slm_hf_info *h, const char *dir, slm_err *err);

/* ---- bert (format/hf_bert.c) ---------------------------------------------------
 * BERT folders (model_type bert: sentence-transformers' embedding models):
 * the whole config.json (hf_config.c hands it over), the tensors' GGUF
 * names (an optional "bert." prefix; gamma / beta as weight / bias), and
 * the checks that need the loaded tensors. */
slm_status slm_hf_bert_config(const struct cJSON *top, const char *file, slm_model_config *c, slm_hf_info *h,
                              slm_err *err);
/* What an encoder's tensor is (the *kind of the name functions below):
 * a matrix, a vector (a bias or a LayerNorm's, f32), a fused Q/K/V matrix
 * (Q rows, K, V: the name given is attn_q's) or a fused gate/up matrix
 * (gate rows first: the name given is ffn_gate's). */
enum { SLM_HF_ENC_MAT = 0, SLM_HF_ENC_VEC = 1, SLM_HF_ENC_QKV = 2, SLM_HF_ENC_GATE_UP = 3 };
/* The GGUF name of tensor hf: 1 (*vec: SLM_HF_ENC_MAT or _VEC), 2
 * ignorable (the pooler, position_ids, the pre-training heads), 0 not a
 * bert name. h->classifier: a cross-encoder's head is cls and cls.output;
 * h->xlmr: the prefix is "roberta." instead of "bert.". */
int slm_hf_bert_name(const char *hf, const slm_hf_info *h, char *out, size_t cap, int *vec);
/* s is prefix, a layer number N (0..65535, no leading zero) and a dot:
 * what follows the dot, N in *n; else NULL. */
const char *slm_hf_layer(const char *s, const char *prefix, long *n);
/* An activation key (absent or null: gelu): the GELU names (*gelu 1: run
 * as GELU's tanh form), with silu also silu and swish (*gelu 0); anything
 * else refused naming the key. */
slm_status slm_hf_cfg_act(const struct cJSON *top, const char *file, const char *key, int silu, int *gelu, slm_err *err);

/* ---- jina-bert-v2 (format/hf_jina.c) --------------------------------------------
 * A bert folder with position_embedding_type alibi (jina-embeddings-v2):
 * slm_hf_bert_config reads the keys BERT shares, then hands over. */
slm_status slm_hf_jina_config(const struct cJSON *top, const char *file, slm_model_config *c, slm_hf_info *h,
                              slm_err *err);
/* The GGUF name of tensor hf (*kind SLM_HF_ENC_*): 1, 2 ignorable, 0 not a jina-bert-v2 name. */
int slm_hf_jina_name(const char *hf, const slm_hf_info *h, char *out, size_t cap, int *kind);

/* ---- modern-bert (format/hf_modernbert.c) ---------------------------------------
 * ModernBERT folders (model_type modernbert): the whole config.json, the
 * tensors' GGUF names (*kind SLM_HF_ENC_*: 1, 2 ignorable (the MLM head), 0
 * not a modern-bert name; h->classifier: the sequence-classification head
 * as cls, cls.norm, cls.output), and the checks of that head once loaded. */
slm_status slm_hf_modernbert_config(const struct cJSON *top, const char *file, slm_model_config *c, slm_hf_info *h,
                                    slm_err *err);
int slm_hf_modernbert_name(const char *hf, const slm_hf_info *h, char *out, size_t cap, int *kind);
slm_status slm_hf_modernbert_finish(slm_model_file *m, const slm_hf_info *h, const char *dir, slm_err *err);
/* xlm-roberta's position table (t, shown for messages): the rows kept
 * after the pos_offset unused ones, checked against the config. */
slm_status slm_hf_bert_positions(const slm_hf_info *h, const slm_model_config *c, const slm_st_tensor *t,
                                 const char *shown, int64_t *row0, int64_t *rows, slm_err *err);
/* After the tensors: token_types' rows are type_vocab_size, no layer beyond num_hidden_layers. */
slm_status slm_hf_bert_finish(slm_model_file *m, const slm_hf_info *h, const char *dir, slm_err *err);

/* ---- nomic_bert (format/hf_nomic.c) ----------------------------------------------
 * nomic-embed-text folders (NomicBertModel: arch nomic-bert, or
 * nomic-bert-moe with moe_every_n_layers): the whole config.json
 * (hf_config.c hands it over), the tensors' GGUF names, the experts made
 * (w1's rows, w2 transposed) and the checks that need the loaded tensors. */
slm_status slm_hf_nomic_config(const struct cJSON *top, const char *file, slm_model_config *c, slm_hf_info *h,
                               slm_err *err);
/* The GGUF name of tensor hf (moe: arch nomic-bert-moe): 1 (*what: 0 a
 * matrix, 1 f32 (a vector; token_types and the router, as the converter
 * writes them), 2 the fused Q/K/V weight or bias, named attn_q's, 3 an
 * expert stack for slm_hf_nomic_plan), 2 ignorable (the experts' bias), 0
 * not a nomic_bert name. */
int slm_hf_nomic_name(const char *hf, int moe, char *out, size_t cap, int *what);
/* Expert stack t (shard i, shown for messages; gn from slm_hf_nomic_name)
 * as each expert's ffn_up.E / ffn_down.E, its shape checked against the config. */
slm_status slm_hf_nomic_plan(const slm_hf_oss_io *io, int i, const char *shown, const slm_st_tensor *t, const char *gn,
                             const slm_model_config *c, slm_err *err);
/* After the tensors: the biases as qkv_proj_bias / mlp_fc1_bias /
 * mlp_fc2_bias say, the router on the MoE layers only, no dense FFN there. */
slm_status slm_hf_nomic_finish(slm_model_file *m, const slm_hf_info *h, const char *dir, slm_err *err);

/* An F32, F16 or BF16 element at p as f32 (hf_oss.c). */
float slm_hf_elem_f32(uint32_t type, const uint8_t *p);
/* A safetensors dtype as the file spells it (U8 is read as SLM_I8). */
static inline const char *slm_hf_dtype(uint32_t t) {
    return t == SLM_I8 ? "U8" : t == SLM_I64 ? "I64" : t == SLM_I32 ? "I32" : slm_dtype_name(t);
}
/* Whether a tensor type is one of the float types a folder's matrices come in (F32, F16, BF16). */
static inline int slm_hf_float(uint32_t t) { return t == SLM_F32 || t == SLM_F16 || t == SLM_BF16; }

/* ---- sentence-transformers modules (format/hf_modules.c) ----------------------
 * modules.json: the Transformer, then Pooling, the Dense modules (each its
 * folder's config.json {in_features, out_features, bias,
 * activation_function} and model.safetensors {linear.weight [out, in],
 * linear.bias [out]}), Normalize; hf.c maps each Dense module's
 * model.safetensors beside the shards, its tensors named
 * dense_K.{weight,bias} (K the module's place in modules.json). */
typedef struct slm_hf_dense {
    char path[128];      /* the module's folder, as modules.json names it (a plain relative path) */
    char name[16];       /* "dense_K" */
    int in, out;         /* in_features, out_features */
    int bias;            /* 1: linear.bias [out] */
    int act;             /* SLM_DENSE_* */
} slm_hf_dense;
typedef struct slm_hf_modules {
    int n_dense;
    slm_hf_dense dense[SLM_MAX_DENSE];
    int normalize;       /* a Normalize module last (staticlm's embed normalizes by default: a note only) */
} slm_hf_modules;
/* modules.json of folder `path` (dir: its name, for messages) -> *mods
 * (all zero when the folder has none); a module staticlm cannot run as
 * sentence-transformers does, or a Dense module's config.json or weights
 * file missing or misshapen, is refused naming the file and key. */
slm_status slm_hf_modules_read(const char *path, const char *dir, slm_hf_modules *mods, slm_err *err);
/* The GGUF name of tensor hf of Dense module d: 1 (*vec: the bias), 0 not one of a Dense module's. */
int slm_hf_dense_name(const slm_hf_dense *d, const char *hf, char *out, size_t cap, int *vec);
/* After the tensors: each Dense module's weight [in -> out] and bias as its
 * config.json says, the chain from hidden_size back to hidden_size (the
 * width staticlm's embeddings have); then m->dense. */
slm_status slm_hf_dense_finish(slm_model_file *m, const slm_hf_modules *mods, const char *dir, slm_err *err);
/* generation_config.json beside config.json (optional): the sampling values
 * llama.cpp's converter writes as general.sampling.* (gguf-py's metadata:
 * temperature -> temp, top_k, top_p, min_p, sequence, xtc_probability,
 * xtc_threshold, penalty_last_n, penalty_repeat, mirostat, mirostat_tau,
 * mirostat_eta) into m->meta as text; an unreadable file or a value of the
 * wrong type is refused naming the file and key (format/hf_generation.c). */
slm_status slm_hf_generation_meta(slm_model_file *m, const char *path, const char *dir, slm_err *err);
/* The same from len bytes of JSON (`shown` names the file in messages). */
slm_status slm_hf_generation_parse(slm_model_file *m, const char *json, size_t len, const char *shown, slm_err *err);
/* A whole small file (JSON) into *buf (slm_malloc'd, NUL-terminated): *buf
 * NULL and SLM_OK when it does not exist and !required (hf.c). */
slm_status slm_hf_read_small(const char *path, const char *shown, int required, char **buf, size_t *len, slm_err *err);

/* ---- qwen35, qwen35moe (format/hf_qwen35.c) --------------------------------------
 * Qwen3.5 folders: the config's keys, the layer tensors' GGUF names, the
 * Gated DeltaNet tensors made in the anonymous area (A_log -> -exp, the
 * conv taps to f32, the value heads re-ordered from grouped to tiled). */

/* model_type (qwen3_5, qwen3_5_moe, or their _text models) -> the object
 * holding the text model's keys (text_config; then info->multimodal). */
slm_status slm_hf_q35_root(const struct cJSON *top, const char *file, const char *model_type, const struct cJSON **root,
                           slm_hf_info *info, slm_err *err);
/* The keys beyond the sizes every family shares (top: the file's object,
 * root: the text model's, rp: rope_parameters' global object or NULL). */
slm_status slm_hf_q35_config(const struct cJSON *top, const struct cJSON *root, const struct cJSON *rp, const char *file,
                             slm_model_config *c, slm_hf_info *info, slm_err *err);
/* 1 for a tensor the folder holds but the text model does not run (the vision tower, the MTP layer). */
int slm_hf_q35_skip(const char *hf);
/* The GGUF name of layer n's tensor p (after "model.layers.N."): 1 a plain
 * tensor (*what: 0 a matrix, 1 a vector, 2 a norm gain 1 + w), 4 one
 * slm_hf_q35_plan makes, 0 not one of qwen35's own (the shared names are
 * hf.c's). moe: the shared expert's names too; reorder: the value heads
 * are re-ordered (H_v > H_k), so the DeltaNet matrices are made. */
int slm_hf_q35_name(const char *p, long n, int moe, int reorder, char *out, size_t cap, int *what);
/* The made tensor gn of source t (shard i, shown for messages), its dtype and shape checked against the config. */
slm_status slm_hf_q35_plan(const slm_hf_oss_io *io, int i, const char *shown, const slm_st_tensor *t, const char *gn,
                           const slm_model_config *c, slm_err *err);
/* Writes a SLM_HF_MAKE_VROWS / _VCOLS / _NEGEXP tensor (slm_hf_make's). */
void slm_hf_q35_make(const slm_hf_made *mk, void *dst);

#endif
