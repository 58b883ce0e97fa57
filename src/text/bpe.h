/* Byte-level BPE tokenizers (GPT-2 style), as llama.cpp's llm_tokenizer_bpe
 * implements them, plus the SentencePiece-flavoured BPE of Hugging Face
 * tokenizer.json files (Llama 2 style: "▁" for spaces, byte fallback).
 *
 * Encoding (llama.cpp's order):
 *   1. special tokens are split out of the text first, longest token first
 *      (llama.cpp's tokenizer_st_partition): USER_DEFINED tokens always,
 *      CONTROL and UNKNOWN tokens only with parse_special;
 *   2. each remaining fragment is pre-tokenized with the regex list of the
 *      pre-tokenizer (tokenizer.ggml.pre; PCRE2 in UTF + UCP mode); each
 *      regex splits every piece further into matches and the gaps between;
 *   3. (byte-level mode) every byte becomes GPT-2's byte-to-unicode char;
 *   4. merges are applied by lowest rank, leftmost on ties, inside each piece;
 *   5. each final symbol maps to its id; a symbol that is no token becomes
 *      the tokens of its single bytes where they exist (llama.cpp), or
 *      <0xXX> byte tokens in SentencePiece-flavoured mode, else is dropped.
 * Invalid UTF-8: each invalid byte counts as U+FFFD for the regexes but keeps
 * its own value, so it encodes as its byte token and decode(encode(s)) == s
 * for any byte string (llama.cpp turns such bytes into U+FFFD instead).
 *
 * Decoding: slm_bpe_piece gives the bytes of one token: normal tokens through
 * the reverse byte map (or "▁" -> " " and <0xXX> -> the byte in SentencePiece
 * mode); control / user-defined / unknown tokens give their text.
 */
#ifndef SLM_BPE_H
#define SLM_BPE_H

#include "common/common.h"
#include "format/gguf.h"

typedef struct slm_bpe slm_bpe;

/* Token types (GGUF tokenizer.ggml.token_type). */
enum {
    SLM_BPE_TT_UNDEFINED = 0, SLM_BPE_TT_NORMAL = 1, SLM_BPE_TT_UNKNOWN = 2,
    SLM_BPE_TT_CONTROL = 3, SLM_BPE_TT_USER_DEFINED = 4, SLM_BPE_TT_UNUSED = 5,
    SLM_BPE_TT_BYTE = 6
};

/* The vocabulary of a GGUF file with tokenizer.ggml.model = "gpt2": tokens,
 * merges, token types, pre, special ids, add_bos/add_eos. `name` is used in
 * messages. Refuses unknown pre-tokenizers and malformed metadata. */
slm_status slm_bpe_load_gguf(slm_bpe **out, const slm_gguf *g, const char *name, slm_err *err);
/* A Hugging Face tokenizer.json (model.type "BPE"); tokenizer_config.json
 * beside it, if present, gives bos/eos and add_bos_token/add_eos_token. */
slm_status slm_bpe_load_hf_json(slm_bpe **out, const char *path, slm_err *err);
/* The same from memory (json: len bytes; config_json may be NULL). */
slm_status slm_bpe_load_hf_json_mem(slm_bpe **out, const char *json, size_t len,
                                    const char *config_json, size_t config_len,
                                    const char *name, slm_err *err);
void slm_bpe_free(slm_bpe *t);

/* Serialize into buf (cap bytes); returns the bytes needed (nothing is
 * written when cap is smaller). slm_bpe_load_mem reads it back, checking
 * every length, id and count; the result encodes and decodes identically. */
size_t slm_bpe_serialize(const slm_bpe *t, void *buf, size_t cap);
slm_status slm_bpe_load_mem(slm_bpe **out, const void *data, size_t size, const char *name,
                            slm_err *err);

/* Encoding's bounded work (text controls the cost, and a tokenizer.json
 * its regexes): a text longer than the tokenizer's max_input is refused
 * before any work; pre-tokenization runs each PCRE2 match under match,
 * depth and heap limits sized to the piece it splits, and the whole text
 * under a budget of the thread's CPU time: SLM_BPE_PRETOK_BASE_MS +
 * SLM_BPE_PRETOK_NS_PER_BYTE per byte. Normal pre-tokenizers need a small fraction of it (tens of ns
 * per byte); a limit hit is an error, never a silently different split. */
#define SLM_TOK_DEFAULT_MAX_INPUT ((size_t)8 << 20) /* bytes (8 MiB) */
#define SLM_BPE_PRETOK_BASE_MS 250
#define SLM_BPE_PRETOK_NS_PER_BYTE 2000
/* Encoding results below zero (slm_bpe_encode and slm_tok_encode). */
#define SLM_TOK_ENOMEM (-1)   /* an allocation failed */
#define SLM_TOK_ETOOLONG (-2) /* the text is longer than max_input */
#define SLM_TOK_EBUDGET (-3)  /* a pre-tokenizer regex (BPE) or the longest-match search (WordPiece) exceeded its work limits */
/* A message for a result below zero ("" for others). */
const char *slm_tok_encode_error(int rc);

/* The longest text (bytes) encode accepts; 0 restores the default
 * (SLM_TOK_DEFAULT_MAX_INPUT). Not serialized: a blob's user sets it. */
void slm_bpe_set_max_input(slm_bpe *t, size_t bytes);
size_t slm_bpe_max_input(const slm_bpe *t);

/* Encode len bytes of text. add_bos / add_eos: 1 to add BOS/EOS when the
 * vocabulary asks for it (add_bos_token / add_eos_token), 0 never;
 * parse_special: let control tokens' text match them. Writes at most cap ids;
 * returns the number of ids the text encodes to (> cap: output truncated),
 * or an SLM_TOK_E* code below zero. */
int slm_bpe_encode(const slm_bpe *t, const char *text, size_t len, int add_bos, int add_eos,
                   int parse_special, int32_t *ids, int cap);
/* Decoded bytes of one token (not NUL-terminated in general; *len set).
 * "" (len 0) for an out-of-range id or an unused token. */
const char *slm_bpe_piece(const slm_bpe *t, int id, size_t *len);
/* As slm_bpe_encode with parse_special, except that CONTROL and UNKNOWN
 * tokens do not match where any of their bytes has plain[i] set (plain:
 * [len] bytes; NULL = none): a chat prompt's message content is text. */
int slm_bpe_encode_masked(const slm_bpe *t, const char *text, size_t len, const uint8_t *plain, int add_bos,
                          int add_eos, int32_t *ids, int cap);
/* Decode ids into out (cap bytes, NUL-terminated when cap > 0). skip_special:
 * leave control/unknown tokens out. SentencePiece-flavoured vocabularies drop
 * the one leading space of the text. Returns the length needed (no NUL). */
size_t slm_bpe_decode(const slm_bpe *t, const int32_t *ids, int n, int skip_special, char *out,
                      size_t cap);
/* The raw vocabulary string of id (byte-encoded form), its type. */
const char *slm_bpe_token_text(const slm_bpe *t, int id, size_t *len);
int slm_bpe_token_type(const slm_bpe *t, int id);
/* Id of an exact vocabulary string, -1 if none. */
int slm_bpe_find(const slm_bpe *t, const char *s, size_t len);

int slm_bpe_vocab_size(const slm_bpe *t);
int slm_bpe_n_merges(const slm_bpe *t);
/* Special ids; -1 when the vocabulary has none. */
int slm_bpe_bos(const slm_bpe *t);
int slm_bpe_eos(const slm_bpe *t);
int slm_bpe_eot(const slm_bpe *t);
int slm_bpe_unk(const slm_bpe *t);
int slm_bpe_pad(const slm_bpe *t);
int slm_bpe_add_bos(const slm_bpe *t);
int slm_bpe_add_eos(const slm_bpe *t);
/* 1 for control / unknown tokens (end of generation etc.), for the engine. */
int slm_bpe_is_control(const slm_bpe *t, int id);
/* The pre-tokenizer's name ("gpt-2", "llama-bpe", "hf-json", ...). */
const char *slm_bpe_pre_name(const slm_bpe *t);

#endif
