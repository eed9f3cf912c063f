#!/usr/bin/env python3
"""The performance regression guard (ctest perf_guard_test, label `perf`; the serial stage of
scripts/test.sh and so .ci/run): ratios measured in one process or run, never absolute times,
checked against tests/benchmarks/perf_baseline.json with a 1.5x margin.

  hot_path_x_floor  the plugin's calling-thread CPU per collective (Coll,KernelCh, 1 channel)
                    / the replayed floor's (one clock read + one 64-byte store per NCCL call),
                    both from one sentinel_collective_benchmark process
  process_x_floor   the same with the whole process's CPU (drainer, synchronous drains)
  ingest_x_reference sentineld's CPU per record in process (64 ranks, every analysis on;
                    sentinel_ingest_benchmark) / a fixed reference loop timed beside it
  paced_loss        records lost at a paced 50,000 collectives a second through a real sentineld
                    (sentinel_paced_benchmark): must be none

Each ratio is the median of --rounds runs. Exit status 1 on a regression, 2 on a broken run.
Usage: perf_guard.py BUILD_DIR [--rounds N] [--baseline FILE] [--print]
  --print  measure and print a baseline.json for these figures (to update it: say why in the log)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

MARGIN = 1.5


def run(cmd, env=None):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=300)
    return p.returncode, p.stdout, p.stderr


def hot_path(build, rounds):
    bench = os.path.join(build, 'tests/benchmarks/sentinel_collective_benchmark')
    plugin = os.path.join(build, 'plugin/libnccl-profiler-sentinel.so')
    env = dict(os.environ, SENTINEL_DEV_BENCH_PLUGIN=plugin, SENTINEL_EVENTS='Coll,KernelCh')
    hot, proc = [], []
    for _ in range(rounds):
        rc, out, err = run([bench, '--benchmark_filter=BM_(Collective|FloorCollective)/1/',
                            '--benchmark_repetitions=3', '--benchmark_report_aggregates_only=true',
                            '--benchmark_format=json'], env)
        if rc != 0:
            raise RuntimeError('sentinel_collective_benchmark failed (%d): %s' % (rc, err[-2000:]))
        med = {b['run_name'].split('/')[0]: b for b in json.loads(out)['benchmarks']
               if b.get('aggregate_name') == 'median'}
        floor = float(med['BM_FloorCollective']['cpu_time'])
        hot.append(float(med['BM_Collective']['cpu_time']) / floor)
        proc.append(float(med['BM_Collective']['cpu_ns']) / floor)
    return statistics.median(hot), statistics.median(proc)


def ingest(build, rounds):
    bench = os.path.join(build, 'tests/benchmarks/collector/sentinel_ingest_benchmark')
    xs = []
    for _ in range(rounds):
        rc, out, err = run([bench, '--mode=throughput', '--ranks=64', '--records=2000000'])
        if rc != 0:
            raise RuntimeError('sentinel_ingest_benchmark failed (%d): %s%s' % (rc, out, err))
        fields = dict(kv.split('=', 1) for kv in out.split() if '=' in kv)
        xs.append(float(fields['x_reference']))
    return statistics.median(xs)


def paced_loss(build):
    bench = os.path.join(build, 'tests/benchmarks/sentinel_paced_benchmark')
    rc, out, err = run([bench, '--rates=50000', '--seconds=2', '--expect_no_loss_up_to=50000'])
    if rc == 2:
        raise RuntimeError('sentinel_paced_benchmark found no sentineld: %s' % err[-2000:])
    print(out.rstrip())
    return 0 if rc == 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('build')
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--baseline', default=os.path.join(os.path.dirname(__file__), 'perf_baseline.json'))
    ap.add_argument('--print', action='store_true')
    a = ap.parse_args()
    try:
        hot, proc = hot_path(a.build, a.rounds)
        x_ref = ingest(a.build, a.rounds)
        lost = paced_loss(a.build)
    except (RuntimeError, KeyError, ValueError, subprocess.TimeoutExpired) as e:
        print('perf guard: broken run: %s' % e)
        return 2
    now = {'hot_path_x_floor': round(hot, 3), 'process_x_floor': round(proc, 3),
           'ingest_x_reference': round(x_ref, 2), 'paced_loss': lost}
    if a.print:
        print(json.dumps(now, indent=2))
        return 0
    base = json.load(open(a.baseline))
    bad = []
    print('%-20s %10s %10s %10s' % ('figure', 'baseline', 'now', 'limit'))
    for key in ('hot_path_x_floor', 'process_x_floor', 'ingest_x_reference'):
        limit = base[key] * MARGIN
        print('%-20s %10.3f %10.3f %10.3f' % (key, base[key], now[key], limit))
        if now[key] > limit:
            bad.append('%s %.3f > %.3f (%.1fx the baseline %.3f)' % (key, now[key], limit, MARGIN,
                                                                    base[key]))
    print('%-20s %10d %10d %10d' % ('paced_loss', 0, lost, 0))
    if lost:
        bad.append('records lost at a paced 50,000 collectives a second')
    for b in bad:
        print('perf guard: REGRESSION: %s' % b)
    print('perf guard: %s' % ('FAILED' if bad else 'passed'))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
