/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the agent protocol's frame decoder, the EXEC request
 * parser (the agent's side) and the EXIT result parser (the engine's side:
 * a microvm's guest is root in its VM and its agent says what it wants),
 * fed arbitrary bytes as a hostile peer would send them. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agent/exec_json.h"
#include "agent/proto.h"
#include "kis/result.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;
	while (off < size) {
		struct kis_frame f;
		size_t used = 0;
		int st = kis_frame_decode(data + off, size - off, &f, &used);
		if (st != KIS_FRAME_OK)
			break;
		if (f.type == KIS_F_EXEC) {
			struct kis_exec_req req;
			struct kis_error *err = NULL;
			if (kis_exec_req_from_json((const char *)f.payload, f.len, &req, &err) == 0)
				kis_exec_req_release(&req);
			kis_error_free(err);
		} else if (f.type == KIS_F_EXIT) {
			struct kis_result res;
			struct kis_error *err = NULL;
			memset(&res, 0, sizeof(res));
			(void)kis_exit_from_json((const char *)f.payload, f.len, &res, &err);
			kis_result_release(&res);
			kis_error_free(err);
		}
		off += used;
	}
	return 0;
}
