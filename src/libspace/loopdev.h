/* Loop devices and the ext4 layer images behind them. A layer image must
 * never carry two file systems at once (two ext4 instances writing one
 * file corrupt it), and a process killed with SIGKILL leaves its mounts
 * behind: sbx-manager and spaced-host both look at what still holds an
 * image before they mount it, through these. */
#ifndef SPACE_LOOPDEV_H
#define SPACE_LOOPDEV_H

/* How many loop devices are backed by the file at real (a realpath).
 * Their device numbers ("7:3", the form of /proc/self/mountinfo) go to
 * devs[0..max) when devs is not NULL. A loop device with a file system on
 * it detaches itself (autoclear) when that file system ends, which is
 * when the last mount of it, in any mount namespace, is gone. */
int loopdev_backing(const char *real, char devs[][16], int max);

/* Detach (MNT_DETACH) every mount, in our mount namespace, of a loop
 * device backed by the file at real; each is logged with who as the
 * presumed owner ("a dead bridge"). Returns how many were detached. */
int loopdev_detach_mounts(const char *real, const char *who);

/* Is the file open anywhere but through fd (a loop device, read-write or
 * read-only, holds its backing file open, in any mount namespace)? fd:
 * the file, open read-only by the caller, its only open of the file.
 * Asked of the kernel in O(1) with a write lease, which is granted only
 * while fd is the file's one open, and released at once. 0: no other
 * open, so no loop device and no file system of the image exists; 1:
 * another open (a loop device or any other process); < 0: cannot tell
 * (leases disabled, or the file system refuses them). On anything but 0
 * the caller falls back to loopdev_backing / loopdev_detach_mounts. */
int loopdev_open_elsewhere(int fd);

/* The loop device under the file system mounted at mnt switched to direct
 * I/O: what the file system writes goes to the image file's blocks
 * without passing through the image file's page cache too. For a mount
 * unmounted once written (a move's restore: the bridge mounts the image
 * anew). Best effort: a backing file system without direct I/O, or a
 * mount that is not on a whole loop device, is left as it was. */
void loopdev_direct_io(const char *mnt);
#endif
