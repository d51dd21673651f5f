#!/bin/sh
# SPDX-License-Identifier: MIT
# The least a kis run can cost here, read from a bench/startup table on
# stdin (passed through): the reference's median plus K process images
# that kis adds to it (kis itself; inside bubblewrap and crun also the
# agent), each priced by the row of an empty static glibc program from the
# same interleaved rounds. Prints that floor as a ratio to the reference
# beside the target and kis's own ratio, and what kis spends beyond its
# images. The columns are found by the header's names (labels have spaces).
# Usage: bench/startup N ... | sh bench/floor.sh REF_LABEL KIS_LABEL IMAGE_LABEL K TARGET
awk -v ref="$1" -v kis="$2" -v img="$3" -v k="$4" -v target="$5" '
	# the row whose label is l: the label, then two spaces of padding
	function is_row(l) { return index($0, l) == 1 && substr($0, length(l) + 1, 2) == "  " }
	{ print }
	$1 == "command" && !hdr {
		for (i = 2; i <= NF; i++)
			if ($i == "median_ms") med_back = NF - i
		hdr = NR
		next
	}
	hdr && is_row(ref) { r = $(NF - med_back) }
	hdr && is_row(kis) { m = $(NF - med_back) }
	hdr && is_row(img) { e = $(NF - med_back) }
	END {
		if (r == "" || m == "" || e == "" || r <= 0) {
			print "floor: the table lacks a row (\"" ref "\", \"" kis "\", \"" img "\")"
			exit 1
		}
		f = r + k * e
		printf "floor: %s + %d empty glibc image%s (%.3f ms each) = %.3f ms, %.2fx; ", \
			ref, k, k == 1 ? "" : "s", e, f, f / r
		printf "target %sx; kis %.2fx; kis beyond its images: %+.3f ms\n", \
			target, m / r, m - f
	}'
