/*
 * C source of the lab's ``memlock`` preload (``prlimit-memlock.so``).
 *
 * LXC applies ``lxc.prlimit.memlock`` to a container's init and everything under it. Raising a hard
 * limit needs CAP_SYS_RESOURCE, which the lab's machine does not grant to root, so a container whose
 * configuration asks for more than the machine allows gets this preload instead: ``getrlimit``/
 * ``prlimit`` report the configured ``RLIMIT_MEMLOCK`` (from ``GPUHOST_LAB_MEMLOCK``: ``unlimited``
 * or bytes), so ``ulimit -l`` answers as on a real node. Every other limit is the real one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>

static int configured(struct rlimit *out) {
    const char *v = getenv("GPUHOST_LAB_MEMLOCK");
    if (!v || !*v) return 0;
    if (strcmp(v, "unlimited") == 0) { out->rlim_cur = out->rlim_max = RLIM_INFINITY; return 1; }
    out->rlim_cur = out->rlim_max = (rlim_t)strtoull(v, NULL, 10);
    return 1;
}

int getrlimit(__rlimit_resource_t resource, struct rlimit *rlim) {
    static int (*real)(__rlimit_resource_t, struct rlimit *);
    if (resource == RLIMIT_MEMLOCK && rlim && configured(rlim)) return 0;
    if (!real) real = dlsym(RTLD_NEXT, "getrlimit");
    return real(resource, rlim);
}

int getrlimit64(__rlimit_resource_t resource, struct rlimit64 *rlim) {
    static int (*real)(__rlimit_resource_t, struct rlimit64 *);
    struct rlimit r;
    if (resource == RLIMIT_MEMLOCK && rlim && configured(&r)) {
        rlim->rlim_cur = r.rlim_cur; rlim->rlim_max = r.rlim_max; return 0;
    }
    if (!real) real = dlsym(RTLD_NEXT, "getrlimit64");
    return real(resource, rlim);
}

int prlimit(pid_t pid, __rlimit_resource_t resource, const struct rlimit *new_limit, struct rlimit *old) {
    static int (*real)(pid_t, __rlimit_resource_t, const struct rlimit *, struct rlimit *);
    struct rlimit r;
    if (resource == RLIMIT_MEMLOCK && pid == 0 && configured(&r)) {
        if (old) *old = r;
        return 0;
    }
    if (!real) real = dlsym(RTLD_NEXT, "prlimit");
    return real(pid, resource, new_limit, old);
}

int prlimit64(pid_t pid, __rlimit_resource_t resource, const struct rlimit64 *new_limit, struct rlimit64 *old) {
    static int (*real)(pid_t, __rlimit_resource_t, const struct rlimit64 *, struct rlimit64 *);
    struct rlimit r;
    if (resource == RLIMIT_MEMLOCK && pid == 0 && configured(&r)) {
        if (old) { old->rlim_cur = r.rlim_cur; old->rlim_max = r.rlim_max; }
        return 0;
    }
    if (!real) real = dlsym(RTLD_NEXT, "prlimit64");
    return real(pid, resource, new_limit, old);
}

int setrlimit(__rlimit_resource_t resource, const struct rlimit *rlim) {
    static int (*real)(__rlimit_resource_t, const struct rlimit *);
    struct rlimit r;
    if (resource == RLIMIT_MEMLOCK && configured(&r)) return 0;
    if (!real) real = dlsym(RTLD_NEXT, "setrlimit");
    return real(resource, rlim);
}
