/* A whole file mapped read-only (MAP_PRIVATE), with messages naming the
 * file; unmapping. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

slm_status slm_map_file(slm_map *m, const char *path, slm_err *err) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return slm_errf(err, SLM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return slm_errf(err, SLM_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return slm_errf(err, SLM_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return slm_errf(err, SLM_ERR_FORMAT, "%s: file is empty", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return slm_errf(err, SLM_ERR_IO, "%s: cannot map: %s", path, strerror(e));
    m->data = p;
    m->size = (uint64_t)st.st_size;
    return SLM_OK;
}

void slm_unmap(slm_map *m) {
    if (m->data) munmap(m->data, (size_t)m->size);
    m->data = NULL;
    m->size = 0;
}

int slm_map_beside(slm_map *m, const char *path, const char *name) {
    memset(m, 0, sizeof *m);
    char p[4096];
    const char *slash = strrchr(path, '/');
    const int dl = slash ? (int)(slash - path) + 1 : 0;
    if (snprintf(p, sizeof p, "%.*s%s", dl, path, name) >= (int)sizeof p) return 0;
    FILE *f = fopen(p, "rb");
    if (!f) return 0;
    fclose(f);
    slm_err e = {0};
    if (slm_map_file(m, p, &e) == SLM_OK) return 1;
    memset(m, 0, sizeof *m);
    return 0;
}
