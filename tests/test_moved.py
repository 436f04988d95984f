"""Old import paths of moved modules and names keep working, and say once where they went."""

import json
import subprocess
import sys
from pathlib import Path

from tf_transformer.moved import MOVED_MODULES, MOVED_NAMES

REPO = Path(__file__).resolve().parents[1]

# A fresh interpreter (the warnings are once per process). These paths import no TensorFlow.
SCRIPT = """
import json, warnings
from tf_transformer.errors import DeprecatedName
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import tf_transformer.inference.versions as old_module
    from tf_transformer.inference.versions import write_version
    import tf_transformer.inference.versions
    from tf_transformer.inference.serving import ServingClient, ServingError
    from tf_transformer.inference.serving import ServingClient as again
from tf_transformer.inference.serving import client, rest_client, versions
print(json.dumps({
    "messages": [str(w.message) for w in caught if issubclass(w.category, DeprecatedName)],
    "same": [
        write_version is versions.write_version,
        old_module.check_version is versions.check_version,
        ServingClient is rest_client.ServingClient is again,
        ServingError is client.ServingError,
    ],
}))
"""


def test_old_paths_import_the_new_objects_and_warn_once_each():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["same"] == [True, True, True, True]
    new = {
        "tf_transformer.inference.versions": "tf_transformer.inference.serving.versions",
        "tf_transformer.inference.serving.ServingClient": (
            "tf_transformer.inference.serving.rest_client.ServingClient"
        ),
        "tf_transformer.inference.serving.ServingError": (
            "tf_transformer.inference.serving.client.ServingError"
        ),
    }
    assert result["messages"] == [f"{old} is deprecated: use {path}." for old, path in new.items()]


def test_an_unknown_name_is_still_an_attribute_error():
    from tf_transformer.inference import serving

    try:
        serving.NoSuchName  # noqa: B018
    except AttributeError as error:
        assert "NoSuchName" in str(error)
    else:
        raise AssertionError("no AttributeError")


def test_every_old_module_is_gone_and_every_new_one_exists():
    def exists(dotted: str) -> bool:
        path = REPO.joinpath(*dotted.split("."))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    for old, targets in MOVED_MODULES.items():
        assert not exists(old), old
        assert all(exists(target) for target in targets), targets
    for old, targets in MOVED_NAMES.items():
        assert exists(old) and all(exists(target) for target in targets), old
