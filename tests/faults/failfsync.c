/* LD_PRELOAD shim for the fault tests: fsync and fdatasync fail with EIO while
   the file named by $FAILFSYNC_FLAG exists (a disk that stops syncing). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static int failing(void) {
    const char *flag = getenv("FAILFSYNC_FLAG");
    return flag != NULL && access(flag, F_OK) == 0;
}

int fsync(int fd) {
    static int (*real)(int) = NULL;
    if (failing()) { errno = EIO; return -1; }
    if (!real) real = dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int) = NULL;
    if (failing()) { errno = EIO; return -1; }
    if (!real) real = dlsym(RTLD_NEXT, "fdatasync");
    return real(fd);
}
