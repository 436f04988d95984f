"""Runs bench/quality.py's main() once per argument list, in this one process.

    python tests/quality_calls.py CALLS.json   # CALLS.json: [["--data", "...", ...], ...]

Prints one JSON list: per call its exit code, stdout and stderr, as `python bench/quality.py
ARGS` would give them (`sys.exit("error: ...")` is code 1 with the message on stderr). Used by
tests/test_quality_bench.py: one process that imports TensorFlow once, where the calls need no
fresh process of their own.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
import traceback
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "quality.py"


def load_quality():
    sys.path.insert(0, str(SCRIPT.parent))  # as `python bench/quality.py` has it
    spec = importlib.util.spec_from_file_location("quality", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def call(main, args: list[str]) -> dict:
    out, err = io.StringIO(), io.StringIO()
    sys.argv = [str(SCRIPT), *args]
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main()
        except SystemExit as stop:
            if isinstance(stop.code, str):
                print(stop.code, file=sys.stderr)
                code = 1
            else:
                code = stop.code or 0
        except Exception:  # noqa: BLE001 - reported like the interpreter would, as exit 1
            traceback.print_exc()
            code = 1
    return {"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


if __name__ == "__main__":
    import gc

    from tf_transformer.cli import TRACING_GC_THRESHOLD

    gc.set_threshold(*TRACING_GC_THRESHOLD)  # as in the test processes (tests/conftest.py)
    calls = json.loads(Path(sys.argv[1]).read_text())
    main = load_quality().main
    results = [call(main, args) for args in calls]
    sys.stdout.write(json.dumps(results))
