#!/usr/bin/env python3
# Fit the cpu-host simulator profile from the log of tools/calibrate_cpu_host.sh
# and compare its predictions with the measured pp512 / tg64 (docs/simulate.md):
#   calibrate_cpu_host.py LOG OUT.json STATICLM SMOLLM2.gguf TINYLLAMA.gguf STORIES260K.bin
import os, re, sys, json, subprocess, statistics as st
txt = open(sys.argv[1]).read()
out_profile = sys.argv[2]
B, S, T, STORIES = sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
med = lambda xs: st.median(xs)
bw = [float(m) for m in re.findall(r'memory read bandwidth: ([\d.]+) GB/s \(2 threads, 1024 MiB', txt)]
cb = [float(m) for m in re.findall(r'memory read bandwidth: ([\d.]+) GB/s \(2 threads, 128 MiB', txt)]
def ts(model, test):
    return [float(m) for m in re.findall(re.escape(model) + r'[^\n]*\| ' + re.escape(test) + r' \| ([\d.]+) ', txt)]
st_tg = ts('stories260K.bin', 'tg64')
runtime_us = [float(m) for m in re.findall(r'\| runtime \(outside the task list\) \| [\d.]+ \| [\d.]+% \| ([\d.]+) ', txt)]
SN, TN = os.path.basename(S), os.path.basename(T)
s_pp64 = ts(SN, 'pp64'); s_d = ts(SN, 'pp64 @ d448'); t_pp64 = ts(TN, 'pp64')
s_pp512 = ts(SN, 'pp512'); s_tg = ts(SN, 'tg64')
t_pp512 = ts(TN, 'pp512'); t_tg = ts(TN, 'tg64')
kern = {m.group(1): float(m.group(2)) for m in re.finditer(r'^(\w+)_r16 \|.*?\|\s+[\d.]+\s+([\d.]+) \(tile', txt, re.M)}
print('kernels (1 thread, tiled GOP/s):', kern)
print('medians: bw', bw, 'cache', cb, 'stories tg', st_tg, 'runtime us', runtime_us)
print(' smollm2 pp64', s_pp64, '@d448', s_d, 'pp512', s_pp512, 'tg64', s_tg)
print(' tinyllama pp64', t_pp64, 'pp512', t_pp512, 'tg64', t_tg)
prof = {"name": "cpu-host", "estimate": False, "static_rows": False,
        "transfer": {"gbps": round(med(bw), 1), "cache_bytes": 134217728, "cache_gbps": round(med(cb), 1)},
        "matrix": {"units": 2, "gops": {}}, "vector": {"units": 2, "gflops": 20.0, "shared_with_matrix": True},
        "scratchpad_bytes": 0, "tiles_in_flight": 2, "launch_ns": 100, "barrier_ns": 2000,
        "call_ns": round(med(runtime_us) * 1000)}
rel = {k: v / kern['q5_0'] for k, v in kern.items()}
def sim(model, mpl, mrl, P, gen, depth=0):
    json.dump(prof, open(out_profile, 'w'), indent=2)
    global last_out
    o = subprocess.run([B, 'simulate', '-m', model, '--device', out_profile, '--max-prompt-len', str(mpl),
                        '--min-response-len', str(mrl), '--prompt-len', str(P), '--gen', str(gen), '--depth', str(depth)],
                       capture_output=True, text=True).stdout
    last_out = o
    m = re.search(r'time to first token: ([\d.]+) ms', o); d = re.search(r'time per output token: ([\d.]+) ms', o)
    return float(m.group(1)) if m else None, float(d.group(1)) if d else None
qs = 1.0; q4 = 1.0
for it in range(4):
    prof['matrix']['gops'] = {'default': round(100 * qs, 1), 'q4_0': round(100 * q4, 1)}
    for k in ('q5_0', 'q4_k', 'q6_k', 'q8_0'):
        prof['matrix']['gops'][k] = round(100 * qs * rel[k], 1)
    ms = 64e3 / med(s_pp64); mt = 64e3 / med(t_pp64)
    ps, _ = sim(S, 64, 0, 64, 0); pt, _ = sim(T, 64, 0, 64, 0)
    qs *= ps / ms; q4 *= pt / mt
# attention (the matrix lane's 'attention' rate; vector tasks at the same rate on the same cores):
# the extra time of 64 rows at depth 448
att = 20.0
for it in range(3):
    prof['matrix']['gops']['attention'] = att; prof['vector']['gflops'] = att
    p0, _ = sim(S, 64, 448, 64, 0); p1, _ = sim(S, 64, 448, 64, 0, 448)
    meas = 64e3 / med(s_d) - 64e3 / med(s_pp64)
    att = round(att * (p1 - p0) / meas, 2)
prof['matrix']['gops']['attention'] = att; prof['vector']['gflops'] = att
# barrier: the stories260K decode step
for it in range(3):
    _, step = sim(STORIES, 1, 64, 0, 64)
    meas = 1e3 / med(st_tg)
    stages = int(re.search(r'\| generate\.\d+ \| \d+ \| \d+ / (\d+) \|', last_out).group(1))
    prof['barrier_ns'] = max(0, round(prof['barrier_ns'] + (meas - step) * 1e6 / stages))
loads = re.findall(r'load average: ([\d.]+)', txt)
prof['description'] = ('this machine, 2 threads; fitted by tools/calibrate_cpu_host.sh (1-minute load during the '
                       'measurements: %s to %s)' % (min(loads, key=float), max(loads, key=float)))
json.dump(prof, open(out_profile, 'w'), indent=2)
print(json.dumps(prof))
print('| model | test | measured ms (median) | predicted ms | error |')
for name, model, test, meas_ts, args in [
        (SN, S, 'pp512', s_pp512, (512, 64, 512, 0)), (SN, S, 'tg64', s_tg, (512, 64, 0, 64)),
        (TN, T, 'pp512', t_pp512, (512, 64, 512, 0)), (TN, T, 'tg64', t_tg, (512, 64, 0, 64))]:
    if not meas_ts: continue
    a, b = sim(model, *args)
    if test == 'pp512': m = 512e3 / med(meas_ts); p = a
    else: m = 1e3 / med(meas_ts); p = b
    print(f'| {name} | {test} | {m:.2f} | {p:.2f} | {100*(p-m)/m:+.1f}% |')
