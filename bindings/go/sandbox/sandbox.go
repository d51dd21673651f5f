// SPDX-License-Identifier: MIT

package sandbox

/*
#include <stdlib.h>
#include "kis/sandbox.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Reason says how a command ended (termination.reason).
type Reason string

// The reasons of include/kis/result.h.
const (
	ReasonExited      Reason = "exited"
	ReasonSignaled    Reason = "signaled"
	ReasonTrapped     Reason = "trapped"
	ReasonTimeout     Reason = "timeout"
	ReasonCPULimit    Reason = "cpu_limit"
	ReasonMemoryLimit Reason = "memory_limit"
	ReasonOutputLimit Reason = "output_limit"
	ReasonPidsLimit   Reason = "pids_limit"
	ReasonCancelled   Reason = "cancelled"
	ReasonSetupFailed Reason = "setup_failed"
	ReasonDiskLimit   Reason = "disk_limit"
)

// Termination is how the command ended; ExitCode is nil unless it exited.
type Termination struct {
	Reason   Reason  `json:"reason"`
	ExitCode *int    `json:"exit_code"`
	Signal   *int    `json:"signal"`
	Detail   *string `json:"detail"`
}

// Usage is what the command used, as the engine measured it.
type Usage struct {
	WallMs            uint64 `json:"wall_ms"`
	UserMs            uint64 `json:"user_ms"`
	SysMs             uint64 `json:"sys_ms"`
	MaxRSSBytes       uint64 `json:"max_rss_bytes"`
	MinorFaults       uint64 `json:"minor_faults"`
	MajorFaults       uint64 `json:"major_faults"`
	VoluntaryCtxsw    uint64 `json:"voluntary_ctxsw"`
	InvoluntaryCtxsw  uint64 `json:"involuntary_ctxsw"`
	LinearMemoryBytes uint64 `json:"linear_memory_bytes"`
}

// Result is one run's or exec's result. ExitCode is the CLI's exit status
// (the command's code, 126/127 when it never ran, 128+N for signal N).
type Result struct {
	// ID is the run's or session's id ("id"; "sandbox" is its deprecated alias).
	ID            string      `json:"id"`
	Sandbox       string      `json:"sandbox"`
	Tier          string      `json:"tier"`
	Backend       string      `json:"backend"`
	Termination   Termination `json:"termination"`
	ExitCode      int         `json:"exit_status"`
	Usage         Usage       `json:"usage"`
	Workspace     string      `json:"workspace"`
	WorkspaceKept bool        `json:"workspace_kept"`
	Stdout        []byte      `json:"-"`
	Stderr        []byte      `json:"-"`
}

// Options open an Engine. StoreRoot "" is $KIS_SANDBOX_ROOT, else the
// default store.
type Options struct {
	StoreRoot string
}

// Engine is the sandbox engine over one store.
type Engine struct {
	root  *C.char
	mu    sync.Mutex // the store handle of bases and workspaces
	store *C.struct_kis_store
}

// Open makes an Engine; the store is opened on first use.
func Open(opts Options) (*Engine, error) {
	return &Engine{root: cstr(opts.StoreRoot)}, nil
}

// Close frees the Engine's store handle and its memory. Idempotent.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.store != nil {
		C.kis_store_free(e.store)
		e.store = nil
	}
	cfree(e.root)
	e.root = nil
	return nil
}

func (e *Engine) withStore(fn func(st *C.struct_kis_store) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.store == nil {
		var cerr *C.struct_kis_error
		if C.kis_store_open(e.root, &e.store, &cerr) < 0 {
			return takeError(cerr)
		}
	}
	return fn(e.store)
}

// Backend is what one backend can enforce on this host, probed now.
type Backend struct {
	Backend   string   `json:"backend"`
	Tier      string   `json:"tier"`
	Available bool     `json:"available"`
	WhyAbsent string   `json:"why_absent"`
	TTY       bool     `json:"tty"`
	Shell     bool     `json:"shell"`
	Network   []string `json:"network"`
	Limits    []string `json:"limits"`
}

// Backends lists the backends compiled in.
func (e *Engine) Backends() ([]Backend, error) {
	var out *C.char
	var cerr *C.struct_kis_error
	if C.kis_backends_json(e.root, &out, &cerr) < 0 {
		return nil, takeError(cerr)
	}
	var bs []Backend
	err := json.Unmarshal([]byte(takeString(out)), &bs)
	return bs, err
}

// Base is an immutable tree in the store that workspaces are cloned from.
type Base struct {
	ID string
	e  *Engine
}

// Workspace is a copy-on-write clone of a base.
type Workspace struct {
	ID string
	e  *Engine
}

// ImportBase copies the tree at path into the store as a new base.
func (e *Engine) ImportBase(path string) (*Base, error) {
	var id [C.KIS_ID_BUFSZ]C.char
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	err := e.withStore(func(st *C.struct_kis_store) error {
		var cerr *C.struct_kis_error
		if C.kis_base_import(st, cp, nil, &id[0], &cerr) < 0 {
			return takeError(cerr)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Base{ID: C.GoString(&id[0]), e: e}, nil
}

// Clone makes a workspace from the base baseID; id "" mints one.
func (e *Engine) Clone(baseID, id string) (*Workspace, error) {
	var out [C.KIS_ID_BUFSZ]C.char
	cb, cid := C.CString(baseID), cstr(id)
	defer C.free(unsafe.Pointer(cb))
	defer cfree(cid)
	err := e.withStore(func(st *C.struct_kis_store) error {
		var cerr *C.struct_kis_error
		if C.kis_workspace_clone(st, cb, cid, &out[0], &cerr) < 0 {
			return takeError(cerr)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Workspace{ID: C.GoString(&out[0]), e: e}, nil
}

// Clone makes a workspace from the base.
func (b *Base) Clone(id string) (*Workspace, error) { return b.e.Clone(b.ID, id) }

// Remove marks the base removed; it is freed with its last clone.
func (b *Base) Remove() error {
	cid := C.CString(b.ID)
	defer C.free(unsafe.Pointer(cid))
	return b.e.withStore(func(st *C.struct_kis_store) error {
		var cerr *C.struct_kis_error
		if C.kis_base_remove(st, cid, &cerr) < 0 {
			return takeError(cerr)
		}
		return nil
	})
}

// Path is the host path of the workspace's files.
func (w *Workspace) Path() (string, error) {
	cid := C.CString(w.ID)
	defer C.free(unsafe.Pointer(cid))
	var out *C.char
	err := w.e.withStore(func(st *C.struct_kis_store) error {
		var cerr *C.struct_kis_error
		if C.kis_workspace_path(st, cid, &out, &cerr) < 0 {
			return takeError(cerr)
		}
		return nil
	})
	return takeString(out), err
}

// Destroy removes the workspace. Idempotent; ErrBusy while a session holds it.
func (w *Workspace) Destroy() error {
	cid := C.CString(w.ID)
	defer C.free(unsafe.Pointer(cid))
	return w.e.withStore(func(st *C.struct_kis_store) error {
		var cerr *C.struct_kis_error
		if C.kis_workspace_destroy(st, cid, &cerr) < 0 {
			return takeError(cerr)
		}
		return nil
	})
}

// newProfile is a struct kis_profile * merged from p, validated by the engine.
func newProfile(p Profile) (*C.struct_kis_profile, error) {
	cp := C.kis_profile_new()
	if cp == nil {
		return nil, &Error{Code: "internal", Message: "out of memory", Errno: syscall.ENOMEM}
	}
	docs := [][]byte{}
	doc, err := json.Marshal(p)
	if err != nil {
		C.kis_profile_free(cp)
		return nil, err
	}
	docs = append(docs, doc)
	if len(p.Extra) > 0 {
		docs = append(docs, p.Extra)
	}
	for _, d := range docs {
		cd := C.CBytes(d)
		var cerr *C.struct_kis_error
		r := C.kis_profile_merge_json(cp, (*C.char)(cd), C.size_t(len(d)), &cerr)
		C.free(cd)
		if r < 0 {
			C.kis_profile_free(cp)
			return nil, takeError(cerr)
		}
	}
	return cp, nil
}

func takeResult(res *C.struct_kis_result) (Result, error) {
	var r Result
	if err := json.Unmarshal([]byte(takeString(C.kis_result_to_json(res))), &r); err != nil {
		return r, err
	}
	for i, dst := range []*[]byte{&r.Stdout, &r.Stderr} {
		var data *C.char
		var n C.size_t
		C.kis_result_stream(res, C.int(i+1), &data, &n)
		if data != nil {
			*dst = C.GoBytes(unsafe.Pointer(data), C.int(n))
		} else {
			*dst = []byte{}
		}
	}
	return r, nil
}

// signalPipe turns ctx's end into a byte on a pipe the library watches:
// kis_run_capture takes any byte as cancel, a session's exec takes it as
// the signal to send (SIGKILL). stop releases it.
func signalPipe(ctx context.Context) (fd C.int, stop func(), err error) {
	if ctx.Done() == nil {
		return -1, func() {}, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return -1, nil, err
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			w.Write([]byte{byte(syscall.SIGKILL)})
		case <-done:
		}
	}()
	return C.int(r.Fd()), func() {
		close(done)
		wg.Wait()
		r.Close()
		w.Close()
	}, nil
}

// stdinFd gives the library an fd for stdin: nil is /dev/null; an
// *os.File is used as it is; another reader is copied into a pipe by a
// goroutine (the C call runs on its own thread, so they do not wait on
// each other).
func stdinFd(in io.Reader) (fd C.int, stop func(), err error) {
	if in == nil {
		return -1, func() {}, nil
	}
	if f, ok := in.(*os.File); ok {
		return C.int(f.Fd()), func() {}, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return -1, nil, err
	}
	go func() {
		io.Copy(w, in)
		w.Close()
	}()
	return C.int(r.Fd()), func() { r.Close() }, nil
}

// RunOptions are Run's optional arguments.
type RunOptions struct {
	Stdin io.Reader
}

// Run runs argv in a fresh sandbox under the profile, stdout and stderr
// captured. Cancelling ctx ends the run with ReasonCancelled (and removes
// what it made). A command that fails is a Result; only an engine error
// (the profile refused, the tier absent) is an error.
func (e *Engine) Run(ctx context.Context, p Profile, argv []string, opts ...RunOptions) (Result, error) {
	if len(argv) == 0 {
		return Result{}, &Error{Code: "invalid_argument", Message: "no command to run"}
	}
	var o RunOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	cp, err := newProfile(p)
	if err != nil {
		return Result{}, err
	}
	defer C.kis_profile_free(cp)
	args := newCStrings(argv)
	defer args.free()
	cancel, stopCancel, err := signalPipe(ctx)
	if err != nil {
		return Result{}, err
	}
	defer stopCancel()
	in, stopIn, err := stdinFd(o.Stdin)
	if err != nil {
		return Result{}, err
	}
	defer stopIn()
	res := C.kis_result_new()
	defer C.kis_result_free(res)
	var cerr *C.struct_kis_error
	if C.kis_run_capture(cp, args.arr, e.root, in, cancel, res, &cerr) < 0 {
		return Result{}, takeError(cerr)
	}
	return takeResult(res)
}

// Session is a sandbox that outlives a command.
type Session struct {
	ID        string
	e         *Engine
	mu        sync.Mutex
	destroyed bool
}

// NewSession creates a session under the profile.
func (e *Engine) NewSession(p Profile) (*Session, error) {
	cp, err := newProfile(p)
	if err != nil {
		return nil, err
	}
	defer C.kis_profile_free(cp)
	var id [C.KIS_ID_BUFSZ]C.char
	var cerr *C.struct_kis_error
	if C.kis_session_open(cp, e.root, &id[0], &cerr) < 0 {
		return nil, takeError(cerr)
	}
	return &Session{ID: C.GoString(&id[0]), e: e}, nil
}

func (s *Session) exec(ctx context.Context, argv []string, shell bool, stdin io.Reader) (Result, error) {
	if len(argv) == 0 {
		return Result{}, &Error{Code: "invalid_argument", Message: "no command to run"}
	}
	args := newCStrings(argv)
	defer args.free()
	cid := C.CString(s.ID)
	defer C.free(unsafe.Pointer(cid))
	sig, stopSig, err := signalPipe(ctx)
	if err != nil {
		return Result{}, err
	}
	defer stopSig()
	in, stopIn, err := stdinFd(stdin)
	if err != nil {
		return Result{}, err
	}
	defer stopIn()
	res := C.kis_result_new()
	defer C.kis_result_free(res)
	var cerr *C.struct_kis_error
	if C.kis_session_exec_capture(s.e.root, cid, args.arr, C.bool(shell), in, sig, res, &cerr) < 0 {
		return Result{}, takeError(cerr)
	}
	r, err := takeResult(res)
	if err == nil && ctx.Err() != nil && r.Termination.Reason == ReasonSignaled {
		// the exec was ended by the SIGKILL ctx sent: say why
		r.Termination.Reason = ReasonCancelled
	}
	return r, err
}

// Exec runs argv in the session; cancelling ctx sends it SIGKILL.
func (s *Session) Exec(ctx context.Context, argv []string, stdin io.Reader) (Result, error) {
	return s.exec(ctx, argv, false, stdin)
}

// Shell runs a shell line; its cwd and exported variables carry over.
func (s *Session) Shell(ctx context.Context, line string) (Result, error) {
	return s.exec(ctx, []string{line}, true, nil)
}

// Destroy ends every process of the session. Idempotent.
func (s *Session) Destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return nil
	}
	cid := C.CString(s.ID)
	defer C.free(unsafe.Pointer(cid))
	var cerr *C.struct_kis_error
	if C.kis_session_destroy(s.e.root, cid, &cerr) < 0 {
		return takeError(cerr)
	}
	s.destroyed = true
	return nil
}
