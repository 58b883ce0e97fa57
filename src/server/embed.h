/* server/embed.h — an embedding request: its inputs (embed_parse.c reads
 * them from the body) and, once the worker ran them, its vectors
 * (api_embed.c). */
#ifndef SLM_SERVER_EMBED_H
#define SLM_SERVER_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "server/request.h"

#define SRV_EMBED_MAX_INPUTS 2048

typedef struct srv_embed srv_embed;
struct srv_embed {
    int oai;          /* /v1/embeddings (else llama-server's form) */
    int rerank;       /* /v1/rerank: the inputs are documents scored against query */
    int tei;          /* rerank in TEI's form ("texts": an array answer, "score", return_text) */
    int top_n;        /* rerank: the best top_n results */
    int return_text;  /* rerank, TEI: each result's text */
    char *query;      /* rerank */
    int base64;       /* encoding_format base64 */
    int normalize;    /* embd_normalize */
    int pooling;      /* resolved: serve's --pooling or the model's */
    int n_in;
    char **text;      /* [n_in]: a text, or NULL where ids holds the input */
    int32_t **ids;    /* [n_in] */
    int *n_ids;       /* [n_in] */
    /* the worker's results */
    float **vec;      /* [n_in]: dim floats, or n_tok * dim (pooling none) */
    int *n_vec;       /* vectors per input */
    int tokens;       /* all inputs' tokens */
};


/* Parse body[0..len) of POST /v1/embeddings (oai) or llama-server's
 * /embedding: 1 with *out (free with srv_embed_free), or 0 with *e (400,
 * or 500 out of memory). vocab, dim: the model's; pooling: the server's
 * (none is refused for oai). */
int srv_embed_parse(const char *body, size_t len, int oai, int vocab, int dim, int pooling, srv_embed **out,
                    srv_error *e);
/* The same for POST /v1/rerank (llama-server's, Jina's form: query,
 * documents, top_n; TEI's: query, texts, return_text). */
int srv_rerank_parse(const char *body, size_t len, srv_embed **out, srv_error *e);
void srv_embed_free(srv_embed *m);

#endif
