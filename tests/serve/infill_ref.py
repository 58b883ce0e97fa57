#!/usr/bin/env python3
"""The token ids llama-server's /infill would run for a request, built here
apart from the server's code (test_serve_infill.sh compares the server's
greedy /infill answer with its /completion of these ids):
   infill_ref.py URL BODY.json PRE SUF MID REP SEP BOS BATCH CAP SPM
(-1: the model lacks that token; BOS: the id the vocabulary adds, or -1).
The pieces are tokenized by the server's /tokenize (plain text, no BOS; the
prompt with control tokens parsed). Layout and budget as llama-server's
format_prompt_infill, with staticlm's sizes (BATCH: prefill rows, CAP: the
KV capacity) and its one addition: the extra context never fills the last
row the reply needs. Prints the ids as a JSON list."""
import json
import sys
import urllib.request

url, body = sys.argv[1], json.load(open(sys.argv[2]))
PRE, SUF, MID, REP, SEP, BOS, BATCH, CAP, SPM = (int(x) for x in sys.argv[3:12])


def tok(text, special=False):
    if not text:
        return []
    req = urllib.request.Request(url + "/tokenize", json.dumps({"content": text, "parse_special": special}).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))["tokens"]


def mixed(v):
    if isinstance(v, str):
        return tok(v)
    out = []
    for x in v:
        out += tok(x) if isinstance(x, str) else [x]
    return out


pre, suf, prm = mixed(body["input_prefix"]), mixed(body["input_suffix"]), tok(body.get("prompt", ""), True)
extra = []
if REP >= 0:
    extra += [REP] + tok("myproject\n")
for c in body.get("input_extra", []):
    extra += [SEP] + tok(c.get("filename", "tmp") + "\n") if SEP >= 0 else tok("\n\n--- snippet ---\n\n")
    extra += tok(c["text"])
if SEP >= 0:
    extra += [SEP] + tok("filename\n")
n_pre = min(len(pre), 3 * (BATCH // 4))
n_suf = max(0, min(len(suf), BATCH // 4 - (2 + len(prm))))
n_predict = body.get("n_predict", -1)
fim_len = (BOS >= 0) + 3 + n_pre + len(prm) + n_suf
n_x = max(0, min(len(extra), CAP - BATCH - 2 * n_predict, CAP - 1 - fim_len))
p_part = [PRE] + pre[len(pre) - n_pre:] + prm
s_part = [SUF] + suf[:n_suf]
ids = extra[len(extra) - n_x:] + ([BOS] if BOS >= 0 else []) + (s_part + p_part if SPM else p_part + s_part) + [MID]
print(json.dumps(ids))
