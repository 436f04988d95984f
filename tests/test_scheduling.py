"""How `make test` groups the suite for its workers (tests/conftest.py)."""

from tests.conftest import LONGEST_FIRST, REPO_ROOT, test_group


def test_modules_sharing_the_cached_export_form_one_group():
    assert test_group("tests/test_export.py") == "export_helpers"
    assert test_group("tests/test_cli_export.py") == "export_helpers"
    assert test_group("tests/test_masks.py") == "tests/test_masks.py"


def test_the_ordered_groups_exist():
    groups = {
        test_group(str(path.relative_to(REPO_ROOT)))
        for path in REPO_ROOT.glob("tests/**/test_*.py")
    }
    assert set(LONGEST_FIRST) <= groups, set(LONGEST_FIRST) - groups
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
