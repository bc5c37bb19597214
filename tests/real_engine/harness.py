"""A real vLLM on this machine's CPUs, for the real-engine tests: the package's installer and server
(inferwatch/sim/_real_vllm.py, which `inferwatch demo --engine vllm-real` uses too) under the names the tests import,
and a command line.

    python tests/real_engine/harness.py install        # the venv and the model, cached (first time ~3 min)
    python tests/real_engine/harness.py serve --max-num-seqs 4   # serve until Ctrl-C, printing the URL
"""

from __future__ import annotations

import argparse
import signal
import sys

from inferwatch.sim._real_vllm import (
    MODEL_NAME,
    VLLM,
    Engine,
    EngineUnavailable,
    free_port,
    get,
    home,
    install,
    model,
    venv,
)

__all__ = ["MODEL_NAME", "VLLM", "Engine", "EngineUnavailable", "free_port", "get", "home", "install", "model", "venv"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("install", "serve"))
    args, flags = parser.parse_known_args()
    try:
        if args.what == "install":
            python = install()
            print(f"ready: {python} and {model(python)}")
            return 0
        stop_on = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop_on)  # held for sigwait, so the group is always stopped
        with Engine(tuple(flags)) as engine:
            print(f"serving {MODEL_NAME} at {engine.url} (log: {engine.log_path}); Ctrl-C stops it", flush=True)
            signal.sigwait(stop_on)
    except EngineUnavailable as err:
        print(f"real vLLM unavailable: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
