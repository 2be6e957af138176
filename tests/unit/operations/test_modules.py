from pathlib import Path

from gpuhost.operations.modules import ModuleList, edit_module_list, listed_modules
from tests.support.local import local_host

# Debian 12's stock /etc/modules (package kmod), as shipped.
DEBIAN_ETC_MODULES = """\
# /etc/modules: kernel modules to load at boot time.
#
# This file contains the names of kernel modules that should be loaded
# at boot time, one per line. Lines beginning with "#" are ignored.
# Parameters can be specified after the module name.

"""


def test_listed_modules_ignores_comments_and_normalises_dashes():
    assert listed_modules(DEBIAN_ETC_MODULES + "vfio-pci\nnvidia_uvm  # uvm\n") == ["vfio_pci", "nvidia_uvm"]


def test_present_appends_only_missing_modules_and_keeps_header():
    text = DEBIAN_ETC_MODULES + "vfio\n"
    out = edit_module_list(text, ["vfio", "vfio_iommu_type1", "vfio-pci"], "present")
    assert out.startswith(DEBIAN_ETC_MODULES)
    assert out.endswith("vfio\nvfio_iommu_type1\nvfio_pci\n")
    assert edit_module_list(out, ["vfio_pci"], "present") == out


def test_absent_removes_only_named_modules():
    text = "# keep\nvfio\nvfio_virqfd\nnvidia\n"
    assert edit_module_list(text, ["vfio_virqfd"], "absent") == "# keep\nvfio\nnvidia\n"


def test_plan_on_real_file(tmp_path: Path):
    f = tmp_path / "modules"
    f.write_text(DEBIAN_ETC_MODULES)
    host = local_host()
    plan = ModuleList.from_dict({"path": str(f), "modules": ["vfio", "vfio_pci"]}).plan(host)
    assert plan.changes
    assert "+vfio\n" in plan.diff and "+vfio_pci\n" in plan.diff


def test_bad_module_name_is_refused():
    import pytest

    with pytest.raises(ValueError, match="not a kernel module name"):
        ModuleList.from_dict({"modules": ["vfio pci"]})
