"""Language-model failure points: what a pasted report says about token ids and positions.

Each text here is written for the test (none is copied from a report): the clues a person reading such a paste
would use (the tokenizer's length warning, a resize log line, added tokens, the sizes in the error's own text, a
line that uses the position embedding), and, where nothing decides, the two likely indices ranked with what to
check.
"""

from __future__ import annotations

from helpers.pastes import ASSERT
from helpers.pastes import first as _first

from cudaassert_ipy.capture.tracebacks import frames_in_text
from cudaassert_ipy.diagnose.causes.cpu_twins import match_cpu_twin

LOOKUP_LINE = (
    "/opt/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1231: indexSelectLargeIndex: block: [17,0,0], "
    "thread: [64,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n"
)
NLL_LINE = (
    "/opt/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: "
    "[0,0,0], thread: [3,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
)
WARNING = (
    "Token indices sequence length is longer than the specified maximum sequence length for this model "
    "(877 > 512). Running this sequence through the model will result in indexing errors\n"
)


def _said(d) -> str:
    return " ".join(x for x in (d.specific or "", d.likely_fix or "", d.fix, *d.candidates[1:]))


def test_the_tokenizers_length_warning_names_positions_with_its_bound() -> None:
    d = _first(WARNING + "IndexError: index out of range in self\n")
    assert d.cause_id == "position_ids_out_of_range"
    assert d.basis == "the error text (tokenizer_length_warning)"
    assert "max_position_embeddings (512)" in (d.likely_fix or "") and "truncation=True" in (d.likely_fix or "")
    assert "the text names a size of 512" in (d.specific or "")
    assert "position ids" in d.candidates[1] and "token ids" in d.candidates[2]


def test_a_generic_lookup_check_is_refined_by_the_warning_but_a_named_check_stands() -> None:
    d = _first(WARNING + LOOKUP_LINE + ASSERT)
    assert d.cause_id == "position_ids_out_of_range"
    label = _first(WARNING + NLL_LINE + ASSERT)
    assert label.cause_id == "nll_loss_target_out_of_range"


def test_a_resize_log_line_names_token_ids_and_the_resize_that_did_not_reach_the_model() -> None:
    d = _first("[INFO] Resized token embeddings from 50257 to 50261.\n" + ASSERT)
    assert d.cause_id == "index_select_out_of_range"
    assert d.basis == "the error text (resized_embeddings_log)"
    assert "(50261)" in (d.likely_fix or "") and "ZeRO-3" in (d.likely_fix or "")
    assert d.candidates and "token ids" in d.candidates[1]


def test_tokens_added_in_the_pasted_code_name_token_ids() -> None:
    text = "tok.add_special_tokens({'pad_token': '<pad>'})\nout = model(**tok(batch, return_tensors='pt'))\n" + ASSERT
    d = _first(text)
    assert d.cause_id == "index_select_out_of_range"
    assert "resize_token_embeddings(len(tokenizer))" in (d.likely_fix or "")
    # the keyword of a tokenizer call adds nothing
    kwarg = _first("enc = tok(batch, add_special_tokens=True)\n" + ASSERT)
    assert kwarg.cause_id != "index_select_out_of_range"


def test_an_old_lookup_error_prints_the_last_row_and_a_position_sized_table_means_positions() -> None:
    twin = match_cpu_twin(
        ("RuntimeError",),
        "index out of range: Tried to access index 1030 out of table with "
        "1023 rows. at /pytorch/aten/src/TH/generic/THTensorEvenMoreMath.cpp:2",
    )
    assert twin is not None and twin.size == 1024 and twin.value == 1030
    d = _first(
        "RuntimeError: index out of range: Tried to access index 1030 out of table with 1023 rows. at "
        "/pytorch/aten/src/TH/generic/THTensorEvenMoreMath.cpp:237\n"
    )
    assert d.cause_id == "position_ids_out_of_range"
    assert "max_position_embeddings=1024" in (d.specific or "")
    assert "truncat" in (d.likely_fix or "") and "token ids" in d.candidates[2]
    vocab = _first(
        "RuntimeError: index out of range: Tried to access index 32003 out of table with 31999 rows. at "
        "/pytorch/aten/src/TH/generic/THTensorEvenMoreMath.cpp:237\n"
    )
    assert vocab.cause_id == "index_select_out_of_range" and "32000" in (vocab.specific or "")


def test_an_index_into_a_vocabulary_sized_dimension_is_a_token_id() -> None:
    d = _first("IndexError: index 32000 is out of bounds for dimension 0 with size 32000\n")
    assert d.cause_id == "index_select_out_of_range"
    assert d.basis == "the error text (vocabulary_sized_table)"
    assert "vocab_size" in (d.specific or "") and len(d.candidates) == 3
    gathered = _first("RuntimeError: index 21128 is out of bounds for dimension 1 with size 21128\n")
    assert gathered.cause_id == "index_select_out_of_range"
    small = _first("IndexError: index 7 is out of bounds for dimension 0 with size 7\n")
    assert small.cause_id == "advanced_indexing_out_of_range_v1"


def test_a_line_that_uses_the_position_embedding_names_positions() -> None:
    text = (
        '  File "/srv/lm/model/embedding.py", line 88, in forward\n'
        "    hidden = token_vectors + position_embeddings\n" + ASSERT
    )
    d = _first(text)
    assert d.cause_id == "position_ids_out_of_range"
    assert d.basis == "a frame: embedding.py:88 in forward"
    assert "context" in (d.likely_fix or "") and "position ids" in d.candidates[1]
    called = _first('  File "/srv/lm/net.py", line 12, in forward\n    x = x + self.pos_embedding(steps)\n' + ASSERT)
    assert called.cause_id == "position_ids_out_of_range"
    added = _first('  File "/srv/lm/emb.py", line 61, in forward\n    embeddings += position_embeddings\n' + ASSERT)
    assert added.cause_id == "position_ids_out_of_range"
    # a line that looks up both tables, or only passes position_ids on, does not decide
    both = _first(
        '  File "/srv/lm/gpt.py", line 40, in forward\n    x = self.tok_emb(idx) + self.pos_emb(pos)\n' + ASSERT
    )
    assert both.cause_id != "position_ids_out_of_range"
    passed = _first(
        '  File "/srv/lm/run.py", line 9, in step\n    out = net(ids, position_ids=position_ids)\n' + ASSERT
    )
    assert passed.cause_id != "position_ids_out_of_range"


def test_a_lookup_that_nothing_names_ranks_token_ids_then_positions() -> None:
    for text in ("IndexError: index out of range in self\n", LOOKUP_LINE + ASSERT):
        d = _first(text)
        assert d.cause_id == "index_select_out_of_range"
        assert d.candidates[0].startswith("The text does not say which index")
        assert "pad_token_id" in d.candidates[1] and "max_position_embeddings" in d.candidates[2]
        assert "truncat" in _said(d) and "resize_token_embeddings" in _said(d)
    framed = _first(
        '  File "/usr/lib/python3/site-packages/torch/nn/functional.py", line 2233, in embedding\n'
        "    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)\n"
        "IndexError: index out of range in self\n"
    )
    assert framed.cause_id == "index_select_out_of_range" and framed.candidates == d.candidates  # the same ranking
    # a frame that names the table decides: no ranking
    word = _first(
        '  File "/x/site-packages/transformers/models/bert/modeling_bert.py", line 210, in forward\n'
        "    inputs_embeds = self.word_embeddings(input_ids)\n" + "IndexError: index out of range in self\n"
    )
    assert word.cause_id == "index_select_out_of_range" and word.candidates == ()


def test_a_paste_that_starts_inside_a_frame_line_keeps_that_frame() -> None:
    frames = frames_in_text('"/srv/app/model.py", line 31, in forward\n    y = self.proj(x)\n' + ASSERT)
    assert [(f.path, f.line, f.func, f.code) for f in frames] == [
        ("/srv/app/model.py", 31, "forward", "y = self.proj(x)")
    ]


def test_a_line_that_looks_up_both_tables_ranks_both() -> None:
    d = _first('  File "/srv/lm/gpt.py", line 40, in forward\n    x = self.tok_emb(idx) + self.pos_emb(pos)\n' + ASSERT)
    assert d.cause_id == "index_select_out_of_range"
    assert "token ids" in d.candidates[1] and "position ids" in d.candidates[2]


def test_the_rotary_cache_read_at_the_positions_names_positions() -> None:
    for code in (
        "cos_sin = self.cos_sin_cache[positions]",
        "cos = cos[position_ids].unsqueeze(unsqueeze_dim)",
        "freqs_cis = self.freqs_cis[input_pos]",
    ):
        d = _first(f'  File "/srv/llm/layers/rope.py", line 77, in forward\n    {code}\n' + ASSERT)
        assert d.cause_id == "position_ids_out_of_range", code
        assert "max_model_len" in (d.likely_fix or "") and d.candidates == ()


def test_a_token_embedding_line_outside_transformers_names_token_ids() -> None:
    d = _first(
        '  File "/srv/llm/models/decoder.py", line 310, in forward\n'
        "    hidden_states = self.embed_tokens(input_ids)\n" + ASSERT
    )
    assert d.cause_id == "index_select_out_of_range"
    assert d.basis == "a frame: decoder.py:310 in forward" and d.candidates == ()
    assert "resize_token_embeddings(len(tokenizer))" in (d.likely_fix or "")
    vllm = _first(
        '  File "/usr/lib/python3/site-packages/vllm/model_executor/layers/vocab_parallel_embedding.py", '
        "line 406, in forward\n    output_parallel = self.quant_method.embedding(self, masked_input.long())\n" + ASSERT
    )
    assert vllm.cause_id == "index_select_out_of_range" and "vLLM" in (vllm.specific or "")


def test_a_config_whose_special_token_id_is_the_vocabulary_size_names_token_ids() -> None:
    config = (
        'LlamaConfig {\n  "bos_token_id": 1,\n  "eos_token_id": 2,\n  "hidden_size": 4096,\n'
        '  "pad_token_id": 32000,\n  "rms_norm_eps": 1e-06,\n  "vocab_size": 32000\n}\n'
    )
    d = _first(config + ASSERT)
    assert d.cause_id == "index_select_out_of_range"
    assert d.basis == "the error text (special_token_id_is_vocab_size)"
    assert "vocab_size=32000" in (d.specific or "")
    inside = _first(config.replace('"pad_token_id": 32000', '"pad_token_id": 0') + ASSERT)
    assert inside.cause_id != "index_select_out_of_range"


def test_the_tokenizers_own_line_about_added_special_tokens_names_token_ids() -> None:
    d = _first(
        "Special tokens have been added in the vocabulary, make sure the associated word embeddings are "
        "fine-tuned or trained.\n" + ASSERT
    )
    assert d.cause_id == "index_select_out_of_range"
    assert d.basis == "the error text (added_tokens_in_paste)"


def test_generate_and_the_tokenizer_warning_that_the_length_will_pass_the_maximum_name_positions() -> None:
    d = _first(
        "This is a friendly reminder - the current text generation call will exceed the model's predefined "
        "maximum length (1024). Depending on the model, you may observe exceptions, performance degradation, "
        "or nothing at all.\n" + LOOKUP_LINE + ASSERT
    )
    assert d.cause_id == "position_ids_out_of_range"
    assert d.basis == "the error text (generation_length_warning)" and "(1024)" in (d.likely_fix or "")
    no_max = _first(
        "Asking to truncate to max_length but no maximum length is provided and the model has no "
        "predefined maximum length. Default to no truncation.\nIndexError: index out of range in self\n"
    )
    assert no_max.cause_id == "position_ids_out_of_range"
    assert "names a size" not in (no_max.specific or "")


def test_sentence_transformers_encode_ranks_positions_first_with_max_seq_length() -> None:
    text = (
        '  File "/home/u/env/lib/python3.11/site-packages/sentence_transformers/SentenceTransformer.py", '
        "line 512, in encode\n    out_features = self.forward(features)\n"
        "IndexError: index out of range in self\n"
    )
    d = _first(text)
    assert d.cause_id == "position_ids_out_of_range"
    assert "max_seq_length" in (d.likely_fix or "")
    assert "position ids" in d.candidates[1] and "token ids" in d.candidates[2]


def test_a_paste_of_the_length_warning_alone_is_read_as_the_failure_it_foretells() -> None:
    from cudaassert_ipy.logs.explain import explain_text

    alone = (
        "Token indices sequence length is longer than the specified maximum sequence length for this model "
        "(4411 > 4096). Running this sequence through the model will result in indexing errors\n"
    )
    d = _first(alone)
    assert d.cause_id == "position_ids_out_of_range"
    assert d.exception_line.startswith("none in the text") and "foretells" in d.notes[0]
    assert "(4096)" in (d.likely_fix or "") and "truncation=True" in (d.likely_fix or "")
    generated = _first(
        "2025-03-02 10:11:12 WARNING This is a friendly reminder - the current text generation call will exceed "
        "the model's predefined maximum length (2048). Depending on the model, you may observe exceptions, "
        "performance degradation, or nothing at all.\n"
    )
    assert generated.cause_id == "position_ids_out_of_range" and "(2048)" in (generated.likely_fix or "")
    # a traceback cut before its error line, whose frames say nothing: the warning still speaks
    cut = _first(
        alone
        + 'Traceback (most recent call last):\n  File "/srv/app/serve.py", line 40, in handle\n    out = run(req)\n'
    )
    assert cut.cause_id == "position_ids_out_of_range"
    # a text with no error and no such warning says nothing; a warning that foretells nothing neither
    assert not explain_text("epoch 3 loss 0.41\nSpecial tokens have been added in the vocabulary\n").found


def test_a_bare_assert_ranks_its_likely_causes_in_the_words_of_their_knobs() -> None:
    for text in (ASSERT, "CUDA error: device-side assert triggered\nCompile with `TORCH_USE_CUDA_DSA`\n"):
        d = _first(text)
        assert d.cause_id == "unknown_kernel_assert"
        labels, ids = d.candidates[1], d.candidates[2]
        assert "num_labels" in labels and "num_classes" in labels and "out_features" in labels
        assert "resize_token_embeddings(len(tokenizer))" in ids and "another tokenizer" in ids


def test_cublas_failing_to_create_its_handle_beside_the_assert_ranks_the_lookup_first() -> None:
    linear = (
        "/opt/conda/lib/python3.7/site-packages/torch/nn/functional.py in linear(input, weight, bias)\n"
        "-> 1676         output = input.matmul(weight.t())\n\n"
    )
    for cublas in (
        "RuntimeError: cublas runtime error : resource allocation failed at /opt/THC/THCGeneral.cpp:250\n",
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`\n",
    ):
        d = _first("CUDA error: device-side assert triggered\n\n" + linear + cublas)
        assert d.cause_id == "index_select_out_of_range", cublas
        assert d.basis == "the error text (cublas_handle_in_paste)"
        assert "first linear layer" in (d.specific or "") and "resize_token_embeddings" in (d.likely_fix or "")
        assert d.candidates[0].startswith("The frames or the error point to this cause but do not prove it")
        assert "token ids" in d.candidates[1] and "in backward" in d.candidates[2] and "position ids" in d.candidates[3]
        assert d.headline.endswith("likely index out of range in an embedding or index_select")
    # a cuBLAS call that failed to run (not to start) says nothing about which kernel failed before it
    gemm = _first(
        "CUDA error: device-side assert triggered\n\n" + linear + "RuntimeError: cublas runtime error : the GPU "
        "program failed to execute at /opt/torch/aten/src/THC/THCBlas.cu:331\n"
    )
    assert gemm.cause_id != "index_select_out_of_range"


def test_a_size_in_the_error_that_a_printed_config_also_names_says_which_table() -> None:
    config = 'OPTConfig {\n  "max_position_embeddings": 2048,\n  "vocab_size": 50272\n}\n'
    d = _first(config + "IndexError: index 2050 is out of bounds for dimension 0 with size 2048\n")
    assert d.cause_id == "position_ids_out_of_range"
    assert d.basis == "the error text (printed_position_bound)" and "(2048)" in (d.likely_fix or "")
    args = _first(
        "Namespace(block_size=256, lr=0.0003)\nIndexError: index 256 is out of bounds for dimension 1 with size 256\n"
    )
    assert args.cause_id == "position_ids_out_of_range"
    vocab = _first(config + "IndexError: index 50272 is out of bounds for dimension 0 with size 50272\n")
    assert vocab.cause_id == "index_select_out_of_range" and "(50272)" in (vocab.likely_fix or "")
    # a size no printed bound names decides nothing
    other = _first(config + "IndexError: index 2050 is out of bounds for dimension 0 with size 1500\n")
    assert other.cause_id == "advanced_indexing_out_of_range_v1"


def test_a_label_check_in_a_log_that_prints_num_labels_is_fixed_in_those_words() -> None:
    config = (
        'DistilBertConfig {\n  "id2label": {\n    "0": "NEG",\n    "1": "NEU",\n    "2": "POS"\n  },\n'
        '  "num_labels": 3,\n  "vocab_size": 30522\n}\n'
    )
    d = _first(config + NLL_LINE + ASSERT)
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert "num_labels=3, id2label with 3 entries" in (d.specific or "")
    assert "from_pretrained(..., num_labels=" in (d.likely_fix or "") and "id2label" in (d.likely_fix or "")
    logged = _first("INFO - train - Namespace(lr=2e-05, num_labels=7)\nIndexError: Target 7 is out of bounds.\n")
    assert logged.cause_id == "nll_loss_target_out_of_range"
    assert "label 7" in (logged.specific or "") and "num_labels=7" in (logged.specific or "")
    # with no label settings printed, or a plain script's own count, the kernel line's own words stand
    for text in (NLL_LINE + ASSERT, "number of labels: 7\n" + NLL_LINE + ASSERT):
        assert "num_labels=" not in (_first(text).specific or "")


def test_a_learned_positional_embedding_or_a_lookup_of_the_positions_names_positions() -> None:
    for code in (
        "x = self.positional_embedding(steps) + x",
        "h = self.embedding(positions)",
        "pos = self.embeddings(position_ids, offset)",
    ):
        d = _first(f'  File "/srv/s2s/modules.py", line 51, in forward\n    {code}\n' + ASSERT)
        assert d.cause_id == "position_ids_out_of_range", code
    # a sinusoidal encoder slices its table (no lookup): the failure only surfaced there
    for code in ("src = self.pos_encoder(src)", "x = self.embedding(src)"):
        d = _first(f'  File "/srv/s2s/modules.py", line 51, in forward\n    {code}\n' + ASSERT)
        assert d.cause_id != "position_ids_out_of_range", code


def test_a_position_sized_dimension_in_a_language_models_paste_ranks_positions_first() -> None:
    d = _first(
        'enc = tokenizer(docs, return_tensors="pt")\nout = model(**enc)\n'
        "IndexError: index 4100 is out of bounds for dimension 0 with size 4096\n"
    )
    assert d.cause_id == "position_ids_out_of_range"
    assert d.basis == "the error text (position_sized_dimension)"
    assert "position ids" in d.candidates[1] and "token ids" in d.candidates[2]
    framed = _first(
        '  File "/env/site-packages/transformers/models/opt/modeling_opt.py", line 120, in forward\n'
        "    picked = cache.gather(0, idx)\n"
        "RuntimeError: index 2050 is out of bounds for dimension 0 with size 2048\n"
    )
    assert framed.cause_id == "position_ids_out_of_range"
    # the same size with nothing of a language model around it decides nothing
    image = _first("mask = masks[i]\nIndexError: index 512 is out of bounds for dimension 0 with size 512\n")
    assert image.cause_id == "advanced_indexing_out_of_range_v1"


def test_the_resize_warning_and_the_slow_tokenizers_adding_line_name_token_ids() -> None:
    resized = _first(
        "You are resizing the embedding layer without providing a `pad_to_multiple_of` parameter. This means that "
        "the new embedding dimension will be 49155. This might induce some performance reduction as *Tensor Cores* "
        "will not be available.\n" + LOOKUP_LINE + ASSERT
    )
    assert resized.cause_id == "index_select_out_of_range"
    assert resized.basis == "the error text (resized_embeddings_log)" and "(49155)" in (resized.likely_fix or "")
    added = _first("03/04/2021 11:02:13 - INFO - tokenization_utils -   Adding [ENT] to the vocabulary\n" + ASSERT)
    assert added.cause_id == "index_select_out_of_range"
    assert added.basis == "the error text (added_tokens_in_paste)"


def test_the_old_cpu_lookup_error_that_names_only_ths_file_is_a_lookup() -> None:
    for text in (
        "RuntimeError: index out of range at /pytorch/aten/src/TH/generic/THTensorEvenMoreMath.cpp:193\n",
        "RuntimeError: index out of range at ..\\aten\\src\\TH\\generic\\THTensorEvenMoreMath.cpp:237\n",
    ):
        d = _first(text)
        assert d.cause_id == "index_select_out_of_range", text
        assert "token ids" in d.candidates[1] and "position ids" in d.candidates[2]
    # Python's own sequences say "index out of range" too, with no TH file: not a lookup
    assert match_cpu_twin(("IndexError",), "index out of range") is None


def test_a_serving_engines_traceback_ranks_prompt_ids_and_positions_not_labels() -> None:
    d = _first(
        '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 1450, in run_batch\n'
        "    logits_output, next_token_ids = self.tp_worker.forward_batch_generation(batch)\n" + ASSERT
    )
    assert d.cause_id == "unknown_kernel_assert"
    assert "prompt token ids" in d.candidates[1] and "max_model_len" in d.candidates[2]
    assert not any("class labels" in c for c in d.candidates)
    # a training traceback keeps the labels first
    trained = _first('  File "/srv/train.py", line 88, in step\n    out = net(batch)\n' + ASSERT)
    assert "labels" in trained.candidates[1]


def test_a_learned_position_table_that_forwards_its_positions_names_positions() -> None:
    for code in ("return super().forward(positions + self.offset)", "return F.embedding(positions, self.weight)"):
        d = _first(f'  File "/env/site-packages/s2s/modules/positions.py", line 51, in forward\n    {code}\n' + ASSERT)
        assert d.cause_id == "position_ids_out_of_range", code
    ids = _first(
        '  File "/env/site-packages/s2s/modules/emb.py", line 9, in forward\n    return super().forward(ids)\n' + ASSERT
    )
    assert ids.cause_id != "position_ids_out_of_range"


def test_an_image_token_whose_index_is_the_vocabulary_size_names_token_ids() -> None:
    config = (
        '{\n  "ignore_index": -100,\n  "image_token_index": 64000,\n  "text_config": {\n    "vocab_size": 64000\n'
        "  }\n}\n"
    )
    d = _first(config + ASSERT)
    assert d.cause_id == "index_select_out_of_range"
    assert d.basis == "the error text (special_token_id_is_vocab_size)"
    inside = _first(config.replace('"image_token_index": 64000', '"image_token_index": 63999') + ASSERT)
    assert inside.cause_id != "index_select_out_of_range"


def test_pasted_code_that_resizes_the_token_embeddings_names_token_ids() -> None:
    d = _first(
        "model.resize_token_embeddings(len(tokenizer))\nmodel = get_peft_model(model, cfg)\n" + LOOKUP_LINE + ASSERT
    )
    assert d.cause_id == "index_select_out_of_range"
    assert d.basis == "the error text (resized_embeddings_log)" and "resize did not reach it" in (d.specific or "")
    assert "names a size" not in (d.specific or "")


def test_a_training_entry_point_ranks_labels_then_ids_and_names_the_labels() -> None:
    from helpers.pastes import trace

    for code in ("trainer.train()", "clf.train_model(train_df)", "model.fit(x_train, y_train, epochs=3)"):
        d = _first(trace(("/home/me/nlp/run.py", 77, "main", code)))
        assert d.cause_id == "nll_loss_target_out_of_range", code
        assert d.basis == f"a code line: run.py:77 (`{code}`), ranked, not decided"
        assert "num_labels" in d.candidates[1] and "num_embeddings" in d.candidates[2]
    # switching a module to training mode runs nothing
    mode = _first(trace(("/home/me/nlp/run.py", 12, "main", "model.train()")))
    assert mode.cause_id == "unknown_kernel_assert"


def test_a_pipelines_frame_ranks_positions_first_unless_a_deeper_frame_names_the_table() -> None:
    from helpers.pastes import trace

    pipe = (
        "/env/lib/python3.10/site-packages/transformers/pipelines/base.py",
        1102,
        "forward",
        "out = self._forward(x)",
    )
    d = _first(trace(("/srv/app/handler.py", 30, "score", "res = [clf(t) for t in batch]"), pipe))
    assert d.cause_id == "position_ids_out_of_range"
    assert d.basis == "a frame: base.py:1102 in forward"
    assert "position ids" in d.candidates[1] and "token ids" in d.candidates[2]
    words = (
        "/env/lib/python3.10/site-packages/transformers/models/bert/modeling_bert.py",
        210,
        "forward",
        "inputs_embeds = self.word_embeddings(input_ids)",
    )
    assert _first(trace(pipe, words)).cause_id == "index_select_out_of_range"


EMBEDDING_FRAMES = (
    ("/env/lib/python3.11/site-packages/torch/nn/modules/sparse.py", 190, "forward", "return F.embedding("),
    (
        "/env/lib/python3.11/site-packages/torch/nn/functional.py",
        2551,
        "embedding",
        "return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)",
    ),
)


def test_a_lookup_inside_a_web_server_or_a_pipeline_ranks_positions_first() -> None:
    from helpers.pastes import trace

    served = trace(
        (
            "/env/lib/python3.11/site-packages/uvicorn/protocols/http/h11_impl.py",
            403,
            "run_asgi",
            "result = await app(",
        ),
        ("/srv/api/main.py", 58, "chat", "reply = bot.answer(req.prompt)"),
        *EMBEDDING_FRAMES,
    )
    d = _first(served)
    assert d.cause_id == "position_ids_out_of_range"
    assert d.basis == "a frame: functional.py:2551 in embedding" and "web server" in (d.specific or "")
    assert "position ids" in d.candidates[1] and "token ids" in d.candidates[2]
    asgi = _first("ERROR:    Exception in ASGI application\n" + trace(*EMBEDDING_FRAMES))
    assert asgi.cause_id == "position_ids_out_of_range"
    piped = trace(
        ("/env/lib/python3.11/site-packages/transformers/pipelines/base.py", 1102, "forward", "out = self._forward(x)"),
        *EMBEDDING_FRAMES,
    )
    assert _first(piped).cause_id == "position_ids_out_of_range"
    # the same lookup in a training script keeps token ids first
    trained = _first(trace(("/home/me/train.py", 40, "step", "out = net(batch)"), *EMBEDDING_FRAMES))
    assert trained.cause_id == "index_select_out_of_range" and "token ids" in trained.candidates[1]


def test_a_lookup_in_a_paste_that_feeds_word_boxes_ranks_the_box_coordinates_first() -> None:
    d = _first(
        "RuntimeError: index out of range: Tried to access index 1207 out of table with 1023 rows. at "
        "/pytorch/aten/src/TH/generic/THTensorEvenMoreMath.cpp:191\n"
        "print(batch['bbox'].max())\ntensor(1207)\n"
    )
    assert d.cause_id == "index_select_out_of_range"
    assert d.basis == "the error text (layout_boxes_in_paste)"
    assert "0..1000" in (d.likely_fix or "") and "y0 <= y1" in (d.likely_fix or "")
    assert "bbox coordinates" in d.candidates[1] and "position ids" in d.candidates[2]
    called = _first(
        "--> 90 layout_out = self.layout_embeddings(bbox=boxes, position_ids=pos)\n"
        "IndexError: index out of range in self\n"
    )
    assert called.cause_id == "index_select_out_of_range" and "bbox coordinates" in called.candidates[1]
    # a table of the size of a position embedding beside the boxes: the positions, not the boxes
    long = _first(
        "out = model(input_ids=ids, bbox=boxes)\nIndexError: index 515 is out of bounds for dimension 0 with size 514\n"
    )
    assert long.cause_id == "position_ids_out_of_range"
    # a detector's boxes are not a layout model's: no lookup, no such reading
    for code in ("loss = crit(pred_bbox[i], gt)", "loss = head(bbox[keep], gt)"):
        det = _first(code + "\nIndexError: index 7 is out of bounds for dimension 1 with size 4\n")
        assert det.cause_id == "advanced_indexing_out_of_range_v1"
        assert "bbox coordinates" not in " ".join(det.candidates)


def test_a_tokenizers_placeholder_max_length_foretells_positions_past_the_table() -> None:
    d = _first(">>> tok.model_max_length\n1000000000000000019884624838656\n")
    assert d.cause_id == "position_ids_out_of_range"
    assert "model_max_length" in (d.likely_fix or "") and "truncation=True" in (d.likely_fix or "")
    with_error = _first("max_seq_len = 1000000000000000019884624838656\n" + LOOKUP_LINE + ASSERT)
    assert with_error.cause_id == "position_ids_out_of_range"
    assert with_error.basis == "the error text (tokenizer_without_max_length)"
    # another large number is no tokenizer's placeholder
    from cudaassert_ipy.logs.explain import explain_text

    assert not explain_text("steps 1000000000000000019884624838657\n").found


def test_an_old_lookup_error_of_a_table_one_row_past_a_power_of_two_is_a_position_table() -> None:
    d = _first("index out of range: Tried to access index 1025 out of table with 1024 rows.\n")
    assert d.cause_id == "position_ids_out_of_range"
    vocab = _first("index out of range: Tried to access index 30600 out of table with 30521 rows.\n")
    assert vocab.cause_id == "index_select_out_of_range"


def test_torchs_own_embedding_line_left_in_a_paste_without_its_frame_names_a_lookup() -> None:
    d = _first(
        "    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)\n"
        "RuntimeError: CUDA error: device-side assert triggered\n"
        "Epoch 2:  31%|███       | 88/284 [00:14<00:31,  6.2it/s]\n"
    )
    assert d.cause_id == "index_select_out_of_range"
    assert d.basis == "the error text (embedding_line_in_paste)"
    assert "token ids" in d.candidates[1] and "position ids" in d.candidates[2]
    notebook = _first(
        "-> 2233 return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)\n"
        "RuntimeError: CUDA error: device-side assert triggered\n"
    )
    assert notebook.cause_id == "index_select_out_of_range"
    # a kernel line that names another check stands; the line alone, called by the user, is no torch line
    label = _first(
        "    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)\n" + NLL_LINE + ASSERT
    )
    assert label.cause_id == "nll_loss_target_out_of_range"
    own = _first("emb = my_embedding(weights, ids)\nRuntimeError: CUDA error: device-side assert triggered\n")
    assert own.cause_id != "index_select_out_of_range"


def test_token_type_ids_built_by_hand_with_a_second_segment_rank_the_type_table_first() -> None:
    d = _first(
        ">>> segs = torch.tensor([[0, 0, 0, 0, 1, 1, 1]])\n"
        ">>> token_type_ids = torch.tensor([[0, 0, 0, 0, 1, 1, 1]])\n"
        ">>> out = encoder(ids, token_type_ids=token_type_ids)\n" + LOOKUP_LINE + ASSERT
    )
    assert d.cause_id == "token_type_ids_out_of_range"
    assert d.basis == "the error text (hand_made_token_type_ids)"
    assert "type_vocab_size" in (d.likely_fix or "") and "token_type_ids" in d.candidates[1]
    named = _first("token_type_ids = torch.ones_like(input_ids)\nIndexError: index out of range in self\n")
    assert named.cause_id == "token_type_ids_out_of_range"
    # a traceback cut before its error line: the hand-made ids still speak
    cut = _first(
        ">>> token_type_ids = torch.tensor([[0, 0, 1, 1]])\n>>> out = model(ids, token_type_ids=token_type_ids)\n"
        'Traceback (most recent call last):\n  File "<stdin>", line 1, in <module>\n'
    )
    assert cut.cause_id == "token_type_ids_out_of_range"
    # all zeros is the one segment every model has: nothing to say about the type table
    zeros = _first("token_type_ids = torch.tensor([[0, 0, 0, 0]])\nIndexError: index out of range in self\n")
    assert zeros.cause_id == "index_select_out_of_range"


def test_a_line_that_looks_the_word_boxes_up_names_the_box_coordinates() -> None:
    framed = _first(
        '  File "/srv/docai/lib/python3.11/site-packages/docmodels/embeddings.py", line 77, in forward\n'
        "    upper = self.y_position_embeddings(bbox[:, :, 1])\n"
        "IndexError: index out of range in self\n"
    )
    assert framed.cause_id == "index_select_out_of_range"
    assert framed.basis.startswith("a frame: embeddings.py:77")
    assert "0..1000" in (framed.likely_fix or "") and "bbox coordinates" in framed.candidates[1]
    # a notebook paste that starts inside the model's forward and is cut before its error line
    cut = _first(
        "    402 emb, pos = self.embeddings(input_ids=input_ids)\n"
        "--> 404 spatial = self._calc_spatial_position_embeddings(bbox)\n"
        "    406 enc = self.encoder(emb + spatial)\n\n"
        "File ~/venvs/doc/lib/python3.11/site-packages/torch/nn/modules/module.py:1518, in Module._call_impl(self, "
        "*args, **kwargs)\n"
        "-> 1518 return forward_call(*args, **kwargs)\n"
    )
    assert cut.cause_id == "index_select_out_of_range" and "bbox coordinates" in cut.candidates[1]
    # the box tensor named without a lookup of it is no such line
    other = _first("    boxes = model.heads(bbox)\nIndexError: index out of range in self\n")
    assert "bbox coordinates" not in " ".join(other.candidates)


def test_a_triton_kernel_reporting_the_assert_ranks_the_lookup_before_it_first() -> None:
    d = _first(
        '  File "/opt/env/site-packages/liger/ops/rms_norm.py", line 212, in forward\n'
        "    _rms_norm_fwd_kernel[(n_rows,)](Y, X, W, eps)\n"
        "RuntimeError: Triton Error [CUDA]: device-side assert triggered\n"
    )
    assert d.cause_id == "index_select_out_of_range"
    assert "vocab_size" in (d.likely_fix or "") and "token ids" in d.candidates[1] and "labels" in d.candidates[2]
    alone = _first("Triton Error [CUDA]: device-side assert triggered\n")
    assert alone.cause_id == "index_select_out_of_range"
    # a kernel line that names its check stands; another Triton error is no assert
    assert _first(NLL_LINE + "RuntimeError: Triton Error [CUDA]: device-side assert triggered\n").cause_id == (
        "nll_loss_target_out_of_range"
    )
    from cudaassert_ipy.logs.explain import explain_text

    other = explain_text("RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered\n")
    assert all(d.cause_id != "index_select_out_of_range" for g in other.groups for d in g.diagnoses)
    # the same assert reported by PyTorch's own check, with nothing around it, ranks by how common causes are
    assert _first("RuntimeError: CUDA error: device-side assert triggered\n").cause_id != "index_select_out_of_range"


def test_a_lookup_that_nothing_names_lists_the_segment_table_last() -> None:
    for text in ("IndexError: index out of range in self\n", LOOKUP_LINE + ASSERT):
        d = _first(text)
        assert d.cause_id == "index_select_out_of_range"
        assert "token ids" in d.candidates[1] and "type_vocab_size 1" in d.candidates[-1]
    # a position table named by the text ranks positions and token ids only
    named = _first(WARNING + "IndexError: index out of range in self\n")
    assert not any("type_vocab_size" in c for c in named.candidates)
