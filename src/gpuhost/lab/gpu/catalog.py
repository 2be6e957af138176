"""GPU models and NVIDIA driver versions the lab knows."""

from __future__ import annotations

from dataclasses import dataclass

from gpuhost.errors import UsageError


@dataclass(frozen=True)
class GpuModel:
    name: str
    device_id: str  # PCI device id (vendor 10de)
    subsys_id: str
    class_code: str  # "0302" 3D controller, "0300" VGA
    class_name: str
    codename: str  # what lspci would print with a current pci.ids
    arch: str
    compute_cap: str
    memory_mib: int
    bar1_mib: int
    bar2_size: str  # lspci -vv Resizable BAR line
    gen_max: int
    width_max: int
    vbios: str
    power_limit_w: int
    needs_open_module: bool  # Blackwell: only the open kernel modules drive it


def _rtx_pro_6000(
    edition: str, device_id: str, subsys_id: str, class_code: str, class_name: str, vbios: str
) -> GpuModel:
    """The two RTX PRO 6000 Blackwell editions: one GB202GL chip, the same memory, BARs, link and power limit."""
    return GpuModel(
        f"NVIDIA RTX PRO 6000 Blackwell {edition}",
        device_id,
        subsys_id,
        class_code,
        class_name,
        f"GB202GL [RTX PRO 6000 Blackwell {edition}]",
        "Blackwell",
        "12.0",
        97887,
        131072,
        "128GB",
        5,
        16,
        vbios,
        600,
        True,
    )


MODELS: dict[str, GpuModel] = {
    m.name: m
    for m in (
        _rtx_pro_6000("Server Edition", "2bb5", "204e", "0302", "3D controller", "98.02.55.00.02"),
        _rtx_pro_6000("Workstation Edition", "2bb1", "204b", "0300", "VGA compatible controller", "98.02.2e.00.05"),
        GpuModel(
            "NVIDIA L40S",
            "26b9",
            "1851",
            "0302",
            "3D controller",
            "AD102GL [L40S]",
            "Ada Lovelace",
            "8.9",
            46068,
            65536,
            "64GB",
            4,
            16,
            "95.02.66.00.02",
            350,
            False,
        ),
        GpuModel(
            "NVIDIA H100 PCIe",
            "2331",
            "1626",
            "0302",
            "3D controller",
            "GH100 [H100 PCIe]",
            "Hopper",
            "9.0",
            81559,
            131072,
            "128GB",
            5,
            16,
            "96.00.74.00.01",
            350,
            False,
        ),
    )
}
DEFAULT_MODEL = "NVIDIA RTX PRO 6000 Blackwell Server Edition"

#: Driver versions the lab builds installers for, oldest first. The inventory pins the newest but
#: one, so that tests can upgrade the pin.
DRIVER_VERSIONS: tuple[str, ...] = ("580.95.05", "580.105.08")


def model(name: str) -> GpuModel:
    try:
        return MODELS[name]
    except KeyError:
        raise UsageError(
            f"--gpu-model {name!r} is not a model the lab simulates; choose one of: " + "; ".join(MODELS)
        ) from None


def default_driver() -> str:
    return DRIVER_VERSIONS[-2] if len(DRIVER_VERSIONS) > 1 else DRIVER_VERSIONS[-1]
