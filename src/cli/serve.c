/* staticlm serve: parse the options, open the model and the chat template,
 * run the server (src/server/) until SIGINT or SIGTERM. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/chat.h"
#include "server/server.h"

#ifndef SLM_HAVE_SERVE

int slm_cli_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "staticlm: serve is not available in this build: it needs libmicrohttpd and cJSON at build time\n"
                    "(Debian: apt-get install libmicrohttpd-dev libcjson-dev, then rebuild)\n");
    return 1;
}

#else

#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>

static void usage_serve(FILE *f) {
    fprintf(f,
            "usage: staticlm serve [-m MODEL] [-z TOKENIZER] [--host ADDR] [--port N] [--queue N] [options]\n"
            "\n"
            "An OpenAI-compatible HTTP server for one model; --parallel requests decode\n"
            "together (one walk of the weights per step), new ones join between steps:\n"
            "  POST /v1/chat/completions   chat (the chat template renders the messages)\n"
            "  POST /v1/completions        raw prompt (with BOS), or token ids as sent;\n"
            "                              default max_tokens 16\n"
            "  GET  /v1/models, GET /health, GET /metrics (Prometheus text: requests by\n"
            "                              outcome, 503s, tokens, seconds, slots, KV rows)\n"
            "  GET  /props                 llama-server's: n_ctx, slots, sampling defaults,\n"
            "                              chat template\n"
            "  POST /completion            llama-server's own: a completion's fields (no\n"
            "                              n_predict: until a stop), its answer's form\n"
            "                              (content, stop, tokens_predicted, stop_type, timings)\n"
            "  POST /tokenize, /detokenize (llama-server's: content, add_special,\n"
            "                              parse_special, with_pieces; tokens)\n"
            "  POST /v1/embeddings         with --embeddings: OpenAI's (input: texts or token\n"
            "                              ids; encoding_format float | base64)\n"
            "  POST /embedding, /embeddings  llama-server's (content; embd_normalize)\n"
            "  POST /v1/rerank             with --reranking: llama-server's (query, documents,\n"
            "                              top_n; TEI's texts, return_text)\n"
            "  POST /infill                llama-server's fill in the middle (code models with\n"
            "                              FIM tokens): input_prefix, input_suffix,\n"
            "                              input_extra [{filename, text}], prompt, and a\n"
            "                              completion's fields; /completion's answer\n"
            "Requests take model, max_tokens, temperature, top_p, top_k, min_p, seed,\n"
            "presence_penalty, frequency_penalty, repeat_penalty, repeat_last_n, logit_bias,\n"
            "stop (a string or up to 4), stream (server-sent events) and\n"
            "stream_options.include_usage; what a request leaves out takes the sampling\n"
            "options below. Structured output: response_format {\"type\": \"json_object\"}\n"
            "or {\"type\": \"json_schema\", \"json_schema\": {\"schema\": ...}}, or llama-server's\n"
            "grammar (GBNF) and json_schema fields. Log-probabilities: chat's logprobs and\n"
            "top_logprobs (0-20), completions' logprobs N (0-20), of the model's raw\n"
            "distribution. llama-server's n_predict and ignore_eos are taken; echo,\n"
            "best_of, suffix and the samplers staticlm lacks (mirostat, typical_p, tfs_z,\n"
            "dynatemp_range, xtc_probability, dry_multiplier, top_n_sigma) are refused with\n"
            "400 unless off.\n"
            "Chat requests also take tools, tool_choice (auto, none,\n"
            "required, or a function: the reply is then a call in the model's format under\n"
            "a grammar, its arguments as the function's schema allows) and\n"
            "parallel_tool_calls: the template renders the\n"
            "tools, tool messages and assistant tool_calls, and the model's calls come back\n"
            "as message.tool_calls (streamed: delta.tool_calls), finish_reason tool_calls;\n"
            "-v prints each rendered prompt. And reasoning_format (as\n"
            "--reasoning-format), chat_template_kwargs (an object, over\n"
            "--chat-template-kwargs) and reasoning_effort (minimal | low | medium | high:\n"
            "the template variable, as gpt-oss's template reads it). A chat reply's thinking comes apart from its answer:\n"
            "message.reasoning_content (streamed: delta.reasoning_content), the answer in\n"
            "content; messages sent back may carry reasoning_content.\n"
            "One line per request goes to stderr.\n"
            "\n"
            "      --host ADDR           IPv4 address to listen on (default 127.0.0.1)\n"
            "      --port N              TCP port; 0 = any free port (default 8080); the\n"
            "                            address is printed on stderr\n"
            "      --parallel N          slots: requests decoded together, each with its own\n"
            "                            KV rows (default 4); from a blob compiled with\n"
            "                            --parallel P: 1 to P\n"
            "      --queue N             requests that may wait for a slot; more get 503\n"
            "                            (default 8)\n"
            "      --prefill-chunk N     while other slots decode, a new prompt is prefilled\n"
            "                            N tokens between their steps, so their streams do not\n"
            "                            stall for a long prompt (default 128; 0 = the whole\n"
            "                            prompt before the next step)\n"
            "      --cache-dir DIR       compile MODEL once into a blob in DIR (with --embeddings,\n"
            "                            its embedding programs too) and map it on later starts;\n"
            "                            from a cached blob the slots decode one by one\n"
            "      --embeddings          also answer POST /v1/embeddings, /embedding and\n"
            "                            /embeddings (compiles the embedding programs, or runs\n"
            "                            a blob's: compile --embeddings); --embedding is the same\n"
            "      --pooling P           none | mean | cls | last: how the embeddings pool a\n"
            "                            text's tokens (default: the model file's pooling_type;\n"
            "                            /v1/embeddings refuses none)\n"
            "      --reranking           answer POST /v1/rerank (and /rerank, /reranking) with a\n"
            "                            reranker (Qwen3-Reranker GGUF: its classifier head and\n"
            "                            rerank template); pooling rank; --rerank is the same\n"
            "      --spm-infill          /infill: the suffix before the prefix (suffix-prefix-\n"
            "                            middle order, as some code models want)\n"
            "      --api-key KEY         require 'Authorization: Bearer KEY' on every endpoint\n"
            "                            but /health (default: $STATICLM_API_KEY, else none)\n"
            "      --cors-origin ORIGIN  admit browser requests from ORIGIN (e.g.\n"
            "                            http://localhost:3000; * = any) and answer CORS\n"
            "                            headers; other Origins get 403\n"
            "      --allow-host NAME     accept Host: NAME besides localhost, 127.0.0.1, [::1]\n"
            "                            and --host (repeatable; * = any Host)\n"
            "      --max-conn N          connections at once (default 512)\n"
            "      --max-conn-per-ip N   connections at once from one address (default 64)\n"
            "      --timeout S           close a connection silent for S seconds (default 15)\n"
            "      --request-timeout S   a request's headers and body must arrive within S\n"
            "                            seconds (default 30)\n"
            "%s"
            "%s"
            "  -h, --help                this text\n",
            slm_cli_reasoning_help, slm_cli_common_help);
}

int slm_cli_serve(int argc, char **argv) {
    slm_cli_common cc;
    slm_cli_common_init(&cc);
    slm_server_cfg cfg;
    slm_server_cfg_init(&cfg);
    int reranking = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int r = slm_cli_common_opt(&cc, argc, argv, &i);
        if (r < 0) return 2;
        if (r) continue;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) { usage_serve(stdout); return 0; }
        int has = i + 1 < argc;
        if (!strcmp(o, "--host") && has) cfg.host = argv[++i];
        else if (!strcmp(o, "--port") && has) { if (!slm_cli_parse_int(argv[++i], o, 0, 65535, &cfg.port)) return 2; }
        else if (!strcmp(o, "--queue") && has) { if (!slm_cli_parse_int(argv[++i], o, 0, 4096, &cfg.queue)) return 2; }
        else if (!strcmp(o, "--parallel") && has) { if (!slm_cli_parse_int(argv[++i], o, 1, 64, &cfg.parallel)) return 2; }
        else if (!strcmp(o, "--prefill-chunk") && has) { if (!slm_cli_parse_int(argv[++i], o, 0, 1 << 20, &cfg.prefill_chunk)) return 2; }
        else if (!strcmp(o, "--api-key") && has) cfg.api_key = argv[++i];
        else if (!strcmp(o, "--cache-dir") && has) cc.opt.cache_dir = argv[++i];
        else if (!strcmp(o, "--embeddings") || !strcmp(o, "--embedding")) cfg.embeddings = 1;
        else if (!strcmp(o, "--reranking") || !strcmp(o, "--rerank")) reranking = 1;
        else if (!strcmp(o, "--spm-infill")) cfg.spm_infill = 1;
        else if (!strcmp(o, "--pooling") && has) {
            if ((cfg.pooling = slm_pooling_parse(argv[++i])) < SLM_POOLING_NONE) {
                fprintf(stderr, "staticlm: --pooling expects none, mean, cls or last, got '%s'\n", argv[i]);
                return 2;
            }
        }
        else if (!strcmp(o, "--cors-origin") && has) cfg.cors_origin = argv[++i];
        else if (!strcmp(o, "--allow-host") && has) {
            if (cfg.n_allow_hosts >= (int)(sizeof cfg.allow_hosts / sizeof *cfg.allow_hosts)) {
                fprintf(stderr, "staticlm: at most %d --allow-host\n", (int)(sizeof cfg.allow_hosts / sizeof *cfg.allow_hosts));
                return 2;
            }
            cfg.allow_hosts[cfg.n_allow_hosts++] = argv[++i];
        }
        else if (!strcmp(o, "--max-conn") && has) { if (!slm_cli_parse_int(argv[++i], o, 1, 65536, &cfg.max_conn)) return 2; }
        else if (!strcmp(o, "--max-conn-per-ip") && has) { if (!slm_cli_parse_int(argv[++i], o, 1, 65536, &cfg.max_conn_per_ip)) return 2; }
        else if (!strcmp(o, "--timeout") && has) { if (!slm_cli_parse_int(argv[++i], o, 1, 86400, &cfg.idle_timeout_s)) return 2; }
        else if (!strcmp(o, "--request-timeout") && has) { if (!slm_cli_parse_int(argv[++i], o, 1, 86400, &cfg.request_timeout_s)) return 2; }
        else {
            fprintf(stderr, "staticlm: unknown option or missing value '%s' (see staticlm serve --help)\n", o);
            return 2;
        }
    }
    cc.opt.n_seqs = cfg.parallel; /* a KV region per slot */
    if (reranking && cfg.pooling != SLM_POOLING_DEFAULT && cfg.pooling != SLM_POOLING_RANK) {
        fprintf(stderr, "staticlm: --reranking is pooling rank: not with --pooling %s\n", slm_pooling_name(cfg.pooling));
        return 2;
    }
    if (reranking) cfg.embeddings = 1, cfg.pooling = SLM_POOLING_RANK;
    if (cfg.pooling != SLM_POOLING_DEFAULT && !cfg.embeddings) {
        fprintf(stderr, "staticlm: --pooling shapes embeddings: give --embeddings too\n");
        return 2;
    }
    cc.opt.embeddings = cfg.embeddings;
    if (!cfg.api_key) {
        const char *k = getenv("STATICLM_API_KEY");
        if (k && *k) cfg.api_key = k;
    }
    if (cfg.api_key && !*cfg.api_key) {
        fprintf(stderr, "staticlm: --api-key is empty\n");
        return 2;
    }
    /* room for --max-conn sockets */
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)cfg.max_conn + 64) {
        rlim_t want = (rlim_t)cfg.max_conn + 64;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    slm_engine *e = slm_cli_common_load(&cc);
    if (!e) return 1;
    char note[512];
    slm_tmpl *tm = slm_chat_template_open(e, cc.chat_template, note, sizeof note);
    if (!tm) {
        fprintf(stderr, "staticlm: out of memory\n");
        slm_free(e);
        return 1;
    }
    if (!strncmp(note, "warning", 7)) fprintf(stderr, "staticlm: %s\n", note);
    else if (cc.verbose) fprintf(stderr, "serve: %s\n", note);
    slm_cli_reasoning_resolve(&cc, e, tm, "serve:");
    cfg.reasoning = cc.reasoning; /* the server resolves auto itself, as for requests */
    cfg.kwargs = cc.kwargs;
    cfg.n_kwargs = cc.n_kwargs;
    const char *base = strrchr(cc.model, '/');
    cfg.model_name = base ? base + 1 : cc.model;
    cfg.verbose = cc.verbose;
    cfg.samp = cc.samp; /* --temp, --top-p, ... are what requests leave out */
    cfg.seed_set = cc.seed_set;

    /* signals are taken by sigwait below; the server's threads inherit the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    slm_err err = {0};
    int rc = 0;
    slm_server *s = slm_server_start(e, tm, &cfg, &err);
    if (!s) {
        fprintf(stderr, "staticlm: %s\n", err.msg);
        rc = 1;
    } else {
        slm_info in;
        slm_get_info(e, &in);
        char emb[64] = "";
        if (cfg.embeddings)
            snprintf(emb, sizeof emb, ", embeddings pooled %s",
                     slm_pooling_name(cfg.pooling == SLM_POOLING_DEFAULT ? slm_model_pooling(e) : cfg.pooling));
        fprintf(stderr, "serve: listening on http://%s:%d (model %s, KV capacity %d, %d slots%s, queue %d%s%s)\n",
                strcmp(cfg.host, "localhost") ? cfg.host : "127.0.0.1", slm_server_port(s), cfg.model_name,
                slm_capacity(e), cfg.parallel, in.batch_max ? "" : " decoded one by one", cfg.queue, emb,
                cfg.api_key ? ", API key required" : "");
        int sig = 0;
        sigwait(&set, &sig);
        fprintf(stderr, "serve: signal %d, shutting down\n", sig);
        slm_server_stop(s);
    }
    slm_tmpl_free(tm);
    slm_free(e);
    return rc;
}

#endif
