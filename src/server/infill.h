/* server/infill.h — llama-server's POST /infill request (fill in the middle
 * for code models): infill_parse.c reads its own fields from the body and
 * the rest as a completion's (request.h); api_infill.c tokenizes the pieces
 * into the model's FIM layout and runs it as a /completion job. */
#ifndef SLM_SERVER_INFILL_H
#define SLM_SERVER_INFILL_H

#include <stddef.h>
#include <stdint.h>

#include "server/request.h"

/* input_prefix / input_suffix: a string, or an array of strings and token
 * ids (llama-server's "mixed" prompt): n segments, each a text (tokenized
 * as plain text) or, where text is NULL, one id. */
typedef struct srv_infill_seg {
    char *text;
    int32_t id;
} srv_infill_seg;

typedef struct srv_infill_input {
    srv_infill_seg *seg;
    int n;
} srv_infill_input;

typedef struct srv_infill {
    srv_infill_input prefix, suffix;
    int n_extra;            /* input_extra: [{"filename" (default "tmp"), "text"}] */
    char **extra_name, **extra_text;
} srv_infill;

/* Parse body[0..len) of POST /infill: 1 with *f (free with
 * srv_infill_free) and *q, the completion fields of the body (its prompt
 * text, "" when absent, in q->prompt; free with srv_request_free), or 0 with
 * *e (400 naming the field, or 500 out of memory) and both empty. vocab:
 * the ids a mixed input may hold; dflt: as srv_request_parse's. */
int srv_infill_parse(const char *body, size_t len, int vocab, const slm_sampling *dflt, srv_infill *f, srv_request *q,
                     srv_error *e);
void srv_infill_free(srv_infill *f);

#endif
