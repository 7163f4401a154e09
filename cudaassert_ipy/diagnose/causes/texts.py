"""Plain-language title, explanation and fix for every catalogued kernel assertion.

The technical fields (kernel file, condition, APIs) live in ``device_asserts.json``, copied
verbatim from ``shared/reference``; this module adds the words a user reads. A test checks that
every catalogue id has an entry here, so a new assert cannot ship without an explanation.
"""

from __future__ import annotations

from typing import NamedTuple


class Text(NamedTuple):
    title: str
    explanation: str
    fix: str


_CLASS = Text(
    "class label out of range",
    "A loss function got a class label that is negative or not smaller than the number of classes "
    "the model outputs (C = the size of the class dimension of its input), and the label is not "
    "the loss's ignore_index.",
    "Make the labels 0-based integers in 0..C-1 and make the model output exactly as many logits "
    "as there are classes (the out_features of its last layer). Mark padding or 'void' labels with "
    "the loss's ignore_index (default -100).",
)
_SEG = Text(
    "segmentation mask value out of range",
    "A segmentation mask (a dense target of shape N×H×W) contains a value that is negative or not "
    "smaller than the number of output channels C, and it is not the loss's ignore_index. Typical: "
    "VOC-style masks use 255 for 'void', masks saved as 0/255, or masks resized with bilinear "
    "interpolation (which invents in-between values).",
    "Remap mask values to 0..C-1, pass ignore_index=255 (or your void value) to the loss, resize "
    "masks with nearest-neighbour interpolation only, and give the head as many output channels as "
    "there are classes.",
)
_BCE_IN = Text(
    "BCELoss input outside [0, 1]",
    "binary_cross_entropy / nn.BCELoss needs probabilities in [0, 1], but got a value outside that "
    "range or NaN. Usually the model's raw outputs (logits) were passed without a sigmoid, or the "
    "training diverged to NaN/inf.",
    "Pass the raw logits to nn.BCEWithLogitsLoss (or F.binary_cross_entropy_with_logits) instead "
    "of BCELoss, or apply torch.sigmoid first. If the values are NaN, find where they start "
    "(lower the learning rate, clip gradients, use bf16/fp32 instead of fp16).",
)
_BCE_TG = Text(
    "BCELoss target outside [0, 1]",
    "binary_cross_entropy / nn.BCELoss needs targets in [0, 1], but got a value outside that range "
    "or NaN: class ids 0..K, masks stored as 0/255, or counts.",
    "Scale or binarise the targets into [0, 1] (e.g. mask / 255, (y > 0).float()); for multi-class "
    "integer labels use nn.CrossEntropyLoss instead.",
)
_EMB = Text(
    "index out of range in an embedding or index_select",
    "An index given to nn.Embedding / F.embedding / index_select is not smaller than the size of "
    "the table (for an embedding: a token id >= num_embeddings), or is negative. Typical: the "
    "tokenizer and the model come from different checkpoints, tokens were added to the tokenizer, "
    "sequences are longer than max_position_embeddings, or -100 padding reached an embedding.",
    "Keep every index in 0..num_embeddings-1: resize the embedding to the tokenizer "
    "(model.resize_token_embeddings(len(tokenizer))), load tokenizer and model from the same "
    "checkpoint, truncate sequences to the model's maximum length, and never feed -100 padding "
    "into an embedding.",
)
_ADV = Text(
    "tensor index out of bounds",
    "An integer index tensor used as x[idx] (or x[idx] = v, index_put_) holds a value >= the size "
    "of the indexed dimension or < -size.",
    "Compare idx.min() and idx.max() with the dimension size on the CPU and fix the index "
    "computation (off-by-one, wrong dimension, stale lengths).",
)
_SCATTER = Text(
    "gather/scatter index out of bounds",
    "An index passed to gather, scatter, scatter_add_, scatter_reduce, take_along_dim or one_hot is "
    "negative or not smaller than the size of the dimension it indexes.",
    "Keep index values in 0..size-1 along dim (negative values are not allowed here); for one_hot, "
    "make sure 0 <= label < num_classes.",
)
_INDEX_FN = Text(
    "index out of bounds in index_add_/index_copy_/index_fill_",
    "An index passed to index_add_, index_copy_ or index_fill_ is not smaller than self.size(dim), "
    "or is negative where the op does not accept negative indices.",
    "Keep index values in 0..self.size(dim)-1 (index_fill_ also accepts -size..-1).",
)
_MULTI = Text(
    "invalid probabilities for sampling",
    "torch.multinomial (also Categorical(...).sample() and generate(do_sample=True)) got a "
    "probability row that contains NaN, inf or a negative value, or sums to zero. Typical: NaN or "
    "inf logits from fp16 overflow, temperature=0, or every candidate masked out.",
    "Check torch.isfinite(logits).all() before softmax and sampling, use bf16/fp32 instead of "
    "fp16, use greedy decoding instead of temperature=0, and make sure every row keeps at least "
    "one positive weight.",
)
_ZERO = Text(
    "probability row sums to zero",
    "A row of weights given to torch.multinomial / Categorical sums to zero (everything masked "
    "out, underflowed, or degenerate rows), so nothing can be sampled from it.",
    "Make sure every row has at least one positive, finite weight: do not mask out every "
    "candidate, add a small epsilon, or fall back to greedy decoding for empty rows.",
)

TEXTS: dict[str, Text] = {
    "nll_loss_target_out_of_range": _CLASS,
    "nll_loss_target_out_of_range_no_reduce": _CLASS,
    "thcunn_class_nll_target_out_of_range": _CLASS._replace(
        fix=_CLASS.fix + " (Lua torch used 1-based labels; PyTorch's are 0-based.)"
    ),
    "nll_loss2d_target_out_of_range": _SEG,
    "nll_loss2d_target_out_of_range_no_reduce": _SEG,
    "thcunn_spatial_class_nll_target_out_of_range": _SEG,
    "multi_margin_target_out_of_range": Text(
        "multi-margin loss target out of range",
        "multi_margin_loss / nn.MultiMarginLoss got a target class index that is negative or not "
        "smaller than the number of classes (input.size(1)).",
        "Make targets 0-based class indices smaller than input.size(1), and make the model output "
        "one score per class.",
    ),
    "bce_input_out_of_range": _BCE_IN,
    "thcunn_bce_input_out_of_range": _BCE_IN,
    "thcunn_bce_no_reduce_input_out_of_range": _BCE_IN,
    "bce_target_out_of_range": _BCE_TG,
    "index_select_out_of_range": _EMB,
    "thc_index_select_out_of_range": _EMB,
    "embedding_bag_index_out_of_range": _EMB._replace(title="index out of range in an EmbeddingBag"),
    "embedding_bag_offsets_not_increasing": Text(
        "EmbeddingBag offsets not increasing",
        "The offsets given to nn.EmbeddingBag / F.embedding_bag are not sorted ascending (a bag "
        "ends before it starts) or point past the end of the input.",
        "Pass offsets that start at 0, never decrease, and are <= input.numel() (e.g. build them "
        "with torch.cumsum of the bag lengths, shifted by one).",
    ),
    "index_add_out_of_range": _INDEX_FN,
    "thc_index_copy_out_of_range": _INDEX_FN,
    "thc_index_fill_out_of_range": _INDEX_FN,
    "index_copy_out_of_range": _INDEX_FN,
    "index_fill_out_of_range": _INDEX_FN,
    "advanced_indexing_out_of_range_v1": _ADV,
    "advanced_indexing_out_of_range_v2": _ADV,
    "vectorized_gather_index_out_of_range": _ADV._replace(
        explanation="An index used by a gather-style kernel (x[idx], gather, index_select or an "
        "embedding in newer builds) is out of range for the indexed dimension.",
        fix="Keep index values in range: for embeddings a token id < num_embeddings, for gather "
        "index < input.size(dim), for x[idx] -size <= idx < size.",
    ),
    "take_put_out_of_range": Text(
        "flat index out of range in take/put_",
        "torch.take / Tensor.put_ got a flat index that is >= numel or < -numel of the tensor.",
        "Keep flat indices in -numel..numel-1 of the indexed tensor.",
    ),
    "masked_scatter_source_too_small": Text(
        "masked_scatter source too small",
        "The mask given to masked_scatter_ selects more positions than the source tensor has "
        "elements. Typical in multimodal models: more image/audio placeholder tokens than feature "
        "rows.",
        "Make source.numel() >= mask.sum(): the number of placeholder tokens must match the "
        "number of feature rows.",
    ),
    "scatter_gather_index_out_of_range_v1": _SCATTER,
    "scatter_gather_index_out_of_range_v2": _SCATTER,
    "thc_gather_index_out_of_range": _SCATTER,
    "thc_scatter_index_out_of_range": _SCATTER,
    "tma_scatter_add_index_out_of_range": _SCATTER,
    "multinomial_invalid_probs_async": _MULTI,
    "multinomial_sample_once_invalid_probs": _MULTI,
    "multinomial_renorm_negative": _MULTI,
    "thc_multinomial_negative": _MULTI,
    "multinomial_zero_sum_async": _ZERO,
    "multinomial_zero_mass_binary_search": _ZERO,
    "assert_async_false": Text(
        "a tensor check failed on the GPU",
        "A check that runs on the GPU (torch._assert_async, or an internal check such as "
        "multinomial's probability check on Windows builds, where the message is dropped) "
        "evaluated to false. Which check it was must be read from where it was launched.",
        "Rerun with CUDA_LAUNCH_BLOCKING=1 (the restart button does it) or on the CPU, where the "
        "same check raises a readable message, then fix that input.",
    ),
    "bernoulli_prob_out_of_range": Text(
        "bernoulli probability outside [0, 1]",
        "torch.bernoulli / Tensor.bernoulli_ / Bernoulli(probs=...).sample() got a probability "
        "tensor with a value < 0, > 1 or NaN.",
        "Pass probabilities in [0, 1] (apply torch.sigmoid to logits or clamp) and remove NaN "
        "sources.",
    ),
    "repeat_interleave_output_size_mismatch": Text(
        "repeat_interleave output_size does not match",
        "repeat_interleave was given output_size, but it is not equal to repeats.sum().",
        "Pass output_size=int(repeats.sum()), or omit output_size and accept one sync.",
    ),
    "repeat_interleave_negative_repeats": Text(
        "negative repeat count in repeat_interleave",
        "The repeats tensor of repeat_interleave contains a negative count (checked on the GPU "
        "when output_size is given).",
        "Make every repeat count >= 0 (clamp(min=0) where a count is computed).",
    ),
    "max_unpool2d_index_out_of_range": Text(
        "max_unpool2d index out of range",
        "An index given to max_unpool2d does not fit the requested output size: wrong output_size, "
        "or indices from a different pooling layer or input shape.",
        "Pass the indices returned by the matching MaxPool2d(return_indices=True) and an "
        "output_size equal to that pool's input size.",
    ),
    "max_unpool3d_index_out_of_range": Text(
        "max_unpool3d index out of range",
        "An index given to max_unpool3d does not fit the requested output size.",
        "Pass the indices returned by the matching MaxPool3d(return_indices=True) and an "
        "output_size equal to that pool's input size.",
    ),
    "dynamic_cast_unsupported_dtype": Text(
        "unsupported dtype cast inside a kernel",
        "An elementwise kernel met a dtype its cast switch does not handle. This is not a problem "
        "with your data's values: it points at a PyTorch or extension bug, or memory corruption.",
        "Rerun with CUDA_LAUNCH_BLOCKING=1 to find the op, check the dtypes going into it, and "
        "report it upstream if it reproduces.",
    ),
    "inductor_triton_index_out_of_bounds": Text(
        "index out of bounds in a torch.compile kernel",
        "Inside a torch.compile'd graph an index is out of range: the generated kernel checks "
        "0 <= index < SIZE, where SIZE is the dimension size (e.g. 30522 = a BERT vocabulary, "
        "512 = positions).",
        "Fix it as in eager mode (token id >= vocabulary size, position >= maximum length, bad "
        "gather index); run once without torch.compile to get the eager op's message.",
    ),
}

GENERIC = Text(
    "a kernel assertion failed",
    "A check inside a GPU kernel failed. This tool has no entry for this assertion, but its text "
    "below names the condition that was violated.",
    "Restart with CUDA_LAUNCH_BLOCKING=1 (and validators on) so the failing call raises at its own "
    "line, or run the same code on the CPU, where most of these checks raise a readable error.",
)

# Sticky CUDA errors that are not assertions: keyed by the CUDA error text.
STICKY_TEXTS: dict[str, Text] = {
    "an illegal memory access was encountered": Text(
        "illegal memory access on the GPU",
        "A kernel read or wrote memory outside any allocation. Unlike an assertion, nothing checked "
        "the index first: typical causes are out-of-range targets in ctc_loss, an index op in a "
        "custom CUDA/Triton kernel, or (rarely) a PyTorch bug or a hardware fault.",
        "Restart with CUDA_LAUNCH_BLOCKING=1 and validators on to find the call, check the indices "
        "and lengths going into it (ctc_loss: targets < number of classes, lengths <= sizes), and "
        "watch the GPU state below for ECC errors.",
    ),
    "misaligned address": Text(
        "misaligned memory access on the GPU",
        "A kernel accessed memory at an address not aligned for its data type: usually a custom "
        "kernel or an extension given a non-contiguous or offset view.",
        "Restart with CUDA_LAUNCH_BLOCKING=1 to find the call, and pass .contiguous() tensors to "
        "custom kernels and extensions.",
    ),
    "unspecified launch failure": Text(
        "a GPU kernel crashed",
        "A kernel failed without a specific reason: out-of-bounds access in a custom kernel, a "
        "kernel that ran too long under a display watchdog, or a driver or hardware problem.",
        "Restart with CUDA_LAUNCH_BLOCKING=1 to find the call; if it recurs on code that used to "
        "work, check the GPU state below (ECC errors, retired pages) and the driver log.",
    ),
    "an illegal instruction was encountered": Text(
        "illegal instruction on the GPU",
        "A kernel executed an invalid instruction: usually a kernel compiled for another GPU "
        "architecture, a corrupted cache of compiled kernels, or a hardware fault.",
        "Restart with CUDA_LAUNCH_BLOCKING=1 to find the call; clear compiled-kernel caches "
        "(~/.triton, torchinductor cache) and check that extensions were built for this GPU.",
    ),
}
FOLLOW_ON = Text(
    "a GPU library failed after an earlier kernel failure",
    "cuBLAS / cuDNN reports an execution failure. This almost always follows an earlier "
    "asynchronous kernel failure (often a device-side assert) in the same process: the library "
    "call is where it surfaced, not where it happened.",
    "Restart the kernel with CUDA_LAUNCH_BLOCKING=1 and validators on so the first failing call "
    "raises at its own line.",
)
NO_LINE = Text(
    "a kernel assertion failed (its line was not captured)",
    "A check inside a GPU kernel failed, but its assertion line did not reach this process's "
    "stderr (it may be in the Jupyter server's log), so which check it was is unknown.",
    "Restart with CUDA_LAUNCH_BLOCKING=1 and validators on: the failing call then raises at its "
    "own line with a readable message. The usual causes are class labels >= the number of "
    "outputs, token ids >= the vocabulary size, and BCELoss on values outside [0, 1].",
)

# Causes with no kernel assertion of their own (so not in device_asserts.json), which the
# validators can still name before launch.
EXTRA_TEXTS: dict[str, Text] = {
    "ctc_loss_target_out_of_range": Text(
        "CTC target out of range",
        "ctc_loss got a target label that is negative, equal to the blank index, or not smaller than the "
        "number of classes, or a target/input length larger than the tensors allow. Neither the CPU nor the "
        "CUDA kernel checks this: the CPU silently returns a wrong loss, the GPU may read out of bounds "
        "(illegal memory access).",
        "Keep targets in 1..C-1 when blank=0 (never the blank index), input_lengths <= T and "
        "target_lengths <= the target tensor's length; reserve index 0 (or your blank) for the blank.",
    ),
}
