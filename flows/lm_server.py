"""A real, tiny language model behind an OpenAI-compatible completions server (`make eval-demo`).

Why: `aptforge eval` must be runnable, and testable, with no network and no model download. This is a
byte-level n-gram model with Witten-Bell interpolation down to a uniform distribution over the 256
byte values, trained at start on text the project ships (the bundled samples and the README). Its
log-probabilities are true ones (every distribution sums to 1) and it decodes greedily.

It speaks what base-model evaluation uses of the OpenAI API and of vLLM's extras:
`POST /v1/completions` (string, strings, token ids or lists of token ids as `prompt`; `max_tokens`,
`stop`, `echo`, `logprobs` with `tokens`, `token_logprobs`, `top_logprobs`, `text_offset`),
`GET /v1/models`, and vLLM's `GET /tokenizer_info`, `POST /tokenize`, `POST /detokenize` (lm-eval's
`local-completions` with `tokenizer_backend=remote` reads them). Tokens are UTF-8 bytes (ids 0-255),
so tokenising is lossless for any text; `text_offset` counts characters, every byte of a character
carrying the offset of that character. Every answered request is appended to a request log (memory,
and a JSONL file with `--log`), which tests read to count what a client sent.

`python -m flows.lm_server --port 8000` serves it (prints the base URL); any object with `score` and
`generate` (see `LanguageModel`) can stand behind the same server (tests use an oracle and a uniform one).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
import orjson

VOCAB = 256
_CACHE_LIMIT = 200_000


class TokenScore(NamedTuple):
    """One prompt position: the token's log-probability and the most likely token there."""

    logprob: float | None
    """None for the first token (nothing precedes it)."""
    top: int
    top_logprob: float


class LanguageModel(Protocol):
    """What the server needs of a model (byte tokens)."""

    name: str

    def score(self, data: bytes, start: int = 0) -> list[TokenScore]:
        """Log-probability of the bytes of `data` from `start` on, each given the bytes before it."""
        ...

    def generate(self, data: bytes, max_tokens: int) -> bytes:
        """Greedy continuation of `data`, at most `max_tokens` bytes."""
        ...


class ByteNGram:
    """Byte n-gram model with Witten-Bell interpolation (see the module docstring)."""

    def __init__(
        self, order: int, continuations: dict[bytes, tuple[np.ndarray, np.ndarray]], name: str
    ) -> None:
        """A trained model; use `train`."""
        self.order, self.name = order, name
        self._cont = continuations
        self._dist: dict[bytes, tuple[np.ndarray, int]] = {}
        self._lock = threading.Lock()

    @classmethod
    def train(cls, texts: Iterable[bytes], order: int = 5, name: str = "aptforge-ngram") -> ByteNGram:
        """Count every n-gram up to `order` bytes in `texts`."""
        counts: Counter[bytes] = Counter()
        for text in texts:
            for n in range(1, order + 1):
                counts.update(text[i : i + n] for i in range(len(text) - n + 1))
        grouped: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
        for gram, c in counts.items():
            grouped[gram[:-1]].append((gram[-1], c))
        cont = {
            h: (
                np.array([w for w, _ in pairs], dtype=np.int64),
                np.array([c for _, c in pairs], dtype=np.float64),
            )
            for h, pairs in grouped.items()
        }
        return cls(order, cont, name)

    def _logdist(self, history: bytes) -> tuple[np.ndarray, int]:
        """Log-probabilities of the next byte after `history` (its last order-1 bytes), and the argmax."""
        history = history[-(self.order - 1) :] if self.order > 1 else b""
        hit = self._dist.get(history)
        if hit is not None:
            return hit
        dist = np.full(VOCAB, 1.0 / VOCAB)
        for k in range(len(history) + 1):
            h = history[len(history) - k :] if k else b""
            entry = self._cont.get(h)
            if entry is None:
                break  # a longer history was never seen either
            ids, counts = entry
            total, types = counts.sum(), len(ids)
            mixed = dist * types
            np.add.at(mixed, ids, counts)
            dist = mixed / (total + types)
        logs = np.log(dist)
        out = (logs, int(np.argmax(logs)))
        with self._lock:
            if len(self._dist) > _CACHE_LIMIT:
                self._dist.clear()
            self._dist[history] = out
        return out

    def score(self, data: bytes, start: int = 0) -> list[TokenScore]:
        """Log-probability of the bytes of `data` from `start` on (the first byte has none)."""
        out: list[TokenScore] = []
        for i in range(start, len(data)):
            logs, top = self._logdist(data[max(0, i - self.order + 1) : i])
            out.append(TokenScore(None if i == 0 else float(logs[data[i]]), top, float(logs[top])))
        return out

    def generate(self, data: bytes, max_tokens: int) -> bytes:
        """Greedy bytes after `data`."""
        buf = bytearray(data[-self.order :])
        out = bytearray()
        for _ in range(max_tokens):
            _, top = self._logdist(bytes(buf[-(self.order - 1) :]) if self.order > 1 else b"")
            buf.append(top)
            out.append(top)
        return bytes(out)


def shipped_texts(root: Path) -> list[bytes]:
    """The project's own text: bundled samples (every file below `extractors/samples`) and the README."""
    files = sorted(p for p in (root / "extractors" / "samples").rglob("*") if p.is_file())
    files += [root / "README.md"]
    return [p.read_bytes() for p in files if p.exists()]


def train_default(order: int = 5, name: str = "aptforge-ngram") -> ByteNGram:
    """The n-gram model trained on the shipped text (seconds)."""
    return ByteNGram.train(shipped_texts(Path(__file__).resolve().parents[1]), order, name)


def token_text(token: int) -> str:
    """A byte token as text (non-ASCII bytes as `<0xNN>`, the usual byte-fallback spelling)."""
    return chr(token) if token < 0x80 else f"<0x{token:02X}>"


def char_offsets(data: bytes) -> list[int]:
    """Character offset of every byte (a multi-byte character's bytes share its offset)."""
    offsets, chars = [], -1
    for b in data:
        if b & 0xC0 != 0x80:  # not a continuation byte
            chars += 1
        offsets.append(max(chars, 0))
    return offsets


def _as_bytes_list(prompt: Any) -> list[bytes]:
    """OpenAI `prompt` in any of its four shapes, as one byte string per prompt."""
    if isinstance(prompt, str):
        return [prompt.encode("utf-8")]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return [bytes(prompt)]
    if isinstance(prompt, list):
        return [p.encode("utf-8") if isinstance(p, str) else bytes(p) for p in prompt]
    raise ValueError("prompt must be a string, a list of strings, token ids or lists of token ids")


def _cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    hits = [text.find(s) for s in stops if s and s in text]
    return (text[: min(hits)], True) if hits else (text, False)


def complete(model: LanguageModel, body: dict[str, Any]) -> dict[str, Any]:
    """The `/v1/completions` reply to `body` (pure; raises ValueError on a bad request)."""
    prompts = _as_bytes_list(body.get("prompt", ""))
    max_tokens = int(body.get("max_tokens") if body.get("max_tokens") is not None else 16)
    stop = body.get("stop") or []
    stops = [stop] if isinstance(stop, str) else list(stop)
    echo, want = bool(body.get("echo")), body.get("logprobs")
    choices, n_prompt, n_out = [], 0, 0
    for index, data in enumerate(prompts):
        generated = model.generate(data, max_tokens) if max_tokens > 0 else b""
        text, stopped = _cut_at_stop(generated.decode("utf-8", errors="replace"), stops)
        out_bytes = text.encode("utf-8") if stopped else generated
        finish = "stop" if stopped or max_tokens == 0 else "length"
        full = (data if echo else b"") + out_bytes
        choice: dict[str, Any] = {
            "index": index,
            "text": (data.decode("utf-8", errors="replace") if echo else "") + text,
            "finish_reason": finish,
            "logprobs": None,
        }
        if want is not None:
            # The prompt is scored on its own: a position's score never depends on what follows it.
            scores = model.score(data) if echo else []
            scores += model.score(data + out_bytes, len(data)) if out_bytes else []
            base = data.decode("utf-8", errors="replace") if echo else ""
            offsets = char_offsets(full) if echo else [len(base) + o for o in char_offsets(out_bytes)]
            choice["logprobs"] = {
                "tokens": [token_text(b) for b in full],
                "token_logprobs": [s.logprob for s in scores],
                "top_logprobs": [
                    None if s.logprob is None else {token_text(s.top): s.top_logprob} for s in scores
                ],
                "text_offset": offsets,
            }
        choices.append(choice)
        n_prompt, n_out = n_prompt + len(data), n_out + len(out_bytes)
    return {
        "id": "cmpl-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24],
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.get("model") or model.name,
        "choices": choices,
        "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out},
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _send(self, status: int, payload: Any) -> None:
        blob = orjson.dumps(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        self.wfile.write(blob)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        return orjson.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.server.model.name, "object": "model"}]})
        elif path == "/tokenizer_info":
            self._send(
                200, {"eos_token": None, "bos_token": None, "pad_token": None, "model_max_length": 10**9}
            )
        elif path == "/health":
            self._send(200, {})
        else:
            self._send(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    def do_POST(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        try:
            body = self._body()
            if path == "/v1/completions":
                with self.server.answering():  # past the gate of the moment (held: waits for good)
                    reply = complete(self.server.model, body)
                    self.server.record(body)
            elif path == "/tokenize":
                tokens = list(str(body.get("prompt", "")).encode("utf-8"))
                reply = {"tokens": tokens, "count": len(tokens), "max_model_len": 10**9}
            elif path == "/detokenize":
                reply = {"prompt": bytes(body.get("tokens", [])).decode("utf-8", errors="replace")}
            else:
                self._send(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
                return
        except (ValueError, TypeError) as exc:
            self._send(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            return
        self._send(200, reply)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], model: LanguageModel, log_path: Path | None) -> None:
        super().__init__(address, _Handler)
        self.model, self.log_path = model, log_path
        self.requests: list[dict[str, Any]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.busy = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Pass the gate of the moment and count the request as being answered in one step, under the
        lock `set_gate` takes: once `hold()` returns, every request past the old gate is in `busy`
        (else a request between the gate and the count was answered after a caller saw `busy` at 0)."""
        while True:
            with self._lock:
                gate = self.gate
                if gate.is_set():
                    self.busy += 1
                    break
            gate.wait()  # a held gate is never set: the request waits for good
        try:
            yield
        finally:
            with self._lock:
                self.busy -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-reply is not an error of the server."""

    def set_gate(self, gate: threading.Event) -> None:
        with self._lock:
            self.gate = gate

    def record(self, body: dict[str, Any]) -> None:
        key = hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()
        entry = {"key": key, "echo": bool(body.get("echo")), "max_tokens": body.get("max_tokens")}
        with self._lock:
            self.requests.append(entry)
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")


class CompletionsServer:
    """The model behind HTTP on 127.0.0.1 in a background thread (a context manager)."""

    def __init__(
        self, model: LanguageModel, host: str = "127.0.0.1", port: int = 0, log_path: Path | None = None
    ) -> None:
        """Bind now; `start()` (or `with`) serves."""
        self._server = _Server((host, port), model, log_path)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>/v1`."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Answered completion requests, in order (`key` = SHA-256 of the request body)."""
        return list(self._server.requests)

    def hold(self) -> None:
        """Stop answering completions: requests arriving from now on wait, and are never answered;
        those already past the gate are counted in `busy` when this returns."""
        self._server.set_gate(threading.Event())

    @property
    def busy(self) -> int:
        """Completion requests being answered right now."""
        return self._server.busy

    def release(self) -> None:
        """Answer requests arriving from now on (those held stay unanswered, as if their client died)."""
        gate = threading.Event()
        gate.set()
        self._server.set_gate(gate)

    def start(self) -> CompletionsServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="lm-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> CompletionsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve the n-gram model until interrupted; prints the base URL once it is ready."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--order", type=int, default=5)
    parser.add_argument("--name", default="aptforge-ngram")
    parser.add_argument("--log", type=Path, default=None, help="Append every answered request here (JSONL).")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    model = train_default(args.order, args.name)
    server = CompletionsServer(model, args.host, args.port, args.log)
    print(
        f"{server.base_url} (model {args.name}, order {args.order}, trained in "
        f"{time.perf_counter() - started:.1f}s)",
        flush=True,
    )
    try:
        server._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._server.server_close()


if __name__ == "__main__":
    main()

__all__ = ["ByteNGram", "CompletionsServer", "LanguageModel", "TokenScore", "complete", "train_default"]
