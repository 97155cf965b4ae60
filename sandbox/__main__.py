"""`python -m sandbox [--host H] [--port P] [--demo ADDRESS]`: serve the sandbox in the foreground."""

from __future__ import annotations

import argparse
import contextlib
import logging

from sandbox.server import SandboxServer


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--demo", metavar="ADDRESS", help="create the demo mailbox for this address")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s sandbox %(message)s")
    server = SandboxServer(args.host, args.port)
    if args.demo:
        from sandbox.demo import load_demo_mailbox

        load_demo_mailbox(server.state, args.demo)
    print(f"sandbox listening on {server.url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
