"""Where the suite's data (spec/ and golden/) lives: in the wheel or in the source tree."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_INSTALLED = _PACKAGE / "_data"
_SOURCE_TREE = _PACKAGE.parent


def data_root() -> Path:
    """Folder holding spec/ and golden/: package data when installed, else the repository."""
    if (_INSTALLED / "spec").is_dir():
        return _INSTALLED
    return _SOURCE_TREE


def spec_dir() -> Path:
    return data_root() / "spec"


def manifests_dir() -> Path:
    return spec_dir() / "manifests"


def golden_dir() -> Path:
    return data_root() / "golden"
