/*
 * C source of the lab's ``libcuda.so.<version>`` (also installed as ``libnvidia-ml.so.<version>``).
 *
 * A real shared library, so ``ctypes.CDLL('libcuda.so.1')`` and ``cuInit(0)`` behave as on a real
 * system: 0 only when the driver is loaded at this library's exact version and both /dev/nvidiactl
 * and /dev/nvidia-uvm are present; 803 (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH) for another version;
 * 999 (CUDA_ERROR_UNKNOWN) without /dev/nvidia-uvm; 100 (CUDA_ERROR_NO_DEVICE) without the driver
 * or any /dev/nvidiaN. ``cuDeviceGetCount`` counts the /dev/nvidiaN nodes this process can see.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#ifndef LAB_DRIVER_VERSION
#error "LAB_DRIVER_VERSION must be defined"
#endif

static int initialized = 0;
static int device_count = 0;

static int is_char(const char *path, int major, int minor) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISCHR(st.st_mode)) return 0;
    if (major >= 0 && (int)major(st.st_rdev) != major) return 0;
    if (minor >= 0 && (int)minor(st.st_rdev) != minor) return 0;
    return 1;
}

static int module_version(char *out, size_t len) {
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    char line[512], word[128];
    if (!f) return 0;
    if (!fgets(line, sizeof line, f)) { fclose(f); return 0; }
    fclose(f);
    char *p = line;
    int n;
    while (sscanf(p, "%127s%n", word, &n) == 1) {
        int dots = 0, ok = 1;
        for (char *c = word; *c; c++) { if (*c == '.') dots++; else if (*c < '0' || *c > '9') ok = 0; }
        if (ok && dots >= 1) { snprintf(out, len, "%s", word); return 1; }
        p += n;
    }
    return 0;
}

static int count_gpus(void) {
    DIR *d = opendir("/dev");
    struct dirent *e;
    int count = 0;
    char path[300];
    if (!d) return 0;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "nvidia", 6) != 0) continue;
        const char *num = e->d_name + 6;
        if (!*num) continue;
        int digits = 1;
        for (const char *c = num; *c; c++) if (*c < '0' || *c > '9') digits = 0;
        if (!digits) continue;
        snprintf(path, sizeof path, "/dev/%s", e->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 195 && minor(st.st_rdev) < 254)
            count++;
    }
    closedir(d);
    return count;
}

int cuInit(unsigned int flags) {
    char version[128];
    (void)flags;
    if (!module_version(version, sizeof version)) return 100;
    if (strcmp(version, LAB_DRIVER_VERSION) != 0) return 803;
    if (!is_char("/dev/nvidiactl", 195, 255)) return 100;
    if (!is_char("/dev/nvidia-uvm", -1, 0)) return 999;
    device_count = count_gpus();
    if (device_count == 0) return 100;
    initialized = 1;
    return 0;
}

int cuDriverGetVersion(int *v) { if (!v) return 1; *v = 13000; return 0; }

int cuDeviceGetCount(int *count) {
    if (!count) return 1;
    if (!initialized) return 3;
    *count = device_count;
    return 0;
}

int cuDeviceGet(int *dev, int ordinal) {
    if (!initialized) return 3;
    if (!dev || ordinal < 0 || ordinal >= device_count) return 101;
    *dev = ordinal;
    return 0;
}

static const char *error_name(int rc) {
    switch (rc) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 803: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 999: return "CUDA_ERROR_UNKNOWN";
    default: return NULL;
    }
}

static const char *error_string(int rc) {
    switch (rc) {
    case 0: return "no error";
    case 1: return "invalid argument";
    case 3: return "initialization error";
    case 100: return "no CUDA-capable device is detected";
    case 101: return "invalid device ordinal";
    case 803: return "system has unsupported display driver / cuda driver combination";
    case 999: return "unknown error";
    default: return NULL;
    }
}

int cuGetErrorName(int rc, const char **name) {
    const char *s = error_name(rc);
    if (!name) return 1;
    *name = s;
    return s ? 0 : 1;
}

int cuGetErrorString(int rc, const char **str) {
    const char *s = error_string(rc);
    if (!str) return 1;
    *str = s;
    return s ? 0 : 1;
}

/* NVML, enough for a library version check */
int nvmlInit_v2(void) {
    char version[128];
    if (!module_version(version, sizeof version)) return 9;
    if (strcmp(version, LAB_DRIVER_VERSION) != 0) return 18;
    return 0;
}
int nvmlInit(void) { return nvmlInit_v2(); }
int nvmlShutdown(void) { return 0; }
int nvmlSystemGetDriverVersion(char *out, unsigned int len) {
    if (!module_version(out, len)) return 9;
    return 0;
}
int nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!count) return 2;
    *count = (unsigned int)count_gpus();
    return 0;
}
