"""The validators' mode and API: enable/disable, the context manager, thread-locality, the name
clash with the package, one host read per checked call, and staying out of the way of
torch.compile, vmap, fake/meta tensors, empty inputs, backward and jit tracing."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import BaseTorchFunctionMode, TorchFunctionMode, _get_current_function_mode_stack

import cudaassert_ipy
from cudaassert_ipy.checks import (
    ValidationError,
    ValidationIndexError,
    disable_validators,
    enable_validators,
    env_requests_validators,
    validators,
    validators_enabled,
)
from cudaassert_ipy.checks.mode import CHECKED_CALLS, ValidatorMode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def validators_off_around_each_test() -> Any:
    disable_validators()
    yield
    disable_validators()


def bad_cross_entropy() -> None:
    F.cross_entropy(torch.randn(2, 3), torch.tensor([0, 3]))


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


# ---------------------------------------------------------------- API and the name clash
def test_enable_and_disable_are_idempotent_and_reported_by_validators_enabled() -> None:
    assert not validators_enabled()
    enable_validators()
    enable_validators()
    assert validators_enabled()
    assert sum(isinstance(m, ValidatorMode) for m in _get_current_function_mode_stack()) == 1
    with pytest.raises(ValidationIndexError):
        bad_cross_entropy()
    disable_validators()
    disable_validators()
    assert not validators_enabled()
    with pytest.raises(IndexError) as info:
        bad_cross_entropy()
    assert not isinstance(info.value, ValidationError)


def test_context_manager_restores_the_previous_state_even_on_error() -> None:
    with pytest.raises(ValidationIndexError), validators():
        assert validators_enabled()
        bad_cross_entropy()
    assert not validators_enabled()
    enable_validators()
    with validators():
        pass
    assert validators_enabled(), "a with-block must not turn off validators enabled before it"


def test_disable_keeps_modes_pushed_above_validators_in_order() -> None:
    enable_validators()
    first, second = BaseTorchFunctionMode(), BaseTorchFunctionMode()
    with first, second:
        disable_validators()
        assert _get_current_function_mode_stack()[-2:] == [first, second]
    assert _get_current_function_mode_stack() == []


def test_package_and_context_manager_share_the_name_before_and_after_submodule_imports() -> None:
    code = (
        "import sys, cudaassert_ipy\n"
        "assert 'torch' not in sys.modules\n"
        "{prelude}\n"
        "with cudaassert_ipy.validators():\n"
        "    import torch, torch.nn.functional as F\n"
        "    try:\n"
        "        F.one_hot(torch.tensor([3]), 3)\n"
        "    except cudaassert_ipy.checks.ValidationError:\n"
        "        print('caught')\n"
        "from cudaassert_ipy import validators\n"
        "with validators():\n"
        "    print('ok', cudaassert_ipy.checks.validators_enabled())\n"
        "print(type(cudaassert_ipy.preflight).__name__)\n"
    )
    before = run_python(code.format(prelude=""))
    after = run_python(code.format(prelude="import cudaassert_ipy.checks.preflight"))
    assert before.split() == after.split() == ["caught", "ok", "True", "function"]


def test_importing_the_validators_package_does_not_import_torch() -> None:
    out = run_python(
        "import sys\nfrom cudaassert_ipy.checks import ValidationError, validators_enabled\n"
        "print('torch' in sys.modules, validators_enabled())"
    )
    assert out.split() == ["False", "False"]


def test_public_functions_are_not_shadowed_by_the_modules_that_define_them() -> None:
    import cudaassert_ipy
    import cudaassert_ipy.checks
    import cudaassert_ipy.checks.preflight

    assert callable(cudaassert_ipy.validators) and cudaassert_ipy.validators.__name__ == "validators"
    report = cudaassert_ipy.preflight([(torch.zeros(2), 1)], num_classes=2, progress=False)
    assert report.ok


def test_environment_variable_values_that_turn_validators_on() -> None:
    for value in ("1", "true", "YES", " on "):
        assert env_requests_validators({"CUDAASSERT_VALIDATORS": value})
    for value in ("", "0", "false", "off"):
        assert not env_requests_validators({"CUDAASSERT_VALIDATORS": value})
    assert not env_requests_validators({})


def test_checked_calls_cover_every_op_family_of_the_issue() -> None:
    expected = {
        "cross_entropy",
        "nll_loss",
        "binary_cross_entropy",
        "ctc_loss",
        "embedding",
        "embedding_bag",
        "one_hot",
        "Tensor.__getitem__",
        "Tensor.__setitem__",
        "Tensor.index_put_",
        "torch.index_select",
        "Tensor.gather",
        "torch.scatter",
        "Tensor.scatter_",
        "Tensor.scatter_add_",
        "Tensor.scatter_reduce_",
        "torch.take",
        "Tensor.put_",
        "Tensor.index_add_",
        "Tensor.index_copy_",
        "Tensor.index_fill_",
        "torch.multinomial",
        "torch.bernoulli",
        "Tensor.bernoulli_",
        "torch.repeat_interleave",
    }
    assert expected <= set(CHECKED_CALLS)


def test_validation_errors_survive_pickling_with_their_attributes() -> None:
    with pytest.raises(ValidationIndexError) as info, validators():
        bad_cross_entropy()
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is type(info.value)
    assert str(copy) == str(info.value)
    assert (copy.op, copy.argument, copy.n_bad, copy.examples, copy.cause_id) == (
        "cross_entropy",
        "target",
        1,
        [((1,), 3)],
        "nll_loss_target_out_of_range",
    )
    assert copy.facts == info.value.facts is not None  # the plain facts the fix was worded from


# ---------------------------------------------------------------- threads
def test_validators_are_thread_local() -> None:
    results: list[Any] = []

    def worker() -> None:
        results.append(validators_enabled())
        try:
            bad_cross_entropy()
        except IndexError as e:
            results.append(isinstance(e, ValidationError))
        enable_validators()  # only for this thread
        results.append(validators_enabled())
        disable_validators()

    enable_validators()
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert results == [False, False, True]
    assert validators_enabled()


# ---------------------------------------------------------------- one host read per checked call
class HostReadCounter(TorchFunctionMode):
    """Sits *below* the validators: sees every torch call their checks make."""

    READS = frozenset(
        {"tolist", "item", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy", "nonzero", "unique"}
    )

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if getattr(func, "__name__", "") in self.READS:
            self.reads += 1
        return func(*args, **(kwargs or {}))


#: (name, valid call, host reads when checked first, whether its CPU kernel checks it instead)
VALID_CALLS: list[tuple[str, Callable[[], Any], int, bool]] = [
    ("cross_entropy", lambda: F.cross_entropy(torch.randn(4, 5), torch.tensor([0, 4, -100, 2])), 1, True),
    (
        "segmentation",
        lambda: F.cross_entropy(torch.randn(1, 3, 2, 2), torch.tensor([[[0, 255], [1, 2]]]), ignore_index=255),
        1,
        True,
    ),
    ("embedding", lambda: F.embedding(torch.tensor([[1, 2]]), torch.randn(5, 2)), 1, True),
    (
        "embedding_bag",
        lambda: F.embedding_bag(torch.tensor([1, 2, 3]), torch.randn(5, 2), torch.tensor([0, 2])),
        1,
        False,
    ),
    ("getitem", lambda: torch.zeros(5, 3)[torch.tensor([0, -1]), torch.tensor([1, 2])], 1, True),
    ("getitem list", lambda: torch.zeros(5, 3)[[0, -1]], 0, True),
    ("setitem", lambda: torch.zeros(5).__setitem__(torch.tensor([1]), 2.0), 1, False),
    ("index_put_", lambda: torch.zeros(5).index_put_((torch.tensor([4]),), torch.tensor(1.0)), 1, False),
    ("index_select", lambda: torch.zeros(5).index_select(0, torch.tensor([4])), 1, True),
    ("gather", lambda: torch.zeros(2, 3).gather(1, torch.tensor([[2], [0]])), 1, True),
    ("scatter_", lambda: torch.zeros(2, 3).scatter_(1, torch.tensor([[2], [0]]), 1.0), 1, False),
    ("take", lambda: torch.zeros(2, 3).take(torch.tensor([-6, 5])), 1, True),
    ("index_add_", lambda: torch.zeros(3).index_add_(0, torch.tensor([2]), torch.ones(1)), 1, False),
    ("one_hot", lambda: F.one_hot(torch.tensor([0, 2]), 3), 1, True),
    ("bce", lambda: F.binary_cross_entropy(torch.tensor([0.2, 1.0]), torch.tensor([0.0, 1.0])), 1, True),
    ("multinomial", lambda: torch.multinomial(torch.tensor([[0.2, 0.8], [1.0, 0.0]]), 1), 1, True),
    ("bernoulli", lambda: torch.bernoulli(torch.tensor([0.2, 1.0])), 1, True),
    ("repeat_interleave", lambda: torch.repeat_interleave(torch.tensor([1, 2]), output_size=3), 1, False),
    ("ctc_loss", lambda: F.ctc_loss(torch.randn(6, 1, 4).log_softmax(2), torch.tensor([[1, 2]]), [6], [2]), 1, False),
]


@pytest.mark.parametrize("name, call, expected_reads, cpu_self_checked", VALID_CALLS, ids=[c[0] for c in VALID_CALLS])
@pytest.mark.parametrize("trust_cpu", [False, True], ids=["checks-first", "cpu-kernel-first"])
def test_a_valid_checked_call_reads_back_to_the_host_at_most_once(
    name: str,
    call: Callable[[], Any],
    expected_reads: int,
    cpu_self_checked: bool,
    trust_cpu: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checked first (the CUDA path) a valid call costs one host read; on CPU, a call whose CPU
    kernel checks the same range costs none."""
    monkeypatch.setattr(ValidatorMode, "trust_cpu_kernels", trust_cpu)
    counter = HostReadCounter()
    with counter:
        call()  # warm up (lazy imports, first-call paths)
        base = counter.reads
        call()
        unchecked_reads = counter.reads - base
        with validators():
            before = counter.reads
            call()
            checked_reads = counter.reads - before
    assert checked_reads - unchecked_reads == (0 if trust_cpu and cpu_self_checked else expected_reads)


# ---------------------------------------------------------------- staying out of the way
def test_torch_compile_traces_without_graph_breaks_and_compiled_code_still_runs() -> None:
    import torch._dynamo

    def step(logits: torch.Tensor, target: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target) + logits[idx].sum() + F.one_hot(target, 5).sum()

    args = (torch.randn(4, 5), torch.tensor([0, 1, 2, 4]), torch.tensor([1, 3]))
    torch._dynamo.reset()
    with validators():
        explanation = torch._dynamo.explain(step)(*args)
        compiled = torch.compile(step, backend="eager")
        torch.testing.assert_close(compiled(*args), step(*args))
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1
    torch._dynamo.reset()
    # setting up dynamo turns distribution argument validation off process-wide: undo for later tests
    torch.distributions.Distribution.set_default_validate_args(__debug__)


def test_checks_are_skipped_while_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    from cudaassert_ipy.checks import mode

    monkeypatch.setattr(mode, "_is_compiling", lambda: True)
    with validators(), pytest.raises(IndexError) as info:
        bad_cross_entropy()
    assert not isinstance(info.value, ValidationError)


def test_vmap_wrapped_tensors_are_skipped_without_crashing() -> None:
    x = torch.randn(3, 5)
    pick = torch.func.vmap(lambda row, i: row[i])
    try:
        pick(x, torch.tensor([1, 2, 4]))
    except RuntimeError as plain:  # torch 2.4 cannot vmap a tensor index (it calls .item()): the same error with us
        with validators(), pytest.raises(RuntimeError) as ours:
            pick(x, torch.tensor([1, 2, 4]))
        assert str(ours.value) == str(plain) and not isinstance(ours.value, ValidationError)
        pick = torch.func.vmap(lambda row, i: row.gather(0, i.unsqueeze(0)).squeeze(0))
    with validators():
        out = pick(x, torch.tensor([1, 2, 4]))
        grads = torch.func.grad(lambda w: F.cross_entropy(w, torch.tensor([1, 2])))(torch.randn(2, 5))
        ours = _error_of(lambda: pick(x, torch.tensor([1, 2, 7])))
    plain = _error_of(lambda: pick(x, torch.tensor([1, 2, 7])))
    torch.testing.assert_close(out, x[torch.arange(3), torch.tensor([1, 2, 4])])
    assert grads.shape == (2, 5)
    assert not isinstance(ours, ValidationError)  # vmap's wrapped tensors are not checked: torch's own error stands
    assert (type(ours), str(ours)) == (type(plain), str(plain))


def _error_of(call: Callable[[], Any]) -> Exception:
    try:
        call()
    except Exception as error:
        return error
    raise AssertionError("no error raised")


def test_fake_meta_and_empty_tensors_are_skipped() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with validators():
        with FakeTensorMode():
            F.cross_entropy(torch.randn(4, 5), torch.full((4,), 9))  # fake values are never read
        meta_logits = torch.empty(4, 5, device="meta")
        assert F.cross_entropy(meta_logits, torch.empty(4, dtype=torch.long, device="meta")).is_meta
        F.cross_entropy(torch.randn(0, 5), torch.zeros(0, dtype=torch.long))
        torch.zeros(5)[torch.tensor([], dtype=torch.long)]
        torch.zeros(0, 3)[torch.tensor([], dtype=torch.long)]


def test_calls_made_by_the_autograd_engine_are_not_rechecked() -> None:
    class BadBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return x * 2

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            return grad.gather(0, torch.tensor([0, 9]))

    x = torch.randn(2, requires_grad=True)
    with validators():
        y = BadBackward.apply(x).sum()
        with pytest.raises(RuntimeError) as info:
            y.backward()
    assert not isinstance(info.value, ValidationError)


def test_calls_inside_module_forward_are_checked_and_named_after_the_module() -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Flatten(), torch.nn.Linear(8, 3))
    with validators(), pytest.raises(ValidationIndexError) as info:
        model(torch.tensor([[1, 10]]))
    assert info.value.op == "nn.Embedding"


def test_jit_trace_records_no_validator_ops() -> None:
    def f(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target)

    with validators(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = torch.jit.trace(f, (torch.randn(2, 3), torch.tensor([0, 2])))
    assert not [w for w in caught if "Converting a tensor to a Python" in str(w.message)]
    assert "aminmax" not in str(traced.graph)


def test_a_rejected_in_place_call_leaves_its_tensor_untouched() -> None:
    x = torch.zeros(3, 3)
    with validators(), pytest.raises(ValidationError):
        x.scatter_(1, torch.tensor([[0], [5], [1]]), 7.0)
    assert bool((x == 0).all())


def test_user_modes_keep_working_above_and_below_validators(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ValidatorMode, "trust_cpu_kernels", False)  # rejected before it runs, as on CUDA
    calls: list[str] = []

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            calls.append(getattr(func, "__name__", "?"))
            return func(*args, **(kwargs or {}))

    with Recorder(), validators(), Recorder():
        with pytest.raises(ValidationIndexError):
            bad_cross_entropy()
        torch.zeros(2) + 1
    assert calls.count("cross_entropy") == 1  # the outer recorder never saw the rejected call


def test_cudaassert_top_level_exposes_the_same_functions() -> None:
    assert cudaassert_ipy.enable_validators is enable_validators
    assert cudaassert_ipy.disable_validators is disable_validators


# ---------------------------------------------------------------- optimizer steps
def global_optimizer_hooks() -> tuple[int, int]:
    """How many global step hooks every torch optimizer runs (pre, post): torch's own registry, which
    validators add to while any of them is on, and must leave as they found it."""
    from torch.optim import optimizer

    return len(optimizer._global_optimizer_pre_hooks), len(optimizer._global_optimizer_post_hooks)


def test_optimizer_steps_run_without_the_mode_and_it_comes_back_afterwards() -> None:
    hooks_before = global_optimizer_hooks()
    seen: list[bool] = []

    class Probe(torch.optim.SGD):
        def step(self, closure: Any = None) -> Any:
            seen.append(any(isinstance(m, ValidatorMode) for m in _get_current_function_mode_stack()))
            return super().step(closure)

    param = torch.nn.Parameter(torch.ones(2))
    opt = Probe([param], lr=0.1)
    with validators():
        assert global_optimizer_hooks() == (hooks_before[0] + 1, hooks_before[1] + 1)
        param.sum().backward()
        opt.step()
        assert validators_enabled()
    assert seen == [False]
    assert global_optimizer_hooks() == hooks_before, "the global optimizer hooks go away with the last validators"


def test_a_step_that_raises_gets_the_mode_back_at_the_next_validators_call() -> None:
    from cudaassert_ipy.checks.mode import resume_suspended

    class Broken(torch.optim.SGD):
        def step(self, closure: Any = None) -> Any:
            raise RuntimeError("out of memory")

    opt = Broken([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    enable_validators()
    with pytest.raises(RuntimeError, match="out of memory"):
        opt.step()
    assert not any(isinstance(m, ValidatorMode) for m in _get_current_function_mode_stack())
    assert validators_enabled()  # puts the suspended mode back
    assert any(isinstance(m, ValidatorMode) for m in _get_current_function_mode_stack())
    with pytest.raises(ValidationIndexError):
        bad_cross_entropy()
    disable_validators()
    assert resume_suspended() is False  # nothing is left suspended, to be pushed back by a later call
    assert not any(isinstance(m, ValidatorMode) for m in _get_current_function_mode_stack())


def test_zero_grad_runs_without_the_mode_even_when_it_raises_and_the_wrapper_goes_away() -> None:
    hooks_before = global_optimizer_hooks()
    original = torch.optim.Optimizer.zero_grad
    seen: list[bool] = []

    param = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([param], lr=0.1)
    param.grad = torch.ones(2)

    def spying_zero_grad(self: Any, set_to_none: bool = True) -> None:
        seen.append(any(isinstance(m, ValidatorMode) for m in _get_current_function_mode_stack()))
        if set_to_none is False:
            raise RuntimeError("zero_grad failed")
        original(self, set_to_none)

    torch.optim.Optimizer.zero_grad = spying_zero_grad  # type: ignore[method-assign]
    try:
        with validators():
            assert torch.optim.Optimizer.zero_grad is not spying_zero_grad
            opt.zero_grad()
            assert validators_enabled() and isinstance(_get_current_function_mode_stack()[-1], ValidatorMode)
            with pytest.raises(RuntimeError, match="zero_grad failed"):
                opt.zero_grad(set_to_none=False)
            assert isinstance(_get_current_function_mode_stack()[-1], ValidatorMode)
            with pytest.raises(ValidationIndexError):
                bad_cross_entropy()
        assert torch.optim.Optimizer.zero_grad is spying_zero_grad, "restored when the last validators go"
        assert global_optimizer_hooks() == hooks_before
        opt.zero_grad()
    finally:
        torch.optim.Optimizer.zero_grad = original  # type: ignore[method-assign]
    assert seen == [False, False, False]
    assert param.grad is None


def test_zero_grad_keeps_a_user_mode_above_validators_and_a_later_wrapper() -> None:
    original = torch.optim.Optimizer.zero_grad
    opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    seen: list[str] = []

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            seen.append(getattr(func, "__name__", "?"))
            return func(*args, **(kwargs or {}))

    with validators(), Recorder():
        opt.zero_grad()  # validators are not on top: nothing is taken off, the user's mode sees the call
        theirs = torch.optim.Optimizer.zero_grad
        torch.optim.Optimizer.zero_grad = lambda self, set_to_none=True: theirs(self, set_to_none)  # type: ignore
    try:
        assert seen, "the user's mode saw zero_grad's calls"
        assert torch.optim.Optimizer.zero_grad is not original, "someone else's wrapper is left in place"
    finally:
        torch.optim.Optimizer.zero_grad = original  # type: ignore[method-assign]


def test_only_functional_calls_are_left_to_the_cpu_kernel() -> None:
    """An in-place kernel may have written part of its result when it raises: those are checked first."""
    from cudaassert_ipy.checks.mode import CPU_SELF_CHECKED_CALLS

    assert "cross_entropy" in CPU_SELF_CHECKED_CALLS and "Tensor.__getitem__" in CPU_SELF_CHECKED_CALLS
    in_place = [
        name
        for name in CPU_SELF_CHECKED_CALLS
        if (name.endswith("_") and not name.endswith("__")) or name.endswith("__setitem__")
    ]
    assert in_place == []
    for never in ("ctc_loss", "embedding_bag", "torch.repeat_interleave", "Tensor.scatter_", "Tensor.index_put_"):
        assert never in CHECKED_CALLS and never not in CPU_SELF_CHECKED_CALLS


def test_on_cpu_a_bad_call_still_gets_the_full_error_without_torchs_own_in_its_context() -> None:
    logits, target = torch.randn(2, 3), torch.tensor([0, 3])
    with validators(), pytest.raises(ValidationIndexError) as info:
        F.cross_entropy(logits, target)
    assert info.value.__suppress_context__ and info.value.__cause__ is None
    assert "valid: 0..2" in str(info.value)
    ValidatorMode.trust_cpu_kernels = False
    try:
        with validators(), pytest.raises(ValidationIndexError) as first:
            F.cross_entropy(logits, target)
    finally:
        ValidatorMode.trust_cpu_kernels = True
    assert str(first.value) == str(info.value)
