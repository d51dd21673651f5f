// SPDX-License-Identifier: MIT

// kis-bench-runs: runs per second of a command through the Go binding,
// G goroutines for S seconds, for bench/bindings.sh. Prints
// "RUNS_PER_S RUNS FAILED".
// Usage: kis-bench-runs GOROUTINES SECONDS STORE BACKEND CMD...
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"kis.sandbox/go/sandbox"
)

func main() {
	if len(os.Args) < 6 {
		fmt.Fprintln(os.Stderr, "usage: kis-bench-runs GOROUTINES SECONDS STORE BACKEND CMD...")
		os.Exit(2)
	}
	n, _ := strconv.Atoi(os.Args[1])
	secs, _ := strconv.ParseFloat(os.Args[2], 64)
	eng, err := sandbox.Open(sandbox.Options{StoreRoot: os.Args[3]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	prof := sandbox.Profile{Backend: os.Args[4]}
	argv := os.Args[5:]
	var runs, failed int64
	start := time.Now()
	end := start.Add(time.Duration(secs * float64(time.Second)))
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				r, err := eng.Run(context.Background(), prof, argv)
				if err != nil || r.ExitCode != 0 {
					atomic.AddInt64(&failed, 1)
				} else {
					atomic.AddInt64(&runs, 1)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	fmt.Printf("%.1f %d %d\n", float64(runs)/el, runs, failed)
}
