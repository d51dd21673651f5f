// SPDX-License-Identifier: MIT

// Package sandbox is the kis sandbox engine from Go, through cgo over
// libkis-sandbox.so.0 (include/kis/ffi.h): runs, sessions, bases and
// copy-on-write workspaces, with errors comparable by errors.Is.
//
// A call into the library runs on a thread of its own (cgo), so a run
// blocks its goroutine and nothing else; an Engine may be used from many
// goroutines at once. A process killed mid-run leaves its sandbox recorded
// in the store, and the next store open (any run, `kis sandbox gc`)
// removes it.
package sandbox

// The library of this tree (build/, `make all`), else the installed one
// (`make install`, /usr/local/lib); the run path finds it again at run
// time. CGO_LDFLAGS can name another.

/*
#cgo CFLAGS: -I${SRCDIR}/../../../include
#cgo LDFLAGS: -L${SRCDIR}/../../../build -L/usr/local/lib -l:libkis-sandbox.so.0 -Wl,-rpath,${SRCDIR}/../../../build -Wl,-rpath,/usr/local/lib
#include <stdlib.h>
#include "kis/sandbox.h"
*/
import "C"

import (
	"unsafe"
)

// cstrings is a NULL-terminated char *argv[] made of Go strings, freed by free.
type cstrings struct {
	arr  **C.char
	strs []*C.char
}

func newCStrings(ss []string) *cstrings {
	n := len(ss) + 1
	arr := (**C.char)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	view := unsafe.Slice(arr, n)
	c := &cstrings{arr: arr}
	for i, s := range ss {
		cs := C.CString(s)
		c.strs = append(c.strs, cs)
		view[i] = cs
	}
	return c
}

func (c *cstrings) free() {
	for _, s := range c.strs {
		C.free(unsafe.Pointer(s))
	}
	C.free(unsafe.Pointer(c.arr))
}

// cstr is C.CString, with "" as NULL (the library's default).
func cstr(s string) *C.char {
	if s == "" {
		return nil
	}
	return C.CString(s)
}

func cfree(p *C.char) {
	if p != nil {
		C.free(unsafe.Pointer(p))
	}
}

// takeString copies a malloc'ed C string and frees it.
func takeString(p *C.char) string {
	if p == nil {
		return ""
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoString(p)
}

// Version is the library's version.
func Version() string { return C.GoString(C.kis_version()) }
