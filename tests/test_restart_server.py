"""The restart for real: a Jupyter server on 127.0.0.1 with a token, kernels started through its REST API.

Each story runs setup cells, fails on the GPU test double (``fake_cuda_session``: the real CPU
computation, turned into the GPU's device assert while validators are off), restarts (the magic,
or a click on the panel's button sent as a widget ``comm_msg``), waits for the same kernel id to
answer from a new process, and re-runs the failing cell: the setup is back, blocking mode was on
before torch was imported, and the validator stops the bad label. Kernels without a server
(VS Code's raw kernels, a bare jupyter_client launch) are driven with jupyter_client.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from helpers.kernels import execute as jc_execute
from helpers.kernels import text_of as jc_text
from helpers.server_harness import WsKernel, isolated_env, text_of, widget_id

from cudaassert_ipy.restart import frontend
from cudaassert_ipy.restart.startup_stub import STUB_NAME

pytestmark = pytest.mark.kernel

SETUP = [
    ("c1", "%load_ext cudaassert"),
    ("c2", "import os\nBLOCKING_AT_IMPORT = os.environ.get('CUDA_LAUNCH_BLOCKING')\nimport torch"),
    ("c3", "from fake_cuda_session import make_batch, cross_entropy\nlogits, labels = make_batch()"),
    ("c4", "runs = globals().get('runs', 0) + 1"),
    ("c5", "labels.shape"),
]
FAILING = ("c6", "loss = cross_entropy(logits, labels)")
CHECK = (
    "import os\nfrom cudaassert_ipy.checks import validators_enabled\n"
    "print(runs, BLOCKING_AT_IMPORT, os.environ['CUDA_LAUNCH_BLOCKING'], validators_enabled(), "
    "repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"
)


def run_story(k: WsKernel) -> list[dict]:
    """Setup cells, then the training cell that kills the (pretend) GPU context; returns its messages."""
    for cell_id, code in SETUP:
        reply, messages = k.execute(code, cell_id)
        assert reply["status"] == "ok", text_of(messages)
    reply, messages = k.execute(FAILING[1], FAILING[0])
    assert reply["status"] == "error" and reply["ename"] == "AcceleratorError"
    assert "GPU context dead" in text_of(messages)
    return messages


def assert_replayed_and_validated(k: WsKernel, server, cpu: bool = False) -> str:
    reply, messages = k.execute(FAILING[1], FAILING[0])
    out = text_of(messages)
    assert reply["status"] == "error" and reply["ename"] == "ValidationIndexError", out
    assert "[cudaassert] This kernel was restarted by cudaassert after cell [6] failed (" in out
    assert "[cudaassert] Replaying 3 setup cell(s) first" in out or "Replaying setup" in json.dumps(messages)
    assert "cross_entropy: target has 1 bad value; valid: 0..194" in out
    assert "GPU alive" in out  # the validator's diagnosis, not a dead context
    reply, messages = k.execute(CHECK)
    assert text_of(messages).split() == ["1", "1", "1", "True", "''" if cpu else "None"]
    log = (server.runtime / "cudaassert" / "resume.log").read_text()
    assert f"startup: key={k.kernel_id} claimed=True notes=0 CUDA_LAUNCH_BLOCKING=1 torch=False" in log
    return out


def test_the_magic_restarts_the_same_kernel_id_and_the_next_cell_replays_then_validates(server):
    kid = server.start_kernel()
    k = WsKernel(server, kid)
    try:
        run_story(k)
        pid, seen = k.pid(), k.restarts
        _, messages = k.execute("%cudaassert restart", "c7")
        out = text_of(messages)
        assert "[cudaassert] Restart with CUDA_LAUNCH_BLOCKING=1 and validators on; 3 setup cell(s) replay" in out
        assert "  [2] import os  (" in out and "  [4] runs = globals().get('runs', 0) + 1  (" in out
        assert (
            "[cudaassert] Restarting the kernel now; it comes back in a few seconds with the same id. Then run a "
            "cell (the failing one [6]): the setup replays first, inside that cell."
        ) in out
        assert "refused" not in out and "did not answer" not in out  # the server confirmed the kernel id
        k.wait_for_new_process(pid, seen)
        assert kid in [x["id"] for x in server.rest("GET", "api/kernels")]
        out = assert_replayed_and_validated(k, server)
        assert "[cudaassert] Replayed 3 setup cell(s) in " in out
        assert "[cudaassert] On in this kernel:" in out and "`%cudaassert restart --normal`" in out
        assert not (server.startup_dir / STUB_NAME).exists()  # nothing pending any more
        assert "restarting kernel" in server.log_text()  # the server's auto-restarter did it
    finally:
        k.close()
        server.rest("DELETE", f"api/kernels/{kid}")


def test_the_panels_restart_on_cpu_button_restarts_and_replays_on_the_cpu(server):
    kid = server.start_kernel()
    k = WsKernel(server, kid)
    try:
        messages = run_story(k)
        button = widget_id(messages, "ButtonModel", "Restart on CPU")
        pid, seen = k.pid(), k.restarts
        _, click = k.collect(k.click(button), timeout=30, reply_expected=False)
        updates = [
            m["content"]["data"]["state"]
            for m in click
            if m["type"] == "comm_msg" and m["content"]["data"].get("method") == "update"
        ]
        assert {"description": "Restarting…", "disabled": True}.items() <= {
            key: value for u in updates for key, value in u.items()
        }.items()  # reached the frontend before exit
        k.wait_for_new_process(pid, seen)  # the server's "restarting": Lab's "Kernel Restarting" dialog
        assert_replayed_and_validated(k, server, cpu=True)
        _, messages = k.execute("import torch; print(torch.cuda.is_available())")
        assert text_of(messages).strip() == "False"
    finally:
        k.close()
        server.rest("DELETE", f"api/kernels/{kid}")


ARM = (
    "from cudaassert_ipy.shell import extension\nfrom cudaassert_ipy.restart import frontend, request\n"
    "fe = frontend.detect(get_ipython())\nprint(fe.kind.value, fe.key == fe.kernel_id)\n"
    "request.request_restart(extension.current(), frontend.Frontend(frontend.FrontendKind.VSCODE, fe.key, "
    "fe.kernel_id))"
)


def test_two_kernels_in_one_profile_do_not_cross_and_a_plain_crash_replays_nothing(server):
    a, b = server.start_kernel(), server.start_kernel()
    ka, kb = WsKernel(server, a), WsKernel(server, b)
    plans = server.runtime / "cudaassert"
    try:
        for k in (ka, kb):
            assert k.execute("%load_ext cudaassert\nx = 41")[0]["status"] == "ok"
        _, messages = ka.execute(ARM)  # armed, not restarted: the VS Code path
        assert text_of(messages).startswith("server True\n")
        assert "[cudaassert] Plan armed. VS Code does not restart this kernel by itself" in text_of(messages)
        assert (plans / f"plan-{a}.json").exists() and (server.startup_dir / STUB_NAME).exists()

        pid_b, seen = kb.pid(), kb.restarts
        kb.send("shell", "execute_request", {"code": "import os; os._exit(1)", "silent": False})  # dies otherwise
        kb.wait_for_new_process(pid_b, seen)
        _, messages = kb.execute("import os\nprint('x' in globals(), os.environ.get('CUDA_LAUNCH_BLOCKING'))")
        assert text_of(messages) == "False None\n"  # nothing replayed, nothing set
        assert (plans / f"plan-{a}.json").exists()  # A's plan was not taken by B

        pid_a = ka.pid()
        server.rest("POST", f"api/kernels/{a}/restart")  # the manual restart
        ka.wait_for_new_process(pid_a)
        _, messages = ka.execute("y = x + 1\nprint(y)")
        out = text_of(messages)
        assert "[cudaassert] Replayed 1 setup cell(s) in " in out and out.rstrip().endswith("42")
        log = (plans / "resume.log").read_text()
        assert f"startup: key={b} claimed=False" in log and f"startup: key={a} claimed=True" in log

        ka.execute(ARM)
        plan = json.loads((plans / f"plan-{a}.json").read_text())
        plan["expires"] = time.time() - 1
        (plans / f"plan-{a}.json").write_text(json.dumps(plan))
        pid_a = ka.pid()
        server.rest("POST", f"api/kernels/{a}/restart")
        ka.wait_for_new_process(pid_a)
        _, messages = ka.execute("print('x' in globals())")
        out = text_of(messages)
        assert "[cudaassert] A resume plan from " in out and " and was removed; nothing was replayed." in out
        assert out.rstrip().endswith("False") and not (plans / f"plan-{a}.json").exists()
    finally:
        for k, kid in ((ka, a), (kb, b)):
            k.close()
            server.rest("DELETE", f"api/kernels/{kid}")


def test_a_kernel_that_crashes_during_the_replay_comes_back_plain_and_never_loops(server):
    kid = server.start_kernel()
    k = WsKernel(server, kid)
    try:
        assert k.execute("%load_ext cudaassert\nx = 41")[0]["status"] == "ok"
        crash = "import os\nif os.environ.get('CUDA_LAUNCH_BLOCKING') == '1':\n    os._exit(3)  # only in the replay"
        assert k.execute(crash)[0]["status"] == "ok"
        pid, seen = k.pid(), k.restarts
        k.execute("%cudaassert restart")
        k.wait_for_new_process(pid, seen)
        pid, seen = k.pid(), k.restarts
        k.send("shell", "execute_request", {"code": "y = 1", "silent": False})  # the replay kills this process
        k.wait_for_new_process(pid, seen)
        _, messages = k.execute("import os\nprint('x' in globals(), os.environ.get('CUDA_LAUNCH_BLOCKING'))")
        assert text_of(messages) == "False None\n"  # the plan was spent by the first claim: no second replay
        assert not list((server.runtime / "cudaassert").glob(f"plan-{kid}*"))
    finally:
        k.close()
        server.rest("DELETE", f"api/kernels/{kid}")


def test_the_kernel_asks_its_server_whether_it_knows_the_kernel_id(server):
    kid = server.start_kernel()
    try:
        runtime_file = next(server.runtime.glob("jpserver-*.json"))
        info = json.loads(runtime_file.read_text())
        ref = frontend.ServerRef(info["url"], runtime_file)
        assert frontend.check_server(ref, kid) == ("ok", "")
        wrong = server.home / "jpserver-wrong.json"
        wrong.write_text(json.dumps({**info, "token": "wrong"}))
        assert frontend.check_server(frontend.ServerRef(info["url"], wrong), kid) == ("refused", "HTTP 403")
        assert frontend.check_server(ref, str(uuid.uuid4())) == ("unknown", "HTTP 404")
        verdict, why = frontend.check_server(frontend.ServerRef("http://127.0.0.1:9/", runtime_file), kid, timeout=2)
        assert verdict == "unreachable" and why
    finally:
        server.rest("DELETE", f"api/kernels/{kid}")


# -- kernels that no server restarts: jupyter_client, as VS Code and bare launchers do ------------------
def start_kernel(home, connection_name):
    from jupyter_client import KernelManager

    (home / "runtime").mkdir(parents=True, exist_ok=True)
    km = KernelManager(kernel_name="python3", connection_file=str(home / "runtime" / connection_name))
    km.start_kernel(env=isolated_env(home, CUDAASSERT_TEST_PRETEND_GPU="1"))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def stop(km, kc):
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def jc_story(kc):
    for _, code in SETUP:
        assert jc_execute(kc, code)[0]["status"] == "ok"
    assert jc_execute(kc, FAILING[1])[0]["ename"] == "AcceleratorError"


def test_vscode_arms_the_plan_and_the_next_kernel_of_that_notebook_replays_it(tmp_path):
    notebook = "VSC = '/home/me/birds/train.ipynb'\n__vsc_ipynb_file__ = VSC"  # VS Code's silent startup code
    km, kc = start_kernel(tmp_path, f"kernel-v3{uuid.uuid4().hex}.json")
    try:
        jc_execute(kc, notebook, silent=True)
        jc_story(kc)
        _, messages = jc_execute(kc, "%cudaassert restart")
        assert (
            "[cudaassert] Plan armed. VS Code does not restart this kernel by itself: press Restart in the "
            "notebook toolbar, then run a cell; the setup replays first, inside that cell."
        ) in jc_text(messages)
        assert [p.name for p in (tmp_path / "runtime" / "cudaassert").glob("plan-*.json")] == [
            f"plan-{frontend.vscode_key('/home/me/birds/train.ipynb')}.json"
        ]
    finally:
        stop(km, kc)
    km, kc = start_kernel(tmp_path, f"kernel-v3{uuid.uuid4().hex}.json")  # Restart: a new connection file
    try:
        jc_execute(kc, notebook, silent=True)
        reply, messages = jc_execute(kc, FAILING[1])
        out = jc_text(messages)
        assert reply["ename"] == "ValidationIndexError" and "[cudaassert] Replayed 3 setup cell(s) in " in out
        assert jc_text(jc_execute(kc, "print(runs, BLOCKING_AT_IMPORT)")[1]) == "1 1\n"
    finally:
        stop(km, kc)


def test_without_a_server_the_plan_waits_for_a_manual_restart_of_the_same_kernel(tmp_path):
    km, kc = start_kernel(tmp_path, f"kernel-{uuid.uuid4()}.json")
    try:
        jc_story(kc)
        _, messages = jc_execute(kc, "%cudaassert restart --no-replay")
        out = jc_text(messages)
        assert "[cudaassert] No Jupyter server was found for this kernel (looked for jpserver-" in out
        assert (
            f"in {tmp_path / 'runtime'}), so it cannot restart itself. The plan is kept for 60 min: restart the "
            "kernel from your frontend, then run a cell; the setup replays first, inside that cell."
        ) in out
        km.restart_kernel(now=False)  # what `jupyter console`'s or a script's restart does: same connection file
        kc.wait_for_ready(timeout=60)
        _, messages = jc_execute(kc, "import os\nprint(os.environ['CUDA_LAUNCH_BLOCKING'], 'runs' in globals())")
        out = jc_text(messages)
        assert "[cudaassert] This kernel was restarted by cudaassert after cell [6] failed (" in out
        assert out.rstrip().endswith("1 False")  # --no-replay: the environment, no cells
    finally:
        stop(km, kc)


# -- issue #15: the server's token and the kernel's HMAC key stay out of everything we show or write ----------
REPRS = (
    "from cudaassert_ipy import last_diagnosis\n"
    "from cudaassert_ipy.shell import extension\n"
    "from cudaassert_ipy.restart import frontend, request\n"
    "ext = extension.current()\nfe = frontend.detect(get_ipython())\n"
    "plan = request.build_plan(ext, fe, request.Mode.DEBUG, ext.history.plan(request.failing_record(ext)))\n"
    "for obj in (fe, fe.server, str(fe.server), plan, plan.to_json(), ext, vars(ext), ext.config, ext.state,\n"
    "            ext.history, ext.watcher, vars(ext.watcher), ext.last, last_diagnosis(), ext.resumed,\n"
    "            request.actions_for(ext, ext.last, fe)):\n"
    "    print(repr(obj))\n"
    "print(fe.kind.value, fe.server is not None)"
)


def assert_no_secret(text: str, secrets: dict[str, str], where: str) -> None:
    for name, secret in secrets.items():
        assert secret not in text, f"the {name} appears in {where}"


def test_no_output_repr_or_file_of_ours_holds_the_server_token_or_the_kernel_key(server):
    kid = server.start_kernel()
    k = WsKernel(server, kid)
    connection = json.loads((server.runtime / f"kernel-{kid}.json").read_text())
    secrets = {"server token": server.token, "kernel HMAC key": connection["key"]}
    assert len(server.token) >= 16 and len(connection["key"]) >= 16
    seen: list[str] = []
    try:
        seen.append(json.dumps(run_story(k)))  # the failure report: text, HTML, the panel's widget state
        for line in ("%cudaassert status", "%cudaassert explain", "%cudaassert setup", "%cudaassert setup show"):
            reply, messages = k.execute(line)
            assert reply["status"] == "ok", text_of(messages)
            seen.append(json.dumps(messages))
        reply, messages = k.execute(REPRS)
        assert reply["status"] == "ok", text_of(messages)
        assert text_of(messages).rstrip().endswith("server True")  # a ServerRef was among them
        reprs = text_of(messages)
        seen.append(json.dumps(messages))
        _, messages = k.execute(ARM)  # an armed plan stays on disk: read it as written
        seen.append(json.dumps(messages))
        seen.append((server.runtime / "cudaassert" / f"plan-{kid}.json").read_text())
        pid, restarts = k.pid(), k.restarts
        _, messages = k.execute("%cudaassert restart")
        seen.append(json.dumps(messages))
        k.wait_for_new_process(pid, restarts)
        _, messages = k.execute(FAILING[1], FAILING[0])  # the replay, then the validator's report
        assert "[cudaassert] Replayed 3 setup cell(s) in " in text_of(messages)
        seen.append(json.dumps(messages))
        for line in ("%cudaassert status", REPRS):
            reply, messages = k.execute(line)
            assert reply["status"] == "ok", text_of(messages)
            seen.append(json.dumps(messages))
        assert "restarted by cudaassert: debug mode" in seen[-2]
        for i, text in enumerate(seen):
            assert_no_secret(text, secrets, f"output #{i}")
        ours = [*(server.runtime / "cudaassert").iterdir(), *server.startup_dir.iterdir()]
        assert {p.name for p in ours} >= {"resume.log"}
        for path in ours:
            if path.is_file():
                assert_no_secret(path.read_text(errors="replace"), secrets, str(path))
        assert_no_secret(server.log_text(), {"kernel HMAC key": connection["key"]}, "the server log")
        assert f"ServerRef('{server.url}')" in reprs  # its repr is the URL
    finally:
        k.close()
        server.rest("DELETE", f"api/kernels/{kid}")
