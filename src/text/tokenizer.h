/* SentencePiece-style BPE tokenizer as llama2.c's run.c implements it:
 * BOS, a " " dummy prefix for non-empty text, UTF-8 code points looked up
 * first, byte fallback (<0xXX> = id of byte tokens), then repeated merges of
 * the highest-scoring adjacent pair whose concatenation is a token (leftmost
 * on ties). Token strings hold ' ' where SentencePiece has U+2581.
 */
#ifndef SLM_TOKENIZER_H
#define SLM_TOKENIZER_H

#include "common/common.h"
#include "format/gguf.h"
#include "text/bpe.h" /* SLM_TOK_E*, SLM_TOK_DEFAULT_MAX_INPUT, slm_tok_encode_error */

typedef struct slm_tokenizer slm_tokenizer;

/* llama2.c tokenizer.bin: int32 max_token_length, then vocab_size records
 * {f32 score, int32 len, len bytes}. vocab_size comes from the model
 * (the file does not store it); the file must hold at least that many. */
slm_status slm_tok_load_llama2c(slm_tokenizer **out, const char *path, int vocab_size,
                                slm_err *err);
/* The vocabulary inside a GGUF file (tokenizer.ggml.model = "llama"; "gpt2"
 * and "gemma4" load as byte-level BPE, "bert" as WordPiece, "t5" as
 * Unigram, text/ugm.h). */
slm_status slm_tok_load_gguf(slm_tokenizer **out, const slm_gguf *g, const char *name,
                             slm_err *err);
void slm_tok_free(slm_tokenizer *t);
/* A Hugging Face tokenizer.json (byte-level BPE, or SentencePiece-style BPE). */
slm_status slm_tok_load_hf_json(slm_tokenizer **out, const char *path, slm_err *err);
/* A BERT folder's WordPiece vocabulary: path is its tokenizer.json or
 * vocab.txt; ids missing below n_vocab (config.json's vocab_size) are
 * unused tokens (text/wpm.h: slm_wpm_load_hf). */
slm_status slm_tok_load_hf_wpm(slm_tokenizer **out, const char *path, int n_vocab, slm_err *err);
/* An encoder folder's tokenizer (BERT, XLM-RoBERTa, ModernBERT): tokenizer.json with a
 * Unigram model (text/ugm.h: slm_ugm_load_hf), a BPE one as
 * slm_tok_load_hf_json reads it (ModernBERT: byte-level, [CLS] and [SEP]
 * from its TemplateProcessing), else WordPiece as slm_tok_load_hf_wpm
 * reads it (tokenizer.json or vocab.txt).
 * unigram: the config names XLM-RoBERTa, whose tokenizer must be Unigram. */
slm_status slm_tok_load_hf_encoder(slm_tokenizer **out, const char *path, int n_vocab, int unigram, slm_err *err);
/* A Unigram tokenizer read from a tokenizer.json: its template's add_bos,
 * add_eos, add_sep and separator (-1: none) into the four, and 1; else 0
 * (nothing written). */
int slm_tok_hf_pair(const slm_tokenizer *t, int *add_bos, int *add_eos, int *add_sep, int *sep);
/* Wrap a byte-level BPE tokenizer (takes ownership of b, also on failure).
 * GGUF vocabularies with tokenizer.ggml.model = "gpt2" load through
 * slm_tok_load_gguf into this. Encoding lets special-token text match. */
struct slm_bpe;
slm_status slm_tok_from_bpe(slm_tokenizer **out, struct slm_bpe *b, slm_err *err);
/* End-of-turn id (<|eot_id|>, <|im_end|>...), -1 if none; 1 for BPE. */
int slm_tok_eot(const slm_tokenizer *t);
int slm_tok_is_bpe(const slm_tokenizer *t);
/* 1 when t fits a model of vocab_size rows: as many tokens, or (BPE) fewer:
 * an embedding padded beyond the tokenizer (Qwen2.5's folders) is fine. */
int slm_tok_fits_vocab(const slm_tokenizer *t, int vocab_size);
/* 1 for a WordPiece (BERT) vocabulary (tokenizer.ggml.model "bert", text/wpm.h):
 * there slm_tok_encode's add_bos adds [CLS] and add_eos [SEP] (llama.cpp's
 * add_special adds both), special-token text ([SEP], ...) matches its token,
 * and a word-start piece decodes with its leading space, first one too. */
int slm_tok_is_wpm(const slm_tokenizer *t);
/* 1 for a Unigram vocabulary (tokenizer.ggml.model "t5", text/ugm.h: the
 * XLM-RoBERTa and T5 families): there slm_tok_encode's add_bos / add_eos add
 * BOS / EOS only where the vocabulary's add_bos_token / add_eos_token ask
 * (llama.cpp's add_special; defaults false / true), special-token text
 * matches its token, slm_tok_bos / slm_tok_eos may be -1 (none), and only a
 * first piece (prev < 0) loses the dummy prefix's space in slm_tok_decode. */
int slm_tok_is_ugm(const slm_tokenizer *t);
/* [SEP] of a WordPiece vocabulary, -1 for the others. */
int slm_tok_sep(const slm_tokenizer *t);
/* 1 for a llama2.c tokenizer.bin: run.c's encode and output rules. */
int slm_tok_runc(const slm_tokenizer *t);

int slm_tok_vocab_size(const slm_tokenizer *t);
int slm_tok_bos(const slm_tokenizer *t);
int slm_tok_eos(const slm_tokenizer *t);

/* The longest text (bytes) slm_tok_encode accepts: a longer one gives
 * SLM_TOK_ETOOLONG before any work. 0 restores the default
 * (SLM_TOK_DEFAULT_MAX_INPUT, 8 MiB); the engine sets
 * slm_options.max_prompt_bytes here. */
void slm_tok_set_max_input(slm_tokenizer *t, size_t bytes);
size_t slm_tok_max_input(const slm_tokenizer *t);

/* Encode text. Writes at most cap ids; returns the total number of ids the
 * text encodes to (> cap means truncated output), or below zero an
 * SLM_TOK_E* code (text/bpe.h; slm_tok_encode_error says it in words).
 * add_bos: prepend BOS. The dummy prefix is added for non-empty text. */
int slm_tok_encode(const slm_tokenizer *t, const char *text, int add_bos, int add_eos,
                   int32_t *ids, int cap);
/* Encode a rendered chat prompt: as slm_tok_encode, but special-token text
 * lying on bytes with plain[i] set (slm_tmpl_render_mask's mask; NULL =
 * none) is tokenized as plain text: only the template's own markup yields
 * control tokens. SentencePiece vocabularies never match control tokens
 * from text (user-defined ones match anywhere, as llama.cpp does), so only
 * byte-level BPE needs the mask. */
int slm_tok_encode_masked(const slm_tokenizer *t, const char *text, const uint8_t *plain, int add_bos, int add_eos,
                          int32_t *ids, int cap);
/* The piece for `id` after `prev` (run.c's decode): strips the leading space
 * after BOS, maps <0xXX> to the raw byte. "" for an out-of-range id. */
const char *slm_tok_decode(const slm_tokenizer *t, int prev, int id);
/* The raw vocabulary string of id (no byte mapping), its score, and its
 * SentencePiece type (1 normal, 2 unknown, 3 control, 6 byte; llama2.c files
 * derive it: 0 unk, 1/2 control, <0xXX> byte). NULL / 0 for a bad id. */
const char *slm_tok_str(const slm_tokenizer *t, int id);
float slm_tok_score(const slm_tokenizer *t, int id);
int slm_tok_type(const slm_tokenizer *t, int id);


/* Serialize the tokenizer (vocabulary, scores, types, special ids, mode)
 * into *out (slm_malloc'd, *len bytes); slm_tok_load_mem reads it back,
 * validating every length and id, so that the result encodes and decodes
 * exactly as the original. Used by the blob's tokenizer section. */
slm_status slm_tok_save(const slm_tokenizer *t, uint8_t **out, size_t *len, slm_err *err);
slm_status slm_tok_load_mem(slm_tokenizer **out, const void *data, size_t size, const char *name,
                            slm_err *err);

#endif
