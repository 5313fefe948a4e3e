"""search_knowledge over generated markdown: index build time, search latency, event-loop stalls."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable from a checkout

from tools.base import ToolContext, ToolDeps
from tools.builtin import builtin_registry
from tools.knowledge import KnowledgeBase

SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ra",
    "tu",
    "ven",
    "sol",
    "dar",
    "ish",
    "pel",
    "mon",
    "tra",
    "qui",
    "zen",
    "bor",
    "lia",
    "fen",
    "gor",
    "hal",
    "nus",
]
CJK = "签证申请条件人才计划居留工作学历年龄费用审批时间家属雇主毕业投资资产"


class Vocabulary:
    """Made-up words drawn by a Zipf-Mandelbrot law, 1/(rank + 10): the shape of the content
    words of real text once stop words are gone (the commonest is ~1.5% of all words)."""

    def __init__(self, rng: random.Random, size: int) -> None:
        words: set[str] = set()
        while len(words) < size:
            words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
        self.words = sorted(words)
        rng.shuffle(self.words)
        self.cumulative = list(itertools.accumulate(1 / (rank + 10) for rank in range(size)))

    def draw(self, rng: random.Random, k: int = 1) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cumulative, k=k)


def sentence(rng: random.Random, words: Vocabulary) -> str:
    text = " ".join(words.draw(rng, rng.randint(8, 16)))
    if rng.random() < 0.2:
        text += " " + "".join(rng.choice(CJK) for _ in range(rng.randint(4, 10)))
    return text.capitalize() + "."


def document(rng: random.Random, words: Vocabulary, n: int) -> str:
    lines = [f"---\ncategory: cat{n % 8}\n---", f"# Document {n}: {words.draw(rng)[0]} guide", ""]
    for section in range(rng.randint(3, 6)):
        lines += [f"## Section {section} {words.draw(rng)[0]}", ""]
        for _ in range(rng.randint(2, 4)):
            lines += [" ".join(sentence(rng, words) for _ in range(rng.randint(2, 5))), ""]
    return "\n".join(lines)


async def main(documents: int, queries: int, seed: int) -> None:
    rng = random.Random(seed)
    words = Vocabulary(rng, 5000)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for n in range(documents):
            folder = root / f"cat{n % 8}"
            folder.mkdir(exist_ok=True)
            (folder / f"doc-{n:04d}.md").write_text(document(rng, words, n), encoding="utf-8")
        size = sum(p.stat().st_size for p in root.rglob("*.md"))

        kb = KnowledgeBase([root])
        stalls: list[float] = []

        async def ticker() -> None:  # how long the loop goes without running us while indexing
            while True:
                before = time.perf_counter()
                await asyncio.sleep(0.001)
                stalls.append(time.perf_counter() - before - 0.001)

        tick = asyncio.create_task(ticker())
        built = await kb.open()
        tick.cancel()
        print(f"{built.documents} documents ({size / 1e6:.1f} MB), {built.passages} passages")
        print(
            f"index build: {built.seconds * 1000:.0f} ms"
            f"  (event loop: longest stall {max(stalls, default=0) * 1000:.1f} ms)"
        )

        registry = builtin_registry()
        ctx = ToolContext(user_id="bench", deps=ToolDeps(knowledge=kb))
        asks = [" ".join(words.draw(rng, rng.randint(2, 6))) for _ in range(queries)]
        asks += ["签证申请条件" for _ in range(queries // 10)]
        latencies: list[float] = []
        found = 0
        for ask in asks:
            args = json.dumps({"query": ask})
            started = time.perf_counter()
            result = await registry.call(
                "search_knowledge", args, ctx, allowed={"search_knowledge"}, timeout_s=10
            )
            latencies.append(time.perf_counter() - started)
            found += bool(json.loads(result.text)["sources"])
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        print(
            f"search_knowledge over {len(asks)} queries ({found} with hits):"
            f" p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {latencies[-1] * 1000:.2f} ms"
        )

        touched = root / "cat0" / "doc-0000.md"
        touched.write_text(document(rng, words, 0) + "\nzebra crossing\n", encoding="utf-8")
        again = await kb.refresh()
        print(
            f"re-index after one file changed: {again.seconds * 1000:.1f} ms"
            f" ({again.changed} changed, the other {again.documents - again.changed} only stat'ed)"
        )
        await kb.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main(args.documents, args.queries, args.seed))
