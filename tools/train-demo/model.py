"""A Qwen3.5 text model (Gated DeltaNet + gated attention) with Qwen3.5's MTP head, in plain PyTorch.

Module names follow the Hugging Face checkpoint layout, so `state_dict()` is the checkpoint:
`model.embed_tokens.weight`, `model.layers.N.linear_attn.*` / `model.layers.N.self_attn.*`,
`model.norm.weight`, `lm_head.weight` (only when the embedding is not tied), and the MTP head
`mtp.fc.weight`, `mtp.pre_fc_norm_embedding.weight`, `mtp.pre_fc_norm_hidden.weight`,
`mtp.layers.0.*` (a full-attention decoder layer), `mtp.norm.weight`.

The arithmetic is transformers' Qwen3_5ForCausalLM (docs/checkpoints.md, "Tensor layout"):
RMSNorms scale by (1 + w) except the Gated DeltaNet output norm (w); q/k of the Gated DeltaNet
are L2-normalised and q scaled by Dk^-0.5; beta = sigmoid(b); g = -exp(A_log) softplus(a + dt_bias);
attention q_proj holds [query | gate] per head, partial rotary over the first rotary_dim dims.
tests/test_fixture_logits.py checks all of it against the transformers fixtures.
"""
import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass
class Qwen35Config:
    vocab_size: int = 8192
    hidden_size: int = 256
    intermediate_size: int = 384
    num_hidden_layers: int = 8
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    linear_num_key_heads: int = 2
    linear_num_value_heads: int = 4
    linear_key_head_dim: int = 64
    linear_value_head_dim: int = 64
    linear_conv_kernel_dim: int = 4
    full_attention_interval: int = 4
    layer_types: list = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    partial_rotary_factor: float = 0.25
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = True
    mtp_num_hidden_layers: int = 1

    def __post_init__(self):
        if self.layer_types is None:
            # transformers' default: every full_attention_interval-th layer is full attention.
            n = self.full_attention_interval
            self.layer_types = ["full_attention" if (i + 1) % n == 0 else "linear_attention"
                                for i in range(self.num_hidden_layers)]
        assert len(self.layer_types) == self.num_hidden_layers
        assert self.num_attention_heads % self.num_key_value_heads == 0
        assert self.linear_num_value_heads % self.linear_num_key_heads == 0

    @property
    def rotary_dim(self):
        return int(self.head_dim * self.partial_rotary_factor)

    @classmethod
    def from_hf(cls, cfg):
        """From a config.json dict (flat, or nested under text_config)."""
        t = cfg.get("text_config", cfg)
        rope = t.get("rope_parameters") or {}
        kw = {f.name: t[f.name] for f in dataclasses.fields(cls) if f.name in t}
        kw["rope_theta"] = rope.get("rope_theta", t.get("rope_theta", 10000.0))
        kw["partial_rotary_factor"] = rope.get("partial_rotary_factor", t.get("partial_rotary_factor", 0.25))
        kw["tie_word_embeddings"] = cfg.get("tie_word_embeddings", t.get("tie_word_embeddings", False))
        kw["mtp_num_hidden_layers"] = t.get("mtp_num_hidden_layers", 0)
        return cls(**kw)


class RMSNorm(nn.Module):
    """Qwen3.5's RMSNorm: weight stored around 0, the scale is (1 + w), computed in float32 or wider."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        h = x.to(torch.promote_types(x.dtype, torch.float32))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * (1.0 + self.weight.to(h.dtype))).to(x.dtype)


class GatedRMSNorm(nn.Module):
    """The Gated DeltaNet output norm: w * rmsnorm(x) * silu(z), weight stored around 1."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x, z):
        wide = torch.promote_types(x.dtype, torch.float32)
        h = x.to(wide)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        # transformers rounds the normalised value to the input dtype before the weight.
        h = self.weight * h.to(x.dtype)
        return (h.to(wide) * F.silu(z.to(wide))).to(x.dtype)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def rope_tables(cfg, positions, dtype):
    """cos/sin [L, rotary_dim] for rotate-half RoPE over the first rotary_dim dims."""
    rd = cfg.rotary_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, rd, 2, dtype=torch.float32, device=positions.device) / rd))
    freqs = positions.to(torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_partial_rope(x, cos, sin):
    """x [B, heads, L, D]: rotate the first cos.shape[-1] dims (pairs j, j + rd/2), pass the rest."""
    rd = cos.shape[-1]
    rot, rest = x[..., :rd], x[..., rd:]
    x1, x2 = rot[..., : rd // 2], rot[..., rd // 2:]
    rotated = torch.cat([-x2, x1], dim=-1)
    return torch.cat([rot * cos + rotated * sin, rest], dim=-1)


class Attention(nn.Module):
    """Qwen3.5 gated attention: q_proj gives [query | gate] per head, out = o_proj(attn * sigmoid(gate))."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        nq, nkv, d, h = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size
        self.q_proj = nn.Linear(h, nq * d * 2, bias=False)
        self.k_proj = nn.Linear(h, nkv * d, bias=False)
        self.v_proj = nn.Linear(h, nkv * d, bias=False)
        self.o_proj = nn.Linear(nq * d, h, bias=False)
        self.q_norm = RMSNorm(d, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(d, cfg.rms_norm_eps)

    def forward(self, x, cos, sin):
        b, n, _ = x.shape
        cfg = self.cfg
        d, nq, nkv = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads
        q, gate = self.q_proj(x).view(b, n, nq, 2 * d).chunk(2, dim=-1)
        gate = gate.reshape(b, n, nq * d)
        q = apply_partial_rope(self.q_norm(q).transpose(1, 2), cos, sin)
        k = apply_partial_rope(self.k_norm(self.k_proj(x).view(b, n, nkv, d)).transpose(1, 2), cos, sin)
        v = self.v_proj(x).view(b, n, nkv, d).transpose(1, 2)
        # Query head h reads KV head h // (nq / nkv).
        k = k.repeat_interleave(nq // nkv, dim=1)
        v = v.repeat_interleave(nq // nkv, dim=1)
        # Under autocast q and k leave the float32 RoPE in float32 and v is bfloat16: one dtype.
        q, k = q.to(v.dtype), k.to(v.dtype)
        o = causal_attention(q, k, v, d ** -0.5)
        o = o.transpose(1, 2).reshape(b, n, nq * d)
        return self.o_proj(o * torch.sigmoid(gate))


def causal_attention(q, k, v, scale):
    if hasattr(F, "scaled_dot_product_attention") and q.dtype != torch.float64:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    n = q.shape[-2]
    s = (q @ k.transpose(-1, -2)) * scale
    mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
    s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s.to(torch.promote_types(s.dtype, torch.float32)), dim=-1).to(q.dtype) @ v


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def gated_delta_rule_recurrent(q, k, v, g, beta):
    """The Gated DeltaNet recurrence one token at a time (the definition; tests compare the chunked form).

    q, k [B, H, L, Dk] (already L2-normalised, q scaled), v [B, H, L, Dv], g, beta [B, H, L].
    State S [Dk, Dv]: S <- exp(g_t) S; u_t = beta_t (v_t - S^T k_t); S <- S + k_t u_t^T; o_t = S^T q_t.
    """
    b, h, n, dk = k.shape
    s = q.new_zeros(b, h, dk, v.shape[-1])
    out = []
    for t in range(n):
        s = s * g[:, :, t].exp()[..., None, None]
        u = beta[:, :, t, None] * (v[:, :, t] - (s * k[:, :, t, :, None]).sum(-2))
        s = s + k[:, :, t, :, None] * u[:, :, None, :]
        out.append((s * q[:, :, t, :, None]).sum(-2))
    return torch.stack(out, dim=2)


def gated_delta_rule_chunked(q, k, v, g, beta, chunk=64):
    """The same recurrence, chunk by chunk (arguments as gated_delta_rule_recurrent).

    Inside a chunk, with gamma_i the cumulative log decay from the chunk start and S0 the state
    entering it, the values each token writes, u = T (beta v - beta exp(gamma) K S0) with
    T = (I + A)^-1, A_ij = beta_i exp(gamma_i - gamma_j) k_i.k_j (j < i), follow from one
    triangular solve; then o_i = exp(gamma_i) S0^T q_i + sum_{j<=i} exp(gamma_i - gamma_j) (q_i.k_j) u_j
    and S_end = exp(gamma_C) S0 + sum_j exp(gamma_C - gamma_j) k_j u_j^T. Only the chunks are a loop.
    """
    b, h, n, dk = k.shape
    dv = v.shape[-1]
    pad = (-n) % chunk
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    c = q.shape[2] // chunk
    q, k, v = (x.reshape(b, h, c, chunk, x.shape[-1]) for x in (q, k, v))
    g, beta = (x.reshape(b, h, c, chunk) for x in (g, beta))
    gamma = g.cumsum(-1)
    lower = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    # exp(gamma_i - gamma_j) on and below the diagonal; -inf above, so exp never overflows.
    decay = (gamma[..., :, None] - gamma[..., None, :]).masked_fill(~lower, float("-inf")).exp()
    kb = k * beta[..., None]
    # I + A: unit lower triangular, so T = (I + A)^-1 is applied by forward substitution.
    i_plus_a = (kb @ k.transpose(-1, -2)) * decay.tril(-1) + torch.eye(chunk, dtype=q.dtype, device=q.device)
    u_v = torch.linalg.solve_triangular(i_plus_a, v * beta[..., None], upper=False, unitriangular=True)
    u_s = torch.linalg.solve_triangular(i_plus_a, kb * gamma.exp()[..., None], upper=False, unitriangular=True)
    qk = (q @ k.transpose(-1, -2)) * decay
    q_dec = q * gamma.exp()[..., None]
    k_dec = k * (gamma[..., -1:] - gamma).exp()[..., None]
    chunk_decay = gamma[..., -1].exp()[..., None, None]
    s = q.new_zeros(b, h, dk, dv)
    out = []
    for i in range(c):
        u = u_v[:, :, i] - u_s[:, :, i] @ s
        out.append(q_dec[:, :, i] @ s + qk[:, :, i] @ u)
        s = s * chunk_decay[:, :, i] + k_dec[:, :, i].transpose(-1, -2) @ u
    o = torch.stack(out, dim=2).reshape(b, h, c * chunk, dv)
    return o[:, :, :n]


class GatedDeltaNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        nk, nv, dk, dv = (cfg.linear_num_key_heads, cfg.linear_num_value_heads,
                          cfg.linear_key_head_dim, cfg.linear_value_head_dim)
        h = cfg.hidden_size
        conv_dim = 2 * nk * dk + nv * dv
        self.in_proj_qkv = nn.Linear(h, conv_dim, bias=False)
        self.in_proj_z = nn.Linear(h, nv * dv, bias=False)
        self.in_proj_b = nn.Linear(h, nv, bias=False)
        self.in_proj_a = nn.Linear(h, nv, bias=False)
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, cfg.linear_conv_kernel_dim, groups=conv_dim, bias=False,
                                padding=cfg.linear_conv_kernel_dim - 1)
        self.A_log = nn.Parameter(torch.zeros(nv))
        self.dt_bias = nn.Parameter(torch.zeros(nv))
        self.norm = GatedRMSNorm(dv, cfg.rms_norm_eps)
        self.out_proj = nn.Linear(nv * dv, h, bias=False)
        self.recurrent = False  # tests switch to the one-token-at-a-time definition

    def forward(self, x):
        cfg = self.cfg
        bsz, n, _ = x.shape
        nk, nv, dk, dv = (cfg.linear_num_key_heads, cfg.linear_num_value_heads,
                          cfg.linear_key_head_dim, cfg.linear_value_head_dim)
        # Depthwise causal conv over [q | k | v] channels, then SiLU.
        mixed = F.silu(self.conv1d(self.in_proj_qkv(x).transpose(1, 2))[..., :n]).transpose(1, 2)
        q, k, v = torch.split(mixed, [nk * dk, nk * dk, nv * dv], dim=-1)
        wide = torch.promote_types(x.dtype, torch.float32)
        q = q.reshape(bsz, n, nk, dk).transpose(1, 2).to(wide)
        k = k.reshape(bsz, n, nk, dk).transpose(1, 2).to(wide)
        v = v.reshape(bsz, n, nv, dv).transpose(1, 2).to(wide)
        # Value head j reads key head j // (nv / nk).
        q = q.repeat_interleave(nv // nk, dim=1)
        k = k.repeat_interleave(nv // nk, dim=1)
        q = l2norm(q) * dk ** -0.5
        k = l2norm(k)
        beta = torch.sigmoid(self.in_proj_b(x)).transpose(1, 2).to(wide)
        a = self.in_proj_a(x).to(wide)
        g = (-self.A_log.to(wide).exp() * F.softplus(a + self.dt_bias.to(wide))).transpose(1, 2)
        with torch.autocast(device_type=x.device.type, enabled=False):
            rule = gated_delta_rule_recurrent if self.recurrent else gated_delta_rule_chunked
            o = rule(q, k, v, g, beta)
        o = o.transpose(1, 2).to(x.dtype)  # [B, L, nv, dv]
        z = self.in_proj_z(x).reshape(bsz, n, nv, dv)
        o = self.norm(o, z).reshape(bsz, n, nv * dv)
        return self.out_proj(o)


class DecoderLayer(nn.Module):
    def __init__(self, cfg, layer_type, dropout=0.0):
        super().__init__()
        self.layer_type = layer_type
        if layer_type == "linear_attention":
            self.linear_attn = GatedDeltaNet(cfg)
        elif layer_type == "full_attention":
            self.self_attn = Attention(cfg)
        else:
            raise ValueError(f"unknown layer type {layer_type}")
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, cos, sin):
        h = self.input_layernorm(x)
        h = self.linear_attn(h) if self.layer_type == "linear_attention" else self.self_attn(h, cos, sin)
        x = x + self.dropout(h)
        return x + self.dropout(self.mlp(self.post_attention_layernorm(x)))


class TextModel(nn.Module):
    def __init__(self, cfg, dropout=0.0):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, t, dropout) for t in cfg.layer_types)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class MTP(nn.Module):
    """Qwen3.5's multi-token-prediction head (the layout vLLM and SGLang load as Qwen3_5MTP).

    Row t sees the embedding of token t+1 and the trunk's final-norm hidden state at t, and
    predicts token t+2: fc(cat[norm_e(embed(tok[t+1])), norm_h(h_t)]) through one full-attention
    decoder layer, mtp.norm and the shared LM head.
    """

    def __init__(self, cfg, dropout=0.0):
        super().__init__()
        h = cfg.hidden_size
        self.fc = nn.Linear(2 * h, h, bias=False)
        self.pre_fc_norm_embedding = RMSNorm(h, cfg.rms_norm_eps)
        self.pre_fc_norm_hidden = RMSNorm(h, cfg.rms_norm_eps)
        self.layers = nn.ModuleList(DecoderLayer(cfg, "full_attention", dropout)
                                    for _ in range(cfg.mtp_num_hidden_layers))
        self.norm = RMSNorm(h, cfg.rms_norm_eps)

    def forward(self, next_embeds, hidden, cos, sin):
        x = self.fc(torch.cat([self.pre_fc_norm_embedding(next_embeds), self.pre_fc_norm_hidden(hidden)], dim=-1))
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class Qwen35ForCausalLM(nn.Module):
    def __init__(self, cfg, dropout=0.0):
        super().__init__()
        self.cfg = cfg
        self.model = TextModel(cfg, dropout)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.mtp_num_hidden_layers:
            self.mtp = MTP(cfg, dropout)

    def head_weight(self):
        return self.model.embed_tokens.weight if self.cfg.tie_word_embeddings else self.lm_head.weight

    def hidden(self, ids):
        """The trunk's final-norm hidden states [B, L, H] for ids [B, L] starting at position 0."""
        x = self.model.embed_tokens(ids)
        cos, sin = rope_tables(self.cfg, torch.arange(ids.shape[1], device=ids.device), x.dtype)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.model.norm(x)

    def logits(self, h):
        return F.linear(h, self.head_weight().to(h.dtype))

    def forward(self, ids):
        return self.logits(self.hidden(ids))

    def mtp_hidden(self, ids, h):
        """MTP outputs [B, L-1, H] for rows t = 0..L-2 (predicting token t+2 at row t)."""
        nxt = self.model.embed_tokens(ids[:, 1:])
        cos, sin = rope_tables(self.cfg, torch.arange(ids.shape[1] - 1, device=ids.device), nxt.dtype)
        return self.mtp(nxt, h[:, :-1], cos, sin)


def init_weights(model, seed=0):
    """Initial values: matrices N(0, 0.02), output projections scaled by 1/sqrt(2 layers),
    (1 + w) norms at 0, the gated norm at 1, A_log = log U(1, 16), dt_bias = softplus^-1 of dt
    log-uniform in [1e-3, 1e-1] (the usual Gated DeltaNet / Mamba ranges), conv1d as PyTorch does."""
    gen = torch.Generator().manual_seed(seed)
    depth = len(model.cfg.layer_types) + model.cfg.mtp_num_hidden_layers
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("conv1d.weight"):
                bound = 1.0 / math.sqrt(p.shape[-1])
                p.copy_(torch.rand(p.shape, generator=gen) * 2 * bound - bound)
            elif name.endswith("A_log"):
                p.copy_(torch.log(torch.rand(p.shape, generator=gen) * 15 + 1))
            elif name.endswith("dt_bias"):
                dt = torch.exp(torch.rand(p.shape, generator=gen) * (math.log(1e-1) - math.log(1e-3)) + math.log(1e-3))
                p.copy_(dt + torch.log(-torch.expm1(-dt)))
            elif name.endswith("linear_attn.norm.weight"):
                p.fill_(1.0)
            elif p.dim() == 1:
                p.zero_()
            else:
                std = 0.02
                if name.endswith(("o_proj.weight", "out_proj.weight", "down_proj.weight")):
                    std /= math.sqrt(2 * depth)
                p.copy_(torch.randn(p.shape, generator=gen) * std)
