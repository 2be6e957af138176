"""What the lab reproduces of Proxmox VE, NVIDIA's installer and LXC, each with the real source it follows,
and what it cannot rehearse: the table behind the site's "Lab fidelity" page (``scripts/gen_reference.py``).

Sources are the upstream repositories (file:line at the snapshots named in
``shared/reference/proxmox-behaviour-2026-12.md``); the lab code cites the same place next to itself.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Behaviour:
    area: str
    what: str
    source: str  # repository, file and line or function
    lab: str  # where the lab does it (module:function)


BEHAVIOURS: tuple[Behaviour, ...] = (
    Behaviour(
        "tasks",
        "A task ends `TASK OK`, `TASK WARNINGS: N` or `TASK ERROR: …`; its status is `OK`, `WARNINGS: N` or the "
        "error, and `WARNINGS: N` is a success",
        "proxmox/pve-common src/PVE/RESTEnvironment.pm:652-666, src/PVE/UPID.pm read_status, status_is_error",
        "lab/node/tasks.py:run",
    ),
    Behaviour(
        "tasks",
        "`WARN: …` task log lines (log_warn) count as warnings",
        "proxmox/pve-common src/PVE/RESTEnvironment.pm:749-770",
        "lab/node/tasks.py:warn",
    ),
    Behaviour(
        "tasks",
        "The task log API returns 50 lines from `start` unless `limit` says otherwise; `limit=0` is the whole log",
        "proxmox/pve-manager PVE/API2/Tasks.pm:355-368, 439-446; proxmox/pve-common src/PVE/Tools.pm "
        "dump_logfile_by_filehandle",
        "lab/node/tasks.py:log",
    ),
    Behaviour(
        "containers",
        "Creating or starting a CT without `nesting` whose init is systemd > 241 (Debian 12: 252) warns "
        "`Systemd 252 detected. You may need to enable nesting.`: the task ends `WARNINGS: 1`",
        "proxmox/pve-container src/PVE/LXC/Setup/Base.pm:659-676, src/PVE/LXC/Setup.pm:299-330",
        "lab/node/lxc.py:_systemd_nesting_warning",
    ),
    Behaviour(
        "pvesh",
        "A task run through pvesh runs synchronously: its log on stdout, then the UPID; `TASK ERROR` text or "
        "`Task finished with N warning(s)!` on stderr; exit 0 either way",
        "proxmox/pve-common src/PVE/RESTEnvironment.pm:442-529 (tee, $sync); proxmox/pve-manager "
        "PVE/CLI/pvesh.pm:398-461",
        "lab/node/cli/pvesh.py:_sync_task",
    ),
    Behaviour(
        "pvesh",
        "Config parses warn on stderr for every cgroup-v1 `lxc.cgroup.*` key",
        "proxmox/pve-container src/PVE/LXC/Config.pm:842-845",
        "lab/node/guests.py:load",
    ),
    Behaviour(
        "pvesh",
        "`delete` of a key that is not set warns `cannot delete 'K' - not set in current configuration!` and "
        "the call goes on",
        "proxmox/pve-container src/PVE/LXC/Config.pm:1314-1318; proxmox/qemu-server src/PVE/API2/Qemu.pm:2296-2300",
        "lab/node/pending.py:stage",
    ),
    Behaviour(
        "pvesh",
        "A contended guest lock prints `trying to acquire lock...` then ` OK` on stderr",
        "proxmox/pve-common src/PVE/Tools.pm:217-231 lock_file_full",
        "lab/node/guests.py:locked",
    ),
    Behaviour(
        "config API",
        "`delete=K` with `revert=K` (or with `K=…`) in one call is a 400",
        "proxmox/pve-container src/PVE/API2/LXC/Config.pm:183-208; proxmox/qemu-server src/PVE/API2/Qemu.pm:2118-2141",
        "lab/node/lxc.py:update, lab/node/qemu.py:update",
    ),
    Behaviour(
        "config API",
        "A container's `delete` only queues the deletion and keeps a pending value; a VM's drops it",
        "proxmox/pve-container src/PVE/LXC/Config.pm:1301-1330; proxmox/qemu-server src/PVE/API2/Qemu.pm:2291-2303",
        "lab/node/pending.py:stage",
    ),
    Behaviour(
        "config API",
        "A new `devN` on a running container is hot-plugged at once (an existing one stays pending)",
        "proxmox/pve-container src/PVE/LXC/Config.pm:1729-1735, src/PVE/LXC.pm:2336 device_passthrough_hotplug",
        "lab/node/lxc.py:update, lab/node/ct_runtime.py:hotplug_device",
    ),
    Behaviour(
        "config API",
        "A stale `digest`: containers answer `detected modified configuration - …`, VMs "
        "`checksum mismatch (file change by other user?)`",
        "proxmox/pve-container src/PVE/API2/LXC/Config.pm:176 (pve-common Tools.pm assert_if_modified); "
        "proxmox/qemu-server src/PVE/API2/Qemu.pm:2211-2212",
        "lab/node/guests.py:check_digest",
    ),
    Behaviour(
        "config files",
        "Guest config files are read and written as PVE does, by the lab's own code (not gpuhost's): `#` description "
        "lines percent-encoded (control, non-ASCII, `:` and `%`), keys sorted, `[pve:pending]`/`[PENDING]`, special "
        "and snapshot sections, the pending `delete:` list sorted with `!` for force, the digest the SHA1 of the "
        "file; checked on qemu-server's and pve-container's own test files",
        "proxmox/pve-container src/PVE/LXC/Config.pm parse_pct_config, write_pct_config; proxmox/qemu-server "
        "src/PVE/QemuServer.pm parse_vm_config, write_vm_config; proxmox/pve-guest-common src/PVE/AbstractConfig.pm "
        "print_pending_delete; proxmox/pve-common src/PVE/ParseUtils.pm encode_text",
        "lab/node/pveconf.py:parse, render",
    ),
    Behaviour(
        "permissions",
        "`devN`, `hookscript` and raw `hostpciN`/`args` are root@pam only; an API token is refused with PVE's text",
        "proxmox/pve-container src/PVE/LXC.pm:1655-1740; proxmox/qemu-server src/PVE/API2/Qemu.pm:875-935, 1034-1037",
        "lab/node/schema.py:check_ct_modify_perm, check_vm_modify_perm",
    ),
    Behaviour(
        "permissions",
        "A token with privilege separation has only what its ACLs grant (built-in roles, most specific path, "
        "`propagate`); without it, its user's; a missing privilege is 403 `Permission check failed (PATH, PRIV)`",
        "proxmox/pve-access-control src/PVE/RPCEnvironment.pm:136-175, 291-305, src/PVE/AccessControl.pm:1057-1204; "
        "proxmox/pve-container src/PVE/LXC.pm:1661-1745; proxmox/qemu-server src/PVE/API2/Qemu.pm:995-1037",
        "lab/node/acl.py:privileges, check; lab/node/api.py:_check_privileges",
    ),
    Behaviour(
        "boot",
        "`proxmox-boot-tool status` names `uefi` or `grub` per ESP; a grub-pbt node (`--boot grub-pbt`) boots "
        "the ESP's grub.cfg, which `proxmox-boot-tool refresh` regenerates; the root file system's "
        "/boot/grub/grub.cfg does not boot; `update-grub` there runs the refresh",
        "proxmox-kernel-helper src/bin/proxmox-boot-tool:450-466, src/proxmox-boot/zz-proxmox-boot:63-125, "
        "src/proxmox-boot/000_proxmox_boot_header",
        "lab/node/bootloader.py:refresh_esps, booted_cmdline; lab/node/cli/update_grub.py",
    ),
    Behaviour(
        "boot",
        "systemd-boot boots the first line of /etc/kernel/cmdline",
        "proxmox-kernel-helper src/proxmox-boot/zz-proxmox-boot:49-53, functions:114-125 get_first_line",
        "lab/node/bootloader.py:kernel_cmdline_file",
    ),
    Behaviour(
        "NVIDIA",
        "The installer unloads a loaded NVIDIA module first; one that stays loaded (in use: nvidia-persistenced) "
        "aborts a `--silent` install unless `--allow-installation-with-running-driver`, which skips the load",
        "NVIDIA/nvidia-installer kernel.c:1687-1745, option_table.h:748-752; capture NVIDIA/cuda-samples#286",
        "lab/node/nvidia/installer.py:_unload_running",
    ),
    Behaviour(
        "LXC",
        "`pct exec` (lxc-attach) processes get the started container's `lxc.prlimit.*`; without one they keep "
        "the caller's limit",
        "proxmox/pve-container src/PVE/CLI/pct.pm:250; lxc/lxc src/lxc/attach.c:1711-1714, src/lxc/conf.c:2971-2996",
        "lab/node/ct_runtime.py:exec_in",
    ),
    Behaviour(
        "VM start",
        "A second VM on a PCI device a running VM holds is refused: `PCI device 'ID' already in use by VMID 'N'`",
        "proxmox/qemu-server src/PVE/QemuServer/PCI.pm:805-860 (reserve_pci_usage); src/PVE/QemuServer.pm:5706",
        "lab/node/qemu.py:start, _reserve_pci",
    ),
)

#: What a green lab run does not prove.
NOT_REHEARSED: tuple[str, ...] = (
    "Real hardware: IOMMU groups, VFIO binding, NVLink/P2P bandwidth and GPU firmware are simulated, so a lab "
    "P2P or NCCL figure says nothing about a real board.",
    "The NVIDIA driver itself: the lab installer and kernel module are stand-ins; a real DKMS build against "
    "real headers, a real module load and its dmesg are not exercised.",
    "Real firmware boot: the lab reads the command line the boot loader would pass; GRUB, systemd-boot, UEFI "
    "variables and Secure Boot (`efibootmgr`) are not run.",
    "pmxcfs: /etc/pve is a plain directory; cluster-wide replication, its permissions (root:www-data 0640) "
    "and its write semantics are not rehearsed.",
    "Permissions beyond what gpuhost calls: pools, groups, realms, user (not token) ACLs, token expiry and "
    "custom roles are not modelled; only built-in roles on tokens are.",
    "A GPU in use by a CUDA program inside a container: the lab's installer sees only nvidia-persistenced "
    "holding the module, so an upgrade with persistenced stopped but a CUDA job running would abort on a real "
    "host and not in the lab.",
    "Timing: a task that takes minutes on a real host (a CT create from a large template, a VM start mapping "
    "a lot of VFIO memory) finishes at once in the lab, so the root route's task timeout is not exercised there.",
    "PVE 9.1+ OVMF certificate warnings and deprecated machine pins on VM start (also `WARNINGS: N`).",
)


def render() -> str:
    """The site page (Markdown)."""
    out = [
        "# Lab fidelity",
        "",
        "What the lab reproduces of Proxmox VE, NVIDIA's installer and LXC, each behaviour with the real "
        "source it follows, so you know what a green lab run proves. Generated from `gpuhost.lab.fidelity`.",
        "",
        "| area | behaviour | real source | lab |",
        "| --- | --- | --- | --- |",
    ]
    for b in BEHAVIOURS:
        cells = (b.area, b.what, b.source, f"`{b.lab}`")
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    out += ["", "## What the lab cannot rehearse", ""]
    out += [f"- {item}" for item in NOT_REHEARSED]
    return "\n".join(out) + "\n"
