/* text/grammar — GBNF grammars (llama.cpp's format) and the matcher that
 * tells which byte strings may continue a text under one.
 *
 * A grammar is rules `name ::= alternatives`; an alternative is a sequence
 * of string literals ("abc", escapes \x.. \u.... \U........ \t \n \r \\ \"
 * \[ \]), character classes ([a-z_], [^"\\], escapes as in literals), `.`
 * (any character), rule references and groups ( ... ), each followed by at
 * most one repetition `*` `+` `?` `{m}` `{m,}` `{m,n}`; `#` starts a comment;
 * a newline ends a rule except inside parentheses or after `|`. The text
 * must be UTF-8; terminals are code points. `root` is the start. Token
 * references (<[id]>, <token>) are refused.
 *
 * Compiling (grammar_parse.c) is bounded: the text's length (1 MiB), the
 * nesting of groups (SLM_GRAMMAR_MAX_DEPTH), the elements after repetitions
 * are expanded, and the rules. Every error names the line and column. Rules
 * that reach themselves without consuming a character (left recursion,
 * directly or through rules that can match nothing) are refused: the
 * matcher's stacks could grow without bound.
 *
 * The matcher (grammar_match.c) keeps the set of parse stacks of the text
 * so far (llama.cpp's scheme: a stack lists the grammar positions still to
 * match, its top a character class) plus a partial UTF-8 character. All of
 * its memory is allocated by slm_gmatch_new: checking and accepting bytes
 * allocate nothing. The work per character is bounded (a grammar so
 * ambiguous that its stacks outgrow SLM_GMATCH_MAX_STACKS, or that needs
 * more than SLM_GMATCH_STEPS steps for one character, fails with a message).
 */
#ifndef SLM_GRAMMAR_H
#define SLM_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define SLM_GRAMMAR_MAX_TEXT (1u << 20)   /* bytes of grammar text */
#define SLM_GRAMMAR_MAX_DEPTH 128         /* nested groups */
#define SLM_GRAMMAR_MAX_ELEMS (1u << 20)  /* elements after repetitions are expanded */
#define SLM_GRAMMAR_MAX_RULES (1u << 16)
#define SLM_GRAMMAR_MAX_REPEAT 10000      /* m and n of {m,n} */

#define SLM_GMATCH_MAX_STACKS 4096        /* parse stacks alive at once (an enum of 4096 strings) */
#define SLM_GMATCH_NODES (1u << 16)       /* stack entries, all stacks together */
#define SLM_GMATCH_STEPS (1u << 16)       /* expansions and comparisons per character */

typedef struct slm_grammar slm_grammar;

/* Compile text[0..len). SLM_ERR_FORMAT with "grammar: line L, column C:
 * ..." for a malformed or refused grammar. */
slm_status slm_grammar_compile(const char *text, size_t len, slm_grammar **out, slm_err *err);
void slm_grammar_free(slm_grammar *g);

/* A matcher over a compiled grammar (g must outlive it). */
typedef struct slm_gmatch slm_gmatch;
slm_status slm_gmatch_new(const slm_grammar *g, slm_gmatch **out, slm_err *err);
void slm_gmatch_free(slm_gmatch *m);
/* Back to the start (nothing matched). */
void slm_gmatch_reset(slm_gmatch *m);
/* 1 when the text so far is a whole sentence of the grammar (it may end here). */
int slm_gmatch_can_end(const slm_gmatch *m);
/* 1 when nothing can follow the text so far (only its end). */
int slm_gmatch_done(const slm_gmatch *m);
/* Whether b[0..n) (n > 0) can continue the text (a character split at its
 * end counts when some class could take it): 1 yes, 0 no, -1 when the work
 * limits were hit (slm_gmatch_error). The state does not change. */
int slm_gmatch_check(slm_gmatch *m, const char *b, size_t n);
/* Append b[0..n) to the text. SLM_ERR_ARG when it cannot continue it (the
 * state is then unchanged), SLM_ERR_CAPACITY at the work limits. */
slm_status slm_gmatch_accept(slm_gmatch *m, const char *b, size_t n, slm_err *err);
const char *slm_gmatch_error(const slm_gmatch *m);

/* A vocabulary prepared for masking: the byte strings of n tokens (len 0:
 * never allowed), copied, sorted so that tokens with a common prefix share
 * the work of matching it. */
typedef struct slm_gvocab slm_gvocab;
slm_status slm_gvocab_new(int n, const char *const *str, const uint32_t *len, slm_gvocab **out, slm_err *err);
void slm_gvocab_free(slm_gvocab *v);
/* allowed[i] = 1 when token i's bytes can continue the text (as
 * slm_gmatch_check), else 0. Returns how many are allowed, or -1 at the
 * work limits (slm_gmatch_error). */
int slm_gmatch_mask(slm_gmatch *m, const slm_gvocab *v, uint8_t *allowed);

/* Whether the whole of s[0..n) is a sentence of g: 1 yes, 0 no, -1 at the
 * work limits or out of memory (tests, tools). */
int slm_grammar_matches(const slm_grammar *g, const char *s, size_t n);

/* JSON schema -> GBNF (json_schema.c). schema: JSON text; NULL = any JSON
 * object (OpenAI's json_object). The subset: type (string, number, integer,
 * boolean, null, object, array, or a list of them), enum, const, object
 * properties / required / additionalProperties (false, true or a schema),
 * array items / minItems / maxItems, string minLength / maxLength, anyOf,
 * oneOf (as anyOf), $ref to #, #/$defs/NAME, #/definitions/NAME; other
 * validation keywords (pattern, format, minimum, allOf, ...) are refused
 * with SLM_ERR_ARG naming them, annotations (title, description, ...)
 * ignored. *out: the grammar text (slm_xfree). Bounded: schema nesting
 * (SLM_GRAMMAR_MAX_DEPTH) and output size (SLM_GRAMMAR_MAX_TEXT). */
slm_status slm_json_schema_to_grammar(const char *schema, size_t len, char **out, slm_err *err);

/* Several schemas as rules of one grammar (tool calls: each function's
 * parameters): schema[i] (JSON text, NUL-terminated; NULL = any object)
 * becomes the rule named rule[i], which the caller's own rules reference
 * (and `root`, which the caller writes). The rules the schemas generate are
 * named with a '-' and a number (name-12), the shared ones space, char,
 * string, boolean, null, integral-part, decimal-part, integer, number,
 * value, object, array: rule[i] and the caller's rules must not be among
 * those. *bad: the index of the schema that failed (-1: none). */
#define SLM_SCHEMA_RULES_MAX 128
slm_status slm_json_schema_rules(int n, const char *const *schema, const char *const *rule, char **out, int *bad, slm_err *err);

/* As slm_json_schema_rules, the documents written as Gemma 4's tool calls
 * write their arguments (text/toolcall_gemma4.c reads them into the JSON
 * the schema allows): no white space; strings between <|"|> quotes, raw,
 * never holding <|"|>, <|channel> or <channel|> (an enum's or const's
 * string, or a property name, that holds one is refused), a bounded
 * string's characters anything but '<'; keys bare (1+ of a-z A-Z 0-9 _ .
 * -) or quoted; numbers, true, false, null bare. Each schema is a call's
 * arguments, so its top must be an object (a type other than object, or
 * enum, const, anyOf, oneOf, $ref there, are refused); values nest at most
 * max_depth containers deep, the arguments' object the first (a schema
 * that must nest deeper, a recursive $ref among them, is refused; any
 * value's rules stop there). More shared rule names: key, value-dN,
 * object-dN, array-dN. */
slm_status slm_gemma4_schema_rules(int n, const char *const *schema, const char *const *rule, int max_depth, char **out, int *bad,
                                   slm_err *err);

/* The GBNF expression (no rules of its own) of the texts that contain none
 * of words[0..n) (1 to 16 words of printable ASCII, each beginning with
 * '<' and holding no other '<'; what follows the text in the grammar must
 * begin with '<' or end it, so that no word spans the two) into out[cap].
 * Its length; 0 when the words break those rules or out is too small. */
size_t slm_gbnf_avoid(const char *const *words, int n, char *out, size_t cap);

#endif
