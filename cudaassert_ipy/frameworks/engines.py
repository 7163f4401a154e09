"""Inference engines and servers: the model runs in another process, the notebook gets a wrapper.

* vLLM V1 runs the model in an EngineCore process. When it dies, the client (offline ``LLM.generate()`` in
  a notebook, or ``AsyncLLM``) raises ``vllm.v1.engine.exceptions.EngineDeadError`` with the message
  "EngineCore encountered an issue. See stack trace (above) for the root cause." ``from None``
  (``core_client.py``): the CUDA error and the kernel lines are only in what EngineCore logged, each line
  prefixed ``(EngineCore pid=339) ERROR 08-19 10:11:55 [core.py:1348]``.
* Text Generation Inference: the router answers "Server error: Unexpected <class 'RuntimeError'>: CUDA error:
  device-side assert triggered" (whatever client raises it), and the launcher then logs "Method ClearCache
  encountered an error." when the router's cache clear touches the dead shard: a follow-on.

vLLM and TGI are not installable where this project is tested; these texts are their exact wordings, read
from their source and issue reports. The hooks read type names and messages only, so they run whatever is
imported: a server's error reaches a notebook through any HTTP client.
"""

from __future__ import annotations

import re

from cudaassert_ipy.frameworks.base import Adapter, Launch, class_names

__all__ = ["ADAPTER", "ENGINE_DEAD"]

#: vllm/v1/engine/exceptions.py, EngineDeadError's message.
ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."
VLLM = "vLLM's `EngineDeadError` (the engine process died)"
VLLM_PROCESS = "vLLM's EngineCore process"
TGI = "a text-generation-inference server error (the model shard's error, relayed by the router)"
TGI_PROCESS = "the text-generation-inference model shard"
#: the router's relay of a shard's Python error (text_generation_router ... client)
_TGI = re.compile(r"Server error: Unexpected <class '(?:[\w.]+\.)?(\w+)'>: ")
#: always on: see the module docstring (``builtins`` is in every ``sys.modules``)
PACKAGES = ("builtins",)


def _unwrap(exc: BaseException, text: str) -> str | None:
    m = _TGI.search(text)
    return text[m.end() :] if m is not None else None


def _launch(exc: BaseException) -> Launch | None:
    if "EngineDeadError" in class_names(exc):
        return Launch(VLLM, process=VLLM_PROCESS, relaunch="engine")
    text = str(exc)
    m = _TGI.search(text)
    if m is not None:
        return Launch(TGI, process=TGI_PROCESS, error=(m.group(1), text[m.end() :]), relaunch="server")
    return None


ADAPTER = Adapter(name="engines", packages=PACKAGES, owns=lambda stack: False, unwrap=_unwrap, launch=_launch)
