#!/usr/bin/env python3
"""Prepared check of the profiler plugin inside REAL NCCL on a machine with one GPU (ctest label gpu).

Loads libnccl-profiler-sentinel.so into PyTorch's NCCL through NCCL_PROFILER_PLUGIN, creates a 1-rank
communicator through ctypes (real NCCL emits no collective events for one rank, but Send/Recv to self
inside a group takes the P2P path: P2pApi + P2p events, and KernelCh events when that bit is set), runs
such exchanges and a few collectives, then checks what the plugin recorded:
  - NCCL loaded it at the newest profiler ABI it offers (v5 on 2.28, v6 on 2.29+);
  - init got sane arguments (nranks 1, rank 0, nNodes 1, commId equal to NCCL's logged commId);
  - the P2P records are complete and their GPU times plausible;
  - nothing crashes at destroy or exit (this script runs the exchange in a child and checks its status).
Prints what NCCL really emitted (record counts per func). Exit 0 = all checks passed.
Usage: real_nccl_plugin_check.py --plugin PATH [--iters N]
"""
import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def find_libnccl():
    import torch  # noqa: F401  (makes its bundled libraries loadable)
    cands = []
    try:
        import nvidia.nccl
        base = list(nvidia.nccl.__path__)[0]
        cands.append(os.path.join(base, "lib", "libnccl.so.2"))
    except Exception:
        pass
    cands += ["libnccl.so.2"]
    for c in cands:
        try:
            return ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL), c
        except OSError:
            continue
    raise SystemExit("FAIL: no libnccl.so.2 found (PyTorch with NCCL needed)")


def child(args):
    import torch
    nccl, path = find_libnccl()
    ver = ctypes.c_int()
    nccl.ncclGetVersion(ctypes.byref(ver))
    print(f"child: NCCL {ver.value} from {path}", flush=True)
    uid = ctypes.create_string_buffer(128)
    assert nccl.ncclGetUniqueId(uid) == 0
    comm = ctypes.c_void_p()
    torch.cuda.set_device(0)
    rc = nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0)
    assert rc == 0, f"ncclCommInitRank rc={rc}"
    stream = torch.cuda.current_stream().cuda_stream
    n = 1 << 20
    send = torch.ones(n, device="cuda", dtype=torch.float32)
    recv = torch.zeros(n, device="cuda", dtype=torch.float32)
    nccl_float32 = 7
    for _ in range(args.iters):
        assert nccl.ncclGroupStart() == 0
        assert nccl.ncclSend(ctypes.c_void_p(send.data_ptr()), ctypes.c_size_t(n), nccl_float32, 0, comm,
                             ctypes.c_void_p(stream)) == 0
        assert nccl.ncclRecv(ctypes.c_void_p(recv.data_ptr()), ctypes.c_size_t(n), nccl_float32, 0, comm,
                             ctypes.c_void_p(stream)) == 0
        assert nccl.ncclGroupEnd() == 0
    for _ in range(3):  # collectives on 1 rank: a memcpy, no events expected
        assert nccl.ncclAllReduce(ctypes.c_void_p(send.data_ptr()), ctypes.c_void_p(recv.data_ptr()),
                                  ctypes.c_size_t(n), nccl_float32, 0, comm, ctypes.c_void_p(stream)) == 0
    torch.cuda.synchronize()
    assert torch.equal(recv, send), "data check failed"
    time.sleep(0.5)  # let the proxy thread deliver the last KernelCh events
    assert nccl.ncclCommDestroy(comm) == 0
    print("child: destroyed communicator, exiting", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)

    plugin = os.path.abspath(args.plugin)
    tmp = tempfile.mkdtemp(prefix="sentinel-gpu-")
    dump = os.path.join(tmp, "records-%p.jsonl")
    log = os.path.join(tmp, "nccl.log")
    env = dict(os.environ, NCCL_PROFILER_PLUGIN=plugin, SENTINEL_DUMP=dump, NCCL_DEBUG="INFO",
               NCCL_DEBUG_SUBSYS="INIT,ENV", NCCL_DEBUG_FILE=log, SENTINEL_SOCKET="none")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, __file__, "--plugin", plugin, "--iters", str(args.iters), "--child"],
                          env=env, capture_output=True, text=True, timeout=300)
    print(proc.stdout, end="")
    print(proc.stderr[-4000:], end="", file=sys.stderr)
    failures = []

    def check(cond, what):
        print(("PASS " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    check(proc.returncode == 0, f"exchange, destroy and exit without a crash (exit status {proc.returncode})")
    text = open(log).read() if os.path.exists(log) else ""
    m = re.search(r"NCCL version (\d+)\.(\d+)\.(\d+)", text)
    loaded = re.search(r"PROFILER/Plugin: Loaded (\S+) \(v(\d+)\)", text)
    if m:
        major, minor = int(m.group(1)), int(m.group(2))
        newest = 6 if (major, minor) >= (2, 29) else 5 if (major, minor) >= (2, 28) else 4
        check(loaded is not None and int(loaded.group(2)) == newest,
              f"plugin loaded at the newest ABI: NCCL {m.group(0)} offers v{newest}, log says "
              f"{loaded.group(0) if loaded else 'no Loaded line'}")
    else:
        check(False, "NCCL version line in the debug log")
    comm_ids = set(re.findall(r"commId (0x[0-9a-f]+)", text))

    recs, inits = [], []
    for name in os.listdir(tmp):
        if name.startswith("records-"):
            for line in open(os.path.join(tmp, name)):
                obj = json.loads(line)
                if obj.get("type") == "coll":
                    recs.append(obj)
                elif obj.get("type") == "comm_init":
                    inits.append(obj)
    print(f"plugin saw {len(inits)} communicator init(s); records per func: "
          + json.dumps({f: sum(1 for r in recs if r["func"] == f) for f in sorted({r['func'] for r in recs})}))
    check(len(inits) == 1, "exactly one profiler init")
    if inits:
        i = inits[0]
        check(i.get("nranks") == 1 and i.get("rank") == 0 and i.get("nnodes") == 1,
              f"init arguments sane: {json.dumps(i)}")
        check(not comm_ids or int(i["comm"], 16) in {int(c, 16) for c in comm_ids},
              f"init commId {i.get('comm')} matches NCCL's logged commId {sorted(comm_ids)}")
    p2p = [r for r in recs if r["func"] in ("Send", "Recv")]
    check(len(p2p) == 2 * args.iters, f"one Send and one Recv record per exchange ({len(p2p)} of {2 * args.iters})")
    wall_ns = (time.monotonic() - t0) * 1e9
    plausible = [r for r in p2p if r.get("bytes") == (1 << 22) and 0 < r["gpu_end_ns"] - r["gpu_start_ns"] < 1e9
                 and r["gpu_start_ns"] >= r["enqueue_ns"] - 5e6]
    check(len(plausible) == len(p2p) and p2p,
          f"P2P records complete (4 MiB, GPU start after enqueue, 0 < GPU duration < 1 s): {len(plausible)}/{len(p2p)}")
    if p2p:
        d = sorted(r["gpu_end_ns"] - r["gpu_start_ns"] for r in p2p)
        print(f"GPU duration of P2P records: min {d[0]/1e3:.1f} us, median {d[len(d)//2]/1e3:.1f} us, "
              f"max {d[-1]/1e3:.1f} us; job wall {wall_ns/1e9:.1f} s")
    print(f"{len(failures) == 0 and 'ALL PASSED' or 'FAILED: ' + '; '.join(failures)}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
