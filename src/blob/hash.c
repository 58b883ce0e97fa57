/* A fast 64-bit hash for identity records and checksums: four independent
 * lanes, each `v = rotl(v + w * P2, 31) * P1` over one 8-byte word, so a
 * 32-byte step has four multiply chains in flight (memory-bound on a
 * modern core); then the lanes are merged and the tail folded in with a
 * final avalanche. Not a cryptographic hash: it detects accidental change
 * (a flipped byte, a truncated file, another model), not an adversary. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t rd64(const uint8_t *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static inline uint64_t lane(uint64_t v, uint64_t w) { return rotl(v + w * P2, 31) * P1; }

void slm_hash_init(slm_hash *h, uint64_t seed) {
    memset(h, 0, sizeof *h);
    h->seed = seed;
    h->v[0] = seed + P1 + P2;
    h->v[1] = seed + P2;
    h->v[2] = seed;
    h->v[3] = seed - P1;
}

static void steps(slm_hash *h, const uint8_t *p, size_t n_steps) {
    uint64_t a = h->v[0], b = h->v[1], c = h->v[2], d = h->v[3];
    for (size_t i = 0; i < n_steps; i++, p += 32) {
        a = lane(a, rd64(p));
        b = lane(b, rd64(p + 8));
        c = lane(c, rd64(p + 16));
        d = lane(d, rd64(p + 24));
    }
    h->v[0] = a;
    h->v[1] = b;
    h->v[2] = c;
    h->v[3] = d;
}

void slm_hash_update(slm_hash *h, const void *data, size_t n) {
    const uint8_t *p = data;
    h->total += n;
    if (h->nbuf) {
        size_t take = 32 - h->nbuf < n ? 32 - h->nbuf : n;
        memcpy(h->buf + h->nbuf, p, take);
        h->nbuf += (uint32_t)take;
        p += take;
        n -= take;
        if (h->nbuf < 32) return;
        steps(h, h->buf, 1);
        h->nbuf = 0;
    }
    steps(h, p, n / 32);
    p += n / 32 * 32;
    n %= 32;
    if (n) {
        memcpy(h->buf, p, n);
        h->nbuf = (uint32_t)n;
    }
}

uint64_t slm_hash_final(const slm_hash *h) {
    uint64_t x;
    if (h->total >= 32) {
        x = rotl(h->v[0], 1) + rotl(h->v[1], 7) + rotl(h->v[2], 12) + rotl(h->v[3], 18);
        for (int i = 0; i < 4; i++) x = (x ^ lane(0, h->v[i])) * P1 + P4;
    } else {
        x = h->seed + P5;
    }
    x += h->total;
    const uint8_t *p = h->buf;
    uint32_t n = h->nbuf;
    for (; n >= 8; n -= 8, p += 8) x = rotl(x ^ lane(0, rd64(p)), 27) * P1 + P4;
    for (; n > 0; n--, p++) x = rotl(x ^ (*p * P5), 11) * P1;
    x ^= x >> 33;
    x *= P2;
    x ^= x >> 29;
    x *= P3;
    x ^= x >> 32;
    return x;
}

uint64_t slm_hash64(const void *data, size_t n, uint64_t seed) {
    slm_hash h;
    slm_hash_init(&h, seed);
    slm_hash_update(&h, data, n);
    return slm_hash_final(&h);
}

slm_status slm_hash_file(const char *path, uint64_t *hash, uint64_t *bytes, slm_err *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return slm_errf(err, SLM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    enum { CHUNK = 4 << 20 };
    uint8_t *buf = slm_malloc(CHUNK);
    if (!buf) {
        close(fd);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory hashing %s", path);
    }
    slm_hash h;
    slm_hash_init(&h, 0);
    uint64_t total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            slm_xfree(buf);
            close(fd);
            return slm_errf(err, SLM_ERR_IO, "%s: read error: %s", path, strerror(e));
        }
        if (r == 0) break;
        slm_hash_update(&h, buf, (size_t)r);
        total += (uint64_t)r;
    }
    slm_xfree(buf);
    close(fd);
    *hash = slm_hash_final(&h);
    *bytes = total;
    return SLM_OK;
}

/* Reads of the quick identity: the first and last QUICK_EDGE bytes and
 * QUICK_PAGES pages of QUICK_PAGE bytes spread evenly between them. */
enum { QUICK_EDGE = 64 << 10, QUICK_PAGES = 64, QUICK_PAGE = 4096 };

static int pread_all(int fd, uint8_t *buf, size_t n, uint64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    return 1;
}

slm_status slm_hash_file_quick(const char *path, slm_file_quick *q, slm_err *err) {
    memset(q, 0, sizeof *q);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return slm_errf(err, SLM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return slm_errf(err, SLM_ERR_IO, "%s: not a regular file%s%s", path, e ? ": " : "", e ? strerror(e) : "");
    }
    uint8_t *buf = slm_malloc(QUICK_EDGE);
    if (!buf) {
        close(fd);
        return slm_errf(err, SLM_ERR_NOMEM, "out of memory hashing %s", path);
    }
    const uint64_t size = (uint64_t)st.st_size;
    const int64_t meta[8] = {(int64_t)size, (int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec,
                             (int64_t)st.st_ctim.tv_sec, (int64_t)st.st_ctim.tv_nsec, (int64_t)st.st_ino,
                             (int64_t)st.st_dev, 0x51c4};
    slm_hash h;
    slm_hash_init(&h, 0x9c1d);
    slm_hash_update(&h, meta, sizeof meta);
    int ok = 1;
    const size_t edge = size < QUICK_EDGE ? (size_t)size : QUICK_EDGE;
    ok = ok && pread_all(fd, buf, edge, 0);
    if (ok) slm_hash_update(&h, buf, edge);
    if (size > 2ull * QUICK_EDGE + QUICK_PAGE) {
        const uint64_t span = size - 2ull * QUICK_EDGE - QUICK_PAGE;
        for (int i = 0; ok && i < QUICK_PAGES && span > 0; i++) {
            const uint64_t off = QUICK_EDGE + span / (QUICK_PAGES - 1) * (uint64_t)i;
            ok = pread_all(fd, buf, QUICK_PAGE, off);
            if (ok) slm_hash_update(&h, buf, QUICK_PAGE);
        }
    }
    if (ok && size > QUICK_EDGE) {
        const size_t tail = size - QUICK_EDGE < QUICK_EDGE ? (size_t)(size - QUICK_EDGE) : QUICK_EDGE;
        ok = pread_all(fd, buf, tail, size - tail);
        if (ok) slm_hash_update(&h, buf, tail);
    }
    slm_xfree(buf);
    close(fd);
    if (!ok) return slm_errf(err, SLM_ERR_IO, "%s: read error (changed while read?)", path);
    q->key = slm_hash_final(&h);
    q->bytes = size;
    q->changed_s = (double)(st.st_mtim.tv_sec > st.st_ctim.tv_sec ? st.st_mtim.tv_sec : st.st_ctim.tv_sec);
    return SLM_OK;
}
