/* Tests that damage a blob's bytes: a section of an ELF image by name, and
 * whether the image opens (checksum off, so a damaged field meets its
 * validator). */
#ifndef SLM_TEST_BLOB_IMAGE_H
#define SLM_TEST_BLOB_IMAGE_H

#include <elf.h>
#include <stdio.h>
#include <string.h>

#include "blob/blob.h"
#include "text/tokenizer.h"

/* The section called name in the image (its size in *len), or NULL. */
static inline uint8_t *t_blob_section(uint8_t *img, size_t n, const char *name, uint64_t *len) {
    Elf64_Ehdr eh;
    if (n < sizeof eh) return NULL;
    memcpy(&eh, img, sizeof eh);
    if (eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > n) return NULL;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh.e_shoff);
    const char *shstr = (const char *)img + sh[eh.e_shstrndx].sh_offset;
    for (int i = 1; i < eh.e_shnum; i++)
        if (!strcmp(shstr + sh[i].sh_name, name)) {
            *len = sh[i].sh_size;
            return img + sh[i].sh_offset;
        }
    return NULL;
}

/* 1 when the image opens; msg receives the loader's message. */
static inline int t_blob_opens(uint8_t *img, size_t n, const char *name, char *msg, size_t cap) {
    slm_blob b;
    slm_compiled c;
    slm_tokenizer *tok = NULL;
    slm_err err = {0};
    const slm_status s = slm_blob_open_mem(&b, img, n, name, SLM_BLOB_NO_CHECKSUM, &c, &tok, &err);
    snprintf(msg, cap, "%s", err.msg);
    if (!s) {
        slm_tok_free(tok);
        slm_compiled_free(&c);
    }
    return s == SLM_OK;
}

#endif
