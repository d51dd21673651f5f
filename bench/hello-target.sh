#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 18's start-up target, read from a bench/startup table on stdin
# (its first row is the native hello world, the reference): a cached WASI
# hello world through the tier in at most the time of the native one plus
# 2 ms. Prints the row named by $1 against that bound, both from the same
# interleaved rounds. The columns are found by the header's names, counted
# from the end (a command's label has spaces in it).
# Usage: bench/startup N 'native hello=...' 'LABEL=...' | sh bench/hello-target.sh LABEL
awk -v label="$1" '
	$1 == "command" && !hdr {
		for (i = 2; i <= NF; i++) {
			if ($i == "median_ms") med_back = NF - i
			if ($i == "added_ms") add_back = NF - i
		}
		hdr = NR
		next
	}
	hdr && NR == hdr + 1 { native = $(NF - med_back) }
	hdr && index($0, label) == 1 { med = $(NF - med_back); added = $(NF - add_back); found = 1 }
	END {
		if (!hdr || med_back == "" || add_back == "") {
			print "hello-target: no header with median_ms and added_ms"
			exit 1
		}
		if (!found || native == "") {
			print "hello-target: no row \"" label "\" after a native one"
			exit 1
		}
		verdict = added <= 2 ? "met" : sprintf("not met, %.3f ms over the bound", added - 2)
		fmt = "issue 18 target, cached compiler vs native + 2 ms: %s %.3f ms, "
		fmt = fmt "native %.3f ms, bound %.3f ms: native %+.3f ms (%s)\n"
		printf fmt, label, med, native, native + 2, added, verdict
	}'
