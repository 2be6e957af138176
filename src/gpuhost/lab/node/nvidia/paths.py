"""Where the simulated kernel and driver keep their state."""

NODE_STATE = "/var/lib/gpuhost-lab/node.json"
KERNEL_RUN = "/run/gpuhost-lab-kernel"  # per boot (the node's /run is a fresh tmpfs)
LOADED_MODULES = f"{KERNEL_RUN}/modules.json"
PROC_DEVICES_SOURCE = f"{KERNEL_RUN}/devices"  # bound over /proc/devices
DMESG = "/run/gpuhost-lab-kmsg"  # appended to the boot log by the dmesg shim
BOOT_TIME = f"{KERNEL_RUN}/boot_time"
PROC_DRIVER = "/proc/driver"
PROC_NVIDIA = "/proc/driver/nvidia"
LAB_GPU_FILE = "gpuhost-lab.json"  # per GPU under /proc/driver/nvidia/gpus/<bdf>/
PERSISTENCE_FLAG = "/proc/driver/nvidia/gpuhost-lab-persistence"
LIB_DIR = "/usr/lib/x86_64-linux-gnu"
TOOLS_DIR = "/usr/share/nvidia/gpuhost-lab"  # where the installer puts this package
NVIDIA_MAJOR = 195
CTL_MINOR = 255
MODESET_MINOR = 254
