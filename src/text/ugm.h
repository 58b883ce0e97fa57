/* Unigram (SentencePiece "unigram" model) tokenizer of GGUF vocabularies
 * with tokenizer.ggml.model = "t5" (XLM-RoBERTa and T5 families), encoding
 * exactly as llama.cpp's UGM tokenizer does.
 *
 * Encoding a text:
 *  1. special tokens are split out first (st_partition.h, as for WordPiece):
 *     user-defined tokens always, control and unknown ones with
 *     parse_special (and not on bytes marked plain);
 *  2. each text fragment is normalized: at each position, the longest
 *     prefix that walks the user-defined tokens' trie (a prefix of some
 *     user-defined token, llama.cpp's get_longest_prefix) is copied as it
 *     is; else the longest prefix the precompiled charsmap (SentencePiece's
 *     normalizer: a double-array trie and NUL-terminated replacement
 *     strings) maps is replaced; else a valid UTF-8 sequence is copied and
 *     an invalid byte becomes U+FFFD. In the result every ' ' becomes U+2581;
 *     with add_space_prefix the first run of non-spaces gets a U+2581 before
 *     it; with remove_extra_whitespaces spaces are dropped and every run of
 *     non-spaces gets one U+2581 before it instead;
 *  3. the best segmentation of the normalized fragment (Viterbi over code
 *     point positions, scores summed in double): normal, unused and
 *     user-defined tokens (those score 0) match, a code point no token
 *     covers alone costs the unknown score (the lowest normal score - 10)
 *     and yields the unknown token; consecutive unknown tokens are merged
 *     into one.
 * BOS / EOS are added when asked and the vocabulary's add_bos / add_eos
 * (tokenizer.ggml.add_bos_token / add_eos_token; defaults false / true, as
 * llama.cpp's) are set.
 */
#ifndef SLM_UGM_H
#define SLM_UGM_H

#include "common/common.h"
#include "format/gguf.h"

typedef struct slm_ugm slm_ugm;

/* The special ids (-1: none) and flags a vocabulary carries. */
typedef struct slm_ugm_meta {
    int bos, eos, unk, pad, sep; /* unk is required */
    int add_space_prefix;        /* tokenizer.ggml.add_space_prefix (default 0) */
    int remove_extra_ws;         /* tokenizer.ggml.remove_extra_whitespaces (default 0) */
    int add_bos, add_eos;        /* tokenizer.ggml.add_bos_token / add_eos_token (0 / 1) */
} slm_ugm_meta;

/* The vocabulary of a GGUF with tokenizer.ggml.model = "t5": tokens, scores,
 * token_type, precompiled_charsmap (u8 or i8 array, optional), the flags
 * above, and bos/eos/unknown/padding/seperator ids (llama.cpp's defaults:
 * none, 1, 2, 0, none; a default outside the vocabulary is none). An empty
 * spelling becomes "[EMPTY_<id>]"; two tokens spelled the same are refused;
 * a malformed charsmap is refused naming the field. */
slm_status slm_ugm_load_gguf(slm_ugm **out, const slm_gguf *g, const char *name, slm_err *err);
/* A vocabulary from parts (copied): n spellings tok[i] of len[i] bytes (an
 * empty one becomes "[EMPTY_<id>]"), score[i], GGUF type[i] (0..6), meta,
 * and the charsmap (NULL/0: none). field names the charsmap in messages. */
slm_status slm_ugm_build(slm_ugm **out, const char *const *tok, const uint32_t *len, const float *score,
                         const uint8_t *type, int n, const slm_ugm_meta *meta, const uint8_t *charsmap,
                         size_t charsmap_len, const char *name, const char *field, slm_err *err);
void slm_ugm_free(slm_ugm *u);

/* A Hugging Face folder's Unigram tokenizer (text/ugm_hf.c), in the GGUF
 * form llama.cpp's converter writes for XLM-RoBERTa, so that it encodes as
 * a GGUF of the same folder does:
 *  - tokenizer.json: model.type "Unigram" (vocab [[piece, score], ...],
 *    unk_id required, byte_fallback false), added_tokens (ids of the
 *    vocabulary: special -> control, else user-defined), normalizer
 *    Precompiled (precompiled_charsmap: base64 of SentencePiece's charsmap,
 *    checked as a GGUF's) alone or in a Sequence with a Replace of runs of
 *    spaces (Regex " {2,}") and a right Strip, or none; pre_tokenizer
 *    Metaspace (U+2581; prepend_scheme always / never or add_prefix_space:
 *    add_space_prefix); post_processor TemplateProcessing ([special] $A
 *    [special]: BOS / EOS and add_bos / add_eos; a pair A s1 s2 B: s2 the
 *    separator, add_sep), RobertaProcessing (cls, sep; all three added) or
 *    none. Anything else is refused naming the field.
 *  - tokenizer_config.json (config_json, NULL: none): the bos / eos / sep /
 *    pad tokens the template does not give (cls_token for bos, sep_token
 *    for eos), add_bos_token / add_eos_token, and
 *    clean_up_tokenization_spaces: remove_extra_whitespaces, as the
 *    converter sets it (absent: 1 when the normalizer collapses spaces).
 * Ids below n_vocab (config.json's vocab_size; 0: none) that the model has
 * not are unused "[PAD<id>]" (score -10000). info (may be NULL) receives
 * add_sep, and wordpiece = 1 when model.type is "WordPiece", bpe = 1 when
 * it is "BPE" (refused here: the caller may read it as such). */
typedef struct slm_ugm_hf {
    int add_sep;   /* the pair template separates A and B by two tokens (<s> A </s></s> B </s>) */
    int wordpiece; /* model.type is WordPiece */
    int bpe;       /* model.type is BPE (refused here too) */
} slm_ugm_hf;
slm_status slm_ugm_load_hf_json_mem(slm_ugm **out, const char *json, size_t len, const char *config_json,
                                    size_t config_len, int n_vocab, const char *name, slm_ugm_hf *info, slm_err *err);
/* path: a folder's tokenizer.json (tokenizer_config.json beside it read
 * when there); sentencepiece.bpe.model is refused, naming it. */
slm_status slm_ugm_load_hf(slm_ugm **out, const char *path, int n_vocab, slm_ugm_hf *info, slm_err *err);
/* Strict base64 (standard alphabet, '=' padding, length a multiple of 4):
 * decodes s[0..n) into out (NULL: only counts) and returns the bytes;
 * *bad is SIZE_MAX, or the offset of the first invalid character (n: the
 * length is not a multiple of 4), and then 0 is returned. */
size_t slm_b64_decode(const char *s, size_t n, uint8_t *out, size_t *bad);

/* Serialized form (the caller frames it with its magic): slm_ugm_serialize
 * writes it into buf when cap is large enough and returns its size either
 * way; slm_ugm_load_mem validates every length, id and the charsmap. */
size_t slm_ugm_serialize(const slm_ugm *u, uint8_t *buf, size_t cap);
slm_status slm_ugm_load_mem(slm_ugm **out, const void *data, size_t size, const char *name, slm_err *err);

int slm_ugm_vocab_size(const slm_ugm *u);
const slm_ugm_meta *slm_ugm_get_meta(const slm_ugm *u);
int slm_ugm_type(const slm_ugm *u, int id);
float slm_ugm_score(const slm_ugm *u, int id);
/* The piece of id as llama.cpp's token_to_piece (special on) gives it: a
 * normal token with U+2581 turned into " ", unknown / control /
 * user-defined tokens as spelled, a byte token "<0xXX>" its byte, unused
 * and undefined ones "". *len: its length (a byte piece may be NUL). */
const char *slm_ugm_piece(const slm_ugm *u, int id, size_t *len);
/* The spelling of id with U+2581 turned into " " (all types). */
const char *slm_ugm_str(const slm_ugm *u, int id);

/* Encode text[0..n): add_bos / add_eos add BOS / EOS where the vocabulary's
 * flags ask for them; parse_special and plain (NULL: none; else a flag per
 * byte) as above. Writes at most cap ids and returns the total count, or an
 * SLM_TOK_E* code (text/bpe.h): SLM_TOK_EBUDGET when the search takes more
 * than 256 trie steps per byte or normalization grows the text more than
 * 64-fold (only a hostile vocabulary gets near either). */
int slm_ugm_encode(const slm_ugm *u, const char *text, size_t n, const uint8_t *plain, int add_bos, int add_eos,
                   int parse_special, int32_t *ids, int cap);

#endif
