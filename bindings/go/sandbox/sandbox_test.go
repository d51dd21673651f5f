// SPDX-License-Identifier: MIT

// The Go binding (issue 45) on the landlock backend: runs, errors.Is,
// context cancellation, goroutines, sessions, workspaces, and a caller
// killed mid-run. Run by `make check-go` (KIS_BUILD names the build dir).
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const childEnv = "KIS_GO_TEST_CHILD_STORE"
const marker = "27.1828"

func TestMain(m *testing.M) {
	// the child of TestKilledCallerLeavesNoSandbox: a run of sleep that
	// the parent SIGKILLs
	if st := os.Getenv(childEnv); st != "" {
		e, _ := Open(Options{StoreRoot: st})
		e.Run(context.Background(), landlock(), []string{"sleep", marker})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func buildDir() string {
	if b := os.Getenv("KIS_BUILD"); b != "" {
		return b
	}
	abs, _ := filepath.Abs("../../../build")
	return abs
}

func landlock() Profile {
	return Profile{Tier: "host", Backend: "landlock", Limits: &Limits{WallMs: 60000}}
}

// newEngine is an Engine over a store of its own, under a directory others
// may search (the host tier runs commands as an unprivileged user), or a
// skip when landlock is not here.
func newEngine(t *testing.T) (*Engine, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (the host tier's cgroups and overlay clones)")
	}
	top, err := os.MkdirTemp("/tmp", "kis-go-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(top, 0o711)
	root := filepath.Join(top, "store")
	e, err := Open(Options{StoreRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		exec.Command(filepath.Join(buildDir(), "kis"), "sandbox", "gc", "--store-root", root).Run()
		exec.Command("umount", "-R", "-l", root).Run()
		os.RemoveAll(top)
	})
	bs, err := e.Backends()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Backend == "landlock" {
			if !b.Available {
				t.Skipf("landlock is absent here: %s", b.WhyAbsent)
			}
			return e, root
		}
	}
	t.Skip("landlock is not in this build")
	return nil, ""
}

func TestRunReturnsBytesAndExitCode(t *testing.T) {
	e, _ := newEngine(t)
	r, err := e.Run(context.Background(), landlock(),
		[]string{"sh", "-c", "printf 'a\\0b'; echo oops >&2; cat; exit 3"},
		RunOptions{Stdin: strings.NewReader("in\x00put")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Termination.Reason != ReasonExited || r.ExitCode != 3 || *r.Termination.ExitCode != 3 {
		t.Fatalf("termination %+v exit %d", r.Termination, r.ExitCode)
	}
	if !bytes.Equal(r.Stdout, []byte("a\x00bin\x00put")) || string(r.Stderr) != "oops\n" {
		t.Fatalf("stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	if r.Backend != "landlock" || r.Usage.WallMs == 0 {
		t.Fatalf("backend %q usage %+v", r.Backend, r.Usage)
	}
}

func TestErrorsAreComparableWithErrorsIs(t *testing.T) {
	e, _ := newEngine(t)
	cases := []struct {
		p    Profile
		want error
	}{
		{Profile{Tier: "process"}, ErrEscapeHatchForbidden},
		{Profile{Backend: "no-such-backend"}, ErrTierUnavailable},
		{Profile{Backend: "landlock", Network: &Network{Mode: "egress"}}, ErrProfileUnsatisfiable},
		{Profile{Tier: "bogus"}, ErrInvalidProfile},
		{Profile{Extra: []byte(`{"no_such_field": 1}`)}, ErrInvalidProfile},
	}
	for _, c := range cases {
		_, err := e.Run(context.Background(), c.p, []string{"true"})
		if !errors.Is(err, c.want) {
			t.Errorf("%+v: got %v, want %v", c.p, err, c.want)
		}
		var ke *Error
		if !errors.As(err, &ke) || ke.Code != c.want.Error() || ke.Message == "" {
			t.Errorf("%+v: %#v is no *Error of code %v", c.p, err, c.want)
		}
	}
}

func TestContextCancelsTheRun(t *testing.T) {
	e, _ := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	r, err := e.Run(ctx, landlock(), []string{"sleep", "20"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Termination.Reason != ReasonCancelled {
		t.Fatalf("reason %q, want cancelled", r.Termination.Reason)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("the run went on for %v after its context ended", time.Since(start))
	}
}

func TestARunDoesNotBlockTheScheduler(t *testing.T) {
	e, _ := newEngine(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var ticks int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				atomic.AddInt64(&ticks, 1)
				time.Sleep(time.Millisecond)
			}
		}
	}()
	_, err := e.Run(context.Background(), landlock(), []string{"sleep", "1"})
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if n := atomic.LoadInt64(&ticks); n < 100 {
		t.Fatalf("only %d ticks of another goroutine during a 1 s run on one P", n)
	}
}

func TestEightGoroutinesAtOnce(t *testing.T) {
	e, _ := newEngine(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				want := fmt.Sprintf("%d-%d\n", i, j)
				r, err := e.Run(context.Background(), landlock(),
					[]string{"sh", "-c", "echo " + strings.TrimSpace(want)})
				if err != nil {
					errs <- err
					return
				}
				if string(r.Stdout) != want {
					errs <- fmt.Errorf("got %q, want %q", r.Stdout, want)
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSessionExecShellAndIdempotentDestroy(t *testing.T) {
	e, root := newEngine(t)
	s, err := e.NewSession(landlock())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	ctx := context.Background()
	if r, err := s.Shell(ctx, "cd /tmp && export GREETING=hi"); err != nil || r.ExitCode != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	r, err := s.Shell(ctx, "echo $GREETING from $PWD")
	if err != nil || string(r.Stdout) != "hi from /tmp\n" {
		t.Fatalf("%v %q", err, r.Stdout)
	}
	r, err = s.Exec(ctx, []string{"cat"}, strings.NewReader("abc"))
	if err != nil || string(r.Stdout) != "abc" {
		t.Fatalf("%v %q", err, r.Stdout)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	r, err = s.Exec(cctx, []string{"sleep", "20"}, nil)
	if err != nil || r.Termination.Reason != ReasonCancelled {
		t.Fatalf("%v %+v", err, r.Termination)
	}
	if err := s.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := s.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "sessions", s.ID)); !os.IsNotExist(err) {
		t.Fatalf("session directory left: %v", err)
	}
}

func TestCloneRunAndIdempotentDestroy(t *testing.T) {
	e, _ := newEngine(t)
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "f.txt"), []byte("hello\n"), 0o644)
	b, err := e.ImportBase(src)
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Clone("")
	if err != nil {
		t.Fatal(err)
	}
	p := landlock()
	p.Workspace = w.ID
	r, err := e.Run(context.Background(), p, []string{"sh", "-c", "cat f.txt; echo new > g.txt"})
	if err != nil || string(r.Stdout) != "hello\n" {
		t.Fatalf("%v %q", err, r.Stdout)
	}
	path, err := w.Path()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(path, "g.txt")); string(got) != "new\n" {
		t.Fatalf("g.txt: %q", got)
	}
	if _, err := e.Clone(b.ID, w.ID); !errors.Is(err, ErrDestinationExists) {
		t.Fatalf("clone onto %s: %v", w.ID, err)
	}
	if err := w.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := w.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Clone(""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("clone of a removed base: %v", err)
	}
}

func procsWith(m string) []string {
	var hits []string
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		if c, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); err == nil &&
			bytes.Contains(c, []byte(m)) && d.Name() != fmt.Sprint(os.Getpid()) {
			hits = append(hits, d.Name())
		}
	}
	return hits
}

func cgroupsNamed(name string) []string {
	var hits []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == name {
			hits = append(hits, p)
		}
		return nil
	})
	return hits
}

// The Go process SIGKILLed during a run of sleep leaves nothing after the
// next store open (here `kis sandbox gc`): no process, cgroup or owner.
func TestKilledCallerLeavesNoSandbox(t *testing.T) {
	_, root := newEngine(t)
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+root)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var owner string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		own, _ := filepath.Glob(filepath.Join(root, "owners", "s-*"))
		if len(own) > 0 && len(procsWith("sleep\x00"+marker)) > 0 {
			owner = filepath.Base(own[0])
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if owner == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the run never started")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	out, err := exec.Command(filepath.Join(buildDir(), "kis"), "sandbox", "gc", "--store-root", root,
		"--json").CombinedOutput()
	if err != nil {
		t.Fatalf("gc: %v: %s", err, out)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) &&
		len(procsWith("sleep\x00"+marker)) > 0; {
		time.Sleep(50 * time.Millisecond)
	}
	if p := procsWith("sleep\x00" + marker); len(p) > 0 {
		t.Errorf("processes left: %v", p)
	}
	if g := cgroupsNamed(owner); len(g) > 0 {
		t.Errorf("cgroups left: %v", g)
	}
	if _, err := os.Stat(filepath.Join(root, "owners", owner)); !os.IsNotExist(err) {
		t.Errorf("owner %s left: %v", owner, err)
	}
}

// The README's example, unchanged, in a module of its own that takes this
// one from the tree (a replace directive, as a user of the tree would).
func TestReadmeExampleFromTheTree(t *testing.T) {
	_, root := newEngine(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(string(readme), "```go\n", 2)
	if len(parts) < 2 {
		t.Fatal("README.md has no go example")
	}
	code := strings.SplitN(parts[1], "```", 2)[0]
	mod := t.TempDir()
	tree, _ := filepath.Abs("..")
	os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example\n\ngo 1.19\n\n"+
		"require kis.sandbox/go v0.0.0\n\nreplace kis.sandbox/go => "+tree+"\n"), 0o644)
	os.WriteFile(filepath.Join(mod, "main.go"), []byte(code), 0o644)
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "KIS_SANDBOX_ROOT="+root, "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "hello") {
		t.Fatalf("output: %s", out)
	}
}
