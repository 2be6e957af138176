"""Read what ``sglang.bench_serving`` / ``sglang.benchmark.serving`` leaves behind: the printed result block and the
``--output-file`` JSON Lines, for every version described in the SGLang reference.

Every figure gets one stable name (:data:`FIELD_UNITS` lists them all), whatever the version printed:
``output_throughput_tok_s``, ``total_throughput_tok_s``, ``median_ttft_ms``, ``p99_itl_ms``, ...

- A printed block without its closing ``=====`` line, or without a core figure, is ``partial``.
- A log that shows the benchmark's own failure lines (``Error running benchmark``, ``Warmup failed``, the
  ``UnboundLocalError`` of the JSONL write), or a run whose JSONL line is missing, is ``failed``.
- ``server_info`` from the JSONL is redacted (``api_key`` and friends) before anything keeps it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuhost.redact import MASK, redact

Status = Literal["ok", "partial", "failed"]

HEADER_RE = re.compile(r"^\s*=+\s*Serving Benchmark Result\s*=+\s*$")
CLOSING_RE = re.compile(r"^\s*={40,}\s*$")
SECTION_RE = re.compile(r"^\s*-{3,}\s*([^-].*?)\s*-{3,}\s*$")
LINE_RE = re.compile(r"^\s*(?P<label>[^:]+?):\s*(?P<value>.*?)\s*$")
LATENCY_RE = re.compile(r"^(mean|median|std|p\d+|max) (e2e latency|e2el|ttft|tpot|itl) \(ms\)$")
SLO_ATTAIN_RE = re.compile(r"^(ttft|tpot|itl|e2el|e2e) slo attainment \(%\)$")

FAILURE_MARKERS = (
    "Error running benchmark",
    "Warmup failed",
    "UnboundLocalError",
    "Initial test run failed",
)

# Printed label (lower case) -> stable name. Typos and renames of older versions map to the same name.
PRINTED_LABELS: dict[str, str] = {
    "backend": "backend",
    "traffic request rate": "request_rate",
    "max request concurrency": "max_concurrency",
    "max reqeuest concurrency": "max_concurrency",
    "maximum request concurrency": "max_concurrency",  # vLLM's benchmark_serving / vllm bench serve
    "successful requests": "successful_requests",
    "benchmark duration (s)": "duration_s",
    "total input tokens": "total_input_tokens",
    "total input text tokens": "total_input_text_tokens",
    "total input vision tokens": "total_input_vision_tokens",
    "total generated tokens": "total_output_tokens",
    "total generated tokens (retokenized)": "total_output_tokens_retokenized",
    "request throughput (req/s)": "request_throughput_req_s",
    "input token throughput (tok/s)": "input_throughput_tok_s",
    "output token throughput (tok/s)": "output_throughput_tok_s",
    "peak output token throughput (tok/s)": "peak_output_throughput_tok_s",
    "peak concurrent requests": "peak_concurrent_requests",
    "total token throughput (tok/s)": "total_throughput_tok_s",
    "total throughput (tok/s)": "total_throughput_tok_s",
    "concurrency": "concurrency",
    "accept length": "accept_length",
    "slos (ms)": "goodput_slos",
    "request goodput (req/s)": "request_goodput_req_s",
    "slo attainment (%)": "slo_attainment_pct",
    "total prompt tokens": "cache_prompt_tokens",
    "total cached tokens": "cache_cached_tokens",
    "device": "cache_device_tokens",
    "host": "cache_host_tokens",
    "cache hit rate": "cache_hit_rate_pct",
}

# JSONL key -> stable name, where the two differ. Latency keys (``mean_ttft_ms`` ...) are already stable.
JSONL_KEYS: dict[str, str] = {
    "completed": "successful_requests",
    "duration": "duration_s",
    "request_throughput": "request_throughput_req_s",
    "input_throughput": "input_throughput_tok_s",
    "output_throughput": "output_throughput_tok_s",
    "total_throughput": "total_throughput_tok_s",
    "max_output_tokens_per_s": "peak_output_throughput_tok_s",
    "max_concurrent_requests": "peak_concurrent_requests",
    "request_goodput": "request_goodput_req_s",
}
JSONL_PASSTHROUGH = (
    "backend",
    "request_rate",
    "max_concurrency",
    "total_input_tokens",
    "total_input_text_tokens",
    "total_input_vision_tokens",
    "total_output_tokens",
    "total_output_tokens_retokenized",
    "concurrency",
    "accept_length",
    "tag",
    "dataset_name",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
    "sharegpt_output_len",
)
_LAT_METRICS = ("e2e_latency", "ttft", "tpot", "itl")
_LAT_STATS = ("mean", "median", "std", "p90", "p95", "p99")

# Every stable figure name and its unit (the JSON schema and the docs list the same names).
FIELD_UNITS: dict[str, str] = {
    "backend": "",
    "request_rate": "req/s|inf|trace",
    "max_concurrency": "requests",
    "successful_requests": "requests",
    "duration_s": "s",
    "total_input_tokens": "tokens",
    "total_input_text_tokens": "tokens",
    "total_input_vision_tokens": "tokens",
    "total_output_tokens": "tokens",
    "total_output_tokens_retokenized": "tokens",
    "request_throughput_req_s": "req/s",
    "input_throughput_tok_s": "tok/s",
    "output_throughput_tok_s": "tok/s",
    "peak_output_throughput_tok_s": "tok/s",
    "peak_concurrent_requests": "requests",
    "total_throughput_tok_s": "tok/s",
    "concurrency": "requests",
    "accept_length": "tokens",
    "goodput_slos": "",
    "request_goodput_req_s": "req/s",
    "slo_attainment_pct": "%",
    "ttft_slo_attainment_pct": "%",
    "tpot_slo_attainment_pct": "%",
    "e2el_slo_attainment_pct": "%",
    "cache_prompt_tokens": "tokens",
    "cache_cached_tokens": "tokens",
    "cache_device_tokens": "tokens",
    "cache_host_tokens": "tokens",
    "cache_storage_tokens": "tokens",
    "cache_hit_rate_pct": "%",
    **{f"{s}_{m}_ms": "ms" for m in _LAT_METRICS for s in _LAT_STATS},
    "max_itl_ms": "ms",
}
CORE_FIELDS = ("successful_requests", "duration_s", "output_throughput_tok_s")
STRING_FIELDS = frozenset({"backend", "goodput_slos", "request_rate", "tag", "dataset_name"})


@dataclass
class BenchResult:
    """One benchmark run (one concurrency level): its figures under stable names, and how complete it is."""

    source: Literal["printed", "jsonl", "log"]
    status: Status
    figures: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    server_info: dict[str, Any] | None = None

    def get(self, name: str) -> Any:
        return self.figures.get(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "status": self.status,
            "figures": self.figures,
            "extra": self.extra,
            "notes": self.notes,
            "server_info": self.server_info,
        }


class NotBenchmarkOutput(ValueError):
    """The text holds neither a printed result block, a JSONL result line, nor a benchmark failure."""


# ------------------------------------------------------------------------------------------ values


def _value(name: str, raw: str) -> Any:
    """A printed value as the stable figure: ``not set`` -> None, ``inf`` kept as the string, ``12.3%`` -> 12.3."""
    text = raw.strip()
    low = text.lower()
    if name in ("backend", "goodput_slos"):
        return text
    if low in ("not set", "none", "n/a", ""):
        return None
    if name == "request_rate":
        if low in ("inf", "infinity"):
            return "inf"
        try:
            return float(text)
        except ValueError:
            return text  # "trace"
    text = text.rstrip("%").strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if math.isinf(number) or math.isnan(number):
        return None
    if re.fullmatch(r"[+-]?\d+", text) and name != "concurrency":
        return int(text)
    return number


def _printed_name(label: str, section: str | None) -> str | None:
    low = " ".join(label.lower().split())
    m = LATENCY_RE.match(low)
    if m:
        metric = {"e2e latency": "e2e_latency", "e2el": "e2e_latency"}.get(m.group(2), m.group(2))  # vLLM: E2EL
        return f"{m.group(1)}_{metric}_ms"
    m = SLO_ATTAIN_RE.match(low)
    if m:
        return f"{'e2el' if m.group(1) == 'e2e' else m.group(1)}_slo_attainment_pct"
    if low.startswith("storage"):
        return "cache_storage_tokens"
    if low in ("device", "host") and section != "cache hit details":
        return None
    return PRINTED_LABELS.get(low)


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


# --------------------------------------------------------------------------------------- printed


def parse_printed_block(lines: list[str]) -> BenchResult:
    """One block: ``lines[0]`` is the header; stops at the closing line (its absence makes the block partial)."""
    figures: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    notes: list[str] = []
    section: str | None = None
    closed = False
    for line in lines[1:]:
        if CLOSING_RE.match(line):
            closed = True
            break
        sec = SECTION_RE.match(line)
        if sec:
            section = sec.group(1).strip().lower()
            continue
        m = LINE_RE.match(line)
        if not m:
            continue
        name = _printed_name(m.group("label"), section)
        if name is None:
            extra[_slug(m.group("label"))] = m.group("value")
            continue
        if name in figures:
            notes.append(f"'{m.group('label').strip()}' printed twice; the first value is kept")
            continue
        figures[name] = _value(name, m.group("value"))
    if not closed:
        notes.append("the block has no closing '=====' line (output cut off)")
    status = _judged(figures, notes, "ok" if closed else "partial")
    return BenchResult(source="printed", status=status, figures=figures, extra=extra, notes=notes)


def _judged(figures: dict[str, Any], notes: list[str], status: Status) -> Status:
    """``status`` lowered by what the figures lack: a core figure missing (partial), no request served (failed);
    each reason appended to ``notes``."""
    missing = [f for f in CORE_FIELDS if figures.get(f) is None]
    if missing:
        status = "partial"
        notes.append("missing core figures: " + ", ".join(missing))
    if figures.get("successful_requests") == 0:
        status = "failed"
        notes.append("no request succeeded")
    return status


def split_printed_blocks(text: str) -> list[list[str]]:
    """Every printed result block of ``text``, each from its header to its closing line (or to what follows)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if HEADER_RE.match(line)]
    blocks: list[list[str]] = []
    for n, start in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else len(lines)
        block = [lines[start]]
        for line in lines[start + 1 : stop]:
            block.append(line)
            if CLOSING_RE.match(line):
                break
            if line.strip().startswith("```"):
                block.pop()
                break
        blocks.append(block)
    return blocks


# ------------------------------------------------------------------------------------------ JSONL


#: a key that names a secret as a whole word (``api_key``, ``admin_api_key``, ``hf_token``), not ``tokenizer_path``
SECRET_KEY_RE = re.compile(
    r"(?:^|[_-])(?:api[_-]?key|(?:secret|private)[_-]?key|token|secret|password|passwd|credential|authorization)$",
    re.IGNORECASE,
)
SECRET_FLAG_RE = re.compile(
    r"(--(?:admin-)?api-key(?:=|\s+)|--hf-token(?:=|\s+)|(?:HF_TOKEN|OPENAI_API_KEY|SGLANG_API_KEY)=)(\S+)"
)


def redact_server_info(value: Any) -> Any:
    """A copy of ``server_info`` with secrets masked: keys that name a key/token/secret, and such flags in strings."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if SECRET_KEY_RE.search(str(k)) and v not in (None, "", False) and not isinstance(v, (dict, list)):
                out[k] = MASK
            else:
                out[k] = redact_server_info(v)
        return out
    if isinstance(value, list):
        return [redact_server_info(v) for v in value]
    if isinstance(value, str):
        return redact(SECRET_FLAG_RE.sub(lambda m: m.group(1) + MASK, value))
    return value


#: integers of more digits than this are read as floats (a count or a token figure never has this many); Python
#: refuses to convert an integer of more than 4,300 digits (``sys.int_info.str_digits_check_threshold``) with a
#: ValueError, and a 10**5000 in a pasted JSONL line was an internal error
MAX_INT_DIGITS = 40


def _bounded_int(text: str) -> int | float:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= MAX_INT_DIGITS else float(text)  # float(): inf past 1.8e308


def loads(text: str) -> Any:
    """``json.loads`` for files from outside: an integer of any length is read without error (a huge one as a float,
    inf past float's range; the readers then drop it as not a number, with a note)."""
    return json.loads(text, parse_int=_bounded_int)


def _out_of_range(obj: dict[str, Any]) -> list[str]:
    """The figures of a JSONL record that are infinite without being the benchmark's own ``inf`` request rate: a
    number past float's range (1e400, 10**5000) in the file."""
    return [
        f"{key}: not a finite number in the JSONL (out of range), read as missing"
        for key, value in obj.items()
        if key != "request_rate" and isinstance(value, float) and math.isinf(value)
    ]


def _json_number(value: Any) -> Any:
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return None
    return value


def parse_jsonl_record(obj: dict[str, Any]) -> BenchResult:
    """One ``--output-file`` line (already decoded) under the stable names."""
    figures: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in obj.items():
        if key == "server_info":
            continue
        if key in JSONL_KEYS:
            figures[JSONL_KEYS[key]] = _json_number(value)
        elif key in JSONL_PASSTHROUGH or key in FIELD_UNITS:
            if key == "request_rate":
                figures[key] = "inf" if isinstance(value, float) and math.isinf(value) else value
            else:
                figures[key] = _json_number(value)
        elif key in ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"):
            extra[f"{key}_count"] = len(value) if isinstance(value, list) else None
            if key == "errors" and isinstance(value, list):
                extra["error_count"] = sum(1 for e in value if e)
        else:
            extra[key] = _json_number(value) if not isinstance(value, (dict, list)) else redact_server_info(value)
    notes: list[str] = _out_of_range(obj)
    status = _judged(figures, notes, "ok")
    info = obj.get("server_info")
    return BenchResult(
        source="jsonl",
        status=status,
        figures=figures,
        extra=extra,
        notes=notes,
        server_info=redact_server_info(info) if isinstance(info, dict) else None,
    )


#: a pasted JSONL line wrapped by the paste (a terminal or an issue editor) is joined back over at most this many lines
_MAX_WRAPPED_LINES = 8


def _jsonl_objects(text: str) -> list[dict[str, Any]]:
    out = []
    lines = text.splitlines()
    for i, raw in enumerate(lines):
        line = raw.strip()
        if not line.startswith("{"):
            continue
        obj: Any = None
        for end in range(i + 1, min(len(lines), i + _MAX_WRAPPED_LINES) + 1):
            try:
                # Python's json reads the Infinity/NaN the benchmark writes; a line break is whitespace to it
                obj = loads("\n".join(lines[i:end]))
                break
            except json.JSONDecodeError:
                continue
        if isinstance(obj, dict) and ("output_throughput" in obj or "completed" in obj) and "backend" in obj:
            out.append(obj)
    return out


# ------------------------------------------------------------------------------------------- entry


def failure_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if any(m in line for m in FAILURE_MARKERS)]


def parse_output(text: str) -> list[BenchResult]:
    """Every run in a saved output: JSONL lines if there are any, else printed blocks; a failure log as ``failed``.

    Raises :class:`NotBenchmarkOutput` when the text holds none of these.
    """
    records = _jsonl_objects(text)
    results = [parse_jsonl_record(obj) for obj in records]
    if not results:
        results = [parse_printed_block(block) for block in split_printed_blocks(text)]
    failures = failure_lines(text)
    if failures and (not results or all(r.source == "printed" for r in results)):
        results.append(BenchResult(source="log", status="failed", notes=failures[:5]))
    if not results:
        raise NotBenchmarkOutput("no 'Serving Benchmark Result' block, no bench_serving JSONL line, no failure line")
    return results


def parse_level(stdout: str, jsonl: str | None) -> BenchResult:
    """One level run by the sweep: its printed output and the JSONL line it was to append.

    The JSONL line is the record (full precision, ``server_info``); printed figures fill what it lacks. No JSONL
    line means the run failed, whatever was printed: bench_serving writes the line whenever it has a result.
    """
    printed = [parse_printed_block(b) for b in split_printed_blocks(stdout)]
    records = _jsonl_objects(jsonl or "")
    failures = failure_lines(stdout)
    if not records:
        figures = printed[-1].figures if printed else {}
        notes = ["no JSONL result line was written"] + failures[:5]
        return BenchResult(source="log", status="failed", figures=dict(figures), notes=notes)
    result = parse_jsonl_record(records[-1])
    if printed:
        for name, value in printed[-1].figures.items():
            result.figures.setdefault(name, value)
    if len(records) > 1:
        result.notes.append(f"{len(records)} JSONL lines; the last is used")
    return result
