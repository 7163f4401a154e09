"""What the user sees under the traceback, in an in-process shell (real torch CPU errors, real hooks)."""

from __future__ import annotations

import re

from cudaassert_ipy.shell import extension

SETUP_196 = """
import torch, torch.nn as nn, torch.nn.functional as F
class Birds:
    classes = [f"species_{i}" for i in range(196)]
train_ds = Birds()
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 195))
labels = torch.tensor([3, 195, 7, 195])
"""


def _run(shell, code):
    return shell.run_cell(code, store_history=True)


def test_label_195_with_195_outputs_names_the_last_linear_layer_and_the_dataset(loaded, shell, capsys):
    _run(shell, SETUP_196)
    result = _run(shell, "loss = F.cross_entropy(model(torch.randn(4, 8)), labels)")
    assert isinstance(result.error_in_exec, IndexError)
    out = capsys.readouterr().out
    assert "[cudaassert] This error was raised on the CPU, so no GPU context was harmed." in out
    assert "[cudaassert] CPU error · class label out of range in cross_entropy" in out
    assert (
        "Cause: cross_entropy got class label 195, but the model's last layer `model.2` has out_features=195, "
        "so labels must be 0..194. 2 value(s) of `labels` are out of range (first: 195 at [1], 195 at [3]). "
        "Likely fix: the dataset lists 196 classes but the model outputs 195: set out_features=196."
    ) in out
    assert "Your code: line 1: loss = F.cross_entropy(model(torch.randn(4, 8)), labels)" in out
    assert "  train_ds.classes: 196 entries" in out
    assert "Exception: IndexError: Target 195 is out of bounds." in out


def test_voc_void_label_255_suggests_ignore_index(loaded, shell, capsys):
    _run(
        shell,
        "import torch, torch.nn.functional as F\n"
        "mask = torch.zeros(2, 4, 4, dtype=torch.long); mask[0, 0, 0] = 255\n"
        "logits = torch.randn(2, 21, 4, 4)",
    )
    _run(shell, "F.cross_entropy(logits, mask)")
    out = capsys.readouterr().out
    assert (
        "cross_entropy got class label 255, but the input has 21 classes (shape (2, 21, 4, 4)), so labels "
        "must be 0..20." in out
    )
    assert (
        "Likely fix: 255 is the 'void' label of VOC-style segmentation masks: pass ignore_index=255 to the loss." in out
    )


def test_negative_padding_label_suggests_matching_ignore_index(loaded, shell, capsys):
    _run(shell, "import torch, torch.nn.functional as F\ny = torch.tensor([1, -1, 2])")
    _run(shell, "F.cross_entropy(torch.randn(3, 5), y)")
    out = capsys.readouterr().out
    assert (
        "Likely fix: negative labels are only allowed as the loss's ignore_index (now -100): if -1 marks "
        "padding or unlabelled items, pass ignore_index=-1." in out
    )


def test_token_ids_beyond_the_embedding_suggest_resize_token_embeddings(loaded, shell, capsys):
    _run(
        shell,
        """
import torch, torch.nn as nn
class FakeTokenizer:  # the shape of a Hugging Face tokenizer: len() is the vocabulary size
    def __len__(self): return 120
tokenizer = FakeTokenizer()
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 8)
    def forward(self, ids):
        return self.embed(ids)
lm = LM()
input_ids = torch.tensor([[5, 99, 110, 101]])
""",
    )
    _run(shell, "lm(input_ids)")
    out = capsys.readouterr().out
    assert "[cudaassert] CPU error · index out of range in an embedding or index_select in embedding" in out
    assert "Token ids reach 110, but `lm.embed` has num_embeddings=100 (valid 0..99)." in out
    assert "2 id(s) in `input_ids` are out of range (first: 110 at [0, 2], 101 at [0, 3])." in out
    assert (
        "Likely fix: the tokenizer has 120 tokens but the embedding only 100 rows: call "
        "model.resize_token_embeddings(len(tokenizer))." in out
    )
    assert "  tokenizer: len = 120" in out


def test_bce_on_raw_logits_suggests_bce_with_logits(loaded, shell, capsys):
    _run(shell, "import torch, torch.nn.functional as F\nlogits = torch.tensor([-2.5, 0.3, 4.0])")
    _run(shell, "F.binary_cross_entropy(logits, torch.tensor([0., 1., 1.]))")
    out = capsys.readouterr().out
    assert (
        "The input ranges from -2.5 to 4: these look like raw logits. Likely fix: the input must be "
        "probabilities in [0, 1], not logits: pass the raw logits to nn.BCEWithLogitsLoss / "
        "F.binary_cross_entropy_with_logits (numerically stable), or apply torch.sigmoid first." in out
    )


def test_device_assert_marks_the_context_dead_and_later_failures_get_one_banner(loaded, shell, capsys):
    _run(shell, "from gpu_double import fail_like_gpu")
    _run(shell, "fail_like_gpu()")
    first = capsys.readouterr().out
    assert (
        first.count(
            "[cudaassert] The GPU context of this kernel is dead. Nothing on the GPU can be used again "
            "in this process; restart the kernel."
        )
        == 1
    )
    assert loaded.state.dead
    _run(shell, "fail_like_gpu()")
    _run(shell, "raise RuntimeError('CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul')")
    later = capsys.readouterr().out
    cell = loaded.state.dead_since.cell
    assert isinstance(cell, int)
    banner = (
        f"[cudaassert] This failure is a consequence of the dead GPU context (since cell [{cell}]: a kernel "
        "assertion failed (its line was not captured)). Restart the kernel; `%cudaassert explain` shows the "
        "original diagnosis."
    )
    assert later.count(banner) == 2
    assert "What it means" not in later  # no new wall of text


def test_ordinary_errors_after_death_are_left_alone(loaded, shell, capsys):
    _run(shell, "from gpu_double import fail_like_gpu\nfail_like_gpu()")
    capsys.readouterr()
    _run(shell, "{}['missing']")
    assert "[cudaassert]" not in capsys.readouterr().out


def test_displaying_a_device_tensor_while_dead_shows_shape_and_dtype_and_unload_restores(loaded, shell, capsys):
    # torch's meta device stands in for CUDA here: any non-CPU tensor takes the safe path
    _run(shell, "import torch\nt = torch.empty(2, 3, device='meta')")
    _run(shell, "t")
    normal = capsys.readouterr().out
    assert "device='meta'" in normal
    _run(shell, "from gpu_double import fail_like_gpu\nfail_like_gpu()")
    capsys.readouterr()
    _run(shell, "t")
    assert (
        "<CUDA tensor shape=(2, 3) dtype=torch.float32 device=meta: not shown, the GPU context is dead>"
        in capsys.readouterr().out
    )
    _run(shell, "torch.tensor([1, 2])")
    assert "tensor([1, 2])" in capsys.readouterr().out  # CPU tensors still display normally
    shell.run_line_magic("unload_ext", "cudaassert")
    _run(shell, "t")
    assert "device='meta'" in capsys.readouterr().out


def test_an_error_raised_while_displaying_the_result_is_diagnosed(loaded, shell, capsys):
    _run(
        shell,
        """
from gpu_double import make_exception, DEVICE_ASSERT_WORDINGS
class GpuThing:
    def __repr__(self):
        raise make_exception(*DEVICE_ASSERT_WORDINGS["2.4-2.7"])
""",
    )
    result = _run(shell, "GpuThing()")
    assert result.error_in_exec is None
    out = capsys.readouterr().out
    assert "[cudaassert] GPU context dead · a kernel assertion failed" in out


def test_nested_run_cell_reports_once(loaded, shell, capsys):
    _run(shell, "from gpu_double import fail_like_gpu")
    _run(shell, "get_ipython().run_cell('fail_like_gpu()')")
    assert capsys.readouterr().out.count("The GPU context of this kernel is dead") == 1


def test_a_custom_exception_handler_like_colabs_keeps_working(loaded, shell, capsys):
    seen = []

    def colab_like(shell_, etype, value, tb, tb_offset=None):
        seen.append(etype.__name__)
        shell_.showtraceback((etype, value, tb), tb_offset=tb_offset)

    shell.set_custom_exc((ImportError,), colab_like)
    try:
        _run(shell, "import definitely_not_a_module_xyz")
        _run(shell, "from gpu_double import fail_like_gpu\nfail_like_gpu()")
        assert seen == ["ModuleNotFoundError"]
        assert "The GPU context of this kernel is dead" in capsys.readouterr().out
        assert shell.custom_exceptions == (ImportError,)
    finally:
        shell.set_custom_exc((), None)


def test_rich_traceback_keeps_working(loaded, shell, capsys):
    from rich import traceback as rich_traceback

    before = shell.showtraceback
    rich_traceback.install()
    try:
        _run(shell, "from gpu_double import fail_like_gpu\nfail_like_gpu()")
        out = capsys.readouterr().out
        assert "The GPU context of this kernel is dead" in out
    finally:
        shell.showtraceback = before
        shell.__dict__.pop("_showtraceback", None)


def test_a_failing_diagnosis_leaves_the_traceback_plus_one_line_and_the_hooks(loaded, shell, capsys, monkeypatch):
    def broken(*a, **k):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(loaded, "diagnose_and_show", broken)
    result = _run(shell, "from gpu_double import fail_like_gpu\nfail_like_gpu()")
    err = capsys.readouterr().err
    assert type(result.error_in_exec).__name__ == "AcceleratorError"
    assert (
        "[cudaassert] The diagnosis itself failed (ZeroDivisionError: boom); the traceback above is unchanged. "
        "Please report this with `%cudaassert status`." in err
    )
    assert extension.current(shell) is loaded
    assert loaded.watcher.post_run_cell in shell.events.callbacks["post_run_cell"]


def test_explain_shows_the_last_diagnosis_again(loaded, shell, capsys):
    _run(shell, SETUP_196)
    _run(shell, "F.cross_entropy(model(torch.randn(4, 8)), labels)")
    capsys.readouterr()
    shell.run_line_magic("cudaassert", "explain")
    assert "class label out of range in cross_entropy" in capsys.readouterr().out


def test_reports_off_shows_the_plain_error_only_and_on_brings_the_report_back(loaded, shell, capsys):
    shell.run_line_magic("cudaassert", "off")
    _run(shell, SETUP_196)
    capsys.readouterr()
    result = _run(shell, "F.cross_entropy(model(torch.randn(4, 8)), labels)")
    assert isinstance(result.error_in_exec, IndexError)
    shown = capsys.readouterr()
    assert "IndexError: Target 195 is out of bounds." in re.sub(r"\x1b\[[0-9;]*m", "", shown.out)  # IPython's own
    assert "[cudaassert]" not in shown.out + shown.err
    assert loaded.last is None  # nothing diagnosed either
    shell.run_line_magic("cudaassert", "on")
    _run(shell, "F.cross_entropy(model(torch.randn(4, 8)), labels)")
    assert "[cudaassert] CPU error · class label out of range in cross_entropy" in capsys.readouterr().out


def test_the_report_has_text_html_and_markdown(loaded, shell):
    _run(shell, SETUP_196)
    _run(shell, "F.cross_entropy(model(torch.randn(4, 8)), labels)")
    from cudaassert_ipy.view.report import Report

    bundle = Report(loaded.last)._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", "text/markdown"}
    assert "set out_features=196" in bundle["text/html"]
    assert "var(--jp-" in bundle["text/html"] and "<details>" in bundle["text/html"]
    assert "### CPU error · class label out of range in cross_entropy" in bundle["text/markdown"]


def test_last_diagnosis_is_public(loaded, shell, monkeypatch):
    import cudaassert_ipy

    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    assert cudaassert_ipy.last_diagnosis() is None
    _run(shell, SETUP_196)
    _run(shell, "F.cross_entropy(model(torch.randn(4, 8)), labels)")
    assert cudaassert_ipy.last_diagnosis().cause_id == "nll_loss_target_out_of_range"


def test_nothing_is_printed_for_a_successful_cell(loaded, shell, capsys):
    _run(shell, "x = 1 + 1")
    assert capsys.readouterr().out == ""


HF_STYLE = """
import torch, torch.nn as nn, torch.nn.functional as F
class GPT2Config:  # the attributes a Hugging Face config carries
    vocab_size = 50257
    num_labels = 3
class TinyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = GPT2Config()
        self.wte = nn.Embedding(50257, 4)
        self.score = nn.Linear(4, 2)
    def forward(self, ids):
        return self.score(self.wte(ids).mean(1))
hf_model = TinyModel()
"""


def test_hugging_face_style_config_vocab_size_is_used_for_out_of_vocabulary_ids(loaded, shell, capsys):
    _run(shell, HF_STYLE + "ids = torch.tensor([[1, 50300]])")
    _run(shell, "hf_model(ids)")
    out = capsys.readouterr().out
    assert "Token ids reach 50300, but `hf_model.wte` has num_embeddings=50257 (valid 0..50256)." in out
    assert (
        "Likely fix: the model's config has vocab_size=50257: the ids come from a larger vocabulary than the "
        "model's" in out
    )
    assert "hf_model.config: vocab_size=50257" in out


def test_hugging_face_style_num_labels_is_named_for_class_labels(loaded, shell, capsys):
    _run(shell, HF_STYLE + "ids = torch.tensor([[1, 2]])\ny = torch.tensor([2])")
    _run(shell, "F.cross_entropy(hf_model(ids), y)")
    out = capsys.readouterr().out
    assert (
        "cross_entropy got class label 2, but the model's last layer `hf_model.score` has out_features=2, "
        "so labels must be 0..1." in out
    )
    assert "Likely fix: the model's config has num_labels=3 but the model outputs 2: set out_features=3." in out
    assert "hf_model.config: num_labels=3" in out


def test_a_validator_error_gets_the_same_diagnosis_and_says_the_gpu_is_alive(loaded, shell, capsys):
    _run(shell, SETUP_196)
    shell.run_line_magic("cudaassert", "validators on")
    try:
        result = _run(shell, "F.cross_entropy(model(torch.randn(4, 8)), labels)")
    finally:
        shell.run_line_magic("cudaassert", "validators off")
    assert type(result.error_in_exec).__name__ == "ValidationIndexError"
    assert isinstance(result.error_in_exec, IndexError)  # existing `except IndexError` still works
    out = capsys.readouterr().out
    assert "[cudaassert] A validator caught this input before any device-side assert: the GPU is still alive." in out
    assert "[cudaassert] GPU alive · class label out of range in cross_entropy" in out
    assert "valid range: 0..194" in out
    # the same cause and fix as the post-mortem of the CPU error (test above): one wording on both paths
    assert (
        "Cause: cross_entropy got class label 195, but the model's last layer `model.2` has out_features=195, "
        "so labels must be 0..194. 2 value(s) of `labels` are out of range (first: 195 at [1], 195 at [3]). "
        "Likely fix: the dataset lists 196 classes but the model outputs 195: set out_features=196."
    ) in out
    assert not loaded.state.dead


def test_validators_follow_the_environment_variable_at_load(shell, monkeypatch):
    monkeypatch.setenv("CUDAASSERT_VALIDATORS", "1")
    shell.config.CudaAssert.tap = False
    shell.run_line_magic("load_ext", "cudaassert")
    from cudaassert_ipy.shell import extension

    ext = extension.current(shell)
    assert ext.validators_on()
    shell.run_line_magic("unload_ext", "cudaassert")
    assert not ext.validators_on()  # unload undoes it
