/* WordPiece tokenizer of BERT-family vocabularies (GGUF tokenizer.ggml.model
 * = "bert"), encoding exactly as llama.cpp's WPM tokenizer does.
 *
 * The vocabulary is stored as llama.cpp's converter writes it: a word-start
 * piece "foo" as "\u2581foo", a continuation "##bar" as "bar", bracketed
 * specials ([CLS], [SEP], [UNK], ...) as they are. Every token of any type is
 * a lookup key; two tokens spelled the same are refused (llama.cpp's loader
 * asserts against them).
 *
 * Encoding a text:
 *  1. special tokens are split out first (llama.cpp's tokenizer_st_partition:
 *     longest token first, each splitting every remaining text fragment at
 *     every occurrence): user-defined tokens always, control and unknown ones
 *     when parse_special is set (and not on bytes marked plain);
 *  2. each text fragment is decoded from UTF-8 (a bad byte is U+FFFD and is
 *     dropped) and, with strip_accents, every code point is replaced by the
 *     first code point of its canonical decomposition (so é -> e); then per
 *     code point: whitespace ends a word; NUL, U+FFFD and controls (Cc, Cf,
 *     Co, Cs) are dropped; with strip_accents marks (Mn, Mc, Me) are dropped;
 *     the rest is lowercased (simple mapping, with lowercase) and either
 *     appended to the word or, for punctuation (P*), ASCII symbols (S* below
 *     0x7F) and CJK ideographs, made a word of its own;
 *  3. each word gets "\u2581" in front and is split greedily, longest token
 *     first, from its start; a word with an unmatchable rest is one [UNK].
 * No word spans two fragments. lowercase (tokenizer.ggml.normalizer.lowercase)
 * defaults to 1, strip_accents (…normalizer.strip_accents) to lowercase.
 * Special-token lstrip/rstrip (llama.cpp sets them for a few named models
 * only) are not applied.
 */
#ifndef SLM_WPM_H
#define SLM_WPM_H

#include "common/common.h"
#include "format/gguf.h"

typedef struct slm_wpm slm_wpm;

/* The vocabulary of a GGUF file with tokenizer.ggml.model = "bert". Special
 * ids as llama.cpp reads them: tokenizer.ggml.bos_token_id ([CLS], default
 * 101), unknown_token_id (default 100), seperator_token_id ([SEP], default
 * 102); eos_token_id when present, else [SEP]. A default outside the
 * vocabulary is an error naming the key. */
slm_status slm_wpm_load_gguf(slm_wpm **out, const slm_gguf *g, const char *name, slm_err *err);
void slm_wpm_free(slm_wpm *w);
/* A vocabulary from n spellings in the GGUF form above (tok[i], len[i]
 * bytes; copied) with their GGUF token types; special: the cls, sep, unk
 * and eos ids (each below n); the normalizer flags. An empty spelling
 * becomes "[EMPTY_<id>]" as from a GGUF. (text/wpm_hf.c's loaders.) */
slm_status slm_wpm_build(slm_wpm **out, const char *const *tok, const uint32_t *len, const uint8_t *type, int n,
                         const int special[4], int lowercase, int strip_accents, const char *name, slm_err *err);

/* A Hugging Face folder's WordPiece vocabulary (text/wpm_hf.c), in the
 * GGUF form llama.cpp's converter writes, so that it encodes as a GGUF of
 * the same folder does:
 *  - tokenizer.json with model.type "WordPiece" (vocab {token: id},
 *    unk_token, continuing_subword_prefix "##"; max_input_chars_per_word is
 *    accepted and, as in llama.cpp, not applied: a longer word is split, not
 *    [UNK]), added_tokens (special: control, else user-defined), normalizer
 *    BertNormalizer (lowercase; strip_accents, null: as lowercase;
 *    clean_text and handle_chinese_chars true, as wpm.c always does),
 *    pre_tokenizer BertPreTokenizer, post_processor TemplateProcessing
 *    ([CLS] $A [SEP]: its first and last special tokens) or BertProcessing
 *    (cls, sep) or none ([CLS] and [SEP] by name). Anything else is refused
 *    naming the field.
 *  - vocab.txt: one token a line (id = line number, "\n" ends a line);
 *    [PAD], [UNK], [CLS], [SEP], [MASK] (or the names tokenizer_config.json
 *    gives: pad_token, ...) control tokens; its do_lower_case (default true)
 *    and strip_accents (default: as do_lower_case).
 * Ids missing below n_vocab (config.json's vocab_size; 0: none) are unused
 * tokens "[PAD<id>]", as the converter pads. A word-start token "foo"
 * becomes "\u2581foo", a continuation "##bar" "bar", a control token stays
 * as it is. config_json: tokenizer_config.json's text beside (NULL: none). */
slm_status slm_wpm_load_hf_json_mem(slm_wpm **out, const char *json, size_t len, int n_vocab, const char *name,
                                    slm_err *err);
slm_status slm_wpm_load_vocab_txt_mem(slm_wpm **out, const char *txt, size_t len, const char *config_json,
                                      size_t config_len, int n_vocab, const char *name, slm_err *err);
/* path: a folder's tokenizer.json, or its vocab.txt (by the file name),
 * with tokenizer_config.json beside it read for vocab.txt. */
slm_status slm_wpm_load_hf(slm_wpm **out, const char *path, int n_vocab, slm_err *err);

/* Serialized form (no magic of its own; the caller frames it): *
 * slm_wpm_serialize writes it into buf when cap is large enough and returns
 * its size either way. slm_wpm_load_mem validates every length and id. */
size_t slm_wpm_serialize(const slm_wpm *w, uint8_t *buf, size_t cap);
slm_status slm_wpm_load_mem(slm_wpm **out, const void *data, size_t size, const char *name, slm_err *err);

int slm_wpm_vocab_size(const slm_wpm *w);
int slm_wpm_cls(const slm_wpm *w);
int slm_wpm_sep(const slm_wpm *w);
int slm_wpm_unk(const slm_wpm *w);
int slm_wpm_eos(const slm_wpm *w);
/* GGUF token type of id (1 normal, 2 unknown, 3 control, 4 user-defined, ...). */
int slm_wpm_type(const slm_wpm *w, int id);
/* The text of id as llama.cpp's token_to_piece (with special) gives it:
 * a normal token with every U+2581 turned into " ", unknown, control and
 * user-defined tokens as they are, other types "". */
const char *slm_wpm_piece(const slm_wpm *w, int id);
/* The vocabulary string of id with U+2581 turned into " " (all types). */
const char *slm_wpm_str(const slm_wpm *w, int id);

/* Encode text[0..n): add_cls / add_sep put [CLS] first / [SEP] last (what
 * llama.cpp's add_special does for this vocabulary); parse_special and plain
 * (NULL: none; else one flag per byte) as above. Writes at most cap ids and
 * returns the total count, or an SLM_TOK_E* code (text/bpe.h):
 * SLM_TOK_EBUDGET when the longest-match search exceeds 256 probes per
 * input byte (only a hostile vocabulary gets near it). */
int slm_wpm_encode(const slm_wpm *w, const char *text, size_t n, const uint8_t *plain, int add_cls, int add_sep,
                   int parse_special, int32_t *ids, int cap);

/* ---- Unicode (wpm_unicode.c; tables generated by tools/gen_wpm_unicode.py) */
enum { SLM_WPM_OTHER = 0, SLM_WPM_CONTROL = 1, SLM_WPM_MARK = 2, SLM_WPM_PUNCT = 3 };
/* SLM_WPM_*: general category C (but not Cn), M, P, or anything else. */
int slm_wpm_class(uint32_t c);
/* White_Space (the 25 code points of Unicode's PropList). */
int slm_wpm_is_space(uint32_t c);
/* Simple lowercase mapping; c itself when none. */
uint32_t slm_wpm_lower(uint32_t c);
/* First code point of the canonical decomposition; c itself when none. */
uint32_t slm_wpm_nfd_first(uint32_t c);
/* CJK ideographs as BERT's _is_chinese_char (llama.cpp's ranges). */
int slm_wpm_is_cjk(uint32_t c);

#endif
