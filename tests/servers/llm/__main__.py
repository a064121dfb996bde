"""Serve the stand-in LLM server from the command line."""

from __future__ import annotations

import threading

from tests.servers.llm.responders import RESPONDERS
from tests.servers.llm.server import LLMStandInServer


def main(argv: list[str] | None = None) -> None:
    """Serves the stand-in until interrupted; prints its base URL on the first line.

    Args:
        argv: Command-line arguments (``--latency``, ``--responder``, ``--api-key``,
            ``--batch-polls``); ``sys.argv`` when None.
    """
    import argparse

    parser = argparse.ArgumentParser(description="aptforge's stand-in OpenAI + Anthropic server")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    parser.add_argument("--responder", choices=sorted(RESPONDERS), default="distractors")
    parser.add_argument("--api-key", default=None, help="accepted key (default: any non-empty key)")
    parser.add_argument("--batch-polls", type=int, default=1, help="polls a batch stays in progress")
    args = parser.parse_args(argv)
    server = LLMStandInServer(
        responder=RESPONDERS[args.responder],
        openai_api_key=args.api_key,
        anthropic_api_key=args.api_key,
        latency=args.latency,
        batch_in_progress_polls=args.batch_polls,
    ).start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
