# SPDX-License-Identifier: MIT
# The manual: kis-sandbox(1) and a page per verb, kis-sandbox-VERB(1), made
# by help2man (Debian help2man) from the binary's own --help, so the pages
# and --help are one text. The verbs are read from `kis sandbox --help`.
# Every page gets the EXIT STATUS and ENVIRONMENT of docs/man/kis-sandbox.h2m.
MAN_DIR := $(BUILD)/man

.PHONY: man
man: $(MAN_DIR)/kis-sandbox.1

$(MAN_DIR)/kis-sandbox.1: $(KIS) mk/man.mk docs/man/kis-sandbox.h2m
	@mkdir -p $(MAN_DIR)/bin
	@echo "  MAN     $(MAN_DIR)"
	$(Q)set -e; kis=$(abspath $(KIS)); \
	verbs=$$($$kis sandbox --help | awk '/^Verbs:/ { v = 1; next } v && /^  [a-z]/ { print $$1 } v && /^$$/ { v = 0 }'); \
	printf '[SEE ALSO]\n' > $(MAN_DIR)/see-also.h2m; \
	for v in $$verbs; do printf '.BR kis-sandbox-%s (1),\n' $$v >> $(MAN_DIR)/see-also.h2m; done; \
	printf '.BR bwrap (1),\n.BR crun (1),\n.BR qemu-system-x86_64 (1)\n' >> $(MAN_DIR)/see-also.h2m; \
	printf '#!/bin/sh\nexec %s sandbox "$$@"\n' $$kis > $(MAN_DIR)/bin/kis-sandbox; \
	chmod +x $(MAN_DIR)/bin/kis-sandbox; \
	help2man --no-info --no-discard-stderr --version-string=$(VERSION) \
	  --name="clone a base into a copy-on-write workspace and run commands confined" \
	  --include=$(MAN_DIR)/see-also.h2m --include=docs/man/kis-sandbox.h2m \
	  -o $@.tmp $(MAN_DIR)/bin/kis-sandbox; \
	for v in $$verbs; do \
	  printf '#!/bin/sh\nexec %s sandbox %s "$$@"\n' $$kis $$v > $(MAN_DIR)/bin/kis-sandbox-$$v; \
	  chmod +x $(MAN_DIR)/bin/kis-sandbox-$$v; \
	  name=$$($$kis sandbox --help | awk -v v=$$v '$$1 == v { $$1 = ""; sub(/^ +/, ""); print }'); \
	  printf '[SEE ALSO]\n.BR kis-sandbox (1)\n' > $(MAN_DIR)/see-also-$$v.h2m; \
	  help2man --no-info --no-discard-stderr --version-string=$(VERSION) --name="$$name" \
	    --include=$(MAN_DIR)/see-also-$$v.h2m --include=docs/man/kis-sandbox.h2m \
	    -o $(MAN_DIR)/kis-sandbox-$$v.1 $(MAN_DIR)/bin/kis-sandbox-$$v; \
	done; \
	mv $@.tmp $@
