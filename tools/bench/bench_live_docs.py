"""Seconds from a file written into the documents folder to its answer, with the watcher the bot runs.

    .venv/bin/python tools/bench/bench_live_docs.py [--rounds 2]

Copies sample_docs/ to a temporary folder, opens the engine handle over it as the bot does (default
settings: embeddings auto, the shared vector cache) and waits for its vectors. Then, per round, adds
a document and later changes a fact in it, and measures from the write to (1) the first answer that
cites the file with the new fact (asked every 0.1 s; lexical retrieval until the new vectors are in),
and (2) hybrid retrieval again (the new chunks' vectors computed). Nothing is asserted: numbers for
the README.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from crag.config.engine_settings import CragSettings
from crag.runtime.handle import EngineHandle

ROOT = Path(__file__).resolve().parents[2]
DOC = """# Bicycle parking

## Bicycle racks

The bicycle racks are on basement level 2 of the north building and hold {n} bicycles.
Register your bicycle at the general affairs desk to get a rack sticker.
"""
QUESTION = "How many bicycles do the bicycle racks hold?"


async def measure(handle: EngineHandle, path: Path, n: int) -> tuple[float, float]:
    started = time.perf_counter()
    path.write_text(DOC.format(n=n), "utf-8")
    while True:
        engine = handle.engine
        assert engine is not None
        result = await engine.run(QUESTION)
        if path.name in result.cited_files and str(n) in result.answer:
            answered = time.perf_counter() - started
            break
        if time.perf_counter() - started > 120:
            raise SystemExit(f"not answered after 120 s: {result.answer!r}")
        await asyncio.sleep(0.1)
    index = handle.local_index
    while index is not None and index.vectors is not None and not index.vectors.chunks_ready:
        await asyncio.sleep(0.1)
        index = handle.local_index
    return answered, time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        shutil.copytree(ROOT / "sample_docs", docs)
        settings = CragSettings(CRAG_DOCS_DIR=str(docs), CRAG_INDEX_DIR=str(Path(tmp) / "index"))
        handle = EngineHandle(settings)
        await handle.open()
        try:
            await handle.vectors_built()
            await handle.watching.wait()
            print(f"{handle.index.documents} documents, {handle.index.chunks} chunks, providers:")
            print(f"  {handle.engine.providers if handle.engine else None}")
            for i in range(args.rounds):
                path = docs / f"bicycles_{i}.md"
                for what, n in (("added", 40 + i), ("changed", 65 + i)):
                    answered, hybrid = await measure(handle, path, n)
                    print(
                        f"round {i + 1}, file {what}: answered from it after {answered:.2f}s, "
                        f"hybrid again after {hybrid:.2f}s ({handle.watch.last_change})"
                    )
        finally:
            await handle.close()


if __name__ == "__main__":
    asyncio.run(main())
