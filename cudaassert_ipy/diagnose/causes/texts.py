"""Plain-language title, explanation and fix for every catalogued kernel assertion.

The technical fields (kernel file, condition, APIs, releases) live in ``device_asserts.json`` (how it was
built: docs/causes.md); this module adds the words a user reads. A test checks that every catalogue id has
an entry here, so a new assert cannot ship without an explanation. Checks that never fail on valid input
(PyTorch's internal invariants) get one honest wording, :func:`_internal`: never a made-up data cause.
"""

from __future__ import annotations

from typing import NamedTuple

from cudaassert_ipy.diagnose.hints import CODE_CHECKS, INTERNAL_WHO, internal_check


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
    "as there are classes (num_classes: the out_features of its last layer). Mark padding or 'void' labels with "
    "the loss's ignore_index (default -100).",
)
_SEG = Text(
    "segmentation mask value out of range",
    "A segmentation mask (a dense target of shape N×H×W) contains a value that is negative or not "
    "smaller than the number of output channels C, and it is not the loss's ignore_index. Typical: "
    "VOC-style masks use 255 for 'void', masks saved as 0/255, or masks resized with bilinear "
    "interpolation (which invents in-between values).",
    "Remap mask values to 0..C-1: each pixel of a label image must be a class index, not a grey level or a "
    "colour, and a dataset that ships raw ids needs its label preprocessing first (Cityscapes: train on the "
    "*_labelTrainIds images, not *_labelIds). Pass ignore_index=255 (or your void value) to the loss, resize "
    "masks with nearest-neighbour interpolation only, and give the head as many output channels as "
    "there are classes (its num_classes / out_channels, counting the background when the masks use 0 for it).",
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
    "Check torch.isfinite(logits).all() before softmax and sampling (in training, a NaN loss makes "
    "the weights and then the probabilities NaN: stop at the first NaN loss), use bf16/fp32 instead of "
    "fp16, use greedy decoding instead of temperature=0 or a tiny temperature (dividing the logits by it "
    "overflows them to inf), and make sure every row keeps at least one positive weight.",
)
_ZERO = Text(
    "probability row sums to zero",
    "A row of weights given to torch.multinomial / Categorical sums to zero (everything masked "
    "out, underflowed, or degenerate rows), so nothing can be sampled from it.",
    "Make sure every row has at least one positive, finite weight: do not mask out every "
    "candidate, add a small epsilon, or fall back to greedy decoding for empty rows.",
)


def _sentence(clauses: str) -> str:
    """A fix worded in :mod:`..hints` (lowercase clauses joined by "; ") as a sentence."""
    return clauses[:1].upper() + clauses[1:] + "."


def _internal(op: str, check: str, extra: str = "", who: str = "PyTorch") -> Text:
    """The one cause of a check that never fails on valid input: a bug, a corrupted input, or corrupted memory."""
    return Text(
        f"{who}'s own internal check failed in {op}",
        f"Likely a {who} bug, a corrupted input (a tensor whose memory was freed or overwritten) or memory corrupted "
        f"by an earlier kernel. The kernel checked that {check}: a check of {who}'s own bookkeeping, not of your "
        f"data's values, which never fails on valid input.{extra}",
        _sentence(internal_check(INTERNAL_WHO.get(who, INTERNAL_WHO["PyTorch"]))),
    )


_OVERFLOW = " A tensor with more than 2**31 elements on the 32-bit path can reach it: splitting the batch avoids it."
_NAN_SELECT = (
    " The one fact about the data worth ruling out is NaN in the input: selection has broken on NaN edge cases and on "
    "values that changed while being read (another stream, freed memory)."
)
_GROUPED = Text(
    "grouped_mm offsets invalid",
    "torch._grouped_mm / torch._scaled_grouped_mm got group offsets (offs) it cannot use.",
    "Build offs as the running end of each group, offs = torch.cumsum(group_sizes, 0).to(torch.int32): "
    "non-decreasing, its last value no larger than the grouped dimension, and each group padded to a multiple of "
    "16 bytes (8 bf16 or 16 fp8 rows) when routing tokens to experts.",
)
_SCALED = Text(
    "scaled grouped GEMM offsets invalid",
    "torch._scaled_grouped_mm got offsets or scales it cannot use.",
    "Check offs (non-decreasing, each group a multiple of the scale block: 32 for MXFP8, 16 for NVFP4, the last "
    "value within the operand) and size the block-scale tensors for the groups padded to multiples of 4.",
)
_NAN_CHECK = Text(
    "NaN in a tensor sent through NCCL (TORCH_NCCL_NAN_CHECK=1)",
    "With TORCH_NCCL_NAN_CHECK=1 PyTorch checks every tensor given to a NCCL collective (all_reduce, all_gather, "
    "reduce_scatter, broadcast, send) for NaN on the GPU, and stops the process on purpose when it finds one "
    "(torch.ops.c10d.check_for_nan does the same check). This rank computed the NaN: it is in its gradients or "
    "activations.",
    "Find where the NaN starts on this rank: check the loss and the gradients with torch.isfinite before the "
    "collective (fp16 overflow without loss scaling, a learning rate too high, bad input data). Unsetting "
    "TORCH_NCCL_NAN_CHECK only lets the job run on with the NaN.",
)
_ALIGN16 = Text(
    "all-to-all split not 16-byte aligned",
    "The symmetric-memory all_to_all (its NCCL LSA path) needs every rank's source offset and destination buffer "
    "aligned to 16 bytes; a split size made an offset that is not.",
    "Make every split a multiple of 16 bytes: pad each rank's chunk (8 bf16 or 4 fp32 elements per 16 bytes).",
)
_NVSHMEM = Text(
    "NVSHMEM all-to-all splits invalid",
    "An NVSHMEM all-to-all (torch.ops.symm_mem.all_to_all_vdev / all_to_all_vdev_2d, MoE token dispatch) got "
    "split sizes it cannot use.",
    "Check the split tensors given to all_to_all_vdev / all_to_all_vdev_2d: one entry per rank (and expert), every "
    "entry >= 0, and their sum within the input's rows and the symmetric buffer.",
)
_NVSHMEM_TEAM = Text(
    "NVSHMEM team not set up for this process group",
    "An NVSHMEM kernel (all_to_all_vdev, tile_reduce) ran for a process group whose NVSHMEM team was never created: "
    "symmetric memory was not set up for that group.",
    "Set up symmetric memory for this process group on every rank before the call, and pass the op the same group "
    "its symmetric buffers were allocated for.",
)
_NVSHMEM_TILE = _NVSHMEM._replace(
    title="a chunk too large for the NVSHMEM all-to-all tile",
    explanation="all_to_all_vdev_2d moves data in tiles, and a per-expert chunk (its minor size) or the number of "
    "chunks (its major size) is larger than the tiles hold.",
    fix="Use fewer or smaller chunks per call: fewer experts per rank, or split the exchange into several calls.",
)
_UNSORTED = Text(
    "index not sorted in torch_scatter's segment_coo",
    "torch_scatter.segment_coo (and segment_*_coo) needs its index sorted in ascending order along the reduced "
    "dimension, and it is not. PyG uses it with sorted batch vectors; any other index must be sorted first.",
    "Sort the index and reorder src the same way (index, perm = index.sort(); src = src[perm]), or use "
    "torch_scatter.scatter / Tensor.scatter_reduce, which take unsorted indices.",
)
_FLASHMLA = Text(
    "vLLM FlashMLA scheduling check failed",
    "A check inside vLLM's FlashMLA decode kernels (MLA attention of DeepSeek-V2/V3/R1-style models) failed: its "
    "split and block accounting did not add up, usually from sequence lengths or block tables that do not agree. "
    "It prints `Assertion failed (file:line): condition` and traps on purpose, so the CUDA error reads "
    "'unspecified launch failure', not 'device-side assert triggered'.",
    "Report it to vLLM with the model, the batch and the KV-cache settings; meanwhile try another attention backend.",
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
        "Make targets 0-based class indices smaller than input.size(1), and make the model output one score per class.",
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
        "Make source.numel() >= mask.sum(): the number of placeholder tokens must match the number of feature rows.",
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
        "Pass probabilities in [0, 1] (apply torch.sigmoid to logits or clamp) and remove NaN sources.",
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
    "dynamic_cast_unsupported_dtype": _internal(
        "a dtype cast inside a kernel",
        "it was handed a dtype its cast table handles",
        extra=" A custom CUDA extension handing PyTorch a tensor of an unexpected dtype can reach it too: check the "
        "dtypes going into the op.",
    ),
    "inductor_triton_index_out_of_bounds": Text(
        "index out of bounds in a torch.compile kernel",
        "Inside a torch.compile'd graph an index is out of range: the generated kernel checks "
        "0 <= index < SIZE, where SIZE is the dimension size (e.g. 30522 = a BERT vocabulary, "
        "512 = positions).",
        "Fix it as in eager mode (token id >= vocabulary size, position >= maximum length, bad "
        "gather index); run once without torch.compile to get the eager op's message.",
    ),
    # ---------------------------------------------------------------------------------------------------------------
    # Texts the current release prints that the first catalogue lacked (the 2.14.1 census), and where their words
    # changed. Older texts above stay: each entry's ``releases`` in device_asserts.json says which releases print it.
    "nll_loss_target_out_of_range_uint8": _CLASS._replace(
        title="class label out of range (uint8 target)",
        explanation="A loss function got a uint8 (Byte) class label that is not smaller than the number of classes "
        "C, and it is not the loss's ignore_index. uint8 labels cannot be negative, so the kernel prints only the "
        "upper half of its check (`t < n_classes`); a -1 or -100 'padding' label written into a uint8 tensor wraps "
        "around to 255 or 156.",
        fix="Cast the labels to torch.long (labels.long()), keep them in 0..C-1, and mark padding or 'void' pixels "
        "with the loss's ignore_index (255 for VOC-style masks stored as uint8).",
    ),
    "nll_loss_target_out_of_range_no_reduce_uint8": _CLASS._replace(
        title="class label out of range (uint8 target)",
        explanation="A loss with reduction='none' got a uint8 (Byte) class label that is not smaller than the number "
        "of classes C, and it is not the loss's ignore_index (uint8 labels cannot be negative: -1 wraps to 255).",
        fix="Cast the labels to torch.long (labels.long()), keep them in 0..C-1, and mark padding or 'void' labels "
        "with the loss's ignore_index.",
    ),
    "sparse_index_select_out_of_range": Text(
        "index out of range in index_select on a sparse tensor",
        "index_select on a sparse COO tensor got an index < -size or >= size of the selected dimension (GNN code "
        "that selects rows of a sparse adjacency matrix by node id, with ids from another graph or batch).",
        "Keep the indices in -size..size-1 of the sparse tensor's dimension (compare index.min() and index.max() "
        "with sparse.size(dim)); check that node ids and the adjacency matrix come from the same graph.",
    ),
    "vectorized_scatter_add_index_out_of_range": _SCATTER._replace(
        title="scatter_add_/index_add_ index out of bounds",
        explanation="An index given to scatter_add_ or index_add_ (the fast path that adds whole rows along dim 0: "
        "GNN message aggregation, MoE token combine) is negative or not smaller than self.size(0). This path does "
        "not wrap negative indices.",
        fix="Keep the index values in 0..self.size(0)-1: for a graph, every node id in edge_index must be smaller "
        "than the number of nodes (x.size(0)); for a scatter into an output, size the output by index.max() + 1.",
    ),
    "embedding_bag_invalid_index_v2": _EMB._replace(
        title="index out of range in an EmbeddingBag",
        explanation="An index given to nn.EmbeddingBag / F.embedding_bag is negative or not smaller than "
        "num_embeddings (recommendation models: a categorical id larger than its table).",
        fix="Keep every index in 0..num_embeddings-1: hash or take the modulo of categorical ids into the table "
        "size, size the table from the largest id + 1, and make padding_idx itself a valid row.",
    ),
    "embedding_renorm_index_out_of_range": _EMB._replace(
        title="token id out of range in an embedding with max_norm",
        explanation="An id given to an embedding created with max_norm (nn.Embedding(..., max_norm=...), "
        "F.embedding(max_norm=...)) is negative or not smaller than num_embeddings. With max_norm set, the rows are "
        "renormalised before the lookup, so this check fires first instead of index_select's.",
    ),
    "embedding_renorm_wrap_index_out_of_range": _EMB._replace(
        title="token id out of range in an embedding with max_norm",
        explanation="An id given to an embedding created with max_norm is < -num_embeddings or >= num_embeddings "
        "(the renorm pre-pass that wraps negative ids checked it before the lookup).",
    ),
    "assert_async_empty_message": Text(
        "a tensor check failed on the GPU (the kernel printed no message)",
        "A check PyTorch runs on the GPU without a message failed: the line's condition is empty (``Assertion `` "
        "failed.``), so the op must be read from the code that launched it. The checks that print this: "
        "index_put_ with accumulate=True (x.index_put_(indices, values, accumulate=True)) and indexing under "
        "torch.use_deterministic_algorithms(True) "
        "(an index outside -size..size-1 of its dimension), the cuDNN path of ctc_loss (input_lengths or "
        "target_lengths that do not fit), and torch._assert_async(t) in your own code.",
        "Rerun the cell on the CPU (or with CUDA_LAUNCH_BLOCKING=1 and validators on): the same checks raise there "
        "with a readable message. For index_put_ compare idx.min() and idx.max() with the dimension size; for "
        "ctc_loss check input_lengths <= T and target_lengths <= input_lengths.",
    ),
    "poisson_negative_rate": Text(
        "negative or NaN Poisson rate",
        "torch.poisson / torch.distributions.Poisson(rate).sample() got a rate that is negative or NaN (shot-noise "
        "augmentation on values that went below zero, or a rate computed from NaN).",
        "Clamp the rates to >= 0 (rates.clamp_min(0)) and find where negative or NaN rates come from "
        "(torch.isfinite(rates).all(), rates.min()).",
    ),
    "repeat_interleave_invalid_repeats_v2": Text(
        "bad repeats or output_size in repeat_interleave",
        "repeat_interleave with output_size (MoE token dispatch passes it to avoid a sync) found a negative repeat "
        "count, or the repeats add up to more than output_size.",
        "Make every repeat count >= 0 and pass output_size=int(repeats.sum()) (or leave output_size out and accept "
        "one sync).",
    ),
    "fractional_max_pool2d_backward_bad_index": Text(
        "FractionalMaxPool2d found no maximum (NaN in its input)",
        "The backward of FractionalMaxPool2d met a saved index of -1: in the forward pass a pooling window held "
        "only NaN, so no maximum was recorded. The NaN comes from the layers before the pool.",
        "Find where the activations become NaN or inf (torch.isfinite on the pool's input; lower the learning rate, "
        "clip gradients, use fp32 or bf16 instead of fp16).",
    ),
    "fractional_max_pool2d_backward_index_row": Text(
        "FractionalMaxPool2d indices do not match its input",
        "The backward of FractionalMaxPool2d met a saved index that points outside the input (a row >= its "
        "height): indices from another call or shape, or indices spoiled by NaN in the forward pass.",
        "Use the indices returned by the same forward call, and rule out NaN in the pool's input (torch.isfinite).",
    ),
    "fractional_max_pool3d_backward_bad_index": Text(
        "FractionalMaxPool3d found no maximum (NaN in its input)",
        "The backward of FractionalMaxPool3d met a saved index of -1: in the forward pass a pooling window held "
        "only NaN, so no maximum was recorded.",
        "Find where the activations become NaN or inf (torch.isfinite on the pool's input; lower the learning rate, "
        "clip gradients, use fp32 or bf16 instead of fp16).",
    ),
    "fractional_max_pool3d_backward_index_plane": Text(
        "FractionalMaxPool3d indices do not match its input",
        "The backward of FractionalMaxPool3d met a saved index that points outside the input (a plane >= its "
        "depth): indices from another call or shape, or spoiled by NaN in the forward pass.",
        "Use the indices returned by the same forward call, and rule out NaN in the pool's input (torch.isfinite).",
    ),
    "segment_reduce_negative_length": Text(
        "negative segment length in segment_reduce",
        "torch.segment_reduce(data, reduce, lengths=...) got a negative segment length.",
        "Pass lengths >= 0 that add up to data.size(axis) (e.g. lengths from torch.bincount or a diff of sorted "
        "offsets), or pass offsets instead.",
    ),
    "segment_reduce_mean_negative_length": Text(
        "negative segment length in segment_reduce",
        "torch.segment_reduce(..., reduce='mean', lengths=...) got a negative segment length (checked when the "
        "sums are divided by the lengths).",
        "Pass lengths >= 0 that add up to data.size(axis), or pass offsets instead.",
    ),
    "sparse_compressed_invariant_violated": Text(
        "invalid indices in a compressed sparse tensor (CSR/CSC/BSR/BSC)",
        "Building or checking a compressed sparse CUDA tensor (torch.sparse_csr_tensor / sparse_csc_tensor / "
        "sparse_bsr_tensor / sparse_bsc_tensor with check_invariants=True, torch.sparse.check_sparse_tensor_"
        "invariants, to_sparse_csr) found an index that breaks one of its rules. The kernel prints only the words "
        "`cond && message`: the message naming the rule is shown on the CPU only. The rules: crow_indices (or "
        "ccol_indices) start at 0, never decrease and end at nnz; column (row) indices lie in 0..ncols-1 and are "
        "sorted and distinct within each row.",
        "Build the same tensor on the CPU (indices and values .cpu(), same call): the CPU check raises the rule "
        "that fails. Then fix the indices, e.g. sort each row's column indices and remove duplicates "
        "(coalesce a COO tensor first and convert it with .to_sparse_csr()).",
    ),
    # MoE grouped GEMM (torch._grouped_mm, torch._scaled_grouped_mm): one text per check of the offsets
    "grouped_mm_negative_group_size": _GROUPED._replace(
        title="grouped_mm offsets decrease (a negative group size)",
        explanation="torch._grouped_mm / torch._scaled_grouped_mm got offsets (offs) that are not non-decreasing: "
        "a group's size, offs[i] - offs[i-1], is negative. offs must be the running end of each group (the "
        "cumulative sum of the tokens routed to each expert).",
    ),
    "grouped_mm_input_group_alignment": _GROUPED._replace(
        title="grouped_mm group size not a multiple of 16 bytes",
        explanation="torch._grouped_mm / torch._scaled_grouped_mm needs every group along the grouped dimension of "
        "an input to span a multiple of 16 bytes (8 bf16 elements, 16 fp8 elements); a group size from offs is "
        "not (or is negative).",
    ),
    "grouped_mm_output_group_alignment": _GROUPED._replace(
        title="grouped_mm group size not a multiple of 16 bytes",
        explanation="torch._grouped_mm / torch._scaled_grouped_mm needs every group along the grouped dimension of "
        "the output to span a multiple of 16 bytes; a group size from offs is not (or is negative).",
    ),
    "grouped_mm_offset_exceeds_A_rows": _GROUPED._replace(
        title="grouped_mm offset beyond the rows of the input",
        explanation="An entry of offs is larger than the number of rows of the 2-D left operand: the groups claim "
        "more tokens than the input holds (offs[-1] must be <= the number of rows).",
    ),
    "grouped_mm_offset_exceeds_B_cols": _GROUPED._replace(
        title="grouped_mm offset beyond the columns of the second operand",
        explanation="An entry of offs is larger than the number of columns of the right operand (offs[-1] must be "
        "<= its grouped dimension).",
    ),
    "grouped_mm_offset_exceeds_K": _GROUPED._replace(
        title="grouped_mm offset beyond the shared dimension K",
        explanation="With both operands 2-D, the groups split the shared dimension K, and an entry of offs is "
        "larger than K.",
    ),
    "mslk_grouped_gemm_missing_offsets": _SCALED._replace(
        title="scaled grouped GEMM called without offsets",
        explanation="torch._scaled_grouped_mm with MXFP8/NVFP4 block scales (the sm_100 CUTLASS path) got no offs "
        "for a 2d-2d or 2d-3d grouped GEMM: those shapes need the group boundaries.",
    ),
    "mslk_grouped_gemm_k_group_multiple": _SCALED._replace(
        title="scaled grouped GEMM group size not a multiple of the scale block",
        explanation="In a 2d-2d scaled grouped GEMM each group's size along K must be a multiple of the scale block: "
        "32 for MXFP8, 16 for NVFP4 (and not negative).",
    ),
    "mslk_grouped_gemm_k_offset": _SCALED._replace(
        title="scaled grouped GEMM group end beyond K",
        explanation="In a 2d-2d scaled grouped GEMM a group's end offset is negative or larger than K.",
    ),
    "mslk_grouped_gemm_k_sum": _SCALED._replace(
        title="scaled grouped GEMM groups larger than the operand",
        explanation="In a 2d-2d scaled grouped GEMM the group sizes along K add up to more than the operand holds "
        "(M * K).",
    ),
    "mslk_grouped_gemm_scale_size": _SCALED._replace(
        title="scaled grouped GEMM scale tensor too small for the groups",
        explanation="In a 2d-2d scaled grouped GEMM the block-scale tensor is smaller than the groups need once each "
        "group's scales are padded to a multiple of 4.",
    ),
    "mslk_grouped_gemm_m_offset": _SCALED._replace(
        title="scaled grouped GEMM group end beyond M",
        explanation="In a 2d-3d scaled grouped GEMM a group's end offset is negative or larger than M (the rows of "
        "the 2-D operand).",
    ),
    # Distributed: NCCL's NaN check, symmetric memory, NVSHMEM all-to-all
    **dict.fromkeys(
        (
            "c10d_nan_check_line46",
            "c10d_nan_check_line57",
            "c10d_nan_check_line70",
            "c10d_nan_check_line138",
            "c10d_nan_check_line188",
            "c10d_nan_check_line217",
            "c10d_nan_check_v1",
        ),
        _NAN_CHECK,
    ),
    "symm_mem_unsupported": Text(
        "symmetric-memory op not supported on this GPU or dtype",
        "A symmetric-memory primitive (multimem load-reduce or store, a bf16 add) ran on a GPU or with a dtype it "
        "has no code for: multimem needs NVLink SHARP (sm_90 and later), bf16 adds need sm_80 or later.",
        "Use the symmetric-memory ops on the GPUs and dtypes they support (sm_90+ with NVLink for multimem), or use "
        "the ordinary NCCL collective (dist.all_reduce) instead.",
    ),
    "nccl_all_to_all_lsa_alignment_src": _ALIGN16,
    "nccl_all_to_all_lsa_alignment_dst": _ALIGN16,
    "nvshmem_prefixSum_243": _NVSHMEM._replace(
        title="too many splits for the NVSHMEM all-to-all",
        explanation="all_to_all_vdev got more split entries (ranks x experts) than its prefix-sum kernel handles in "
        "one block.",
        fix="Use fewer experts per rank or fewer ranks per all_to_all_vdev call (split the exchange), and check that "
        "the split tensors have one entry per rank (and expert).",
    ),
    "nvshmem_exchangeSplitAndOffset_267": _NVSHMEM_TEAM,
    "nvshmem_tile_reduce_kernel_938": _NVSHMEM_TEAM,
    "nvshmem_exchangeSplitAndOffset_274": _NVSHMEM._replace(
        title="more ranks than the NVSHMEM all-to-all supports",
        explanation="all_to_all_vdev ran in a group with more ranks than one block of its kernel handles.",
        fix="Run the exchange in smaller groups (a sub-group per node or per expert-parallel group).",
    ),
    "nvshmem_exchangeSplitAndOffset_2d_476": _NVSHMEM._replace(
        title="all_to_all_vdev_2d splits add up to more than the input",
        explanation="The in_splits given to all_to_all_vdev_2d add up to more rows than the input tensor has "
        "(size(0)).",
    ),
    "nvshmem_exchangeSplitAndOffset_2d_496": _NVSHMEM._replace(
        title="negative split in all_to_all_vdev_2d",
        explanation="A split size given to all_to_all_vdev_2d is negative: a count of tokens per expert and rank "
        "computed as a difference that went below zero.",
    ),
    "nvshmem_prefixSum_warp_512": _NVSHMEM._replace(
        title="too many splits for the NVSHMEM all-to-all",
        explanation="all_to_all_vdev_2d got more split entries per rank than its warp-wide prefix sum handles "
        "(at most one warp, 32).",
        fix="Use fewer experts per rank in one all_to_all_vdev_2d call (split the exchange).",
    ),
    "nvshmem_allToAllV_2d_573": _NVSHMEM_TILE,
    "nvshmem_allToAllV_2d_576": _NVSHMEM_TILE,
    "nvshmem_allToAllV_324": _internal(
        "NVSHMEM all_to_all_vdev", "the kernel's blocks cover each peer's share exactly"
    ),
    # torch.compile (Inductor-generated Triton kernels)
    "inductor_triton_index_lower_only": Text(
        "negative index in a torch.compile kernel",
        "Inside a torch.compile'd graph an index is negative: the generated kernel checked only 0 <= index (the "
        "upper bound was already proven). Typical: -1 or -100 used as a 'no value' marker reached an indexing op.",
        "Run the model once without torch.compile to get the eager op's own message, and keep -1/-100 markers "
        "away from embeddings, gathers and x[idx] (mask them out first).",
    ),
    "inductor_triton_index_upper_only": Text(
        "index out of bounds in a torch.compile kernel",
        "Inside a torch.compile'd graph an index reached the size of the dimension it indexes: the generated kernel "
        "checked only index < SIZE (the index is known to be >= 0). SIZE is often a vocabulary size, a maximum "
        "length or a number of classes.",
        "Fix it as in eager mode (token id >= vocabulary size, position >= maximum length, bad gather index); run "
        "once without torch.compile to get the eager op's message.",
    ),
    "inductor_triton_nan_assert": Text(
        "NaN or inf inside a torch.compile kernel",
        "A value computed inside a torch.compile'd graph is NaN or +/-inf. This check exists only because "
        "TORCHINDUCTOR_RUNTIME_TRITON_NAN_ASSERTS=1 (torch._inductor.config.runtime_triton_nan_asserts) is set.",
        "Find the op that produces it: run without torch.compile under torch.autograd.set_detect_anomaly(True) or "
        "with torch.isfinite checks, then fix the numerics (learning rate, fp16 overflow, log of 0, division by 0).",
    ),
    "inductor_triton_assert_async_msg": Text(
        "a tensor check failed inside a Triton kernel",
        "A tl.device_assert in a Triton kernel failed, and the printed text is its message. Inside a torch.compile'd "
        "graph this is a tensor check compiled into the kernel (torch._assert_async(cond, msg), or an op's own "
        "check such as multinomial's); in your own Triton kernel it is your device_assert's message.",
        "Read the message: it names the check. Run the code once without torch.compile to get the eager op's error "
        "at its own line.",
    ),
    # Internal invariants: never a made-up data cause
    "nll_loss_1d_single_thread_launch": _internal("nll_loss", "the 1-D reduction kernel runs as a single thread"),
    "nll_loss_backward_2d_index_overflow": _internal(
        "nll_loss backward", "the flat offset into the gradient does not overflow"
    ),
    "nll_loss2d_forward_input_index_overflow": _internal(
        "nll_loss2d (cross_entropy on N x C x H x W)",
        "the flat offset into the input does not overflow; it follows "
        "the label check, so a bad label prints `t >= 0 && t < n_classes` instead",
        extra=_OVERFLOW,
    ),
    "nll_loss2d_backward_grad_input_index_overflow": _internal(
        "nll_loss2d backward", "the flat offset into the gradient does not overflow", extra=_OVERFLOW
    ),
    "tma_scatter_add_requires_sm90": _internal(
        "scatter_add_/index_add_ (TMA path)", "the TMA kernel only runs on sm_90 and later GPUs"
    ),
    "depthwise_conv3d_backward_weight_block": _internal(
        "depthwise Conv3d backward", "the kernel was launched with a power-of-two block size"
    ),
    "topk_gather_write_overflow": _internal("topk", "no more elements qualified than k", extra=_NAN_SELECT),
    "topk_gather_write_start": _internal("topk", "the output slice holds every element written", extra=_NAN_SELECT),
    "radix_select_find_pattern_failed": _internal(
        "topk / kthvalue / median", "radix selection found the k-th value", extra=_NAN_SELECT
    ),
    "thc_topk_find_pattern_failed": _internal(
        "topk / kthvalue / median",
        "radix selection found the k-th value",
        extra=" Old (THC) releases had a known bug here on some sizes: upgrading PyTorch is the fix.",
    ),
    "warp_merge_sort_block_x": _internal("sort / argsort", "the warp merge sort was launched one warp wide"),
    "warp_merge_sort_block_y": _internal("sort / argsort", "the warp merge sort's block height is within its limit"),
    "reduce_output_vec_size": _internal(
        "a reduction (sum, mean, max, norm, ...)", "its vectorised output is one element wide"
    ),
    "reduce_unreachable": _internal(
        "a reduction (sum, mean, max, norm, ...)", "a code path meant never to run was not taken"
    ),
    "reduce_noutputs": _internal("a reduction (sum, mean, max, norm, ...)", "it writes a single output"),
    "vectorized_elementwise_vec8_128b_arch": _internal(
        "an elementwise op",
        "the 8-wide vectorised kernel only runs on the GPU generations it was built for",
        extra=" A wheel built for another GPU generation can reach it: check that the torch build matches the GPU.",
    ),
    "vectorized_elementwise_vec8_arch": _internal(
        "an elementwise op",
        "the 8-wide vectorised kernel only runs on the GPU generations it was built for",
        extra=" A wheel built for another GPU generation can reach it: check that the torch build matches the GPU.",
    ),
    **{
        f"dynamic_cast_quantized_{q}_{side}": _internal(
            "an op on a quantized tensor",
            f"the {'source' if side == 'src' else 'destination'} dtype is "
            f"{ {'qint8': 'QInt8', 'quint8': 'QUInt8', 'qint32': 'QInt32'}[q] } as the kernel was built for",
        )
        for q in ("qint8", "quint8", "qint32")
        for side in ("src", "dest")
    },
    "layer_norm_vectorized_double": _internal(
        "layer_norm", "the vectorised kernel never runs on float64", extra=" Casting the input to float32 avoids it."
    ),
    # Third-party kernels users hit
    "tp_torch_scatter_segment_coo_unsorted": _UNSORTED,
    "tp_torch_scatter_segment_coo_broadcast_unsorted": _UNSORTED,
    "tp_torch_scatter_thc_index_out_of_range": _SCATTER._replace(
        title="torch_scatter index out of bounds",
        explanation="An index given to an old torch_scatter (0.x/1.0) scatter op is negative or not smaller than "
        "out.size(dim).",
        fix="Keep the index values in 0..out.size(dim)-1, or upgrade torch_scatter (newer releases hand scatter to "
        "PyTorch's scatter_reduce, whose messages this tool explains).",
    ),
    "tp_mmcv_assign_score_withk_cn": Text(
        "kNN center index out of range in mmcv's assign_score_withk",
        "mmcv.ops.assign_score_withk (PAConv, mmdet3d) got a center-point index (knn_idx[..., 0]) that is not "
        "smaller than the number of points N0.",
        "Make knn_idx hold valid point indices (0..N0-1) of the same point cloud: build it from the same points, "
        "and check knn_idx.max() < points.size(1).",
    ),
    **{
        f"tp_mmcv_assign_score_withk_{k}": _internal(
            "assign_score_withk", f"a loop index stays below its bound ({cond})", who="mmcv"
        )
        for k, cond in (("b", "b < B"), ("kn", "kn < N0"), ("o", "o < O"), ("n", "n < N1"))
    },
    **dict.fromkeys(
        (
            "tp_vllm_flashmla_my_num_splits",
            "tp_vllm_flashmla_now_req_idx",
            "tp_vllm_flashmla_actual_num_splits",
            "tp_vllm_flashmla_now_idx",
        ),
        _FLASHMLA,
    ),
    "tp_vllm_deepselect_nan": Text(
        "NaN in the scores of vLLM's top-k selection",
        "vLLM's sparse-attention top-k kernel (_deepselect_C) found NaN in its scores, printed this line and trapped "
        "on purpose: the error then reads 'unspecified launch failure', not 'device-side assert triggered'. The NaN "
        "comes from the model's activations (fp16 overflow, broken weights).",
        "Check the model's weights and dtype (bf16 instead of fp16), and report it to vLLM with the model and "
        "request if the weights are fine.",
    ),
}

GENERIC = Text(
    "a kernel assertion failed (not in the catalogue)",
    "A check inside a GPU kernel failed, and the catalogue has no entry for its text: it may come from a custom "
    "or third-party kernel, or from a PyTorch release newer than the catalogue. The kernel's own words below name "
    "the condition that was violated.",
    "Restart with CUDA_LAUNCH_BLOCKING=1 (and validators on) so the failing call raises at its own "
    "line, or run the same code on the CPU, where most of these checks raise a readable error.",
)

# What a report says of a line the catalogue does not know: the kernel's own words, the site folded below.
NOT_IN_CATALOGUE = "Not in the catalogue. The kernel reported: `{condition}` failed in {where}.{func}"
NOT_IN_CATALOGUE_BARE = (
    "Not in the catalogue. The kernel at {where} failed a check whose printed condition is empty.{func}"
)

#: The families of the catalogue, in the order the README and docs/causes.md list them.
FAMILY_TITLES: dict[str, str] = {
    "labels": "class labels (cross_entropy, nll_loss, multi_margin_loss)",
    "bce": "binary_cross_entropy input or target outside [0, 1]",
    "embedding": "embeddings (Embedding, EmbeddingBag, max_norm)",
    "indexing": "indexing, gather, scatter, index_* ops",
    "sampling": "sampling (multinomial, bernoulli, poisson)",
    "tensor_checks": "tensor checks run on the GPU (_assert_async)",
    "other_ops": "other ops (repeat_interleave, unpooling, fractional max pooling, segment_reduce, sparse tensors)",
    "compile": "torch.compile (Inductor-generated Triton kernels)",
    "moe": "MoE grouped GEMM (torch._grouped_mm, torch._scaled_grouped_mm)",
    "distributed": "distributed (NCCL NaN check, symmetric memory, NVSHMEM all-to-all)",
    "internal": "PyTorch's internal invariants (never fail on valid input)",
    "third_party": "third-party kernels (torch_scatter, mmcv, vLLM)",
}

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

#: Honest when unsure: with no assertion line and no failure point in the frames, the likely causes in the order
#: they are seen in reports, each with what to check; keyed by what the frames show (a framework) or "any".
_TOKEN_IDS_CANDIDATE = (
    "token ids >= the vocabulary (the embedding's num_embeddings / config.vocab_size): tokens added to the tokenizer "
    "(add_tokens, add_special_tokens, a new pad token) without model.resize_token_embeddings(len(tokenizer)), a "
    "pad_token_id / eos_token_id / mask_token_id outside the vocabulary, or ids from another tokenizer or word map "
    "than the model's: compare input_ids.max() with vocab_size and len(tokenizer)"
)
_POSITIONS_CANDIDATE = (
    "position ids >= max_position_embeddings: a sequence longer than the model accepts (512 for BERT-style models, "
    "514 for RoBERTa, 1024 for GPT-2, the context length of others; generate() counts the prompt plus the new "
    "tokens): compare input_ids.shape[1] with it, and truncate (truncation=True, max_length=...) or split long "
    "inputs"
)
_TOKEN_TYPES_CANDIDATE = (
    "token_type_ids >= the config's type_vocab_size: models pretrained without segments (RoBERTa, XLM-R, "
    "Longformer, DistilBERT-style) have type_vocab_size 1, so a second segment's id 1 is past the table; pass no "
    "token_type_ids (or all zeros) to them"
)
#: what else a sync (a boolean mask, a copy, a thrust algorithm) may have surfaced, after class labels
_DETECTION_HEAD_CANDIDATE = (
    "a detection head's class ids >= its NUM_CLASSES / num_classes (Faster/Mask R-CNN heads count the "
    "background): compare the largest category id with the configured class count"
)
_EARLIER_INDEX_CANDIDATE = (
    "an index past the size it indexes in the code just before: rerun with CUDA_LAUNCH_BLOCKING=1 to see it"
)
_ONE_HOT_CANDIDATE = (
    "class labels one-hot encoded (scatter_(1, labels, 1), one_hot) or picked with gather(1, labels) in a loss "
    "(focal, dice, a label-smoothing or custom cross-entropy): a label >= the number of classes, 1-based labels, or "
    "a void value such as 255 in a segmentation mask (such losses have no ignore_index: mask those pixels out or "
    "remap them first): compare labels.unique() with num_classes"
)
_SCATTERED_NODES_CANDIDATE = (
    "node or row ids aggregated with scatter (a graph's edge_index, a batch vector): compare edge_index.max() with "
    "the number of nodes (x.size(0))"
)
_OTHER_DIM_CANDIDATE = (
    "another index along the gathered dimension (actions gathered from Q-values, top-k or sequence positions, "
    "anchor or point ids): compare index.max() with input.size(dim); rerun with CUDA_LAUNCH_BLOCKING=1 to see the "
    "call. Rarely, indices torch itself made (topk, sort, argmax on CUDA) are the bad ones while the same call on "
    "the CPU is right: that is a PyTorch bug, fixed by upgrading PyTorch"
)
UNSURE: dict[str, tuple[str, ...]] = {
    "transformers": (
        "token ids >= the embedding's size (tokens added to the tokenizer without "
        "model.resize_token_embeddings(len(tokenizer)), ids from another tokenizer): compare input_ids.max() with "
        "model.config.vocab_size and len(tokenizer)",
        "labels outside 0..num_labels-1: compare labels.min()/max() with model.config.num_labels (-100 marks "
        "ignored positions)",
        "sequences longer than max_position_embeddings: compare input_ids.shape[1] with "
        "model.config.max_position_embeddings",
    ),
    "detection": (
        "a class id >= the number of classes: compare the largest class id in the label files with nc / num_classes "
        "(whether the background counts differs: torchvision's and maskrcnn-benchmark's num_classes count it, "
        "detectron2's NUM_CLASSES, mmdetection's (2.x and later) and YOLO's nc do not; COCO's category ids run to "
        "90 with gaps)",
        "boxes outside the image or with zero size: check the label files' coordinates",
    ),
    "loss": (
        "class labels outside 0..C-1 (the usual cause when a loss on the labels is in the traceback): compare "
        "labels.min()/max() with the model's number of outputs; segmentation masks must hold class indices (not "
        "grey or colour values, not raw dataset ids such as Cityscapes' labelIds instead of its trainIds) with void "
        "pixels (255) passed as ignore_index",
        "an index the loss builds from the targets (a one-hot scatter, a gather) past its size: compare the class "
        "count the loss was given (num_classes, n_classes) with the model's outputs",
        "BCELoss on values outside [0, 1]: use BCEWithLogitsLoss on raw logits",
    ),
    "segmentation": (
        "mask values outside 0..C-1: np.unique() a few label images; they must hold class indices (not grey or "
        "colour values, not raw dataset ids such as Cityscapes' labelIds instead of its trainIds), with void pixels "
        "(255) passed as ignore_index",
        "the model built for fewer classes than the masks use: compare the head's output channels (num_classes) "
        "with the largest mask value + 1",
        "masks resized with bilinear interpolation, which invents in-between values: resize them with nearest",
    ),
    "sync": (
        "class labels outside 0..C-1 given to a classification loss just before (torch.nonzero and boolean masks "
        "synchronise, so an earlier kernel's failure surfaces there): compare labels.min()/max() with the number "
        "of outputs",
        _DETECTION_HEAD_CANDIDATE,
        _EARLIER_INDEX_CANDIDATE,
    ),
    "graph": (
        "an edge_index node id >= the number of nodes: compare edge_index.max() with x.size(0)",
        "a batch vector or index from another graph: check data.validate()",
    ),
    "any": (
        "class labels outside 0..C-1: compare labels.min()/max() with the model's number of outputs (its "
        "num_classes / num_labels / out_features)",
        "embedding ids >= num_embeddings: token ids past the vocabulary (tokens added to a tokenizer without "
        "model.resize_token_embeddings(len(tokenizer)), ids from another tokenizer), or a categorical column's codes "
        "past the cardinality its embedding was built with: compare the ids' max with the embedding's size",
        "a detector's box class ids >= its class count (num_classes, NUM_CLASSES, nc): compare the largest category "
        "id with it (ids must run from 0 without gaps; whether the background counts differs by framework)",
    ),
    # a serving engine's traceback: no loss runs there, so what it indexes is the prompt's ids and positions
    "serving": (
        "prompt token ids >= the model's vocabulary: token ids made by another tokenizer than the model's, or a "
        "special token (pad, eos, an image or tool token) the embedding lacks: compare the largest prompt token "
        "id with the model's vocab_size",
        "positions past the model's position table: the engine's max_model_len above the model's "
        "max_position_embeddings (514 for RoBERTa / XLM-R embedding and reranker models): set max_model_len to at "
        "most it, and truncate longer prompts",
        "sampling from NaN/inf logits (fp16 overflow): load the model in bfloat16 or float32",
    ),
    # cuBLAS could not make its handle after the assert: the failing kernel ran before that thread's first matmul
    "cublas_handle": (
        _TOKEN_IDS_CANDIDATE + " (a model's embedding lookup runs before its first matmul, where cuBLAS makes its "
        "handle)",
        "class labels outside 0..C-1, when the handle failure is in backward (the backward pass makes its own cuBLAS "
        "handle after the loss ran): compare labels.min()/max() with the model's number of outputs (num_labels / "
        "num_classes); positions the loss must skip are marked -100 (its ignore_index), not -1",
        _POSITIONS_CANDIDATE,
    ),
    # an embedding lookup failed, and the text does not say which table: token ids or positions
    "lookup": (
        _TOKEN_IDS_CANDIDATE,
        _POSITIONS_CANDIDATE,
        CODE_CHECKS["category_codes"],  # tabular, recommender and forecasting models embed their categories
        # a graph network's message passing gathers node features with index_select along edge_index
        "node ids of a graph network (its message passing gathers node features with index_select): an edge_index "
        "entry >= x.size(0), or a conv built with cached=True (GCNConv, SGConv, ChebConv) given another graph than "
        "its first, whose cached edges index the first graph's nodes",
        _TOKEN_TYPES_CANDIDATE,  # segment ids given to a model pretrained with one segment
    ),
    "lookup_positions": (
        _POSITIONS_CANDIDATE,
        _TOKEN_IDS_CANDIDATE,
    ),
    # an index into a dimension of tens of thousands of entries: a vocabulary, most often
    "large_table": (
        _TOKEN_IDS_CANDIDATE,
        "ids of another large table (item, user or node ids, a category encoding): compare index.max() with the "
        "table's size, and build the table from every id the data can hold",
    ),
    # a gather/scatter failed (its kernel line or CPU message names the op), and the text does not say what the
    # index counts: class labels in a loss first, then node ids, then any other index
    "scatter_gather": (
        _ONE_HOT_CANDIDATE,
        _SCATTERED_NODES_CANDIDATE,
        _OTHER_DIM_CANDIDATE,
    ),
    # the CPU message names dimension 0: rows (graph nodes, items) before class labels
    "scatter_gather_rows": (
        _SCATTERED_NODES_CANDIDATE,
        _ONE_HOT_CANDIDATE,
        _OTHER_DIM_CANDIDATE,
    ),
    # the CPU message names dimension 1, the class dimension of (N, C, ...) scores and one-hot targets
    "class_dim": (
        _ONE_HOT_CANDIDATE,
        _OTHER_DIM_CANDIDATE,
        _SCATTERED_NODES_CANDIDATE,
    ),
    # a copy or a storage call surfaced an earlier kernel's failure (the old error names the file)
    "copy": (
        "class labels outside 0..C-1 given to a loss just before (a copy to or from the GPU, .cuda(), .cpu(), "
        ".item(), synchronises, so an earlier kernel's failure surfaces there): compare labels.min()/max() with the "
        "number of outputs; segmentation masks must hold class indices, with void pixels (255) passed as "
        "ignore_index",
        _DETECTION_HEAD_CANDIDATE,
        _EARLIER_INDEX_CANDIDATE,
    ),
    # a thrust algorithm (sort, reduce, scan) surfaced an earlier kernel's failure
    "thrust": (
        "class labels outside 0..C-1 given to a loss just before (thrust's sorts, reductions and scans behind "
        "torch.unique, torch.sort, sums and masks synchronise, so an earlier kernel's failure surfaces there): "
        "compare labels.min()/max() with the number of outputs",
        _DETECTION_HEAD_CANDIDATE,
        _EARLIER_INDEX_CANDIDATE,
    ),
    # a lookup in a paste that feeds word boxes to a layout model: a box coordinate, then positions, then token ids
    "lookup_boxes": (
        "bbox coordinates outside 0..1000 (boxes not normalized to the page, or past its edge), or boxes with x1 < x0 "
        "or y1 < y0: the layout model looks each coordinate and the box's width and height up in tables of "
        "max_2d_position_embeddings rows; compare bbox.min()/max() with 0 and 1000",
        _POSITIONS_CANDIDATE,
        _TOKEN_IDS_CANDIDATE,
    ),
    # a Triton kernel reported the assert: most often it only found an earlier kernel's, the embedding lookup first
    "triton_surfaced": (
        _TOKEN_IDS_CANDIDATE + " (the data's token ids may come from a larger vocabulary than the model's vocab_size)",
        "class labels outside 0..C-1 given to the loss (a fused cross-entropy's labels): compare labels.min()/max() "
        "with the model's vocab_size or number of outputs, and keep -100 as the only value outside it",
        _POSITIONS_CANDIDATE,
    ),
    # a lookup in a paste that builds token_type_ids by hand: the segment ids, then token ids, then positions
    "lookup_token_types": (
        _TOKEN_TYPES_CANDIDATE,
        _TOKEN_IDS_CANDIDATE,
        _POSITIONS_CANDIDATE,
    ),
}
#: A weak failure point (frame_points' ``unsure``: a loss or labels seen in the frames, a sync that only surfaced
#: the failure) names the likeliest cause and ranks it with the others (UNSURE's "loss", "segmentation", "sync").
UNSURE_POINT_LEAD = (
    "The frames or the error point to this cause but do not prove it; the likely causes, most common first:"
)
#: A failure point seen only at a later call that used the result (frame_points: late frames).
FRAME_LATE = (
    "The frame where it surfaced ({where}) only used the result: without CUDA_LAUNCH_BLOCKING=1 CUDA reports a "
    "failure at a later call. The likely op is {earlier}."
)
UNSURE_LEAD = "Nothing in the text decides between these; the likely causes, most common first:"
UNSURE_LOOKUP_LEAD = "The text does not say which index this is; the likely ones, most likely first:"

# ROCm builds: PyTorch's kernel checks call abort() and print nothing (unless PyTorch was built with
# C10_USE_ROCM_KERNEL_ASSERT or TORCH_USE_HIP_DSA); the error then reads "HIP error: unspecified launch failure"
# (hipErrorLaunchFailure, 719) or "device-side assert triggered", and no assertion line exists in any log.
ROCM_NO_LINE = Text(
    "a GPU kernel stopped on a ROCm build (no assertion line exists)",
    "This is a ROCm (AMD) build of PyTorch. There, a failed kernel check (the ones that print an assertion line "
    "on CUDA builds: class labels >= the number of classes, token ids >= the vocabulary size, BCELoss on values "
    "outside [0, 1], ...) calls abort() without printing anything, and the error reads 'HIP error: unspecified "
    "launch failure'. No log holds the assertion line: it was never printed. A real crash (an out-of-bounds "
    "access without a check) reads the same.",
    "Rerun the same code on the CPU, where these checks raise a readable error at their own line, or restart with "
    "validators on (they check the inputs before launch on any GPU). AMD_SERIALIZE_KERNEL=3 makes ROCm report the "
    "failure at the call that launched it.",
)
_HIP_MARKS = ("hip error", "hiperror", "rocm")


def no_line_text(message: str, sticky: bool = False) -> Text | None:
    """The words for a failure that came with no assertion line: ROCm's silent abort, or a line not captured.

    ``sticky``: a launch failure rather than a device-side assert; only a ROCm build changes its words (None
    otherwise: the sticky error's own text stands).
    """
    lowered = message.lower()
    rocm = any(mark in lowered for mark in _HIP_MARKS)
    if rocm and (not sticky or "launch failure" in lowered or "hiperrorlaunchfailure" in lowered):
        return ROCM_NO_LINE
    return None if sticky else NO_LINE


# Causes with no kernel assertion of their own (so not in device_asserts.json), which the
# validators can still name before launch.
EXTRA_TEXTS: dict[str, Text] = {
    # named from a traceback's frames (diagnose/frame_points.py): the kernel is an embedding's or a loss's, the
    # frame says which quantity the index counts
    "position_ids_out_of_range": Text(
        "position id out of range (sequence too long)",
        "A position embedding got a position id >= its size (the config's max_position_embeddings): a sequence is "
        "longer than the model accepts, or position_ids were built for a longer context. On the GPU the lookup's "
        "kernel asserts; on the CPU it reads 'index out of range in self'.",
        "Truncate the inputs to the model's maximum length (tokenizer(..., truncation=True, max_length=...)), or "
        "use a model made for longer contexts.",
    ),
    "token_type_ids_out_of_range": Text(
        "token type id out of range",
        "The token-type (segment) embedding got an id >= the config's type_vocab_size: the tokenizer returned "
        "segment ids the model was not trained with (RoBERTa and DistilBERT have one segment), or token_type_ids "
        "were built by hand.",
        "Pass token_type_ids only when the model has segments (return_token_type_ids=False otherwise), and use the "
        "tokenizer of the same checkpoint.",
    ),
    "detection_class_out_of_range": Text(
        "detection class id out of range",
        "A detection loss or label assigner indexed its class scores with a class id >= the number of classes the "
        "model was built with: a label file holds a larger id than the data's nc, or num_classes leaves out the "
        "background class the model counts.",
        "Make every class id in the labels 0..nc-1 (or 1..num_classes-1 with background 0 for torchvision models), "
        "and set the model's number of classes from the same list of names as the data.",
    ),
    "one_hot_class_out_of_range": Text(
        "class value out of range in one_hot",
        "F.one_hot (or a one-hot built with scatter_) got a class value >= num_classes or negative: the labels hold "
        "more classes than the count given, 1-based labels, or a void value such as 255.",
        "Make every label 0..num_classes-1 before one-hot encoding (num_classes = the number of classes the labels "
        "use), and mask void values out first.",
    ),
    "graph_node_index_out_of_range": Text(
        "node id out of range in a graph",
        "A message-passing or scatter step indexed node features with a node id >= the number of nodes: the "
        "edge_index refers to nodes that are not in x (nodes filtered or batched without re-indexing, or a graph "
        "built with the wrong num_nodes).",
        "Keep every edge_index entry below x.size(0): re-index edges after filtering nodes, and let the loader batch "
        "graphs (it offsets edge_index for each graph).",
    ),
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
