"""Training-step throughput: bertlab.BertForPreTraining vs transformers.BertForPreTraining, each
in fp32 and bf16 autocast, eager and `torch.compile`d.

Same configuration, batch, sequence length, masking and device; one run times every mode,
interleaved (A, B, C, ... A, B, C, ...) so that a busy machine slows all alike, and prints sequences
per second, each mode's ratio to bertlab's fp32 eager step, and two comparisons: each library at
its default (bertlab: precision and compile 'auto' for an hour-long run, which keeps the compiled
step only where it is faster; transformers' Trainer: fp32, eager) and each at its best mode. bf16 runs only where the device computes it natively (a
GPU, or a CPU with AVX-512 BF16 or AMX): elsewhere torch emulates it, ~60x slower than fp32. On
CUDA it also prints the model-FLOPs utilisation (MFU).

    python -m bench.bench_train_step                      # CPU: mini, batch 32, seq 128
    python -m bench.bench_train_step --no-compile         # eager modes only (compiling takes minutes)
    python -m bench.bench_train_step --size base --device cuda
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from bertlab.config import preset
from bertlab.hardware import cpu_bf16_instructions
from bertlab.losses import masked_lm_nsp
from bertlab.model import BertForPreTraining
from bertlab.training.optimization import compile_pays

PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0, "V100": 125.0}


def make_batch(vocab: int, batch: int, seq: int, device, seed: int = 0, max_predictions: int = 20):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    types = torch.zeros(batch, seq, dtype=torch.long)
    types[:, seq // 2 :] = 1
    attn = torch.ones(batch, seq, dtype=torch.long)
    chosen = torch.rand(batch, seq, generator=g) < 0.15
    chosen[:, 0] = False
    chosen &= chosen.cumsum(1) <= max_predictions  # at most max_predictions a row, as the masker chooses
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    masked = torch.where(chosen, torch.full_like(ids, 4), ids)
    nsp = torch.randint(0, 2, (batch,), generator=g)
    batch = {k: v.to(device) for k, v in dict(ids=masked, types=types, attn=attn, labels=labels, nsp=nsp).items()}
    return {**batch, "cap": max_predictions}


def ours_step(model, opt, b, autocast):
    batch = {"input_ids": b["ids"], "token_type_ids": b["types"], "attention_mask": b["attn"]}
    with autocast():
        # BERT's objective owns its loss (bertlab.losses), as the trainer calls it
        out = masked_lm_nsp(model, {**batch, "mlm_labels": b["labels"], "nsp_labels": b["nsp"]}, b["cap"])
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


def bf16_native(device: torch.device) -> bool:
    return device.type == "cuda" or cpu_bf16_instructions() is not None


def build_modes(args, device, ours, theirs) -> dict[str, tuple]:
    """name -> (callable model, optimizer, step function, autocast dtype or None)."""
    precisions = ["fp32"] + (["bf16"] if bf16_native(device) else [])
    if args.precision != "all":  # one precision only (bf16 is timed even where it is emulated, if asked for)
        precisions = [args.precision]
    opts = {"bertlab": torch.optim.AdamW(ours.parameters(), lr=1e-4)}
    opts["transformers"] = torch.optim.AdamW(theirs.parameters(), lr=1e-4)
    modes = {}
    for lib, model, step in (("bertlab", ours, ours_step), ("transformers", theirs, hf_step)):
        for compiled in [False] + ([True] if args.compile else []):
            runner = torch.compile(model) if compiled else model
            for prec in precisions:
                name = f"{lib} {prec} {'compiled' if compiled else 'eager'}"
                modes[name] = (runner, opts[lib], step, torch.bfloat16 if prec == "bf16" else None)
    return modes


def default_modes(device: torch.device, compiled: bool, step_s: dict[str, float]) -> tuple[str, str]:
    """bertlab's default (precision auto; compile auto for an hour-long run, which keeps the compiled
    step only where it times faster than eager) and transformers' Trainer's default (fp32, no
    torch_compile)."""
    prec = "bf16" if bf16_native(device) else "fp32"
    eager, comp = f"bertlab {prec} eager", f"bertlab {prec} compiled"
    faster = comp in step_s and eager in step_s and step_s[comp] < step_s[eager]
    ours = comp if compiled and compile_pays(3600, device.type)[0] and faster else eager
    return ours, "transformers fp32 eager"


def time_modes(args, device, modes, batch) -> tuple[dict[str, float], dict[str, float]]:
    """Median seconds per step of each mode (interleaved rounds), and each mode's first-call time."""

    def autocast(dtype):
        return (
            (lambda: torch.autocast(device.type, dtype=dtype))
            if dtype
            else (lambda: torch.autocast(device.type, enabled=False))
        )

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    first: dict[str, float] = {}
    for name, (model, opt, step, dtype) in modes.items():  # warm-up (compiles the compiled modes)
        sync()
        t0 = time.perf_counter()
        step(model, opt, batch, autocast(dtype))
        sync()
        first[name] = time.perf_counter() - t0
        for _ in range(2):
            step(model, opt, batch, autocast(dtype))
        print(f"  warmed up {name} (first step {first[name]:.1f} s)", flush=True)
    times: dict[str, list[float]] = {k: [] for k in modes}
    for _ in range(args.rounds):
        for name, (model, opt, step, dtype) in modes.items():
            sync()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step(model, opt, batch, autocast(dtype))
            sync()
            times[name].append((time.perf_counter() - t0) / args.steps)
    return {k: statistics.median(v) for k, v in times.items()}, first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="mini")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="eager modes only")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per mode per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument(
        "--precision", choices=("all", "fp32", "bf16"), default="all", help="time only this precision's modes"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import transformers

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cfg = preset(args.size, vocab_size=args.vocab, hidden_dropout=0.1, attention_dropout=0.1)
    torch.manual_seed(0)
    ours = BertForPreTraining(cfg).to(device).train()
    hf_cfg = transformers.BertConfig(
        **{k: v for k, v in cfg.to_hf_dict().items() if k not in ("architectures", "bertlab")}
    )
    theirs = transformers.BertForPreTraining(hf_cfg).to(device).train()  # transformers' default attention (SDPA)
    theirs.load_state_dict({k: v for k, v in ours.state_dict().items()}, strict=False)
    batch = make_batch(args.vocab, args.batch, args.seq, device, max_predictions=max(1, round(args.seq * 0.15)))
    modes = build_modes(args, device, ours, theirs)
    step_s, first = time_modes(args, device, modes, batch)
    base = next(n for n in step_s if n.startswith("bertlab") and n.endswith("eager"))  # fp32 eager when timed
    vs_key = f"vs_{base.replace(' ', '_')}"
    result: dict = {
        "size": args.size,
        "batch": args.batch,
        "seq": args.seq,
        "vocab": args.vocab,
        "device": str(device),
        "cpu_bf16": cpu_bf16_instructions() if device.type == "cpu" else None,
        "threads": torch.get_num_threads(),
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "modes": {},
    }
    chosen = batch["labels"] != -100
    masked_share = float(chosen.float().mean())
    with_cls = chosen.clone()
    with_cls[:, 0] = True
    last_share = min(args.seq, batch["cap"] + 1) / args.seq  # bertlab's last layer: [CLS] + the capped slots
    for name, s in step_s.items():
        row = {"seq_per_s": args.batch / s, vs_key: step_s[base] / s, "first_step_s": first[name]}
        if device.type == "cuda":
            gpu = torch.cuda.get_device_name(0)
            peak = next((v for k, v in PEAK_TFLOPS.items() if k in gpu), None)
            ours_mode = name.startswith("bertlab")
            flops = (
                flops_per_seq(cfg, args.seq, masked_share, last_share)
                if ours_mode
                else flops_per_seq(cfg, args.seq, 1.0, 1.0)
            )
            row["tflops"] = flops * args.batch / s / 1e12
            if peak:
                row["mfu"] = row["tflops"] / peak
        result["modes"][name] = row
    ours_default, theirs_default = default_modes(device, args.compile, step_s)
    best = {
        lib: max((n for n in step_s if n.startswith(lib)), key=lambda n: -step_s[n])
        for lib in ("bertlab", "transformers")
    }
    result["defaults"] = (  # None when --precision left a library's default mode untimed
        {
            "bertlab": ours_default,
            "transformers": theirs_default,
            "ratio": step_s[theirs_default] / step_s[ours_default],
        }
        if ours_default in step_s and theirs_default in step_s
        else None
    )
    result["best"] = {**best, "ratio": step_s[best["transformers"]] / step_s[best["bertlab"]]}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{args.size}  batch {args.batch}  seq {args.seq}  vocab {args.vocab}  {result['device']}"
        f"  bf16 instructions: {result['cpu_bf16'] or ('GPU' if device.type == 'cuda' else 'none (bf16 modes left out)')}"
        f"  threads {result['threads']}  (transformers {transformers.__version__}, torch {torch.__version__})"
    )
    print(f"  {'mode':<28} {'seq/s':>8} {'vs ' + base:>22} {'first step':>11}")
    for name, row in result["modes"].items():
        line = f"  {name:<28} {row['seq_per_s']:8.1f} {row[vs_key]:21.2f}x {row['first_step_s']:10.1f}s"
        if "mfu" in row:
            line += f"   {row['tflops']:.0f} TFLOP/s  MFU {row['mfu']:.1%}"
        print(line)
    d, b = result["defaults"], result["best"]
    if d:
        print(f"  each at its default: {d['bertlab']} / {d['transformers']}: {d['ratio']:.2f}x")
    print(f"  each at its best:    {b['bertlab']} / {b['transformers']}: {b['ratio']:.2f}x")


if __name__ == "__main__":
    main()
