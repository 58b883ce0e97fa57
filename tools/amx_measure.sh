#!/usr/bin/env bash
# The AMX figures of docs/amx.md and docs/benchmarks.md in one run, for an
# Intel host with AMX (issue: prefill on the matrix engine):
#   tools/amx_measure.sh BUILD [FILE.gguf...]
# BUILD holds staticlm and tests/test_amx* (cmake --build BUILD). Prints the
# CPU and its AMX flags, runs the three AMX tests (on an AMX host they also
# run the hardware paths; the lines that say so are shown), then for each file
# three alternating rounds of `staticlm bench --kernels avx512` and
# `--kernels amx` (the second round in the other order; pp512, time to first token of a 1000-token prompt) and a
# table of the medians: both sets' pp512, their ratio, the engine's measured
# int8 peak for the threads and pp512's matmul work as a share of it, both
# TTFTs. Without files it writes TinyLlama-1.1B-shaped Q8_0 and Q4_0 and
# SmolLM2-135M-shaped Q8_0 and Q4_0 files with `staticlm synth` into DIR
# (default a new temporary folder); llama-quantize's files (Q4_K_M with its
# fallbacks) are better, give them as arguments.
# Environment: T threads (default all cores), P prompt tokens (512), TTFT
# (1000), R repetitions per bench (3), LB a llama-bench binary to add
# llama.cpp's pp (same file, threads; alternating with the two sets; see
# ../shared/tools/side-by-side.sh for how to build it on AMX hosts).
# Nothing here builds llama.cpp. Takes about 2 minutes per TinyLlama file on
# 2 cores with AMX, several times that without.
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,24p "$0"; exit 2; }
BUILD=$1
shift
B="$BUILD/staticlm"
[ -x "$B" ] || { echo "amx_measure: $B: not built" >&2; exit 2; }
T=${T:-$(nproc)} P=${P:-512} TTFT=${TTFT:-1000} R=${R:-3}

echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cpus, $T threads)"
echo "amx flags: $(grep -o 'amx[a-z0-9_]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "kernel: $(uname -r)"
for t in test_amx test_amx_plan test_amx_attention; do
    if [ -x "$BUILD/tests/$t" ]; then
        out=$("$BUILD/tests/$t" 2>&1) && rc=0 || rc=$?
        echo "$t: exit $rc"
        printf '%s\n' "$out" | grep -Ei 'skip|hardware|fail' | sed 's/^/  /' | head -20 || true
    else
        echo "$t: not built"
    fi
done

if [ $# -eq 0 ]; then
    DIR=${DIR:-$(mktemp -d)}
    for spec in tinyllama-1.1b:q8_0 tinyllama-1.1b:q4_0 smollm2-135m:q8_0 smollm2-135m:q4_0; do
        f="$DIR/${spec%%:*}-${spec##*:}.gguf"
        [ -s "$f" ] || "$B" synth --shape "${spec%%:*}" --type "${spec##*:}" -o "$f" >/dev/null
        set -- "$@" "$f"
    done
fi

# the value of "key": in the jsonl line of the prompt test
field() { sed -n "/\"n_prompt\": $P,/s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -1; }
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }

LOGDIR=$(mktemp -d)
echo
echo "| file | threads | avx512 pp$P | amx pp$P | amx / avx512 | AMX int8 peak, Tops/s | pp$P share of peak | avx512 TTFT$TTFT ms | amx TTFT$TTFT ms |${LB:+ llama.cpp pp$P | amx / llama.cpp |}"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |${LB:+ ---: | ---: |}"
for f in "$@"; do
    a_pp=() x_pp=() a_tt=() x_tt=() l_pp=() peak=0 params=0
    for round in 1 2 3; do
        order="avx512 amx"
        [ "$round" = 2 ] && order="amx avx512" # ABBA-like: an order effect does not favour one set
        for k in $order; do
            log="$LOGDIR/$k.$round.jsonl"
            "$B" bench -m "$f" -p "$P" -n 0 -t "$T" -r "$R" --bw-mib 0 --no-profile --ttft "$TTFT" \
                --kernels "$k" -o jsonl >"$log" 2>"$LOGDIR/$k.$round.err" || {
                echo "amx_measure: bench --kernels $k on $f failed:" >&2
                cat "$LOGDIR/$k.$round.err" >&2
                exit 1
            }
            if [ "$k" = amx ]; then
                [ "$round" = 1 ] && grep -h . "$LOGDIR/amx.1.err" | sed 's/^/  (amx) /' >&2 || true
                x_pp+=("$(field "$log" avg_ts)") x_tt+=("$(field "$log" ttft_ms)")
                peak=$(field "$log" amx_int8_peak_ops) params=$(field "$log" layer_params)
            else
                a_pp+=("$(field "$log" avg_ts)") a_tt+=("$(field "$log" ttft_ms)")
            fi
        done
        if [ -n "${LB:-}" ]; then
            l_pp+=("$("$LB" -m "$f" -p "$P" -n 0 -t "$T" -r "$R" -o jsonl 2>/dev/null |
                sed -n 's/.*"avg_ts": *\([0-9.e+-]*\).*/\1/p' | head -1)")
        fi
    done
    ap=$(median "${a_pp[@]}") xp=$(median "${x_pp[@]}") at=$(median "${a_tt[@]}") xt=$(median "${x_tt[@]}")
    awk -v f="$(basename "$f")" -v t="$T" -v ap="$ap" -v xp="$xp" -v at="$at" -v xt="$xt" -v pk="$peak" \
        -v pa="$params" -v lp="$(median "${l_pp[@]:-0}")" -v lb="${LB:-}" 'BEGIN {
        share = pk > 0 ? sprintf("%.1f%%", 100 * xp * 2 * pa / (pk * t)) : "no AMX"
        printf "| %s | %d | %.1f | %.1f | %.2fx | %.2f | %s | %.0f | %.0f |", f, t, ap, xp, xp / ap, pk * t / 1e12, share, at, xt
        if (lb != "") printf " %.1f | %.2fx |", lp, lp > 0 ? xp / lp : 0
        printf "\n" }'
done
echo
echo "medians of 3 alternating rounds, each bench -r $R; logs in $LOGDIR"
