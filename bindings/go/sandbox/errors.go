// SPDX-License-Identifier: MIT

package sandbox

// #include "kis/sandbox.h"
import "C"

import (
	"errors"
	"fmt"
	"syscall"
)

// The engine's stable error codes (include/kis/error.h), as sentinels:
// errors.Is(err, ErrProfileUnsatisfiable).
var (
	ErrEscapeHatchForbidden = errors.New("escape_hatch_forbidden")
	ErrTierUnavailable      = errors.New("tier_unavailable")
	ErrProfileUnsatisfiable = errors.New("profile_unsatisfiable")
	ErrTTYUnsupported       = errors.New("tty_unsupported")
	ErrInvalidProfile       = errors.New("invalid_profile")
	ErrInvalidID            = errors.New("invalid_id")
	ErrNotFound             = errors.New("not_found")
	ErrDestinationExists    = errors.New("destination_exists")
	ErrInvalidArgument      = errors.New("invalid_argument")
	ErrBusy                 = errors.New("busy")
	ErrInternal             = errors.New("internal")
	ErrProtocol             = errors.New("protocol")
)

var sentinels = map[string]error{}

func init() {
	for _, e := range []error{ErrEscapeHatchForbidden, ErrTierUnavailable,
		ErrProfileUnsatisfiable, ErrTTYUnsupported, ErrInvalidProfile, ErrInvalidID,
		ErrNotFound, ErrDestinationExists, ErrInvalidArgument, ErrBusy, ErrInternal,
		ErrProtocol} {
		sentinels[e.Error()] = e
	}
}

// Error is an error the engine returned: its stable code's name, the
// message (what to change) and the system error to blame, if any. It
// unwraps to the sentinel of its code.
type Error struct {
	Code    string
	Message string
	Errno   syscall.Errno
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Unwrap gives the sentinel of the code (nil for a code newer than this
// package), for errors.Is.
func (e *Error) Unwrap() error { return sentinels[e.Code] }

// takeError turns a struct kis_error * into an *Error and frees it.
func takeError(e *C.struct_kis_error) error {
	if e == nil {
		return &Error{Code: "internal", Message: "the library failed without saying why"}
	}
	defer C.kis_error_free(e)
	return &Error{
		Code:    C.GoString(C.kis_errc_name(C.kis_error_code(e))),
		Message: C.GoString(C.kis_error_message(e)),
		Errno:   syscall.Errno(C.kis_error_errno(e)),
	}
}
