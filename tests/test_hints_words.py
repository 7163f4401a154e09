"""What each fix must say, stated here rather than read back from the code under test.

Other tests check that a template reaches the user for the right input; this one pins the words of each
template and of each catalogued cause: the words a user needs (``nearest``, ``BCEWithLogitsLoss``,
``ignore_index=255``, ...) and the opposite advice a fix must never give. Every template in
``diagnose/hints.py`` and every cause of the catalogue (``device_asserts.json`` + ``causes/texts.py``) must have
a row: a new one without a row fails, so its wording is decided in a review, not re-approved by regenerating
the docs table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import pytest

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes import GENERIC_ID, all_causes, get_cause
from cudaassert_ipy.diagnose.causes.texts import EXTRA_TEXTS, FOLLOW_ON, NO_LINE, ROCM_NO_LINE, STICKY_TEXTS, Text


class Words(NamedTuple):
    must: tuple[str, ...]
    must_not: tuple[str, ...] = ()


def says(*must: str, never: tuple[str, ...] = ()) -> Words:
    return Words(must, never)


# ------------------------------------------------------------------ every template of diagnose/hints.py
# (the raw template: {fields} are part of the words; dict entries are named NAME[key])
HINT_WORDS: dict[str, Words] = {
    "VOC_VOID": says("255", "void", "ignore_index=255", never=("nearest", "out_features", "remap")),
    "DECLARED[dataset]": says("dataset lists {declared} classes"),
    "DECLARED[config]": says("num_labels={declared}"),
    "DECLARED_CLASSES": says(
        "{declared_text}", "model outputs {n_classes}", "out_features={declared}", never=("subtract 1", "remap")
    ),
    "ONE_MORE_CLASS": says("{more} classes", "out_features={more}", "subtract 1", never=("remap", "ignore_index")),
    "REMAP_LABELS": says(
        "remap the labels to 0..{last}",
        "return_inverse=True",
        "out_features={more}",
        never=("subtract 1", "ignore_index"),
    ),
    "NEAREST_RESIZE": says(
        "with nearest-neighbour interpolation",
        "label masks",
        never=("with bilinear", "bilinear interpolation", "nearest invents"),
    ),
    "PADDING_LABEL": says("ignore_index={value}", "padding", never=("cannot be negative",)),
    "NEGATIVE_LABELS": says("cannot be negative", never=("ignore_index", "out_features")),
    "NOT_INTEGER_LABELS": says("whole class ids", "fractions", "NaN", never=("out_features",)),
    "TOKENIZER_RESIZE": says(
        "{tokenizer_size} tokens",
        "{num} rows",
        "resize_token_embeddings(len(tokenizer))",
        never=("truncate", "ignore_index"),
    ),
    "CONFIG_VOCAB": says(
        "vocab_size={vocab}",
        "different checkpoints",
        "resize_token_embeddings(len(tokenizer))",
        never=("ignore_index",),
    ),
    "EMBEDDING_TOO_BIG": says(
        "num_embeddings={num}",
        "0..{last}",
        "num_embeddings={more}",
        "resize_token_embeddings(len(tokenizer))",
        "truncate",
        never=("ignore_index",),
    ),
    "EMBEDDING_MINUS_100": says("-100", "pad_token_id", never=("pass ignore_index", "num_embeddings=")),
    "EMBEDDING_NEGATIVE": says("cannot be negative", "padding_idx", never=("ignore_index",)),
    "BCE_LOGITS": says(
        "probabilities in [0, 1]",
        "BCEWithLogitsLoss",
        "binary_cross_entropy_with_logits",
        "torch.sigmoid",
        never=("CrossEntropyLoss", "learning rate", "255"),
    ),
    "BCE_NAN_INPUT": says(
        "NaN",
        "lower the learning rate",
        "clip gradients",
        "torch.isfinite",
        never=("BCEWithLogitsLoss", "sigmoid", "labels"),
    ),
    "BCE_MASK_PIXELS": says("0..255", "divide by 255", "(mask > 0).float()", never=("CrossEntropyLoss", "sigmoid")),
    "BCE_MULTICLASS": says("more than two classes", "CrossEntropyLoss", never=("255", "sigmoid", "BCEWithLogits")),
    "BCE_NEGATIVE_TARGETS": says("cannot be negative", "weight", never=("CrossEntropyLoss", "sigmoid")),
    "BCE_SCALE_TARGETS": says("scale the targets into [0, 1]", never=("CrossEntropyLoss", "sigmoid")),
    "BCE_NAN_TARGET": says(
        "target holds NaN", "labels", never=("learning rate", "gradients", "logits", "sigmoid", "input")
    ),
    "CTC_BLANK": says("blank label {blank}", "shift 0-based labels by one", never=("ignore_index",)),
    "CTC_TOO_BIG": says("C={n_classes}", "{top}", "plus one for blank", never=("ignore_index",)),
    "CTC_NEGATIVE": says("target_lengths", "beyond each target length"),
    "CTC_CPU_SILENT": says("CPU", "does not check", "wrong loss"),
    "OFFSETS": says("start position of each bag", "torch.cumsum", "starting at 0"),
    "INDEX_TOO_BIG": says("{where}", "index reaches {top}", "0-based", "largest valid one is {last}"),
    "INDEX_NO_NEGATIVES": says("does not accept negative indices", "idx % size"),
    "INDEX_NEGATIVE_FLOOR": says("negative indices count from the end", "{lowest}"),
    "PROBS_NONFINITE": says(
        "NaN/inf", "torch.isfinite(logits).all()", "float32", "argmax", never=("softmax(logits)), not raw logits",)
    ),
    "PROBS_NEGATIVE": says("cannot be negative", "softmax(logits)", never=("sigmoid", "argmax")),
    "PROBS_ZERO_ROWS": says(
        "all-zero weights", "at least one candidate per row", "epsilon", "argmax", never=("softmax(logits)",)
    ),
    "BERNOULLI_RANGE": says("probabilities in [0, 1]", "torch.sigmoid", "clamp(0, 1)", never=("softmax",)),
    "BERNOULLI_NAN": says("p holds NaN", "torch.isfinite", never=("sigmoid", "clamp")),
    "ONE_HOT_NEGATIVE": says("negative labels", "clamp(min=0)", "(t >= 0)", never=("num_classes=",)),
    "ONE_HOT_TOO_BIG": says("num_classes={num_classes}", "num_classes={more}", "0..{last}", "subtract 1"),
    "REPEATS_NEGATIVE": says("cannot be negative", "clamp(min=0)", never=("output_size",)),
    "OUTPUT_SIZE": says("output_size={required}", "leave it out", never=("clamp",)),
    "INTERNAL_CHECK": says(
        "{op} on the CPU",
        "compute-sanitizer",
        "report it to {name} ({url})",
        "{line}",
        never=("labels", "ignore_index", "tokenizer", "learning rate"),
    ),
    "UINT8_LABELS": says("uint8", "labels.long()", "ignore_index", never=("out_features",)),
    "GRAPH_POOLED": says("global_add_pool", "after the last conv", "edge_index", never=("relabel_nodes",)),
    "INT16_WRAPPED": says("{value}", "{wrapped}", "int16", "int64", "torch.long"),
    "SAMPLING_SUM_INF": says("normalize", "finite", "inf", never=("temperature=0",)),
    "SCATTER_TOO_BIG": says(
        "`{name}` reaches {top}", "`{rows_of}` has {rows} rows", "0..{last}", "index.max() + 1", never=("negative",)
    ),
    "SCATTER_NEGATIVE": says("negative values (down to {low})", "do not wrap", "mask", never=("index.max()",)),
    "ASYNC_INDEX_PUT": says("min and max", "-size..size-1", "index_put_", never=("ctc_loss",)),
    "ASYNC_CTC": says(
        "ctc_loss", "input_lengths <= log_probs.size(0)", "target length <= its input length", never=("index_put_",)
    ),
    "ASYNC_OWN": says("your own torch._assert_async", never=("index_put_", "ctc_loss")),
    "SPARSE_ON_CPU": says("on the CPU", "{call}", ".cpu()"),
    "GENERIC_CLASS_WORDS[output]": says("last layer output {n} logits", "out_features={n}"),
    "GENERIC_CLASS_WORDS[set]": says("out_features={n}"),
    "HEAD_WORDS[transformers]": says(
        "from_pretrained(", "num_labels={n}", "ignore_mismatched_sizes=True", "id2label/label2id"
    ),
    "HEAD_WORDS[lightning]": says("`{owner}`", "{setting}={n}", "hparams.{setting}={now}"),
    "HEAD_WORDS[timm]": says("timm.create_model(", "num_classes={n}"),
    "HEAD_WORDS[fastai]": says("DataBlock", "all {n} classes", "vocab", "codes", "dls.c is {now}"),
    "HEAD_WORDS[fastai_model]": says("{n} outputs", "{owner} outputs {now}", "n_out={n}"),
    "HEAD_WORDS[ultralytics]": says("nc: {n}", "data YAML", "{n} names"),
    "HEAD_WORDS[keras]": says(
        "Dense({n})",
    ),
    "FRAMEWORK_ADVICE[keras_filtered]": says("keras.config.disable_traceback_filtering()"),
    "CLASS_TEMPLATES_AS[ONE_MORE_CLASS]": says(
        "{more} classes", "{set_classes}", "subtract 1", never=("remap", "out_features")
    ),
    "CLASS_TEMPLATES_AS[REMAP_LABELS]": says(
        "remap the labels to 0..{last}", "{set_classes}", never=("subtract 1", "out_features")
    ),
    "CLASS_TEMPLATES_AS[DECLARED_CLASSES]": says("{declared_text}", "{set_classes}", never=("out_features",)),
    # a label error's own value, with no host facts (a paste, a log)
    "LABEL_255": says(
        "void", "ignore_index=255", "mask // 255", "nearest-neighbour", never=("bilinear interpolation",)
    ),
    "LABEL_MASK_PIXELS": says("{value}", "mask", "class index", never=("ignore_index", "out_features")),
    "LABEL_TOO_BIG": says("{value}", "at least {more} classes", "num_classes", "subtract 1", never=("ignore_index",)),
    "LABEL_NEGATIVE": says("ignore_index={value}", "-100", "padding", never=("cannot be negative", "num_classes")),
    # an index checked against a named size (rule_sizes) and YOLO's class id
    "YOLO_CLASS_ID": says("data YAML", "nc: {more}", "{more} names", "label file", "0..{last}"),
    "SIZED_INDEX[class id]": says("0..{last}", "{more} classes"),
    "SIZED_INDEX[position]": says("truncate", "{size} tokens", "max_position_embeddings", never=("resize",)),
    "SIZED_INDEX[token type id]": says("token_type_ids", "{size}", "type_vocab_size", never=("truncate",)),
    "SIZED_INDEX[node id]": says("0..{last}", "renumber", "num_nodes"),
    "SIZED_INDEX[token id]": says("below {size}", "resize the embeddings", never=("truncate",)),
    # failure points read from a traceback's frames, in the words of the framework the frame is in
    "FRAME_FIXES[truncate]": says("truncat", "max_length", "max_position_embeddings", never=("resize_token",)),
    "FRAME_FIXES[token_type]": says("type_vocab_size", "return_token_type_ids=False", never=("truncat",)),
    "FRAME_FIXES[token_ids]": says(
        "resize_token_embeddings(len(tokenizer))", "same checkpoint", "pad_token_id", never=("truncat", "ignore_index")
    ),
    "FRAME_FIXES[positions]": says(
        "truncat", "max_length", "max_position_embeddings", "context", never=("resize_token",)
    ),
    "FRAME_FIXES[st_max_seq_length]": says("max_seq_length", "max_position_embeddings", never=("resize_token",)),
    "FRAME_FIXES[resized_vocab]": says("resize", "ZeRO-3", "output head", "tokenizer", never=("truncat",)),
    "FRAME_FIXES[hf_num_labels]": says("num_labels=", "ignore_mismatched_sizes=True", "id2label", "-100"),
    "FRAME_FIXES[hf_lm_labels]": says(
        "vocab_size", "-100", "DataCollatorForLanguageModeling", "resize_token_embeddings", never=("num_labels",)
    ),
    "FRAME_FIXES[hf_token_labels]": says("num_labels", "-100", "word_ids()"),
    "FRAME_FIXES[generation_probs]": says("NaN", "bfloat16", "temperature", "do_sample=False", never=("num_labels",)),
    "FRAME_FIXES[detection_nc]": says("0..nc-1", "nc:", "data YAML", "label files"),
    "FRAME_FIXES[torchvision_background]": says("background", "num_classes", "+ 1", never=("nc:",)),
    "FRAME_FIXES[mmdet_num_classes]": says("num_classes", "bbox_head", "metainfo", "without the background"),
    "FRAME_FIXES[detectron2_num_classes]": says("cfg.MODEL.ROI_HEADS.NUM_CLASSES", "contiguous"),
    "FRAME_FIXES[detr_num_classes]": says("num_classes", "no-object", "largest category id"),
    "FRAME_FIXES[yolo_num_classes]": says(
        "0..num_classes-1",
        "classes=",
        "filters=(classes + 5) * anchors",
        "one-hot",
        "label files",
        never=("background",),
    ),
    "FRAME_FIXES[detection_num_classes]": says("num_classes", "contiguous 0-based", "background", never=("nc:",)),
    "FRAME_FIXES[ssd_zero_based]": says("0-based", "background", "+ 1", never=("1..num_classes-1",)),
    "FRAME_FIXES[maskrcnn_benchmark_num_classes]": says(
        "MODEL.ROI_BOX_HEAD.NUM_CLASSES", "+ 1", "background", "contiguous"
    ),
    "FRAME_FIXES[yolo_box_coords]": says(
        "normalised to [0, 1]", "grid", "label files", "clamp", never=("num_classes", "nc:")
    ),
    "FRAME_FIXES[mmseg_labels]": says("num_classes", "decode_head", "255", "ignore_index", "reduce_zero_label"),
    "FRAME_FIXES[cityscapes_train_ids]": says(
        "labelIds", "labelTrainIds", "trainIds", "ignore_index=255", never=("out_features",)
    ),
    "FRAME_FIXES[monai_labels]": says("0..out_channels-1", "out_channels", "num_classes", never=("ignore_index",)),
    "FRAME_FIXES[pyg_nodes]": says("edge_index", "num_nodes", "relabel_nodes=True", "validate()", "cached=True"),
    "FRAME_FIXES[dgl_nodes]": says("num_nodes", "g.num_nodes()"),
    # what to check for each cause a user's code line ranks when nothing decides (diagnose/code_lines.py)
    "CODE_CHECKS[labels]": says("0..C-1", "labels.min()", "out_features", "ignore_index=", never=("truncat",)),
    "CODE_CHECKS[bce]": says("[0, 1]", "torch.sigmoid", "BCEWithLogitsLoss", never=("CrossEntropyLoss",)),
    "CODE_CHECKS[one_hot]": says("0..num_classes-1", "one_hot", "255"),
    "CODE_CHECKS[probs]": says("NaN", "torch.isfinite(probs).all()", "sums to 0", "temperature"),
    "CODE_CHECKS[gather_range]": says("0..size-1", "index.max()", "input.size(dim)"),
    "CODE_CHECKS[embedding_ids]": says("num_embeddings", "vocab_size", "len(tokenizer)", never=("truncat",)),
    "CODE_CHECKS[index_range]": says("idx.max()", "x.size(dim)", "-size..size-1"),
    "CODE_CHECKS[positions]": says("max_position_embeddings", "truncate", never=("resize_token",)),
    "CODE_CHECKS[category_codes]": says("cardinality", "cat_dims", "field_dims", "input_dim", "unseen", "start at 1"),
    "CODE_CHECKS[graph_nodes]": says("edge_index.max()", "x.size(0)", "re-index", "cached=True"),
    "FRAME_FIXES[crf_tags]": says("0..num_tags-1", "-100", "mask=", "valid tag (0)", never=("ignore_index=-100",)),
    "FRAME_FIXES[ignore_value_as_index]": says("-100", "cross_entropy", "mask", never=("pass ignore_index",)),
    "FRAME_FIXES[time_idx]": says("time_idx", "grows by exactly 1", "max_encoder_length", "TimeSeriesDataSet"),
    "FRAME_FIXES[forecasting_categories]": says("NaNLabelEncoder(add_nan=True)", "from_dataset", "time_idx"),
    "FRAME_FIXES[gluonts_cardinality]": says("cardinality", "static_cardinalities", "unseen categories"),
    "FRAME_FIXES[tabnet_cat_dims]": says("cat_dims", "0..cat_dims[i]-1", "unseen in training", "categorical"),
    "FRAME_FIXES[widedeep_dims]": says("wide_dim", "input_dim", "np.unique", "transform()"),
    "FRAME_FIXES[category_codes]": says("cardinality", "vocabulary_size", "unseen in training", "start at 1"),
    "FRAME_FIXES[torchfm_field_dims]": says("field_dims", "0..field_dims[i]-1", "max id + 1", "start at 1"),
    "FRAME_FIXES[quantized_probs]": says(
        "unquantized", "Triton", "float32 or bfloat16", "do_sample=False", never=("temperature=0",)
    ),
    "FRAME_FIXES[layoutlm_bbox]": says("0..1000", "max_2d_position_embeddings", "clamp", "vocab_size", "y0 <= y1"),
    "FRAME_FIXES[scatter_add_index]": says("out.size(dim)", "edge_index", "num_nodes", "remap"),
    "FRAME_FIXES[nnunet_labels]": says("consecutive", "dataset.json", "preprocess"),
    "FRAME_FIXES[seg_labels]": says("ignore_index=255", "nearest-neighbour", never=("bilinear interpolation",)),
    "FRAME_FIXES[class_labels]": says("0..C-1", "num_classes", "ignore_index="),
    "FRAME_FIXES[one_hot]": says("num_classes", "0..num_classes-1", "255"),
    "FRAME_FIXES[bce_logits]": says("BCEWithLogitsLoss", "probabilities in [0, 1]", never=("CrossEntropyLoss",)),
    "FRAME_FIXES[node_index]": says("index.max()", "size"),
    "FRAME_FIXES[tokenizer_max_length]": says("model_max_length", "max_position_embeddings", "truncation=True", "1e30"),
    "FRAME_FIXES[printed_minus_one_labels]": says("-100", "ignore_index=-1", "0..num_classes-1", never=("255",)),
    # patches (fix/): each alternative's title, the evidence that ranks it, why, and the code it writes
    "PATCH_CODE[bce_function]": says("binary_cross_entropy_with_logits"),
    "PATCH_CODE[bce_module]": says("BCEWithLogitsLoss"),
    "PATCH_CODE[drop_rows_hf]": says(".select(", "not in {rows}", "cudaassert fix"),
    "PATCH_CODE[drop_rows_torch]": says("torch.utils.data.Subset(", "not in {rows}", "cudaassert fix"),
    "PATCH_CODE[hf_label]": says("LABEL_{i}"),
    "PATCH_CODE[ignore_index]": says("ignore_index={value}"),
    "PATCH_CODE[mismatched]": says("ignore_mismatched_sizes=True"),
    "PATCH_CODE[resize]": says(".resize_token_embeddings(len({tokenizer}))"),
    "PATCH_CODE[yaml_name]": says("{i}"),
    "PATCH_CODE[yaml_nc]": says("nc: {n}"),
    "PATCH_EVIDENCE[declared]": says("declares {declared} classes", "stay below {declared}"),
    "PATCH_EVIDENCE[grew]": says("{tokenizer_size} tokens", "{num} rows"),
    "PATCH_EVIDENCE[handful]": says("{count} of {n} samples", "0..{last}", "rows {rows}"),
    "PATCH_EVIDENCE[logits]": says("raw logits", "not probabilities"),
    "PATCH_EVIDENCE[yaml_names]": says("data YAML {path}", "names {n} classes", "no name"),
    "PATCH_EVIDENCE[names]": says("class names", "no name"),
    "PATCH_EVIDENCE[negative]": says("negative labels", "cannot be classes"),
    "PATCH_EVIDENCE[new_class]": says("label {top}", "as common as the other classes"),
    "PATCH_EVIDENCE[one_based]": says("{low}..{top}", "no sample has label 0"),
    "PATCH_EVIDENCE[shift_code]": says("{where}", "moves the labels by {delta}", "{code}"),
    "PATCH_EVIDENCE[shifted_item]": says("{where} returns", "{low}..{high}", "out of 0..{last}"),
    "PATCH_EVIDENCE[shifted_raw]": says("`{dataset}`", "all in range", "{where}", "by {delta}"),
    "PATCH_EVIDENCE[void]": says("{value}", "'void'", "not a class"),
    "PATCH_TITLES[bce_logits]": says("BCEWithLogitsLoss", "probabilities in [0, 1]", never=("CrossEntropyLoss",)),
    "PATCH_TITLES[label_lines]": says("correct or delete", "{count} label line(s)", "0..{last}", "{rows}"),
    "PATCH_TITLES[drop_rows]": says("drop the {count} bad row(s)", "{rows}"),
    "PATCH_TITLES[ignore_index]": says("ignore_index={value}", "not a class", never=("out_features",)),
    "PATCH_TITLES[resize_embeddings]": says("resize_token_embeddings(len(tokenizer))", never=("truncate",)),
    "PATCH_TITLES[shift_code]": says("take out the `{op} 1`", "{where}", "labels 0..{last}"),
    "PATCH_TITLES[shift_labels]": says("1-based", "subtract 1", never=("ignore_index",)),
    "PATCH_TITLES[widen_head]": says("{set_classes}"),
    "PATCH_TITLES[yaml_nc]": says("nc: {n}", "data YAML {path}", "list {n} names"),
    "PATCH_WHY[decided]": says("the data decides", "{evidence}"),
    "PATCH_WHY[decided_no_patch]": says("the data decides", "{evidence}", "{no_patch}", "nothing is applied"),
    "PATCH_WHY[edited]": says("no patch", "edited since it ran", "run it again"),
    "PATCH_WHY[labels_by_hand]": says("{names}", "by hand", "{n} entries"),
    "PATCH_WHY[no_cell]": says("no patch", "built `{name}`"),
    "PATCH_WHY[no_culprit]": says("no patch", "names no object"),
    "PATCH_WHY[no_edit]": says("no patch", "{what}"),
    "PATCH_WHY[safe]": says("one meaning only", "{evidence}"),
    "PATCH_WHY[undecided]": says("does not decide", "nothing is applied by default"),
}


def hint_templates() -> dict[str, str]:
    """Every wording in hints.py: the NAME = "..." templates and the str values of its NAME = {...} tables."""
    found: dict[str, str] = {}
    for name in dir(hints):
        value = getattr(hints, name)
        if not name.isupper():
            continue
        if isinstance(value, str):
            found[name] = value
        elif isinstance(value, Mapping):  # HEAD_WORDS / FRAMEWORK_ADVICE: read-only views of the framework modules
            found.update({f"{name}[{key}]": text for key, text in value.items() if isinstance(text, str)})
    return found


def test_every_hint_template_has_a_row_of_words() -> None:
    assert set(hint_templates()) == set(HINT_WORDS)


@pytest.mark.parametrize("name", sorted(HINT_WORDS))
def test_hint_template_says_what_the_user_needs_and_not_the_opposite(name: str) -> None:
    text, words = hint_templates()[name], HINT_WORDS[name]
    assert [w for w in words.must if w not in text] == [], text
    assert [w for w in words.must_not if w in text] == [], text


# ------------------------------------------------------------------ every cause of the catalogue
# Fix words shared by the causes that share a fix text (a row below names one per cause id).
CLASS = says("0..C-1", "out_features", "ignore_index", never=("sigmoid", "resize_token_embeddings", "bilinear"))
LUA_CLASS = says("0..C-1", "out_features", "ignore_index", "1-based", never=("sigmoid",))
SEG = says(
    "0..C-1", "ignore_index=255", "nearest-neighbour interpolation", "output channels", never=("bilinear", "sigmoid")
)
MARGIN = says("0-based", "input.size(1)", "one score per class")
BCE_IN = says("BCEWithLogitsLoss", "torch.sigmoid", "lower the learning rate", never=("CrossEntropyLoss", "/ 255"))
BCE_TG = says("[0, 1]", "mask / 255", "CrossEntropyLoss", never=("BCEWithLogitsLoss", "sigmoid", "learning rate"))
EMB = says(
    "0..num_embeddings-1",
    "resize_token_embeddings(len(tokenizer))",
    "same checkpoint",
    "truncate",
    "-100",
    never=("ignore_index",),
)
BAG_IDS = says("0..num_embeddings-1", "modulo", "largest id + 1", "padding_idx", never=("tokenizer",))
BAG_OFFSETS = says("offsets", "start at 0", "never decrease", "torch.cumsum")
INDEX_FN = says("0..self.size(dim)-1", "-size..-1")
ADV = says("idx.min()", "idx.max()", "on the CPU", "off-by-one")
GATHER = says("token id < num_embeddings", "index < input.size(dim)", "-size <= idx < size")
TAKE = says(
    "-numel..numel-1",
)
MASKED_SCATTER = says("source.numel() >= mask.sum()", "placeholder tokens")
SCATTER = says("0..size-1", "negative values are not allowed", "0 <= label < num_classes")
MULTI = says(
    "torch.isfinite(logits).all()",
    "fp32",
    "greedy decoding",
    "at least one positive weight",
    never=("CUDA_LAUNCH_BLOCKING",),
)
ZERO = says("at least one positive, finite weight", "epsilon", "greedy decoding")
ASSERT_ASYNC = says("CUDA_LAUNCH_BLOCKING=1", "on the CPU", "readable message")
BERNOULLI = says("[0, 1]", "torch.sigmoid", "NaN")
RI_SIZE = says("output_size=int(repeats.sum())", "one sync", never=("clamp",))
RI_NEG = says("repeat count >= 0", "clamp(min=0)", never=("output_size",))
RI_BOTH = says("repeat count >= 0", "output_size=int(repeats.sum())")
UNPOOL2 = says("MaxPool2d(return_indices=True)", "output_size")
UNPOOL3 = says("MaxPool3d(return_indices=True)", "output_size")
INTERNAL = says(
    "on the CPU",
    "compute-sanitizer",
    "report it to PyTorch",
    "torch version",
    never=("labels", "ignore_index", "tokenizer", "learning rate", "vocabulary"),
)
MMCV_INTERNAL = says("on the CPU", "compute-sanitizer", "report it to mmcv", never=("labels", "tokenizer", "PyTorch ("))
COMPILE_INDEX = says("as in eager mode", "without torch.compile", "vocabulary size")
COMPILE_NEGATIVE = says("without torch.compile", "-1/-100", "mask them out")
COMPILE_NAN = says("without torch.compile", "set_detect_anomaly(True)", "torch.isfinite")
COMPILE_ASYNC = says("without torch.compile", "names the check")
UINT8_MASK = says("labels.long()", "0..C-1", "ignore_index", "255", never=("out_features",))
UINT8 = says("labels.long()", "0..C-1", "ignore_index", never=("out_features",))
SPARSE_INDEX = says("-size..size-1", "sparse.size(dim)", "same graph")
SCATTER_ADD = says("0..self.size(0)-1", "edge_index", "x.size(0)", "index.max() + 1")
ASSERT_ASYNC_EMPTY = says(
    "on the CPU", "CUDA_LAUNCH_BLOCKING=1", "index_put_", "idx.min()", "ctc_loss", "target_lengths <= input_lengths"
)
POISSON = says("clamp_min(0)", "torch.isfinite(rates)", never=("sigmoid",))
FRAC_NAN = says("NaN or inf", "torch.isfinite", "learning rate")
FRAC_INDICES = says("indices returned by the same forward call", "torch.isfinite")
SEGMENT = says("lengths >= 0", "data.size(axis)", "torch.bincount", "offsets")
SEGMENT_MEAN = says("lengths >= 0", "data.size(axis)", "offsets")
GROUPED = says("offs = torch.cumsum(group_sizes, 0)", "non-decreasing", "multiple of 16 bytes")
SCALED = says("offs", "non-decreasing", "scale block", "MXFP8", "NVFP4")
SPARSE_CSR = says("on the CPU", ".cpu()", "sort each row's column indices", "coalesce")
NCCL_NAN = says(
    "NaN", "torch.isfinite", "before the collective", "Unsetting TORCH_NCCL_NAN_CHECK only lets the job run on"
)
SYMM_MEM = says("sm_90+", "NVLink", "dist.all_reduce")
ALIGN16 = says("multiple of 16 bytes", "pad each rank's chunk")
NVSHMEM_SPLITS = says("fewer experts per rank", "one entry per rank")
NVSHMEM_TEAM = says("symmetric memory for this process group", "every rank")
NVSHMEM_RANKS = says(
    "smaller groups",
)
NVSHMEM_2D = says("all_to_all_vdev_2d", "every entry >= 0", "one entry per rank")
NVSHMEM_WARP = says("fewer experts per rank", "all_to_all_vdev_2d")
NVSHMEM_TILE = says("fewer or smaller chunks", "split the exchange")
SEGMENT_COO = says("index.sort()", "src = src[perm]", "scatter_reduce")
TP_SCATTER = says("0..out.size(dim)-1", "upgrade torch_scatter")
KNN = says("knn_idx", "0..N0-1", "knn_idx.max() < points.size(1)")
FLASHMLA = says("Report it to vLLM", "another attention backend")
DEEPSELECT = says("bf16 instead of fp16", "report it to vLLM")
CTC = says("1..C-1", "blank", "input_lengths <= T", "target_lengths")
GENERIC = says("CUDA_LAUNCH_BLOCKING=1", "validators on", "on the CPU")

#: cause id -> (words its title must hold, words of its fix). One row per cause.
CAUSE_WORDS: dict[str, tuple[str, Words]] = {
    "nll_loss_target_out_of_range": ("class label out of range", CLASS),
    "nll_loss_target_out_of_range_no_reduce": ("class label out of range", CLASS),
    "nll_loss2d_target_out_of_range": ("segmentation mask value", SEG),
    "nll_loss2d_target_out_of_range_no_reduce": ("segmentation mask value", SEG),
    "thcunn_class_nll_target_out_of_range": ("class label out of range", LUA_CLASS),
    "thcunn_spatial_class_nll_target_out_of_range": ("segmentation mask value", SEG),
    "multi_margin_target_out_of_range": ("multi-margin loss target", MARGIN),
    "bce_input_out_of_range": ("BCELoss input outside [0, 1]", BCE_IN),
    "thcunn_bce_input_out_of_range": ("BCELoss input outside [0, 1]", BCE_IN),
    "thcunn_bce_no_reduce_input_out_of_range": ("BCELoss input outside [0, 1]", BCE_IN),
    "bce_target_out_of_range": ("BCELoss target outside [0, 1]", BCE_TG),
    "index_select_out_of_range": ("embedding or index_select", EMB),
    "thc_index_select_out_of_range": ("embedding or index_select", EMB),
    "embedding_bag_index_out_of_range": ("EmbeddingBag", EMB),
    "embedding_renorm_index_out_of_range": ("embedding with max_norm", EMB),
    "embedding_renorm_wrap_index_out_of_range": ("embedding with max_norm", EMB),
    "embedding_bag_offsets_not_increasing": ("EmbeddingBag offsets", BAG_OFFSETS),
    "index_add_out_of_range": ("index_add_/index_copy_/index_fill_", INDEX_FN),
    "thc_index_copy_out_of_range": ("index_add_/index_copy_/index_fill_", INDEX_FN),
    "thc_index_fill_out_of_range": ("index_add_/index_copy_/index_fill_", INDEX_FN),
    "index_copy_out_of_range": ("index_add_/index_copy_/index_fill_", INDEX_FN),
    "index_fill_out_of_range": ("index_add_/index_copy_/index_fill_", INDEX_FN),
    "advanced_indexing_out_of_range_v1": ("tensor index out of bounds", ADV),
    "advanced_indexing_out_of_range_v2": ("tensor index out of bounds", ADV),
    "vectorized_gather_index_out_of_range": ("tensor index out of bounds", GATHER),
    "take_put_out_of_range": ("take/put_", TAKE),
    "masked_scatter_source_too_small": ("masked_scatter source too small", MASKED_SCATTER),
    "scatter_gather_index_out_of_range_v1": ("gather/scatter index", SCATTER),
    "scatter_gather_index_out_of_range_v2": ("gather/scatter index", SCATTER),
    "thc_gather_index_out_of_range": ("gather/scatter index", SCATTER),
    "thc_scatter_index_out_of_range": ("gather/scatter index", SCATTER),
    "tma_scatter_add_index_out_of_range": ("gather/scatter index", SCATTER),
    "multinomial_invalid_probs_async": ("invalid probabilities", MULTI),
    "multinomial_sample_once_invalid_probs": ("invalid probabilities", MULTI),
    "multinomial_renorm_negative": ("invalid probabilities", MULTI),
    "thc_multinomial_negative": ("invalid probabilities", MULTI),
    "multinomial_zero_sum_async": ("sums to zero", ZERO),
    "multinomial_zero_mass_binary_search": ("sums to zero", ZERO),
    "assert_async_false": ("tensor check failed on the GPU", ASSERT_ASYNC),
    "bernoulli_prob_out_of_range": ("bernoulli probability", BERNOULLI),
    "repeat_interleave_output_size_mismatch": ("output_size", RI_SIZE),
    "repeat_interleave_negative_repeats": ("negative repeat count", RI_NEG),
    "max_unpool2d_index_out_of_range": ("max_unpool2d", UNPOOL2),
    "max_unpool3d_index_out_of_range": ("max_unpool3d", UNPOOL3),
    "dynamic_cast_unsupported_dtype": ("internal check failed in a dtype cast", INTERNAL),
    "inductor_triton_index_out_of_bounds": ("torch.compile kernel", COMPILE_INDEX),
    "nll_loss_target_out_of_range_uint8": ("(uint8 target)", UINT8_MASK),
    "nll_loss_target_out_of_range_no_reduce_uint8": ("(uint8 target)", UINT8),
    "nll_loss_1d_single_thread_launch": ("internal check failed in nll_loss", INTERNAL),
    "nll_loss_backward_2d_index_overflow": ("internal check failed in nll_loss backward", INTERNAL),
    "nll_loss2d_forward_input_index_overflow": ("internal check failed in nll_loss2d", INTERNAL),
    "nll_loss2d_backward_grad_input_index_overflow": ("internal check failed in nll_loss2d backward", INTERNAL),
    "sparse_index_select_out_of_range": ("index_select on a sparse tensor", SPARSE_INDEX),
    "vectorized_scatter_add_index_out_of_range": ("scatter_add_/index_add_ index", SCATTER_ADD),
    "tma_scatter_add_requires_sm90": ("internal check failed in scatter_add_/index_add_", INTERNAL),
    "embedding_bag_invalid_index_v2": ("EmbeddingBag", BAG_IDS),
    "assert_async_empty_message": ("printed no message", ASSERT_ASYNC_EMPTY),
    "poisson_negative_rate": ("Poisson rate", POISSON),
    "repeat_interleave_invalid_repeats_v2": ("repeat_interleave", RI_BOTH),
    "fractional_max_pool2d_backward_bad_index": ("FractionalMaxPool2d found no maximum", FRAC_NAN),
    "fractional_max_pool2d_backward_index_row": ("FractionalMaxPool2d indices", FRAC_INDICES),
    "fractional_max_pool3d_backward_bad_index": ("FractionalMaxPool3d found no maximum", FRAC_NAN),
    "fractional_max_pool3d_backward_index_plane": ("FractionalMaxPool3d indices", FRAC_INDICES),
    "depthwise_conv3d_backward_weight_block": ("internal check failed in depthwise Conv3d", INTERNAL),
    "segment_reduce_negative_length": ("negative segment length", SEGMENT),
    "segment_reduce_mean_negative_length": ("negative segment length", SEGMENT_MEAN),
    "topk_gather_write_overflow": ("internal check failed in topk", INTERNAL),
    "topk_gather_write_start": ("internal check failed in topk", INTERNAL),
    "radix_select_find_pattern_failed": ("internal check failed in topk / kthvalue / median", INTERNAL),
    "warp_merge_sort_block_x": ("internal check failed in sort", INTERNAL),
    "warp_merge_sort_block_y": ("internal check failed in sort", INTERNAL),
    "reduce_output_vec_size": ("internal check failed in a reduction", INTERNAL),
    "reduce_unreachable": ("internal check failed in a reduction", INTERNAL),
    "reduce_noutputs": ("internal check failed in a reduction", INTERNAL),
    "vectorized_elementwise_vec8_128b_arch": ("internal check failed in an elementwise op", INTERNAL),
    "vectorized_elementwise_vec8_arch": ("internal check failed in an elementwise op", INTERNAL),
    "dynamic_cast_quantized_qint8_src": ("internal check failed in an op on a quantized tensor", INTERNAL),
    "dynamic_cast_quantized_qint8_dest": ("internal check failed in an op on a quantized tensor", INTERNAL),
    "dynamic_cast_quantized_quint8_src": ("internal check failed in an op on a quantized tensor", INTERNAL),
    "dynamic_cast_quantized_quint8_dest": ("internal check failed in an op on a quantized tensor", INTERNAL),
    "dynamic_cast_quantized_qint32_src": ("internal check failed in an op on a quantized tensor", INTERNAL),
    "dynamic_cast_quantized_qint32_dest": ("internal check failed in an op on a quantized tensor", INTERNAL),
    "layer_norm_vectorized_double": ("internal check failed in layer_norm", INTERNAL),
    "grouped_mm_negative_group_size": ("grouped_mm offsets decrease", GROUPED),
    "grouped_mm_input_group_alignment": ("grouped_mm group size not a multiple of 16 bytes", GROUPED),
    "grouped_mm_output_group_alignment": ("grouped_mm group size not a multiple of 16 bytes", GROUPED),
    "grouped_mm_offset_exceeds_A_rows": ("grouped_mm offset beyond the rows", GROUPED),
    "grouped_mm_offset_exceeds_B_cols": ("grouped_mm offset beyond the columns", GROUPED),
    "grouped_mm_offset_exceeds_K": ("grouped_mm offset beyond the shared dimension K", GROUPED),
    "mslk_grouped_gemm_missing_offsets": ("scaled grouped GEMM called without offsets", SCALED),
    "mslk_grouped_gemm_k_group_multiple": ("scaled grouped GEMM group size", SCALED),
    "mslk_grouped_gemm_k_offset": ("scaled grouped GEMM group end beyond K", SCALED),
    "mslk_grouped_gemm_k_sum": ("scaled grouped GEMM groups larger", SCALED),
    "mslk_grouped_gemm_scale_size": ("scaled grouped GEMM scale tensor", SCALED),
    "mslk_grouped_gemm_m_offset": ("scaled grouped GEMM group end beyond M", SCALED),
    "sparse_compressed_invariant_violated": ("compressed sparse tensor", SPARSE_CSR),
    "c10d_nan_check_line46": ("NaN in a tensor sent through NCCL", NCCL_NAN),
    "c10d_nan_check_line57": ("NaN in a tensor sent through NCCL", NCCL_NAN),
    "c10d_nan_check_line70": ("NaN in a tensor sent through NCCL", NCCL_NAN),
    "c10d_nan_check_line138": ("NaN in a tensor sent through NCCL", NCCL_NAN),
    "c10d_nan_check_line188": ("NaN in a tensor sent through NCCL", NCCL_NAN),
    "c10d_nan_check_line217": ("NaN in a tensor sent through NCCL", NCCL_NAN),
    "c10d_nan_check_v1": ("NaN in a tensor sent through NCCL", NCCL_NAN),
    "symm_mem_unsupported": ("symmetric-memory op not supported", SYMM_MEM),
    "nccl_all_to_all_lsa_alignment_src": ("16-byte aligned", ALIGN16),
    "nccl_all_to_all_lsa_alignment_dst": ("16-byte aligned", ALIGN16),
    "nvshmem_prefixSum_243": ("too many splits", NVSHMEM_SPLITS),
    "nvshmem_exchangeSplitAndOffset_267": ("NVSHMEM team not set up", NVSHMEM_TEAM),
    "nvshmem_exchangeSplitAndOffset_274": ("more ranks than", NVSHMEM_RANKS),
    "nvshmem_allToAllV_324": ("internal check failed in NVSHMEM all_to_all_vdev", INTERNAL),
    "nvshmem_exchangeSplitAndOffset_2d_476": ("splits add up to more than the input", NVSHMEM_2D),
    "nvshmem_exchangeSplitAndOffset_2d_496": ("negative split", NVSHMEM_2D),
    "nvshmem_prefixSum_warp_512": ("too many splits", NVSHMEM_WARP),
    "nvshmem_allToAllV_2d_573": ("chunk too large", NVSHMEM_TILE),
    "nvshmem_allToAllV_2d_576": ("chunk too large", NVSHMEM_TILE),
    "nvshmem_tile_reduce_kernel_938": ("NVSHMEM team not set up", NVSHMEM_TEAM),
    "inductor_triton_index_lower_only": ("negative index in a torch.compile kernel", COMPILE_NEGATIVE),
    "inductor_triton_index_upper_only": ("index out of bounds in a torch.compile kernel", COMPILE_INDEX),
    "inductor_triton_nan_assert": ("NaN or inf inside a torch.compile kernel", COMPILE_NAN),
    "inductor_triton_assert_async_msg": ("tensor check failed inside a Triton kernel", COMPILE_ASYNC),
    "thc_topk_find_pattern_failed": ("internal check failed in topk / kthvalue / median", INTERNAL),
    "tp_torch_scatter_segment_coo_unsorted": ("not sorted in torch_scatter's segment_coo", SEGMENT_COO),
    "tp_torch_scatter_segment_coo_broadcast_unsorted": ("not sorted in torch_scatter's segment_coo", SEGMENT_COO),
    "tp_torch_scatter_thc_index_out_of_range": ("torch_scatter index out of bounds", TP_SCATTER),
    "tp_mmcv_assign_score_withk_b": ("mmcv's own internal check failed", MMCV_INTERNAL),
    "tp_mmcv_assign_score_withk_kn": ("mmcv's own internal check failed", MMCV_INTERNAL),
    "tp_mmcv_assign_score_withk_cn": ("kNN center index out of range", KNN),
    "tp_mmcv_assign_score_withk_o": ("mmcv's own internal check failed", MMCV_INTERNAL),
    "tp_mmcv_assign_score_withk_n": ("mmcv's own internal check failed", MMCV_INTERNAL),
    "tp_vllm_flashmla_my_num_splits": ("vLLM FlashMLA scheduling check", FLASHMLA),
    "tp_vllm_flashmla_now_req_idx": ("vLLM FlashMLA scheduling check", FLASHMLA),
    "tp_vllm_flashmla_actual_num_splits": ("vLLM FlashMLA scheduling check", FLASHMLA),
    "tp_vllm_flashmla_now_idx": ("vLLM FlashMLA scheduling check", FLASHMLA),
    "tp_vllm_deepselect_nan": ("NaN in the scores of vLLM's top-k", DEEPSELECT),
    # not in device_asserts.json: the validators' CTC cause, and the words for a line the catalogue does not know
    "ctc_loss_target_out_of_range": ("CTC target out of range", CTC),
    # named from a traceback's frames (diagnose/frame_points.py) or a framework's own check of the same data
    "position_ids_out_of_range": ("position id out of range", says("Truncate", "max_length", never=("resize",))),
    "token_type_ids_out_of_range": (
        "token type id out of range",
        says("return_token_type_ids=False", never=("truncat",)),
    ),
    "detection_class_out_of_range": (
        "detection class id out of range",
        says("0..nc-1", "background 0", never=("ignore_index",)),
    ),
    "graph_node_index_out_of_range": ("node id out of range in a graph", says("edge_index", "x.size(0)")),
    "one_hot_class_out_of_range": ("class value out of range in one_hot", says("0..num_classes-1", "void")),
    GENERIC_ID: ("not in the catalogue", GENERIC),
}

#: The words for failures that are not a catalogued assertion (texts.py), by name.
OTHER_TEXTS: dict[str, Text] = {
    **{f"STICKY_TEXTS[{key}]": text for key, text in STICKY_TEXTS.items()},
    "FOLLOW_ON": FOLLOW_ON,
    "NO_LINE": NO_LINE,
    "ROCM_NO_LINE": ROCM_NO_LINE,
}
OTHER_WORDS: dict[str, tuple[str, Words]] = {
    "STICKY_TEXTS[an illegal memory access was encountered]": (
        "illegal memory access",
        says("CUDA_LAUNCH_BLOCKING=1", "ctc_loss", "ECC errors"),
    ),
    "STICKY_TEXTS[misaligned address]": ("misaligned memory access", says("CUDA_LAUNCH_BLOCKING=1", ".contiguous()")),
    "STICKY_TEXTS[unspecified launch failure]": ("kernel crashed", says("CUDA_LAUNCH_BLOCKING=1", "ECC errors")),
    "STICKY_TEXTS[an illegal instruction was encountered]": (
        "illegal instruction",
        says("CUDA_LAUNCH_BLOCKING=1", "~/.triton", "built for this GPU"),
    ),
    "FOLLOW_ON": ("after an earlier kernel failure", says("CUDA_LAUNCH_BLOCKING=1", "first failing call")),
    "NO_LINE": (
        "its line was not captured",
        says("CUDA_LAUNCH_BLOCKING=1", "validators on", "class labels", "token ids", "BCELoss"),
    ),
    "ROCM_NO_LINE": (
        "ROCm build",
        says("on the CPU", "validators on", "AMD_SERIALIZE_KERNEL=3", never=("CUDA_LAUNCH_BLOCKING",)),
    ),
}


def test_every_cause_of_the_catalogue_has_a_row_of_words() -> None:
    catalogue = [c.id for c in all_causes()] + list(EXTRA_TEXTS) + [GENERIC_ID]
    assert sorted(catalogue) == sorted(CAUSE_WORDS)
    assert set(OTHER_TEXTS) == set(OTHER_WORDS)


@pytest.mark.parametrize("cause_id", list(CAUSE_WORDS))
def test_cause_title_and_fix_say_what_the_user_needs_and_not_the_opposite(cause_id: str) -> None:
    cause, (title, words) = get_cause(cause_id), CAUSE_WORDS[cause_id]
    assert cause.id == cause_id
    assert title in cause.title
    assert [w for w in words.must if w not in cause.fix] == [], cause.fix
    assert [w for w in words.must_not if w in cause.fix] == [], cause.fix


@pytest.mark.parametrize("name", list(OTHER_WORDS))
def test_words_for_a_failure_without_a_catalogued_line_say_what_to_do(name: str) -> None:
    text, (title, words) = OTHER_TEXTS[name], OTHER_WORDS[name]
    assert title in text.title
    assert [w for w in words.must if w not in text.fix] == [], text.fix
    assert [w for w in words.must_not if w in text.fix] == [], text.fix
