/* The Unicode facts the WordPiece pre-tokenizer needs (wpm.h): general
 * category classes, White_Space, the simple lowercase mapping and the first
 * code point of the canonical decomposition, over all of Unicode (version in
 * wpm_unicode_data.h), by binary search in generated tables. */
#include "text/wpm.h"

typedef struct wpm_case_run {
    uint32_t first;  /* first code point of the run */
    uint16_t count;  /* code points in the run */
    uint16_t stride; /* distance between them (1 or 2) */
    int32_t delta;   /* lowercase = code point + delta */
} wpm_case_run;

typedef struct wpm_nfd_range {
    uint32_t first, last; /* code points first..last (inclusive) */
    uint32_t target;      /* the first code point of their decomposition */
} wpm_nfd_range;

#include "text/wpm_unicode_data.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

int slm_wpm_class(uint32_t c) {
    if (c >= 0x110000) return SLM_WPM_OTHER;
    /* the last range whose start is <= c */
    size_t lo = 0, hi = N_OF(wpm_class_ranges);
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((wpm_class_ranges[mid] >> 2) <= c) lo = mid;
        else hi = mid;
    }
    return (int)(wpm_class_ranges[lo] & 3);
}

int slm_wpm_is_space(uint32_t c) {
    if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
    if (c < 0x85) return 0;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

uint32_t slm_wpm_lower(uint32_t c) {
    if (c < 0x41) return c;
    if (c < 0x80) return c <= 0x5A ? c + 32 : c;
    size_t lo = 0, hi = N_OF(wpm_lower_runs);
    if (c < wpm_lower_runs[0].first) return c;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (wpm_lower_runs[mid].first <= c) lo = mid;
        else hi = mid;
    }
    const wpm_case_run *r = &wpm_lower_runs[lo];
    uint32_t d = c - r->first;
    if (d % r->stride || d / r->stride >= r->count) return c;
    return (uint32_t)((int64_t)c + r->delta);
}

uint32_t slm_wpm_nfd_first(uint32_t c) {
    if (c < wpm_nfd_ranges[0].first) return c;
    size_t lo = 0, hi = N_OF(wpm_nfd_ranges);
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (wpm_nfd_ranges[mid].first <= c) lo = mid;
        else hi = mid;
    }
    return c <= wpm_nfd_ranges[lo].last ? wpm_nfd_ranges[lo].target : c;
}

int slm_wpm_is_cjk(uint32_t c) {
    /* 0x2B920 (not 0x2B820) as Hugging Face's Rust tokenizer and llama.cpp */
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}
