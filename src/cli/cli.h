/* cli/ — subcommands of the staticlm executable. Each returns a process exit code. */
#ifndef SLM_CLI_H
#define SLM_CLI_H

#include "staticlm.h"

/* Parse a whole integer / number option in [lo, hi]; 0 (with a message on
 * stderr naming opt) when it is not one. */
int slm_cli_parse_int(const char *s, const char *opt, int lo, int hi, int *out);
/* --schedule rendezvous|counted into an slm_schedule_kind; 0 (with a
 * message) when it is neither. */
int slm_cli_parse_schedule(const char *s, int *out);
/* The name of an slm_schedule_kind ("rendezvous" for the default). */
const char *slm_cli_schedule_name(int schedule);
/* --kv-type f32|f16|q8_0 into an slm_kv_type; 0 (and a message) otherwise. */
int slm_cli_parse_kv_type(const char *s, const char *opt, int *out);
/* The help line of --kv-type (run, compile, chat, serve, bench, perplexity). */
#define SLM_CLI_KV_TYPE_HELP                                                              \
    "      --kv-type T           KV cache element type: f32 | f16 | q8_0 (default f16;\n" \
    "                            a blob keeps the type it was compiled with)\n"
/* --weight-type q8_0|q4_0|q5_0|q4_k_s|q4_k_m|q5_k_s|q5_k_m|q6_k into an slm_weight_type; 0 (and a message) otherwise. */
int slm_cli_parse_weight_type(const char *s, const char *opt, int *out);
#define SLM_CLI_WEIGHT_TYPE_HELP                                                            \
    "      --weight-type T       quantize a source model's F32/F16/BF16 matrices at load:\n" \
    "                            q8_0 | q4_0 | q5_0 | q4_k_s | q4_k_m | q5_k_s | q5_k_m | q6_k\n" \
    "                            (llama-quantize's types per tensor; compile -o stores them\n" \
    "                            in the blob)\n"
/* --prefetch on|off into an slm_prefetch; 0 (and a message) otherwise. */
int slm_cli_parse_prefetch(const char *s, const char *opt, int *out);
#define SLM_CLI_PREFETCH_HELP                                                               \
    "      --prefetch on|off     weight prefetch in decode (default on: each matrix task\n"   \
    "                            touches its weights 1 and 4 KiB ahead, idle threads of the\n" \
    "                            counted schedule touch the next stage's; a blob keeps\n"   \
    "                            what it was compiled with)\n"
int slm_cli_parse_float(const char *s, const char *opt, float lo, float hi, float *out);
/* path's bytes (NUL-terminated, *len of them; free()), at most about limit;
 * NULL with *why (strerror's text, "too large", "out of memory"). */
char *slm_cli_read_file(const char *path, size_t limit, size_t *len, const char **why);

/* The sampling options (cli/sampling.c): --temp, --top-k, --top-p, --min-p,
 * --repeat-penalty, --repeat-last-n, --presence-penalty, --frequency-penalty,
 * --logit-bias, --grammar, --grammar-file, --json-schema (one grammar; the
 * text is compiled here and kept for the life of the process). Consumes the option at argv[*i] and its value (1), not one of
 * them (0), bad value (-1, message printed). */
int slm_cli_sampling_opt(slm_sampling *s, int argc, char **argv, int *i);
/* After the model loads: the options not given take the model file's
 * recommended values (general.sampling.temp, top_k, top_p, min_p,
 * penalty_repeat, penalty_last_n, as llama.cpp takes them; verbose: a line
 * says which); 0 (after a message) when a --logit-bias token is past e's
 * vocabulary. */
int slm_cli_sampling_check(slm_sampling *s, slm_engine *e, int verbose);
/* Count option opt ("--temp", ...) as given: a command's own default for it
 * then stands against the model's. */
void slm_cli_sampling_mark(const char *opt);
/* The defaults: temperature as given, top-p 0.9, the rest off (repeat-last-n 64). */
void slm_cli_sampling_init(slm_sampling *s, float temperature);
/* Their help lines after --temp's (which names each command's default). */
#define SLM_CLI_SAMPLING_HELP                                                                        \
    "      --top-k K             keep the K most likely tokens; 0 = off (default 0)\n"                 \
    "      --top-p P             nucleus sampling; 0 or 1 = off (default 0.9)\n"                       \
    "      --min-p P             drop tokens below P times the top token's probability\n"             \
    "                            (before the temperature); 0 = off (default 0)\n"                      \
    "      --repeat-penalty R    tokens among the last N (prompt included): a positive\n"            \
    "                            logit is divided by R, a negative one multiplied; 1 = off\n"         \
    "                            (default 1)\n"                                                        \
    "      --repeat-last-n N     the window of the three penalties; -1 = all (default 64)\n"          \
    "      --presence-penalty P  lower a token seen in the window by P (default 0)\n"                 \
    "      --frequency-penalty F lower a token by F per time it is in the window (default 0)\n"       \
    "      --logit-bias ID+B     add B (in [-100, 100]; ID-B subtracts) to token ID's logit;\n"       \
    "                            repeatable\n"                                                        \
    "      --grammar GBNF        the reply must match this grammar (llama.cpp's GBNF; rule root)\n"  \
    "      --grammar-file F      the same, read from file F\n"                                        \
    "      --json-schema S       the reply must be JSON matching schema S (JSON text, or @FILE)\n"    \
    "  A model file's recommended values (general.sampling.temp, top_k, top_p, min_p,\n"          \
    "  penalty_repeat, penalty_last_n) replace these defaults for the options not given.\n"

/* --trace FILE and --trace-mb N: consumes the option at argv[*i] (1), not
 * one of them (0), bad value (-1, message printed). slm_cli_trace_begin
 * starts the trace when --trace was given (0 after printing why not); the
 * file is written at exit. */
int slm_cli_trace_opt(int argc, char **argv, int *i);
int slm_cli_trace_begin(void);
#define SLM_CLI_TRACE_HELP                                                                         \
    "      --trace FILE          record every task on every thread as a Chrome trace\n"            \
    "                            (Perfetto, chrome://tracing; staticlm trace FILE --svg OUT)\n"   \
    "      --trace-mb N          trace buffer in MiB (default 64; events beyond it are dropped)\n"

/* Open the model for a command: the default model (stories260K + tok512
 * from ./models or ../shared/models) when *model is NULL, tok512.bin beside a
 * llama2.c model when *tok is NULL, the kernel set by name; slm_load with
 * opt (its tokenizer_path set from *tok). NULL after printing why. */
slm_engine *slm_cli_open(const char **model, const char **tok, const char *kernels, slm_options *opt);
/* tok512.bin beside a llama2.c model that has no tokenizer.bin; NULL otherwise. */
const char *slm_cli_tokenizer_beside(const char *model);

/* The options `staticlm chat` and `serve` share (cli/chat.c). */
typedef struct slm_cli_common {
    const char *model, *tok, *kernels, *chat_template;
    int verbose, threads;
    slm_options opt;
    slm_sampling samp;
    int seed_set;
    int reasoning;              /* --reasoning-format: SLM_REASON_* (default AUTO) */
    const char *kwargs_json;    /* --chat-template-kwargs (checked), or NULL */
    int no_think;               /* --no-think: {"enable_thinking": false} after it */
    const char *kwargs[2];      /* slm_cli_common_load: the two as slm_tmpl_vars.kwargs */
    int n_kwargs;
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
/* The help lines for the common options, and for the reasoning ones
 * (--reasoning-format, --chat-template-kwargs, --no-think) that are common too. */
extern const char slm_cli_common_help[];
extern const char slm_cli_reasoning_help[];
/* After the template is open: the reasoning format auto resolves to for e
 * and tm (SLM_REASON_*), saying so with -v, and a warning when --no-think
 * meets a template that never reads enable_thinking. `who`: "chat", "serve". */
struct slm_tmpl;
int slm_cli_reasoning_resolve(const slm_cli_common *c, slm_engine *e, const struct slm_tmpl *tm, const char *who);

/* staticlm convert: llama2.c checkpoint (+ tokenizer.bin) -> GGUF. */
int slm_cli_convert(int argc, char **argv);
int slm_cli_chat(int argc, char **argv);
/* chat's files and tool calls (cli/chat_io.c; slm_chat, slm_tools:
 * engine/chat.h, text/toolcall.h). --tools FILE checked with its
 * --tool-choice (name: the function NAMED forces): 0 after printing why. */
struct slm_chat;
struct slm_tools;
struct slm_err;
int slm_cli_tools_load(const char *path, int choice, const char *name, struct slm_tools *out);
/* The last reply's calls on stdout, one line each: "[tool_call] " and the
 * call as an element of OpenAI's message.tool_calls (JSON: id, type,
 * function: name, arguments as a JSON string). */
void slm_cli_print_calls(const struct slm_chat *c);
/* Each call's result from stdin, a line each in the calls' order (a
 * terminal: after a prompt naming the call), added as tool messages;
 * "//" at a line's start stands for "/". 0 at the end of input or /quit. */
int slm_cli_tool_results(struct slm_chat *c, int tty, char **line, size_t *cap);
/* /save, /load: the conversation as {"messages": [...]} in OpenAI's form
 * (tool_calls, tool_call_id, name kept). 0 with err. */
int slm_cli_save_conv(struct slm_chat *c, const char *path, struct slm_err *err);
int slm_cli_load_conv(struct slm_chat *c, const char *path, struct slm_err *err);
/* staticlm serve: the OpenAI-compatible server (src/cli/serve.c, src/server/). */
int slm_cli_serve(int argc, char **argv);
/* staticlm synth: random-weight GGUF models of real shapes (src/cli/synth.c). */
int slm_cli_synth(int argc, char **argv);
/* staticlm bench: prefill/decode tokens/s like llama-bench (src/cli/bench.c). */
int slm_cli_bench(int argc, char **argv);
/* staticlm tokenize: token ids of a text (src/cli/tokenize.c). */
int slm_cli_tokenize(int argc, char **argv);
/* staticlm embed: llama-embedding's embeddings of texts (src/cli/embed.c). */
int slm_cli_embed(int argc, char **argv);
/* staticlm perplexity: llama-perplexity's PPL and KL divergence (src/cli/perplexity.c). */
int slm_cli_perplexity(int argc, char **argv);

/* staticlm trace: the summary and SVG timeline of a --trace file (src/cli/trace.c). */
int slm_cli_trace(int argc, char **argv);

/* staticlm simulate: the programs replayed on a device profile (src/cli/simulate.c). */
int slm_cli_simulate(int argc, char **argv);

/* staticlm bench-features: what variants and the prefix cache save (src/cli/bench_features.c). */
int slm_cli_bench_features(int argc, char **argv);

#endif
