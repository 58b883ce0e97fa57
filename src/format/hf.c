/* Hugging Face folders: config.json + safetensors (one file, or shards named
 * by model.safetensors.index.json) -> slm_model_file with GGUF names, for
 * the llama, mistral, qwen2, qwen3, gemma2, gemma3, gemma4 (hf_gemma4.c), phi3, smollm3, olmo2
 * (OLMo 2, Olmo 3), granite and exaone4 (EXAONE 4.0) families and the
 * mixtures of experts qwen3moe, qwen2moe (with its gated shared expert),
 * mixtral (llama with experts) and olmoe (config.json itself: hf_config.c). granite's tensors are llama's, without
 * biases; exaone4's are olmo2's with Q/K norms of one head. An MoE layer's
 * router (mlp.gate, mixtral's block_sparse_moe.gate) becomes
 * blk.N.ffn_gate_inp.weight and expert E's matrices blk.N.ffn_{gate,up,down}.E.weight;
 * transformers v5's fused experts (mlp.experts.gate_up_proj [E, 2F, D],
 * mlp.experts.down_proj [E, D, F]) become the same names as row ranges of
 * their bytes. gpt_oss (arch gpt-oss) names its own layer tensors and makes
 * its experts in the anonymous area (MXFP4 blocks re-packed, gate and up
 * de-interleaved: hf_oss.c); U8 tensors are read only there. qwen35 and
 * qwen35moe (Qwen3.5) name their own layer tensors and make the Gated
 * DeltaNet ones (-exp(A_log), f32 conv taps, value heads re-ordered grouped
 * -> tiled: hf_qwen35.c); their vision tower and MTP layer are skipped.
 * bert and xlm-roberta (encoders: sentence-transformers' embedding models,
 * cross-encoders) name their own tensors (hf_bert.c), as do nomic_bert's
 * nomic-bert and nomic-bert-moe (hf_nomic.c: Wqkv and its bias split as
 * phi3's qkv_proj, the experts' w1 as row ranges, w2 transposed); their tokenizer is
 * tokenizer.json's WordPiece (text/wpm_hf.c) or Unigram (text/ugm_hf.c),
 * else vocab.txt. EmbeddingGemma (gemma3_text with use_bidirectional_attention:
 * arch gemma-embedding) takes gemma3's names, with or without "model.".
 * sentence-transformers' Dense modules (modules.json: hf_modules.c) are
 * mapped as shards after the model's, their linear.weight / linear.bias
 * named dense_K.weight / dense_K.bias.
 *
 * One mapping for many shards: each shard is first mapped on its own and its
 * header parsed (slm_st_parse); then one address range is reserved
 * (PROT_NONE) for all shards, page-rounded, plus an anonymous area; each
 * shard is mapped again read-only with MAP_FIXED at its place in the range,
 * and the anonymous area receives what must be converted: norm and bias
 * vectors stored as BF16/F16 become F32 (the kernels take f32 vectors),
 * gemma's norm gains become 1 + w (as llama.cpp's converter stores them,
 * added here in f32 as transformers does), a tensor whose data is not
 * aligned to its element size is copied, Llama 3 scaling gets its
 * rope_freqs.weight and phi3's LongRoPE its rope_factors_long/short.weight.
 * phi3's fused qkv_proj and gate_up_proj become attn_q/k/v and
 * ffn_gate/up as row ranges of the same bytes (no copy). The range is laid out without gaps,
 * so all of m->map is readable, and slm_unmap releases it in one call.
 *
 * HF matrices are [out, in] row-major, which is GGUF's ne {in, out}: nothing
 * is transposed. HF Q/K rows are in the "rotate half" RoPE layout (pairs
 * (i, i + head_dim/2)); llama.cpp's converter permutes them to adjacent
 * pairs instead, here cfg.rope_neox = 1 and nothing is permuted.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/hf.h"
#include "format/safetensors.h"

#ifndef SLM_HAVE_CJSON

slm_status slm_hf_model_load(slm_model_file *m, slm_err *err) {
    return slm_errf(err, SLM_ERR_UNSUPPORTED,
                    "%s: a Hugging Face folder needs JSON support: built without JSON support (cJSON not found)",
                    slm_basename(m->path));
}

#else

#include <cJSON.h>

#include "common/json.h"

#define HF_MAX_JSON (64u << 20)
#define HF_MAX_SHARDS 4096
#define pstr slm_hf_pstr
#define tname slm_hf_tname

/* ---- files ------------------------------------------------------------------ */

/* Read a whole (small) file with slm_malloc; *buf NULL and SLM_OK when it
 * does not exist and !required. */
slm_status slm_hf_read_small(const char *path, const char *shown, int required, char **buf, size_t *len,
                             slm_err *err) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && !required) return SLM_OK;
        return slm_errf(err, errno == ENOENT ? SLM_ERR_FORMAT : SLM_ERR_IO, "%s: cannot open: %s", shown,
                        strerror(errno));
    }
    struct stat st;
    slm_status s = SLM_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        s = slm_errf(err, SLM_ERR_IO, "%s: not a regular file", shown);
        goto out;
    }
    if ((uint64_t)st.st_size > HF_MAX_JSON) {
        s = slm_errf(err, SLM_ERR_FORMAT, "%s: %lld bytes: larger than the limit (%u)", shown, (long long)st.st_size,
                     HF_MAX_JSON);
        goto out;
    }
    *buf = slm_malloc((size_t)st.st_size + 1);
    if (!*buf) {
        s = slm_errf(err, SLM_ERR_NOMEM, "%s: out of memory", shown);
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, *buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            s = slm_errf(err, SLM_ERR_IO, "%s: read failed: %s", shown, r < 0 ? strerror(errno) : "short read");
            goto out;
        }
        got += (size_t)r;
    }
    (*buf)[got] = 0;
    *len = got;
out:
    close(fd);
    if (s) {
        slm_xfree(*buf);
        *buf = NULL;
    }
    return s;
}

typedef struct shard {
    char file[256];   /* name inside the folder */
    char shown[320];  /* "folder/file" for messages */
    int fd;
    uint64_t size;
    void *tmp;        /* the first, temporary mapping */
    slm_st st;
    uint64_t off;     /* place in the range */
    const slm_hf_dense *dense; /* a Dense module's model.safetensors (hf_modules.c); NULL: the model's */
} shard;

/* What an HF tensor is (K_OSS: gpt_oss's experts, made by hf_oss.c). */
enum { K_MAT, K_VEC, K_NORM, K_QKV, K_GATE_UP, K_EXPS_GATE_UP, K_EXPS_DOWN, K_OSS, K_Q35, K_NOMIC };
/* The families (bits), by slm_model_config.arch. */
enum {
    B_LLAMA = 1 << SLM_ARCH_LLAMA, B_MISTRAL = 1 << SLM_ARCH_MISTRAL, B_QWEN2 = 1 << SLM_ARCH_QWEN2,
    B_QWEN3 = 1 << SLM_ARCH_QWEN3, B_GEMMA2 = 1 << SLM_ARCH_GEMMA2, B_GEMMA3 = 1 << SLM_ARCH_GEMMA3 | 1 << SLM_ARCH_GEMMA_EMBEDDING, /* EmbeddingGemma: gemma3's */
    B_PHI3 = 1 << SLM_ARCH_PHI3, B_SMOLLM3 = 1 << SLM_ARCH_SMOLLM3, B_OLMO2 = 1 << SLM_ARCH_OLMO2,
    B_EXAONE4 = 1 << SLM_ARCH_EXAONE4, B_QWEN3MOE = 1 << SLM_ARCH_QWEN3MOE, B_OLMOE = 1 << SLM_ARCH_OLMOE,
    B_GPT_OSS = 1 << SLM_ARCH_GPT_OSS, B_QWEN2MOE = 1 << SLM_ARCH_QWEN2MOE, B_GEMMA4 = 1 << SLM_ARCH_GEMMA4,
    B_QWEN35 = 1 << SLM_ARCH_QWEN35 | 1 << SLM_ARCH_QWEN35MOE, /* hf_qwen35.c */
    B_BERT = 1 << SLM_ARCH_BERT, /* hf_bert.c */
    B_MODERN_BERT = 1 << SLM_ARCH_MODERN_BERT, B_JINA = 1 << SLM_ARCH_JINA_BERT_V2, /* hf_modernbert.c, hf_jina.c */
    B_NOMIC = 1 << SLM_ARCH_NOMIC_BERT | 1 << SLM_ARCH_NOMIC_BERT_MOE, /* hf_nomic.c */
};
#define B_ALL ((1 << SLM_ARCH_COUNT) - 1)
#define B_GEMMA (B_GEMMA2 | B_GEMMA3)
#define B_POST_ONLY (B_OLMO2 | B_EXAONE4) /* no pre-norms: the norms after attention and FFN only */

/* A tensor name for messages: as pstr, printable ASCII, but up to 100
 * bytes (then "..."): an expert's name such as
 * "model.layers.47.block_sparse_moe.experts.127.w2.weight" is longer than
 * pstr shows. */
const char *slm_hf_tname(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    for (; s[n] && n + 4 < cap && n < 100; n++) {
        const unsigned char ch = (unsigned char)s[n];
        buf[n] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (s[n]) buf[n++] = '.', buf[n++] = '.', buf[n++] = '.';
    buf[n] = 0;
    return buf;
}

static int fam_bit(const char *arch) {
    const int a = slm_arch_find(arch, strlen(arch));
    return a < 0 ? 0 : 1 << a;
}

/* Gemma3ForConditionalGeneration: the text model's name without its
 * prefix (language_model.model.X or model.language_model.X -> model.X;
 * language_model.lm_head.weight -> lm_head.weight) into buf; NULL for the
 * vision tower and projector (ignored); hf itself otherwise. */
static const char *strip_multimodal(const char *hf, char *buf, size_t cap) {
    static const char *const skip[] = {"vision_tower.", "multi_modal_projector.", "multimodal_projector.",
                                       "vision_model.", "model.vision_tower.", "model.multi_modal_projector."};
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (!strncmp(hf, skip[i], strlen(skip[i]))) return NULL;
    if (!strncmp(hf, "language_model.", 15)) return hf + 15;
    if (!strncmp(hf, "model.language_model.", 21)) {
        snprintf(buf, cap, "model.%s", hf + 21);
        return buf;
    }
    return hf;
}

/* An MoE layer's tensor p (after "model.layers.N.") of layer n, family fb
 * (B_LLAMA: mixtral): the router (mlp.gate.weight; mixtral's
 * block_sparse_moe.gate.weight), an expert's matrix (qwen3moe, qwen2moe,
 * olmoe: mlp.experts.E.{gate,up,down}_proj.weight; mixtral:
 * block_sparse_moe.experts.E.w1 (gate), w3 (up), w2 (down)),
 * transformers v5's fused experts (mlp.experts.gate_up_proj / down_proj:
 * the name is expert 0's) or qwen2moe's shared expert
 * (mlp.shared_expert.{gate,up,down}_proj.weight -> ffn_{gate,up,down}_shexp,
 * its gate mlp.shared_expert_gate.weight [1, hidden] -> ffn_gate_inp_shexp).
 * 0: none of these; 3: expert E is not below n_experts. */
static int expert_name(const char *p, long n, int fb, int n_experts, char *out, size_t cap, int *kind) {
    static const char *const kinds[3] = {"gate", "up", "down"};
    static const char *const hf_names[3] = {"gate_proj.weight", "up_proj.weight", "down_proj.weight"};
    static const char *const mixtral_names[3] = {"w1.weight", "w3.weight", "w2.weight"};
    const int mixtral = fb == B_LLAMA;
    if (!strcmp(p, "mlp.gate.weight") || (mixtral && !strcmp(p, "block_sparse_moe.gate.weight"))) {
        *kind = K_MAT;
        snprintf(out, cap, "blk.%ld.ffn_gate_inp.weight", n);
        return 1;
    }
    if (fb == B_QWEN2MOE && !strcmp(p, "mlp.shared_expert_gate.weight")) {
        *kind = K_MAT;
        snprintf(out, cap, "blk.%ld.ffn_gate_inp_shexp.weight", n);
        return 1;
    }
    for (int j = 0; fb == B_QWEN2MOE && j < 3; j++)
        if (!strncmp(p, "mlp.shared_expert.", 18) && !strcmp(p + 18, hf_names[j])) {
            *kind = K_MAT;
            snprintf(out, cap, "blk.%ld.ffn_%s_shexp.weight", n, kinds[j]);
            return 1;
        }
    if (!strcmp(p, "mlp.experts.gate_up_proj") || !strcmp(p, "mlp.experts.down_proj")) {
        const int gu = p[12] == 'g';
        *kind = gu ? K_EXPS_GATE_UP : K_EXPS_DOWN;
        snprintf(out, cap, "blk.%ld.ffn_%s.0.weight", n, gu ? "gate" : "down");
        return 1;
    }
    const char *pre = mixtral ? "block_sparse_moe.experts." : "mlp.experts.";
    if (strncmp(p, pre, strlen(pre))) return 0;
    p += strlen(pre);
    long e = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 6; p++, digits++) e = e * 10 + (*p - '0');
    if (!digits || *p != '.' || (digits > 1 && p[-digits] == '0')) return 0;
    p++;
    for (int j = 0; j < 3; j++)
        if (!strcmp(p, mixtral ? mixtral_names[j] : hf_names[j])) {
            if (e >= n_experts) return 3;
            *kind = K_MAT;
            snprintf(out, cap, "blk.%ld.ffn_%s.%ld.weight", n, kinds[j], e);
            return 1;
        }
    return 0;
}

/* The GGUF name of an HF tensor of the family fb; 0 when unknown (or not
 * of this family), 2 when ignorable, 3 an expert beyond n_experts. *kind:
 * K_MAT, K_VEC (a bias: f32), K_NORM (a gain: f32, gemma's 1 + w), or fused
 * (phi3, v5 experts: the name is the first part's). post_attention_layernorm
 * is the FFN's pre-norm in the llama-like families but the norm of the
 * attention's output in gemma, olmo2 and exaone4 (which have no pre-norms:
 * no input_layernorm; olmo2's and olmoe's Q/K norms are over whole q_dim /
 * kv_dim rows, exaone4's and qwen3moe's per head). With n_experts every
 * layer's FFN is its experts: the dense mlp names are not part of it. */
static int gguf_name(const char *hf, int fb, const slm_hf_info *info, int n_experts, int reorder, char *out, size_t cap,
                     int *kind) {
    const int multimodal = info->multimodal;
    static const struct { const char *hf, *gg; int kind, fams; } top[] = {
        {"model.embed_tokens.weight", "token_embd.weight", K_MAT, B_ALL},
        {"model.norm.weight", "output_norm.weight", K_NORM, B_ALL},
        {"lm_head.weight", "output.weight", K_MAT, B_ALL},
    };
    static const struct { const char *hf, *gg; int kind, fams; } layer[] = {
        {"input_layernorm.weight", "attn_norm.weight", K_NORM, B_ALL & ~B_POST_ONLY},
        {"self_attn.q_proj.weight", "attn_q.weight", K_MAT, B_ALL & ~B_PHI3},
        {"self_attn.k_proj.weight", "attn_k.weight", K_MAT, B_ALL & ~B_PHI3},
        {"self_attn.v_proj.weight", "attn_v.weight", K_MAT, B_ALL & ~B_PHI3},
        {"self_attn.qkv_proj.weight", "attn_q.weight", K_QKV, B_PHI3},
        {"self_attn.q_proj.bias", "attn_q.bias", K_VEC, B_LLAMA | B_MISTRAL | B_QWEN2 | B_QWEN2MOE},
        {"self_attn.k_proj.bias", "attn_k.bias", K_VEC, B_LLAMA | B_MISTRAL | B_QWEN2 | B_QWEN2MOE},
        {"self_attn.v_proj.bias", "attn_v.bias", K_VEC, B_LLAMA | B_MISTRAL | B_QWEN2 | B_QWEN2MOE},
        {"self_attn.q_norm.weight", "attn_q_norm.weight", K_NORM, B_QWEN3 | B_GEMMA3 | B_POST_ONLY | B_QWEN3MOE | B_OLMOE},
        {"self_attn.k_norm.weight", "attn_k_norm.weight", K_NORM, B_QWEN3 | B_GEMMA3 | B_POST_ONLY | B_QWEN3MOE | B_OLMOE},
        {"self_attn.o_proj.weight", "attn_output.weight", K_MAT, B_ALL},
        {"post_attention_layernorm.weight", "ffn_norm.weight", K_NORM, B_ALL & ~(B_GEMMA | B_POST_ONLY)},
        {"post_attention_layernorm.weight", "post_attention_norm.weight", K_NORM, B_GEMMA | B_POST_ONLY},
        {"pre_feedforward_layernorm.weight", "ffn_norm.weight", K_NORM, B_GEMMA},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", K_NORM, B_GEMMA | B_POST_ONLY},
        {"mlp.gate_proj.weight", "ffn_gate.weight", K_MAT, B_ALL & ~B_PHI3},
        {"mlp.up_proj.weight", "ffn_up.weight", K_MAT, B_ALL & ~B_PHI3},
        {"mlp.gate_up_proj.weight", "ffn_gate.weight", K_GATE_UP, B_PHI3},
        {"mlp.down_proj.weight", "ffn_down.weight", K_MAT, B_ALL},
    };
    if (fb == B_GEMMA4) { /* its own names and prefixes (hf_gemma4.c) */
        int k = 0;
        const int r = slm_hf_gemma4_name(hf, multimodal, n_experts, out, cap, &k);
        *kind = k == SLM_HF_G4_VEC ? K_VEC : k == SLM_HF_G4_EXPS_GATE_UP ? K_EXPS_GATE_UP
                : k == SLM_HF_G4_EXPS_DOWN ? K_EXPS_DOWN : K_MAT;
        return r;
    }
    if (fb == B_BERT || fb == B_MODERN_BERT || fb == B_JINA) { /* their own names (hf_bert.c, hf_modernbert.c, hf_jina.c) */
        int k = 0;
        const int r = fb == B_MODERN_BERT ? slm_hf_modernbert_name(hf, info, out, cap, &k)
                      : fb == B_JINA      ? slm_hf_jina_name(hf, info, out, cap, &k)
                                          : slm_hf_bert_name(hf, info, out, cap, &k);
        *kind = k == SLM_HF_ENC_VEC ? K_VEC : k == SLM_HF_ENC_QKV ? K_QKV : k == SLM_HF_ENC_GATE_UP ? K_GATE_UP : K_MAT;
        return r;
    }
    if (fb & B_NOMIC) { /* its own names (hf_nomic.c) */
        int w = 0;
        const int r = slm_hf_nomic_name(hf, fb == 1 << SLM_ARCH_NOMIC_BERT_MOE, out, cap, &w);
        *kind = w == 3 ? K_NOMIC : w == 2 ? K_QKV : w ? K_VEC : K_MAT;
        return r;
    }
    char buf[160];
    if ((fb & B_QWEN35) && slm_hf_q35_skip(hf)) return 2; /* qwen35's vision tower and MTP layer */
    if (multimodal && !(hf = strip_multimodal(hf, buf, sizeof buf))) return 2;
    char pfx[168]; /* Gemma3TextModel (EmbeddingGemma): embed_tokens, layers.N.X, norm without "model." */
    if (fb == 1 << SLM_ARCH_GEMMA_EMBEDDING && strncmp(hf, "model.", 6)) {
        const size_t k = strlen(hf);
        if (k + 7 > sizeof pfx) return 0;
        memcpy(pfx, "model.", 6);
        memcpy(pfx + 6, hf, k + 1);
        hf = pfx;
    }
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(hf, top[i].hf)) {
            *kind = top[i].kind;
            snprintf(out, cap, "%s", top[i].gg);
            return 1;
        }
    long n = 0;
    const char *p = slm_hf_layer(hf, "model.layers.", &n);
    if (!p) return 0;
    if (!strcmp(p, "self_attn.rotary_emb.inv_freq")) return 2; /* recomputed from the config */
    int vec = 0; /* gpt_oss, qwen35: their own layer names (hf_oss.c, hf_qwen35.c), then the shared ones below */
    const int q = fb & B_QWEN35 ? slm_hf_q35_name(p, n, n_experts > 0, reorder, out, cap, &vec) : 0;
    if (q) *kind = q == 4 ? K_Q35 : vec == 2 ? K_NORM : vec ? K_VEC : K_MAT;
    if (q) return 1;
    const int r = fb == B_GPT_OSS ? slm_hf_oss_name(p, n, out, cap, &vec)
                  : n_experts     ? expert_name(p, n, fb, n_experts, out, cap, kind) : 0;
    if (fb == B_GPT_OSS && (r == 1 || r == 4)) *kind = r == 4 ? K_OSS : vec ? K_VEC : K_MAT;
    if (r) return r == 4 ? 1 : r;
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
        if ((layer[i].fams & fb) && !(n_experts && !strncmp(layer[i].hf, "mlp.", 4)) && !strcmp(p, layer[i].hf)) {
            *kind = layer[i].kind;
            snprintf(out, cap, "blk.%ld.%s", n, layer[i].gg);
            return 1;
        }
    return 0;
}

static uint32_t elem_size(uint32_t t) { return t == SLM_F32 ? 4 : 2; }
/* The elements of one row of t when taken by rows: its last dimension's (a vector: 1, its entries are the rows). */
static uint64_t row_elems(const slm_st_tensor *t) { return t->n_dims > 1 ? (uint64_t)t->shape[t->n_dims - 1] : 1; }

/* One tensor of the result, before placing: a whole safetensors tensor or
 * rows [row0, row0 + rows) of a fused one. */
typedef struct pending {
    const slm_st_tensor *src;
    char name[64];    /* GGUF name */
    int shard;
    int convert;      /* 1: to f32 (plus 1 when add_one); 2: copied as is (misaligned) */
    int add_one;      /* gemma's RMSNorm gain: 1 + w */
    int64_t row0, rows; /* rows 0: the whole tensor */
    uint64_t extra_off, extra_bytes;
    slm_hf_made made; /* convert 3: made in the anonymous area (gpt_oss's experts) */
} pending;

static slm_status folder_name(const slm_model_file *m, const char *file, char *out, size_t cap, slm_err *err) {
    int n = snprintf(out, cap, "%s/%s", m->path, file);
    if (n < 0 || (size_t)n >= cap)
        return slm_errf(err, SLM_ERR_ARG, "%s: path too long for '%s'", slm_basename(m->path), file);
    return SLM_OK;
}

/* A shard name from the index: a plain file name inside the folder. */
static int shard_name_ok(const char *s) {
    size_t n = strlen(s);
    return n > 0 && n < 256 && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/* A folder being loaded: what the steps of slm_hf_model_load share. */
typedef struct hf_load {
    slm_model_file *m;
    const char *dir;          /* the folder's base name, for messages */
    char path[1400];          /* scratch: a file in the folder */
    char idx_shown[320];      /* "folder/model.safetensors.index.json" */
    char *idx_json;           /* the index (NULL: one model.safetensors) */
    cJSON *index;
    const cJSON *wm;          /* the index's weight_map */
    shard *sh;
    int n_sh;
    pending *pend;            /* the tensors taken, in shard order */
    int n_pend, cap_pend;
    slm_hf_info info;         /* config.json beyond the config: rope vectors, prefixes, fused, 1 + w */
    int n_rope;               /* rope vectors in info.vecs: rope_freqs (1) or LongRoPE long, short (2) */
    uint64_t extra;           /* bytes of the anonymous area */
    uint64_t rope_off;        /* the rope vectors' place in it */
    uint8_t *ex;              /* the anonymous area, once mapped */
    slm_hf_modules mods;      /* modules.json: the Dense modules, mapped as shards after the model's */
    slm_err *err;
} hf_load;

/* The shards: those model.safetensors.index.json names, else
 * model.safetensors alone. */
static slm_status find_shards(hf_load *L) {
    slm_status s;
    size_t idx_len = 0;
    const char *shown = L->idx_shown;
    snprintf(L->idx_shown, sizeof L->idx_shown, "%s/model.safetensors.index.json", L->dir);
    if ((s = folder_name(L->m, "model.safetensors.index.json", L->path, sizeof L->path, L->err))) return s;
    if ((s = slm_hf_read_small(L->path, shown, 0, &L->idx_json, &idx_len, L->err))) return s;
    if (!L->idx_json) {
        L->sh = slm_calloc(1, sizeof *L->sh);
        if (!L->sh) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory", L->dir);
        snprintf(L->sh[0].file, sizeof L->sh[0].file, "model.safetensors");
        snprintf(L->sh[0].shown, sizeof L->sh[0].shown, "%s/model.safetensors", L->dir);
        L->sh[0].fd = -1;
        L->n_sh = 1;
        if ((s = folder_name(L->m, "model.safetensors", L->path, sizeof L->path, L->err))) return s;
        if (access(L->path, F_OK) != 0)
            return slm_errf(L->err, SLM_ERR_FORMAT, "%s: neither model.safetensors nor model.safetensors.index.json found",
                            L->dir);
        return SLM_OK;
    }
    slm_json_init_hooks();
    slm_json_oom_clear();
    L->index = cJSON_ParseWithLength(L->idx_json, idx_len);
    if (!L->index && slm_json_oom()) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory parsing the JSON", shown);
    if (!L->index || !cJSON_IsObject(L->index)) return slm_errf(L->err, SLM_ERR_FORMAT, "%s: invalid JSON", shown);
    L->wm = cJSON_GetObjectItemCaseSensitive(L->index, "weight_map");
    if (!L->wm || !cJSON_IsObject(L->wm))
        return slm_errf(L->err, SLM_ERR_FORMAT, "%s: missing key 'weight_map' (an object)", shown);
    shard *sh = L->sh = slm_calloc(HF_MAX_SHARDS, sizeof *sh);
    if (!sh) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory", shown);
    for (const cJSON *e = L->wm->child; e; e = e->next) {
        char b1[64], b2[64];
        if (!cJSON_IsString(e) || !e->valuestring || !shard_name_ok(e->valuestring))
            return slm_errf(L->err, SLM_ERR_FORMAT,
                            "%s: key 'weight_map': tensor '%s': expected a file name in the folder", shown,
                            e->string ? pstr(e->string, b1, sizeof b1) : "?");
        int k = 0;
        while (k < L->n_sh && strcmp(sh[k].file, e->valuestring)) k++;
        if (k < L->n_sh) continue;
        if (L->n_sh == HF_MAX_SHARDS)
            return slm_errf(L->err, SLM_ERR_FORMAT, "%s: more than %d shards", shown, HF_MAX_SHARDS);
        shard *d = &sh[L->n_sh++];
        snprintf(d->file, sizeof d->file, "%s", e->valuestring);
        snprintf(d->shown, sizeof d->shown, "%s/%s", L->dir, pstr(e->valuestring, b2, sizeof b2));
        d->fd = -1;
    }
    if (!L->n_sh) return slm_errf(L->err, SLM_ERR_FORMAT, "%s: key 'weight_map' names no tensor", shown);
    return SLM_OK;
}

/* modules.json's Dense modules: each one's model.safetensors a shard after the model's. */
static slm_status dense_shards(hf_load *L) {
    slm_status s = slm_hf_modules_read(L->m->path, L->dir, &L->mods, L->err);
    if (s || !L->mods.n_dense) return s;
    shard *sh = slm_realloc(L->sh, (size_t)(L->n_sh + L->mods.n_dense) * sizeof *sh);
    if (!sh) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory", L->dir);
    L->sh = sh;
    for (int k = 0; k < L->mods.n_dense; k++) {
        shard *d = &sh[L->n_sh++];
        char b[64];
        memset(d, 0, sizeof *d);
        d->fd = -1;
        d->dense = &L->mods.dense[k];
        snprintf(d->file, sizeof d->file, "%s/model.safetensors", d->dense->path);
        snprintf(d->shown, sizeof d->shown, "%s/%s/model.safetensors", L->dir, slm_hf_pstr(d->dense->path, b, sizeof b));
    }
    return SLM_OK;
}

/* Open, map (on its own, for now) and parse each shard; check that every
 * tensor the index names is in its shard. */
static slm_status open_shards(hf_load *L) {
    slm_status s;
    for (int i = 0; i < L->n_sh; i++) {
        shard *d = &L->sh[i];
        if ((s = folder_name(L->m, d->file, L->path, sizeof L->path, L->err))) return s;
        d->fd = open(L->path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (d->fd < 0 || fstat(d->fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
            const char *why = d->fd < 0 ? strerror(errno) : "not a non-empty regular file";
            if (L->idx_json && !d->dense)
                return slm_errf(L->err, SLM_ERR_FORMAT, "%s: key 'weight_map': shard '%s' cannot be opened: %s",
                                L->idx_shown, d->shown, why);
            return slm_errf(L->err, SLM_ERR_IO, "%s: cannot open: %s", d->shown, why);
        }
        d->size = (uint64_t)st.st_size;
        d->tmp = mmap(NULL, (size_t)d->size, PROT_READ, MAP_PRIVATE, d->fd, 0);
        if (d->tmp == MAP_FAILED) {
            d->tmp = NULL;
            return slm_errf(L->err, SLM_ERR_IO, "%s: cannot map: %s", d->shown, strerror(errno));
        }
        if ((s = slm_st_parse(&d->st, d->tmp, d->size, d->shown, L->err))) return s;
    }
    for (const cJSON *e = L->wm ? L->wm->child : NULL; e; e = e->next) {
        int k = 0;
        while (strcmp(L->sh[k].file, e->valuestring)) k++;
        if (!e->string || !slm_st_find(&L->sh[k].st, e->string)) {
            char b[64];
            return slm_errf(L->err, SLM_ERR_FORMAT, "%s: key 'weight_map': tensor '%s' is not in shard %s", L->idx_shown,
                            e->string ? pstr(e->string, b, sizeof b) : "?", L->sh[k].shown);
        }
    }
    return SLM_OK;
}

/* A new entry of the plan: source t of shard i as GGUF name gn. */
static slm_status new_pending(hf_load *L, int i, const slm_st_tensor *t, const char *gn, pending **out) {
    if (L->n_pend == L->cap_pend) {
        int nc = L->cap_pend ? L->cap_pend * 2 : 64;
        pending *np = slm_realloc(L->pend, (size_t)nc * sizeof *np);
        if (!np) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory", L->dir);
        L->pend = np;
        L->cap_pend = nc;
    }
    pending *p = *out = &L->pend[L->n_pend++];
    memset(p, 0, sizeof *p);
    p->src = t;
    p->shard = i;
    snprintf(p->name, sizeof p->name, "%s", gn);
    return SLM_OK;
}

/* Reserve n bytes of the anonymous area for p. */
static slm_status reserve(hf_load *L, pending *p, uint64_t n) {
    char b[112];
    p->extra_bytes = n;
    p->extra_off = L->extra;
    if (!slm_add_ok(L->extra, (n + 63) & ~(uint64_t)63, &L->extra) || n > (1ull << 40))
        return slm_errf(L->err, SLM_ERR_FORMAT, "%s: tensor '%s': too large", L->sh[p->shard].shown,
                        tname(p->src->name, b, sizeof b));
    return SLM_OK;
}

/* Take rows [row0, row0 + rows) of tensor t of shard i (rows 0: all of
 * it) as GGUF name gn, and reserve what it needs in the anonymous area.
 * Only float tensors: U8 ones are gpt_oss's MXFP4 experts (take_made). */
static slm_status take_tensor(hf_load *L, int i, const slm_st_tensor *t, const char *gn, int kind, int64_t row0,
                              int64_t rows) {
    const shard *sh = L->sh;
    char b[112];
    if (t->type != SLM_F32 && t->type != SLM_F16 && t->type != SLM_BF16)
        return slm_errf(L->err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s is not a weight's (F32, F16, BF16; U8 is "
                        "read only as gpt_oss's MXFP4 expert blocks and scales)", sh[i].shown, tname(t->name, b, sizeof b),
                        slm_hf_dtype(t->type));
    pending *p = NULL;
    slm_status s;
    if ((s = new_pending(L, i, t, gn, &p))) return s;
    p->row0 = row0;
    p->rows = rows;
    uint64_t addr_off = sh[i].st.data_start + t->begin, nbytes = t->end - t->begin;
    if (rows) nbytes = row_elems(t) * elem_size(t->type) * (uint64_t)rows; /* rows of the last dim */
    p->add_one = kind == K_NORM && L->info.norm_plus_one;
    if ((kind == K_VEC || kind == K_NORM) && (t->type != SLM_F32 || p->add_one))
        p->convert = 1, nbytes = t->type == SLM_F32 ? nbytes : nbytes / 2 * 4;
    else if (addr_off % elem_size(t->type)) p->convert = 2;
    return p->convert ? reserve(L, p, nbytes) : SLM_OK;
}

/* gpt_oss's planner (hf_oss.c): a tensor by HF name in any shard, and a
 * tensor made in the anonymous area. */
static const slm_st_tensor *find_any(void *ctx, const char *hf_name, const char **shown) {
    const hf_load *L = ctx;
    for (int i = 0; i < L->n_sh; i++) {
        const slm_st_tensor *t = slm_st_find(&L->sh[i].st, hf_name);
        if (t) {
            *shown = L->sh[i].shown;
            return t;
        }
    }
    return NULL;
}

/* nomic_bert's planner (hf_nomic.c): rows of a tensor, no copy. */
static slm_status take_row_range(void *ctx, int i, const slm_st_tensor *t, const char *gn, int vec, int64_t row0, int64_t rows) {
    return take_tensor(ctx, i, t, gn, vec ? K_VEC : K_MAT, row0, rows);
}

static slm_status take_made(void *ctx, int i, const char *gn, const slm_hf_made *mk) {
    hf_load *L = ctx;
    pending *p = NULL;
    slm_status s = new_pending(L, i, mk->src, gn, &p);
    if (s) return s;
    p->convert = 3;
    p->made = *mk;
    return reserve(L, p, mk->nbytes);
}

/* phi3's fused matrices as row ranges: qkv_proj -> attn_q, attn_k, attn_v
 * (Q rows, then K, then V; nomic_bert's Wqkv and its bias the same);
 * gate_up_proj -> ffn_gate, ffn_up (gate rows first), as transformers' Phi3
 * splits them. gn is the first part's name. */
static slm_status take_fused(hf_load *L, int i, const slm_st_tensor *t, const char *gn, int kind) {
    const slm_model_config *c = &L->m->cfg;
    const int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim,
                  F = c->hidden_dim;
    const int64_t want = kind == K_QKV ? qd + 2 * kvd : 2 * F;
    char b[64];
    const int vec = kind == K_QKV && t->n_dims == 1; /* a fused bias */
    if ((t->n_dims != 2 && !vec) || t->shape[0] != want)
        return slm_errf(L->err, SLM_ERR_FORMAT, "%s: tensor '%s': %lld rows, the config needs %lld (%s)",
                        L->sh[i].shown, pstr(t->name, b, sizeof b), (long long)(t->n_dims ? t->shape[0] : 0),
                        (long long)want, kind == K_QKV ? "q + k + v" : "2 x intermediate_size");
    char name[64];
    int l = atoi(gn + 4); /* "blk.N." */
    slm_status s;
    if (kind == K_QKV) {
        const int k = vec ? K_VEC : K_MAT;
        const char *what = vec ? "bias" : "weight";
        if (!vec) L->m->qkv_fused = 1;
        snprintf(name, sizeof name, "blk.%d.attn_k.%s", l, what);
        if ((s = take_tensor(L, i, t, gn, k, 0, qd)) || (s = take_tensor(L, i, t, name, k, qd, kvd))) return s;
        snprintf(name, sizeof name, "blk.%d.attn_v.%s", l, what);
        return take_tensor(L, i, t, name, k, qd + kvd, kvd);
    }
    snprintf(name, sizeof name, "blk.%d.ffn_up.weight", l);
    if ((s = take_tensor(L, i, t, gn, K_MAT, 0, F))) return s;
    return take_tensor(L, i, t, name, K_MAT, F, F);
}

/* transformers v5's fused experts as row ranges of the same bytes (no
 * copy): gate_up_proj [E, 2F, D] holds expert e's gate in rows
 * [2eF, 2eF + F) of its E * 2F rows and its up in the next F (Qwen3MoeExperts,
 * MixtralExperts and OlmoeExperts chunk them so); down_proj [E, D, F] its down
 * in rows [eD, eD + D). gn is expert 0's name. */
static slm_status take_experts(hf_load *L, int i, const slm_st_tensor *t, const char *gn, int kind) {
    const slm_model_config *c = &L->m->cfg;
    const int gu = kind == K_EXPS_GATE_UP;
    const int64_t E = c->n_experts, F = c->hidden_dim, out = gu ? 2 * F : c->dim, in = gu ? c->dim : F;
    char b[112];
    if (t->n_dims != 3 || t->shape[0] != E || t->shape[1] != out || t->shape[2] != in) {
        const int transposed = t->n_dims == 3 && t->shape[0] == E && t->shape[1] == in && t->shape[2] == out;
        char sh[96];
        slm_fmt_shape(sh, sizeof sh, t->shape, t->n_dims);
        return slm_errf(L->err, transposed ? SLM_ERR_UNSUPPORTED : SLM_ERR_FORMAT, "%s: tensor '%s': shape %s, the "
                        "config needs [%lld, %lld, %lld] (experts, %s, %s)%s", L->sh[i].shown, tname(t->name, b, sizeof b),
                        sh, (long long)E, (long long)out, (long long)in, gu ? "2 x width" : "hidden", gu ? "hidden" : "width",
                        transposed ? ": experts stored transposed ([experts, in, out]) are not supported" : "");
    }
    const int l = atoi(gn + 4); /* "blk.N." */
    char name[64];
    slm_status s;
    for (int64_t e = 0; e < E; e++) {
        snprintf(name, sizeof name, "blk.%d.ffn_%s.%lld.weight", l, gu ? "gate" : "down", (long long)e);
        if ((s = take_tensor(L, i, t, name, K_MAT, e * out, gu ? F : out))) return s;
        if (!gu) continue;
        snprintf(name, sizeof name, "blk.%d.ffn_up.%lld.weight", l, (long long)e);
        if ((s = take_tensor(L, i, t, name, K_MAT, e * out + F, F))) return s;
    }
    return SLM_OK;
}

static int cmp_pending(const void *a, const void *b) {
    const pending *x = *(const pending *const *)a, *y = *(const pending *const *)b;
    const int c = strcmp(x->name, y->name);
    return c ? c : (x > y) - (x < y);
}

/* The same GGUF name twice (a tensor in two shards; an expert both alone and
 * in v5's fused tensor; mixtral's router under both names), refused naming
 * both. Sorted, O(n log n): a 128-expert, 48-layer model has 18432 expert
 * matrices. */
static slm_status check_twice(hf_load *L) {
    const pending **ix = slm_malloc(sizeof *ix * (size_t)(L->n_pend ? L->n_pend : 1));
    if (!ix) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory", L->dir);
    for (int k = 0; k < L->n_pend; k++) ix[k] = &L->pend[k];
    qsort(ix, (size_t)L->n_pend, sizeof *ix, cmp_pending);
    slm_status s = SLM_OK;
    for (int k = 0; k + 1 < L->n_pend && !s; k++) {
        const pending *a = ix[k], *b = ix[k + 1]; /* a: the earlier */
        if (strcmp(a->name, b->name)) continue;
        char b1[112], b2[112];
        if (!strcmp(a->src->name, b->src->name))
            s = slm_errf(L->err, SLM_ERR_FORMAT, "%s: tensor '%s' is also in %s", L->sh[b->shard].shown,
                         tname(b->src->name, b1, sizeof b1), L->sh[a->shard].shown);
        else
            s = slm_errf(L->err, SLM_ERR_FORMAT, "%s: tensor '%s' gives '%s', as does tensor '%s' of %s",
                         L->sh[b->shard].shown, tname(b->src->name, b1, sizeof b1), b->name,
                         tname(a->src->name, b2, sizeof b2), L->sh[a->shard].shown);
    }
    slm_xfree(ix);
    return s;
}

/* The tensors we take (GGUF names), and what the anonymous area must hold. */
static slm_status plan_tensors(hf_load *L) {
    slm_status s;
    const int fb = fam_bit(L->m->cfg.arch);
    const slm_hf_oss_io io = {L, find_any, take_made, take_row_range};
    for (int i = 0; i < L->n_sh; i++)
        for (int j = 0; j < L->sh[i].st.n_tensors; j++) {
            const slm_st_tensor *t = &L->sh[i].st.tensors[j];
            char gn[64], b[112];
            const int E = L->m->cfg.n_experts;
            const int reorder = L->m->cfg.ssm_v_heads > L->m->cfg.ssm_k_heads;
            int kind = K_MAT, vec = 0, r;
            if (L->sh[i].dense) { /* a Dense module's linear.weight, linear.bias (hf_modules.c) */
                if (!slm_hf_dense_name(L->sh[i].dense, t->name, gn, sizeof gn, &vec))
                    return slm_errf(L->err, SLM_ERR_FORMAT, "%s: tensor '%s': not a Dense module's (linear.weight, "
                                    "linear.bias)", L->sh[i].shown, tname(t->name, b, sizeof b));
                if ((s = take_tensor(L, i, t, gn, vec ? K_VEC : K_MAT, 0, 0))) return s;
                continue;
            }
            r = gguf_name(t->name, fb, &L->info, E, reorder, gn, sizeof gn, &kind);
            if (r == 2) continue;
            if (r == 3)
                return slm_errf(L->err, SLM_ERR_FORMAT, "%s: tensor '%s': an expert beyond the %d experts config.json "
                                "gives", L->sh[i].shown, tname(t->name, b, sizeof b), E);
            if (r == 0)
                return slm_errf(L->err, SLM_ERR_UNSUPPORTED, "%s: tensor '%s': not part of a %s model that staticlm runs",
                                L->sh[i].shown, tname(t->name, b, sizeof b), L->m->cfg.arch);
            if (!strcmp(gn, "output.weight") && L->m->cfg.tied_embeddings) continue; /* tie_word_embeddings */
            if (kind == K_QKV || kind == K_GATE_UP) s = take_fused(L, i, t, gn, kind);
            else if (kind == K_EXPS_GATE_UP || kind == K_EXPS_DOWN) s = take_experts(L, i, t, gn, kind);
            else if (kind == K_OSS) s = slm_hf_oss_plan(&io, i, L->sh[i].shown, t, gn, &L->m->cfg, L->err);
            else if (kind == K_Q35) s = slm_hf_q35_plan(&io, i, L->sh[i].shown, t, gn, &L->m->cfg, L->err);
            else if (kind == K_NOMIC) s = slm_hf_nomic_plan(&io, i, L->sh[i].shown, t, gn, &L->m->cfg, L->err);
            else if (L->info.pos_offset && !strcmp(gn, "position_embd.weight")) { /* xlm-roberta: rows cut */
                int64_t r0 = 0, rows = 0;
                s = slm_hf_bert_positions(&L->info, &L->m->cfg, t, L->sh[i].shown, &r0, &rows, L->err);
                if (!s) s = take_tensor(L, i, t, gn, kind, r0, rows);
            } else s = take_tensor(L, i, t, gn, kind, 0, 0);
            if (s) return s;
        }
    if ((s = check_twice(L))) return s;
    L->n_rope = L->m->cfg.rope_freqs ? 1 : L->m->cfg.rope_long ? 2 : 0;
    L->rope_off = L->extra;
    if (L->n_rope) L->extra += (uint64_t)L->info.n_vecs * 4;
    return SLM_OK;
}

/* One range: the shards mapped again side by side, then the anonymous
 * area (L->ex, writable until fill_tensors is done). */
static slm_status map_range(hf_load *L) {
    const long page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    shard *sh = L->sh;
    uint64_t total = 0, pg = (uint64_t)page;
    for (int i = 0; i < L->n_sh; i++) {
        sh[i].off = total;
        if (!slm_add_ok(total, (sh[i].size + pg - 1) / pg * pg, &total))
            return slm_errf(L->err, SLM_ERR_FORMAT, "%s: shards too large", L->dir);
    }
    const uint64_t extra_at = total, extra_mapped = (L->extra + pg - 1) / pg * pg;
    if (!slm_add_ok(total, extra_mapped, &total) || total > SIZE_MAX / 2)
        return slm_errf(L->err, SLM_ERR_FORMAT, "%s: shards too large", L->dir);
    void *base = mmap(NULL, (size_t)total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return slm_errf(L->err, SLM_ERR_IO, "%s: cannot reserve %llu bytes of address space: %s", L->dir,
                        (unsigned long long)total, strerror(errno));
    L->m->map.data = base; /* from here on slm_unmap (slm_model_close) releases it all */
    L->m->map.size = total;
    uint8_t *b8 = base;
    for (int i = 0; i < L->n_sh; i++) {
        void *p = mmap(b8 + sh[i].off, (size_t)sh[i].size, PROT_READ, MAP_PRIVATE | MAP_FIXED, sh[i].fd, 0);
        if (p == MAP_FAILED) return slm_errf(L->err, SLM_ERR_IO, "%s: cannot map: %s", sh[i].shown, strerror(errno));
        slm_st_rebase(&sh[i].st, p);
        munmap(sh[i].tmp, (size_t)sh[i].size);
        sh[i].tmp = NULL;
    }
    L->ex = b8 + extra_at;
    if (extra_mapped &&
        mmap(L->ex, (size_t)extra_mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
            MAP_FAILED)
        return slm_errf(L->err, SLM_ERR_IO, "%s: cannot map %llu bytes: %s", L->dir, (unsigned long long)extra_mapped,
                        strerror(errno));
    return SLM_OK;
}

/* A tensor of the result from its plan: converted into the anonymous area
 * (ex) when it must be. */
static void fill_one(slm_tensor *o, const pending *p, uint8_t *ex) {
    const slm_st_tensor *t = p->src;
    memcpy(o->name, p->name, sizeof o->name);
    o->type = t->type;
    o->n_dims = t->n_dims ? t->n_dims : 1;
    for (int d = 0; d < 4; d++) o->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) o->ne[d] = t->shape[t->n_dims - 1 - d];
    o->data = t->data;
    o->nbytes = t->end - t->begin;
    if (p->convert == 3) { /* gpt_oss's experts: made here by hf_oss.c */
        const slm_hf_made *mk = &p->made;
        o->type = mk->type;
        o->n_dims = mk->n_dims;
        o->ne[0] = mk->ne0;
        o->ne[1] = mk->ne1;
        o->ne[2] = o->ne[3] = 1;
        o->data = ex + p->extra_off;
        o->nbytes = mk->nbytes;
        slm_hf_make(mk, ex + p->extra_off);
        return;
    }
    if (p->rows) { /* a part of a fused matrix: rows of its last dimension (3-D experts: over the first two; a vector: entries) */
        const uint64_t rb = row_elems(t) * elem_size(t->type);
        o->n_dims = t->n_dims > 1 ? 2 : 1;
        o->ne[0] = t->n_dims > 1 ? (int64_t)row_elems(t) : p->rows;
        o->ne[1] = t->n_dims > 1 ? p->rows : 1;
        o->ne[2] = o->ne[3] = 1;
        o->data = (const uint8_t *)t->data + (uint64_t)p->row0 * rb;
        o->nbytes = (uint64_t)p->rows * rb;
    }
    if (p->convert == 1) {
        float *f = (float *)(ex + p->extra_off);
        const float one = p->add_one ? 1.0f : 0.0f;
        uint64_t n = o->nbytes / elem_size(t->type);
        const uint8_t *src = o->data;
        for (uint64_t k = 0; k < n; k++) {
            if (t->type == SLM_F32) {
                float v;
                memcpy(&v, src + 4 * k, 4);
                f[k] = v + one;
                continue;
            }
            uint16_t h = (uint16_t)(src[2 * k] | src[2 * k + 1] << 8);
            f[k] = (t->type == SLM_BF16 ? slm_bf16_to_f32(h) : slm_f16_to_f32(h)) + one;
        }
        o->type = SLM_F32;
        o->data = f;
        o->nbytes = n * 4;
    } else if (p->convert == 2) {
        memcpy(ex + p->extra_off, o->data, (size_t)o->nbytes);
        o->data = ex + p->extra_off;
    }
}

/* m->tensors from the plan, converting into the anonymous area, then the
 * rope vectors (rope_freqs.weight, or rope_factors_long / _short.weight);
 * then the area becomes read-only. */
static slm_status fill_tensors(hf_load *L) {
    slm_model_file *m = L->m;
    uint8_t *ex = L->ex;
    int n_t = L->n_pend + L->n_rope;
    m->tensors = slm_calloc(n_t ? (size_t)n_t : 1, sizeof *m->tensors);
    if (!m->tensors) return slm_errf(L->err, SLM_ERR_NOMEM, "%s: out of memory for %d tensors", L->dir, n_t);
    for (int i = 0; i < L->n_pend; i++) fill_one(&m->tensors[i], &L->pend[i], ex);
    for (int j = 0; j < L->n_rope; j++) {
        slm_tensor *o = &m->tensors[L->n_pend + j];
        const int n = L->info.n_vecs / L->n_rope;
        snprintf(o->name, sizeof o->name, "%s",
                 L->n_rope == 1 ? "rope_freqs.weight" : j ? "rope_factors_short.weight" : "rope_factors_long.weight");
        o->type = SLM_F32;
        o->n_dims = 1;
        o->ne[0] = n;
        o->ne[1] = o->ne[2] = o->ne[3] = 1;
        o->nbytes = (uint64_t)n * 4;
        memcpy(ex + L->rope_off + o->nbytes * (uint64_t)j, L->info.vecs + (size_t)n * (size_t)j, (size_t)o->nbytes);
        o->data = ex + L->rope_off + o->nbytes * (uint64_t)j;
    }
    m->n_tensors = n_t;
    const long page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    const uint64_t pg = (uint64_t)page, extra_mapped = (L->extra + pg - 1) / pg * pg;
    if (extra_mapped) mprotect(ex, (size_t)extra_mapped, PROT_READ);
    return SLM_OK;
}

/* vocab_size absent (gemma3's text_config): the embedding's rows. */
static slm_status vocab_from_embed(hf_load *L) {
    const slm_tensor *e = slm_model_tensor(L->m, "token_embd.weight");
    if (!e)
        return slm_errf(L->err, SLM_ERR_FORMAT, "%s: no 'vocab_size' in config.json and no 'model.embed_tokens.weight'",
                        L->dir);
    if (e->n_dims != 2 || e->ne[1] < 1 || e->ne[1] > (1 << 24))
        return slm_errf(L->err, SLM_ERR_FORMAT, "%s: tensor 'model.embed_tokens.weight': %lld rows (no 'vocab_size' in "
                        "config.json to check it)", L->dir, (long long)e->ne[1]);
    L->m->cfg.vocab_size = (int)e->ne[1];
    return SLM_OK;
}

slm_status slm_hf_model_load(slm_model_file *m, slm_err *err) {
    /* "dir/" -> "dir" so that messages name the folder */
    size_t pl = strlen(m->path);
    while (pl > 1 && m->path[pl - 1] == '/') m->path[--pl] = 0;
    hf_load load, *L = &load;
    memset(L, 0, sizeof *L);
    L->m = m;
    L->dir = slm_basename(m->path);
    L->err = err;
    slm_status s;
    char shown[320], *cfg_json = NULL;
    size_t cfg_len = 0;

    snprintf(shown, sizeof shown, "%s/config.json", L->dir);
    if ((s = folder_name(m, "config.json", L->path, sizeof L->path, err))) goto out;
    if ((s = slm_hf_read_small(L->path, shown, 1, &cfg_json, &cfg_len, err))) goto out;
    if ((s = slm_hf_config(&m->cfg, &L->info, cfg_json, cfg_len, shown, err))) goto out;
    if ((s = find_shards(L)) || (s = dense_shards(L)) || (s = open_shards(L)) || (s = plan_tensors(L)) || (s = map_range(L)) ||
        (s = fill_tensors(L)))
        goto out;
    if (L->info.vocab_from_embed && (s = vocab_from_embed(L))) goto out;
    if (!strcmp(m->cfg.arch, "gemma4") && (s = slm_hf_gemma4_finish(m, &L->info, L->dir, err))) goto out;
    if (slm_encoder_graph(&m->cfg) && (s = slm_hf_bert_finish(m, &L->info, L->dir, err))) goto out;
    if ((fam_bit(m->cfg.arch) & B_NOMIC) && (s = slm_hf_nomic_finish(m, &L->info, L->dir, err))) goto out;
    if (!strcmp(m->cfg.arch, "modern-bert") && (s = slm_hf_modernbert_finish(m, &L->info, L->dir, err))) goto out;
    if ((s = slm_hf_dense_finish(m, &L->mods, L->dir, err))) goto out;
    if ((s = folder_name(m, "generation_config.json", L->path, sizeof L->path, err)) ||
        (s = slm_hf_generation_meta(m, L->path, L->dir, err)))
        goto out;

    /* no lm_head: tied (an encoder has none: its bias tensors speak for themselves, as in its GGUF;
     * gemma-embedding's is the tied embedding, as in its GGUF, dropped by the embed programs) */
    if (!slm_encoder_graph(&m->cfg) && !slm_model_tensor(m, "output.weight")) m->cfg.tied_embeddings = 1;
    /* Q/K/V biases on a llama/mistral checkpoint are used too */
    if (!m->cfg.encoder && slm_model_tensor(m, "blk.0.attn_q.bias")) m->cfg.qkv_bias = 1;
    /* tokenizer.json beside, for the pipeline; a BERT folder without one: its vocab.txt */
    for (int k = 0; k < 1 + slm_encoder_graph(&m->cfg) && !m->tokenizer_json[0]; k++)
        if (folder_name(m, k ? "vocab.txt" : "tokenizer.json", L->path, sizeof L->path, NULL) == SLM_OK &&
            strlen(L->path) < sizeof m->tokenizer_json) {
            struct stat st;
            if (stat(L->path, &st) == 0 && S_ISREG(st.st_mode)) memcpy(m->tokenizer_json, L->path, strlen(L->path) + 1);
        }
    m->kind = SLM_MODEL_HF;
    m->tok_unigram = L->info.xlmr;

out:
    for (int i = 0; L->sh && i < L->n_sh; i++) {
        if (L->sh[i].tmp) munmap(L->sh[i].tmp, (size_t)L->sh[i].size);
        if (L->sh[i].fd >= 0) close(L->sh[i].fd);
        slm_st_free(&L->sh[i].st);
    }
    slm_xfree(L->sh);
    slm_xfree(L->pend);
    slm_xfree(L->info.vecs);
    slm_xfree(L->idx_json);
    cJSON_Delete(L->index);
    slm_xfree(cfg_json);
    return s;
}

#endif
