/* SPDX-License-Identifier: MIT */
/* Benchmark kernel: bitwise CRC-32 over a 64 KiB buffer (memory loads, shifts). */
#include "kernel.h"

static unsigned char buf[65536];

KERNEL unsigned run(void)
{
	u32 seed = 12345;
	for (u32 i = 0; i < sizeof(buf); i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (unsigned char)(seed >> 16);
	}
	u32 crc = 0xffffffffu;
	for (int round = 0; round < 40; round++) {
		for (u32 i = 0; i < sizeof(buf); i++) {
			crc ^= buf[i];
			for (int k = 0; k < 8; k++)
				crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
		}
	}
	return ~crc;
}
