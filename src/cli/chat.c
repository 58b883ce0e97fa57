/* staticlm chat: an interactive conversation on the KV cache; and the option
 * parsing / model loading shared with staticlm serve (cli/cli.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "device/kernels.h"
#include "engine/chat.h"
#include "runtime/runtime.h"
#include "text/toolcall.h"


/* ---- shared options ---------------------------------------------------------- */

const char slm_cli_common_help[] =
    "  -m, --model PATH          GGUF, llama2.c .bin, Hugging Face folder, or a blob\n"
    "                            (default: stories260K.bin from ./models or ../shared/models)\n"
    "  -z, --tokenizer PATH      llama2.c tokenizer.bin (default: the GGUF's own, or\n"
    "                            tokenizer.bin / tok512.bin beside MODEL)\n"
    "      --chat-template NAME|FILE  chatml, llama2, zephyr, llama3, or a Jinja file\n"
    "                            (default: the model's tokenizer.chat_template, else ChatML)\n"
    "      --temp T              temperature; 0 = greedy (default 0.8)\n"
    SLM_CLI_SAMPLING_HELP
    "      --seed S              sampling seed (default: time)\n"
    "      --max-prompt-len L    prefill program rows (default 1024)\n"
    "      --min-response-len R  KV rows beyond the prompt (default 128)\n"
    SLM_CLI_KV_TYPE_HELP SLM_CLI_WEIGHT_TYPE_HELP
    SLM_CLI_PREFETCH_HELP
    "      --prefix-cache-mb M   KV rows of shared prompt prefixes kept for reuse, MiB;\n"
    "                            0 = off (default 64)\n"
    "      --checkpoints N       models with recurrent layers (Qwen3.5): saved states a\n"
    "                            shorter next prompt resumes from, each the state's\n"
    "                            size (default 3, at most 16)\n"
    "  -t, --threads N           worker threads (0 = all cores)\n"
    "      --max-memory N        refuse a model whose KV cache, arena and buffers need\n"
    "                            more than N MiB (default 75% of RAM; -1 = no limit)\n"
    "      --cache-dir DIR       compile MODEL once into a blob in DIR (with serve's\n"
    "                            --parallel N: its batch programs too), map it later\n"
    "      --verify-cache        hash the model whole to check the cached blob\n"
    "      --kernels NAME        scalar | avx2 | avx512 | amx (default: best for this CPU)\n"
    "      --schedule S          rendezvous (default) | counted: how threads meet\n"
    "                            between stages (docs/config.md)\n"
    SLM_CLI_TRACE_HELP
    "  -v, --verbose             model facts and per-turn statistics on stderr\n";

const char slm_cli_reasoning_help[] =
    "      --reasoning-format F  none | deepseek | harmony | auto: how the model's thinking\n"
    "                            is told from its answer: deepseek <think>...</think>,\n"
    "                            harmony gpt-oss's channels, none = all is answer;\n"
    "                            auto (default) picks by the vocabulary and template\n"
    "      --chat-template-kwargs JSON  a JSON object whose members become chat\n"
    "                            template variables, e.g. '{\"enable_thinking\": false}'\n"
    "      --no-think            the same as {\"enable_thinking\": false} (Qwen3 and\n"
    "                            others answer without thinking)\n";



void slm_cli_common_init(slm_cli_common *c) {
    memset(c, 0, sizeof *c);
    c->opt = slm_default_options();
    slm_cli_sampling_init(&c->samp, 0.8f);
    c->opt.prefix_cache_mb = 64; /* shared prefixes (a system prompt) are prefilled once */
    c->reasoning = SLM_REASON_AUTO;
}

/* --reasoning-format, --chat-template-kwargs, --no-think: 1 consumed, 0 not
 * one of them, -1 a bad value (said). */
static int reasoning_opt(slm_cli_common *c, const char *o, const char *v, int *i) {
    if (!strcmp(o, "--no-think")) {
        c->no_think = 1;
        return 1;
    }
    int fmt = !strcmp(o, "--reasoning-format");
    if (!fmt && strcmp(o, "--chat-template-kwargs")) return 0;
    if (!v) {
        fprintf(stderr, "staticlm: %s needs a value\n", o);
        return -1;
    }
    (*i)++;
    if (fmt) {
        c->reasoning = slm_reason_format_parse(v);
        if (c->reasoning >= 0) return 1;
        fprintf(stderr, "staticlm: --reasoning-format expects %s, got '%s'\n", SLM_REASON_FORMATS, v);
        return -1;
    }
    slm_err err = {0};
    if (!slm_tmpl_kwargs_check(v, &err)) {
        fprintf(stderr, "staticlm: --chat-template-kwargs: %s\n", err.msg);
        return -1;
    }
    c->kwargs_json = v;
    return 1;
}

int slm_cli_reasoning_resolve(const slm_cli_common *c, slm_engine *e, const slm_tmpl *tm, const char *who) {
    int fmt = c->reasoning == SLM_REASON_AUTO ? slm_chat_reasoning_auto(e, tm) : c->reasoning;
    if (c->verbose)
        fprintf(stderr, "%s reasoning format %s%s\n", who, slm_reason_format_name(fmt),
                c->reasoning == SLM_REASON_AUTO ? " (auto)" : "");
    if (c->no_think && !strstr(slm_tmpl_source(tm), "enable_thinking"))
        fprintf(stderr, "staticlm: warning: --no-think: the chat template never reads enable_thinking; "
                        "the model may think anyway\n");
    return fmt;
}

int slm_cli_common_opt(slm_cli_common *c, int argc, char **argv, int *i) {
    const char *o = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
#define VAL()                                                                  \
    do {                                                                       \
        if (!v) {                                                              \
            fprintf(stderr, "staticlm: %s needs a value\n", o);                \
            return -1;                                                         \
        }                                                                      \
        (*i)++;                                                                \
    } while (0)
    const int tr = slm_cli_trace_opt(argc, argv, i);
    if (tr) return tr;
    const int ro = reasoning_opt(c, o, v, i);
    if (ro) return ro;
    if (!strcmp(o, "-m") || !strcmp(o, "--model")) { VAL(); c->model = v; return 1; }
    if (!strcmp(o, "-z") || !strcmp(o, "--tokenizer")) { VAL(); c->tok = v; return 1; }
    if (!strcmp(o, "--chat-template")) { VAL(); c->chat_template = v; return 1; }
    if (!strcmp(o, "--cache-dir")) { VAL(); c->opt.cache_dir = v; return 1; }
    if (!strcmp(o, "--verify-cache")) { c->opt.verify_cache = 1; return 1; }
    if (!strcmp(o, "--kernels")) { VAL(); c->kernels = v; return 1; }
    if (!strcmp(o, "--schedule")) { VAL(); return slm_cli_parse_schedule(v, &c->opt.schedule) ? 1 : -1; }
    if (!strcmp(o, "-v") || !strcmp(o, "--verbose")) { c->verbose = 1; return 1; }
    if (!strcmp(o, "--kv-type")) { VAL(); return slm_cli_parse_kv_type(v, o, &c->opt.kv_type) ? 1 : -1; }
    if (!strcmp(o, "--weight-type")) { VAL(); return slm_cli_parse_weight_type(v, o, &c->opt.weight_type) ? 1 : -1; }
    if (!strcmp(o, "--prefetch")) { VAL(); return slm_cli_parse_prefetch(v, o, &c->opt.prefetch) ? 1 : -1; }
    if (!strcmp(o, "--max-prompt-len")) { VAL(); return slm_cli_parse_int(v, o, 1, 1 << 20, &c->opt.max_prompt_len) ? 1 : -1; }
    if (!strcmp(o, "--min-response-len")) { VAL(); return slm_cli_parse_int(v, o, 0, 1 << 20, &c->opt.min_response_len) ? 1 : -1; }
    if (!strcmp(o, "--prefix-cache-mb")) { VAL(); return slm_cli_parse_int(v, o, 0, 1 << 20, &c->opt.prefix_cache_mb) ? 1 : -1; }
    if (!strcmp(o, "--checkpoints")) { VAL(); return slm_cli_parse_int(v, o, 1, SLM_RT_SNAPS_MAX, &c->opt.recur_checkpoints) ? 1 : -1; }
    if (!strcmp(o, "-t") || !strcmp(o, "--threads")) { VAL(); return slm_cli_parse_int(v, o, 0, 1024, &c->threads) ? 1 : -1; }
    if (!strcmp(o, "--max-memory")) {
        VAL();
        int mb;
        if (!slm_cli_parse_int(v, o, -1, 1 << 30, &mb)) return -1;
        c->opt.max_memory_mb = mb;
        return 1;
    }
    const int so = slm_cli_sampling_opt(&c->samp, argc, argv, i);
    if (so) return so;
    if (!strcmp(o, "--seed")) {
        VAL();
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (errno || *end || end == v) {
            fprintf(stderr, "staticlm: --seed expects an integer, got '%s'\n", v);
            return -1;
        }
        c->samp.seed = s;
        c->seed_set = 1;
        return 1;
    }
#undef VAL
    return 0;
}


slm_engine *slm_cli_common_load(slm_cli_common *c) {
    if (!slm_cli_trace_begin()) return NULL;
    c->opt.verbose = c->verbose;
    c->opt.n_threads = c->threads;
    c->n_kwargs = 0;
    if (c->kwargs_json) c->kwargs[c->n_kwargs++] = c->kwargs_json;
    if (c->no_think) c->kwargs[c->n_kwargs++] = "{\"enable_thinking\": false}";
    slm_engine *e = slm_cli_open(&c->model, &c->tok, c->kernels, &c->opt);
    if (!e) return NULL;
    if (!slm_cli_sampling_check(&c->samp, e, c->verbose)) {
        slm_free(e);
        return NULL;
    }
    if (!c->seed_set) c->samp.seed = (uint64_t)time(NULL);
    if (c->verbose) {
        slm_info in;
        slm_get_info(e, &in);
        fprintf(stderr, "model: %s, vocab %d, context %d; prefill %d rows, KV capacity %d\n", c->model,
                in.vocab_size, in.context_len, in.max_prompt_len, in.kv_capacity);
    }
    return e;
}

/* ---- chat -------------------------------------------------------------------- */

static void usage_chat(FILE *f) {
    fprintf(f,
            "usage: staticlm chat [-m MODEL] [-z TOKENIZER] [--system TEXT] [--tools FILE] [options]\n"
            "\n"
            "A conversation with the model. Each turn prefills only its new tokens onto the\n"
            "KV cache kept from earlier turns. Reads lines from the terminal (or, when stdin\n"
            "is not a terminal, one turn per line). Commands:\n"
            "  /reset        start over (keeps the system prompt)\n"
            "  /save FILE    write the conversation as JSON\n"
            "  /load FILE    read a conversation saved with /save (the next turn prefills it)\n"
            "  /quit         leave (also end of input)\n"
            "\n"
            "      --system TEXT         system prompt\n"
            "  -n, --n-predict N         most tokens per reply (default 256; 0 = until EOS or\n"
            "                            the KV capacity)\n"
            "      --on-overflow P       truncate | error: when the history outgrows the KV\n"
            "                            capacity, drop the oldest turns (keeping the system\n"
            "                            prompt) and re-prefill, or refuse the turn (default truncate)\n"
            "      --stats               one line per turn on stderr: tokens prefilled / kept\n"
            "      --bench               time the second turn's first token with the KV kept vs\n"
            "                            re-prefilling the whole history, then exit (the first\n"
            "                            reply greedy and at most 64 tokens unless --temp or -n\n"
            "                            is given)\n"
            "      --tools FILE          function calling: FILE holds an OpenAI tools array\n"
            "                            ([{\"type\": \"function\", \"function\": {\"name\", \"description\",\n"
            "                            \"parameters\"}}]), rendered by the chat template. Each call\n"
            "                            a reply makes is printed as a line '[tool_call] JSON' (an\n"
            "                            element of OpenAI's tool_calls); then each call's result is\n"
            "                            read, one line per call in order (a terminal prompts for\n"
            "                            it), sent back as a tool message, and the reply continues\n"
            "      --tool-choice C       auto (default: the reply may call) | none (the tools are\n"
            "                            rendered, replies not parsed for calls) | required (the\n"
            "                            reply to each message is calls, held to the tools'\n"
            "                            schemas by a grammar) | NAME (calls to function NAME)\n"
            "      --no-parallel-tool-calls  at most one call per reply\n"
            "%s"
            "      --hide-reasoning      do not show the model's thinking (it is shown dimmed on\n"
            "                            a terminal, else between [thinking] and [/thinking] lines)\n"
            "%s"
            "  -h, --help                this text\n",
            slm_cli_reasoning_help, slm_cli_common_help);
}

/* The reply on stdout: the answer as it comes, the thinking dimmed (a
 * terminal), marked with [thinking] lines, or hidden. */
typedef struct chat_out {
    int tty, hide;
    int in_think; /* the thinking is being printed */
    int printed;  /* something of the reply was printed */
} chat_out;

static void think_end(chat_out *o) {
    if (!o->in_think) return;
    fputs(o->tty ? "\033[0m\n" : "\n[/thinking]\n", stdout);
    o->in_think = 0;
}

static void print_text(void *ud, int kind, const char *s, size_t n) {
    chat_out *o = ud;
    if (kind == SLM_REASON_THINK) {
        if (o->hide) return;
        if (!o->in_think) fputs(o->tty ? "\033[2m" : "[thinking]\n", stdout);
        o->in_think = 1;
    } else {
        think_end(o);
    }
    o->printed = 1;
    fwrite(s, 1, n, stdout);
    fflush(stdout);
}

/* -v: each turn's rendered prompt, and the grammar of a forced reply. */
static void print_prompt(void *ud, const char *prompt, const char *grammar) {
    const slm_chat *c = ud;
    fprintf(stderr, "[chat] the rendered prompt:\n%s\n[chat] (end of the prompt)\n", prompt);
    if (grammar) fprintf(stderr, "[chat] the tool call grammar (%s):\n%s", slm_tool_format_name(slm_chat_tool_format(c)), grammar);
}

static char *trim_line(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
    return s;
}

static int run_bench(slm_engine *e, slm_chat *c, const char *system, float temp) {
    static const char *const turn1 =
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
        "friends. One day, she saw a big red ball under a tree. She wanted to play with it, but it was not hers. "
        "Lily asked her mom if she could play with the ball. Her mom said yes, but she had to give it back when "
        "she was done. Tell me what happened next.";
    static const char *const turn2 = "What did Lily do after she gave the ball back?";
    slm_err err = {0};
    char note[512];
    if (!system) slm_chat_add(c, "system", "You are a storyteller.");
    slm_chat_stats st;
    slm_status s = slm_chat_turn(c, turn1, NULL, NULL, &st, &err, note, sizeof note);
    if (s) { fprintf(stderr, "staticlm: bench: %s\n", err.msg); return 1; }
    double kept = 0, full = 0;
    int n_new = 0, n_full = 0;
    s = slm_chat_bench_ttft(c, turn2, 9, &kept, &full, &n_new, &n_full, &err);
    if (s) { fprintf(stderr, "staticlm: %s\n", err.msg); return 1; }
    slm_info in;
    slm_get_info(e, &in);
    char how[32] = "greedy";
    if (temp > 0) snprintf(how, sizeof how, "temperature %g", temp);
    printf("chat bench: first turn %d prompt + %d generated tokens (%s); second turn adds %d tokens "
           "(whole history %d tokens; KV capacity %d)\n",
           st.prefilled, st.n_generated, how, n_new, n_full, in.kv_capacity);
    printf("second-turn time to first token (median of 9): KV kept %.3f ms, re-prefill whole history %.3f ms "
           "(%.1fx)\n", kept, full, kept > 0 ? full / kept : 0.0);
    return 0;
}

/* chat's own options (slm_cli_common_opt takes the shared ones). */
typedef struct chat_opts {
    slm_cli_common cc;
    const char *system;
    int n_predict, overflow, stats, bench, hide;
    int n_set, temp_set;    /* -n, --temp given (--bench's defaults give way) */
    const char *tools_path; /* --tools */
    int tool_choice;        /* --tool-choice: SLM_TOOL_CHOICE_*, -1 not given */
    const char *tool_name;  /* --tool-choice NAME */
    int one_call;           /* --no-parallel-tool-calls */
} chat_opts;

/* 0 to go on, else the exit status + 1 (1: --help printed, exit 0). */
static int parse_chat(int argc, char **argv, chat_opts *p) {
    slm_cli_common *cc = &p->cc;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        p->temp_set |= !strcmp(o, "--temp");
        int r = slm_cli_common_opt(cc, argc, argv, &i);
        if (r < 0) return 3;
        if (r) continue;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) { usage_chat(stdout); return 1; }
        int has = i + 1 < argc;
        if (!strcmp(o, "--system") && has) p->system = argv[++i];
        else if ((!strcmp(o, "-n") || !strcmp(o, "--n-predict")) && has) {
            if (!slm_cli_parse_int(argv[++i], o, 0, 1 << 24, &p->n_predict)) return 3;
            p->n_set = 1;
        } else if (!strcmp(o, "--on-overflow") && has) {
            const char *v = argv[++i];
            if (!strcmp(v, "truncate")) p->overflow = SLM_OVERFLOW_TRUNCATE;
            else if (!strcmp(v, "error")) p->overflow = SLM_OVERFLOW_ERROR;
            else { fprintf(stderr, "staticlm: --on-overflow expects truncate or error, got '%s'\n", v); return 3; }
        } else if (!strcmp(o, "--tools") && has) p->tools_path = argv[++i];
        else if (!strcmp(o, "--tool-choice") && has) {
            const char *v = argv[++i];
            p->tool_choice = slm_tool_choice_parse(v);
            if (p->tool_choice < 0 && !slm_tool_name_ok(v)) {
                fprintf(stderr, "staticlm: --tool-choice expects auto, none, required or a function's name (1-64 of "
                                "a-z A-Z 0-9 _ - .), got '%s'\n", v);
                return 3;
            }
            if (p->tool_choice < 0) p->tool_choice = SLM_TOOL_CHOICE_NAMED, p->tool_name = v;
        } else if (!strcmp(o, "--no-parallel-tool-calls")) p->one_call = 1;
        else if (!strcmp(o, "--stats")) p->stats = 1;
        else if (!strcmp(o, "--bench")) p->bench = 1;
        else if (!strcmp(o, "--hide-reasoning")) p->hide = 1;
        else {
            fprintf(stderr, "staticlm: %s '%s' (see staticlm chat --help)\n",
                    (!strcmp(o, "--system") || !strcmp(o, "-n") || !strcmp(o, "--n-predict") || !strcmp(o, "--on-overflow") ||
                     !strcmp(o, "--tools") || !strcmp(o, "--tool-choice"))
                        ? "missing value for" : "unknown option", o);
            return 3;
        }
    }
    if (p->hide && cc->reasoning == SLM_REASON_NONE) {
        fprintf(stderr, "staticlm: --hide-reasoning with --reasoning-format none: there is no reasoning to hide\n");
        return 3;
    }
    if (!p->tools_path && (p->tool_choice >= 0 || p->one_call)) {
        fprintf(stderr, "staticlm: %s needs --tools FILE\n", p->one_call ? "--no-parallel-tool-calls" : "--tool-choice");
        return 3;
    }
    if (p->tools_path && p->bench) {
        fprintf(stderr, "staticlm: --bench times plain turns: give it no --tools\n");
        return 3;
    }
    if (p->tool_choice >= SLM_TOOL_CHOICE_REQUIRED && cc->samp.grammar) {
        fprintf(stderr, "staticlm: --tool-choice %s constrains the reply itself: give no --grammar, --grammar-file or "
                        "--json-schema with it\n", p->tool_name ? p->tool_name : "required");
        return 3;
    }
    return 0;
}

/* After the template is open: a forced tool choice needs the model's call
 * format; warn where the tools would not reach the prompt or calls would
 * not be recognized. 0 after printing why. */
static int tools_fit_template(const chat_opts *p, slm_engine *e, const slm_tmpl *tm) {
    const int fmt = slm_chat_tool_auto(e, tm);
    if (p->cc.verbose) fprintf(stderr, "[chat] tool call format %s\n", slm_tool_format_name(fmt));
    if (!strstr(slm_tmpl_source(tm), "tools"))
        fprintf(stderr, "staticlm: warning: --tools: the chat template never reads tools: they are not in the prompt "
                        "(--chat-template FILE with one that does)\n");
    if (fmt != SLM_TOOL_NONE || p->tool_choice == SLM_TOOL_CHOICE_NONE) return 1;
    if (p->tool_choice >= SLM_TOOL_CHOICE_REQUIRED) {
        fprintf(stderr, "staticlm: --tool-choice %s needs the model's tool call format, and this model's template and "
                        "vocabulary show none that staticlm knows (%s)\n",
                p->tool_name ? p->tool_name : "required", "hermes, llama3, mistral, harmony, xml, gemma4");
        return 0;
    }
    fprintf(stderr, "staticlm: warning: --tools: this model's template and vocabulary show no tool call format "
                    "staticlm knows: the tools are rendered, replies are not parsed for calls\n");
    return 1;
}

typedef struct chat_run {
    slm_engine *e;
    slm_chat *c;
    const chat_opts *p;
    int rc;
} chat_run;

/* One turn (msg NULL: the reply to the tool results just added), printed;
 * the calls it made (printed too), 0 when none or it failed. */
static int one_turn(chat_run *r, const char *msg) {
    chat_out out = {isatty(1), r->p->hide, 0, 0};
    slm_chat_stats st;
    slm_err err = {0};
    char note[512];
    slm_chat_on_text(r->c, print_text, &out);
    slm_status s = slm_chat_turn(r->c, msg, NULL, NULL, &st, &err, note, sizeof note);
    think_end(&out);
    if (note[0]) fprintf(stderr, "[chat] %s\n", note);
    if (s && st.turn == 0) {
        fprintf(stderr, "staticlm: %s\n", err.msg);
        r->rc = 1;
        return 0;
    }
    if (out.printed || !st.n_calls) fputc('\n', stdout);
    if (st.n_calls) slm_cli_print_calls(r->c);
    fflush(stdout);
    if (s) { fprintf(stderr, "staticlm: %s\n", err.msg); r->rc = 1; }
    if (st.cut) fprintf(stderr, "[chat] the reply stopped at the KV capacity (%d)\n", slm_capacity(r->e));
    if (r->p->stats || r->p->cc.verbose)
        fprintf(stderr,
                "[chat] turn=%d prefilled=%d kept=%d stored=%d generated=%d full=%d dropped=%d "
                "cached=%d ttft_ms=%.2f decode_ms=%.2f calls=%d\n",
                st.turn, st.prefilled, st.kept, st.n_stored, st.n_generated, st.full, st.dropped, st.cached,
                st.ttft_ms, st.decode_ms, st.n_calls);
    return s ? 0 : st.n_calls;
}

/* A command line (starting with '/'): 1 handled, 0 leave, -1 a message
 * (a literal '/', "//..."). */
static int command(chat_run *r, const char *line) {
    slm_err err = {0};
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) return 0;
    if (!strcmp(line, "/reset")) {
        slm_chat_clear(r->c, 1);
        fprintf(stderr, "[chat] conversation reset%s\n", slm_chat_count(r->c) ? " (system prompt kept)" : "");
        return 1;
    }
    if (!strncmp(line, "/save ", 6) || !strncmp(line, "/load ", 6)) {
        const char *path = line + 6;
        while (*path == ' ') path++;
        int ok = line[1] == 's' ? slm_cli_save_conv(r->c, path, &err) : slm_cli_load_conv(r->c, path, &err);
        if (!ok) { fprintf(stderr, "staticlm: %s\n", err.msg); r->rc = 1; }
        else fprintf(stderr, "[chat] %s %d messages %s %s\n", line[1] == 's' ? "saved" : "loaded",
                     slm_chat_count(r->c), line[1] == 's' ? "to" : "from", path);
        return 1;
    }
    if (line[1] == '/') return -1;
    fprintf(stderr, "staticlm: unknown command '%s' (/reset, /save FILE, /load FILE, /quit; "
                    "start a message with // to send a literal /)\n", line);
    return 1;
}

/* The conversation: a turn per line, and after a reply with calls their
 * results and the reply to them, until the end of input or /quit. */
static void converse(chat_run *r) {
    int tty = isatty(0);
    if (tty) fprintf(stderr, "staticlm chat: /reset, /save FILE, /load FILE, /quit\n");
    char *line = NULL;
    size_t lcap = 0;
    for (;;) {
        if (tty) { fputs("> ", stdout); fflush(stdout); }
        if (getline(&line, &lcap, stdin) < 0) break;
        trim_line(line);
        if (!line[0]) continue;
        int cmd = line[0] == '/' ? command(r, line) : -1;
        if (cmd == 0) break;
        if (cmd > 0) continue;
        int calls = one_turn(r, line[0] == '/' ? line + 1 : line);
        while (calls > 0) {
            if (!slm_cli_tool_results(r->c, tty, &line, &lcap)) goto out;
            calls = one_turn(r, NULL);
        }
    }
out:
    free(line);
}

int slm_cli_chat(int argc, char **argv) {
    chat_opts p = {0};
    slm_cli_common_init(&p.cc);
    p.n_predict = 256;
    p.overflow = SLM_OVERFLOW_TRUNCATE;
    p.tool_choice = -1;
    int pr = parse_chat(argc, argv, &p);
    if (pr) return pr - 1;
    slm_tools tools = {0};
    const int choice = p.tool_choice < 0 ? SLM_TOOL_CHOICE_AUTO : p.tool_choice;
    if (p.tools_path && !slm_cli_tools_load(p.tools_path, choice, p.tool_name, &tools)) return 2;
    if (p.bench) { /* a short greedy first reply, unless told otherwise */
        if (!p.temp_set) p.cc.samp.temperature = 0.0f, slm_cli_sampling_mark("--temp");
        if (!p.n_set) p.n_predict = 64;
    }
    chat_run r = {0};
    r.p = &p;
    slm_tmpl *tm = NULL;
    r.e = slm_cli_common_load(&p.cc);
    if (!r.e) { r.rc = 1; goto out; }
    char note[512];
    tm = slm_chat_template_open(r.e, p.cc.chat_template, note, sizeof note);
    if (!tm) { fprintf(stderr, "staticlm: out of memory\n"); r.rc = 1; goto out; }
    if (!strncmp(note, "warning", 7)) fprintf(stderr, "staticlm: %s\n", note);
    else if (p.cc.verbose || p.stats) fprintf(stderr, "[chat] %s\n", note);
    if (tools.json && !tools_fit_template(&p, r.e, tm)) { r.rc = 1; goto out; }
    slm_chat_cfg cfg = {0};
    cfg.on_overflow = p.overflow;
    cfg.samp = p.cc.samp;
    cfg.n_predict = p.n_predict;
    cfg.reasoning = slm_cli_reasoning_resolve(&p.cc, r.e, tm, "[chat]");
    cfg.kwargs = p.cc.kwargs;
    cfg.n_kwargs = p.cc.n_kwargs;
    cfg.tools = tools.json;
    cfg.tool_choice = choice;
    cfg.tool_fns = tools.fns;
    cfg.n_tool_fns = tools.n_fns;
    cfg.one_tool_call = p.one_call;
    r.c = slm_chat_new(r.e, tm, &cfg);
    if (!r.c) { fprintf(stderr, "staticlm: out of memory\n"); r.rc = 1; goto out; }
    if (p.cc.verbose) slm_chat_on_prompt(r.c, print_prompt, r.c);
    if (p.system) slm_chat_add(r.c, "system", p.system);
    if (p.bench) r.rc = run_bench(r.e, r.c, p.system, p.cc.samp.temperature);
    else converse(&r);
out:
    slm_chat_free(r.c);
    slm_tmpl_free(tm);
    slm_free(r.e);
    slm_tools_free(&tools);
    return r.rc;
}
