"""tests/ mirrors the code: a test module under tests/X/Y/ tests the repository's folder X/Y/.

It imports from that folder, or reads a path under it (infra/, appPackage/, docs/ and deploy/ hold no
Python), itself or through a module beside it; a test of the whole app over HTTP sits under the
face whose route it drives (bot/, webchat/, admin/). The modules at tests/'s root test a root file of
the repository or the tree as a whole, and are listed below with it. Folders holding tests are
packages, so two test modules of one name in two folders do not clash.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.paths import ROOT
from tests.test_architecture import imported

# Root test modules -> the root files (or folders) of the repository each one tests.
ROOT_FILES: dict[str, tuple[str, ...]] = {
    "test_container_files.py": ("Dockerfile", ".dockerignore", "compose.yaml"),
    "test_docs.py": ("README.md",),
    "test_local_mode.py": ("app.py",),
    "test_port_in_use.py": ("app.py",),
    "test_slow_clients.py": ("app.py",),
    "test_workers.py": ("app.py",),
    "test_workflows.py": (".github",),
}
# Root test modules that test the tree as a whole, with what they check.
WHOLE_TREE: dict[str, str] = {
    "test_architecture.py": "the import graph of every part",
    "test_names.py": "the names of every package and module",
    "test_code_shape.py": "the length of every function outside tests",
    "test_tree_mirror.py": "tests/ itself",
}
# A face's test over HTTP drives one of these routes (app.py serves /api/messages for the bot).
FACE_ROUTES: dict[str, tuple[str, ...]] = {
    "bot": ("/api/messages",),
    "webchat": ("/chat", "/api/directline/", "/v3/directline/"),
    "admin": ("/admin",),
}


def modules_of_tests(root: Path = ROOT) -> Iterator[Path]:
    yield from sorted(p for p in (root / "tests").rglob("test_*.py") if "node_modules" not in p.parts)


@cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text("utf-8"))


def resolved(node: ast.AST, known: dict[str, str]) -> str | None:
    """The repository path an expression builds from ROOT, or None when it is not one."""
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        right = node.right
        if isinstance(right, ast.Constant) and isinstance(right.value, str):
            base = resolved(node.left, known)
            return None if base is None else "/".join(p for p in (base, right.value) if p)
    return None


@cache
def path_names(path: Path, root: Path) -> dict[str, str]:
    """The module-level names bound to repository paths (INFRA = ROOT / "infra" -> "infra"), its own and
    those it imports from other modules of tests/ (tests.paths' ROOT, SAMPLE_DOCS, ...)."""
    known = {"ROOT": ""}
    for node in parsed(path).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests."):
            source = root.joinpath(*node.module.split(".")).with_suffix(".py")
            theirs = path_names(source, root) if source.is_file() else {}
            known |= {a.asname or a.name: theirs[a.name] for a in node.names if a.name in theirs}
        elif isinstance(node, ast.Assign) and isinstance(target := node.targets[0], ast.Name):
            where = resolved(node.value, known)
            known |= {} if where is None else {target.id: where}
    return known


def sources(path: Path, root: Path, under: str) -> list[Path]:
    """The module, and the modules of tests/<under>/ (tests.<under>.name) that it imports."""
    package = under.replace("/", ".")
    theirs = {
        root.joinpath(*name.split(".")).with_suffix(".py")
        for name in imported(path, root)
        if name.rpartition(".")[0] == package
    }
    return [path, *sorted(p for p in theirs if p.is_file() and p != path)]


def reads_under(path: Path, folder: str, root: Path) -> bool:
    """The module imports from folder (as a package) or builds a path under it."""
    package = folder.replace("/", ".")
    for source in sources(path, root, f"tests/{folder}"):
        if any(name == package or name.startswith(package + ".") for name in imported(source, root)):
            return True
        known = path_names(source, root)
        built = {where for node in ast.walk(parsed(source)) if (where := resolved(node, known)) is not None}
        if any(where == folder or where.startswith(folder + "/") for where in built):
            return True
    return False


def drives_route(path: Path, face: str, root: Path) -> bool:
    """The module names a route of the face, itself, through a module beside it, or through the
    app harness of tests/servers/ it starts (the local Direct Line's paths are the Web Chat harness's)."""
    for source in [*sources(path, root, f"tests/{face}"), *sources(path, root, "tests/servers")[1:]]:
        texts = (n.value for n in ast.walk(parsed(source)) if isinstance(n, ast.Constant))
        if any(isinstance(text, str) and text.startswith(FACE_ROUTES[face]) for text in texts):
            return True
    return False


def misplaced(path: Path, root: Path = ROOT) -> str | None:
    """Why a test module under tests/X/Y/ does not mirror X/Y/, or None when it does."""
    folder = path.parent.relative_to(root / "tests").as_posix()
    if not (root / folder).is_dir():
        return f"the repository has no folder {folder}/"
    if reads_under(path, folder, root) or (folder in FACE_ROUTES and drives_route(path, folder, root)):
        return None
    face = f", nor drives {' or '.join(FACE_ROUTES[folder])}" if folder in FACE_ROUTES else ""
    return f"imports nothing from {folder}/ and builds no path under it{face}"


def test_every_test_module_sits_under_the_folder_it_tests() -> None:
    wrong = {
        p.relative_to(ROOT).as_posix(): why
        for p in modules_of_tests()
        if p.parent != ROOT / "tests" and (why := misplaced(p)) is not None
    }
    assert wrong == {}, "move each under tests/<the folder it tests>/"


def test_every_root_test_module_is_listed_with_what_it_tests() -> None:
    at_root = {p.name for p in modules_of_tests() if p.parent == ROOT / "tests"}
    assert sorted(at_root - set(ROOT_FILES) - set(WHOLE_TREE)) == [], "unlisted: list it, or move it"
    assert sorted((set(ROOT_FILES) | set(WHOLE_TREE)) - at_root) == [], "listed but gone: take it off"


def test_each_root_file_listed_is_at_the_root_and_named_by_its_test() -> None:
    unnamed = [
        f"{module}: {name}"
        for module, names in ROOT_FILES.items()
        for name in names
        if "/" in name
        or not (ROOT / name).exists()
        or name not in (ROOT / "tests" / module).read_text("utf-8")
    ]
    assert unnamed == []


def test_every_folder_holding_tests_is_a_package() -> None:
    tests = ROOT / "tests"
    folders = {f for p in modules_of_tests() for f in [p.parent, *p.parent.parents] if tests in f.parents}
    loose = sorted(f.relative_to(ROOT).as_posix() for f in folders if not (f / "__init__.py").is_file())
    assert loose == [], "two test modules of one name in two such folders would clash"


def test_each_faces_routes_are_served_by_it() -> None:
    for face, routes in FACE_ROUTES.items():
        code = "".join(p.read_text("utf-8") for p in [ROOT / "app.py", *sorted((ROOT / face).rglob("*.py"))])
        assert all(route.rstrip("/") in code for route in routes), face


def test_a_misplaced_module_is_named_with_the_reason(tmp_path: Path) -> None:
    # A repository of one face (bot/) and a test of crag/text/: under tests/bot/ it is misplaced,
    # under a folder the repository lacks too, and under tests/crag/text/ it is where it belongs.
    (tmp_path / "bot").mkdir()
    (tmp_path / "crag" / "text").mkdir(parents=True)
    text_test = "from crag.text.nfkc import nfkc\n\n\ndef test_it() -> None:\n    assert nfkc('Ａ') == 'A'\n"
    found = {}
    for folder in ("bot", "nowhere", "crag/text"):
        probe = tmp_path / "tests" / folder / "test_probe.py"
        probe.parent.mkdir(parents=True)
        probe.write_text(text_test, "utf-8")
        found[folder] = misplaced(probe, tmp_path)
    assert found == {
        "bot": "imports nothing from bot/ and builds no path under it, nor drives /api/messages",
        "nowhere": "the repository has no folder nowhere/",
        "crag/text": None,
    }
