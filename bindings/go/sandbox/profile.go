// SPDX-License-Identifier: MIT

package sandbox

import "encoding/json"

// Profile mirrors the engine's JSON profile; zero fields are left out and
// keep the engine's value (deny-all: no network, no escape hatch, default
// limits). The engine validates it (ErrInvalidProfile names the JSON path).
type Profile struct {
	Tier        string            `json:"tier,omitempty"`
	Backend     string            `json:"backend,omitempty"`
	Base        string            `json:"base,omitempty"`
	Workspace   string            `json:"workspace,omitempty"`
	Keep        bool              `json:"keep,omitempty"`
	Root        string            `json:"root,omitempty"`
	Network     *Network          `json:"network,omitempty"`
	Limits      *Limits           `json:"limits,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	Mounts      []Mount           `json:"mounts,omitempty"`
	TTY         *TTY              `json:"tty,omitempty"`
	EscapeHatch *EscapeHatch      `json:"escape_hatch,omitempty"`
	Microvm     *Microvm          `json:"microvm,omitempty"`
	Wasm        *Wasm             `json:"wasm,omitempty"`
	// Extra fields merged as they are (a newer engine's, or a profile
	// file's JSON); the engine rejects an unknown one.
	Extra json.RawMessage `json:"-"`
}

// Network is network: mode "off", "loopback", "egress" or "host"; Allow,
// the egress destinations ("203.0.113.0/24:443").
type Network struct {
	Mode  string   `json:"mode,omitempty"`
	Allow []string `json:"allow,omitempty"`
}

// Limits are the profile's limits; 0 keeps the engine's default.
type Limits struct {
	WallMs      uint64 `json:"wall_ms,omitempty"`
	CPUMs       uint64 `json:"cpu_ms,omitempty"`
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	Pids        uint64 `json:"pids,omitempty"`
	OutputBytes uint64 `json:"output_bytes,omitempty"`
	FileBytes   uint64 `json:"file_bytes,omitempty"`
	OpenFiles   uint64 `json:"open_files,omitempty"`
	DiskBytes   uint64 `json:"disk_bytes,omitempty"`
}

// Mount places a base or workspace id at Target inside the sandbox.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// TTY is a terminal inside the sandbox and its first size.
type TTY struct {
	Enabled bool `json:"enabled,omitempty"`
	Rows    int  `json:"rows,omitempty"`
	Cols    int  `json:"cols,omitempty"`
}

// EscapeHatch names what weakens confinement; each must be asked for.
type EscapeHatch struct {
	AllowProcessTier bool `json:"allow_process_tier,omitempty"`
	AllowNetHost     bool `json:"allow_net_host,omitempty"`
}

// Microvm: Accel "auto", "kvm" or "tcg"; VCPUs 1..64.
type Microvm struct {
	Accel string `json:"accel,omitempty"`
	VCPUs int    `json:"vcpus,omitempty"`
}

// Wasm: Engine "auto", "interpreter" or "compiler"; Preopen "workspace" or "none".
type Wasm struct {
	Engine  string `json:"engine,omitempty"`
	Preopen string `json:"preopen,omitempty"`
}
