/* tests/run_cmd.h — run a program and capture its stdout and stderr (shared by
 * the tests that drive the CLI). Include after t.h. */
#ifndef SLM_TEST_RUN_CMD_H
#define SLM_TEST_RUN_CMD_H

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run prog with argv (argv[0] = program name) with stdout and stderr in
 * DIR/cmd.out and DIR/cmd.err; their contents go to *out / *errs (free())
 * when non-NULL. Returns the exit status (128 if it did not exit). */
static inline int t_run_capture(const char *dir, const char *prog, char *const argv[], char **out, char **errs) {
    char of[300], ef[300];
    snprintf(of, sizeof of, "%s/cmd.out", dir);
    snprintf(ef, sizeof ef, "%s/cmd.err", dir);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(of, "w", stdout) || !freopen(ef, "w", stderr)) _exit(127);
        execv(prog, argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (out) *out = t_read_file(of, NULL);
    if (errs) *errs = t_read_file(ef, NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

#endif
