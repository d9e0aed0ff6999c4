"""Masked-LM and NSP accuracy on everyday English that is not in the pretraining corpus.

    python -m bench.eval_unseen_english --data ../shared/data --model checkpoints/bertlab-mini [--model OTHER ...]
    python -m bench.eval_unseen_english ... --write-card checkpoints/bertlab-mini     # record it in the card

What a new user types is rarely 19th-century novels or Wikipedia (the shipped model's corpus). This
scores checkpoints side by side on four kinds of text from ../shared/data, read in place and only
ever evaluated on (never trained on):

- ewt: UD English-EWT dev + test sentences (web text: blogs, reviews, e-mails, newsgroups, answers)
- wnut17: WNUT-17 dev + test (social media posts, tokens joined with spaces)
- mrpc: MRPC dev sentences (news)
- sst2: SST-2 dev sentences (movie-review snippets)

Masked LM: each sentence alone, `[CLS] sentence [SEP]`, masked the paper's way by
`bertlab.data.maskers.Masker` (15% of tokens, 80% [MASK] / 10% random / 10% kept) with a fixed
seed; accuracy and cross-entropy at the masked positions. Models with other vocabularies mask other
tokens, so the masked-token count is printed too.
NSP: from EWT documents, 50% IsNext (a sentence and the next one of its document) and 50% NotNext
(a sentence and one from another document), seeded; label 0 = IsNext as in Google's checkpoints.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch

from bertlab.data.data_config import DataConfig
from bertlab.data.maskers import Masker
from bertlab.inference import LoadedModel, load_model
from bertlab.losses import masked_lm
from bertlab.storage.model_card import model_card_markdown

DESCRIPTION = (
    "Web text (UD English-EWT dev+test), social media (WNUT-17 dev+test), news (MRPC dev) and movie "
    "reviews (SST-2 dev), none of it in the pretraining corpus; 15% of tokens masked the paper's way; "
    "NSP on consecutive vs. unrelated EWT sentences (bench/eval_unseen_english.py)."
)


# --------------------------------------------------------------------------------------
# Reading the text
# --------------------------------------------------------------------------------------
def ewt_documents(data: Path) -> list[list[str]]:
    """UD EWT dev + test as documents (lists of sentences), from `# newdoc` and `# text` lines."""
    docs: list[list[str]] = []
    for name in ("en_ewt-ud-dev.conllu", "en_ewt-ud-test.conllu"):
        for line in (data / "ud_en_ewt" / name).read_text(encoding="utf-8").splitlines():
            if line.startswith("# newdoc") or not docs:
                docs.append([])
            if line.startswith("# text = "):
                docs[-1].append(line[len("# text = ") :].strip())
    return [d for d in docs if d]


def wnut_sentences(data: Path) -> list[str]:
    out: list[str] = []
    for name in ("emerging.dev.conll", "emerging.test.annotated"):
        words: list[str] = []
        for line in (data / "wnut17" / name).read_text(encoding="utf-8").splitlines() + [""]:
            if line.strip():
                words.append(line.split("\t")[0])
            elif words:
                out.append(" ".join(words))
                words = []
    return out


def tsv_column(path: Path, columns: tuple[str, ...]) -> list[str]:
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    header = lines[0].split("\t")
    idx = [header.index(c) for c in columns]
    return [row.split("\t")[i].strip() for row in lines[1:] for i in idx if len(row.split("\t")) > max(idx)]


def domains(data: Path) -> dict[str, list[str]]:
    return {
        "ewt": [s for d in ewt_documents(data) for s in d],
        "wnut17": wnut_sentences(data),
        "mrpc": tsv_column(data / "glue" / "MRPC" / "dev.tsv", ("#1 String", "#2 String")),
        "sst2": tsv_column(data / "glue" / "SST-2" / "dev.tsv", ("sentence",)),
    }


# --------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------
def mlm_score(lm: LoadedModel, sentences: list[str], seed: int = 0, batch: int = 64) -> dict:
    tok = lm.tokenizer
    masker = Masker(tok, DataConfig(max_predictions_per_seq=1000))
    rng = random.Random(seed)
    items = []
    for enc in tok.encode_batch(sentences, max_length=128):
        ids = list(enc.ids)
        if len(ids) < 4:
            continue
        masked, positions, labels, _ = masker(ids, rng)
        items.append((masked, positions, labels))
    correct = count = 0
    loss_sum = 0.0
    model = lm.model
    with torch.no_grad():
        for i in range(0, len(items), batch):
            group = items[i : i + batch]
            T = max(len(x[0]) for x in group)
            ids = torch.full((len(group), T), tok.pad_id, dtype=torch.long)
            attn = torch.zeros((len(group), T), dtype=torch.long)
            labels = torch.full((len(group), T), -100, dtype=torch.long)
            for b, (m, pos, lab) in enumerate(group):
                ids[b, : len(m)] = torch.tensor(m)
                attn[b, : len(m)] = 1
                labels[b, pos] = torch.tensor(lab)
            inputs = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": attn}
            out = masked_lm(model, {k: v.to(lm.device) for k, v in {**inputs, "mlm_labels": labels}.items()})
            n = int(out.sums["mlm_count"])
            correct += int(out.sums["mlm_correct"])
            count += n
            loss_sum += out.sums["mlm_loss_sum"]
    return {
        "mlm_acc": correct / max(1, count),
        "mlm_loss": loss_sum / max(1, count),
        "masked_tokens": count,
        "sentences": len(items),
    }


def nsp_pairs(docs: list[list[str]], n: int, seed: int = 0) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    candidates = [(d, i) for d, doc in enumerate(docs) for i in range(len(doc) - 1)]
    rng.shuffle(candidates)
    pairs = []
    for d, i in candidates[:n]:
        a = docs[d][i]
        if rng.random() < 0.5:
            pairs.append((a, docs[d][i + 1], 0))
        else:
            other = rng.choice([k for k in range(len(docs)) if k != d] or [d])
            pairs.append((a, rng.choice(docs[other]), 1))
    return pairs


def nsp_score(lm: LoadedModel, pairs: list[tuple[str, str, int]], batch: int = 64) -> dict:
    right = 0
    for i in range(0, len(pairs), batch):
        group = pairs[i : i + batch]
        results = lm.next_sentence([a for a, _, _ in group], [b for _, b, _ in group])
        right += sum(
            int((r.is_next_prob < 0.5) == bool(label)) for r, (_, _, label) in zip(results, group, strict=True)
        )
    return {"nsp_acc": right / max(1, len(pairs)), "pairs": len(pairs)}


def evaluate(lm: LoadedModel, data: Path, max_sentences: int, seed: int = 0) -> dict:
    texts = domains(data)
    out: dict = {"domains": {}, "data": DESCRIPTION, "seed": seed}
    total_c = total_n = 0
    total_loss = 0.0
    for name, sentences in texts.items():
        sample = random.Random(seed).sample(sentences, min(max_sentences, len(sentences)))
        r = mlm_score(lm, sample, seed)
        if name == "ewt" and lm.has_nsp:
            r.update(nsp_score(lm, nsp_pairs(ewt_documents(data), max_sentences, seed)))
        out["domains"][name] = {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}
        total_c += r["mlm_acc"] * r["masked_tokens"]
        total_n += r["masked_tokens"]
        total_loss += r["mlm_loss"] * r["masked_tokens"]
    out["overall"] = {
        "mlm_acc": round(total_c / max(1, total_n), 4),
        "mlm_loss": round(total_loss / max(1, total_n), 4),
        "masked_tokens": total_n,
        "nsp_acc": out["domains"]["ewt"].get("nsp_acc"),
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--model", action="append", required=True, help="a checkpoint folder or Hub id (repeatable)")
    ap.add_argument("--max-sentences", type=int, default=2000, help="per kind of text")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write every model's results here")
    ap.add_argument("--write-card", type=Path, help="add the result of this --model to its model_card.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if not (args.data / "ud_en_ewt").is_dir():
        raise SystemExit(f"{args.data}: no ud_en_ewt folder; pass --data pointing at the shared data folder")
    results = {}
    for m in args.model:
        results[m] = evaluate(load_model(m, device="cpu"), args.data, args.max_sentences, args.seed)
    names = list(next(iter(results.values()))["domains"]) + ["all"]
    print(f"{'model':<40} " + " ".join(f"{n:>16}" for n in names) + f" {'NSP (ewt)':>11}")
    for m, r in results.items():
        cells = [r["domains"].get(n, r["overall"]) if n != "all" else r["overall"] for n in names]
        nsp = r["overall"].get("nsp_acc")
        print(
            f"{m[-40:]:<40} "
            + " ".join(f"{c['mlm_acc']:>8.1%} ({c['masked_tokens']:>5})" for c in cells)
            + f" {'no NSP head' if nsp is None else f'{nsp:.1%}':>11}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if args.write_card:
        key = next((m for m in args.model if Path(m).resolve() == args.write_card.resolve()), None)
        if key is None:
            raise SystemExit("--write-card must name one of the --model folders")
        card_file = args.write_card / "model_card.json"
        card = json.loads(card_file.read_text()) if card_file.is_file() else {}
        card["unseen_english"] = results[key]
        card_file.write_text(json.dumps(card, indent=2))
        (args.write_card / "README.md").write_text(model_card_markdown(card))  # the readable card says it too
        print(f"recorded in {card_file} and README.md")


if __name__ == "__main__":
    main()
