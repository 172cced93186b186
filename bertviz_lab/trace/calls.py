"""The call graph of a traced forward: every module call with its input and output shapes, parameter counts and the
call that produced each tensor it took (the edges the architecture diagrams draw)."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from bertviz_lab.model.hook_points import HookPoint
from bertviz_lab.trace.records import MODEL_INPUT, Call, parameter_table
from bertviz_lab.trace.shapes import TensorSpec, call_arguments, iter_tensors


class CallRecorder:
    """Module hooks that append a Call per module call of a model to `calls`."""

    def __init__(self, model: nn.Module, pass_index: Callable[[], int]) -> None:
        self.calls: list[Call] = []
        self._pass_index = pass_index  # the running forward pass of the trace
        self._model_ref = weakref.ref(model)
        self._open: dict[int, list[int]] = {}  # id(module) -> indices of its calls still running
        self._stack: list[int] = []  # indices of the calls now running, outermost first
        self._producers: dict[int, tuple[weakref.ref[torch.Tensor], int]] = {}  # id(tensor) -> (ref, producing call)
        self._params: dict[int, tuple[int, int, bool]] | None = None

    def attach(self, model: nn.Module) -> list[RemovableHandle]:
        """Hooks on every submodule but the hook points (a hook there would make attention form its probabilities)."""
        handles = []
        for path, module in model.named_modules():
            if path and not isinstance(module, HookPoint):
                handles.append(module.register_forward_pre_hook(functools.partial(self.call_start, path),
                                                                with_kwargs=True))
                handles.append(module.register_forward_hook(self.call_end, with_kwargs=True))
        return handles

    def model_start(self, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                    named: dict[str, Any]) -> None:
        """A forward of the traced model begins: its arguments are the model's input; its call is named by `named`."""
        self._producers.clear()
        self._stack.clear()
        for _, tensor in call_arguments(args, kwargs):
            self._producers[id(tensor)] = (weakref.ref(tensor), MODEL_INPUT)
        self.call_start("", model, (), named)

    def model_end(self, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: object) -> None:
        self.call_end(model, args, kwargs, output)
        self._producers.clear()

    def call_start(self, path: str, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        tensors = list(call_arguments(args, kwargs))
        num, trainable, shared = self._param_counts(module)
        index = len(self.calls)
        self.calls.append(Call(
            index=index, pass_index=self._pass_index(), path=path, class_name=type(module).__name__,
            depth=len(self._stack), parent=self._stack[-1] if self._stack else None,
            inputs=tuple(TensorSpec.of(n, t) for n, t in tensors),
            num_params=num, trainable_params=trainable, shares_params=shared,
            input_sources=tuple(self._producer_of(t) for _, t in tensors)))
        self._open.setdefault(id(module), []).append(index)
        self._stack.append(index)

    def call_end(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: object) -> None:
        running = self._open.get(id(module))
        if not running:
            return
        call = self.calls[running.pop()]
        if call.index in self._stack:  # calls that raised inside leave the stack here
            del self._stack[self._stack.index(call.index):]
        tensors = list(iter_tensors(output))
        call.outputs = tuple(TensorSpec.of(n, t) for n, t in tensors)
        call.output_sources = tuple(self._producer_of(t) for _, t in tensors)
        for _, tensor in tensors:
            self._set_producer(tensor, call)

    def clear(self) -> None:
        """Drop the bookkeeping that could pin tensors or modules (the calls stay)."""
        self._producers.clear()
        self._open.clear()
        self._stack.clear()

    def _producer_of(self, tensor: torch.Tensor) -> int | None:
        entry = self._producers.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else None

    def _set_producer(self, tensor: torch.Tensor, call: Call) -> None:
        """The innermost module that returned this tensor object produced it; an enclosing one only passed it on."""
        previous = self._producer_of(tensor)
        if previous is not None and previous != MODEL_INPUT:
            inner = self.calls[previous].path
            if not call.path or inner.startswith(call.path + "."):
                return
        self._producers[id(tensor)] = (weakref.ref(tensor), call.index)

    def _param_counts(self, module: nn.Module) -> tuple[int, int, bool]:
        """(parameters, trainable parameters, shares a parameter with a module outside), from one table per trace."""
        if self._params is None:
            model = self._model_ref()
            self._params = parameter_table(model) if model is not None else {}
        return self._params.get(id(module), (0, 0, False))
