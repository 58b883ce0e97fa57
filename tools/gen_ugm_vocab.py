#!/usr/bin/env python3
"""Make the Unigram (tokenizer.ggml.model "t5") test vocabularies and their
test vectors (tests/corpus/ugm/). Not run by CI; needs SentencePiece
(Debian: sentencepiece, python3-sentencepiece), numpy, gguf-py (GGUF_PY: its
folder) and llama.cpp's llama-tokenize (LLAMA_TOKENIZE) for the vectors.

  GGUF_PY=.../gguf-py LLAMA_TOKENIZE=.../llama-tokenize tools/gen_ugm_vocab.py [OUT_DIR]

Three SentencePiece unigram models are trained on a small multilingual text
written here, and converted to vocabulary-only GGUF files the way llama.cpp's
converter does:
  xlmr.gguf   nmt_nfkc normalizer, remove_extra_whitespaces, the dummy prefix;
              XLM-RoBERTa's (fairseq) ids: <s>=0 <pad>=1 </s>=2 <unk>=3, the
              pieces shifted by one, add_bos/add_eos set (<s> ... </s>)
  t5.gguf     a custom normalization table (full-width forms, ligatures, a few
              case folds, tab/newline to space), spaces kept, T5's ids
              (<pad>=0 </s>=1 <unk>=2, no BOS), three added user-defined
              tokens, add_bos/add_eos keys absent (llama.cpp's defaults)
  ident.gguf  identity normalizer (no charsmap), no dummy prefix, spaces
              kept, fairseq ids
Each NAME.gguf gets NAME.gguf.inp (texts separated by
"\\n__ggml_vocab_test__\\n") and NAME.gguf.out (one line of ids per text,
as llama-tokenize --ids gives them: special tokens as the vocabulary's
add_bos asks, special-token text not parsed). The ids are also checked
against spm_encode's where the layouts agree (normal pieces, no user-defined
tokens).
"""
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.environ.get("GGUF_PY", "gguf-py"))
import gguf  # noqa: E402
import sentencepiece as spm  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/corpus/ugm"
TOKENIZE = os.environ.get("LLAMA_TOKENIZE", "llama-tokenize")
SEP = "\n__ggml_vocab_test__\n"

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! How are you doing today?",
    "Embeddings map sentences to vectors; similar meanings land close together.",
    "A tokenizer splits text into pieces, and the model reads their ids.",
    "Le café est très chaud, mais la crème brûlée est froide.",
    "Où est la bibliothèque ? À côté de l'église, près du théâtre.",
    "Der Straßenbahnfahrer grüßt die Fußgänger an der Haltestelle.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "El niño comió piña en la montaña; ¿quién lo vio? ¡Nadie!",
    "A informação está disponível em português e em espanhol.",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "Привет, мир! Как дела? Всё хорошо, спасибо.",
    "我们今天去北京看长城，天气很好。",
    "机器学习模型把句子变成向量。中文分词很难。",
    "東京は日本の首都です。ひらがなとカタカナも使います。",
    "私は毎朝コーヒーを飲みます。ラーメンが好きです。",
    "안녕하세요, 만나서 반갑습니다. 한국어 문장입니다.",
    "مرحبا بالعالم، هذه جملة باللغة العربية.",
    "नमस्ते दुनिया, यह हिंदी में एक वाक्य है।",
    "สวัสดีครับ ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Emoji: 😀 😂 👍🏽 ❤️ 🚀 🇫🇷 — they are all over the web.",
    "Ｆｕｌｌ－ｗｉｄｔｈ　ｆｏｒｍｓ：ＡＢＣ１２３！",
    "ﬁne ﬂowers, ① ② ③, x² + y³, Ⅻ o'clock, ½ cup, ™ and ℃.",
    "Numbers 12345 and 3.14159 and 2026-12-07 and 10:45pm.",
    "email: someone@example.com, url: https://example.org/path?q=1",
    "Tabs\tand\nnewlines  and   several    spaces.",
    "naïve coöperation façade jalapeño résumé déjà vu",
    "The year 1999 was followed by 2000, then 2001.",
    "Ünïcödé çhäràctérs àrè èvérywhérè ïn thïs séntèncé.",
]

WORDS = ("the of and to in is was for on are with as by at from this that have it not be or an which one "
         "all were when we there can more if no out so what up its about into than them only other new some "
         "time could these two may first then do any like my now over such our man me even most made after "
         "also did many before must through back years where much your way well down should because each "
         "just those people how too little state good very make world still own see men work long get here "
         "between both life being under never day same another know while last might us great old year off "
         "come since against go came right used take three").split()

T5_RULES = [  # (source code points, target code points) for the custom normalizer
    ("\t", " "), ("\n", " "), ("\r", " "), ("\u3000", " "), ("\u00a0", " "),
    ("\ufb01", "fi"), ("\ufb02", "fl"), ("\u2460", "1"), ("\u2461", "2"), ("\u2462", "3"),
    ("\u00bd", "1/2"), ("\u2122", "TM"), ("\u00b2", "2"), ("\u00b3", "3"),
    ("A", "a"), ("B", "b"), ("C", "c"), ("H", "h"), ("T", "t"), ("e\u0301", "\u00e9"),
] + [(chr(0xFF01 + i), chr(0x21 + i)) for i in range(94)]  # full-width ASCII

TESTS = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n\n", "\t\n", " \t ",
    "Hello world", " Hello world", "Hello World", " Hello World", " Hello World!", "Hello, world!",
    " this is 🦙.cpp", "w048 7tuijk dsdfhu", "нещо на Български", "កាន់តែពិសេសអាចខលចេញ",
    "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
    "Hello", " Hello", "  Hello", "   Hello", "    Hello", "    Hello\n    Hello", " (", "\n =",
    "' era", "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
    "!!!!!!", "3", "33", "333", "3333", "33333", "333333", "3333333", "33333333", "333333333",
    "Cửa Việt", " discards", "Le café est très chaud.", "Ｆｕｌｌ－ｗｉｄｔｈ　ＡＢＣ１２３！",
    "ﬁne ﬂowers ① ② ③ x² ½ ™ ℃ Ⅻ", "e\u0301te\u0301 vs été", "Straße grüßt",
    "我们今天去北京看长城。", "東京は日本の首都です。", "안녕하세요", "مرحبا بالعالم", "नमस्ते दुनिया",
    "😀😂👍🏽❤️🚀🇫🇷", "\u2581", "\u2581\u2581a\u2581", "a\u2581b", "  spaces  in  between  ",
    "trailing   ", "\u00a0nbsp\u00a0", "zero\u200bwidth",
    "x" * 300, "ab" * 200, "超" * 50, "😀" * 40,
    "<s> is control text </s> and <unk> and <pad>", "<s>", "</s>", "<unk>",
    "<extra_id_0> user <ud>tokens<ud> ＵＤ and ＵＤＸ", "<ud", "<extra_id_", "a<ud>b",
    "Qxzq vvjk QQQQ", "ǅ ǈ ǋ", "ｶﾀｶﾅ half-width", "\u3000full\u3000space\u3000",
    "mixed\tTABS\tand\r\nCRLF\r\n", "café\u0301 stacked accents a\u0300\u0301\u0302",
    "\xff\xfe invalid bytes replaced", "end \xc3", "\xe2\x82 cut",
]


def corpus(path):
    rng = random.Random(7)
    lines = list(SENTENCES)
    for _ in range(4000):
        k = rng.randint(3, 14)
        s = " ".join(rng.choice(WORDS) for _ in range(k))
        if rng.random() < 0.3:
            s = s.capitalize() + rng.choice([".", "!", "?", ","])
        if rng.random() < 0.5:
            s += " " + rng.choice(SENTENCES)
        lines.append(s)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def read_varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def proto_fields(b):
    """(field, wire type, value) of a protobuf message (no nesting)."""
    i, out = 0, []
    while i < len(b):
        key, i = read_varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = read_varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        out.append((f, wt, v))
    return out


def normalizer_spec(model_path):
    """precompiled_charsmap, add_dummy_prefix, remove_extra_whitespaces of a
    .model file (ModelProto field 3 = NormalizerSpec: 2 charsmap, 3 / 4 the
    flags, default true)."""
    spec = [v for f, wt, v in proto_fields(open(model_path, "rb").read()) if f == 3 and wt == 2]
    cm, prefix, merge = b"", True, True
    for f, wt, v in proto_fields(spec[0]) if spec else []:
        if f == 2:
            cm = bytes(v)
        elif f == 3:
            prefix = bool(v)
        elif f == 4:
            merge = bool(v)
    return cm, prefix, merge


def train(prefix, text, vocab, extra):
    args = ["spm_train", f"--input={text}", f"--model_prefix={prefix}", "--model_type=unigram",
            f"--vocab_size={vocab}", "--character_coverage=0.9995", "--hard_vocab_limit=false",
            "--num_threads=2", "--seed_sentencepiece_size=20000"] + extra
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return prefix + ".model"


def types_of(sp):
    T = gguf.TokenType if hasattr(gguf, "TokenType") else None
    out = []
    for i in range(sp.vocab_size()):
        t = 1
        if sp.IsUnknown(i):
            t = 2
        elif sp.IsControl(i):
            t = 3
        elif sp.IsUnused(i):
            t = 5
        elif sp.IsByte(i):
            t = 6
        out.append(t)
    del T
    return out


def write_gguf(path, arch, toks, scores, types, prefix, merge, cm, ids, add):
    w = gguf.GGUFWriter(path, arch)
    w.add_tokenizer_model("t5")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_add_space_prefix(prefix)
    w.add_remove_extra_whitespaces(merge)
    if cm:
        w.add_precompiled_charsmap(cm)
    for k, v in ids.items():
        w.add_uint32(f"tokenizer.ggml.{k}_token_id", v)
    for k, v in add.items():
        w.add_bool(f"tokenizer.ggml.add_{k}_token", v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def fairseq(sp):
    """XLM-RoBERTa's layout, as the converter makes it: vocab_size = pieces + 2,
    [PAD<i>] fillers, then <s> <pad> </s> <unk> + pieces[3:-1]."""
    n = sp.vocab_size() + 2
    toks = [f"[PAD{i}]".encode() for i in range(n)]
    scores = [-10000.0] * n
    types = [5] * n
    st = types_of(sp)
    for i in range(sp.vocab_size()):
        toks[i] = sp.IdToPiece(i).encode()
        scores[i] = sp.GetScore(i)
        types[i] = st[i]
    toks = [b"<s>", b"<pad>", b"</s>", b"<unk>"] + toks[3:-1]
    scores = [0.0] * 4 + scores[3:-1]
    types = [3, 3, 3, 2] + types[3:-1]
    return toks, scores, types


def vectors(gguf_path, texts):
    lines = []
    with tempfile.TemporaryDirectory() as d:
        for t in texts:
            p = os.path.join(d, "t.txt")
            with open(p, "wb") as f:
                f.write(t.encode("utf-8", "surrogateescape"))
            r = subprocess.run([TOKENIZE, "-m", gguf_path, "-f", p, "--ids", "--no-escape", "--log-disable"],
                               check=True, capture_output=True)
            out = r.stdout.decode().strip().splitlines()[-1]
            ids = [int(x) for x in out.strip("[]").split(",") if x.strip()]
            lines.append(" ".join(str(i) for i in ids))
    return lines


def spm_ids(model, text):
    r = subprocess.run(["spm_encode", f"--model={model}", "--output_format=id"], input=text.encode() + b"\n",
                       check=True, capture_output=True)
    return [int(x) for x in r.stdout.decode().split()]


def main():
    os.makedirs(OUT, exist_ok=True)
    # the invalid-UTF-8 texts: their \xNN characters stand for raw bytes
    bad = ("\xff\xfe invalid bytes replaced", "end \xc3", "\xe2\x82 cut")
    raw = [t.encode("latin-1") if t in bad else t.encode("utf-8") for t in TESTS]
    with tempfile.TemporaryDirectory() as d:
        text = os.path.join(d, "corpus.txt")
        corpus(text)
        tsv = os.path.join(d, "rules.tsv")
        with open(tsv, "w", encoding="utf-8") as f:
            for a, b in T5_RULES:
                f.write(" ".join("%X" % ord(c) for c in a) + "\t" + " ".join("%X" % ord(c) for c in b) + "\n")
        made = {}
        m = train(os.path.join(d, "xlmr"), text, 900, ["--normalization_rule_name=nmt_nfkc"])
        sp = spm.SentencePieceProcessor(model_file=m)
        cm, prefix, merge = normalizer_spec(m)
        toks, scores, types = fairseq(sp)
        made["xlmr"] = (m, 1)
        write_gguf(os.path.join(OUT, "xlmr.gguf"), "bert", toks, scores, types, prefix, merge, cm,
                   {"bos": 0, "eos": 2, "unknown": 3, "seperator": 2, "padding": 1, "cls": 0},
                   {"bos": True, "eos": True})

        m = train(os.path.join(d, "t5"), text, 700, [f"--normalization_rule_tsv={tsv}", "--pad_id=0",
                                                      "--eos_id=1", "--unk_id=2", "--bos_id=-1",
                                                      "--remove_extra_whitespaces=false"])
        sp = spm.SentencePieceProcessor(model_file=m)
        cm, prefix, merge = normalizer_spec(m)
        st = types_of(sp)
        toks = [sp.IdToPiece(i).encode() for i in range(sp.vocab_size())]
        scores = [sp.GetScore(i) for i in range(sp.vocab_size())]
        types = list(st)
        for u in ["<extra_id_0>", "<ud>", "ＵＤ"]:  # added_tokens.json: user-defined, score -1000
            toks.append(u.encode())
            scores.append(-1000.0)
            types.append(4)
        toks.append(b"[PAD1]")  # the converter's padding up to the model's vocab_size
        scores.append(-1000.0)
        types.append(5)
        made["t5"] = (m, 0)
        write_gguf(os.path.join(OUT, "t5.gguf"), "t5", toks, scores, types, prefix, merge, cm,
                   {"eos": 1, "unknown": 2, "padding": 0}, {})

        m = train(os.path.join(d, "ident"), text, 500, ["--normalization_rule_name=identity",
                                                         "--add_dummy_prefix=false",
                                                         "--remove_extra_whitespaces=false"])
        sp = spm.SentencePieceProcessor(model_file=m)
        cm, prefix, merge = normalizer_spec(m)
        toks, scores, types = fairseq(sp)
        made["ident"] = (m, 1)
        write_gguf(os.path.join(OUT, "ident.gguf"), "bert", toks, scores, types, prefix, merge, cm,
                   {"bos": 0, "eos": 2, "unknown": 3, "seperator": 2, "padding": 1}, {"bos": True, "eos": True})

        for name, (model, shift) in made.items():
            g = os.path.join(OUT, name + ".gguf")
            got = vectors(g, [r.decode("utf-8", "surrogateescape") for r in raw])
            with open(g + ".inp", "wb") as f:
                f.write(SEP.encode().join(raw))
            with open(g + ".out", "w") as f:
                f.write("\n".join(got) + "\n")
            # spm_encode agrees on texts without special-token text, valid UTF-8, not empty
            agree = checked = 0
            for r, line in zip(raw, got):
                try:
                    t = r.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if "<" in t or "\n" in t or "\r" in t or not t.strip() or "ＵＤ" in t:
                    continue
                ids = [int(x) for x in line.split()]
                if shift:
                    ids = ids[1:-1]
                    ref = [i + 1 if i >= 3 else {0: 3, 1: 0, 2: 2}[i] for i in spm_ids(model, t)]
                else:
                    ref = spm_ids(model, t)
                checked += 1
                agree += ids == ref
                if ids != ref:
                    print(f"{name}: spm_encode differs on {t!r}: {ids} vs {ref}")
            print(f"{name}: {len(raw)} vectors; spm_encode agrees on {agree}/{checked}")


if __name__ == "__main__":
    main()
