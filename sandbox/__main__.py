"""`python -m sandbox [--host H] [--port P] [--tls-port P] [--cert-file PATH] [--demo ADDRESS]`: serve the
sandbox in the foreground (http on --port; Microsoft identity and Graph over https on --tls-port, with a
certificate generated at start and written to --cert-file, the file the app trusts; DNS over UDP on --port)."""

from __future__ import annotations

import argparse
import contextlib
import logging

from sandbox.server import SandboxServer


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--tls-port", type=int, default=8766, help="the HTTPS port (Microsoft identity, Graph)")
    parser.add_argument(
        "--cert-file",
        default=".local/sandbox/tls-cert.pem",
        help="where to write the generated certificate (settings.SANDBOX_CA_BUNDLE trusts this file)",
    )
    parser.add_argument("--demo", metavar="ADDRESS", help="create demo Gmail and Outlook mailboxes for this address")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s sandbox %(message)s")
    server = SandboxServer(args.host, args.port, tls_port=args.tls_port, cert_path=args.cert_file)
    if args.demo:
        from sandbox.demo import load_demo_mailbox, load_demo_outlook

        load_demo_mailbox(server.state, args.demo)
        load_demo_outlook(server.state, args.demo)
    print(
        f"sandbox listening on {server.url} and {server.tls_url} (certificate: {args.cert_file}),"
        f" DNS on udp {args.host}:{server.port}",
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
