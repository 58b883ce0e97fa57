/* server/request.h — an OpenAI request body, parsed and validated.
 *
 * The JSON of POST /v1/chat/completions or /v1/completions becomes a
 * srv_request (sampling, limits, stop strings, and the messages or the
 * prompt, copied) or a srv_error that the HTTP layer sends as an
 * OpenAI-style error body. Nothing here renders, tokenizes or touches the
 * engine: parsing is bounded by the body's length (cJSON's nesting limit
 * bounds its depth), and it compiles on its own (cJSON + common) so that
 * tests/fuzz/fuzz_http.c can drive it. Also the UTF-8 helpers the
 * responses use. */
#ifndef SLM_SERVER_REQUEST_H
#define SLM_SERVER_REQUEST_H

#include <stddef.h>

#include "text/chat_template.h"
#include "text/toolcall.h"
#include "staticlm.h"

#define SRV_MAX_STOP 4       /* stop strings per request */
#define SRV_STOP_LEN 256     /* bytes per stop string */
#define SRV_MAX_MESSAGES 100000
#define SRV_MAX_PROMPT_IDS (1 << 20) /* ids in a prompt given as ids */
#define SRV_MAX_CHOICES 8    /* n: completions of one request */

typedef struct srv_request {
    int chat;                /* 1: chat completion (msgs); 0: completion (prompt) */
    int stream, include_usage;
    int n;                   /* choices to generate (1..SRV_MAX_CHOICES; OpenAI's n, llama-server's n_cmpl) */
    int borrowed;            /* a copy made by srv_request_share: only grammar is its own */
    int max_tokens;          /* 0 = until the KV capacity */
    int max_tokens_set;      /* the request gave max_tokens, max_completion_tokens or n_predict */
    int ignore_eos;          /* llama-server's: no stop tokens (stop strings and limits still apply) */
    int n_indent;            /* llama-server's: > 0 stops (and cuts) a reply at a line after its
                                first newline indented less than this */
    double t_max_predict_ms; /* llama-server's: > 0 stops a reply at a newline once generating
                                took longer than this */
    int logprobs;            /* 1: each token's log-probability (chat logprobs true, completions logprobs > 0) */
    int top_logprobs;        /* and the n most likely tokens (chat top_logprobs, completions logprobs) */
    slm_sampling samp;       /* seed valid only when seed_set */
    int seed_set;
    char *stop[SRV_MAX_STOP];/* non-empty, at most SRV_STOP_LEN bytes; slm_malloc'd */
    int nstop;
    slm_chat_msg *msgs;      /* [nmsgs]; role a static string, content and
                                reasoning_content (NULL: none) slm_malloc'd */
    int nmsgs;
    char *prompt;            /* completions: the prompt (slm_malloc'd), or NULL when given as ids: */
    int32_t *prompt_ids;     /* ... token ids, as sent (no BOS added; slm_malloc'd) [n_prompt_ids] */
    int n_prompt_ids;
    int reasoning;           /* chat: reasoning_format, SLM_REASON_*; -1 = the server's */
    char *kwargs;            /* chat: chat_template_kwargs, a checked JSON object
                                (slm_malloc'd), or NULL */
    char *grammar;           /* the request's grammar (GBNF, checked; slm_malloc'd): from
                                response_format, json_schema or grammar; samp.grammar
                                points at it (or at serve's --grammar when NULL) */
    /* chat: tools (a JSON array as sent, cJSON_free'd; NULL: none or empty),
       tool_choice (SLM_TOOL_CHOICE_*), parallel_tool_calls (default 1); messages'
       tool_calls (JSON, cJSON_free'd), tool_call_id and name (slm_malloc'd) */
    char *tools;
    int tool_choice;
    int parallel_tool_calls;
    /* tool_choice required or named: the functions the reply may call
       [n_tool_fns] (name slm_malloc'd, params cJSON_free'd, their schemas
       checked); the worker makes the grammar from them */
    slm_tool_fn *tool_fns;
    int n_tool_fns;
} srv_request;


typedef struct srv_error {
    int status;              /* 400, or 500 when out of memory */
    const char *type;        /* "invalid_request_error" | "server_error" */
    const char *code;        /* "invalid_json", "invalid_type", ... or NULL */
    char param[48];          /* the offending field ("" = none) */
    char msg[400];
} srv_error;

/* Parse body[0..len) (any bytes). Returns 1 with *q filled (free with
 * srv_request_free), or 0 with *e filled and *q empty. The body must be
 * one JSON object with nothing but white space after it. dflt: the sampling
 * a request's missing fields take (serve's options); NULL = OpenAI's
 * (temperature 1, top_p 1, the rest off). Fields of features staticlm lacks
 * (response formats other than text / json_object / json_schema, echo,
 * best_of > 1, suffix, the legacy functions) are refused with 400
 * unless they ask for nothing. */
int srv_request_parse(const char *body, size_t len, int chat, const slm_sampling *dflt, srv_request *q, srv_error *e);
void srv_request_free(srv_request *q);
/* dst = src for another choice of the same request: the messages, prompt,
 * stop strings, tools and kwargs are borrowed (src must outlive dst), the
 * grammar copied (the worker may replace a choice's). 0 when out of memory
 * (dst empty). */
int srv_request_share(const srv_request *src, srv_request *dst);
/* body[0..len) as one JSON object with nothing but white space after it
 * (cJSON_Delete it), or NULL with *e filled (400 invalid_json). */
struct cJSON *srv_body_object(const char *body, size_t len, srv_error *e);

/* Length of s[0..n) without a trailing incomplete UTF-8 sequence
 * (slm_utf8_complete). */
size_t srv_utf8_complete(const char *s, size_t n);
/* A copy of s[0..n) with invalid UTF-8 replaced by U+FFFD (slm_xfree); NULL
 * when out of memory. */
char *srv_utf8_clean(const char *s, size_t n);

#endif
