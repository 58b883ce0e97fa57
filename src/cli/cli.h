/* cli/ — subcommands of the staticlm executable. Each returns a process exit code. */
#ifndef SLM_CLI_H
#define SLM_CLI_H

/* Parse a whole integer / number option in [lo, hi]; 0 (with a message on
 * stderr naming opt) when it is not one. */
int slm_cli_parse_int(const char *s, const char *opt, int lo, int hi, int *out);
int slm_cli_parse_float(const char *s, const char *opt, float lo, float hi, float *out);

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
