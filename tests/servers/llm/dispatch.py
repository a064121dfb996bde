"""Request handling of the stand-in LLM server: authentication, faults, latency and routing to the API handlers."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.servers.llm.faults import _CONTENT_FAULTS, Fault
from tests.servers.llm.protocol import (
    _CREDENTIAL_HEADERS,
    _MAX_TIMEOUT_FAULT_SECONDS,
    _ROUTE_TABLE,
    ANTHROPIC,
    ANTHROPIC_VERSION_HEADER,
    OPENAI,
)
from tests.servers.llm.requests import RecordedRequest
from tests.servers.llm.wire import _APIError, _error_body, _Handler, _new_id, _parse_multipart


class _DispatchMixin:
    """Handles one HTTP request: authentication, scripted faults, latency, routing."""

    def _handle(self, handler: _Handler) -> None:
        split = urlsplit(handler.path)
        path, method = split.path, handler.command
        body = handler.read_body()
        received_at = time.monotonic()
        headers = {k.lower(): v for k, v in handler.headers.items()}

        route, api, params = None, (ANTHROPIC if path.startswith("/v1/messages") else OPENAI), {}
        for route_method, pattern, name, route_api in _ROUTE_TABLE:
            match = pattern.match(path)
            if match and route_method == method:
                route, api, params = name, route_api, match.groupdict()
                break

        parsed_json: Any = None
        form: dict[str, Any] | None = None
        body_error: _APIError | None = None
        content_type = headers.get("content-type", "")
        if body and content_type.startswith("multipart/form-data"):
            try:
                form = _parse_multipart(content_type, body)
            except _APIError as exc:
                body_error = exc
        elif body:
            try:
                parsed_json = json.loads(body)
            except ValueError:
                body_error = _APIError(400, "We could not parse the JSON body of your request.")

        record = RecordedRequest(
            api=api,
            route=route,
            method=method,
            path=path,
            query=parse_qs(split.query),
            headers={k: v for k, v in headers.items() if k not in _CREDENTIAL_HEADERS},
            json=parsed_json,
            form=form,
            body_size=len(body),
            received_at=received_at,
        )
        with self._lock:
            self._log.append(record)
            self._counts[route or "unknown"] += 1
            latency = self._latency_by_route.get(route or "", self._latency_default)
            held = route is not None and self._holds.get(route) == self._counts[route]
            released = self._released

        request_id = _new_id("req_")
        id_header = "request-id" if api == ANTHROPIC else "x-request-id"

        def record_status(status: int) -> None:
            record.status = status

        def send_json(status: int, payload: Any, extra: Mapping[str, str] | None = None) -> None:
            send_raw(status, json.dumps(payload).encode("utf-8"), "application/json", extra)

        def send_raw(status: int, data: bytes, ctype: str, extra: Mapping[str, str] | None = None) -> None:
            record.status = status
            handler.send_bytes(status, data, ctype, {id_header: request_id, **(extra or {})})

        def send_error(exc: _APIError, extra: Mapping[str, str] | None = None) -> None:
            payload = _error_body(
                api,
                exc.status,
                exc.message,
                error_type=exc.error_type,
                code=exc.code,
                param=exc.param,
                request_id=request_id,
            )
            send_json(exc.status, payload, extra)

        if not self._authenticate(api, headers):
            record.authenticated = False
            if api == ANTHROPIC:
                message = "invalid x-api-key"
            else:
                message = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
            send_error(_APIError(401, message))
            return
        record.authenticated = True

        if held:  # `hold`: never answered; the connection closes once released
            released.wait()
            handler.close_connection = True
            return
        if latency > 0:
            self._stopping.wait(latency)

        fault: Fault | None = None
        if route is not None:
            with self._lock:
                queue = self._faults.get(route)
                if queue:
                    fault = queue.popleft()
        if fault is not None:
            record.fault = fault.kind
        if fault is not None and fault.kind not in _CONTENT_FAULTS:
            self._apply_fault(handler, fault, headers, api, send_error, send_raw, record_status)
            return

        try:
            if route is None:
                raise _APIError(404, f"Invalid URL ({method} {path})" if api == OPENAI else "Not Found")
            if body_error is not None:
                raise body_error
            if api == ANTHROPIC and not headers.get(ANTHROPIC_VERSION_HEADER):
                raise _APIError(400, "anthropic-version: header is required")
            status, payload = self._route(route, params, parsed_json, form, fault)
        except _APIError as exc:
            send_error(exc)
            return
        except Exception as exc:
            with self._lock:
                self.errors.append(f"{route}: {type(exc).__name__}: {exc}")
            send_error(_APIError(500, f"stand-in server error: {type(exc).__name__}: {exc}"))
            return
        if isinstance(payload, tuple):
            data, ctype = payload
            send_raw(status, data, ctype)
        else:
            send_json(status, payload)

    def _authenticate(self, api: str, headers: Mapping[str, str]) -> bool:
        bearer = headers.get("authorization", "")
        token = bearer[7:].strip() if bearer.lower().startswith("bearer ") else ""
        if api == ANTHROPIC:
            candidates = [c for c in (headers.get("x-api-key", "").strip(), token) if c]
            expected = self.anthropic_api_key
        else:
            candidates = [token] if token else []
            expected = self.openai_api_key
        if expected is None:
            return bool(candidates)
        return expected in candidates

    def _apply_fault(
        self,
        handler: _Handler,
        fault: Fault,
        headers: Mapping[str, str],
        api: str,
        send_error: Callable[..., None],
        send_raw: Callable[..., None],
        record_status: Callable[[int], None],
    ) -> None:
        """Answers (or deliberately fails to answer) a request as ``fault`` says."""
        if fault.kind == "status":
            extra = dict(fault.headers)
            if fault.retry_after is not None:
                extra["retry-after"] = f"{fault.retry_after:g}"
            if fault.retry_after_ms is not None:
                extra["retry-after-ms"] = f"{fault.retry_after_ms:g}"
            if fault.should_retry is not None:
                extra["x-should-retry"] = "true" if fault.should_retry else "false"
            send_error(
                _APIError(fault.status, fault.message, error_type=fault.error_type, code=fault.code), extra
            )
        elif fault.kind == "timeout":
            seconds = fault.seconds
            if seconds is None:
                try:
                    seconds = float(headers.get("x-stainless-read-timeout", "")) + 1.0
                except ValueError:
                    seconds = 30.0
            self._stopping.wait(min(seconds, _MAX_TIMEOUT_FAULT_SECONDS))
            handler.close_connection = True
        elif fault.kind == "malformed_json":
            prefix = b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{"index": 0,'
            send_raw(200, prefix + b" <<not json>>", "application/json")
        elif fault.kind == "truncated_body":
            payload = json.dumps(
                {"id": "truncated", "type": "message" if api == ANTHROPIC else "chat.completion"}
            )
            data = payload.encode()
            handler.close_connection = True
            record_status(200)
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data) + 512))
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(data[: len(data) // 2])
            handler.wfile.flush()
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_WR)
        elif fault.kind == "disconnect":
            handler.close_connection = True
        else:  # pragma: no cover - guarded by the constructors
            raise ValueError(f"unknown fault kind {fault.kind!r}")

    def _route(
        self,
        route: str,
        params: Mapping[str, str],
        body: Any,
        form: dict[str, Any] | None,
        fault: Fault | None = None,
    ) -> tuple[int, Any]:
        """Runs the endpoint logic; returns (status, JSON payload or (bytes, content type))."""
        if route == "chat.completions.create":
            return 200, self._chat_completion(self._require_object(body), fault)
        if route == "models.list":
            model = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "aptforge-standin"}
            return 200, {"object": "list", "data": [model]}
        if route == "files.create":
            return 200, self._create_file(form)
        if route == "files.retrieve":
            return 200, self._get_file(params["id"]).to_json()
        if route == "files.content":
            return 200, (self._get_file(params["id"]).content, "application/octet-stream")
        if route == "batches.create":
            return 200, self._create_openai_batch(self._require_object(body))
        if route == "batches.retrieve":
            return 200, self._poll_openai_batch(params["id"])
        if route == "batches.cancel":
            return 200, self._cancel_openai_batch(params["id"])
        if route == "messages.create":
            return 200, self._message(self._require_object(body), fault=fault)
        if route == "messages.batches.create":
            return 200, self._create_anthropic_batch(self._require_object(body))
        if route == "messages.batches.retrieve":
            return 200, self._poll_anthropic_batch(params["id"])
        if route == "messages.batches.results":
            return 200, (self._anthropic_results(params["id"]), "application/binary")
        if route == "messages.batches.cancel":
            return 200, self._cancel_anthropic_batch(params["id"])
        raise _APIError(404)  # pragma: no cover - every route is handled above

    @staticmethod
    def _require_object(body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise _APIError(400, "The request body must be a JSON object.")
        return body

    def _respond(self, api: str, request_json: dict[str, Any]) -> str:
        text = self.responder(api, request_json)
        if not isinstance(text, str):
            raise TypeError(f"responder must return str, got {type(text).__name__}")
        return text
