/* SPDX-License-Identifier: MIT */
/* A running VM's mount slot given another image (a kis-vm pod container's
 * root, src/runtime/mvm.c): its lower disk swapped over QMP, the device
 * set (and so the snapshot it was restored from) unchanged.
 *
 * QEMU 7.2's block layer: the slot's drive has node names of our own
 * (vm.c: m<i>lf the raw format node, m<i>lp its file); the image's fd
 * goes to a new fd set (add-fd, SCM_RIGHTS: the jailed VMM opens no
 * path), a file node is added on it (blockdev-add), and the format node
 * is reopened onto that file (blockdev-reopen, "file"): the guest's
 * virtio disk then reads the new image. The file node and fd set of the
 * swap before are deleted (blockdev-del, remove-fd). Each swap's number,
 * which names its node (kis-m<i>g<n>) and set (SLOT_FDSET_BASE + ...),
 * is kept in the session's directory (slot<i>.gen), under a lock there. */
#include "core/util.h"

#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "backends/microvm/vm.h"

/* fd sets 1 .. 4 + KIS_MVM_MOUNT_DISKS are the argv's (vm.c) */
#define SLOT_FDSET_BASE 1000
#define SLOT_GEN_MAX 100000
/* numbers a swap tries past a killed swap's leftovers (one is enough:
 * a swap is made under the slots' lock, one at a time) */
#define SLOT_TRIES 3

static long slot_set(int slot, unsigned gen)
{
	return SLOT_FDSET_BASE + (long)slot * SLOT_GEN_MAX + gen;
}

/* One QMP command made from fmt, sent with fd (-1 none); *reply (when
 * reply is not NULL) is freed first and then holds the answer, kept for
 * the caller's message on a failure. */
static int __attribute__((format(printf, 5, 6)))
qmp(int q, int fd, char **reply, int ms, const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (reply) {
		free(*reply);
		*reply = NULL;
	}
	return kis_mvm_qmp_cmd(q, cmd, fd, reply, ms);
}

static unsigned read_gen(int dfd, const char *name)
{
	char buf[32];
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[k > 0 ? k : 0] = '\0';
	unsigned long v = strtoul(buf, NULL, 10);
	return v < SLOT_GEN_MAX ? (unsigned)v : 0;
}

static int write_gen(int dfd, const char *name, unsigned gen)
{
	char tmp[48], buf[32];
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	int n = snprintf(buf, sizeof(buf), "%u\n", gen);
	int r = write(fd, buf, (size_t)n) == n ? 0 : -1;
	close(fd);
	return r < 0 ? -1 : renameat(dfd, tmp, dfd, name);
}

int kis_mvm_slot_attach(int dfd, int slot, const char *img, struct kis_error **err)
{
	if (slot < 0 || slot >= KIS_MVM_MOUNTS)
		return kis_error_set(err, KIS_E_INVALID_ARGUMENT, 0, "no mount slot %d (0 .. %d)", slot,
				     KIS_MVM_MOUNTS - 1);
	_cleanup_close_ int lock = openat(dfd, "slots.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
					  0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot lock the VM's slots");
	_cleanup_close_ int fd = open(img, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot open '%s'", img);
	char gname[32];
	snprintf(gname, sizeof(gname), "slot%d.gen", slot);
	unsigned old = read_gen(dfd, gname), gen = old;
	_cleanup_close_ int q = kis_mvm_qmp_open(dfd, "qmp.sock", 5000);
	if (q < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot reach the VM's QMP socket");
	char *reply = NULL;
	int r = -1;
	/* A swap killed before it recorded its number (a kis-runtime create
	 * SIGKILLed) left in the VM what it had made under the next number:
	 * a set, a node, even the slot reopened onto that node. Each try
	 * first clears a set and a node of its number that no one uses
	 * (remove-fd on a set whose fd a node holds only marks it: QEMU
	 * frees it with the node), so the set holds our fd alone; a node of
	 * that name still in use (blockdev-add: "Duplicate nodes") moves the
	 * swap to the next number, and every number between the recorded
	 * one and ours is cleared once the slot is on ours. */
	for (int tries = 0; r < 0 && tries < SLOT_TRIES; tries++) {
		if (++gen >= SLOT_GEN_MAX) {
			free(reply);
			return kis_error_set(err, KIS_E_INTERNAL, 0,
					     "mount slot %d: swapped too often", slot);
		}
		long set = slot_set(slot, gen);
		qmp(q, -1, NULL, 5000, "{\"execute\":\"blockdev-del\",\"arguments\":"
		    "{\"node-name\":\"kis-m%dg%u\"}}", slot, gen);
		qmp(q, -1, NULL, 5000, "{\"execute\":\"remove-fd\",\"arguments\":{\"fdset-id\":%ld}}",
		    set);
		r = qmp(q, fd, &reply, 5000,
			"{\"execute\":\"add-fd\",\"arguments\":{\"fdset-id\":%ld,\"opaque\":\"slot%d\"}}",
			set, slot);
		if (r == 0)
			r = qmp(q, -1, &reply, 10000,
				"{\"execute\":\"blockdev-add\",\"arguments\":{\"driver\":\"file\","
				"\"node-name\":\"kis-m%dg%u\",\"filename\":\"/dev/fdset/%ld\","
				"\"read-only\":true}}", slot, gen, set);
		if (r < 0 && reply && strstr(reply, "Duplicate")) {
			qmp(q, -1, NULL, 5000,
			    "{\"execute\":\"remove-fd\",\"arguments\":{\"fdset-id\":%ld}}", set);
			continue;
		}
		if (r == 0) {
			r = qmp(q, -1, &reply, 10000,
				"{\"execute\":\"blockdev-reopen\",\"arguments\":{\"options\":[{"
				"\"node-name\":\"m%dlf\",\"driver\":\"raw\",\"file\":\"kis-m%dg%u\","
				"\"read-only\":true}]}}", slot, slot, gen);
			if (r < 0) /* the new node is no one's: not left behind */
				qmp(q, -1, NULL, 5000, "{\"execute\":\"blockdev-del\",\"arguments\":"
				    "{\"node-name\":\"kis-m%dg%u\"}}", slot, gen);
		}
		if (r < 0) {
			kis_error_set(err, KIS_E_INTERNAL, 0, "cannot swap mount slot %d's disk: %.300s",
				      slot, reply ? reply : "no answer from QMP");
			free(reply);
			qmp(q, -1, NULL, 5000,
			    "{\"execute\":\"remove-fd\",\"arguments\":{\"fdset-id\":%ld}}", set);
			return -1;
		}
	}
	if (r < 0) {
		kis_error_set(err, KIS_E_INTERNAL, 0, "cannot swap mount slot %d's disk: %.300s", slot,
			      reply ? reply : "no answer from QMP");
		free(reply);
		return -1;
	}
	free(reply);
	/* the number is kept before the old nodes go: a failure below leaves
	 * a node and a set behind in the VM, never a slot named wrong */
	if (write_gen(dfd, gname, gen) < 0)
		return kis_error_set(err, KIS_E_INTERNAL, errno, "cannot record mount slot %d", slot);
	for (unsigned g = old > 0 ? old : 1; g < gen; g++) {
		qmp(q, -1, NULL, 5000, "{\"execute\":\"blockdev-del\",\"arguments\":"
		    "{\"node-name\":\"kis-m%dg%u\"}}", slot, g);
		qmp(q, -1, NULL, 5000, "{\"execute\":\"remove-fd\",\"arguments\":{\"fdset-id\":%ld}}",
		    slot_set(slot, g));
	}
	return 0;
}
