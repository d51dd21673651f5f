/* SPDX-License-Identifier: MIT */
/* Probe: change the inode of a device node the sandbox was given. Where the
 * sandbox's /dev binds the host's nodes and its root is the node's owner,
 * chmod changes the host's /dev/null. Harmless when it escapes: the mode is
 * set to the one it already has (only ctime moves). Prints the node's
 * device and inode so the test can tell the host's from the sandbox's own. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe.h"

int main(int argc, char **argv)
{
	const char *node = argc > 1 ? argv[1] : "/dev/null";
	struct stat st;
	if (stat(node, &st) < 0)
		probe_setup("dev_inode", "cannot stat the node");
	printf("dev_inode: node %llu:%llu\n", (unsigned long long)st.st_dev,
	       (unsigned long long)st.st_ino);
	if (chmod(node, st.st_mode & 07777) == 0)
		probe_escaped("dev_inode", "changed the node's inode (chmod)");
	probe_refused("dev_inode", errno, EPERM);
}
