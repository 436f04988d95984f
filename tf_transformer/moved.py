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

# Old module path -> the modules its names now live in (looked up in this order); under
# `tf_transformer.`.
_MOVED_MODULES = """
training.runner             training.start.entry  training.start.inputs
training.run_lock           training.start.lock
training.resume             training.start.resume
training.epoch_loop         training.loop
training.summaries          training.logs
training.train_step         training.step.train_step
training.losses             training.step.losses
training.schedule           training.step.schedule
training.mixed_precision    training.step.mixed_precision  training.step.build
training.budget             training.policies.budget
training.validate_every     training.policies.validate_every
training.average_last       training.policies.average_last
training.fit_backup         training.fit.backup
training.fit_optimizer      training.fit.optimizer
data.sample_lexicon         data.sample.lexicon
data.written_style          data.sample.written_style
inference.search            inference.decoding.search
inference.greedy            inference.decoding.greedy
inference.beam_search       inference.decoding.beam
inference.export            inference.serving.export
inference.warmup            inference.serving.warmup
inference.versions          inference.serving.versions
inference.graph_ops         inference.serving.graph_ops
inference.grpc_client       inference.serving.grpc_client
inference.ctranslate2_export  inference.serving.ctranslate2_export
inference.litert_export      inference.litert.export
inference.litert_runtime     inference.litert.runtime
inference.litert_search      inference.litert.search
"""

# Old modules that are still there (or became packages) -> the modules names left them for.
_MOVED_NAMES = """
training.policies           training.policies.standard  training.policies.progress
training.fit                training.fit.model_fit
training.checkpoints        training.policies.stop_signal
training.session            training.policies.assembly
inference.decoding          inference.decoding.cached_decode
inference.serving           inference.serving.client  inference.serving.rest_client
"""


def _table(text: str) -> dict[str, tuple[str, ...]]:
    rows = (line.split() for line in text.strip().splitlines())
    return {
        f"tf_transformer.{old}": tuple(f"tf_transformer.{n}" for n in new) for old, *new in rows
    }


MOVED_MODULES = _table(_MOVED_MODULES)
MOVED_NAMES = _table(_MOVED_NAMES)


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
