/* The AMX tile emulation (device/amx_emu.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/amx_emu.h"

typedef struct emu_tiles {
    int configured;
    uint8_t rows[8];
    uint16_t colsb[8];
    uint8_t t[8][16][64];
} emu_tiles;

static _Thread_local emu_tiles g_t;

static void fault(const char *what) {
    fprintf(stderr, "amx emulation: %s (the hardware would fault)\n", what);
    abort();
}

static void check_tile(int t) {
    if (!g_t.configured) fault("tile instruction before LDTILECFG");
    if (t < 0 || t > 7 || !g_t.rows[t] || !g_t.colsb[t]) fault("unconfigured tile");
}

void slm_amx_emu_ldtilecfg(const void *cfg64) {
    const uint8_t *c = cfg64;
    memset(&g_t, 0, sizeof g_t);
    if (c[0] == 0) return; /* palette 0: the init state */
    if (c[0] != 1) fault("palette other than 0 or 1");
    for (int i = 2; i < 16; i++)
        if (c[i]) fault("reserved configuration byte set");
    if (c[1]) fault("start_row set"); /* only a restarted instruction sets it */
    for (int t = 0; t < 16; t++) {
        const uint16_t colsb = (uint16_t)(c[16 + 2 * t] | c[17 + 2 * t] << 8);
        const uint8_t rows = c[48 + t];
        if (t >= 8) {
            if (colsb || rows) fault("tile 8..15 configured");
            continue;
        }
        if (colsb > 64 || rows > 16) fault("tile larger than 16 x 64 bytes");
        if ((colsb == 0) != (rows == 0)) fault("tile with rows but no bytes (or the reverse)");
        g_t.rows[t] = rows;
        g_t.colsb[t] = colsb;
    }
    g_t.configured = 1;
}

void slm_amx_emu_release(void) { memset(&g_t, 0, sizeof g_t); }

void slm_amx_emu_loadd(int t, const void *base, size_t stride) {
    check_tile(t);
    memset(g_t.t[t], 0, sizeof g_t.t[t]);
    for (int r = 0; r < g_t.rows[t]; r++) memcpy(g_t.t[t][r], (const uint8_t *)base + (size_t)r * stride, g_t.colsb[t]);
}

void slm_amx_emu_stored(int t, void *base, size_t stride) {
    check_tile(t);
    for (int r = 0; r < g_t.rows[t]; r++) memcpy((uint8_t *)base + (size_t)r * stride, g_t.t[t][r], g_t.colsb[t]);
}

void slm_amx_emu_zero(int t) {
    check_tile(t);
    memset(g_t.t[t], 0, sizeof g_t.t[t]);
}

/* The shape rules of TDPB*D and TDPBF16PS (#UD otherwise) */
static void check_dp(int c, int a, int b) {
    check_tile(c), check_tile(a), check_tile(b);
    if (c == a || c == b || a == b) fault("a tile product's operands are not three tiles");
    if (g_t.colsb[a] / 4 != g_t.rows[b]) fault("A's K (colsb / 4) != B's rows");
    if (g_t.colsb[c] != g_t.colsb[b]) fault("C's colsb != B's colsb");
    if (g_t.rows[c] != g_t.rows[a]) fault("C's rows != A's rows");
    if (g_t.colsb[a] % 4 || g_t.colsb[c] % 4) fault("colsb not a multiple of 4");
}

static int32_t emu_rd32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

void slm_amx_emu_dpb(int c, int a, int b, int sa, int sb) {
    check_dp(c, a, b);
    const int K = g_t.colsb[a] / 4, N = g_t.colsb[c] / 4;
    for (int m = 0; m < g_t.rows[c]; m++) {
        uint8_t *cr = g_t.t[c][m];
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) {
                const uint8_t *x = &g_t.t[a][m][4 * k], *y = &g_t.t[b][k][4 * n];
                uint32_t acc = (uint32_t)emu_rd32(cr + 4 * n);
                for (int i = 0; i < 4; i++) {
                    const int32_t xa = sa ? (int8_t)x[i] : x[i], yb = sb ? (int8_t)y[i] : y[i];
                    acc += (uint32_t)(xa * yb);
                }
                memcpy(cr + 4 * n, &acc, 4);
            }
        memset(cr + g_t.colsb[c], 0, 64 - (size_t)g_t.colsb[c]);
    }
}

static float bf16_daz(const uint8_t *p) {
    uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
    if ((u & 0x7F800000u) == 0) u &= 0x80000000u; /* denormal (or zero) input: signed zero */
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float ftz(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7F800000u) == 0) u &= 0x80000000u;
    memcpy(&f, &u, 4);
    return f;
}

void slm_amx_emu_dpbf16ps(int c, int a, int b) {
    check_dp(c, a, b);
    const int K = g_t.colsb[a] / 4, N = g_t.colsb[c] / 4;
    for (int m = 0; m < g_t.rows[c]; m++) {
        uint8_t *cr = g_t.t[c][m];
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) {
                float acc;
                memcpy(&acc, cr + 4 * n, 4);
                /* bf16 x bf16 is exact in fp32; each add rounds (the C default: nearest even) */
                for (int i = 0; i < 2; i++) {
                    const float p = bf16_daz(&g_t.t[a][m][4 * k + 2 * i]) * bf16_daz(&g_t.t[b][k][4 * n + 2 * i]);
                    acc = ftz(acc + p);
                }
                memcpy(cr + 4 * n, &acc, 4);
            }
        memset(cr + g_t.colsb[c], 0, 64 - (size_t)g_t.colsb[c]);
    }
}
