"""Timing helpers shared by the bench/*_torch.py scripts (run on a GPU).

events_ms: CUDA-event time of fn() per call, median over `reps` calls after
`warm` unrecorded ones, with the spread (p90 - p10) / median.
graph_us: one CUDA graph of `calls` back-to-back fn() calls replayed 5
times; the median replay divided by `calls`, in microseconds. This is how
serving engines run decode kernels: no launch gaps from Python.
"""
import torch


def events_ms(fn, warm=3, reps=10):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
           for _ in range(reps)]
    for a, b in evs:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in evs)
    med = t[len(t) // 2]
    return med, (t[int(0.9 * (reps - 1))] - t[int(0.1 * (reps - 1))]) / med


def graph_us(fn, calls):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / calls)
    return sorted(ts)[2]
