"""The kvm command line ``qm showcmd`` prints and ``qm start`` runs, after qemu-server's
``config_to_command`` (cfg2cmd test outputs are the reference for layout and quoting)."""

from __future__ import annotations

import re
import shlex

from gpuhost.lab.node import pci
from gpuhost.lab.node.errors import PveError
from gpuhost.lab.node.property_string import parse as parse_property_string
from gpuhost.lab.node.schema import parse_hostpci

_SAFE = re.compile(r"^[\w!%+,\-./:@^]*$")  # String::ShellQuote leaves these unquoted
_LEGACY_PCI_ADDR = {0: "0x10", 1: "0x11", 2: "0x1b", 3: "0x1c"}


def shell_quote(arg: str) -> str:
    if arg and _SAFE.match(arg):
        return arg
    return "'" + arg.replace("'", "'\\''") + "'"


def render(argv: list[str], pretty: bool = False) -> str:
    if not pretty:
        return " ".join(shell_quote(a) for a in argv)
    groups: list[list[str]] = [[argv[0]]]
    for arg in argv[1:]:
        last = groups[-1]
        if len(groups) > 1 and len(last) == 1 and last[0].startswith("-") and not arg.startswith("-"):
            last.append(arg)
        else:
            groups.append([arg])
    return " \\\n  ".join(" ".join(shell_quote(a) for a in g) for g in groups)


def machine_type(conf: dict[str, str]) -> tuple[str, bool]:
    """(QEMU machine type, is q35) for the ``machine`` option."""
    raw = conf.get("machine", "")
    mtype = parse_property_string(raw, "type").get("type", "") if raw else ""
    q35 = "q35" in mtype
    if not mtype or mtype == "pc":
        return "pc+pve0", False
    if mtype == "q35":
        return "q35+pve0", True
    return (mtype if "+pve" in mtype else f"{mtype}+pve0"), q35


def _cpu(conf: dict[str, str], hide_kvm: bool) -> str:
    props = parse_property_string(conf.get("cpu", "kvm64"), "cputype")
    model = props.get("cputype", "kvm64")
    flags = [model] if model == "host" else [model, "enforce"]
    flags += ["+kvm_pv_eoi", "+kvm_pv_unhalt"]
    for flag in (props.get("flags") or "").split(";"):
        if flag:
            flags.append(flag)
    if hide_kvm or props.get("hidden") == "1":
        flags.append("kvm=off")
    return ",".join(flags)


def build(vmid: int, conf: dict[str, str]) -> list[str]:
    """The argv of the kvm process for this (current, not pending) configuration."""
    mtype, q35 = machine_type(conf)
    sockets = int(conf.get("sockets", "1"))
    cores = int(conf.get("cores", "1"))
    vcpus = sockets * cores
    name = conf.get("name", f"vm{vmid}")
    argv = [
        "/usr/bin/kvm",
        "-id",
        str(vmid),
        "-name",
        f"{name},debug-threads=on",
        "-no-shutdown",
        "-chardev",
        f"socket,id=qmp,path=/var/run/qemu-server/{vmid}.qmp,server=on,wait=off",
        "-mon",
        "chardev=qmp,mode=control",
        "-chardev",
        "socket,id=qmp-event,path=/var/run/qmeventd.sock,reconnect-ms=5000",
        "-mon",
        "chardev=qmp-event,mode=control",
        "-pidfile",
        f"/var/run/qemu-server/{vmid}.pid",
        "-daemonize",
    ]
    if "smbios1" in conf:
        argv += ["-smbios", f"type=1,{conf['smbios1']}"]
    ovmf = conf.get("bios") == "ovmf"
    if ovmf:
        argv += ["-drive", "if=pflash,unit=0,format=raw,readonly=on,file=/usr/share/pve-edk2-firmware//OVMF_CODE_4M.fd"]
        if "efidisk0" in conf:
            volume = conf["efidisk0"].split(",", 1)[0]
            argv += ["-drive", f"if=pflash,unit=1,id=drive-efidisk0,format=raw,file=/dev/pve/{volume.split(':')[-1]}"]
    argv += [
        "-smp",
        f"{vcpus},sockets={sockets},cores={cores},maxcpus={vcpus}",
        "-nodefaults",
        "-boot",
        "menu=on,strict=on,reboot-timeout=1000,splash=/usr/share/qemu-server/bootsplash.jpg",
        "-vnc",
        f"unix:/var/run/qemu-server/{vmid}.vnc,password=on",
    ]
    hostpci = {int(k[7:]): conf[k] for k in conf if re.fullmatch(r"hostpci\d+", k)}
    hide_kvm = any(parse_hostpci(v).get("x-vga") == "1" for v in hostpci.values())
    argv += ["-cpu", _cpu(conf, hide_kvm), "-m", conf.get("memory", "512").split(",")[0].replace("current=", "")]
    if q35:
        argv += ["-readconfig", "/usr/share/qemu-server/pve-q35-4.0.cfg"]
    else:
        argv += [
            "-device",
            "pci-bridge,id=pci.1,chassis_nr=1,bus=pci.0,addr=0x1e",
            "-device",
            "pci-bridge,id=pci.2,chassis_nr=2,bus=pci.0,addr=0x1f",
        ]
    if "vmgenid" in conf and conf["vmgenid"] != "0":
        argv += ["-device", f"vmgenid,guid={conf['vmgenid']}"]
    argv += _hostpci_devices(hostpci, q35)
    argv += ["-device", "VGA,id=vga,bus=pcie.0,addr=0x1" if q35 else "VGA,id=vga,bus=pci.0,addr=0x2"]
    for key in sorted(k for k in conf if re.fullmatch(r"net\d+", k)):
        n = key[3:]
        props = conf[key].split(",")
        model, _, mac = props[0].partition("=")
        argv += [
            "-netdev",
            f"type=tap,id={key},ifname=tap{vmid}i{n},script=/usr/libexec/qemu-server/pve-bridge,"
            "downscript=/usr/libexec/qemu-server/pve-bridgedown,vhost=on",
            "-device",
            f"{'virtio-net-pci' if model == 'virtio' else model},mac={mac},netdev={key},"
            f"bus=pci.0,addr={hex(0x12 + int(n))},id={key}",
        ]
    machine = [f"type={mtype}"]
    if ovmf:
        machine.insert(0, "pflash0=pflash0,pflash1=drive-efidisk0")
    argv += ["-machine", ",".join(machine)]
    if conf.get("args"):
        argv += shlex.split(conf["args"])
    return argv


def _hostpci_devices(hostpci: dict[int, str], q35: bool) -> list[str]:
    argv: list[str] = []
    for index in sorted(hostpci):
        props = parse_hostpci(hostpci[index])
        if "host" not in props:
            raise PveError(f"hostpci{index}: resource mapping '{props.get('mapping')}' not found on this node")
        pcie = q35 and props.get("pcie") == "1"
        if pcie:
            port = f"ich9-pcie-port-{index + 1}"
            if index >= 4:
                argv += [
                    "-device",
                    f"pcie-root-port,id={port},addr=10.{index - 4},x-speed=16,x-width=32,"
                    f"multifunction=on,bus=pcie.0,port={index + 1},chassis={index + 1}",
                ]
            bus, addr = port, "0x0"
        else:
            bus, addr = ("pci.0", _LEGACY_PCI_ADDR[index]) if index in _LEGACY_PCI_ADDR else ("pci.1", hex(index))
        ids = props["host"].split(";")
        devices: list[str] = []
        for pci_id in ids:
            named_function = "." in pci_id.rsplit(":", 1)[-1]
            funcs = [pci.full_id(pci_id)] if named_function else pci.functions(pci_id)
            if not funcs:
                raise PveError(f"no PCI device found for '{pci_id}'")
            devices += funcs
        multifunction = len(devices) > 1
        extra = "" if props.get("rombar", "1") == "1" else ",rombar=0"
        if props.get("x-vga") == "1":
            extra += ",x-vga=on"
        for fn, dev in enumerate(devices):
            dev_id = f"hostpci{index}.{fn}" if multifunction else f"hostpci{index}"
            dev_addr = f"{addr}.{fn}" if multifunction else addr
            mf = ",multifunction=on" if multifunction and fn == 0 else ""
            argv += [
                "-device",
                f"vfio-pci,host={dev},id={dev_id},bus={bus},addr={dev_addr}{mf}{extra if fn == 0 else ''}",
            ]
    return argv
