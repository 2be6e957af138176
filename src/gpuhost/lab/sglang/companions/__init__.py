"""Sources of the companion stand-ins, as text: ``{version}`` is filled in when a wheel is built."""

TORCH = '''"""PyTorch (gpuhost lab stand-in): reports its version and the simulated GPUs, computes nothing."""

import subprocess

__version__ = "{version}"


class _Version:
    cuda = "13.0"
    hip = None
    git_version = "0" * 40

    def __str__(self):
        return __version__


version = _Version()


def _devices():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [[c.strip() for c in line.split(",")] for line in out.stdout.splitlines() if line.count(",") == 2]


class cuda:  # noqa: N801
    @staticmethod
    def is_available():
        return bool(_devices())

    @staticmethod
    def device_count():
        return len(_devices())

    @staticmethod
    def get_device_name(index=0):
        return _devices()[index][0]

    @staticmethod
    def get_device_capability(index=0):
        major, _, minor = _devices()[index][1].partition(".")
        return (int(major), int(minor or 0))

    @staticmethod
    def mem_get_info(index=0):
        total = int(_devices()[index][2]) * 1024 * 1024
        return (total - 530 * 1024 * 1024, total)
'''

TRANSFORMERS = '''"""Transformers (gpuhost lab stand-in): AutoConfig knows the model types of its version."""

import json
import os

__version__ = "{version}"
_KNOWN = {known!r}


class PretrainedConfig(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class AutoConfig:
    @classmethod
    def from_pretrained(cls, path, trust_remote_code=False, **kwargs):
        with open(os.path.join(path, "config.json")) as fh:
            config_dict = json.load(fh)
        model_type = config_dict.get("model_type")
        if model_type is not None and model_type not in _KNOWN and not (trust_remote_code and
                                                                       "auto_map" in config_dict):
            try:
                raise KeyError(model_type)
            except KeyError as e:
                raise ValueError(
                    f"The checkpoint you are trying to load has model type `{{model_type}}` but Transformers does "
                    "not recognize this architecture. This could be because of an issue with the checkpoint, or "
                    "because your version of Transformers is out of date.\\n\\nYou can update Transformers with the "
                    "command `pip install --upgrade transformers`. If this does not work, and the checkpoint is "
                    "very new, then there may not be a release version that supports this model yet. In this "
                    "case, you can get the most up-to-date code by installing Transformers from source with the "
                    "command `pip install git+https://github.com/huggingface/transformers.git`"
                ) from e
        return PretrainedConfig(config_dict)
'''

FLASHINFER = '''"""FlashInfer (gpuhost lab stand-in)."""

__version__ = "{version}"
'''
