"""Files and batches of the stand-in LLM server: OpenAI Batch and Anthropic Message Batches, polled to completion."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

from tests.servers.llm.protocol import ANTHROPIC, OPENAI
from tests.servers.llm.wire import (
    _AnthropicBatch,
    _APIError,
    _error_body,
    _jsonl,
    _new_id,
    _OpenAIBatch,
    _rfc3339,
    _StoredFile,
)


class _BatchesMixin:
    """Stores files and runs OpenAI and Anthropic batches."""

    def _create_file(self, form: dict[str, Any] | None) -> dict[str, Any]:
        if form is None or not isinstance(form.get("file"), bytes):
            raise _APIError(400, "Missing required parameter: 'file'.", param="file")
        purpose = form.get("purpose")
        if not purpose:
            raise _APIError(400, "Missing required parameter: 'purpose'.", param="purpose")
        if purpose == "batch":
            for number, line in enumerate(form["file"].splitlines(), start=1):
                if line.strip():
                    try:
                        json.loads(line)
                    except ValueError:
                        raise _APIError(
                            400,
                            f"Invalid file format for Batch API. Line {number} is not valid JSON.",
                            param="file",
                        ) from None
        stored = _StoredFile(
            _new_id("file-"), form.get("file.filename") or "upload", purpose, form["file"], int(time.time())
        )
        with self._lock:
            self._files[stored.id] = stored
        return stored.to_json()

    def _get_file(self, file_id: str) -> _StoredFile:
        with self._lock:
            stored = self._files.get(file_id)
        if stored is None:
            raise _APIError(404, f"No such File object: {file_id}", param="id")
        return stored

    def _create_openai_batch(self, request_json: dict[str, Any]) -> dict[str, Any]:
        for field in ("input_file_id", "endpoint", "completion_window"):
            if not request_json.get(field):
                raise _APIError(400, f"Missing required parameter: '{field}'.", param=field)
        if request_json["endpoint"] != "/v1/chat/completions":
            raise _APIError(
                400,
                f"The stand-in only supports /v1/chat/completions batches, not {request_json['endpoint']}.",
                param="endpoint",
            )
        if request_json["completion_window"] != "24h":
            raise _APIError(
                400, "Invalid completion_window; only '24h' is supported.", param="completion_window"
            )
        stored = self._get_file(request_json["input_file_id"])
        if stored.purpose != "batch":
            raise _APIError(
                400, f"File {stored.id} was not uploaded with purpose 'batch'.", param="input_file_id"
            )
        lines: list[dict[str, Any]] = []
        line_errors: list[dict[str, Any]] = []
        seen_ids = set()
        for number, raw in enumerate(stored.content.splitlines(), start=1):
            if not raw.strip():
                continue
            item = json.loads(raw)
            problem = None
            if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
                problem = "missing custom_id"
            elif item["custom_id"] in seen_ids:
                problem = f"duplicate custom_id {item['custom_id']!r}"
            elif item.get("method") != "POST" or item.get("url") != request_json["endpoint"]:
                problem = f"line must be a POST to {request_json['endpoint']}"
            elif not isinstance(item.get("body"), dict):
                problem = "missing body"
            if problem:
                line_errors.append(
                    {"code": "invalid_request", "line": number, "message": problem, "param": None}
                )
            else:
                seen_ids.add(item["custom_id"])
                lines.append(item)
        now = int(time.time())
        data = {
            "id": _new_id("batch_"),
            "object": "batch",
            "endpoint": request_json["endpoint"],
            "errors": None,
            "input_file_id": stored.id,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 86400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": request_json.get("metadata"),
        }
        batch = _OpenAIBatch(data=data, lines=lines, line_errors=line_errors)
        with self._lock:
            self._openai_batches[data["id"]] = batch
            return json.loads(json.dumps(data))

    def _get_openai_batch(self, batch_id: str) -> _OpenAIBatch:
        with self._lock:
            batch = self._openai_batches.get(batch_id)
        if batch is None:
            raise _APIError(404, f"No batch found with id '{batch_id}'.", param="batch_id")
        return batch

    def _poll_openai_batch(self, batch_id: str) -> dict[str, Any]:
        """Advances ``validating -> in_progress (N polls) -> finalizing -> completed``."""
        batch = self._get_openai_batch(batch_id)
        data, now = batch.data, int(time.time())
        with self._lock:
            status = data["status"]
            if status == "cancelling":
                data.update(status="cancelled", cancelled_at=now)
            elif status == "validating" and batch.line_errors:
                data.update(
                    status="failed", failed_at=now, errors={"object": "list", "data": batch.line_errors}
                )
            elif status in ("validating", "in_progress"):
                if status == "validating":
                    data.update(status="in_progress", in_progress_at=now)
                    data["request_counts"]["total"] = len(batch.lines)
                if batch.in_progress_polls < self.batch_in_progress_polls:
                    batch.in_progress_polls += 1
                else:
                    # "finalizing" also keeps concurrent polls from finishing twice.
                    data.update(status="finalizing", finalizing_at=now)
                    status = "finalizing"
            snapshot = json.loads(json.dumps(data))
        if status != "finalizing":
            return snapshot
        self._finish_openai_batch(batch)
        with self._lock:
            return json.loads(json.dumps(data))

    def _finish_openai_batch(self, batch: _OpenAIBatch) -> None:
        outputs, failures = [], []
        for item in batch.lines:
            body = dict(item["body"])
            try:
                completion = self._chat_completion(body)
                status, response_body = 200, completion
            except _APIError as exc:
                status, response_body = (
                    exc.status,
                    _error_body(OPENAI, exc.status, exc.message, param=exc.param),
                )
            except Exception as exc:
                status, response_body = 500, _error_body(OPENAI, 500, f"{type(exc).__name__}: {exc}")
            line = {
                "id": _new_id("batch_req_"),
                "custom_id": item["custom_id"],
                "response": {"status_code": status, "request_id": _new_id("req_"), "body": response_body},
                "error": None,
            }
            (outputs if status == 200 else failures).append(line)
        now = int(time.time())
        batch_id = batch.data["id"]
        output_id = error_id = None
        with self._lock:
            if outputs:
                output_id = _new_id("file-")
                self._files[output_id] = _StoredFile(
                    output_id, f"{batch_id}_output.jsonl", "batch_output", _jsonl(outputs), now
                )
            if failures:
                error_id = _new_id("file-")
                self._files[error_id] = _StoredFile(
                    error_id, f"{batch_id}_error.jsonl", "batch_output", _jsonl(failures), now
                )
            batch.data.update(
                status="completed",
                completed_at=now,
                output_file_id=output_id,
                error_file_id=error_id,
                request_counts={
                    "total": len(batch.lines),
                    "completed": len(outputs),
                    "failed": len(failures),
                },
            )

    def _cancel_openai_batch(self, batch_id: str) -> dict[str, Any]:
        batch = self._get_openai_batch(batch_id)
        with self._lock:
            if batch.data["status"] in ("validating", "in_progress"):
                batch.data.update(status="cancelling", cancelling_at=int(time.time()))
            elif batch.data["status"] not in ("cancelling", "cancelled"):
                raise _APIError(409, f"Cannot cancel a batch with status '{batch.data['status']}'.")
            return json.loads(json.dumps(batch.data))

    def _create_anthropic_batch(self, request_json: dict[str, Any]) -> dict[str, Any]:
        requests = request_json.get("requests")
        if not isinstance(requests, list) or not requests:
            raise _APIError(400, "requests: at least one request is required")
        seen = set()
        for index, item in enumerate(requests):
            if not isinstance(item, dict) or not isinstance(item.get("custom_id"), str):
                raise _APIError(400, f"requests.{index}.custom_id: Field required")
            if not isinstance(item.get("params"), dict):
                raise _APIError(400, f"requests.{index}.params: Field required")
            if item["custom_id"] in seen:
                raise _APIError(400, f"requests.{index}.custom_id: duplicate custom_id {item['custom_id']!r}")
            seen.add(item["custom_id"])
        now = time.time()
        data = {
            "id": _new_id("msgbatch_"),
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {
                "processing": len(requests),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "ended_at": None,
            "created_at": _rfc3339(now),
            "expires_at": _rfc3339(now + timedelta(days=1).total_seconds()),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": None,
        }
        with self._lock:
            self._anthropic_batches[data["id"]] = _AnthropicBatch(data=data, requests=requests)
            return json.loads(json.dumps(data))

    def _get_anthropic_batch(self, batch_id: str) -> _AnthropicBatch:
        with self._lock:
            batch = self._anthropic_batches.get(batch_id)
        if batch is None:
            raise _APIError(404, f"Message batch {batch_id} not found.")
        return batch

    def _poll_anthropic_batch(self, batch_id: str) -> dict[str, Any]:
        """Advances ``in_progress (N polls) -> ended`` (``canceling -> ended``)."""
        batch = self._get_anthropic_batch(batch_id)
        with self._lock:
            status = batch.data["processing_status"]
            finish = False
            if not batch.finishing and status == "canceling":
                finish = True
            elif not batch.finishing and status == "in_progress":
                if batch.in_progress_polls < self.batch_in_progress_polls:
                    batch.in_progress_polls += 1
                else:
                    finish = True
            batch.finishing = batch.finishing or finish
            snapshot = json.loads(json.dumps(batch.data))
        if not finish:
            return snapshot
        self._finish_anthropic_batch(batch, canceled=(status == "canceling"))
        with self._lock:
            return json.loads(json.dumps(batch.data))

    def _finish_anthropic_batch(self, batch: _AnthropicBatch, *, canceled: bool) -> None:
        lines = []
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for item in batch.requests:
            if canceled:
                result: dict[str, Any] = {"type": "canceled"}
                counts["canceled"] += 1
            else:
                try:
                    result = {
                        "type": "succeeded",
                        "message": self._message(dict(item["params"]), service_tier="batch"),
                    }
                    counts["succeeded"] += 1
                except _APIError as exc:
                    result = {
                        "type": "errored",
                        "error": _error_body(ANTHROPIC, exc.status, exc.message, request_id=_new_id("req_")),
                    }
                    counts["errored"] += 1
                except Exception as exc:
                    message = f"{type(exc).__name__}: {exc}"
                    result = {
                        "type": "errored",
                        "error": _error_body(ANTHROPIC, 500, message, request_id=_new_id("req_")),
                    }
                    counts["errored"] += 1
            lines.append({"custom_id": item["custom_id"], "result": result})
        with self._lock:
            batch.results = _jsonl(lines)
            batch.data.update(
                processing_status="ended",
                ended_at=_rfc3339(time.time()),
                request_counts=counts,
                results_url=f"{self.base_url}/v1/messages/batches/{batch.data['id']}/results",
            )

    def _anthropic_results(self, batch_id: str) -> bytes:
        batch = self._get_anthropic_batch(batch_id)
        with self._lock:
            if batch.results is None:
                raise _APIError(
                    404, f"Message batch {batch_id} has not finished processing; results are unavailable."
                )
            return batch.results

    def _cancel_anthropic_batch(self, batch_id: str) -> dict[str, Any]:
        batch = self._get_anthropic_batch(batch_id)
        with self._lock:
            if batch.data["processing_status"] == "in_progress" and not batch.finishing:
                batch.data.update(processing_status="canceling", cancel_initiated_at=_rfc3339(time.time()))
            return json.loads(json.dumps(batch.data))
