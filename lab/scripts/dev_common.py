# Shared by the throwaway dev scripts (dev_timing.py, dev_split.py): not the product bench, whose
# timing lives in quickreduce.cli.harness.
import torch
import torch.distributed as dist


def graph_time_us(call, calls: int, replays: int = 7) -> float:
    """Median time per call (us) of call(0..calls-1) captured in one CUDA graph, after two eager
    warm-up calls on a side stream; every replay starts behind a barrier of all ranks."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(2): call(i)
    torch.cuda.current_stream().wait_stream(side); torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls): call(i)
    graph.replay(); graph.replay(); torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier(); torch.cuda.synchronize()
        start.record(); graph.replay(); end.record(); end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    del graph
    return sorted(times)[replays // 2]
