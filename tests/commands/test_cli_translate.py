import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from tests.inference.test_translator import MAX_LENGTH, tiny_translator
from tf_transformer import cli
from tf_transformer.run_dir import RunDir
from tf_transformer.text.document import translate_document
from tf_transformer.weights import model_checkpoint

pytestmark = pytest.mark.cost(40)  # seconds in make test (measured)

REPO_ROOT = Path(__file__).resolve().parents[2]
ARGS_SENTENCES = ["o carro vermelho é novo .", "nós comemos ."]
STDIN_LINES = ["ela comprou as maçãs ?", "", "os gatos pretos não são meus ."]
# A text of paragraphs: two sentences on a line, a blank line, double spaces, CRLF, no final
# newline.
DOCUMENT = (
    "O carro vermelho é novo. Nós comemos.\n\n"
    "  Ela comprou as maçãs?  Os gatos pretos não são meus.\r\n"
    "O Sr. Silva chegou."
)
# The settings of tiny_translator(), whose model the run directory holds.
OPTIONS = [
    "--beam-size",
    "2",
    "--max-source-tokens",
    str(MAX_LENGTH),
    "--max-new-tokens",
    str(MAX_LENGTH),
    "--batch-size",
    "2",
]


# A line of TensorFlow's C++ log (absl's prefix), or absl's notice that comes before them.
C_LOG_LINE = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] |WARNING: All log messages")


def start_cli(*args, stdin="", log_level=None):
    """`tf-transformer translate ARGS` in a new process; `log_level`: the user's
    TF_CPP_MIN_LOG_LEVEL (None: unset, the CLI's own choice)."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # tests/conftest.py sets it for this process
    if log_level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = log_level
    process = subprocess.Popen(
        [sys.executable, "-m", "tf_transformer.cli", "translate", *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    process.stdin.write(stdin)
    process.stdin.close()
    return process


def finish(process):
    stdout, stderr = process.stdout.read(), process.stderr.read()
    process.wait(timeout=300)
    return process.returncode, stdout, stderr


def cli_here(*args):
    """`tf-transformer translate ARGS` in this process (TensorFlow is imported already): (exit
    code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["translate", *map(str, args)])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tiny run directory; the CLI reading stdin and the one given no run directory in new
    processes (`python -m tf_transformer.cli`), started first; the arguments and the file in
    this process meanwhile."""
    root = tmp_path_factory.mktemp("run")
    run = RunDir(root)
    translator = tiny_translator()  # shared with tests/inference/test_translator.py: traced once
    tokenizers, model = translator.tokenizers, translator.model
    run.write_config({"model": model.config.to_dict(), "train": {}, "data": {}})
    tokenizers.save(run.tokenizers_path)
    # model_checkpoint, not tf.train.Checkpoint(model=model): that misses the layer stacks.
    tf.train.CheckpointManager(model_checkpoint(model), run.checkpoints_path, 3).save()
    plot = root / "attention.png"
    processes = {
        "stdin": start_cli(root, *OPTIONS, stdin="\n".join(STDIN_LINES) + "\n"),
        "missing": start_cli(root / "nope", "o carro ."),
        "user level": start_cli(root, *ARGS_SENTENCES, *OPTIONS, log_level="0"),
    }
    document, output = root / "in.txt", root / "out.txt"
    document.write_bytes(DOCUMENT.encode("utf-8"))
    results = {
        "args": cli_here(root, *ARGS_SENTENCES, *OPTIONS, "--plot-attention", plot),
        "file": cli_here(root, "--file", document, "--output", output, *OPTIONS),
    }
    # The same model through the Python API.
    expected = {
        "args": translator.translate_batch(ARGS_SENTENCES),
        "stdin": translator.translate_batch(STDIN_LINES),
        "file": translate_document(DOCUMENT, translator.translate_batch, batch_size=2),
    }
    results.update({name: finish(process) for name, process in processes.items()})
    return {"results": results, "expected": expected, "plot": plot, "output": output}


def test_translates_arguments_like_the_python_api(runs):
    code, stdout, stderr = runs["results"]["args"]
    assert code == 0, stderr
    assert stdout.splitlines() == runs["expected"]["args"]


def test_writes_the_attention_plot(runs):
    assert runs["results"]["args"][0] == 0
    assert runs["plot"].read_bytes()[:4] == b"\x89PNG"


def test_translates_stdin_lines_keeping_empty_lines(runs):
    code, stdout, stderr = runs["results"]["stdin"]
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert len(lines) == len(STDIN_LINES)
    assert lines[1] == ""
    assert lines == runs["expected"]["stdin"]


def test_missing_run_dir_is_one_error_line_and_exit_2(runs):
    code, stdout, stderr = runs["results"]["missing"]
    assert code == 2
    assert stdout == ""
    lines = [line for line in stderr.splitlines() if line.startswith("tf-transformer")]
    assert len(lines) == 1 and "does not exist" in lines[0], stderr


def test_a_user_set_tensorflow_log_level_is_kept(runs):
    # That process ran with TF_CPP_MIN_LOG_LEVEL=0: TensorFlow's own lines (at load: oneDNN,
    # the CPU's instructions, CUDA) reach stderr as the user asked, and it still translates.
    code, stdout, stderr = runs["results"]["user level"]
    assert code == 0 and stdout.splitlines() == runs["expected"]["args"], stderr
    assert any(C_LOG_LINE.match(line) for line in stderr.splitlines()), stderr


def test_translating_prints_no_tensorflow_log_line_or_keras_warning(runs):
    # The stdin process ran as a user starts it, with no TF_CPP_MIN_LOG_LEVEL: stderr holds
    # the checkpoint it read and nothing else (no C++ log line, no Keras `build()` warning).
    code, _, stderr = runs["results"]["stdin"]
    assert code == 0, stderr
    assert [line.split(":")[0] for line in stderr.splitlines()] == ["latest checkpoint"], stderr


def test_translates_a_file_keeping_its_layout(runs):
    code, _, stderr = runs["results"]["file"]
    assert code == 0, stderr
    written = runs["output"].read_bytes().decode("utf-8")
    assert written == runs["expected"]["file"]
    # The layout is the input's: the same line breaks (CRLF kept), blank line and spacing.
    _, blank, second, _ = written.split("\n")
    assert blank == "" and second.startswith("  ") and second.endswith("\r")
    assert "  " in second.strip() and not written.endswith("\n")
    # Written atomically, yet readable as a file open() makes (not mkstemp's 0600).
    umask = os.umask(0o022)
    os.umask(umask)
    assert runs["output"].stat().st_mode & 0o777 == 0o666 & ~umask
