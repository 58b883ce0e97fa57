/* Cache mode's memo of content hashes: a cached-blob start checks the
 * model's identity without reading the whole model (docs/blob.md, "Cache
 * mode"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blob/blob.h"
#include "engine/hash_memo.h"

#define MEMO_MAGIC "slmhash 1"

/* The record's hash and size; 0 when absent or not one (bounds: the record
 * is at most 80 bytes, one line, every field checked). */
static int memo_read(const char *rec, uint64_t *hash, uint64_t *bytes) {
    FILE *f = fopen(rec, "rb");
    if (!f) return 0;
    char line[96];
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    unsigned long long h = 0, b = 0;
    char tail = 0;
    if (n < 20 || n > 80 || line[n - 1] != '\n') return 0;
    if (sscanf(line, MEMO_MAGIC " %16llx %20llu%c", &h, &b, &tail) != 3 || tail != '\n') return 0;
    *hash = h;
    *bytes = b;
    return 1;
}

/* Write the record atomically (temporary file + rename); 0 on failure. */
static int memo_write(const char *rec, uint64_t hash, uint64_t bytes) {
    char tmp[1400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", rec, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return 0;
    int ok = fprintf(f, MEMO_MAGIC " %016llx %llu\n", (unsigned long long)hash, (unsigned long long)bytes) > 0;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, rec) == 0) return 1;
    unlink(tmp);
    return 0;
}

slm_status slm_memo_hash_file(const char *dir, const char *path, int verify, uint64_t *hash, uint64_t *bytes,
                              int *how, slm_err *err) {
    *how = SLM_MEMO_HASHED;
    slm_file_quick q;
    slm_status s = slm_hash_file_quick(path, &q, err);
    if (s) return s;
    char rec[1200];
    snprintf(rec, sizeof rec, "%s/.slmhash.%016llx", dir, (unsigned long long)q.key);
    uint64_t mh = 0, mb = 0;
    const int have = memo_read(rec, &mh, &mb) && mb == q.bytes;
    if (have && !verify) {
        *hash = mh;
        *bytes = mb;
        *how = SLM_MEMO_RECALLED;
        return SLM_OK;
    }
    if ((s = slm_hash_file(path, hash, bytes, err))) return s;
    if (have) *how = mh == *hash && mb == *bytes ? SLM_MEMO_VERIFIED : SLM_MEMO_STALE;
    /* a file changed this recently may change again within the same
     * timestamp tick, which the quick identity would not see */
    if (*bytes == q.bytes && (double)time(NULL) - q.changed_s >= 2.0 && !(have && *how == SLM_MEMO_VERIFIED))
        memo_write(rec, *hash, *bytes);
    return SLM_OK;
}
