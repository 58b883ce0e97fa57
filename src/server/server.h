/* server/ — `staticlm serve` (an OpenAI-compatible HTTP server), and the
 * option parsing + model loading shared by `staticlm chat` and `serve`
 * (implemented in cli/chat.c). */
#ifndef SLM_SERVER_H
#define SLM_SERVER_H

#include "cli/cli.h"
#include "staticlm.h"

typedef struct slm_cli_common {
    const char *model, *tok, *kernels, *chat_template;
    int verbose, threads;
    slm_options opt;
    slm_sampling samp;
    int seed_set;
} slm_cli_common;

void slm_cli_common_init(slm_cli_common *c);
/* Parse the option at argv[*i] if it is a common one (model, tokenizer,
 * capacity, threads, kernels, verbose, chat template, sampling). Returns 1
 * when consumed (advancing *i past its value), 0 when not a common option,
 * -1 on a bad value (message printed). */
int slm_cli_common_opt(slm_cli_common *c, int argc, char **argv, int *i);
/* Load the model (default: stories260K from ./models or ../shared/models);
 * NULL after printing why. */
slm_engine *slm_cli_common_load(slm_cli_common *c);
/* The help lines for the common options. */
extern const char slm_cli_common_help[];


#endif
