"""Load hook modules from the hooks directory; a broken file is reported, never fatal."""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nexus.hooks.cron import valid_cron
from nexus.hooks.spec import HookContext, HookMeta, HookResult

Evaluate = Callable[[HookContext], HookResult]


@dataclass(frozen=True)
class LoadedHook:
    meta: HookMeta
    evaluate: Evaluate
    path: str
    content_hash: str
    source: str | None = None  # the file as loaded: what a hook process runs


@dataclass(frozen=True)
class LoadReport:
    hooks: tuple[LoadedHook, ...]
    problems: tuple[str, ...]  # "file: what is wrong", for `nexus hooks` and the logs


def load_hooks(directory: str | Path) -> LoadReport:
    """Every `*.py` file (not starting with `_`) that defines `HOOK` and `evaluate`."""
    root = Path(directory)
    if not root.is_dir():
        return LoadReport((), ())
    hooks: list[LoadedHook] = []
    problems: list[str] = []
    seen: set[str] = set()
    for path in sorted(root.glob("*.py")):
        if path.name.startswith("_"):
            continue
        try:
            loaded = _load(path)
        except Exception as error:  # a user's file: report it and carry on
            problems.append(f"{path.name}: {type(error).__name__}: {error}")
            continue
        if loaded.meta.name in seen:
            problems.append(f"{path.name}: another hook is already named {loaded.meta.name!r}")
            continue
        seen.add(loaded.meta.name)
        hooks.append(loaded)
    return LoadReport(tuple(hooks), tuple(problems))


def _load(path: Path) -> LoadedHook:
    source = path.read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    spec = importlib.util.spec_from_file_location(f"nexus_hook_{path.stem}_{digest[:8]}", path)
    if spec is None or spec.loader is None:
        raise ImportError("not a loadable Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    meta: Any = getattr(module, "HOOK", None)
    evaluate: Any = getattr(module, "evaluate", None)
    if not isinstance(meta, HookMeta):
        raise TypeError("define HOOK = HookMeta(name=..., ...)")
    if not callable(evaluate):
        raise TypeError("define evaluate(ctx) -> HookResult")
    if meta.schedule is not None and not valid_cron(meta.schedule):
        raise ValueError(f"schedule {meta.schedule!r} is not a cron expression")
    return LoadedHook(
        meta=meta,
        evaluate=evaluate,
        path=str(path),
        content_hash=digest,
        source=importlib.util.decode_source(source),
    )
