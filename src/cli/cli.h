/* cli/ — subcommands of the staticlm executable. Each returns a process exit code. */
#ifndef SLM_CLI_H
#define SLM_CLI_H

/* Parse a whole integer / number option in [lo, hi]; 0 (with a message on
 * stderr naming opt) when it is not one. */
int slm_cli_parse_int(const char *s, const char *opt, int lo, int hi, int *out);
int slm_cli_parse_float(const char *s, const char *opt, float lo, float hi, float *out);

/* Open the model for a command: the default model (stories260K + tok512
 * from ./models or ../shared/models) when *model is NULL, tok512.bin beside a
 * llama2.c model when *tok is NULL, the kernel set by name; slm_load with
 * opt (its tokenizer_path set from *tok). NULL after printing why. */
#include "staticlm.h"
slm_engine *slm_cli_open(const char **model, const char **tok, const char *kernels, slm_options *opt);
/* tok512.bin beside a llama2.c model that has no tokenizer.bin; NULL otherwise. */
const char *slm_cli_tokenizer_beside(const char *model);

/* staticlm convert: llama2.c checkpoint (+ tokenizer.bin) -> GGUF. */
int slm_cli_convert(int argc, char **argv);
int slm_cli_chat(int argc, char **argv);
int slm_cli_serve(int argc, char **argv);
/* staticlm synth: random-weight GGUF models of real shapes (src/cli/synth.c). */
int slm_cli_synth(int argc, char **argv);
/* staticlm bench: prefill/decode tokens/s like llama-bench (src/cli/bench.c). */
int slm_cli_bench(int argc, char **argv);
/* staticlm tokenize: token ids of a text (src/cli/tokenize.c). */
int slm_cli_tokenize(int argc, char **argv);

/* staticlm bench-features: what variants and the prefix cache save (src/cli/bench_features.c). */
int slm_cli_bench_features(int argc, char **argv);

#endif
