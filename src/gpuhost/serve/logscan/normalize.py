"""Turn raw log text into message lines: split carriage returns, drop tqdm bars and log prefixes.

A prefix is what a *log shipper* (the thing between the program and the paste) puts before each line:
:data:`SHIPPERS` names every one gpuhost knows, with where its format is defined or seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Shipper:
    """One known line prefix: ``pattern`` matches it at the start of a line; ``source`` says where the format is
    defined or where a real capture of it comes from."""

    name: str
    pattern: re.Pattern[str]
    source: str


_TS = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"
_LEVELS = r"TRACE|DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL"

#: Known shippers, tried in this order at the start of each line; prefixes stack (a CRI line around an
#: SGLang line around a level name), so the table is applied repeatedly until nothing more comes off.
SHIPPERS: list[Shipper] = [
    Shipper(
        "kubernetes-cri",
        re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) (?:stdout|stderr) [FP] "),
        "kubelet CRI logging format: '<RFC3339Nano> <stream> <P|F> <log>' (kubernetes/cri-api, "
        "pkg/kubelet/kuberuntime/logs/logs.go parseCRILog)",
    ),
    Shipper(
        "github-actions",
        re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z "),
        "GitHub Actions raw job logs: every line starts with an ISO-8601 time with 7 fractional digits and 'Z'",
    ),
    Shipper(
        "journald",
        re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.@-]+(?:\[\d+\])?: "),
        "journalctl -o short: 'Mon DD HH:MM:SS host unit[pid]: '",
    ),
    Shipper(
        "pipe-logger",
        re.compile(rf"^{_TS} \| (?:{_LEVELS})\s*\| [\w.:<>-]+\s*(?:\||-) "),
        "'ts | LEVEL | logger | msg' (FastChat/transformerlab build_logger) and loguru's 'ts | LEVEL | mod:fn:n - msg'",
    ),
    Shipper(
        "python-logging-dash",
        re.compile(rf"^{_TS} - (?:[\w.]+ - )?(?:{_LEVELS}) - (?:[\w.]+: )?"),
        "Python logging '%(asctime)s - %(levelname)s - %(name)s: %(message)s' (e.g. flashinfer.jit)",
    ),
    Shipper(
        "docker-compose",
        re.compile(r"^[A-Za-z0-9][\w.-]*\s+\| "),
        "docker compose logs / up: the service (container) name padded to a column, then '| '",
    ),
    Shipper(
        "quoted",
        re.compile(r"^(?:> ?)+"),
        "a Markdown quote ('> ') around a pasted line",
    ),
    Shipper(
        "ray",
        re.compile(r"^\s*\((?:[\w-]+ )?pid=\d+(?:, ip=[\d.]+)?\)\s?"),
        "Ray / multiprocessing worker prefix '(SGLangEngine pid=1) ', '(EngineCore_DP0 pid=9) '",
    ),
    Shipper(
        "vllm",
        re.compile(rf"^(?:{_LEVELS}) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?:\[[\w./-]+(?::\d+)?\]|[\w./-]+:\d+\]) "),
        "vLLM's logger 'LEVEL MM-DD HH:MM:SS [file.py:line] '",
    ),
    Shipper(
        "sglang",
        re.compile(r"^\[(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z]+\d+)*\]\s?"),
        "SGLang's '[ts TP0 DP1 EP2] ' (sglang/srt/utils configure_logger); '[HH:MM:SS TP0]' before 0.4",
    ),
    Shipper(
        "glog",
        re.compile(r"^\[[IWEF]\d{3,4} \d\d:\d\d:\d\d\.\d+ (?:\d+ )?[\w.-]+:\d+\] "),
        "glog/c10 'IMMDD hh:mm:ss.uuuuuu file:line] ' in brackets, as torch's ProcessGroupNCCL prints it",
    ),
    Shipper(
        "torch-rank",
        re.compile(r"^\[rank\d+\]:"),
        "torchrun / torch.distributed '[rankN]:' on each line of a rank's output",
    ),
    Shipper(
        "level-name",
        re.compile(rf"^(?:{_LEVELS})(?: \([\w.]+\))?:\s+"),
        "uvicorn / Python logging level names 'INFO:     '",
    ),
]

# a tqdm progress bar: "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01, ...]" or "45%|###  |"
_TQDM = re.compile(r"^[^\r\n]*?\d{1,3}%(?: Completed)? ?\|[^|]*\|[^\]\r\n]*\]")


def split_raw(text: str) -> list[str]:
    """Physical lines of ``text``; a carriage return also ends a line (tqdm redraws)."""
    out: list[str] = []
    for line in text.split("\n"):
        out.extend(part for part in line.split("\r"))
    return out


def strip_tqdm(line: str) -> str:
    """``line`` without a leading progress bar glued onto it (empty if it was only a bar)."""
    m = _TQDM.match(line)
    return line[m.end() :] if m else line


# Ray's log deduplication appends this to a line it saw on several workers
_RAY_REPEATED = re.compile(r" \[repeated \d+x across cluster\]$")


@dataclass(frozen=True)
class Message:
    """One physical line read: its message and the shippers whose prefixes came off (outermost first)."""

    text: str
    shippers: tuple[str, ...]


def read_line(line: str) -> Message:
    """Strip every known shipper prefix from one physical line (they stack, outermost first)."""
    text = strip_tqdm(line.rstrip("\r\n"))
    shippers: list[str] = []
    for _ in range(8):
        for shipper in SHIPPERS:
            m = shipper.pattern.match(text)
            if m is None or m.end() == 0:
                continue
            shippers.append(shipper.name)
            text = text[m.end() :].lstrip()  # indentation between two prefixes is the inner line's, not trusted
            break
        else:
            break
    if "ray" in shippers:
        text = _RAY_REPEATED.sub("", text)
    return Message(text=text.strip(), shippers=tuple(shippers))


def bar_label(line: str) -> str | None:
    """The description of a tqdm bar line (``Capturing batches (bs=8 avail_mem=1.72 GB):``), None when the line
    is no bar or has no description: a bar names what runs, and is the only sign of a capture in some versions."""
    m = _TQDM.match(line.rstrip("\r\n"))
    if m is None:
        return None
    label = re.split(r"\s*\d{1,3}%", m.group(0), maxsplit=1)[0].strip()
    return label or None


def message(line: str) -> str:
    """The message of one physical line: prefixes removed, whitespace trimmed (indentation is not trusted)."""
    return read_line(line).text
