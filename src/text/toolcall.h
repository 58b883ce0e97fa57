/* text/toolcall — a model's tool (function) calls apart from its text, as
 * the reply streams (what llama.cpp's server does for OpenAI's tools).
 *
 * Generated text is fed in pieces as they come; the parser sends events
 * through the caller's callback: SLM_TOOL_TEXT (content), SLM_TOOL_CALL (a
 * call begins; s is the function's name, whole), SLM_TOOL_ARGS (a piece of
 * its arguments, JSON text; "{}" when the model gave none) and
 * SLM_TOOL_END (the call is complete). Only bytes that may still begin a
 * call are held back, and a call's bytes until its name is known; what turns
 * out not to be a call goes out as text, unchanged. The events do not depend
 * on how the reply was cut into pieces. The formats:
 *   none     everything is text;
 *   hermes   Qwen2.5 / Qwen3 / Hermes: <tool_call>{"name": N, "arguments":
 *            {...}}</tool_call>, any number of them, text around them;
 *   llama3   Llama 3.1 / 3.2: a reply that starts with {"name": N,
 *            "parameters": {...}} (also "type": "function"; "arguments"), or
 *            such objects after <|python_tag|>, separated by ';';
 *   mistral  [TOOL_CALLS][{"name": N, "arguments": {...}}, ...];
 *   harmony  gpt-oss: a message whose header names a recipient,
 *            <|start|>assistant to=functions.N<|channel|>commentary json
 *            <|message|>ARGS<|call|> (or "to=" in the channel part); the
 *            message body is the arguments; other messages pass as text
 *            (for text/reasoning.h to split);
 *   xml      Qwen3-Coder / Qwen3.5 / Nemotron Nano 3: <tool_call>
 *            <function=N> <parameter=K> VALUE </parameter> ... </function>
 *            </tool_call> (toolcall_xml.c): the parameters go out as one
 *            JSON object, a value that is JSON text as it is, others as
 *            strings; a value is held until its </parameter>;
 *   gemma4   Gemma 4: <|tool_call>call:N{key:VALUE,...}<tool_call|>
 *            (toolcall_gemma4.c): strings between <|"|> quotes, keys
 *            bare; the arguments go out as JSON as they stream.
 * In the JSON formats the arguments are the raw JSON text of the value of
 * "arguments" / "parameters" (a JSON string's value when the model wrote
 * one); other keys ("type", "id") are skipped. A call cut off by the end of
 * the reply still ends (SLM_TOOL_END); one whose name never came is text.
 * Allocates (the held bytes of a call before its name); slm_tool_free.
 */
#ifndef SLM_TOOLCALL_H
#define SLM_TOOLCALL_H

#include <stddef.h>

#include "text/tokenizer.h"

enum { SLM_TOOL_NONE, SLM_TOOL_HERMES, SLM_TOOL_LLAMA3, SLM_TOOL_MISTRAL, SLM_TOOL_HARMONY, SLM_TOOL_XML, SLM_TOOL_AUTO,
       SLM_TOOL_GEMMA4 };
enum { SLM_TOOL_TEXT, SLM_TOOL_CALL, SLM_TOOL_ARGS, SLM_TOOL_END };

#define SLM_TOOL_FORMATS "none, hermes, llama3, mistral, harmony, xml, gemma4, auto"
#define SLM_TOOL_NAME_MAX 255  /* bytes of a function name */
#define SLM_TOOL_HOLD_MAX 4096 /* bytes of a call held before its name is known */
#define SLM_TOOL_GEMMA4_DEPTH 62 /* gemma4: objects and arrays a call's arguments nest, theirs the first */

/* "none", "hermes", ... -> SLM_TOOL_*; -1 for anything else. */
int slm_tool_format_parse(const char *s);
const char *slm_tool_format_name(int fmt);
/* What auto means for a model, from its vocabulary (tok, may be NULL) and
 * its template (tmpl_src, may be NULL): harmony with <|channel|>, mistral
 * with [TOOL_CALLS], xml with a template that writes <function= and
 * <parameter=, hermes with <tool_call>, llama3 with <|python_tag|>
 * (or a template that speaks of ipython), else none. */
int slm_tool_detect(const slm_tokenizer *tok, const char *tmpl_src);

/* ev: SLM_TOOL_*; s[0..n): the text, the name (CALL) or the arguments'
 * piece; n > 0 but for END. */
typedef void (*slm_tool_out)(void *ud, int ev, const char *s, size_t n);

typedef struct slm_toolcall {
    int fmt;            /* SLM_TOOL_NONE .. _XML, _GEMMA4 */
    int state;          /* where the parser is (toolcall.c) */
    int after;          /* the state an object's end leads to */
    int in_list;        /* mistral: the calls are in a [...] list */
    int at_start;       /* llama3: no text but white space yet */
    int committed;      /* the current call's name went out */
    int args_any;       /* the current call's arguments key came */
    int args_bytes;     /* the current call's arguments are not empty */
    int vkind;          /* what the current JSON value is (toolcall.c) */
    int depth;          /* JSON scanner: open brackets */
    int in_str, esc;    /* JSON scanner: inside a string, after a backslash */
    int ucount;         /* \uXXXX: hex digits read */
    unsigned ucp, uhigh;/* \uXXXX: the code point so far, a high surrogate */
    char hold[16];      /* [nhold] bytes that may begin a marker */
    size_t nhold;
    char key[16];       /* the JSON key being read [nkey]; nkey > 15: another key */
    size_t nkey;
    char name[SLM_TOOL_NAME_MAX + 1]; /* [nname] + NUL */
    size_t nname;
    char *raw;          /* slm_malloc'd: the call's bytes while it may not be one [nraw] */
    size_t nraw, craw;
    char *args;         /* slm_malloc'd: arguments before the name [nargs] */
    size_t nargs, cargs;
    char run[256];      /* output waiting to go out as one event [nrun] */
    size_t nrun;
    int run_ev;
    int oom;            /* a buffer could not grow: the reply is cut short */
    int xparams;        /* xml: parameters of the current call so far */
    char xkey[128];     /* xml: the parameter's name [nxkey] */
    size_t nxkey;
    char *xstr;         /* xml: slm_malloc'd "function\x1fparameter\x1e"... of string parameters (NULL: none) */
    unsigned long long gstack; /* gemma4: bit d set when the container at depth d is an object */
    slm_tool_out out;
    void *ud;
} slm_toolcall;

/* fmt: SLM_TOOL_NONE .. _XML or _GEMMA4 (resolve auto first); prompt: the rendered
 * prompt the reply continues (NULL: none): a prompt that ends inside a call
 * (<tool_call>, [TOOL_CALLS], <|python_tag|>, a harmony message to a
 * function) starts the reply inside it. */
void slm_tool_init(slm_toolcall *t, int fmt, const char *prompt, slm_tool_out out, void *ud);
/* Whether prompt ends inside a call, as slm_tool_init reads it: 1 when it
 * does, with (harmony) the function's name in (*name)[0..*len) (NULL for
 * the other formats); 0 when not. */
int slm_tool_prompt_opens(int fmt, const char *prompt, const char **name, size_t *len);

/* ---- tool_choice required / a named function (toolgram.c) ----------------- */

/* A function the reply may call. */
typedef struct slm_tool_fn {
    const char *name;   /* 1-SLM_TOOL_NAME_MAX bytes of a-z A-Z 0-9 _ - . */
    const char *params; /* its parameters, a JSON schema (text); NULL = any object */
} slm_tool_fn;

#define SLM_TOOL_FNS_MAX 128 /* functions one grammar may name (SLM_SCHEMA_RULES_MAX) */

/* The GBNF grammar (text/grammar.h) of a reply that is nothing but tool
 * calls in format fmt (hermes .. xml, gemma4), in the form the parser above
 * reads back: each call names one of fns[0..n) and its arguments are what
 * that function's schema allows (text/grammar.h's JSON schema subset).
 * parallel: one or more calls (harmony: one always: its calls end the
 * reply); 0: one. prompt: the rendered prompt the reply continues; one that
 * ends inside a call (slm_tool_prompt_opens) makes the grammar the rest of
 * it. think: the reply may begin with <think>...</think> (deepseek
 * reasoning; a prompt that ends in <think> starts inside it), or for
 * gemma4 with <|channel>thought...<channel|> (gemma4 reasoning; a prompt
 * that ends in <|channel>thought starts inside it, one that ends in
 * <channel|> has none). harmony: an analysis message may come first. *out: the grammar text (slm_xfree).
 * *tokens: the control tokens' texts the grammar spells (a static string
 * for slm_sampling.grammar_tokens). SLM_ERR_ARG: fmt has no calls, a name
 * is malformed, the prompt opens a call to a function not in fns, or a
 * schema uses what the grammar cannot enforce; *bad then names the
 * function at fault (-1: none), and the message names it too. */
slm_status slm_tool_grammar(int fmt, const slm_tool_fn *fns, int n, int parallel, int think, const char *prompt,
                            char **out, const char **tokens, int *bad, slm_err *err);
void slm_tool_feed(slm_toolcall *t, const char *s, size_t n);
/* End of the reply: release what is held, end an open call. */
void slm_tool_finish(slm_toolcall *t);
void slm_tool_free(slm_toolcall *t);

/* Shared by the formats' parsers (toolcall.c): text and argument bytes
 * gather into runs (t->run) that go out as one event, a call's start and
 * end at once (the runs first); flush sends what gathered. raw_put appends
 * to raw[] (0: out of memory, t->oom set). */
void slm_tool__emit(slm_toolcall *t, int ev, const char *s, size_t n);
void slm_tool__flush(slm_toolcall *t);
int slm_tool__raw_put(slm_toolcall *t, const char *s, size_t n);

/* The xml format's parser (toolcall_xml.c), which slm_tool_init / _feed /
 * _finish hand the xml format to; in_call: the prompt ends with <tool_call>. */
void slm_toolx_init(slm_toolcall *t, int in_call);
void slm_toolx_feed(slm_toolcall *t, const char *s, size_t n);
void slm_toolx_finish(slm_toolcall *t);
/* The gemma4 format (toolcall_gemma4.c), as slm_toolx_* for xml. */
void slm_toolg_init(slm_toolcall *t, int in_call);
void slm_toolg_feed(slm_toolcall *t, const char *s, size_t n);
void slm_toolg_finish(slm_toolcall *t);
/* xml: the string-typed parameters of the tools (OpenAI's tools array, JSON
 * text) always go out as JSON strings, whatever their text looks like (a
 * zip code "01234" stays a string). After slm_tool_init; SLM_ERR_NOMEM, or
 * SLM_OK (tools that do not parse name none). */
slm_status slm_tool_xml_types(slm_toolcall *t, const char *tools_json);

/* ---- OpenAI's tools array, as serve and chat take it (tooldefs.c) ---------- */

/* tool_choice: "auto" (the model may call), "none" (the tools are rendered,
 * the reply is not parsed for calls), "required" (the reply is calls, under
 * a grammar), or a named function (the reply is calls to it). */
enum { SLM_TOOL_CHOICE_AUTO, SLM_TOOL_CHOICE_NONE, SLM_TOOL_CHOICE_REQUIRED, SLM_TOOL_CHOICE_NAMED };
/* "auto", "none", "required" -> SLM_TOOL_CHOICE_*; -1 for anything else. */
int slm_tool_choice_parse(const char *s);
/* A function name as OpenAI allows it: 1-64 of a-z A-Z 0-9 _ - . */
int slm_tool_name_ok(const char *s);

struct cJSON;
/* A tools array (a parsed JSON array): each element {"type": "function",
 * "function": {"name", "description"?: string, "parameters"?: object}}.
 * SLM_ERR_ARG naming the element and what is wrong with it. */
slm_status slm_tools_check(const struct cJSON *tools, slm_err *err);
/* The functions a reply under tool_choice required (want NULL) or a named
 * function (want) may call, from a checked tools array, their parameters'
 * schemas checked as the grammar enforces them: *fns [*n]
 * (slm_tool_fns_free). SLM_ERR_ARG with *choice_fault 1 when want is not in
 * tools, 0 when a schema uses what the grammar cannot enforce or there are
 * more than SLM_TOOL_FNS_MAX tools (the message names the function). */
slm_status slm_tools_forced(const struct cJSON *tools, const char *want, slm_tool_fn **fns, int *n, int *choice_fault,
                            slm_err *err);
void slm_tool_fns_free(slm_tool_fn *fns, int n);

/* A tools array from JSON text (a --tools file), with its tool_choice. */
typedef struct slm_tools {
    char *json;       /* the array as compact JSON text (the template's tools; slm_malloc'd) */
    int n;            /* tools in it (>= 1) */
    slm_tool_fn *fns; /* required / named: the functions the reply may call [n_fns]; else NULL */
    int n_fns;
} slm_tools;
/* Parse text[0..len) as a non-empty tools array (one JSON value and white
 * space), check it (slm_tools_check) and, for choice REQUIRED / NAMED (want:
 * the name), the functions (slm_tools_forced). SLM_ERR_ARG with a message
 * saying what is wrong (line and column of a JSON error); *choice_fault as
 * slm_tools_forced. SLM_ERR_UNSUPPORTED in a build without cJSON. */
slm_status slm_tools_parse(const char *text, size_t len, int choice, const char *want, slm_tools *out, int *choice_fault,
                           slm_err *err);
void slm_tools_free(slm_tools *t);

/* A call's id: "call_" and 24 letters and digits (mistral: 9 letters and
 * digits, as its template wants), from x (a counter mixed with what makes
 * it unique enough: ids name calls within a conversation; nothing secret). */
void slm_tool_call_id(int fmt, unsigned long long x, char *id, size_t cap);

/* A call a reply made. */
typedef struct slm_tool_call {
    char id[40];
    char *name; /* NUL-terminated */
    char *args; /* the arguments' JSON text as the model wrote them [alen] + NUL; NULL: none */
    size_t alen, acap;
    int done;   /* its end came (else the reply was cut inside it) */
} slm_tool_call;
/* calls[0..n) as the templates read message.tool_calls: a JSON array of
 * {"id", "type": "function", "function": {"name", "arguments"}}, each
 * call's arguments the JSON value they spell ({} for none; a string when
 * they do not parse). slm_xfree; NULL when out of memory or without cJSON. */
char *slm_tool_calls_json(const slm_tool_call *calls, int n);
/* An assistant message's tool_calls as OpenAI's API gives them (a parsed
 * JSON array; each call's arguments a JSON string) as the templates read
 * them (*out, JSON text, slm_xfree): the arguments parsed into the value
 * they spell (as llama.cpp's server does), other fields kept. SLM_ERR_ARG
 * with *bad the malformed call ("[i] must be ...": the caller names the
 * field), or -1 when v is not an array. */
slm_status slm_tool_calls_for_template(const struct cJSON *v, char **out, int *bad, slm_err *err);

#endif
