"""Printed tracebacks read back into frames: Python's form, IPython 8's and 7's, launcher prefixes, wrapped lines."""

from __future__ import annotations

from cudaassert_ipy.capture.tracebacks import Frame, frames_in_text

PYTHON = """Traceback (most recent call last):
  File "train.py", line 88, in <module>
    outputs = model(input_ids, labels=labels)
  File "/usr/lib/python3.10/site-packages/transformers/models/bert/modeling_bert.py", line 202, in forward
    position_embeddings = self.position_embeddings(position_ids)
                          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
RuntimeError: CUDA error: device-side assert triggered
"""

IPYTHON8 = """---------------------------------------------------------------------------
IndexError                                Traceback (most recent call last)
Cell In[4], line 1
----> 1 results = model.train(data="data.yaml", epochs=50)

File /opt/conda/site-packages/ultralytics/utils/loss.py:220, in v8DetectionLoss.__call__(self, preds, batch)
    218 targets = self.preprocess(targets, batch_size, scale_tensor=imgsz[[1, 0, 1, 0]])
--> 220 target_scores[idx, cls] = 1.0

IndexError: index 2 is out of bounds for dimension 0 with size 2
"""

IPYTHON7 = """<ipython-input-5-ab12> in <module>
----> 1 trainer.train()

/usr/local/lib/python3.7/dist-packages/torch/nn/functional.py in embedding(input, weight, padding_idx, max_norm)
   1482         _no_grad_embedding_renorm_(weight, input, max_norm, norm_type)
-> 1484     return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)

RuntimeError: CUDA error: device-side assert triggered
"""


def test_python_frames_keep_path_line_function_and_source() -> None:
    frames = frames_in_text(PYTHON)
    assert frames == (
        Frame("train.py", 88, "<module>", "outputs = model(input_ids, labels=labels)"),
        Frame(
            "/usr/lib/python3.10/site-packages/transformers/models/bert/modeling_bert.py",
            202,
            "forward",
            "position_embeddings = self.position_embeddings(position_ids)",
        ),
    )


def test_ipython8_frames_take_the_arrow_line() -> None:
    frames = frames_in_text(IPYTHON8)
    assert [(f.path, f.line, f.func, f.code) for f in frames] == [
        ("Cell In[4]", 1, "<module>", 'results = model.train(data="data.yaml", epochs=50)'),
        (
            "/opt/conda/site-packages/ultralytics/utils/loss.py",
            220,
            "v8DetectionLoss.__call__",
            "target_scores[idx, cls] = 1.0",
        ),
    ]


def test_ipython7_frames_as_colab_and_kaggle_print_them() -> None:
    frames = frames_in_text(IPYTHON7)
    assert [(f.func, f.line, f.code) for f in frames] == [
        ("<module>", 1, "trainer.train()"),
        ("embedding", 1484, "return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)"),
    ]


def test_launcher_prefixes_colour_codes_and_wrapped_lines_are_read_through() -> None:
    text = (
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/x/site-packages/torch_geometric/nn/conv/message_passing.py", line 2\n'
        "[rank1]: 31, in _lift\n"
        '\x1b[0;31m  File "/a/transformers/models/llama/modeling_llama.py", line 49, in _make_causal_m\n'
        "ask\n"
        "    mask = torch.full((n, n), 0)\n"
    )
    frames = frames_in_text(text)
    assert [(f.func, f.code) for f in frames][-1] == ("_make_causal_mask", "mask = torch.full((n, n), 0)")
    assert frames[-1].norm_path.endswith("transformers/models/llama/modeling_llama.py")


def test_chained_errors_number_their_tracebacks_and_text_without_frames_has_none() -> None:
    chained = PYTHON + "\nDuring handling of the above exception, another exception occurred:\n\n" + PYTHON
    assert [f.block for f in frames_in_text(chained)] == [0, 0, 1, 1]
    assert frames_in_text("RuntimeError: CUDA error: device-side assert triggered") == ()
    assert frames_in_text("") == ()


def test_a_frame_line_whose_file_was_cut_off_keeps_its_function_and_source() -> None:
    text = (
        "line 306, in assign\n    grid[b, gj, gi] = 1\n"
        "IndexError: index 9 is out of bounds for dimension 1 with size 9\n"
    )
    assert frames_in_text(text) == (Frame("", 306, "assign", "grid[b, gj, gi] = 1"),)
    assert frames_in_text("the best line 3, in my opinion\n") == ()
