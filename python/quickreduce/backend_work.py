"""The work objects the torch.distributed backend (``quickreduce.distributed``) returns: a call
quickreduce took is queued on a stream, so ``wait()`` orders the caller's stream after it and raises
an error a kernel recorded; a coalesced call returns the list of its calls' works."""
from __future__ import annotations

import torch
import torch.distributed as dist


class _WorkBase(dist.Work):
    """What every work object here shares: a list of output tensors; wait() and is_completed() are
    the subclass's."""

    def __init__(self, result: list):
        super().__init__()
        self._result = result

    def is_success(self) -> bool:
        return self.is_completed()

    def exception(self):
        return None

    def synchronize(self) -> None:
        self.wait()

    def result(self) -> list:
        return list(self._result)


class Work(_WorkBase):
    """What a call quickreduce took returns: the collective is queued on ``stream`` (None for a CPU
    test device), the caller's stream at the call."""

    def __init__(self, group: "quickreduce.distributed.ProcessGroupQuickreduce", result: list, stream):
        super().__init__(result)
        self._group, self._stream = group, stream

    def wait(self, timeout=None) -> bool:
        """Raise an error a kernel recorded; order the current stream after the call's (host never blocks)."""
        self._group._check_communicator()
        if self._stream is not None:
            current = torch.cuda.current_stream(self._stream.device)
            if current != self._stream:
                current.wait_stream(self._stream)
        return True

    def is_completed(self) -> bool:
        """True once the GPU finished the call's stream up to now (conservative: later work on it counts)."""
        return self._stream is None or self._stream.query()

    def get_future(self) -> torch.futures.Future:
        """A future holding the outputs, ready in stream order (as a CUDA future of NCCL's work)."""
        return _completed_future(self, self._result, self._stream)


class _WorkList(_WorkBase):
    """The works of a coalesced call split into one call per tensor pair."""

    def __init__(self, works: list, result: list):
        super().__init__(result)
        self._works = works

    def wait(self, timeout=None) -> bool:
        for w in self._works:
            w.wait()
        return True

    def is_completed(self) -> bool:
        return all(w.is_completed() for w in self._works)

    def get_future(self) -> torch.futures.Future:
        device = next((t.device for t in self._result if t.is_cuda), None)
        return _completed_future(self, self._result, torch.cuda.current_stream(device) if device else None)


def _completed_future(work, result: list, stream) -> torch.futures.Future:
    work.wait()  # the current stream is now after the collective
    if stream is None:
        fut = torch.futures.Future()
        fut.set_result(result)
        return fut
    fut = torch.futures.Future(devices=[stream.device])
    fut.set_result(result)  # records an event on the current stream, which waiters wait for
    return fut
