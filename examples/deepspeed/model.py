"""A small GPT-style language model in three forms DeepSpeed trains: dense (ZeRO 1-3), with
DeepSpeed-MoE feed-forward layers (expert parallel: all_to_all dispatch and combine), and as a list
of layers for deepspeed.pipe.

Pre-norm blocks, causal self-attention, GELU MLP, learned positions, untied output head; no dropout,
so that every run draws the same random numbers whatever the communication stack.
"""

import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Shape:
    vocab: int = 512
    seq: int = 64
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    ffn: int = 512
    experts: int = 0        # > 0: every block's MLP is a DeepSpeed MoE layer with this many experts
    ep_size: int = 1        # expert parallel size (the experts are split over this many ranks)
    aux_loss_coef: float = 0.01


class Attention(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.heads = s.heads
        self.qkv = nn.Linear(s.d_model, 3 * s.d_model)
        self.proj = nn.Linear(s.d_model, s.d_model)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).unbind(dim=2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


def mlp(s):
    return nn.Sequential(nn.Linear(s.d_model, s.ffn), nn.GELU(), nn.Linear(s.ffn, s.d_model))


def distinct_experts(moe, s):
    """Draws each expert of `moe` afresh from its global index. DeepSpeed deep-copies the one
    expert it is given into every local slot, and every rank builds the model from the same seed:
    left so, all experts of a layer would start identical. DeepSpeed's expert-parallel groups are
    runs of consecutive ranks (the expert-data-parallel replicas of an expert are ep_size apart),
    so this rank holds experts (rank % ep_size) * local + i. The layer's seed comes from the
    global generator (the same on every rank, another for each layer); the experts' own draws
    leave it as it was."""
    import torch.distributed as dist
    layer_seed = int(torch.randint(0, 2**31 - 1, ()))
    ep_rank = dist.get_rank() % s.ep_size if dist.is_initialized() else 0
    experts = moe.deepspeed_moe.experts.deepspeed_experts
    with torch.random.fork_rng(devices=[]):
        for i, expert in enumerate(experts):
            torch.manual_seed(layer_seed + 7919 * (ep_rank * len(experts) + i))
            for m in expert.modules():
                if isinstance(m, nn.Linear):
                    m.reset_parameters()


class Block(nn.Module):
    """One transformer block. With experts, forward returns (x, aux_loss) of the MoE gate."""

    def __init__(self, s):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(s.d_model), nn.LayerNorm(s.d_model)
        self.attn = Attention(s)
        self.moe = s.experts > 0
        if self.moe:
            from deepspeed.moe.layer import MoE
            # Top-1 gating with a fixed capacity (tokens over it are dropped), so every
            # all_to_all has equal splits, as in DeepSpeed-MoE's training recipes.
            self.ffn = MoE(hidden_size=s.d_model, expert=mlp(s), num_experts=s.experts,
                           ep_size=s.ep_size, k=1, capacity_factor=1.25, min_capacity=4)
            distinct_experts(self.ffn, s)
        else:
            self.ffn = mlp(s)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        if self.moe:
            y, aux, _ = self.ffn(self.norm2(x))
            return x + y, aux
        return x + self.ffn(self.norm2(x)), None


class GPT(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s
        self.tok = nn.Embedding(s.vocab, s.d_model)
        self.pos = nn.Embedding(s.seq, s.d_model)
        self.blocks = nn.ModuleList(Block(s) for _ in range(s.layers))
        self.norm = nn.LayerNorm(s.d_model)
        self.head = nn.Linear(s.d_model, s.vocab, bias=False)

    def forward(self, tokens, labels):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1]))
        aux = x.new_zeros(())
        for block in self.blocks:
            x, a = block(x)
            if a is not None:
                aux = aux + a
        logits = self.head(self.norm(x))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        return loss + self.s.aux_loss_coef * aux


# The same model as a sequence of layers for deepspeed.pipe: each layer takes and returns one
# tensor (activations flow between stages through send/recv).

class Embed(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.tok = nn.Embedding(s.vocab, s.d_model)
        self.pos = nn.Embedding(s.seq, s.d_model)

    def forward(self, tokens):
        return self.tok(tokens) + self.pos(torch.arange(tokens.shape[1]))


class PipeBlock(Block):
    def forward(self, x):
        return super().forward(x)[0]


class Head(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.norm = nn.LayerNorm(s.d_model)
        self.head = nn.Linear(s.d_model, s.vocab, bias=False)

    def forward(self, x):
        return self.head(self.norm(x))


def lm_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def pipeline(s, stages):
    """A deepspeed.pipe.PipelineModule of the dense model over `stages` stages, cut so that each
    stage holds about the same number of parameters."""
    from deepspeed.pipe import LayerSpec, PipelineModule
    layers = [LayerSpec(Embed, s)] + [LayerSpec(PipeBlock, s) for _ in range(s.layers)]
    layers.append(LayerSpec(Head, s))
    return PipelineModule(layers=layers, num_stages=stages, loss_fn=lm_loss,
                          partition_method="parameters")


def batch(s, micro_batch, step, rank, seed=0):
    """Token sequences for `rank` at `step`: a noisy affine recurrence over the vocabulary, so the
    next token is learnable. The same on every communication stack."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + rank)
    a = torch.randint(1, 8, (micro_batch, 1), generator=g)
    x = torch.empty(micro_batch, s.seq + 1, dtype=torch.long)
    x[:, 0] = torch.randint(0, s.vocab, (micro_batch,), generator=g)
    for t in range(s.seq):
        noise = (torch.rand(micro_batch, generator=g) < 0.1).long()
        x[:, t + 1] = (x[:, t] * a[:, 0] + 7 + noise) % s.vocab
    return x[:, :-1].contiguous(), x[:, 1:].contiguous()
