"""SGLang log scanning: crash signatures (incremental) and readiness phases.

Feed lines as they arrive (:class:`LogScanner.feed`) or a whole text (:func:`scan_text`).
"""

from gpuhost.serve.logscan.engine import Hit, LogScanner, scan_text
from gpuhost.serve.logscan.phases import Phase, PhaseTracker
from gpuhost.serve.logscan.signatures import SIGNATURES, Signature

__all__ = ["SIGNATURES", "Hit", "LogScanner", "Phase", "PhaseTracker", "Signature", "scan_text"]
