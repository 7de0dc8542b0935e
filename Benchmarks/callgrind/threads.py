#!/usr/bin/env python3
"""threads.py COMMAND ARGS... : runs COMMAND and, every 10 ms until it exits, reads each of its
threads' /proc/PID/task/TID/{stat,status,schedstat} (and those of the process SERVER_PID names,
counted from the first look), then prints per thread: CPU time (schedstat, ns precision), time
spent waiting for a CPU while runnable, voluntary and involuntary context switches, minor faults.
Threads that ran under 5 ms are left out. Each thread is shown with its name (the engine's are
courier-worker and courier-journal: docs/DESIGN.md, "Threads"). Used by frozen_replay.sh threads
(docs/design/journal.md, "Where replay's time goes")."""
import os
import subprocess
import sys
import time


def sample(pid, tag, seen, first, order, names):
    try:
        tids = os.listdir(f'/proc/{pid}/task')
    except FileNotFoundError:
        return
    for t in tids:
        try:
            stat = open(f'/proc/{pid}/task/{t}/stat').read()
            status = open(f'/proc/{pid}/task/{t}/status').read()
            sched = [int(x) for x in open(f'/proc/{pid}/task/{t}/schedstat').read().split()]
            comm = open(f'/proc/{pid}/task/{t}/comm').read().strip()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = stat[stat.rindex(')') + 2:].split()
        vcs = ivcs = 0
        for line in status.splitlines():
            if line.startswith('voluntary_ctxt_switches'):
                vcs = int(line.split()[1])
            elif line.startswith('nonvoluntary_ctxt_switches'):
                ivcs = int(line.split()[1])
        v = (sched[0], sched[1], vcs, ivcs, int(fields[7]))
        key = (tag, t)
        names[key] = comm
        if key not in seen:
            order.append(key)
            first[key] = v if tag == 'server' else (0,) * len(v)
        seen[key] = v


def main():
    seen, first, order, names = {}, {}, [], {}
    server = os.environ.get('SERVER_PID')
    t0 = time.time()
    p = subprocess.Popen(sys.argv[1:])
    while p.poll() is None:
        sample(p.pid, 'client', seen, first, order, names)
        if server:
            sample(server, 'server', seen, first, order, names)
        time.sleep(0.01)
    print(f'wall {time.time() - t0:.3f} s (exit {p.returncode})')
    for key in order:
        run, wait, vcs, ivcs, minflt = [a - b for a, b in zip(seen[key], first[key])]
        if run < 5e6:
            continue
        print(f'{key[0]} thread {key[1]} ({names.get(key, "?")}): run {run / 1e6:.0f} ms, waiting for a CPU {wait / 1e6:.0f} ms, '
              f'voluntary switches {vcs}, involuntary {ivcs}, minor faults {minflt}')
    return p.returncode


if __name__ == '__main__':
    sys.exit(main())
