/* SPDX-License-Identifier: MIT */
/* A program that does nothing: bench/host.sh and bench/oci.sh time its
 * fork, exec and exit, linked as kis and kis-agent are (static-pie
 * glibc), for the price of one more process image on this machine; built
 * with -DNOLIBC -nostdlib it is the same without libc's start-up, which
 * shows what of that price is glibc's own (its CPUID-driven cache and
 * feature set-up, each CPUID a trap to the hypervisor in a PVM guest). */
#ifdef NOLIBC
void _start(void);
void _start(void)
{
	/* exit_group(0): x86_64 syscall 231 */
	__asm__ volatile("mov $231, %eax\n\txor %edi, %edi\n\tsyscall");
	__builtin_unreachable();
}
#else
int main(void)
{
	return 0;
}
#endif
