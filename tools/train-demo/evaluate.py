"""Held-out metrics of the trunk and the MTP head, and a plain generation loop for samples."""
import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def evaluate(model, data, seq, batch, max_tokens=None):
    """Teacher-forced metrics over non-overlapping windows of seq + 1 tokens of `data`.

    loss / ppl: the trunk's next-token cross-entropy (nats) and its exp.
    mtp_loss / mtp_ppl / mtp_top1: the MTP head at row t predicting token t+2.
    mtp_agreement: how often the MTP head's argmax at row t equals the trunk's argmax at t+1,
    i.e. how often a greedy one-token MTP draft would be accepted where the trunk's own greedy
    token is the text's (an acceptance rate measured on the held-out text).
    """
    was_training = model.training
    model.eval()
    n = data.numel() // (seq + 1)
    if max_tokens:
        n = min(n, max(1, max_tokens // seq))
    windows = data[: n * (seq + 1)].view(n, seq + 1)
    sums = dict(nll=0.0, count=0, mtp_nll=0.0, mtp_count=0, mtp_hit=0, agree=0)
    has_mtp = hasattr(model, "mtp")
    for i in range(0, n, batch):
        w = windows[i:i + batch]
        ids, tgt = w[:, :-1], w[:, 1:]
        h = model.hidden(ids)
        logits = model.logits(h).float()
        sums["nll"] += F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), reduction="sum").item()
        sums["count"] += tgt.numel()
        if has_mtp:
            m = model.logits(model.mtp_hidden(ids, h)).float()  # row t predicts token t+2 = tgt[:, t+1]
            sums["mtp_nll"] += F.cross_entropy(m.flatten(0, 1), tgt[:, 1:].flatten(), reduction="sum").item()
            sums["mtp_count"] += tgt[:, 1:].numel()
            draft = m.argmax(-1)
            sums["mtp_hit"] += (draft == tgt[:, 1:]).sum().item()
            sums["agree"] += (draft == logits.argmax(-1)[:, 1:]).sum().item()
    model.train(was_training)
    out = {"tokens": sums["count"], "loss": sums["nll"] / sums["count"]}
    out["ppl"] = math.exp(out["loss"])
    if has_mtp:
        out["mtp_loss"] = sums["mtp_nll"] / sums["mtp_count"]
        out["mtp_ppl"] = math.exp(out["mtp_loss"])
        out["mtp_top1"] = sums["mtp_hit"] / sums["mtp_count"]
        out["mtp_agreement"] = sums["agree"] / sums["mtp_count"]
    return out


@torch.no_grad()
def generate(model, ids, max_new, stop_ids=(), temperature=0.0, top_p=1.0, seed=0):
    """Continue `ids` (a list) by recomputing the whole prefix each step: simple, and exact."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    gen = torch.Generator(device="cpu").manual_seed(seed)
    out = list(ids)
    for _ in range(max_new):
        logits = model(torch.tensor([out], device=device))[0, -1].float().cpu()
        if temperature <= 0:
            nxt = int(logits.argmax())
        else:
            probs = torch.softmax(logits / temperature, -1)
            sorted_p, order = probs.sort(descending=True)
            keep = sorted_p.cumsum(0) - sorted_p < top_p
            sorted_p = sorted_p * keep
            nxt = int(order[torch.multinomial(sorted_p / sorted_p.sum(), 1, generator=gen)])
        out.append(nxt)
        if nxt in stop_ids:
            break
    model.train(was_training)
    return out[len(ids):]
