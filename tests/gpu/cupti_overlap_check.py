#!/usr/bin/env python3
"""Prepared GPU check of the CUPTI tracer (ctest label gpu; not run in CI). One process, one GPU.

A compute stream runs matmuls while a communication stream runs NCCL Send/Recv-to-self kernels
(ncclDevKernel_SendRecv) on a 1-rank communicator (ctypes NCCL, as real_nccl_plugin_check.py), in
phases with the two streams overlapped and serialised. torch.profiler traces the same process for
one phase. Checks:
  - the plugin (loaded by NCCL through NCCL_PROFILER_PLUGIN, SENTINEL_CUPTI=on) wrote GpuWindow
    records (SENTINEL_DUMP JSONL) with NCCL and compute time, status 0 outside the profiler phase;
  - sentinel's overlap over the overlapped phase agrees with torch.profiler's timeline (NCCL kernel
    time overlapped by other kernels / NCCL kernel time) within 0.15, and the serialised phase
    shows overlap near 0;
  - torch.profiler got its full GPU trace while sentinel was loaded (kernels of both kinds);
  - windows during the profiler phase are reported not measured (foreign owner) or measured, but
    never with a wrong overlap; after the profiler stops, sentinel re-arms (SENTINEL_CUPTI_REARM_S=2).
Usage: cupti_overlap_check.py --plugin PATH   (about 1 minute on an H100/H200)
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from real_nccl_plugin_check import find_libnccl  # noqa: E402


def phase(torch, nccl, comm, a, b, send, recv, comp, comms, seconds, overlapped):
    import ctypes
    end = time.time() + seconds
    n = send.numel()
    while time.time() < end:
        with torch.cuda.stream(comp):
            for _ in range(4):
                torch.matmul(a, b)
        if not overlapped:
            comms.wait_stream(comp)
        for _ in range(4):
            nccl.ncclGroupStart()
            nccl.ncclSend(ctypes.c_void_p(send.data_ptr()), ctypes.c_size_t(n), 7, 0, comm,
                          ctypes.c_void_p(comms.cuda_stream))
            nccl.ncclRecv(ctypes.c_void_p(recv.data_ptr()), ctypes.c_size_t(n), 7, 0, comm,
                          ctypes.c_void_p(comms.cuda_stream))
            nccl.ncclGroupEnd()
        if not overlapped:
            comp.wait_stream(comms)
        torch.cuda.synchronize()


def child(args):
    import ctypes
    import torch
    nccl, path = find_libnccl()
    torch.cuda.set_device(0)
    uid = ctypes.create_string_buffer(128)
    assert nccl.ncclGetUniqueId(uid) == 0
    comm = ctypes.c_void_p()
    assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    send = torch.ones(64 << 20, device="cuda")
    recv = torch.zeros_like(send)
    comp, comms = torch.cuda.Stream(), torch.cuda.Stream()
    marks = {}
    marks["overlap_start"] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    phase(torch, nccl, comm, a, b, send, recv, comp, comms, 6, True)
    marks["overlap_end"] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    phase(torch, nccl, comm, a, b, send, recv, comp, comms, 4, False)
    marks["serial_end"] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        phase(torch, nccl, comm, a, b, send, recv, comp, comms, 3, True)
    marks["profiler_end"] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    prof.export_chrome_trace(os.path.join(args.out, "torch_trace.json"))
    phase(torch, nccl, comm, a, b, send, recv, comp, comms, 6, True)  # re-arm window
    marks["after_end"] = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    assert nccl.ncclCommDestroy(comm) == 0
    json.dump(marks, open(os.path.join(args.out, "marks.json"), "w"))
    return 0


def torch_overlap(trace_path):
    ev = [e for e in json.load(open(trace_path))["traceEvents"]
          if e.get("cat") == "kernel" and e.get("ph") == "X"]
    nccl = [(e["ts"], e["ts"] + e["dur"]) for e in ev if "nccl" in e["name"].lower()]
    comp = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if "nccl" not in e["name"].lower())
    tot = sum(e - s for s, e in nccl)
    ov = 0.0
    for s, e in nccl:
        cur = s
        for cs, ce in comp:
            lo, hi = max(cur, cs), min(e, ce)
            if hi > lo:
                ov += hi - lo
                cur = hi
    return len(nccl), len(comp), (ov / tot if tot else -1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.child:
        return child(args)
    out = tempfile.mkdtemp(prefix="sentinel-cupti-gpu-")
    env = dict(os.environ, NCCL_PROFILER_PLUGIN=args.plugin, SENTINEL_CUPTI="on",
               SENTINEL_CUPTI_WINDOW_MS="500", SENTINEL_CUPTI_REARM_S="2",
               SENTINEL_CUPTI_STARVE_MS="1000", SENTINEL_LOG_LEVEL="info", NCCL_DEBUG="INFO",
               NCCL_DEBUG_SUBSYS="INIT,PROFILE", SENTINEL_SOCKET="none",
               SENTINEL_DUMP=os.path.join(out, "sentinel.%p.jsonl"))
    t0 = time.time()
    rc = subprocess.run([sys.executable, __file__, "--child", "--out", out, "--plugin", args.plugin],
                        env=env, timeout=400).returncode
    print(f"child rc={rc} in {time.time() - t0:.1f} s; artefacts in {out}")
    ok = rc == 0
    marks = json.load(open(os.path.join(out, "marks.json")))
    wins = []
    for f in glob.glob(os.path.join(out, "sentinel.*.jsonl")):
        wins += [json.loads(l) for l in open(f) if '"gpu_window"' in l]
    print(f"{len(wins)} GPU windows")

    def ratio(lo, hi):
        sel = [w for w in wins if w["start_ns"] >= lo and w["end_ns"] <= hi and w["status"] == 0]
        n = sum(w["nccl_ns"] for w in sel)
        return len(sel), (sum(w["overlap_ns"] for w in sel) / n if n else -1)

    n1, ov = ratio(marks["overlap_start"], marks["overlap_end"])
    n2, ser = ratio(marks["overlap_end"], marks["serial_end"])
    n3, after = ratio(marks["profiler_end"] + 3_000_000_000, marks["after_end"])
    prof = [w for w in wins if w["start_ns"] >= marks["serial_end"] and w["end_ns"] <= marks["profiler_end"]]
    nk, ck, tov = torch_overlap(os.path.join(out, "torch_trace.json"))
    print(f"sentinel overlap (overlapped phase, {n1} windows) = {ov:.3f}")
    print(f"sentinel overlap (serialised phase, {n2} windows) = {ser:.3f}")
    print(f"torch.profiler: {nk} NCCL kernels, {ck} other kernels, overlap = {tov:.3f}")
    print(f"profiler phase windows: {[w['status'] for w in prof]}")
    print(f"after the profiler ({n3} measured windows): overlap = {after:.3f}")
    ok &= n1 > 0 and ov >= 0 and nk > 0 and ck > 0
    ok &= abs(ov - tov) <= 0.15
    ok &= 0 <= ser <= 0.10
    ok &= n3 > 0
    for w in prof:  # during the profiler: not measured, or measured and consistent
        if w["status"] == 0 and w["nccl_ns"] > 0:
            ok &= abs(w["overlap_ns"] / w["nccl_ns"] - tov) <= 0.25
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
