// Package deploy is how teamsbot is shipped: the container image, built by
// deploy/image.sh (podman or buildah, offline) or from the repository's
// Containerfile (Docker), over the file system deploy/rootfs.sh makes. Its
// fixed facts (the user, the volume, the ports, the command) are in one
// file, deploy/image.env, which Image reads for the tests that hold the
// image, and whatever runs it, to them.
package deploy

import (
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

//go:embed image.env
var imageEnv string

// Image is the container image's fixed facts, as deploy/image.env states
// them.
type Image struct {
	// User is the name of the image's one user; UID and GID its ids, with
	// which the image runs.
	User     string
	UID, GID int
	// Data is the volume's path, where TICKETIQ_DATA points.
	Data string
	// Port is TICKETIQ_ADDR's port, MetricsPort TICKETIQ_METRICS_ADDR's.
	Port, MetricsPort int
	// Entrypoint is the program's path, Cmd its default argument.
	Entrypoint, Cmd string
}

// ImageFacts reads deploy/image.env.
func ImageFacts() (Image, error) {
	vars := map[string]string{}
	for n, line := range strings.Split(imageEnv, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(value, " \t'\"$") {
			return Image{}, fmt.Errorf("deploy/image.env:%d: want NAME=value, a plain value: %q", n+1, line)
		}
		vars[name] = value
	}
	var img Image
	var errs []string
	text := func(name string, into *string) {
		if *into = vars[name]; *into == "" {
			errs = append(errs, name+" is not set")
		}
		delete(vars, name)
	}
	number := func(name string, into *int) {
		n, err := strconv.Atoi(vars[name])
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Sprintf("%s=%q is not a positive number", name, vars[name]))
		}
		*into = n
		delete(vars, name)
	}
	text("IMAGE_USER", &img.User)
	number("IMAGE_UID", &img.UID)
	number("IMAGE_GID", &img.GID)
	text("IMAGE_DATA", &img.Data)
	number("IMAGE_PORT", &img.Port)
	number("IMAGE_METRICS_PORT", &img.MetricsPort)
	text("IMAGE_ENTRYPOINT", &img.Entrypoint)
	text("IMAGE_CMD", &img.Cmd)
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		errs = append(errs, name+" is no fact of the image")
	}
	if len(errs) > 0 {
		return Image{}, fmt.Errorf("deploy/image.env: %s", strings.Join(errs, "; "))
	}
	return img, nil
}

// Env is the settings the image sets: the two listeners on all addresses
// and the data folder on the volume.
func (img Image) Env() map[string]string {
	return map[string]string{
		"TICKETIQ_ADDR":         fmt.Sprintf(":%d", img.Port),
		"TICKETIQ_METRICS_ADDR": fmt.Sprintf(":%d", img.MetricsPort),
		"TICKETIQ_DATA":         img.Data,
	}
}
