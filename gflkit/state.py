"""Model state as a vector: the bridge between an ``nn.Module`` and the K×d client matrix.

Every method in gflkit sees a client's model as one row of a ``K × d`` tensor (its floating-point
parameters and buffers, flattened in registration order). :class:`FlatModule` binds a single working
module to one contiguous vector so that

* loading client ``k`` is one copy: ``flat.load(models[k])``, and
* reading it back after training is one copy: ``models[k] = flat.vector``,

because every parameter and buffer of the module *is* a view into ``flat.vector``. No module is
deep-copied per client per round.

Integer buffers (e.g. BatchNorm's ``num_batches_tracked``) are not part of the state: they carry no
learned information when BatchNorm uses a momentum, which is the PyTorch default.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor, nn


@dataclass(frozen=True)
class Entry:
    """One named tensor of a module inside the flat vector: ``vector[offset : offset + numel]``."""

    name: str
    shape: torch.Size
    offset: int
    is_buffer: bool

    @property
    def numel(self) -> int:
        """Number of scalars this entry occupies."""
        return int(torch.Size(self.shape).numel())

    @property
    def slice(self) -> slice:
        """The entry's position in the flat vector."""
        return slice(self.offset, self.offset + self.numel)


class Layout:
    """The ordered list of a module's tensors inside its flat vector."""

    def __init__(self, entries: list[Entry]):
        self.entries = entries
        self.dim = sum(e.numel for e in entries)

    def __len__(self) -> int:
        return len(self.entries)

    def mask(self, keep: Callable[[Entry], bool], device: torch.device | str | None = None) -> Tensor:
        """Boolean vector of length ``dim`` that is True on the entries for which ``keep(entry)`` holds.

        Example: ``layout.mask(lambda e: not e.is_buffer)`` selects the trainable parameters,
        ``layout.mask(lambda e: e.name.startswith("classifier"))`` a model's head.
        """
        mask = torch.zeros(self.dim, dtype=torch.bool, device=device)
        for entry in self.entries:
            if keep(entry):
                mask[entry.slice] = True
        return mask

    def parameter_mask(self, device: torch.device | str | None = None) -> Tensor:
        """Mask of the trainable parameters (buffers such as BatchNorm statistics excluded)."""
        return self.mask(lambda e: not e.is_buffer, device)

    @property
    def parameter_names(self) -> list[str]:
        """The names of the trainable parameters, in order (those of :meth:`FlatModule.parameters_as_views`)."""
        return [e.name for e in self.entries if not e.is_buffer]

    def split(self, vector: Tensor) -> dict[str, Tensor]:
        """Views of ``vector`` shaped like the module's tensors, keyed by name."""
        return {e.name: vector[e.slice].view(e.shape) for e in self.entries}


def _float_tensors(module: nn.Module) -> list[tuple[str, nn.Module, str, Tensor, bool]]:
    """(qualified name, owner module, attribute name, tensor, is_buffer) for every float tensor."""
    found = []
    for owner_name, owner in module.named_modules():
        prefix = f"{owner_name}." if owner_name else ""
        for attr, param in owner._parameters.items():
            if param is not None:
                found.append((prefix + attr, owner, attr, param, False))
        for attr, buf in owner._buffers.items():
            if buf is not None and buf.is_floating_point():
                found.append((prefix + attr, owner, attr, buf, True))
    return found


class FlatModule:
    """Binds a module's floating-point parameters and buffers to one contiguous vector.

    After construction ``flat.vector`` holds the module's current values and every parameter's
    ``.data`` (and every float buffer) is a view into it, so in-place optimiser steps and BatchNorm
    statistic updates write straight into the vector.
    """

    def __init__(self, module: nn.Module):
        tensors = _float_tensors(module)
        if not tensors:
            raise ValueError(f"{type(module).__name__} has no floating-point parameters or buffers")
        entries, offset = [], 0
        for name, _, _, tensor, is_buffer in tensors:
            entries.append(Entry(name, tensor.shape, offset, is_buffer))
            offset += tensor.numel()
        self.module = module
        self.layout = Layout(entries)
        first = tensors[0][3]
        self.vector = torch.empty(self.layout.dim, dtype=first.dtype, device=first.device)
        self.parameters: list[nn.Parameter] = [t for _, _, _, t, is_buf in tensors if not is_buf]
        for entry, (_, owner, attr, tensor, is_buffer) in zip(entries, tensors):
            view = self.vector[entry.slice].view(entry.shape)
            view.copy_(tensor.detach())
            if is_buffer:
                owner._buffers[attr] = view
            else:
                tensor.data = view

    def load(self, row: Tensor) -> None:
        """Write ``row`` (length ``d``) into the module's parameters and buffers."""
        if row.shape != self.vector.shape:
            raise ValueError(f"expected a state vector of shape {tuple(self.vector.shape)}, got {tuple(row.shape)}")
        with torch.no_grad():
            self.vector.copy_(row)

    def parameters_as_views(self, vector: Tensor) -> list[Tensor]:
        """``vector`` cut into tensors shaped like the module's trainable parameters (in order)."""
        return [vector[e.slice].view(e.shape) for e in self.layout.entries if not e.is_buffer]
