"""Build the stand-in wheels: ``sglang`` per pinned version (its real flag table inside), and the
companion ``transformers``, ``torch`` and ``flashinfer-python`` at the versions those pin."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gpuhost.lab.sglang.standin as standin_pkg
from gpuhost.errors import LabError
from gpuhost.lab.pypi import wheel
from gpuhost.lab.sglang import companions


@dataclass(frozen=True)
class SglangRelease:
    version: str
    transformers: str
    flashinfer: str
    torch: str
    requires_python: str


RELEASES = (
    SglangRelease("0.5.8.post1", "4.57.1", "0.6.1", "2.9.1", ">=3.10"),  # the seeds' first install
    SglangRelease("0.5.23", "5.19.0", "0.7.2", "2.14.1", ">=3.11"),
)
#: transformers releases on the index; glm_moe_dsa arrived in 5.2.0
TRANSFORMERS = ("4.57.1", "5.2.0", "5.19.0")
GLM_MOE_DSA_SINCE = (5, 2, 0)
#: sgl-deep-gemm releases on the index (the 0.5.23 profiles pin it; the stand-in needs none of it)
SGL_DEEP_GEMM = ("0.2.3.post2",)
BASE_MODEL_TYPES = ("llama", "qwen2", "qwen3", "deepseek_v3", "glm4", "glm4_moe", "mistral", "gpt_oss")


#: the lab's own copies of what it takes from the real wheels, extracted by scripts/extract_sglang_flags.py (the
#: parser) and scripts/extract_sglang_texts.py (log lines and error texts): never the product's flag tables, so a
#: wrong product table meets a stand-in that still parses as the real SGLang does
DATA_DIR = Path(__file__).resolve().parent / "data"


def flags_file(version: str) -> Path:
    """The version's flag table as extracted from its wheel for the lab (``data/flags-<version>.json``)."""
    return DATA_DIR / f"flags-{version}.json"


def texts_file(version: str) -> Path:
    """The version's log lines and error texts as extracted from its wheel (``data/texts-<version>.json``)."""
    return DATA_DIR / f"texts-{version}.json"


def _standin_files(version: str) -> dict[str, bytes]:
    root = Path(standin_pkg.__file__).parent
    files: dict[str, bytes] = {}
    for src in sorted(root.rglob("*.py")):
        if "__pycache__" in src.parts:
            continue
        if src.parent.name == "benchmark" and _version_tuple(version) < (0, 5, 15):
            continue  # sglang.benchmark.serving arrived in 0.5.15; before, sglang.bench_serving was the module
        files["sglang/" + src.relative_to(root).as_posix()] = src.read_bytes()
    files["sglang/_lab/version.py"] = (
        f'"""The version this wheel was built for."""\n\n__version__ = "{version}"\n'
    ).encode()
    table = flags_file(version)
    if not table.exists():
        raise LabError(f"no flag table for sglang {version} at {table}")
    files["sglang/_lab/flags.json"] = table.read_bytes()
    texts = texts_file(version)
    if not texts.exists():
        raise LabError(f"no extracted texts for sglang {version} at {texts}")
    files["sglang/_lab/texts.json"] = texts.read_bytes()
    return files


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdigit())


def build_all(out_dir: Path) -> list[Path]:
    out: list[Path] = []
    for rel in RELEASES:
        out.append(
            wheel.build(
                out_dir,
                "sglang",
                rel.version,
                _standin_files(rel.version),
                summary="SGLang is a fast serving framework for large language models and vision language models.",
                requires=[
                    f"transformers=={rel.transformers}",
                    f"flashinfer_python=={rel.flashinfer}",
                    f"torch=={rel.torch}",
                ],
                requires_python=rel.requires_python,
                console_scripts={"sglang": "sglang.cli.main:main"},
            )
        )
    for v in TRANSFORMERS:
        known = list(BASE_MODEL_TYPES) + (["glm_moe_dsa"] if _version_tuple(v) >= GLM_MOE_DSA_SINCE else [])
        src = companions.TRANSFORMERS.format(version=v, known=known)
        out.append(
            wheel.build(
                out_dir,
                "transformers",
                v,
                {"transformers/__init__.py": src.encode()},
                summary="State-of-the-art Machine Learning for JAX, PyTorch and TensorFlow",
            )
        )
    for v in sorted({r.torch for r in RELEASES}):
        out.append(
            wheel.build(
                out_dir,
                "torch",
                v,
                {"torch/__init__.py": companions.TORCH.format(version=v).encode()},
                summary="Tensors and Dynamic neural networks in Python with strong GPU acceleration",
            )
        )
    for v in sorted({r.flashinfer for r in RELEASES}):
        out.append(
            wheel.build(
                out_dir,
                "flashinfer_python",
                v,
                {"flashinfer/__init__.py": companions.FLASHINFER.format(version=v).encode()},
                summary="FlashInfer: Kernel Library for LLM Serving",
            )
        )
    for v in SGL_DEEP_GEMM:
        out.append(
            wheel.build(
                out_dir,
                "sgl_deep_gemm",
                v,
                {"deep_gemm/__init__.py": f'"""lab stand-in"""\n\n__version__ = "{v}"\n'.encode()},
                summary="DeepGEMM kernels packaged for SGLang",
            )
        )
    return out
