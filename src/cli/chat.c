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
#include "common/json.h"
#include "engine/chat.h"
#include "runtime/runtime.h"

#ifdef SLM_HAVE_CJSON
#include <cjson/cJSON.h>
#endif

/* ---- shared options ---------------------------------------------------------- */

const char slm_cli_common_help[] =
    "  -m, --model PATH          llama2.c .bin or .gguf (default: stories260K.bin from\n"
    "                            ./models or ../shared/models)\n"
    "  -z, --tokenizer PATH      llama2.c tokenizer.bin (default: the GGUF's own, or\n"
    "                            tokenizer.bin / tok512.bin beside MODEL)\n"
    "      --chat-template NAME|FILE  chatml, llama2, zephyr, llama3, or a Jinja file\n"
    "                            (default: the model's tokenizer.chat_template, else ChatML)\n"
    "      --temp T              temperature; 0 = greedy (default 0.8)\n"
    SLM_CLI_SAMPLING_HELP
    "      --seed S              sampling seed (default: time)\n"
    "      --max-prompt-len L    prefill program rows (default 1024)\n"
    "      --min-response-len R  KV rows beyond the prompt (default 128)\n"
    SLM_CLI_KV_TYPE_HELP
    SLM_CLI_PREFETCH_HELP
    "      --prefix-cache-mb M   KV rows of shared prompt prefixes kept for reuse, MiB;\n"
    "                            0 = off (default 64)\n"
    "      --checkpoints N       models with recurrent layers (Qwen3.5): saved states a\n"
    "                            shorter next prompt resumes from, each the state's\n"
    "                            size (default 3, at most 16)\n"
    "  -t, --threads N           worker threads (0 = all cores)\n"
    "      --max-memory N        refuse a model whose KV cache, arena and buffers need\n"
    "                            more than N MiB (default 75% of RAM; -1 = no limit)\n"
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
    if (!strcmp(o, "--kernels")) { VAL(); c->kernels = v; return 1; }
    if (!strcmp(o, "--schedule")) { VAL(); return slm_cli_parse_schedule(v, &c->opt.schedule) ? 1 : -1; }
    if (!strcmp(o, "-v") || !strcmp(o, "--verbose")) { c->verbose = 1; return 1; }
    if (!strcmp(o, "--kv-type")) { VAL(); return slm_cli_parse_kv_type(v, o, &c->opt.kv_type) ? 1 : -1; }
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
    if (!slm_cli_sampling_check(&c->samp, e)) {
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
            "usage: staticlm chat [-m MODEL] [-z TOKENIZER] [--system TEXT] [options]\n"
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
            "                            re-prefilling the whole history, then exit\n"
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
    fwrite(s, 1, n, stdout);
    fflush(stdout);
}

#ifdef SLM_HAVE_CJSON
static int save_conv(slm_chat *c, const char *path, slm_err *err) {
    slm_json_init_hooks();
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "messages");
    const slm_chat_msg *m = slm_chat_messages(c);
    for (int i = 0; i < slm_chat_count(c) && arr; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", m[i].role);
        cJSON_AddStringToObject(o, "content", m[i].content);
        if (m[i].reasoning_content) cJSON_AddStringToObject(o, "reasoning_content", m[i].reasoning_content);
        cJSON_AddItemToArray(arr, o);
    }
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) { slm_errf(err, SLM_ERR_NOMEM, "out of memory"); return 0; }
    FILE *f = fopen(path, "wb");
    int ok = f && fputs(txt, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f)) ok = 0;
    cJSON_free(txt);
    if (!ok) slm_errf(err, SLM_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return ok;
}

static int load_conv(slm_chat *c, const char *path, slm_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) { slm_errf(err, SLM_ERR_IO, "cannot open '%s': %s", path, strerror(errno)); return 0; }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            if (cap >= (64u << 20)) { free(buf); buf = NULL; break; }
            char *b = realloc(buf, cap * 2);
            if (!b) { free(buf); buf = NULL; break; }
            buf = b;
            cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        if (!k) break;
        n += k;
    }
    fclose(f);
    if (!buf) { slm_errf(err, SLM_ERR_IO, "'%s' is too large", path); return 0; }
    buf[n] = 0;
    slm_json_init_hooks();
    cJSON *root = cJSON_ParseWithLength(buf, n);
    free(buf);
    const cJSON *arr = root ? cJSON_GetObjectItemCaseSensitive(root, "messages") : NULL;
    int ok = cJSON_IsArray(arr);
    if (!ok) slm_errf(err, SLM_ERR_IO, "'%s' is not a saved conversation (an object with a \"messages\" array)", path);
    const cJSON *it;
    int idx = 0;
    if (ok) cJSON_ArrayForEach(it, arr) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(it, "role"), *t = cJSON_GetObjectItemCaseSensitive(it, "content");
        const cJSON *rc = cJSON_GetObjectItemCaseSensitive(it, "reasoning_content");
        if (!cJSON_IsString(r) || !cJSON_IsString(t) || (rc && !cJSON_IsString(rc)) ||
            (strcmp(r->valuestring, "system") && strcmp(r->valuestring, "user") && strcmp(r->valuestring, "assistant"))) {
            slm_errf(err, SLM_ERR_IO,
                     "'%s': message %d needs a role (system, user or assistant) and string content (and "
                     "reasoning_content, if any, a string)", path, idx);
            ok = 0;
            break;
        }
        idx++;
    }
    if (ok) {
        slm_chat_clear(c, 0);
        cJSON_ArrayForEach(it, arr) {
            const cJSON *rc = cJSON_GetObjectItemCaseSensitive(it, "reasoning_content");
            if (!slm_chat_add_ex(c, cJSON_GetObjectItemCaseSensitive(it, "role")->valuestring,
                                 cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring,
                                 rc ? rc->valuestring : NULL)) {
                slm_errf(err, SLM_ERR_NOMEM, "out of memory");
                ok = 0;
                break;
            }
        }
    }
    cJSON_Delete(root);
    return ok;
}
#else
static int save_conv(slm_chat *c, const char *path, slm_err *err) {
    (void)c; (void)path;
    slm_errf(err, SLM_ERR_IO, "/save is not available in this build (built without cJSON)");
    return 0;
}
static int load_conv(slm_chat *c, const char *path, slm_err *err) {
    (void)c; (void)path;
    slm_errf(err, SLM_ERR_IO, "/load is not available in this build (built without cJSON)");
    return 0;
}
#endif

static char *trim_line(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
    return s;
}

static int run_bench(slm_engine *e, slm_chat *c, const char *system) {
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
    printf("chat bench: first turn %d prompt + %d generated tokens; second turn adds %d tokens "
           "(whole history %d tokens; KV capacity %d)\n",
           st.prefilled, st.n_generated, n_new, n_full, in.kv_capacity);
    printf("second-turn time to first token (median of 9): KV kept %.3f ms, re-prefill whole history %.3f ms "
           "(%.1fx)\n", kept, full, kept > 0 ? full / kept : 0.0);
    return 0;
}

int slm_cli_chat(int argc, char **argv) {
    slm_cli_common cc;
    slm_cli_common_init(&cc);
    const char *system = NULL;
    int n_predict = 256, overflow = SLM_OVERFLOW_TRUNCATE, stats = 0, bench = 0, hide = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int r = slm_cli_common_opt(&cc, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) { usage_chat(stdout); return 0; }
        int has = i + 1 < argc;
        if (!strcmp(o, "--system") && has) system = argv[++i];
        else if ((!strcmp(o, "-n") || !strcmp(o, "--n-predict")) && has) {
            if (!slm_cli_parse_int(argv[++i], o, 0, 1 << 24, &n_predict)) return 2;
        } else if (!strcmp(o, "--on-overflow") && has) {
            const char *v = argv[++i];
            if (!strcmp(v, "truncate")) overflow = SLM_OVERFLOW_TRUNCATE;
            else if (!strcmp(v, "error")) overflow = SLM_OVERFLOW_ERROR;
            else { fprintf(stderr, "staticlm: --on-overflow expects truncate or error, got '%s'\n", v); return 2; }
        } else if (!strcmp(o, "--stats")) stats = 1;
        else if (!strcmp(o, "--bench")) bench = 1;
        else if (!strcmp(o, "--hide-reasoning")) hide = 1;
        else {
            fprintf(stderr, "staticlm: %s '%s' (see staticlm chat --help)\n",
                    (!strcmp(o, "--system") || !strcmp(o, "-n") || !strcmp(o, "--n-predict") || !strcmp(o, "--on-overflow"))
                        ? "missing value for" : "unknown option", o);
            return 2;
        }
    }
    if (hide && cc.reasoning == SLM_REASON_NONE) {
        fprintf(stderr, "staticlm: --hide-reasoning with --reasoning-format none: there is no reasoning to hide\n");
        return 2;
    }
    if (bench) {
        cc.samp.temperature = 0.0f;
        if (n_predict == 256) n_predict = 64;
    }
    slm_engine *e = slm_cli_common_load(&cc);
    if (!e) return 1;
    char note[512];
    slm_tmpl *tm = slm_chat_template_open(e, cc.chat_template, note, sizeof note);
    if (!tm) { fprintf(stderr, "staticlm: out of memory\n"); slm_free(e); return 1; }
    if (!strncmp(note, "warning", 7)) fprintf(stderr, "staticlm: %s\n", note);
    else if (cc.verbose || stats) fprintf(stderr, "[chat] %s\n", note);
    slm_chat_cfg cfg = {0};
    cfg.on_overflow = overflow;
    cfg.samp = cc.samp;
    cfg.n_predict = n_predict;
    cfg.reasoning = slm_cli_reasoning_resolve(&cc, e, tm, "[chat]");
    cfg.kwargs = cc.kwargs;
    cfg.n_kwargs = cc.n_kwargs;
    slm_chat *c = slm_chat_new(e, tm, &cfg);
    if (!c) { fprintf(stderr, "staticlm: out of memory\n"); slm_tmpl_free(tm); slm_free(e); return 1; }
    if (system) slm_chat_add(c, "system", system);
    int rc = 0;
    if (bench) {
        rc = run_bench(e, c, system);
        slm_chat_free(c);
        slm_tmpl_free(tm);
        slm_free(e);
        return rc;
    }
    int tty = isatty(0);
    if (tty) fprintf(stderr, "staticlm chat: /reset, /save FILE, /load FILE, /quit\n");
    char *line = NULL;
    size_t lcap = 0;
    for (;;) {
        if (tty) { fputs("> ", stdout); fflush(stdout); }
        if (getline(&line, &lcap, stdin) < 0) break;
        trim_line(line);
        if (!line[0]) continue;
        slm_err err = {0};
        if (line[0] == '/') {
            if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
            if (!strcmp(line, "/reset")) {
                slm_chat_clear(c, 1);
                fprintf(stderr, "[chat] conversation reset%s\n", slm_chat_count(c) ? " (system prompt kept)" : "");
                continue;
            }
            if (!strncmp(line, "/save ", 6) || !strncmp(line, "/load ", 6)) {
                const char *path = line + 6;
                while (*path == ' ') path++;
                int ok = line[1] == 's' ? save_conv(c, path, &err) : load_conv(c, path, &err);
                if (!ok) { fprintf(stderr, "staticlm: %s\n", err.msg); rc = 1; }
                else fprintf(stderr, "[chat] %s %d messages %s %s\n", line[1] == 's' ? "saved" : "loaded",
                             slm_chat_count(c), line[1] == 's' ? "to" : "from", path);
                continue;
            }
            if (line[1] != '/') {
                fprintf(stderr, "staticlm: unknown command '%s' (/reset, /save FILE, /load FILE, /quit; "
                                "start a message with // to send a literal /)\n", line);
                continue;
            }
        }
        const char *msg = line[0] == '/' ? line + 1 : line;
        chat_out out = {isatty(1), hide, 0};
        slm_chat_stats st;
        slm_chat_on_text(c, print_text, &out);
        slm_status s = slm_chat_turn(c, msg, NULL, NULL, &st, &err, note, sizeof note);
        think_end(&out);
        if (note[0]) fprintf(stderr, "[chat] %s\n", note);
        if (s && s != SLM_OK && st.turn == 0) {
            fprintf(stderr, "staticlm: %s\n", err.msg);
            rc = 1;
            continue;
        }
        fputc('\n', stdout);
        fflush(stdout);
        if (s) { fprintf(stderr, "staticlm: %s\n", err.msg); rc = 1; }
        if (st.cut) fprintf(stderr, "[chat] the reply stopped at the KV capacity (%d)\n", slm_capacity(e));
        if (stats || cc.verbose)
            fprintf(stderr,
                    "[chat] turn=%d prefilled=%d kept=%d stored=%d generated=%d full=%d dropped=%d "
                    "cached=%d ttft_ms=%.2f decode_ms=%.2f\n",
                    st.turn, st.prefilled, st.kept, st.n_stored, st.n_generated, st.full, st.dropped, st.cached,
                    st.ttft_ms, st.decode_ms);
    }
    free(line);
    slm_chat_free(c);
    slm_tmpl_free(tm);
    slm_free(e);
    return rc;
}
