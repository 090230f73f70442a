"""Timing helpers shared by the bench/*_torch.py scripts (run on a GPU).

events_ms: CUDA-event time of fn() per call, median over `reps` calls after
`warm` unrecorded ones, with the spread (p90 - p10) / median. With
device_sync=False it waits on its last event only, not on the whole device
(work left running on another stream keeps running).
save_rows: the JSON file the scripts write: device, torch version, rows.
sdpa_backends, sweep: the attention scripts' loop: every PyTorch SDPA
backend (cuDNN, FlashAttention-2) at every shape, one case at a time, the
rows written to the JSON path given as the first argument.
graph_us: one CUDA graph of `calls` back-to-back fn() calls replayed 5
times; the median replay divided by `calls`, in microseconds. This is how
serving engines run decode kernels: no launch gaps from Python.
"""
import json
import sys

import torch


def events_ms(fn, warm=3, reps=10, device_sync=True):
    for _ in range(warm):
        fn()
    if device_sync:
        torch.cuda.synchronize()
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
           for _ in range(reps)]
    for a, b in evs:
        a.record()
        fn()
        b.record()
    if device_sync:
        torch.cuda.synchronize()
    else:
        evs[-1][1].synchronize()
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


def save_rows(path, rows, **extra):
    if not path:
        return
    with open(path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   **extra, "rows": rows}, f, indent=1)


def sdpa_backends():
    from torch.nn.attention import SDPBackend
    return (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION))


def sweep(header, shapes, case):
    """Prints the device and the table header, runs case(name, backend, b,
    h, s) for every SDPA backend and (batch, heads, seq) shape (it prints
    its own line and returns the row, or None when the backend refused),
    and saves the rows to sys.argv[1] when given. Returns the exit code."""
    path = sys.argv[1] if len(sys.argv) > 1 else None
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(header)
    rows = []
    for name, backend in sdpa_backends():
        for (b, h, s) in shapes:
            row = case(name, backend, b, h, s)
            if row is not None:
                rows.append(row)
            torch.cuda.empty_cache()
    save_rows(path, rows)
    return 0
