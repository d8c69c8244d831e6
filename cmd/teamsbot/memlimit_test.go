package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The container's limit is read from cgroup v2's memory.max, else from
// v1's memory.limit_in_bytes; "max", v1's huge "no limit" and no file at
// all mean none, and anything else than a number of bytes is an error.
func TestContainerMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name    string
		files   map[string]string
		want    int64
		wantErr bool
	}{
		{"v2 limit", map[string]string{"memory.max": "536870912\n"}, 512 << 20, false},
		{"v2 no limit", map[string]string{"memory.max": "max\n"}, 0, false},
		{"v1 limit", map[string]string{"memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30, false},
		{"v1 no limit", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		{"v2 before v1", map[string]string{"memory.max": "268435456", "memory/memory.limit_in_bytes": "1073741824"}, 256 << 20, false},
		{"no cgroup files", nil, 0, false},
		{"own cgroup first", map[string]string{"system.slice/teamsbot.service/memory.max": "402653184", "memory.max": "max"}, 384 << 20, false},
		{"garbage", map[string]string{"memory.max": "lots"}, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range c.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, _, err := containerMemoryLimit(root, ownCgroup("12:cpu:/x\n0::/system.slice/teamsbot.service\n"))
			if (err != nil) != c.wantErr || got != c.want {
				t.Errorf("containerMemoryLimit = %d, %v; want %d (error %v)", got, err, c.want, c.wantErr)
			}
		})
	}
	if got := ownCgroup("0::/\n"); got != "" {
		t.Errorf("ownCgroup of the root = %q, want none", got)
	}
	if got := softMemoryLimit(512 << 20); got < 460<<20 || got > 461<<20 {
		t.Errorf("soft limit of a 512 MiB container: %d bytes, want nine tenths", got)
	}
}
