"""Peak memory and time of integrated gradients at 512 tokens: batches sized from the memory budget (the default)
against the old fixed default of 64 points per batch, each in its own process, in one run.

    python benchmarks/saliency_memory.py                # all-MiniLM-L6-v2, 512 tokens, 64 steps, both settings
    python benchmarks/saliency_memory.py --tokens 256 --steps 32 --threads 2 --rounds 1

Each setting runs in a fresh Python (`--child`): it loads the default model (`bertviz_lab.load_default()`), runs one
small attribution to warm up, then times `saliency(model, inputs, HiddenUnit(0), steps=...)` once and reads the
process' peak resident memory (VmHWM, which counts the model, torch and the warm-up too). The input is a fixed
random sequence of ordinary token ids between [CLS] and [SEP]. Rounds alternate the order of the two settings; the
fastest time of each (the least disturbed on a shared machine) and its highest peak are reported, with the load
average: on a busy 2-core machine one setting's times vary by 2x between rounds.
Goal: the default peaks at <= 1.5 GB and takes no more than 1.25x the old default's time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SETTINGS = {
    "default (memory budget)": {},
    "old default (internal_batch_size=64)": {"internal_batch_size": 64, "memory_budget": 10**15},
}
GOAL_PEAK_BYTES = 1.5e9
GOAL_TIME_RATIO = 1.25


def peak_rss() -> int:
    """This process' peak resident memory in bytes (VmHWM)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


def child(tokens: int, steps: int, threads: int | None, settings: dict) -> dict:
    """One setting, measured in this process; what it prints is read by the parent."""
    import torch

    import bertviz_lab
    from bertviz_lab.trace.saliency import memory_budget_bytes, points_per_batch, saliency
    from bertviz_lab.trace.targets import HiddenUnit

    if threads:
        torch.set_num_threads(threads)
    model, tokenizer = bertviz_lab.load_default()
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 20000, (1, tokens), generator=generator)
    ids[0, 0], ids[0, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    saliency(model, inputs, HiddenUnit(0), steps=2, tokenizer=tokenizer, **settings)  # warm up
    started = time.perf_counter()
    saliency(model, inputs, HiddenUnit(0), steps=steps, tokenizer=tokenizer, **settings)
    seconds = time.perf_counter() - started
    batch = points_per_batch(model, model.get_input_embeddings(), tokens,
                             memory_budget_bytes(settings.get("memory_budget")), settings.get("internal_batch_size"))
    return {"seconds": seconds, "peak_bytes": peak_rss(), "points_per_batch": batch, "threads": torch.get_num_threads()}


def measure(name: str, tokens: int, steps: int, threads: int | None) -> dict:
    command = [sys.executable, __file__, "--child", name, "--tokens", str(tokens), "--steps", str(steps)]
    if threads:
        command += ["--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--rounds", type=int, default=3, help="processes per setting, in alternating order")
    parser.add_argument("--child", choices=SETTINGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.tokens, args.steps, args.threads, SETTINGS[args.child])))
        return
    load_before = os.getloadavg()[0]
    runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    for round_ in range(args.rounds):
        for name in list(SETTINGS)[::1 if round_ % 2 == 0 else -1]:
            runs[name].append(measure(name, args.tokens, args.steps, args.threads))
    results = {name: {**found[0], "seconds": min(run["seconds"] for run in found),
                      "peak_bytes": max(run["peak_bytes"] for run in found)} for name, found in runs.items()}
    print(f"integrated gradients, all-MiniLM-L6-v2, {args.tokens} tokens, {args.steps} steps, "
          f"{results[next(iter(SETTINGS))]['threads']} threads, fastest of {args.rounds} rounds "
          f"(load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after)")
    for name, result in results.items():
        print(f"  {name:40s} peak {result['peak_bytes'] / 1e9:5.2f} GB  {result['seconds']:6.1f} s  "
              f"{result['points_per_batch']:3d} points per batch")
    new, old = results.values()
    memory_ratio, time_ratio = new["peak_bytes"] / old["peak_bytes"], new["seconds"] / old["seconds"]
    print(f"  default / old default: peak x{memory_ratio:.2f}, time x{time_ratio:.2f}")
    peak_met, time_met = new["peak_bytes"] <= GOAL_PEAK_BYTES, time_ratio <= GOAL_TIME_RATIO
    print(f"  goals: peak <= {GOAL_PEAK_BYTES / 1e9:.1f} GB: {'met' if peak_met else 'MISSED'}; "
          f"time <= {GOAL_TIME_RATIO}x the old default: {'met' if time_met else 'MISSED'}")


if __name__ == "__main__":
    main()
