#!/usr/bin/env python3
"""Expected renderings (NAME.CONV.txt) of the templates here, made offline
with Jinja2 configured as Hugging Face's apply_chat_template configures it:
an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the
loopcontrols extension; raise_exception; tojson as json.dumps with
ensure_ascii=False; strftime_now fixed to "26 Jul 2024"; messages, tools=None,
documents=None, add_generation_prompt, bos_token, eos_token.
A template that raises gives "ERROR: template raised: MESSAGE".
Also renders the templates of ../shared/templates (when present) into
shared/NAME.CONV.txt here, with the conversations of conversations.txt and
those of tool_conversations.txt (tools and tool calls).
Run from anywhere: python3 tests/corpus/templates/make_goldens.py
Needs python3-jinja2 (Debian) or the jinja2 package; no network."""
import glob
import json
import os

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))


class Raised(Exception):
    pass


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def unescape(s):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            out.append({"n": "\n", "t": "\t", "\\": "\\"}.get(s[i + 1], "\\" + s[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def conversations(fname="conversations.txt"):
    convs = []
    with open(os.path.join(HERE, fname), encoding="utf-8") as f:
        for line in f.read().split("\n"):
            if not line or line.startswith("#"):
                continue
            if line.startswith("= "):
                name, gen = line[2:].split(" ")
                convs.append((name, gen == "1", [], None))
            elif line.startswith("tools\t"):
                convs[-1] = convs[-1][:3] + (json.loads(line.split("\t", 1)[1]),)
            elif line.startswith("+"):
                key, value = line[1:].split("\t", 1)
                convs[-1][2][-1][key] = json.loads(value) if key == "tool_calls" else value
            else:
                role, content = line.split("\t", 1)
                convs[-1][2].append({"role": role, "content": unescape(content)})
    return convs


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: "26 Jul 2024"
    shared = os.path.join(HERE, "..", "..", "..", "..", "shared", "templates")
    jobs = [(p, HERE) for p in sorted(glob.glob(os.path.join(HERE, "*.jinja")))]
    jobs += [(p, os.path.join(HERE, "shared")) for p in sorted(glob.glob(os.path.join(shared, "*.jinja")))]
    for path, outdir in jobs:
        os.makedirs(outdir, exist_ok=True)
        with open(path, encoding="utf-8") as f:
            tmpl = env.from_string(f.read())
        stem = os.path.basename(path)[: -len(".jinja")]
        convs = conversations()
        if outdir != HERE:
            convs += conversations("tool_conversations.txt")
        for name, gen, msgs, tools in convs:
            try:
                out = tmpl.render(messages=msgs, tools=tools, documents=None, add_generation_prompt=gen,
                                  bos_token="<s>", eos_token="</s>")
            except Raised as e:
                out = "ERROR: template raised: %s" % e
            except TemplateError as e:
                raise SystemExit("%s / %s: %s" % (stem, name, e))
            with open(os.path.join(outdir, "%s.%s.txt" % (stem, name)), "w", encoding="utf-8", newline="") as f:
                f.write(out)


if __name__ == "__main__":
    main()
