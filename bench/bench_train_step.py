"""Training-step throughput: bertlab.BertForPreTraining vs transformers.BertForPreTraining.

Same configuration, batch, sequence length, masking and device; one run times both, interleaved
(A, B, A, B, ...) so that a busy machine slows both alike, and prints sequences per second for
each and the ratio. On CUDA it also prints the model-FLOPs utilisation (MFU).

    python -m bench.bench_train_step                      # CPU: mini, batch 32, seq 128
    python -m bench.bench_train_step --size base --device cuda --precision bf16
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from bertlab.config import preset
from bertlab.model import BertForPreTraining

PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0, "V100": 125.0}


def make_batch(vocab: int, batch: int, seq: int, device, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    types = torch.zeros(batch, seq, dtype=torch.long)
    types[:, seq // 2 :] = 1
    attn = torch.ones(batch, seq, dtype=torch.long)
    chosen = torch.rand(batch, seq, generator=g) < 0.15
    chosen[:, 0] = False
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    masked = torch.where(chosen, torch.full_like(ids, 4), ids)
    nsp = torch.randint(0, 2, (batch,), generator=g)
    return {k: v.to(device) for k, v in dict(ids=masked, types=types, attn=attn, labels=labels, nsp=nsp).items()}


def ours_step(model, opt, b, autocast):
    with autocast():
        out = model(b["ids"], b["types"], b["attn"], mlm_labels=b["labels"], nsp_labels=b["nsp"])
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def hf_step(model, opt, b, autocast):
    with autocast():
        out = model(
            input_ids=b["ids"],
            token_type_ids=b["types"],
            attention_mask=b["attn"],
            labels=b["labels"],
            next_sentence_label=b["nsp"],
        )
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def flops_per_seq(cfg, seq: int, masked: float, last_layer: float = 1.0) -> float:
    """Training FLOPs (forward + backward = 3x forward) of one sequence, counting matmuls only.

    masked: share of positions the MLM head runs at; last_layer: share of positions the last
    layer computes outputs for (keys and values are still computed everywhere). These count the
    FLOPs each implementation really executes, so MFU is the hardware's utilisation."""
    H, L, F, V = cfg.hidden_size, cfg.num_layers, cfg.intermediate_size, cfg.vocab_size
    kv = 2 * 2 * H * H  # key and value projections, per token
    q_out_ffn = 2 * (2 * H * H + 2 * H * F)  # query and output projections, feed-forward
    attention = 2 * 2 * seq * H  # scores and context, per query token
    layers = (L - 1) * (kv + q_out_ffn + attention) + kv + last_layer * (q_out_ffn + attention)
    head = 2 * (H * H + H * V) * masked  # MLM transform + decoder at the masked share of tokens
    return 3 * seq * (layers + head)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="mini")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    ap.add_argument("--steps", type=int, default=10, help="timed steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import transformers

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    use_bf16 = device.type == "cuda" and args.precision in ("auto", "bf16")
    dtype = torch.bfloat16 if use_bf16 else None

    def autocast():
        return torch.autocast(device.type, dtype=dtype) if dtype else torch.autocast(device.type, enabled=False)

    cfg = preset(args.size, vocab_size=args.vocab, hidden_dropout=0.1, attention_dropout=0.1)
    torch.manual_seed(0)
    ours = BertForPreTraining(cfg).to(device).train()
    hf_cfg = transformers.BertConfig(
        **{k: v for k, v in cfg.to_hf_dict().items() if k not in ("architectures", "bertlab")}
    )
    theirs = transformers.BertForPreTraining(hf_cfg).to(device).train()  # transformers' default attention (SDPA)
    theirs.load_state_dict({k: v for k, v in ours.state_dict().items()}, strict=False)
    runs = {
        "bertlab": (ours, torch.optim.AdamW(ours.parameters(), lr=1e-4), ours_step),
        "transformers": (theirs, torch.optim.AdamW(theirs.parameters(), lr=1e-4), hf_step),
    }
    batch = make_batch(args.vocab, args.batch, args.seq, device)
    for _name, (model, opt, step) in runs.items():  # warm-up
        for _ in range(3):
            step(model, opt, batch, autocast)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.rounds):
        for name, (model, opt, step) in runs.items():
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step(model, opt, batch, autocast)
            if device.type == "cuda":
                torch.cuda.synchronize()
            times[name].append((time.perf_counter() - t0) / args.steps)
    result = {
        "size": args.size,
        "batch": args.batch,
        "seq": args.seq,
        "vocab": args.vocab,
        "device": str(device),
        "precision": "bf16" if use_bf16 else "fp32",
        "threads": torch.get_num_threads(),
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    chosen = batch["labels"] != -100
    masked_share = float(chosen.float().mean())
    # bertlab's last layer runs at [CLS] and the masked positions, padded to the row with the most
    with_cls = chosen.clone()
    with_cls[:, 0] = True
    last_share = float(with_cls.sum(1).max()) / args.seq
    for name in runs:
        step_s = statistics.median(times[name])
        result[f"{name}_seq_per_s"] = args.batch / step_s
        if device.type == "cuda":
            gpu = torch.cuda.get_device_name(0)
            peak = next((v for k, v in PEAK_TFLOPS.items() if k in gpu), None)
            if name == "bertlab":
                flops = flops_per_seq(cfg, args.seq, masked_share, last_share)
            else:  # transformers runs the MLM head and the last layer at every position
                flops = flops_per_seq(cfg, args.seq, 1.0, 1.0)
            achieved = flops * args.batch / step_s / 1e12
            result[f"{name}_tflops"] = achieved
            if peak:
                result[f"{name}_mfu"] = achieved / peak
    result["speedup"] = result["bertlab_seq_per_s"] / result["transformers_seq_per_s"]
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{args.size}  batch {args.batch}  seq {args.seq}  vocab {args.vocab}  {result['device']}  {result['precision']}"
        f"  threads {result['threads']}  (transformers {transformers.__version__}, torch {torch.__version__})"
    )
    for name in runs:
        line = f"  {name:<13} {result[f'{name}_seq_per_s']:9.1f} seq/s"
        if f"{name}_mfu" in result:
            line += f"   {result[f'{name}_tflops']:.0f} TFLOP/s  MFU {result[f'{name}_mfu']:.1%}"
        print(line)
    print(f"  speed-up bertlab / transformers: {result['speedup']:.2f}x")


if __name__ == "__main__":
    main()
