"""What the simulated GPUs see of this server: memory held and requests in flight.

A heartbeat file per GPU (``LOAD_DIR/<uuid>.json``, rewritten every half second) that the lab's
``nvidia-smi`` turns into power draw, utilisation and memory use; a stale file reads as idle.
"""

from __future__ import annotations

import json
import os
import threading
import time

from .gpus import Device

LOAD_DIR = "/var/lib/gpuhost-lab/gpu-load"


class GpuLoad:
    def __init__(self, devices: tuple[Device, ...], mem_fraction: float) -> None:
        self.devices = devices
        self.mem_fraction = mem_fraction
        self.inflight = 0
        self.memory_gib = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._write()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def hold_memory(self, fraction: float) -> None:
        self.memory_gib = fraction
        self._write()

    def begin(self) -> None:
        with self._lock:
            self.inflight += 1
        self._write()

    def end(self) -> None:
        with self._lock:
            self.inflight = max(0, self.inflight - 1)
        self._write()

    def close(self) -> None:
        self._stop.set()
        for dev in self.devices:
            try:
                os.unlink(os.path.join(LOAD_DIR, f"{dev.uuid}.json"))
            except OSError:
                pass

    def _beat(self) -> None:
        while not self._stop.wait(0.5):
            self._write()

    def _write(self) -> None:
        if self._stop.is_set():
            return
        try:
            os.makedirs(LOAD_DIR, exist_ok=True)
        except OSError:
            return
        for dev in self.devices:
            record = {
                "inflight": self.inflight,
                "memory_fraction": self.memory_gib,
                "pid": os.getpid(),
                "updated": time.time(),
            }
            path = os.path.join(LOAD_DIR, f"{dev.uuid}.json")
            tmp = f"{path}.{os.getpid()}.tmp"
            try:
                with open(tmp, "w") as fh:
                    json.dump(record, fh)
                os.replace(tmp, path)
            except OSError:
                pass
