/* Number options of the CLI commands: parsed whole, range-checked, and
 * refused with a message naming the option. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

int slm_cli_parse_int(const char *s, const char *opt, int lo, int hi, int *out) {
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "staticlm: %s expects an integer in [%d, %d], got '%s'\n", opt, lo, hi, s ? s : "(nothing)");
        return 0;
    }
    *out = (int)v;
    return 1;
}

int slm_cli_parse_float(const char *s, const char *opt, float lo, float hi, float *out) {
    char *end = NULL;
    errno = 0;
    float v = s ? strtof(s, &end) : 0.0f;
    if (!s || errno || *end || end == s || !(v >= lo && v <= hi)) {
        fprintf(stderr, "staticlm: %s expects a number in [%g, %g], got '%s'\n", opt, lo, hi, s ? s : "(nothing)");
        return 0;
    }
    *out = v;
    return 1;
}
