"""Where moved modules and names went: their old import paths keep working, and say once where
they moved.

`training/` and `inference/` were flat folders; their modules now live in rooms
(`training/policies/`, `inference/serving/`, ...). An old module path (`import
tf_transformer.inference.export`) is served by `MovedModuleFinder`, installed by the package's
`__init__`: it makes a stand-in module that looks each name up in the new modules, after a
one-time `DeprecatedName` warning naming the new path. A name that left a module still in
place (`StopSignal` from `training.checkpoints`) is found by that module's `__getattr__`
(`moved_name`), with the same warning.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

_P = "tf_transformer."

# Old module path -> the modules its names now live in (looked up in this order).
MOVED_MODULES: dict[str, tuple[str, ...]] = {
    f"{_P}training.runner": (f"{_P}training.start.entry", f"{_P}training.start.inputs"),
    f"{_P}training.run_lock": (f"{_P}training.start.lock",),
    f"{_P}training.resume": (f"{_P}training.start.resume",),
    f"{_P}training.epoch_loop": (f"{_P}training.loop",),
    f"{_P}training.summaries": (f"{_P}training.logs",),
    f"{_P}training.train_step": (f"{_P}training.step.train_step",),
    f"{_P}training.losses": (f"{_P}training.step.losses",),
    f"{_P}training.schedule": (f"{_P}training.step.schedule",),
    f"{_P}training.mixed_precision": (
        f"{_P}training.step.mixed_precision",
        f"{_P}training.step.build",
    ),
    f"{_P}training.budget": (f"{_P}training.policies.budget",),
    f"{_P}training.validate_every": (f"{_P}training.policies.validate_every",),
    f"{_P}training.average_last": (f"{_P}training.policies.average_last",),
    f"{_P}training.fit_backup": (f"{_P}training.fit.backup",),
    f"{_P}training.fit_optimizer": (f"{_P}training.fit.optimizer",),
    f"{_P}data.sample_lexicon": (f"{_P}data.sample.lexicon",),
    f"{_P}data.written_style": (f"{_P}data.sample.written_style",),
    f"{_P}inference.search": (f"{_P}inference.decoding.search",),
    f"{_P}inference.greedy": (f"{_P}inference.decoding.greedy",),
    f"{_P}inference.beam_search": (f"{_P}inference.decoding.beam",),
    f"{_P}inference.export": (f"{_P}inference.serving.export",),
    f"{_P}inference.warmup": (f"{_P}inference.serving.warmup",),
    f"{_P}inference.versions": (f"{_P}inference.serving.versions",),
    f"{_P}inference.graph_ops": (f"{_P}inference.serving.graph_ops",),
    f"{_P}inference.grpc_client": (f"{_P}inference.serving.grpc_client",),
    f"{_P}inference.ctranslate2_export": (f"{_P}inference.serving.ctranslate2_export",),
}

# Old modules that are still there (or became packages) -> the modules names left them for.
MOVED_NAMES: dict[str, tuple[str, ...]] = {
    f"{_P}training.policies": (
        f"{_P}training.policies.standard",
        f"{_P}training.policies.progress",
    ),
    f"{_P}training.fit": (f"{_P}training.fit.model_fit",),
    f"{_P}training.checkpoints": (f"{_P}training.policies.stop_signal",),
    f"{_P}training.session": (f"{_P}training.policies.assembly",),
    f"{_P}inference.decoding": (f"{_P}inference.decoding.cached_decode",),
    f"{_P}inference.serving": (
        f"{_P}inference.serving.client",
        f"{_P}inference.serving.rest_client",
    ),
}


def _warn(old: str, new: str) -> None:
    from tf_transformer.config.base import warn_deprecated  # not on `import tf_transformer`

    warn_deprecated(old, new)


def _find(old: str, targets: tuple[str, ...], name: str):
    """`name` from the first of `targets` that has it, after a one-time warning."""
    for target in targets:
        module = importlib.import_module(target)
        if hasattr(module, name):
            _warn(f"{old}.{name}", f"{target}.{name}")
            return getattr(module, name)
    raise AttributeError(f"module {old!r} has no attribute {name!r}")


def moved_name(module: str, name: str):
    """A module's `__getattr__` for the names that left it (see `MOVED_NAMES`)."""
    if name.startswith("__"):
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return _find(module, MOVED_NAMES.get(module, ()), name)


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path of `MOVED_MODULES` as a stand-in for its new modules.

    It is consulted after the ordinary finders, so it never hides a module that exists.
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        targets = MOVED_MODULES[spec.name]
        _warn(spec.name, " and ".join(targets))
        module = types.ModuleType(spec.name, f"Moved to {', '.join(targets)}.")

        def __getattr__(name):
            if name.startswith("__"):
                raise AttributeError(name)
            for target in targets:
                new = importlib.import_module(target)
                if hasattr(new, name):
                    return getattr(new, name)
            raise AttributeError(f"module {spec.name!r} has no attribute {name!r}")

        module.__getattr__ = __getattr__
        return module

    def exec_module(self, module):
        pass


def install() -> None:
    """Adds `MovedModuleFinder` to `sys.meta_path` (once)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
