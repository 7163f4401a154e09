"""Failure points of the vision family (class labels in classification / segmentation, detection class ids):
what a person reading a pasted traceback would conclude from its frames, each from a synthetic paste."""

from __future__ import annotations

import pytest
from helpers.pastes import ASSERT
from helpers.pastes import first as _first
from helpers.pastes import trace as _trace

from cudaassert_ipy.diagnose.causes import GENERIC_ID
from cudaassert_ipy.diagnose.causes.texts import UNSURE, UNSURE_LEAD, UNSURE_POINT_LEAD

SITE = "/home/ana/env/lib/python3.10/site-packages/"


MAIN = ("tools/train_net.py", 40, "<module>", "main(args)")
CASES = {
    "detr set criterion": (
        (
            "/work/detr_fork/models/criterion.py",
            118,
            "loss_labels",
            "loss_ce = F.cross_entropy(src_logits.transpose(1, 2), target_classes, self.empty_weight)",
        ),
        "detection_class_out_of_range",
        "num_classes",
    ),
    "rt-detr style varifocal": (
        (
            "/work/rtdetr/src/zoo/rtdetr/rtdetr_criterion.py",
            88,
            "loss_vfl",
            "target = F.one_hot(target_classes, num_classes=self.num_classes + 1)[..., :-1]",
        ),
        "detection_class_out_of_range",
        "no-object",
    ),
    "detr class targets": (
        ("/work/somewhere/set_loss.py", 61, "compute", "target_classes[idx] = target_classes_o"),
        "detection_class_out_of_range",
        "largest category id",
    ),
    "detr denoising queries": (
        ("/work/mask_dino/maskdino/modeling/transformer_decoder/dn.py", 61, "prepare_for_dn", "x = label_enc(m)"),
        "detection_class_out_of_range",
        "largest category id",
    ),
    "giou after the assert": (
        ("/work/dn_detr/util/box_ops.py", 51, "generalized_box_iou", "assert (boxes1[:, 2:] >= boxes1[:, :2]).all()"),
        "detection_class_out_of_range",
        "num_classes",
    ),
    "yolov2 region loss": (
        ("/work/yolo2_fork/region_loss.py", 140, "forward", "loss_cls = self.class_scale * self.ce(cls, tcls)"),
        "detection_class_out_of_range",
        "classes=",
    ),
    "yolo build_targets": (
        ("/work/my_det/utils/targets.py", 77, "build_targets", "tcls[b, best_n, gj, gi] = target_label"),
        "detection_class_out_of_range",
        "filters=(classes + 5) * anchors",
    ),
    "mmcv focal loss": (
        (
            SITE + "mmcv/ops/focal_loss.py",
            55,
            "forward",
            "ext_module.sigmoid_focal_loss_forward(input, target, weight, output, gamma=ctx.gamma, alpha=ctx.alpha)",
        ),
        "detection_class_out_of_range",
        "without the background",
    ),
    "a user's focal loss": (
        ("/work/cls/losses/focal_loss.py", 30, "forward", "class_mask.scatter_(1, ids.data, 1.)"),
        "one_hot_class_out_of_range",
        "num_classes",
    ),
    "semseg cross_entropy2d": (
        ("/work/semseg/loss/loss.py", 20, "cross_entropy2d", "loss = F.cross_entropy(input, target, weight=w)"),
        "nll_loss2d_target_out_of_range",
        "ignore_index=255",
    ),
    "ohem loss called": (
        ("/work/seg/train.py", 90, "train", "loss = OhemCrossEntropy2dTensor(ignore_label=255)(pred, gt)"),
        "nll_loss2d_target_out_of_range",
        "nearest-neighbour",
    ),
    "monai loss": (
        (SITE + "monai/losses/dice.py", 160, "forward", "target = one_hot(target, num_classes=n_pred_ch)"),
        "nll_loss2d_target_out_of_range",
        "out_channels",
    ),
    "mmseg decode head": (
        (
            SITE + "mmseg/models/decode_heads/decode_head.py",
            260,
            "loss_by_feat",
            "loss[loss_decode.loss_name] = loss_decode(seg_logits, seg_label, weight=seg_weight)",
        ),
        "nll_loss2d_target_out_of_range",
        "reduce_zero_label",
    ),
    "torchvision sampler": (
        (
            SITE + "torchvision/models/detection/_utils.py",
            48,
            "__call__",
            "positive = torch.where(matched_idxs_per_image >= 1)[0]",
        ),
        "detection_class_out_of_range",
        "background",
    ),
    "maskrcnn-benchmark box coder": (
        (
            "/work/maskrcnn-benchmark/maskrcnn_benchmark/modeling/box_coder.py",
            30,
            "encode",
            "ex_widths = proposals[:, 2] - proposals[:, 0] + TO_REMOVE",
        ),
        "detection_class_out_of_range",
        "MODEL.ROI_BOX_HEAD.NUM_CLASSES",
    ),
    "fcos fork of maskrcnn-benchmark": (
        (
            "/work/FCOS/fcos_core/modeling/rpn/fcos/loss.py",
            200,
            "__call__",
            "cls_loss = self.cls_loss_func(box_cls_flatten, labels_flatten.int()) / num_pos_avg_per_gpu",
        ),
        "detection_class_out_of_range",
        "MODEL.FCOS.NUM_CLASSES",
    ),
    "ssd.pytorch multibox": (
        (
            "/work/ssd.pytorch/layers/modules/multibox_loss.py",
            99,
            "forward",
            "loss_c = log_sum_exp(batch_conf) - batch_conf.gather(1, conf_t.view(-1, 1))",
        ),
        "detection_class_out_of_range",
        "0-based",
    ),
    "ssd box head": (
        (
            "/work/SSD/ssd/modeling/box_head/loss.py",
            40,
            "forward",
            "classification_loss = F.cross_entropy(confidence.view(-1, num_classes), labels[mask], reduction='sum')",
        ),
        "detection_class_out_of_range",
        "background as class 0",
    ),
    "yolov5-style class targets": (
        ("/content/yolo-fork-master/utils/loss.py", 140, "__call__", "t[range(n), tcls[i]] = self.cp"),
        "detection_class_out_of_range",
        "0..num_classes-1",
    ),
    "retinanet focal loss": (
        (
            "/work/pytorch-retinanet/retinanet/losses.py",
            120,
            "forward",
            "targets[positive_indices, assigned_annotations[positive_indices, 4].long()] = 1",
        ),
        "detection_class_out_of_range",
        "contiguous 0-based",
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_a_vision_loss_in_the_frames_names_the_cause_and_its_frameworks_fix(name: str) -> None:
    frame, cause, word = CASES[name]
    d = _first(_trace(MAIN, frame))
    assert d.cause_id == cause
    assert word in (d.likely_fix or "")
    assert d.basis.startswith("a frame: ")
    assert not d.candidates and "likely" not in d.headline  # a framework's loss decides: no ranked list


def test_a_detr_matcher_pasted_without_its_file_lines_names_the_class_count() -> None:
    text = (
        "    cost_giou = -generalized_box_iou(box_cxcywh_to_xyxy(pred_boxes), box_cxcywh_to_xyxy(gt_boxes))\n" + ASSERT
    )
    d = _first(text)
    assert d.cause_id == "detection_class_out_of_range"
    assert d.basis == "the error text (detr_matcher_in_paste)"
    assert "num_classes" in (d.likely_fix or "")
    assert _first(ASSERT).cause_id == GENERIC_ID  # the bare error alone still names nothing


def test_a_users_loss_on_the_labels_names_class_labels_and_ranks_the_others() -> None:
    d = _first(
        _trace(
            MAIN,
            ("train.py", 88, "<module>", "total = total + seg_loss_fn(pred[k], target[k], dev)"),
            ("train.py", 30, "seg_loss_fn", "target = target.cuda(dev)"),
        )
    )
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert d.candidates[0] == UNSURE_POINT_LEAD != UNSURE_LEAD
    assert d.candidates[1:] == UNSURE["loss"] and "BCE" in d.candidates[-1]
    assert d.headline.endswith("· likely class label out of range")  # ranked first, not decided: no op named
    # a regression loss on the labels is not a class-label failure: nothing decides there
    mse = _first(_trace(MAIN, ("train.py", 88, "<module>", "l = mse_loss_fn(pred, target)")))
    assert mse.cause_id == GENERIC_ID and mse.candidates[0] == UNSURE_LEAD


def test_segmentation_labels_in_the_frames_name_the_mask_values() -> None:
    d = _first(
        _trace(
            MAIN,
            ("/work/seg/model.py", 42, "forward", "acc = self.accuracy(pred, batch['seg_label'])"),
            ("/work/seg/model.py", 17, "accuracy", "return hits.float() / (total.float() + 1e-10)"),
        )
    )
    assert d.cause_id == "nll_loss2d_target_out_of_range"
    assert d.candidates[1:] == UNSURE["segmentation"]
    assert "trainIds" in d.candidates[1] and "ignore_index=255" in (d.likely_fix or "")


def test_a_loss_value_read_late_names_the_loss_before_it_and_says_it_surfaced_late() -> None:
    d = _first(_trace(MAIN, ("train.py", 120, "train_epoch", "meter.update(loss.item(), images.size(0))")))
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert any("only used the result" in n for n in d.notes)
    assert d.candidates[1:] == UNSURE["loss"]


def test_copy_if_surfaced_an_earlier_failure_ranks_labels_then_detection_heads() -> None:
    d = _first("RuntimeError: copy_if failed to synchronize: cudaErrorAssert: device-side assert triggered\n")
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert d.basis == "the error text (copy_if_sync)"
    assert d.candidates[1:] == UNSURE["sync"] and "NUM_CLASSES" in d.candidates[2]


def test_cityscapes_in_the_paste_says_train_ids() -> None:
    text = _trace(MAIN, ("/data/cityscapes/tools/train.py", 60, "train", "optimizer.zero_grad()"))
    d = _first(text)
    assert d.cause_id == "nll_loss2d_target_out_of_range"
    assert "labelTrainIds" in (d.likely_fix or "") and "ignore_index=255" in (d.likely_fix or "")
    twin = _first("datasets/cityscapes.py\nIndexError: Target 33 is out of bounds.\n")
    assert twin.cause_id == "nll_loss2d_target_out_of_range" and "trainIds" in (twin.likely_fix or "")


def test_the_kernels_own_class_label_line_stands_over_a_detection_frame() -> None:
    line = (
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
        "thread: [3,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
    )
    d = _first(line + _trace(MAIN, ("/work/yolo2_fork/region_loss.py", 140, "forward", "loss_cls = ce(cls, tcls)")))
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert not d.candidates
    # a generic index check keeps the kernel's cause too; the frame adds its words
    scatter = (
        "/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:365: operator(): block: [0,0,0], "
        'thread: [1,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.\n'
    )
    s = _first(scatter + _trace(MAIN, ("/work/yolo2_fork/region_loss.py", 140, "forward", "y.scatter_(1, t, 1)")))
    assert s.cause_id == "scatter_gather_index_out_of_range_v1" and "classes=" in (s.likely_fix or "")


def test_a_label_in_the_hundreds_says_it_may_be_a_mask_pixel() -> None:
    fix = _first("IndexError: Target 192 is out of bounds.\n").likely_fix or ""
    assert "grey level" in fix and "192" in fix
    assert "grey level" not in (_first("IndexError: Target 7 is out of bounds.\n").likely_fix or "")


def test_a_yolo_grid_cell_past_the_grid_is_a_box_coordinate_not_a_class_id() -> None:
    error = "IndexError: index 20 is out of bounds for dimension 2 with size 20\n"
    d = _first(
        _trace(
            MAIN,
            ("/work/yolo_v3/utils/utils.py", 300, "build_targets", "obj_mask[img_i, best_anchor, cell_y, gi[k]] = 1"),
            error=error,
        )
    )
    assert d.cause_id == "advanced_indexing_out_of_range_v1"
    assert "normalised to [0, 1]" in (d.likely_fix or "")
    cls = _first(
        _trace(
            MAIN,
            (
                "/work/yolo_v3/utils/utils.py",
                310,
                "build_targets",
                "tcls[img_i, best_anchor, gj, gi, target_labels] = 1",
            ),
            error=error,
        )
    )
    assert cls.cause_id == "detection_class_out_of_range"


def test_a_frame_line_cut_at_the_start_of_the_paste_still_counts() -> None:
    text = (
        "line 52, in build_targets\n    conf_mask[b, a, gj[b], gi[b]] = 0\n"
        "IndexError: index 7 is out of bounds for dimension 3 with size 7\n"
    )
    d = _first(text)
    assert d.basis == "a frame: line 52 in build_targets"
    assert "grid" in (d.likely_fix or "")


PASTES = {
    "detectron2 log": (
        "ERROR [03/02 11:20:31 d2.engine.train_loop]: Exception during training:\n",
        "detection_class_out_of_range",
        "cfg.MODEL.ROI_HEADS.NUM_CLASSES",
        "detection",
    ),
    "maskrcnn-benchmark import": (
        "from maskrcnn_benchmark.config import cfg\n",
        "detection_class_out_of_range",
        "MODEL.ROI_BOX_HEAD.NUM_CLASSES",
        "detection",
    ),
    "mmdetection log": (
        "2024-05-01 10:00:00,000 - mmdet - INFO - Epoch [1][50/400]\tlr: 2.0e-02\n",
        "detection_class_out_of_range",
        "bbox_head",
        "detection",
    ),
    "mmsegmentation log": (
        "2024-05-01 10:00:00,000 - mmseg - INFO - Iter [50/80000]\tlr: 1.0e-02\n",
        "nll_loss2d_target_out_of_range",
        "decode_head",
        "segmentation",
    ),
}


@pytest.mark.parametrize("name", PASTES)
def test_a_framework_named_in_the_paste_ranks_its_usual_cause_first(name: str) -> None:
    lines, cause, word, unsure = PASTES[name]
    d = _first(lines + ASSERT)
    assert d.cause_id == cause
    assert word in (d.likely_fix or "")
    assert d.candidates[1:] == UNSURE[unsure]
    # a frame inside the user's loss does not outrank what the paste says the framework is
    framed = _first(lines + _trace(MAIN, ("train.py", 9, "step", "loss = criterion(out, target)")))
    assert framed.cause_id == cause


def test_the_label_value_the_error_names_leads_the_frames_fix() -> None:
    from cudaassert_ipy.diagnose import hints

    d = _first(
        _trace(
            MAIN,
            ("train.py", 70, "train_step", "loss = criterion(logits, masks)"),
            error="IndexError: Target 255 is out of bounds.\n",
        )
    )
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert (d.likely_fix or "").startswith(hints.LABEL_255 + "; ")
    assert hints.FRAME_FIXES["class_labels"] in (d.likely_fix or "")


def test_a_model_that_only_borrows_detectrons_backbone_is_not_read_as_a_detectron2_training() -> None:
    text = (
        '  File "' + SITE + 'detectron2/modeling/backbone/resnet.py", line 449, in forward\n'
        "    x = self.stem(x)\n" + ASSERT
    )
    assert _first(text).cause_id != "detection_class_out_of_range"
    engine = '  File "' + SITE + 'detectron2/engine/train_loop.py", line 155, in train\n    self.run_step()\n'
    assert _first(engine + ASSERT).cause_id == "detection_class_out_of_range"


SCATTER_LINE = (
    "/opt/src/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [12,0,0], "
    'thread: [40,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.\n'
)
THC_GATHER_LINE = (
    "/opt/src/aten/src/THC/THCTensorScatterGather.cu:97: void THCudaTensor_gatherKernel(TensorInfo<Real, "
    "IndexType>, TensorInfo<Real, IndexType>, TensorInfo<long, IndexType>, int, IndexType) [with IndexType = "
    "unsigned int, Real = float, Dims = 3]: block: [3,0,0], thread: [17,0,0] Assertion `indexValue >= 0 && "
    "indexValue < src.sizes[dim]` failed.\n"
)


@pytest.mark.parametrize("line", [SCATTER_LINE, THC_GATHER_LINE], ids=["scatter", "thc gather"])
def test_a_gather_or_scatter_kernel_alone_keeps_its_cause_and_ranks_what_the_index_counts(line: str) -> None:
    from cudaassert_ipy.diagnose.causes.texts import UNSURE_LOOKUP_LEAD

    d = _first(line + ASSERT)
    assert d.cause_id in ("scatter_gather_index_out_of_range_v1", "thc_gather_index_out_of_range")  # as printed
    assert d.candidates[0] == UNSURE_LOOKUP_LEAD and d.candidates[1:] == UNSURE["scatter_gather"]
    assert "255" in d.candidates[1] and "labels" in d.candidates[1] and "edge_index" in d.candidates[2]
    # a frame that says what the index is adds its words and needs no ranking
    framed = _first(line + _trace(MAIN, ("/work/det/yolo_loss.py", 71, "forward", "t.scatter_(1, cls_ids, 1)")))
    assert framed.cause_id == d.cause_id and not framed.candidates and "classes=" in (framed.likely_fix or "")


@pytest.mark.parametrize(("value", "size"), [(550, 8), (37, 21)])
def test_a_cpu_gather_scatter_on_dimension_1_ranks_class_labels_first_and_keeps_its_cause(
    value: int, size: int
) -> None:
    from cudaassert_ipy.diagnose.causes.texts import UNSURE_LOOKUP_LEAD

    d = _first(f"RuntimeError: index {value} is out of bounds for dimension 1 with size {size}\n")
    # the message names gather/scatter, and that cause stands (as a kernel line's does); dimension 1 is the class
    # dimension of scores and one-hot targets, so class labels lead what the index may count
    assert d.cause_id == "scatter_gather_index_out_of_range_v1" and "likely" not in d.headline
    assert d.candidates[0] == UNSURE_LOOKUP_LEAD and d.candidates[1:] == UNSURE["class_dim"]
    assert "labels" in d.candidates[1] and "num_classes" in d.candidates[1]
    # a frame that one-hot encodes the labels names the cause
    framed = _first(
        _trace(
            ("/work/seg/loss.py", 12, "forward", "onehot = torch.zeros_like(pred).scatter_(1, tgt, 1)"),
            error=f"RuntimeError: index {value} is out of bounds for dimension 1 with size {size}\n",
        )
    )
    assert framed.cause_id == "one_hot_class_out_of_range"


def test_dimension_0_or_advanced_indexing_is_not_read_as_a_class_dimension() -> None:
    from cudaassert_ipy.diagnose.causes.texts import UNSURE_LOOKUP_LEAD

    rows = _first("RuntimeError: index 912 is out of bounds for dimension 0 with size 300\n")
    assert rows.cause_id == "scatter_gather_index_out_of_range_v1"
    assert rows.candidates[0] == UNSURE_LOOKUP_LEAD and rows.candidates[1:] == UNSURE["scatter_gather_rows"]
    # IndexError: advanced indexing (x[idx]), not a gather or scatter
    indexed = _first("IndexError: index 6 is out of bounds for dimension 1 with size 6\n")
    assert indexed.cause_id == "advanced_indexing_out_of_range_v1"
    # a graph framework in the frames says what a dimension-1 index counts
    graph = _first(
        _trace(
            ("train_gnn.py", 30, "<module>", "out = model(batch.x, batch.edge_index)"),
            (SITE + "torch_geometric/nn/conv/message_passing.py", 240, "propagate", "out = self.aggregate(out)"),
            error="RuntimeError: index 88 is out of bounds for dimension 1 with size 40\n",
        )
    )
    assert graph.cause_id == "graph_node_index_out_of_range"


@pytest.mark.parametrize(
    "where",
    [
        "/pytorch/aten/src/THC/generic/THCTensorCopy.cpp:70",
        "/opt/conda/conda-bld/pytorch_15/work/aten/src/THC/THCCachingHostAllocator.cpp:265",
    ],
)
def test_an_old_error_that_surfaced_at_a_copy_ranks_an_earlier_loss_first(where: str) -> None:
    d = _first(f"RuntimeError: cuda runtime error (59) : device-side assert triggered at {where}\n")
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert d.basis == "the error text (surfaced_at_copy)"
    assert d.candidates[0] == UNSURE_POINT_LEAD and d.candidates[1:] == UNSURE["copy"]
    assert "likely" in d.headline and "ignore_index" in (d.likely_fix or "") + d.candidates[1]
    # a traceback's own loss line is a frame: it outranks the text
    framed = _first(
        _trace(
            ("seg_train.py", 80, "<module>", "loss = seg_criterion(pred, mask)"),
            error=f"RuntimeError: cuda runtime error (59) : device-side assert triggered at {where}\n",
        )
    )
    assert framed.basis.startswith("a frame: seg_train.py:80")
    # a kernel's file named in the error is not a copy
    kernel = _first(
        "RuntimeError: cuda runtime error (59) : device-side assert triggered at "
        "/pytorch/aten/src/THCUNN/generic/ClassNLLCriterion.cu:110\n"
    )
    assert kernel.basis != "the error text (surfaced_at_copy)"


@pytest.mark.parametrize(
    "lines",
    [
        "Ultralytics YOLOv8.1.4 Python-3.11.5 torch-2.1.2+cu121 CUDA:0 (NVIDIA A10G, 22516MiB)\n",
        "Ultralytics 8.3.12 Python-3.10.12 torch-2.4.1+cu121 CUDA:0 (Tesla T4, 15095MiB)\n",
        "YOLOv5 🚀 v6.2-190-gabcdef12 Python-3.9.16 torch-1.12.1+cu113 CUDA:0 (Tesla V100-SXM2-16GB, 16160MiB)\n",
        "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\n"
        "       3/50      4.12G      1.402      2.871      1.305         61        640: 40%\n",
        "   Epoch       Batch        xy        wh      conf       cls     total   targets      time\n",
    ],
    ids=["yolov8 banner", "ultralytics 8.3 banner", "yolov5 banner", "v8 loss columns", "yolov3 loss columns"],
)
def test_a_yolo_training_in_the_paste_ranks_class_ids_against_nc_first(lines: str) -> None:
    d = _first(lines + ASSERT)
    assert d.cause_id == "detection_class_out_of_range"
    assert d.basis == "the error text (yolo_training_in_paste)"
    assert "nc" in (d.likely_fix or "") and d.candidates[1:] == UNSURE["detection"]
    # a YOLO classifier's training has class folders, not label files: not read as detection
    cls = _first("Ultralytics YOLOv8.1.4 Python-3.11.5\nengine/trainer: task=classify, model=yolov8s-cls.pt\n" + ASSERT)
    assert cls.cause_id != "detection_class_out_of_range"


@pytest.mark.parametrize(
    "code",
    [
        "loss_dict = model(images, targets)",
        "loss_dict = criterion(outputs, targets)",
        "loss, loss_items = compute_loss(pred, targets.to(device))",
        "losses = detector(imgs, annotations)",
    ],
)
def test_a_detectors_training_step_in_the_users_line_ranks_box_class_ids_first(code: str) -> None:
    d = _first(_trace(MAIN, ("/work/proj/engine.py", 55, "train_one_epoch", code)))
    assert d.cause_id == "detection_class_out_of_range"
    assert d.basis == "a frame: engine.py:55 in train_one_epoch"
    assert d.candidates[0] == UNSURE_POINT_LEAD and "likely" in d.headline
    assert "num_classes" in (d.likely_fix or "")


@pytest.mark.parametrize(
    "code", ["out = model(images)", "loss = model(input_ids, labels=labels).loss", "loss = criterion(outputs, targets)"]
)
def test_other_training_steps_are_not_read_as_a_detectors(code: str) -> None:
    assert _first(_trace(MAIN, ("/work/proj/engine.py", 55, "train_one_epoch", code))).cause_id != (
        "detection_class_out_of_range"
    )


PASTED_SETUPS = {
    "voc masks, torchvision dataset": (
        "train_set = VOCSegmentation('/mnt/d/data', year='2007', image_set='trainval', transforms=tf)\n",
        "nll_loss2d_target_out_of_range",
        "ignore_index=255",
        "segmentation",
    ),
    "voc masks, a folder": (
        "mask_dir = os.path.join(root, 'SegmentationClassAug')\n",
        "nll_loss2d_target_out_of_range",
        "ignore_index=255",
        "segmentation",
    ),
    "detectron2 cfg in a script": (
        "cfg.merge_from_file(model_zoo.get_config_file('COCO-Detection/retinanet_R_101_FPN_3x.yaml'))\n",
        "detection_class_out_of_range",
        "ROI_HEADS.NUM_CLASSES",
        "detection",
    ),
    "detectron2 cfg dump": (
        "MODEL:\n  ROI_HEADS:\n    IN_FEATURES: [p2, p3]\n    NUM_CLASSES: 12\n",
        "detection_class_out_of_range",
        "ROI_HEADS.NUM_CLASSES",
        "detection",
    ),
    "torchvision predictor": (
        "net.roi_heads.box_predictor = MaskRCNNPredictor(in_channels, hidden, n_cls)\n",
        "detection_class_out_of_range",
        "background",
        "detection",
    ),
    "openmmlab detector config": (
        "model = dict(\n    type='CascadeRCNN',\n    roi_head=dict(\n        type='CascadeRoIHead',\n",
        "detection_class_out_of_range",
        "bbox_head/roi_head",
        "detection",
    ),
    "openmmlab detector override": (
        "cfg.model.roi_head.bbox_head.num_classes = 4\n",
        "detection_class_out_of_range",
        "bbox_head/roi_head",
        "detection",
    ),
    "openmmlab segmentor config": (
        "    decode_head=dict(\n        type='ASPPHead', in_channels=2048, num_classes=6,\n",
        "nll_loss2d_target_out_of_range",
        "decode_head",
        "segmentation",
    ),
    "torchvision constructor": (
        "detector = retinanet_resnet50_fpn_v2(num_classes=7)\n",
        "detection_class_out_of_range",
        "background",
        "detection",
    ),
}


@pytest.mark.parametrize("name", PASTED_SETUPS)
def test_a_vision_setup_pasted_beside_the_error_ranks_its_usual_cause_first(name: str) -> None:
    lines, cause, word, unsure = PASTED_SETUPS[name]
    d = _first(lines + ASSERT)
    assert d.cause_id == cause and "likely" in d.headline
    assert word in (d.likely_fix or "")
    assert d.candidates[1:] == UNSURE[unsure]


def test_voc_detection_data_is_not_read_as_segmentation_masks() -> None:
    d = _first("root = '/data/VOCdevkit/VOC2012/Annotations'\n" + ASSERT)
    assert d.cause_id == GENERIC_ID


def test_a_segmentation_kernel_line_alone_names_the_heads_class_count_knob() -> None:
    line = (
        "/opt/src/aten/src/THCUNN/SpatialClassNLLCriterion.cu:103: void cunn_SpatialClassNLLCriterion_updateOutput_"
        "kernel(T *, T *, T *, long *, T *, int, int, int, int, int, long) [with T = float, AccumT = float]: block: "
        "[2,0,0], thread: [77,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
    )
    d = _first(line + ASSERT)
    assert d.cause_id == "thcunn_spatial_class_nll_target_out_of_range"
    assert "num_classes / out_channels" in d.fix and "background" in d.fix


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (
            "onehot = torch.eye(n_cls)[gt.squeeze(1)]",
            "IndexError: index 255 is out of bounds for dimension 0 with size 3\n",
        ),
        ("t = torch.eye(self.num_classes, device=pred.device)[target].permute(0, 3, 1, 2)", ASSERT),
        (
            "y = torch.eye(k).to(labels.device)[labels]",
            "IndexError: index 12 is out of bounds for dimension 0 with size 12\n",
        ),
    ],
)
def test_labels_one_hot_encoded_by_indexing_an_identity_matrix_name_the_class_count(code: str, error: str) -> None:
    d = _first(_trace(MAIN, ("/work/seg/losses.py", 31, "soft_dice", code), error=error))
    assert d.cause_id == "one_hot_class_out_of_range"
    assert d.basis == "a frame: losses.py:31 in soft_dice"
    assert "num_classes" in (d.likely_fix or "")
    # an identity matrix that is not indexed by anything is not a one-hot encoding
    plain = _first(_trace(MAIN, ("/work/seg/losses.py", 31, "soft_dice", "eye = torch.eye(n)"), error=error))
    assert plain.basis != "a frame: losses.py:31 in soft_dice"


@pytest.mark.parametrize(
    ("path", "func", "code"),
    [
        ("/content/yolov5-master/utils/loss.py", "__call__", "lbox += (1.0 - iou).mean()  # iou loss"),
        (
            "D:\\projects\\YOLOv7-main\\utils\\loss.py",
            "find_3_positive",
            "gain[2:6] = torch.tensor(p[i].shape)[[3, 2, 3, 2]]",
        ),
        ("/home/ana/yolov3_custom/utils/utils.py", "compute_loss", "lxy += k * MSE(pxy, txy[i])"),
    ],
)
def test_a_yolo_clones_loss_module_names_class_ids_whatever_the_clone_is_called(
    path: str, func: str, code: str
) -> None:
    d = _first(_trace(MAIN, ("train.py", 300, "train", "loss = crit(pred, targets)"), (path, 160, func, code)))
    assert d.cause_id == "detection_class_out_of_range"
    assert d.basis.startswith("a frame: ") and func in d.basis
    assert "classes=" in (d.likely_fix or "")


def test_a_loss_module_of_a_repository_that_is_not_yolo_is_not_read_as_a_detector() -> None:
    d = _first(
        _trace(
            MAIN,
            ("train.py", 300, "train", "loss = crit(pred, targets)"),
            ("/work/unet-master/utils/loss.py", 160, "__call__", "dice = (2 * inter + 1) / (union + 1)"),
        )
    )
    assert d.cause_id != "detection_class_out_of_range"


@pytest.mark.parametrize(
    "code", ["model = deeplabv3_resnet101(num_classes=5)\n", "net = fcn_resnet50(weights=None)\n", "m = resnet50(3)\n"]
)
def test_a_segmentation_or_classification_constructor_is_not_read_as_a_torchvision_detector(code: str) -> None:
    assert _first(code + ASSERT).cause_id != "detection_class_out_of_range"


@pytest.mark.parametrize(
    "message",
    [
        "RuntimeError: reduce failed to synchronize: device-side assert triggered\n",
        "RuntimeError: merge_sort: failed to synchronize: cudaErrorAssert: device-side assert triggered\n",
        "RuntimeError: radix_sort: failed on 2nd step: cudaErrorAssert: device-side assert triggered\n",
    ],
)
def test_a_thrust_algorithm_that_surfaced_an_earlier_failure_ranks_labels_first(message: str) -> None:
    d = _first(message)
    assert d.cause_id == "nll_loss_target_out_of_range" and "likely" in d.headline
    assert d.basis == "the error text (thrust_sync)"
    assert d.candidates[0] == UNSURE_POINT_LEAD and d.candidates[1:] == UNSURE["thrust"]
    # copy_if keeps its own words (nonzero, masks)
    assert _first("RuntimeError: copy_if failed to synchronize: device-side assert triggered\n").basis == (
        "the error text (copy_if_sync)"
    )


@pytest.mark.parametrize("nc", [2, 17])
def test_a_yolo_data_yaml_in_the_paste_ranks_class_ids_against_its_nc(nc: int) -> None:
    yaml = f"path: ../datasets/parts\ntrain: images/train\nval: images/val\n\nnc: {nc}  # classes\nnames: [a, b]\n"
    d = _first(yaml + ASSERT)
    assert d.cause_id == "detection_class_out_of_range" and "likely" in d.headline
    assert f"nc={nc}?" in (d.specific or "") and "nc:" in (d.likely_fix or "")
    # an "nc" that is not a YAML key (a variable, a sentence) is not a data file
    assert _first(f"nc = {nc}\nthe nc: {nc} classes\n" + ASSERT).cause_id != "detection_class_out_of_range"


def test_the_detection_ranking_says_which_class_counts_include_the_background() -> None:
    d = _first("from maskrcnn_benchmark.engine.trainer import do_train\n" + ASSERT)
    first = d.candidates[1]
    assert "background" in first and "torchvision" in first and "NUM_CLASSES" in first and "90" in first


def test_a_bare_assert_ranks_the_common_causes_with_their_knobs_by_name() -> None:
    d = _first(
        "RuntimeError: CUDA error: device-side assert triggered\nFor debugging consider CUDA_LAUNCH_BLOCKING=1\n"
    )
    assert d.cause_id == GENERIC_ID and d.candidates[0] == UNSURE_LEAD and d.candidates[1:] == UNSURE["any"]
    assert "num_classes" in d.candidates[1] and "out_features" in d.candidates[1]
    assert any("detector" in c and "NUM_CLASSES" in c and "nc" in c for c in d.candidates[2:])


def test_a_thrust_sync_that_surfaced_an_illegal_address_is_not_read_as_a_label_assert() -> None:
    d = _first(
        "RuntimeError: merge_sort: failed to synchronize: cudaErrorIllegalAddress: an illegal memory access was "
        "encountered\n"
    )
    assert d.basis != "the error text (thrust_sync)" and d.cause_id != "nll_loss_target_out_of_range"
