#!/usr/bin/env python3
# Outside CI: tokenizes every test input of a llama.cpp vocabulary test
# (models/ggml-vocab-NAME.gguf with .inp / .out beside it, the format of
# llama.cpp's tests/test-tokenizer-0: inputs separated by
# "\n__ggml_vocab_test__\n", one line of expected ids per input) with
# `staticlm tokenize --no-bos` (no special tokens added, special-token text
# not matched: test-tokenizer-0's add_special = parse_special = false) and
# compares the ids. Prints each mismatch and "N of M match"; exits 1 on any.
#   tools/check_vocab_vectors.py build/staticlm path/to/ggml-vocab-bert-bge.gguf
import os, subprocess, sys, tempfile

staticlm, vocab = sys.argv[1], sys.argv[2]
raw = open(vocab + ".inp", "rb").read()
sep = b"\n__ggml_vocab_test__\n"
inputs, pos = [], 0
while pos < len(raw):
    nxt = raw.find(sep, pos)
    if nxt < 0:
        inputs.append(raw[pos:])
        break
    inputs.append(raw[pos:nxt])
    pos = nxt + len(sep)
outputs = [line.strip() for line in open(vocab + ".out", encoding="utf-8").read().split("\n")]
outputs = outputs[:len(inputs)]
if len(outputs) != len(inputs):
    sys.exit("%s: %d inputs, %d outputs" % (vocab, len(inputs), len(outputs)))
ok = 0
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "text")
    for i, (text, want) in enumerate(zip(inputs, outputs)):
        open(path, "wb").write(text)
        src = ["-f", path] if text else ["-p", ""]  # tokenize -f refuses an empty file
        r = subprocess.run([staticlm, "tokenize", "-m", vocab, *src, "--no-bos"], capture_output=True)
        got = r.stdout.decode().strip()
        if r.returncode == 0 and got.split() == want.split():
            ok += 1
        else:
            print("mismatch %d: %r\n  want: %s\n  got:  %s %s" % (i, text, want, got, r.stderr.decode().strip()))
print("%d of %d match" % (ok, len(inputs)))
sys.exit(0 if ok == len(inputs) else 1)
