"""Serve a scorer as a batched HTTP reward model (OpenRLHF remote RM schema, verl, native records).

Endpoints: POST /get_reward (OpenRLHF: {"query", "prompts", "labels"} -> {"rewards"}), POST /score
({"items": [{question, response, profile, ...}]} -> {"scores"}), GET /health, GET /metrics.
Requests are coalesced into batches up to a token budget; a full queue answers 503 + Retry-After.
Bodies over --max_body_bytes get 413 before they are parsed. With --api_key_env NAME every path
but /health needs 'Authorization: Bearer $NAME'; binding a non-loopback --host needs a token
unless --insecure is given.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``prbench serve``."""
    from prbench.commands import add_scorer_argument
    from prbench.downstream.serve_guard import DEFAULT_MAX_BODY_BYTES

    add_scorer_argument(parser)  # a pointwise scorer, checked before the server starts
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (anything but loopback needs --api_key_env, "
                        "or --insecure)")
    parser.add_argument("--port", type=int, default=8000, help="port (0 = any free port)")
    parser.add_argument("--batch_tokens", type=int, default=65536,
                        help="approximate tokens (characters/4) per coalesced batch")
    parser.add_argument("--max_batch_items", type=int, default=256,
                        help="most responses per coalesced batch")
    parser.add_argument("--max_wait_ms", type=float, default=5.0,
                        help="longest a request waits for others to join its batch")
    parser.add_argument("--max_queue", type=int, default=1024,
                        help="most waiting requests; more are answered 503 + Retry-After")
    parser.add_argument("--max_items_per_request", type=int, default=4096,
                        help="most responses in one HTTP request (more: 413)")
    parser.add_argument("--max_body_bytes", type=int, default=DEFAULT_MAX_BODY_BYTES,
                        help="largest request body in bytes; larger ones get 413 before parsing")
    parser.add_argument(
        "--api_key_env", default="", metavar="NAME",
        help="require 'Authorization: Bearer <token>' on every path but /health, the token read "
        "from the environment variable NAME (never from the command line, never logged)",
    )
    parser.add_argument(
        "--insecure", action="store_true",
        help="allow a non-loopback --host without --api_key_env (anyone who can reach the port "
        "can use the scorer)",
    )
    parser.add_argument(
        "--strip", action="append", default=[], metavar="TEXT",
        help="remove TEXT from the end of OpenRLHF responses (e.g. the policy's EOS token); "
        "repeatable",
    )
    parser.add_argument("--log_level", default="info",
                        choices=("critical", "error", "warning", "info", "debug"),
                        help="the web server's log level")


def api_key(args: argparse.Namespace) -> str | None:
    """The bearer token the server requires (``None``: none), checked against ``--host``.

    Raises:
        OptionsError: ``--api_key_env`` names an unset or empty variable, or a non-loopback
            ``--host`` has no token and no ``--insecure``.
    """
    from prbench.downstream.serve_guard import is_loopback
    from prbench.options import OptionsError

    if args.api_key_env:
        from prbench.redaction import secret_from_env

        token = secret_from_env(args.api_key_env).strip()  # known, so never written
        if not token:
            raise OptionsError(
                f"--api_key_env {args.api_key_env}: the environment variable "
                f"${args.api_key_env} is not set or empty; export the token there"
            )
        return token
    if not is_loopback(args.host) and not args.insecure:
        raise OptionsError(
            f"--host {args.host} lets other machines reach the reward server, and it has no "
            "token: pass --api_key_env NAME (clients then send 'Authorization: Bearer <token>'), "
            "or --insecure to serve without authentication on a network you trust"
        )
    return None


def check_address(host: str, port: int) -> None:
    """Check that the server can listen on ``host:port`` before the scorer is built.

    A port out of range, a host name that does not resolve and an address already in use would
    otherwise end the run after the model loaded, with the web server's own log line (and, for
    the range, a traceback). The probe socket is closed at once; port 0 (any free port) always
    passes the bind.

    Raises:
        OptionsError: naming ``--host``/``--port`` and the reason.
    """
    import socket

    from prbench.options import OptionsError

    if not 0 <= port <= 65535:
        raise OptionsError(f"--port {port}: a port is a number from 0 to 65535 (0 = any free "
                           "port)")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise OptionsError(f"--host {host}: cannot resolve it ({exc.strerror})") from exc
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the web server does
        try:
            probe.bind(address)
        except OSError as exc:
            raise OptionsError(
                f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc}); "
                "pick another --port, or stop what listens there") from exc


def run(args: argparse.Namespace) -> int:
    """Build the scorer runtime and serve it until interrupted."""
    from prbench.commands import check_scorer, scorer_specs
    from prbench.downstream.evaluator import parse_scorer_spec
    from prbench.downstream.serve import create_app, runtime_factory, startup_error
    from prbench.downstream.serve_batcher import ServerConfig
    from prbench.options import OptionsError
    from prbench.plugins import get_registry

    try:
        import uvicorn
    except ImportError:
        print("error: prbench serve needs the 'serve' extra: pip install -c constraints-cpu.txt "
              "-e '.[serve]'", file=sys.stderr)
        return 1
    token = api_key(args)
    scorer, options = parse_scorer_spec(scorer_specs(args)[0])
    registry = get_registry(args.plugin)
    check_scorer(registry, scorer, options, what="served scorer")  # before the port is bound
    check_address(args.host, args.port)  # before the scorer is built
    component = registry.get("scorer", scorer)
    try:
        config = ServerConfig(
            batch_tokens=args.batch_tokens, max_batch_items=args.max_batch_items,
            max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
            max_items_per_request=args.max_items_per_request,
            max_body_bytes=args.max_body_bytes, strip=tuple(args.strip),
        )
    except ValueError as exc:
        raise OptionsError(str(exc)) from exc
    if component.diagnostic:
        print(f"note: {scorer!r} is a DIAGNOSTIC scorer (it reads the hidden rubric); "
              "requests must carry narrative/rubric_aspects", file=sys.stderr)
    try:  # build the scorer before the server starts: a failure is one line, nothing served
        runtime = runtime_factory(component.qualified_id, options)()
    except Exception as exc:  # a model that cannot load, a damaged cache file, ...
        print(f"error: scorer {scorer!r} could not be built, nothing was served: "
              f"{type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    app = create_app(lambda: runtime, config, scorer=scorer,
                     diagnostic=component.diagnostic, api_key=token)
    auth = (f"bearer token from ${args.api_key_env}; /health open" if token
            else "no authentication" + (" (--insecure)" if args.insecure else ""))
    print(f"prbench serve: {scorer} on http://{args.host}:{args.port} "
          f"(POST /get_reward, POST /score, GET /health, GET /metrics; {auth}; bodies up to "
          f"{config.max_body_bytes} bytes)", file=sys.stderr)
    try:  # the scorer is built (app start-up) before the port is bound
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    except SystemExit:
        failure = startup_error(app)
        if not failure:
            raise
        print(f"error: scorer {scorer!r} could not be built, nothing was served: {failure}",
              file=sys.stderr)
        return 1
    return 0
