/* The staticlm command: main() picks the command by its first argument;
 * run, compile, inspect and bench-startup live here, the others in their
 * own files (cli.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob/blob.h"
#include "cli/cli.h"
#include "common/cpu.h"
#include "device/kernels.h"
#include "staticlm.h"

static void usage_main(FILE *f) {
    fprintf(f,
            "staticlm %s: run LLMs as statically compiled programs\n"
            "\n"
            "usage: staticlm <command> [options]\n"
            "\n"
            "commands:\n"
            "  run       generate text from a prompt (default model: stories260K)\n"
            "  compile   compile a model into its static programs; print IR and task lists\n"
            "  convert   convert a llama2.c checkpoint + tokenizer.bin to GGUF\n"
            "  inspect   print a compiled blob's programs, I/O, memory needs and identity\n"
            "  bench-startup  time to first token: source model vs cached blob\n"
            "  synth     write a random-weight GGUF model of a real shape (for benchmarks)\n"
            "  bench     prefill and decode tokens/s, like llama-bench\n"
            "  bench-features  what generate/prefill variants and the prefix cache save\n"
            "  perplexity  perplexity over a text and KL divergence against a base model\n"
            "  embed     the embedding of each text, pooled and normalized (llama-embedding)\n"
            "  tokenize  print the token ids of a text (GGUF vocab, tokenizer.json, tokenizer.bin)\n"
            "  chat      a conversation that keeps its KV cache between turns\n"
            "  serve     an OpenAI-compatible HTTP server (chat and text completions)\n"
            "  trace     summarize a --trace file and draw its timeline (--svg)\n"
            "  simulate  replay the compiled programs on a device profile (CPU, NPU): TTFT,\n"
            "            time per token, lane utilisation, the best static prompt length\n"
            "\n"
            "  staticlm <command> --help   shows the options of a command\n"
            "  staticlm --version          prints the version, commit, kernel sets and CPU features\n",
            SLM_VERSION);
}

/* The options run and compile share: the programs' shapes (what a blob
 * keeps) and the memory budget. */
static const char k_program_help[] =
    "      --max-prompt-len L    prefill program rows (default 1024)\n"
    "      --min-response-len R  KV rows beyond the prompt (default 128); KV capacity\n"
    "                            = L + R, clamped to the model's context length\n"
    "      --prefill-variants L  extra prefill programs, e.g. 16,64,256 (a short prompt\n"
    "                            runs through the smallest that holds it)\n"
    "      --generate-variants L extra generate programs of these KV capacities, e.g.\n"
    "                            256,512 (decoding moves up without moving the KV; -v\n"
    "                            says when)\n"
    "      --tile-kb N           weight panel of one matrix task in KiB, the CPU's\n"
    "                            scratchpad (default: an eighth of the L2 cache)\n"
    SLM_CLI_KV_TYPE_HELP SLM_CLI_WEIGHT_TYPE_HELP
    SLM_CLI_PREFETCH_HELP
    "      --max-memory N        refuse a model whose KV cache, arena and buffers need more\n"
    "                            than N MiB (default 75% of RAM; -1 = no limit)\n"
    "      --draft MODEL         speculative decoding with this draft model (greedy or\n"
    "                            sampled; compile builds the verify program for it)\n"
    "      --draft-tokenizer T   the draft's tokenizer.bin, if it is a llama2.c model\n"
    "      --draft-n K           tokens the draft proposes per step (default 4)\n"
    "      --lm-head-separate    run the vocabulary projection as its own program\n"
    "  -v, --verbose             print model and program facts to stderr\n";

/* The options of run alone: how the programs run on this machine (compile
 * refuses them by name: its programs and a blob do not depend on them). */
static const char k_runtime_help[] =
    "  -t, --threads N           worker threads (default: one per CPU)\n"
    "      --kernels NAME        scalar | avx2 | avx512 | amx (default: best for this CPU)\n"
    "      --schedule S          how threads meet between stages: rendezvous (default:\n"
    "                            all threads meet at every barrier) | counted (a stage\n"
    "                            waits for its producers only, idle threads prefetch\n"
    "                            the next weights)\n"
    "      --no-chunking         refuse prompts longer than max_prompt_len (default:\n"
    "                            prefill them in chunks)\n"
    "      --prefix-cache-mb N   keep the KV rows of earlier prompts (MiB, LRU) for later\n"
    "                            requests of the same process (chat, serve, the library;\n"
    "                            one run serves one prompt: a note says so, and it is off)\n"
    "      --lm-head-threads N   the separate LM head's thread count (default: the body's)\n"
    "      --on-overflow P       error (default) | truncate: keep BOS and the newest half\n"
    "                            of the context when the KV cache is full, and go on\n";

static const char *const k_runtime_opts[] = {"-t", "--threads", "--kernels", "--schedule", "--no-chunking",
                                             "--prefix-cache-mb", "--lm-head-threads", "--on-overflow"};

static int runtime_opt(const char *o) {
    for (size_t i = 0; i < sizeof k_runtime_opts / sizeof k_runtime_opts[0]; i++)
        if (!strcmp(o, k_runtime_opts[i])) return 1;
    return 0;
}

static void usage_run(FILE *f) {
    fprintf(f,
            "usage: staticlm run [-m MODEL] [-z TOKENIZER] [-p PROMPT] [-n N] [options]\n"
            "\n"
            "Compiles MODEL into prefill and generate programs, prints the prompt as\n"
            "decoded from its tokens, then streams N generated tokens. Timings go to stderr.\n"
            "\n"
            "  -m, --model PATH          GGUF, llama2.c .bin, Hugging Face folder, or a blob\n"
            "                            (default: stories260K.bin from ./models or ../shared/models)\n"
            "  -z, --tokenizer PATH      llama2.c tokenizer.bin (default: the GGUF's own\n"
            "                            vocabulary, or tokenizer.bin / tok512.bin beside MODEL)\n"
            "  -p, --prompt TEXT         prompt (default: empty)\n"
            "  -n, --n-predict N         tokens to generate (default 256)\n"
            "      --temp T              temperature; 0 = greedy (default 1.0)\n"
            SLM_CLI_SAMPLING_HELP
            "      --seed S              sampling seed (default: time)\n"
            "      --ignore-eos          do not stop at end-of-sequence\n"
            "      --cache-dir DIR       compile MODEL once into a blob in DIR, map it on later\n"
            "                            runs (recompiled when the model, tokenizer or options\n"
            "                            change). MODEL may also be a blob (staticlm compile -o)\n"
            "      --verify-cache        hash the model whole to check the cached blob (default:\n"
            "                            only when its size, times, inode or sampled pages\n"
            "                            changed since the last full hash)\n"
            SLM_CLI_TRACE_HELP
            "%s%s"
            "  -h, --help                this text\n",
            k_program_help, k_runtime_help);
}

static void usage_compile(FILE *f) {
    fprintf(f,
            "usage: staticlm compile -m MODEL [-z TOKENIZER] [options]\n"
            "\n"
            "Compiles MODEL and prints what each stage produced.\n"
            "\n"
            "  -m, --model PATH          GGUF, llama2.c .bin or Hugging Face folder\n"
            "  -z, --tokenizer PATH      llama2.c tokenizer.bin\n"
            "      --dump-ir             the stateful graph (ReadValue/Assign)\n"
            "      --dump-lowered        each program's graph after the passes\n"
            "      --dump-tasks          each program's task list with barriers\n"
            "      --dump-io             each program's inputs and outputs\n"
            "  -o, --output FILE         write the compiled programs, weights and tokenizer\n"
            "                            as an ELF blob (run -m FILE loads it; docs/blob.md)\n"
            "      --parallel N          also batch programs for N sequences at once (serve\n"
            "                            --parallel N, or fewer, with the blob decodes them\n"
            "                            together; default 1: none)\n"
            "      --embeddings          also the embedding programs and heads (embed and serve\n"
            "                            --embeddings run them from the blob); an encoder (an\n"
            "                            embedding model) always compiles them, alone;\n"
            "                            --embedding is the same\n"
            "The programs are shaped as for run:\n"
            "%s"
            "  -h, --help                this text\n"
            "run's -t, --kernels, --schedule, --no-chunking, --prefix-cache-mb, --lm-head-threads\n"
            "and --on-overflow are refused: the programs (and a blob) do not depend on them.\n",
            k_program_help);
}

/* "16,64,256" into up to 7 positive integers (the rest 0). */
static int parse_list(const char *s, const char *opt, int out[8]) {
    int n = 0;
    memset(out, 0, 8 * sizeof(int));
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 1 || v > (1 << 20) || n == 7 || (*end && *end != ',')) {
            fprintf(stderr, "staticlm: %s expects up to 7 comma-separated positive integers, got '%s'\n", opt, s);
            return 0;
        }
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return 1;
}

typedef struct run_args {
    const char *model, *tok, *prompt, *kernels;
    int n, ignore_eos, verbose, threads;
    int dump_ir, dump_lowered, dump_tasks, dump_io;
    const char *output;
    const char *cache_dir;
    slm_options opt;
    slm_sampling samp;
} run_args;

/* Parse options shared by run and compile. Returns 1 ok, 0 error, 2 help. */
static int parse_args(int argc, char **argv, run_args *a, int is_compile) {
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int has = i + 1 < argc;
#define NEXT()                                                                 \
    (has ? argv[++i] : (fprintf(stderr, "staticlm: %s needs a value\n", o), (char *)NULL))
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) return 2;
        int so;
        const int tr = is_compile ? 0 : slm_cli_trace_opt(argc, argv, &i);
        if (tr < 0) return 0;
        if (tr) continue;
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) { if (!(a->model = NEXT())) return 0; }
        else if (!strcmp(o, "-z") || !strcmp(o, "--tokenizer")) { if (!(a->tok = NEXT())) return 0; }
        else if (!strcmp(o, "--max-prompt-len")) { const char *v = NEXT(); if (!v || !slm_cli_parse_int(v, o, 1, 1 << 20, &a->opt.max_prompt_len)) return 0; }
        else if (!strcmp(o, "--min-response-len")) { const char *v = NEXT(); if (!v || !slm_cli_parse_int(v, o, 0, 1 << 20, &a->opt.min_response_len)) return 0; }
        else if (!is_compile && (!strcmp(o, "-p") || !strcmp(o, "--prompt"))) { if (!(a->prompt = NEXT())) return 0; }
        else if (!is_compile && (!strcmp(o, "-n") || !strcmp(o, "--n-predict"))) { const char *v = NEXT(); if (!v || !slm_cli_parse_int(v, o, 0, 1 << 24, &a->n)) return 0; }
        else if (!is_compile && (so = slm_cli_sampling_opt(&a->samp, argc, argv, &i))) { if (so < 0) return 0; }
        else if (!is_compile && !strcmp(o, "--seed")) {
            const char *v = NEXT();
            char *end;
            if (!v) return 0;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || *end || end == v) { fprintf(stderr, "staticlm: --seed expects an integer, got '%s'\n", v); return 0; }
            a->samp.seed = s;
        }
        else if (!is_compile && !strcmp(o, "--ignore-eos")) a->ignore_eos = 1;
        else if (!is_compile && (!strcmp(o, "-t") || !strcmp(o, "--threads"))) { const char *v = NEXT(); if (!v || !slm_cli_parse_int(v, o, 0, 1024, &a->threads)) return 0; }
        else if (!is_compile && !strcmp(o, "--kernels")) { if (!(a->kernels = NEXT())) return 0; }
        else if (!strcmp(o, "--prefill-variants") || !strcmp(o, "--generate-variants")) {
            const char *v = NEXT();
            if (!v || !parse_list(v, o, !strcmp(o, "--prefill-variants") ? a->opt.prefill_variants : a->opt.generate_variants))
                return 0;
        }
        else if (!is_compile && !strcmp(o, "--no-chunking")) a->opt.no_chunking = 1;
        else if (!is_compile && !strcmp(o, "--schedule")) { if (!slm_cli_parse_schedule(NEXT(), &a->opt.schedule)) return 0; }
        else if (!strcmp(o, "--tile-kb")) { const char *v = NEXT(); if (!v || !slm_cli_parse_int(v, o, 4, 1 << 20, &a->opt.tile_kb)) return 0; }
        else if (!strcmp(o, "--kv-type")) { const char *v = NEXT(); if (!v || !slm_cli_parse_kv_type(v, o, &a->opt.kv_type)) return 0; }
        else if (!strcmp(o, "--weight-type")) { const char *v = NEXT(); if (!v || !slm_cli_parse_weight_type(v, o, &a->opt.weight_type)) return 0; }
        else if (!strcmp(o, "--prefetch")) { const char *v = NEXT(); if (!v || !slm_cli_parse_prefetch(v, o, &a->opt.prefetch)) return 0; }
        else if (!strcmp(o, "--max-memory")) {
            const char *v = NEXT();
            int mb;
            if (!v || !slm_cli_parse_int(v, o, -1, 1 << 30, &mb)) return 0;
            a->opt.max_memory_mb = mb;
        }
        else if (!is_compile && !strcmp(o, "--prefix-cache-mb")) { const char *v = NEXT(); if (!v || !slm_cli_parse_int(v, o, 0, 1 << 20, &a->opt.prefix_cache_mb)) return 0; }
        else if (!strcmp(o, "--draft")) { if (!(a->opt.draft_path = NEXT())) return 0; }
        else if (!strcmp(o, "--draft-tokenizer")) { if (!(a->opt.draft_tokenizer_path = NEXT())) return 0; }
        else if (!strcmp(o, "--draft-n")) { const char *v = NEXT(); if (!v || !slm_cli_parse_int(v, o, 1, 16, &a->opt.draft_n)) return 0; }
        else if (!strcmp(o, "--lm-head-separate")) a->opt.lm_head_separate = 1;
        else if (!is_compile && !strcmp(o, "--lm-head-threads")) { const char *v = NEXT(); if (!v || !slm_cli_parse_int(v, o, 0, 1024, &a->opt.lm_head_threads)) return 0; }
        else if (!is_compile && !strcmp(o, "--on-overflow")) {
            const char *v = NEXT();
            if (!v) return 0;
            if (!strcmp(v, "error")) a->opt.on_overflow = SLM_OVERFLOW_ERROR;
            else if (!strcmp(v, "truncate")) a->opt.on_overflow = SLM_OVERFLOW_TRUNCATE;
            else { fprintf(stderr, "staticlm: --on-overflow expects error or truncate, got '%s'\n", v); return 0; }
        }
        else if (!is_compile && !strcmp(o, "--cache-dir")) { if (!(a->cache_dir = NEXT())) return 0; }
        else if (!is_compile && !strcmp(o, "--verify-cache")) a->opt.verify_cache = 1;
        else if (!strcmp(o, "-v") || !strcmp(o, "--verbose")) a->verbose = 1;
        else if (is_compile && !strcmp(o, "--dump-ir")) a->dump_ir = 1;
        else if (is_compile && !strcmp(o, "--dump-lowered")) a->dump_lowered = 1;
        else if (is_compile && !strcmp(o, "--dump-tasks")) a->dump_tasks = 1;
        else if (is_compile && !strcmp(o, "--dump-io")) a->dump_io = 1;
        else if (is_compile && (!strcmp(o, "--embeddings") || !strcmp(o, "--embedding"))) a->opt.embeddings = 1;
        else if (is_compile && (!strcmp(o, "-o") || !strcmp(o, "--output"))) { if (!(a->output = NEXT())) return 0; }
        else if (is_compile && !strcmp(o, "--parallel")) { const char *v = NEXT(); if (!v || !slm_cli_parse_int(v, o, 1, 64, &a->opt.n_seqs)) return 0; }
        else if (is_compile && runtime_opt(o)) {
            fprintf(stderr, "staticlm: %s is an option of run: compile's programs (and a blob) do not depend on it; "
                            "give it where the model or blob runs\n", o);
            return 0;
        }
        else {
            fprintf(stderr, "staticlm: unknown option '%s' (see staticlm %s --help)\n", o, is_compile ? "compile" : "run");
            return 0;
        }
#undef NEXT
    }
    return 1;
}

static slm_engine *load_engine(run_args *a) {
    a->opt.cache_dir = a->cache_dir;
    a->opt.verbose = a->verbose;
    a->opt.n_threads = a->threads;
    slm_engine *e = slm_cli_open(&a->model, &a->tok, a->kernels, &a->opt);
    if (!e) return NULL;
    if (!slm_cli_sampling_check(&a->samp, e, a->verbose)) {
        slm_free(e);
        return NULL;
    }
    if (a->verbose) {
        slm_info in;
        slm_get_info(e, &in);
        fprintf(stderr,
                "model: dim %d, hidden %d, layers %d, heads %d/%d, vocab %d, context %d\n"
                "programs: prefill %d rows (%d tasks), generate 1 row (%d tasks); KV capacity %d\n"
                "memory: weights %.1f MB (mapped), KV %.1f MB, arena %.1f MB; kernels %s\n",
                in.dim, in.hidden_dim, in.n_layers, in.n_heads, in.n_kv_heads, in.vocab_size, in.context_len,
                in.max_prompt_len, in.prefill_tasks, in.generate_tasks, in.kv_capacity, in.weight_bytes / 1e6,
                in.kv_bytes / 1e6, in.arena_bytes / 1e6, slm_kernels_active()->name);
    }
    return e;
}

/* What run's piece callback needs: under -v, the generate variant notes. */
typedef struct run_out {
    slm_engine *e;
    int verbose, kv_capacity;
    slm_variant_state seen;
} run_out;

/* Under -v: which generate variant decoding starts on, and each move to a
 * larger one (the runtime records them; printed between pieces). */
static void variant_notes(run_out *o) {
    if (!o || !o->verbose || !o->e) return;
    slm_variant_state v;
    slm_variant_get(o->e, &v);
    if (v.switches > o->seen.switches) {
        fflush(stdout);
        fprintf(stderr, "\n[generate variant: KV full at %d stored tokens, moved from capacity %d to %d]\n", v.at,
                v.from, v.to);
    } else if (v.current && v.current != o->seen.current && v.current < o->kv_capacity) {
        fflush(stdout);
        fprintf(stderr, "\n[generate variant: decoding on capacity %d of %d]\n", v.current, o->kv_capacity);
    }
    o->seen = v;
}

static int print_piece(void *ud, int id, const char *piece, int is_prompt) {
    (void)id;
    if (is_prompt == 2) { /* a note from the runtime (overflow policy) */
        fflush(stdout);
        fprintf(stderr, "\n%s\n", piece);
        return 0;
    }
    if (!is_prompt) variant_notes(ud);
    const run_out *o = ud;
    if (slm_piece_shown(o ? o->e : NULL, piece)) { /* no engine: run.c's rule */
        fputs(piece, stdout);
        fflush(stdout);
    }
    return 0;
}

static int cmd_run(int argc, char **argv) {
    run_args a;
    memset(&a, 0, sizeof a);
    a.opt = slm_default_options();
    a.n = 256;
    slm_cli_sampling_init(&a.samp, 1.0f);
    a.prompt = "";
    int r = parse_args(argc, argv, &a, 0);
    if (r == 2) { usage_run(stdout); return 0; }
    if (!r) return 2;
    if (!a.samp.seed) a.samp.seed = (uint64_t)time(NULL);
    if (a.opt.verify_cache && !a.cache_dir) { /* it checks a cached blob: there is none */
        fprintf(stderr, "staticlm: --verify-cache checks the blob cached in --cache-dir DIR; give --cache-dir\n");
        return 2;
    }
    if (a.cache_dir && a.model && slm_blob_is_elf(a.model)) { /* nothing to compile or cache */
        fprintf(stderr, "staticlm: --cache-dir: %s is a compiled blob already and runs as it is; leave --cache-dir "
                        "out\n", a.model);
        return 2;
    }
    if (a.opt.prefix_cache_mb > 0) { /* nothing to reuse within one prompt */
        fprintf(stderr, "staticlm: note: --prefix-cache-mb: one run serves one prompt, so its prefix cache would "
                        "never be hit; it is off (chat, serve and library callers reuse it)\n");
        a.opt.prefix_cache_mb = 0;
    }
    if (!slm_cli_trace_begin()) return 1;
    slm_engine *e = load_engine(&a);
    if (!e) return 1;
    slm_gen_stats st;
    run_out out;
    memset(&out, 0, sizeof out);
    out.e = e;
    out.verbose = a.verbose;
    slm_info in;
    slm_get_info(e, &in);
    out.kv_capacity = in.kv_capacity;
    slm_status s = slm_generate(e, a.prompt, a.n, &a.samp, a.ignore_eos, print_piece, &out, &st);
    variant_notes(&out);
    printf("\n");
    fflush(stdout);
    int rc = 0;
    if (s) {
        fprintf(stderr, "staticlm: %s\n", slm_last_error(e));
        rc = 1;
    }
    if (st.n_prompt > 0)
        fprintf(stderr, "prefill: %d tokens in %.2f ms (%.1f tok/s)\n", st.n_prompt, st.prefill_ms,
                st.prefill_ms > 0 ? st.n_prompt * 1e3 / st.prefill_ms : 0.0);
    if (st.n_generated > 1)
        fprintf(stderr, "decode: %d tokens in %.2f ms (%.1f tok/s)\n", st.n_generated, st.decode_ms,
                st.decode_ms > 0 ? (st.n_generated - 1) * 1e3 / st.decode_ms : 0.0);
    if (st.n_cached > 0) fprintf(stderr, "prefix cache: %d prompt tokens restored\n", st.n_cached);
    if (st.n_drafted > 0)
        fprintf(stderr, "speculative: %d of %d drafted tokens accepted (%.1f%%)\n", st.n_accepted, st.n_drafted,
                100.0 * st.n_accepted / st.n_drafted);
    if (st.n_truncations > 0) fprintf(stderr, "overflow: context truncated %d time(s)\n", st.n_truncations);
    slm_free(e);
    return rc;
}

static int cmd_compile(int argc, char **argv) {
    run_args a;
    memset(&a, 0, sizeof a);
    a.opt = slm_default_options();
    int r = parse_args(argc, argv, &a, 1);
    if (r == 2) { usage_compile(stdout); return 0; }
    if (!r) return 2;
    /* an encoder (an embedding model): compile writes its embedding programs; a blob says nothing here */
    const int encoder = a.model && !slm_blob_is_elf(a.model) && slm_model_peek_encoder(a.model);
    if (encoder && a.opt.n_seqs > 1) { /* accepted, it would be ignored: an encoder has no decode to batch */
        fprintf(stderr, "staticlm: --parallel %d: %s is an encoder (an embedding model): it has no decode steps to "
                        "batch; its texts share the embed batch programs without it\n", a.opt.n_seqs, a.model);
        return 2;
    }
    if (!a.opt.embeddings && encoder) a.opt.embeddings = 1; /* only embeddings */
    slm_engine *e = load_engine(&a);
    if (!e) return 1;
    int any = a.dump_ir || a.dump_lowered || a.dump_tasks || a.dump_io;
    if (a.output) {
        if (slm_save_blob(e, a.output)) {
            fprintf(stderr, "staticlm: %s\n", slm_last_error(e));
            slm_free(e);
            return 1;
        }
        fprintf(stderr, "wrote %s (staticlm inspect %s)\n", a.output, a.output);
        if (!any) {
            slm_free(e);
            return 0;
        }
    }
    if (a.dump_ir) slm_dump(e, "ir", stdout);
    if (a.dump_lowered) slm_dump(e, "ir-lowered", stdout);
    if (a.dump_tasks) slm_dump(e, "tasks", stdout);
    if (a.dump_io || !any) slm_dump(e, "io", stdout);
    slm_free(e);
    return 0;
}

static int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    int verify = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: staticlm inspect BLOB [--verify]\n\n"
                   "Validates BLOB and prints its programs with their I/O, task counts by kind,\n"
                   "memory needs and identity record.\n\n"
                   "      --verify              also hash the weights and compare with the record\n"
                   "  -h, --help                this text\n");
            return 0;
        }
        if (!strcmp(argv[i], "--verify")) verify = 1;
        else if (!path) path = argv[i];
        else {
            fprintf(stderr, "staticlm: inspect takes one blob (see staticlm inspect --help)\n");
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: staticlm inspect BLOB [--verify]\n");
        return 2;
    }
    char msg[1024];
    if (slm_inspect_blob(path, stdout, verify, msg, sizeof msg)) {
        fprintf(stderr, "staticlm: %s\n", msg);
        return 1;
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One start: load, then prefill the prompt and sample the first token. */
static int startup_once(run_args *a, const char *model, double *load_s, double *ttft_s, char *note, size_t cap) {
    double t0 = now_s();
    a->opt.tokenizer_path = a->tok;
    a->opt.n_threads = a->threads;
    slm_engine *e = NULL;
    if (slm_load(&e, model, &a->opt)) {
        fprintf(stderr, "staticlm: %s\n", slm_last_error(e));
        slm_free(e);
        return 0;
    }
    double t1 = now_s();
    slm_sampling greedy = {0};
    slm_status s = slm_generate(e, a->prompt, 1, &greedy, 1, NULL, NULL, NULL);
    double t2 = now_s();
    if (s) fprintf(stderr, "staticlm: %s\n", slm_last_error(e));
    if (note) snprintf(note, cap, "%s", slm_cache_note(e));
    slm_free(e);
    *load_s = t1 - t0;
    *ttft_s = t2 - t0;
    return s == SLM_OK;
}

static int cmd_bench_startup(int argc, char **argv) {
    run_args a;
    memset(&a, 0, sizeof a);
    a.opt = slm_default_options();
    a.prompt = "Once upon a time";
    int reps = 3;
    for (int i = 1; i < argc; i += 2) { /* an option and its value */
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: staticlm bench-startup -m MODEL --cache-dir DIR [-z TOK] [-p PROMPT] [-r REPS]\n"
                   "       [--max-prompt-len L] [--min-response-len R] [-t THREADS]\n\n"
                   "Time to first token (load + prefill of PROMPT + first sample), best of REPS\n"
                   "(default 3) warm starts each: from the source model (compile), and from the\n"
                   "blob cached in DIR (identity hash + map + validate). The first cache start,\n"
                   "which compiles and writes the blob, is timed once.\n"
                   "  -h, --help                this text\n");
            return 0;
        }
        if (!v) { fprintf(stderr, "staticlm: %s needs a value\n", o); return 2; }
        if (!strcmp(o, "-m")) a.model = v;
        else if (!strcmp(o, "-z")) a.tok = v;
        else if (!strcmp(o, "-p")) a.prompt = v;
        else if (!strcmp(o, "--cache-dir")) a.cache_dir = v;
        else if (!strcmp(o, "-r")) { if (!slm_cli_parse_int(v, o, 1, 100, &reps)) return 2; }
        else if (!strcmp(o, "-t")) { if (!slm_cli_parse_int(v, o, 0, 1024, &a.threads)) return 2; }
        else if (!strcmp(o, "--max-prompt-len")) { if (!slm_cli_parse_int(v, o, 1, 1 << 20, &a.opt.max_prompt_len)) return 2; }
        else if (!strcmp(o, "--min-response-len")) { if (!slm_cli_parse_int(v, o, 0, 1 << 20, &a.opt.min_response_len)) return 2; }
        else { fprintf(stderr, "staticlm: unknown option '%s' (see staticlm bench-startup --help)\n", o); return 2; }
    }
    if (!a.model || !a.cache_dir) {
        fprintf(stderr, "staticlm: bench-startup needs -m MODEL and --cache-dir DIR\n");
        return 2;
    }
    if (!a.tok) a.tok = slm_cli_tokenizer_beside(a.model);
    double src_load = 1e30, src_ttft = 1e30, c_load = 1e30, c_ttft = 1e30, b_load = 1e30, b_ttft = 1e30;
    double first_load, first_ttft, l, t;
    char note[2400], blob[2400] = "";
    /* warm the page cache, then the first cache start (compiles, writes) */
    a.opt.cache_dir = NULL;
    if (!startup_once(&a, a.model, &l, &t, NULL, 0)) return 1;
    a.opt.cache_dir = a.cache_dir;
    if (!startup_once(&a, a.model, &first_load, &first_ttft, note, sizeof note)) return 1;
    const int compiled = strstr(note, "loaded cached blob") == NULL;
    for (int r = 0; r < reps; r++) {
        a.opt.cache_dir = NULL;
        if (!startup_once(&a, a.model, &l, &t, NULL, 0)) return 1;
        if (t < src_ttft) { src_ttft = t; src_load = l; }
        a.opt.cache_dir = a.cache_dir;
        if (!startup_once(&a, a.model, &l, &t, note, sizeof note)) return 1;
        if (t < c_ttft) { c_ttft = t; c_load = l; }
        const char *p = strstr(note, "loaded cached blob ");
        if (p) snprintf(blob, sizeof blob, "%s", p + strlen("loaded cached blob "));
        if (blob[0]) {
            a.opt.cache_dir = NULL;
            if (!startup_once(&a, blob, &l, &t, NULL, 0)) return 1;
            if (t < b_ttft) { b_ttft = t; b_load = l; }
        }
    }
    printf("model %s, prompt \"%s\", best of %d warm starts\n", a.model, a.prompt, reps);
    printf("from source model:   load %8.1f ms, first token %8.1f ms\n", src_load * 1e3, src_ttft * 1e3);
    printf("first cache start:   load %8.1f ms, first token %8.1f ms (%s)\n", first_load * 1e3, first_ttft * 1e3,
           compiled ? "compiled and wrote the blob" : "the blob was already cached: use an empty DIR");
    printf("from cached blob:    load %8.1f ms, first token %8.1f ms (quick identity check of the model)\n",
           c_load * 1e3, c_ttft * 1e3);
    if (blob[0])
        printf("from the blob file:  load %8.1f ms, first token %8.1f ms (run -m %s)\n", b_load * 1e3, b_ttft * 1e3,
               blob);
    printf("ratio (source / cached blob): load %.2fx, first token %.2fx\n", src_load / c_load, src_ttft / c_ttft);
    if (blob[0])
        printf("ratio (source / blob file):   load %.2fx, first token %.2fx\n", src_load / b_load, src_ttft / b_ttft);
    return 0;
}

#ifndef SLM_GIT_COMMIT
#define SLM_GIT_COMMIT "unknown"
#endif

/* The version, the commit it was configured from, the kernel sets compiled
 * in and the CPU features found (those the sets need). */
static void print_version(void) {
    char sets[64];
    slm_kernels_compiled(sets, sizeof sets);
    const slm_cpu *c = slm_cpu_features();
    printf("staticlm %s (commit %s)\n", SLM_VERSION, SLM_GIT_COMMIT);
    printf("kernels: %s compiled in; %s in use on this CPU\n", sets, slm_kernels_active()->name);
    printf("cpu: avx2 %s, fma %s, f16c %s, avx512f %s, avx512bw %s, avx512vl %s, avx512dq %s, avx512vnni %s\n",
           c->avx2 ? "yes" : "no", c->fma ? "yes" : "no", c->f16c ? "yes" : "no", c->avx512f ? "yes" : "no",
           c->avx512bw ? "yes" : "no", c->avx512vl ? "yes" : "no", c->avx512dq ? "yes" : "no",
           c->avx512vnni ? "yes" : "no");
    printf("cpu: amx-tile %s, amx-int8 %s, amx-bf16 %s; AMX %s%s\n", c->amx_tile ? "yes" : "no",
           c->amx_int8 ? "yes" : "no", c->amx_bf16 ? "yes" : "no", c->amx_why ? "not usable: " : "usable",
           c->amx_why ? c->amx_why : "");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage_main(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage_main(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        print_version();
        return 0;
    }
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "compile")) return cmd_compile(argc - 1, argv + 1);
    if (!strcmp(cmd, "convert")) return slm_cli_convert(argc - 1, argv + 1);
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench-startup")) return cmd_bench_startup(argc - 1, argv + 1);
    if (!strcmp(cmd, "synth")) return slm_cli_synth(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return slm_cli_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench-features")) return slm_cli_bench_features(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return slm_cli_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "embed")) return slm_cli_embed(argc - 1, argv + 1);
    if (!strcmp(cmd, "perplexity")) return slm_cli_perplexity(argc - 1, argv + 1);
    if (!strcmp(cmd, "chat")) return slm_cli_chat(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return slm_cli_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "trace")) return slm_cli_trace(argc - 1, argv + 1);
    if (!strcmp(cmd, "simulate")) return slm_cli_simulate(argc - 1, argv + 1);
    fprintf(stderr, "staticlm: unknown command '%s'\n\n", cmd);
    usage_main(stderr);
    return 2;
}
