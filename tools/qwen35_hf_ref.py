# Outside CI (needs Debian's python3-numpy): writes a Qwen3.5 folder in the
# published layout into DIR (multimodal config with text_config, model.language_model.*
# tensors, conv1d [C, 1, K], value heads grouped by key head, an MTP tensor and a
# vision tensor) and DIR/ref.bin, the logits at 20 positions of DIR/ids.bin from a
# float64 forward written from transformers' modeling_qwen3_5 (repeat_interleave of
# the Q/K heads, 1 + w gains, -exp(A_log), the recurrent gated delta rule).
# tools/qwen35_hf_ref.c runs staticlm on the folder against it:
#   /usr/bin/python3 tools/qwen35_hf_ref.py DIR
#   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc tools/qwen35_hf_ref.c build/libstaticlm.a \
#      $(pkg-config --libs libpcre2-8 libcjson) -lm -lpthread -o /tmp/q35ref && /tmp/q35ref DIR
import json, struct, sys, numpy as np
rng = np.random.default_rng(7)
D, H, KV, HD, F, V, L, S, KH, VH, K, CTX = 64, 2, 1, 32, 96, 160, 4, 16, 2, 4, 4, 256
R = VH // KH; CD = (2 * KH + VH) * S; VD = VH * S; ROT = HD // 4; EPS = 1e-6; THETA = 1e7
out = sys.argv[1]
T = {}
def w(name, shape, sc, b=0.0): T[name] = (b + sc * rng.standard_normal(shape)).astype(np.float32)
P = "model.language_model."
w(P + "embed_tokens.weight", (V, D), 1.0)
sd = 1 / np.sqrt(D)
for l in range(L):
    p = f"{P}layers.{l}."
    w(p + "input_layernorm.weight", (D,), 0.1); w(p + "post_attention_layernorm.weight", (D,), 0.1)
    if (l + 1) % 4:
        w(p + "linear_attn.in_proj_qkv.weight", (CD, D), sd); w(p + "linear_attn.in_proj_z.weight", (VD, D), sd)
        w(p + "linear_attn.in_proj_b.weight", (VH, D), sd); w(p + "linear_attn.in_proj_a.weight", (VH, D), sd)
        w(p + "linear_attn.conv1d.weight", (CD, 1, K), 0.5); w(p + "linear_attn.dt_bias", (VH,), 0.5)
        w(p + "linear_attn.A_log", (VH,), 0.4, 0.3); w(p + "linear_attn.norm.weight", (S,), 0.1, 1.0)
        w(p + "linear_attn.out_proj.weight", (D, VD), 1 / np.sqrt(VD))
    else:
        w(p + "self_attn.q_proj.weight", (2 * H * HD, D), sd); w(p + "self_attn.k_proj.weight", (KV * HD, D), sd)
        w(p + "self_attn.v_proj.weight", (KV * HD, D), sd); w(p + "self_attn.q_norm.weight", (HD,), 0.2)
        w(p + "self_attn.k_norm.weight", (HD,), 0.2); w(p + "self_attn.o_proj.weight", (D, H * HD), 1 / np.sqrt(H * HD))
    w(p + "mlp.gate_proj.weight", (F, D), sd); w(p + "mlp.up_proj.weight", (F, D), sd)
    w(p + "mlp.down_proj.weight", (D, F), 1 / np.sqrt(F))
w(P + "norm.weight", (D,), 0.1); w("lm_head.weight", (V, D), 2 * sd); w("model.visual.patch_embed.proj.weight", (8, 8), 1.0)
w("mtp.fc.weight", (D, 2 * D), sd)
hdr, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
for n, a in T.items():
    b = a.tobytes(); hdr[n] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}; off += len(b); blobs.append(b)
h = json.dumps(hdr).encode(); h += b" " * ((8 - len(h) % 8) % 8)
open(out + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
tc = {"model_type": "qwen3_5_text", "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
      "num_attention_heads": H, "num_key_value_heads": KV, "head_dim": HD, "vocab_size": V, "max_position_embeddings": CTX,
      "rms_norm_eps": EPS, "hidden_act": "silu", "attn_output_gate": True, "linear_conv_kernel_dim": K,
      "linear_key_head_dim": S, "linear_value_head_dim": S, "linear_num_key_heads": KH, "linear_num_value_heads": VH,
      "layer_types": ["linear_attention" if (l + 1) % 4 else "full_attention" for l in range(L)],
      "full_attention_interval": 4, "mtp_num_hidden_layers": 1, "tie_word_embeddings": False,
      "rope_parameters": {"rope_type": "default", "rope_theta": THETA, "partial_rotary_factor": 0.25,
                          "mrope_section": [11, 11, 10], "mrope_interleaved": True}}
json.dump({"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "tie_word_embeddings": False,
           "vision_config": {"model_type": "qwen3_5", "depth": 1}, "text_config": tc}, open(out + "/config.json", "w"))

# ---- the forward, float64, as modeling_qwen3_5 computes it ----
def rms(x, g, plus1=True): return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * ((1 + g) if plus1 else g)
silu = lambda x: x / (1 + np.exp(-x)); softplus = lambda x: np.log1p(np.exp(x)); sig = lambda x: 1 / (1 + np.exp(-x))
def l2n(x): return x / np.sqrt((x * x).sum(-1, keepdims=True) + 1e-6)
N = 20; ids = rng.integers(0, V, N)
G = {k: v.astype(np.float64) for k, v in T.items()}
x = G[P + "embed_tokens.weight"][ids]
inv = 1.0 / THETA ** (np.arange(0, ROT, 2) / ROT); pos = np.arange(N)[:, None] * inv[None, :]
cos, sin = np.cos(np.concatenate([pos, pos], -1)), np.sin(np.concatenate([pos, pos], -1))
def rope(q):  # [N, heads, HD], rotate_half on the first ROT dims
    r, pz = q[..., :ROT], q[..., ROT:]
    rh = np.concatenate([-r[..., ROT // 2:], r[..., :ROT // 2]], -1)
    return np.concatenate([r * cos[:, None] + rh * sin[:, None], pz], -1)
for l in range(L):
    p = f"{P}layers.{l}."; hh = rms(x, G[p + "input_layernorm.weight"])
    if (l + 1) % 4:
        qkv = hh @ G[p + "linear_attn.in_proj_qkv.weight"].T
        wc = G[p + "linear_attn.conv1d.weight"][:, 0, :]
        pad = np.concatenate([np.zeros((K - 1, CD)), qkv], 0)
        cv = silu(np.stack([(pad[t:t + K] * wc.T).sum(0) for t in range(N)]))
        q = cv[:, :KH * S].reshape(N, KH, S); k = cv[:, KH * S:2 * KH * S].reshape(N, KH, S); v = cv[:, 2 * KH * S:].reshape(N, VH, S)
        z = (hh @ G[p + "linear_attn.in_proj_z.weight"].T).reshape(N, VH, S)
        beta = sig(hh @ G[p + "linear_attn.in_proj_b.weight"].T)
        g = -np.exp(G[p + "linear_attn.A_log"]) * softplus(hh @ G[p + "linear_attn.in_proj_a.weight"].T + G[p + "linear_attn.dt_bias"])
        q = np.repeat(q, R, axis=1); k = np.repeat(k, R, axis=1)  # repeat_interleave: head h reads key head h // R
        q = l2n(q) / np.sqrt(S); k = l2n(k)
        st = np.zeros((VH, S, S)); o = np.zeros((N, VH, S))
        for t in range(N):
            st = st * np.exp(g[t])[:, None, None]
            kv = (st * k[t][:, :, None]).sum(1)
            dl = (v[t] - kv) * beta[t][:, None]
            st = st + k[t][:, :, None] * dl[:, None, :]
            o[t] = (st * q[t][:, :, None]).sum(1)
        o = rms(o, G[p + "linear_attn.norm.weight"], plus1=False) * silu(z)
        a = o.reshape(N, VD) @ G[p + "linear_attn.out_proj.weight"].T
    else:
        qg = (hh @ G[p + "self_attn.q_proj.weight"].T).reshape(N, H, 2 * HD)
        q, gate = qg[..., :HD], qg[..., HD:].reshape(N, H * HD)
        q = rope(rms(q, G[p + "self_attn.q_norm.weight"]))
        k = rope(rms((hh @ G[p + "self_attn.k_proj.weight"].T).reshape(N, KV, HD), G[p + "self_attn.k_norm.weight"]))
        v = (hh @ G[p + "self_attn.v_proj.weight"].T).reshape(N, KV, HD)
        o = np.zeros((N, H, HD))
        for hd in range(H):
            kh = hd // (H // KV); sc = q[:, hd] @ k[:, kh].T / np.sqrt(HD)
            sc = np.where(np.tril(np.ones((N, N))) > 0, sc, -np.inf); sc = np.exp(sc - sc.max(-1, keepdims=True))
            o[:, hd] = (sc / sc.sum(-1, keepdims=True)) @ v[:, kh]
        a = (o.reshape(N, H * HD) * sig(gate)) @ G[p + "self_attn.o_proj.weight"].T
    x = x + a; h2 = rms(x, G[p + "post_attention_layernorm.weight"])
    x = x + (silu(h2 @ G[p + "mlp.gate_proj.weight"].T) * (h2 @ G[p + "mlp.up_proj.weight"].T)) @ G[p + "mlp.down_proj.weight"].T
lg = rms(x, G[P + "norm.weight"]) @ G["lm_head.weight"].T
np.array(ids, dtype=np.int32).tofile(out + "/ids.bin"); lg.astype(np.float32).tofile(out + "/ref.bin")
print("wrote", out, "N", N)
