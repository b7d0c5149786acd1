"""run_cli.py — what the checkpoint scripts (torch_export.py, hf_import.py) share: a command run in a
session of its own, its output returned; a failure or a timeout fails the calling test (exit 1),
the whole process group killed on a timeout so that nothing outlives the test."""
import os
import signal
import subprocess
import sys


def run(cmd, timeout=120):
    """Runs a command in a session of its own; on timeout the whole group is killed."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        sys.exit(f"FAIL: timed out after {timeout} s: {' '.join(cmd)}")
    if proc.returncode != 0:
        sys.exit(f"FAIL: exit {proc.returncode}: {' '.join(cmd)}\n{out.decode()}\n{err.decode()}")
    return out.decode()
