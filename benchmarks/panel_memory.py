"""What attention panels hold on to: a kernel's resident memory after 20 panels at 512 tokens, closed or not.

    python benchmarks/panel_memory.py

In fresh Jupyter kernels (`jupyter_client`), MiniLM, a 512-token text, after one warm-up panel (built and closed):
- one panel shown;
- the same notebook cell run 20 times, as a front end runs it (its `cellId` in each request), each run showing a new
  panel: each run closes the panel the last one showed;
- 20 panels built in a loop and closed with `panel.close()`;
- the reference: 20 panels built and kept open, what every re-run of a cell cost before panels were closed.
Goal: the first two within 100 MB of one panel. RSS is the kernel's VmRSS after `gc.collect()` and `malloc_trim`.
"""

from __future__ import annotations

import uuid

SETUP = """
import ctypes, gc
from bertviz_lab.widgets import AttentionPanel
from bertviz_lab.widgets.panels.models import default_model_and_tokenizer
model, tokenizer = default_model_and_tokenizer()
words = ("the quick brown fox jumps over the lazy dog while the cat watches from the warm window " * 60).split()
text = " ".join(words[:510])
def rss_mb():
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS")][0] / 1024
AttentionPanel(model=model, tokenizer=tokenizer, text=text).close()
"""
SHOW = "AttentionPanel(model=model, tokenizer=tokenizer, text=text)"


class Kernel:
    """A fresh kernel that runs cells as a front end does, naming each cell."""

    def __init__(self) -> None:
        from jupyter_client.manager import start_new_kernel

        self.manager, self.client = start_new_kernel()

    def run(self, code: str, cell: str | None = None) -> str:
        client = self.client
        message = client.session.msg("execute_request", {"code": code, "silent": False, "store_history": True,
                                                         "user_expressions": {}, "allow_stdin": False,
                                                         "stop_on_error": True},
                                     metadata={"cellId": cell or str(uuid.uuid4())})
        client.shell_channel.send(message)
        printed = []
        while True:
            reply = client.get_iopub_msg(timeout=600)
            if reply["parent_header"].get("msg_id") != message["header"]["msg_id"]:
                continue
            kind, content = reply["msg_type"], reply["content"]
            if kind == "stream":
                printed.append(content["text"])
            elif kind == "error":
                raise RuntimeError("\n".join(content["traceback"]))
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(printed)

    def rss(self) -> float:
        return float(self.run("print(rss_mb())"))

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def scenario(name: str, steps: list[tuple[str, str | None]], repeat: int) -> float:
    kernel = Kernel()
    try:
        kernel.run(SETUP)
        kernel.run(SHOW, cell="one")
        one = kernel.rss()
        for _ in range(repeat):
            for code, cell in steps:
                kernel.run(code, cell)
        after = kernel.rss()
    finally:
        kernel.close()
    print(f"| {name} | {one:.0f} MB | {after:.0f} MB | {after - one:+.0f} MB |", flush=True)
    return after - one


def main() -> None:
    print("| 20 attention panels at 512 tokens, MiniLM | RSS, one panel | RSS after | difference |")
    print("|---|---|---|---|")
    rerun = scenario("the same cell run 20 times", [(SHOW, "rerun")], 20)
    closed = scenario("built and closed with `close()`", [(f"{SHOW}.close()", None)], 20)
    kept = scenario("reference: built and kept open", [(f"kept = globals().setdefault('kept', []); kept.append({SHOW})",
                                                        None)], 20)
    print(f"\nre-run cell: {rerun:+.0f} MB, closed: {closed:+.0f} MB (goal: within 100 MB of one panel); "
          f"kept open: {kept:+.0f} MB, {kept / max(abs(rerun), 1):.0f}x the re-run cell's")


if __name__ == "__main__":
    main()
