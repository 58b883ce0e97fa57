/* staticlm chat, non-interactive (turns from stdin), through the CLI binary
 * with stories260K + tok512: the second turn prefills only its new tokens;
 * /reset; /save and /load round trip; the overflow policies. */
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static char dir[256];

static const char *MODEL = "-m " T_SHARED("models/stories260K.bin") " -z " T_SHARED("models/tok512.bin");

/* Run `staticlm chat ARGS` with `input` on stdin; stdout and stderr into out and err. */
static int run_chat(const char *input, char **out, char **err, const char *fmt, ...) {
    char args[2048], cmd[4096], in[300], o[300], e[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(in, sizeof in, "%s/in.txt", dir);
    snprintf(o, sizeof o, "%s/out.txt", dir);
    snprintf(e, sizeof e, "%s/err.txt", dir);
    t_write_file(in, input, strlen(input));
    snprintf(cmd, sizeof cmd, "%s chat %s %s < %s > %s 2> %s", SLM_CLI_PATH, MODEL, args, in, o, e);
    int st = system(cmd);
    *out = t_read_file(o, NULL);
    *err = t_read_file(e, NULL);
    if (!*out) *out = calloc(1, 1);
    if (!*err) *err = calloc(1, 1);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

typedef struct turn {
    int turn, prefilled, kept, stored, generated, full, dropped, cached;
} turn;

/* The Nth "[chat] turn=" line of err (0-based); 0 if absent. */
static int get_turn(const char *err, int nth, turn *t) {
    const char *p = err;
    for (int i = 0; (p = strstr(p, "[chat] turn=")); i++, p++) {
        if (i < nth) continue;
        return sscanf(p, "[chat] turn=%d prefilled=%d kept=%d stored=%d generated=%d full=%d dropped=%d cached=%d",
                      &t->turn, &t->prefilled, &t->kept, &t->stored, &t->generated, &t->full, &t->dropped,
                      &t->cached) == 8;
    }
    return 0;
}

static void test_kv_reuse(void) {
    char *out, *err, input[1024];
    snprintf(input, sizeof input, "Hi there\n/save %s/one.json\nTell me a story about a cat\n", dir);
    int rc = run_chat(input, &out, &err, "--temp 0 -n 16 --stats --system 'You are a storyteller.'");
    CHECKF(rc == 0, "rc %d: %s", rc, err);
    turn a, b;
    CHECKF(get_turn(err, 0, &a) && get_turn(err, 1, &b), "no stats lines: %s", err);
    CHECKF(strstr(err, "no chat template; using ChatML") != NULL, "%s", err);
    /* turn 1 prefills everything */
    CHECK(a.turn == 1 && a.full == 1 && a.kept == 0 && a.prefilled == a.stored && a.prefilled > 20);
    /* turn 2 keeps turn 1's rows (prompt + the decoded reply tokens) and prefills only the new ones */
    CHECKF(b.turn == 2 && b.full == 0, "turn 2: full=%d", b.full);
    CHECKF(b.kept == a.stored + a.generated || b.kept == a.stored + a.generated - 1, "kept %d, turn 1 stored %d + %d generated", b.kept, a.stored, a.generated);
    CHECK(b.stored == b.kept + b.prefilled);
    CHECK(b.prefilled > 0 && b.prefilled < b.kept);
    /* the same history loaded from a file must be prefilled whole: more tokens */
    free(out);
    free(err);
    snprintf(input, sizeof input, "/load %s/one.json\nTell me a story about a cat\n", dir);
    rc = run_chat(input, &out, &err, "--temp 0 -n 16 --stats");
    turn c;
    CHECKF(rc == 0 && get_turn(err, 0, &c), "rc %d: %s", rc, err);
    CHECKF(c.full == 1 && c.kept == 0, "after /load: full=%d kept=%d", c.full, c.kept);
    CHECKF(c.prefilled > b.prefilled && abs(c.prefilled - b.stored) <= 3,
           "whole history %d tokens vs kept %d + new %d", c.prefilled, b.kept, b.prefilled);
    free(out);
    free(err);
}

static void test_reset_save_load(void) {
    char *out, *err, input[2048];
    snprintf(input, sizeof input,
             "Hello\n/save %s/a.json\n/reset\nAgain\n/load %s/a.json\n/save %s/b.json\n/load %s/nonexistent.json\n"
             "/load %s/garbage.json\n/load %s/wrongtype.json\n/frobnicate\n//slash message\n",
             dir, dir, dir, dir, dir, dir);
    char p[300];
    snprintf(p, sizeof p, "%s/garbage.json", dir);
    t_write_file(p, "{\"messages\": [", 14);
    snprintf(p, sizeof p, "%s/wrongtype.json", dir);
    const char *wt = "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}";
    t_write_file(p, wt, strlen(wt));
    int rc = run_chat(input, &out, &err, "--temp 0 -n 8 --stats --system Sys");
    CHECKF(rc == 1, "rc %d (failed /load commands make it 1)", rc);
    turn t1, t2, t3;
    CHECKF(get_turn(err, 0, &t1) && get_turn(err, 1, &t2) && get_turn(err, 2, &t3), "%s", err);
    CHECK(t1.turn == 1);
    CHECKF(t2.turn == 1 && t2.full == 1 && t2.kept == 0, "after /reset: turn %d full %d kept %d", t2.turn, t2.full, t2.kept);
    /* /reset keeps the system prompt: the same token count as turn 1 (Hello vs Again) within a few tokens */
    CHECKF(abs(t2.prefilled - t1.prefilled) <= 3, "%d vs %d", t2.prefilled, t1.prefilled);
    /* the system prompt's rows come back from the prefix cache */
    CHECKF(t1.cached == 0 && t2.cached > 5 && t2.cached < t2.prefilled, "cached %d then %d of %d", t1.cached, t2.cached,
           t2.prefilled);
    CHECK(strstr(err, "conversation reset (system prompt kept)") != NULL);
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    char *fa = t_read_file(a, NULL), *fb = t_read_file(b, NULL);
    if (strstr(err, "not available in this build")) {
        fprintf(stderr, "  SKIP: /save and /load (built without cJSON)\n");
    } else {
        CHECKF(fa && fb && !strcmp(fa, fb), "round trip differs:\n%s\n---\n%s", fa ? fa : "(none)", fb ? fb : "(none)");
        CHECK(fa && strstr(fa, "\"role\":\t\"system\"") && strstr(fa, "\"content\":\t\"Hello\""));
        CHECK(strstr(err, "nonexistent.json") && strstr(err, "cannot open"));
        CHECK(strstr(err, "garbage.json' is not a saved conversation"));
        CHECK(strstr(err, "message 0 needs a role"));
        CHECK(strstr(err, "loaded 3 messages"));
    }
    CHECK(strstr(err, "unknown command '/frobnicate'") != NULL);
    /* "//slash message" is sent as "/slash message": a turn after the load */
    CHECKF(t3.turn == 1 && t3.full == 1, "turn %d full %d", t3.turn, t3.full);
    free(fa);
    free(fb);
    free(out);
    free(err);
}

static void test_overflow(void) {
    char tpl[300], *out, *err;
    snprintf(tpl, sizeof tpl, "%s/mini.jinja", dir);
    const char *mini = "{% for m in messages %}{{ m.role[0] }}:{{ m.content }}\n{% endfor %}"
                       "{% if add_generation_prompt %}a:{% endif %}";
    t_write_file(tpl, mini, strlen(mini));
    /* capacity 48: the third turn no longer fits */
    int rc = run_chat("Hi\nTell me\nMore\nYes\n", &out, &err,
                      "--temp 0 -n 8 --stats --system 'Be brief.' --max-prompt-len 32 --min-response-len 16 "
                      "--chat-template %s", tpl);
    CHECKF(rc == 0, "rc %d: %s", rc, err);
    CHECKF(strstr(err, "exceeds the KV capacity 48: dropped the 2 oldest message(s)") != NULL, "%s", err);
    turn t;
    int n = 0, dropped = 0;
    for (int i = 0; get_turn(err, i, &t); i++) {
        n++;
        CHECKF(t.stored <= 48 - 8 && t.stored + t.generated <= 48, "turn %d stored %d", t.turn, t.stored);
        if (t.dropped) {
            dropped++;
            CHECK(t.full == 1 && t.kept == 0);
        }
    }
    CHECKF(n == 4 && dropped >= 1, "%d turns, %d truncated", n, dropped);
    free(out);
    free(err);
    rc = run_chat("Hi\nTell me\nMore\nYes\n", &out, &err,
                  "--temp 0 -n 8 --stats --system 'Be brief.' --max-prompt-len 32 --min-response-len 16 "
                  "--chat-template %s --on-overflow error", tpl);
    CHECKF(rc == 1, "rc %d", rc);
    CHECKF(strstr(err, "but the KV capacity is 48 (--on-overflow error") != NULL, "%s", err);
    CHECK(strstr(err, "dropped the") == NULL);
    free(out);
    free(err);
    /* a single message larger than the capacity: refused with both numbers, truncate or not */
    char big[4096] = "";
    for (int i = 0; i < 40; i++) strcat(big, "word ");
    strcat(big, "\n");
    rc = run_chat(big, &out, &err, "--temp 0 -n 8 --max-prompt-len 32 --min-response-len 16 --chat-template %s", tpl);
    CHECKF(rc == 1 && strstr(err, "alone need") && strstr(err, "KV capacity is 48"), "rc %d: %s", rc, err);
    free(out);
    free(err);
}

static void test_bench(void) {
    char *out, *err;
    int rc = run_chat("", &out, &err, "--bench --max-prompt-len 256");
    CHECKF(rc == 0, "rc %d: %s", rc, err);
    double kept = 0, full = 0;
    const char *p = strstr(out, "KV kept ");
    CHECKF(p && sscanf(p, "KV kept %lf ms, re-prefill whole history %lf ms", &kept, &full) == 2, "%s", out);
    CHECK(kept > 0 && full > 0);
    free(out);
    free(err);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/slm_test_chat_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    T_RUN(test_kv_reuse);
    T_RUN(test_reset_save_load);
    T_RUN(test_overflow);
    T_RUN(test_bench);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    T_DONE();
}
