"""Python source files by dotted module name, read from a directory, one file or a wheel
(members read from the zip, nothing unpacked), and where a catalogue module lives in them."""

from __future__ import annotations

import ast
import functools
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Dict, Iterator, Optional

from conformance.errors import UsageError

DEFAULT_MODULE = "sglang.srt.managers.io_struct"


def _module_name(relative: PurePosixPath) -> Optional[str]:
    parts = list(relative.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


@dataclass
class SourceTree:
    """The modules of one source tree; each is parsed once, on first use."""

    readers: Dict[str, "_Reader"]
    packages: set[Any] = field(default_factory=set)
    _parsed: Dict[str, ast.Module] = field(default_factory=dict)

    def __contains__(self, module: str) -> bool:
        return module in self.readers

    def is_package(self, module: str) -> bool:
        return module in self.packages

    def text(self, module: str) -> str:
        return self.readers[module]()

    def parse(self, module: str) -> ast.Module:
        if module not in self._parsed:
            try:
                self._parsed[module] = ast.parse(self.text(module), filename=module)
            except SyntaxError as exc:
                raise UsageError(f"{module}: cannot parse with Python's ast: {exc}") from None
        return self._parsed[module]

    def modules_mentioning(self, word: str) -> Iterator[str]:
        """Modules whose text contains the word (a cheap filter before parsing)."""
        for module in sorted(self.readers):
            if word in self.text(module):
                yield module


class _Reader:
    def __init__(self, read: Callable[[], bytes]) -> None:
        self._read = read

    def __call__(self) -> str:
        text: str = self._read().decode("utf-8", errors="replace")
        return text


def _from_directory(root: Path) -> SourceTree:
    tree = SourceTree({})
    for path in root.rglob("*.py"):
        name = _module_name(PurePosixPath(path.relative_to(root).as_posix()))
        if name is not None and name not in tree.readers:
            tree.readers[name] = _Reader(path.read_bytes)
            if path.name == "__init__.py":
                tree.packages.add(name)
    return tree


def _from_wheel(path: Path) -> tuple[SourceTree, Optional[str], Optional[str]]:
    """The wheel's modules, and the version and distribution name its METADATA states."""
    archive = zipfile.ZipFile(path)
    tree, version, name = SourceTree({}), None, None
    for member in archive.namelist():
        rel = PurePosixPath(member)
        if rel.suffix == ".py" and ".dist-info" not in member and ".data/" not in member:
            name = _module_name(rel)
            if name is not None:
                tree.readers[name] = _Reader(functools.partial(archive.read, member))
                if rel.name == "__init__.py":
                    tree.packages.add(name)
        elif rel.name == "METADATA" and rel.parent.name.endswith(".dist-info"):
            metadata = archive.read(member).decode("utf-8", "replace")
            found = re.search(r"^Version:\s*(\S+)", metadata, re.M)
            version = found.group(1) if found else None
            named = re.search(r"^Name:\s*(\S+)", metadata, re.M)
            name = _normalized(named.group(1)) if named else None
    return tree, version, name


def _package_root(file: Path) -> Path:
    """The directory above the outermost package holding the file: above the nearest
    ancestor named like a package the file imports absolutely (namespace packages have no
    __init__.py), else above the last directory with an __init__.py."""
    try:
        imported = {n.split(".")[0] for n in _absolute_imports(file.read_text(errors="replace"))}
    except (OSError, SyntaxError):
        imported = set()
    for ancestor in file.resolve().parents:
        if ancestor.name in imported and ancestor.parent != ancestor:
            return ancestor.parent
    root = file.parent
    while (root / "__init__.py").exists():
        root = root.parent
    return root


def _absolute_imports(text: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


@dataclass
class Located:
    tree: SourceTree
    module: str
    version: Optional[str]
    version_from: Optional[str] = None  # where the version came from, in words
    distribution: Optional[str] = None  # a wheel's distribution name (a fork: sglang-kt), normalized
    dirty: bool = False  # the version came from a git commit the tree has uncommitted changes to


def locate(path: Path, module: Optional[str]) -> Located:
    """The tree at path and the catalogue module in it (module, or io_struct by default). The
    version: the wheel's metadata, else the tree's version file, else git (git_version.py)."""
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if module is not None and not all(p.isidentifier() for p in module.split(".")):
        raise UsageError(f"--module {module!r}: not a dotted module name (sglang.srt.managers.io_struct)")
    if path.is_file() and path.suffix == ".whl":
        try:
            tree, version, name = _from_wheel(path)
        except zipfile.BadZipFile:
            raise UsageError(f"{path} is not a wheel (not a zip file)") from None
        version = version or _wheel_version(path)
        return Located(tree, _require(tree, module or DEFAULT_MODULE, path), version,
                       f"the wheel's metadata ({path.name})" if version else None, name or _wheel_name(path))
    if path.is_file():
        if path.suffix != ".py":
            raise UsageError(f"{path}: give a .py file, a package or checkout directory, or a .whl")
        root = _package_root(path)
        tree = _from_directory(root)
        name = _module_name(PurePosixPath(path.resolve().relative_to(root.resolve()).as_posix()))
        if name is None:
            raise UsageError(f"{path}: not a Python module name")
        wanted = module or name
        if module is None and "." not in name and name == DEFAULT_MODULE.rsplit(".", 1)[1]:
            wanted = DEFAULT_MODULE  # a lone io_struct.py: SGLang's catalogue, outside its package
        if wanted != name:
            # the file read as `wanted`: in the tree around it that has that module (the edited copy
            # of a checkout's io_struct.py), else with the modules beside it
            around = _find_tree(path.parent, wanted) if "." not in name else None
            if around is not None:
                tree = around[0]
                tree.readers[wanted] = _Reader(path.read_bytes)
            else:
                tree = _mounted(tree, name, wanted)
        return _versioned(Located(tree, wanted, None), path)
    # A directory: a package (its parent is the root) or a checkout (io_struct somewhere below).
    root = _package_root(path / "__init__.py") if (path / "__init__.py").exists() else path
    wanted = module or DEFAULT_MODULE
    found = _find_tree(root, wanted)
    if found is None:
        raise UsageError(f"{path}: no module {wanted} in this tree (give --module, or the module's .py file)")
    return _versioned(Located(found[0], wanted, None), found[1])


def _find_tree(root: Path, wanted: str) -> Optional[tuple[SourceTree, Path]]:
    """The tree holding the module: at root, or one or two levels down (SGLang's checkout keeps
    it under python/)."""
    relative = wanted.replace(".", "/") + ".py"
    found = [Path(*p.parts[:len(p.parts) - len(relative.split("/"))])
             for pattern in (relative, "*/" + relative, "*/*/" + relative) for p in sorted(root.glob(pattern))]
    # root itself only when the module's file is where its name says (a checkout's root holds
    # python/sglang/...: reading every file under it twice costs seconds)
    for candidate in ([root] if (root / relative).is_file() else []) + [c for c in found if c != root] or [root]:
        tree = _from_directory(candidate)
        if wanted in tree:
            return tree, candidate
    return None


def _mounted(tree: SourceTree, name: str, module: str) -> SourceTree:
    """The tree with the file `name` read as `module`: every module of the tree moves under the
    package `module` names when `module` ends with `name` (a lone io_struct.py beside the modules
    it imports), else the file alone is read under that name."""
    if module.endswith("." + name):
        prefix = module[:-len(name)]
        return SourceTree({prefix + m: r for m, r in tree.readers.items()}, {prefix + p for p in tree.packages})
    return SourceTree({**tree.readers, module: tree.readers[name]}, set(tree.packages))


def _versioned(located: Located, where: Path) -> Located:
    version = _tree_version(located.tree, located.module)
    if version is not None:
        located.version, located.version_from = version, "the tree's version file"
        return located
    from conformance.schema.manifest.git_version import git_version

    found = git_version(where)
    if found is not None:
        located.version, located.version_from, located.dirty = found.version, found.origin, found.dirty
    return located


def _require(tree: SourceTree, module: str, path: Path) -> str:
    if module not in tree:
        raise UsageError(f"{path}: no module {module} in it (give the module's dotted name)")
    return module


def _normalized(distribution: str) -> str:
    """A distribution name as PEP 503 compares them: sglang_kt, SGLang.KT -> sglang-kt."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _wheel_name(path: Path) -> Optional[str]:
    parts = path.name.split("-")
    return _normalized(parts[0]) if len(parts) > 2 else None


def _wheel_version(path: Path) -> Optional[str]:
    parts = path.name.split("-")
    return parts[1] if len(parts) > 2 else None


def _tree_version(tree: SourceTree, module: str) -> Optional[str]:
    """`__version__ = "..."` in the top package's version.py, _version.py or __init__.py."""
    top = module.split(".")[0]
    for candidate in (f"{top}.version", f"{top}._version", top):
        if candidate in tree:
            found = re.search(r"^__version__\s*=\s*(?:\w+\s*=\s*)*['\"]([^'\"]+)['\"]", tree.text(candidate), re.M)
            if found:
                return found.group(1)
    return None
