"""``python -m grpo_probe.serve module:factory``: build a policy as an arm's adapter is built and serve it.

``grpo-probe-serve`` (the distribution's command) is the same, and ``grpo-probe-serve lerobot CKPT_DIR``
serves a LeRobot checkpoint folder with no adapter written (:mod:`grpo_probe.serve.lerobot.cli`).

The factory is called as ``factory(checkpoint=PATH, device=DEVICE)`` (each only when given), the call an
arm bound with ``source: checkpoint`` makes, so the adapter a lab already wrote serves unchanged when it
builds on this package's types (:mod:`grpo_probe.serve.contract`). The hello declares the checkpoint's
sha256 (``checkpoint_sha256``, a folder's over its files): the arm's binding records it, and a different
checkpoint served later behind the same address is refused at connect.

``python -m grpo_probe.serve env module:factory [--scene module:callable] --port N`` serves a simulator
instead (:mod:`grpo_probe.serve.env_server`): each connection builds ``factory(gym_id, **kwargs)`` from
the design's ``env.params`` and steps it for the probe's adapter.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from grpo_probe.serve.server import serve_policy


def env_main(argv: Sequence[str]) -> int:
    """``env FACTORY [--scene NAME] [--port N | --address ws://HOST:PORT]``: serve a simulator."""
    from grpo_probe.serve.env_server import serve_env

    parser = argparse.ArgumentParser(
        prog="python -m grpo_probe.serve env", description="Serve a Gymnasium simulator to the probe."
    )
    parser.add_argument("factory", help="'package.module:function' called as function(gym_id, **kwargs)")
    parser.add_argument("--scene", default=None, help="'package.module:callable' called as scene(env)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (0: a free one); or give --address")
    parser.add_argument("--address", default=None, help="ws://HOST:PORT (instead of --host and --port)")
    args = parser.parse_args(argv)
    if args.address is not None and args.port is not None:
        parser.error("give --address or --port, not both")
    address = args.address or f"ws://{args.host}:{8766 if args.port is None else args.port}"
    try:
        serve_env(args.factory, address, scene=args.scene)
    except ValueError as exc:
        parser.error(str(exc))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, build the policy (or, after ``env``, the simulator; after ``lerobot``, a
    LeRobot checkpoint) and serve it until interrupted."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["lerobot"]:
        from grpo_probe.serve.lerobot.cli import main as lerobot_main

        return lerobot_main(argv[1:])
    if argv[:1] == ["env"]:
        return env_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m grpo_probe.serve", description=__doc__.splitlines()[0])
    parser.add_argument("factory", help="'package.module:function' returning the policy")
    parser.add_argument(
        "--address", default="ws://127.0.0.1:8765", help="ws://HOST:PORT (port 0: a free one)"
    )
    parser.add_argument("--checkpoint", default=None, help="passed to the factory as checkpoint=")
    parser.add_argument("--device", default=None, help="passed to the factory as device=")
    args = parser.parse_args(argv)
    module_name, sep, attr = args.factory.partition(":")
    if not sep or not module_name or not attr:
        parser.error(f"factory must look like 'package.module:function', got {args.factory!r}")
    factory = getattr(importlib.import_module(module_name), attr, None)
    if not callable(factory):
        parser.error(f"module {module_name!r} has no callable {attr!r}")
    given = {k: v for k, v in (("checkpoint", args.checkpoint), ("device", args.device)) if v is not None}
    serve_policy(factory(**given), args.address, checkpoint=args.checkpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
