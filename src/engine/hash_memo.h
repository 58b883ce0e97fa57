/* engine/ — cache mode's memo of content hashes (hash_memo.c). */
#ifndef SLM_HASH_MEMO_H
#define SLM_HASH_MEMO_H

#include "common/common.h"

/* What slm_memo_hash_file did. */
enum {
    SLM_MEMO_HASHED = 0,   /* read the whole file (no record, or it was not kept) */
    SLM_MEMO_RECALLED = 1, /* the record for the file's quick identity gave the hash */
    SLM_MEMO_VERIFIED = 2, /* verify: rehashed, and the record agreed */
    SLM_MEMO_STALE = 3     /* verify: rehashed, and the record disagreed (rewritten) */
};

/* The content hash (slm_hash_file) of path, remembered in dir: a record
 * DIR/.slmhash.<quick identity> holds the full hash and size. When the
 * record exists (and verify is 0) the file is not read beyond its quick
 * identity (blob/blob.h); else the file is hashed whole and the record
 * written, unless the file changed within the last 2 seconds (a write in
 * the same timestamp tick would leave the quick identity as it was).
 * *how: one of SLM_MEMO_*. A record that cannot be written costs nothing
 * but the next start's full hash. */
slm_status slm_memo_hash_file(const char *dir, const char *path, int verify, uint64_t *hash, uint64_t *bytes,
                              int *how, slm_err *err);

#endif
