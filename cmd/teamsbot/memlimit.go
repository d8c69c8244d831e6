package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A container's memory limit is the kernel's: past it the process is
// killed, whatever Go's collector would have freed. Go's collector knows
// nothing of it unless GOMEMLIMIT says so, and with the service's GOGC of
// 200 the heap may grow to three times what is live before a collection.
// So, unless GOMEMLIMIT is set, the service takes a soft memory limit of
// nine tenths of its cgroup's (cgroup v2's memory.max, or v1's
// memory.limit_in_bytes), leaving the rest to what is not Go's heap.

// cgroupFiles are the memory limit files, relative to the cgroup file
// system's root as a container sees it (its own cgroup at the root).
var cgroupFiles = []string{"memory.max", "memory/memory.limit_in_bytes"}

// ownCgroup is the process's cgroup v2 path in selfCgroup (the text of
// /proc/self/cgroup, whose v2 line is "0::/path"): a service of systemd
// with MemoryMax= runs in a cgroup below the root, and sees the whole
// tree.
func ownCgroup(selfCgroup string) string {
	for line := range strings.Lines(selfCgroup) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok && p != "/" && !strings.Contains(p, "..") {
			return p
		}
	}
	return ""
}

// noLimitAbove is where a cgroup v1 limit means none: the kernel reports
// "no limit" as the largest page-aligned int64.
const noLimitAbove = 1 << 60

// containerMemoryLimit reads the memory limit of the process's cgroup
// under root (/sys/fs/cgroup; own is its path there, from ownCgroup, or
// empty) and the file it came from; zero when there is none.
func containerMemoryLimit(root, own string) (int64, string, error) {
	var files []string
	if own != "" {
		files = append(files, filepath.Join(root, own, "memory.max"))
	}
	for _, name := range cgroupFiles {
		files = append(files, filepath.Join(root, name))
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, p, fmt.Errorf("reading the container's memory limit: %w", err)
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, p, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, p, fmt.Errorf("the container's memory limit in %s is %q, not a number of bytes", p, s)
		}
		if n >= noLimitAbove {
			return 0, p, nil
		}
		return n, p, nil
	}
	return 0, "", nil
}

// softMemoryLimit is the soft limit the service sets for a container's
// limit of n bytes.
func softMemoryLimit(n int64) int64 { return n / 10 * 9 }
